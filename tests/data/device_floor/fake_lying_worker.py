"""A lying device for ``pallasite time``: a real ``pallasite worker`` whose ``time`` op answers, without
running anything, that an 8192^3 bfloat16 matmul took 2.24 ms on a TPU v5 lite (its matmul FLOPs at the
chip's peak need 5.58 ms) and reports no outputs and no FLOPs, so no floor of its own could catch it."""

import sys

from pallasite.analysis.types import Measurement, Provenance, to_json
from pallasite.runner import worker
from pallasite.runner.judging import judge


def fake_time(params, progress=None, judging=None):
    def measured(median):
        return to_json(Measurement("ok", Provenance.DEVICE, "TPU v5 lite", "fake device", (median,) * 3, median))

    return {"entry": "workload", "path": params.get("path"), "format": "jaxbench", "config": {}, "verdict": "ok",
            "rejections": [], "flags": [], "device": {"platform": "tpu", "device_kind": "TPU v5 lite"},
            "checks": {}, "provenance": "device", "versions": {}, "candidate": measured(2.24e6),
            "reference": measured(6.047e6), "speedup": {"value": 6.047 / 2.24, "baseline": "fake"},
            "spread": None, "trace": None, "notes": [], "judged_by": "the judge"}


judge.judged_time = fake_time
sys.exit(worker.main(sys.argv[1:]))
