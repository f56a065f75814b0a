"""A fake device for the floor test: a real ``pallasite worker`` whose ``time`` op answers, without
running anything, as a v6e device would for a kernel writing one bfloat16[4096, 4096] output: the
reference at 10x the physical floor (32 MiB at 1640 GB/s = 20.5 us), the candidate at a tenth of it."""

import sys

from pallasite.analysis.types import Measurement, Provenance, to_json
from pallasite.runner import worker
from pallasite.runner.judging import judge

FLOOR_NS = 4096 * 4096 * 2 / 1.64e12 * 1e9


def fake_time(params, progress=None, judging=None):
    def measured(median):
        return to_json(Measurement("ok", Provenance.DEVICE, "TPU v6 lite", "fake device", (median,) * 3, median))

    return {"entry": "workload", "path": params.get("path"), "format": "jaxbench", "config": {}, "verdict": "ok",
            "rejections": [], "flags": [], "device": {"platform": "tpu", "device_kind": "TPU v6 lite"},
            "checks": {"inputs": [[[4096, 4096], "bfloat16"]], "outputs": [[[4096, 4096], "bfloat16"]]},
            "provenance": "device", "versions": {}, "candidate": measured(FLOOR_NS / 10),
            "reference": measured(FLOOR_NS * 10), "speedup": {"value": 100.0, "baseline": "fake"},
            "spread": None, "trace": None, "notes": []}


judge.judged_time = fake_time
sys.exit(worker.main(sys.argv[1:]))
