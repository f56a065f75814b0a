"""A physical floor under every device timing (issue 34, engine/device_floor.py): a ``time`` reply read
by ``WorkerClient`` (local, ssh, and the worker inside each Ray actor: every command's device
timings) whose device median is below the task's outputs written once at the chip's peak HBM
bandwidth is marked implausible with the floor named, and its speedup dropped. The fake device is a
real worker process whose ``time`` op answers a v6e timing 10x below the floor
(tests/data/device_floor/fake_device_worker.py)."""

from __future__ import annotations

import sys
from pathlib import Path

from pallasite.analysis.types import Measurement, Provenance
from pallasite.engine import device_floor
from pallasite.engine.client import WorkerConfig, run_requests_sync
from pallasite.engine.timing import TaskFiles, time_request

FAKE = Path(__file__).parent / "data" / "device_floor" / "fake_device_worker.py"
KERNEL = Path(__file__).parent / "data" / "timing" / "ladder" / "rmsnorm" / "optimized.py"


def test_a_device_timing_ten_times_below_the_roofline_is_rejected_with_the_floor_named():
    config = WorkerConfig(command=("env",), remote_worker=(sys.executable, str(FAKE)), platforms="cpu", timeout_s=120)
    [reply] = run_requests_sync(config, [time_request(TaskFiles(str(KERNEL)), "time", runs=3, warmup=1)])
    assert reply.ok, reply.message
    cand, ref = reply.result.candidate, reply.result.reference
    assert cand.status == "implausible" and cand.median_ns is None
    assert "below the physical floor of 20.460 us" in cand.error
    assert "32.00 MiB of outputs written once at TPU v6 lite's peak HBM bandwidth 1640 GB/s" in cand.error
    assert ref.status == "ok" and ref.median_ns > 0  # 10x above the floor: kept
    assert reply.result.speedup is None  # never divided from an implausible timing


def test_no_floor_without_outputs_an_unknown_chip_or_off_device():
    m = Measurement("ok", Provenance.DEVICE, "TPU v6 lite", "x", (1.0,), 1.0)
    assert device_floor.implausible(m, {"outputs": [[[4096, 4096], "bfloat16"]]})
    assert device_floor.implausible(m, {}) is None
    assert device_floor.implausible(Measurement("ok", Provenance.DEVICE, "some gpu", "x", (1.0,), 1.0),
                                    {"outputs": [[[4096, 4096], "bfloat16"]]}) is None
    assert device_floor.implausible(Measurement("ok", Provenance.INTERPRET, "cpu", "x", (1.0,), 1.0),
                                    {"outputs": [[[4096, 4096], "bfloat16"]]}) is None
