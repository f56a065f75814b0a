"""A physical floor under every device timing (issue 34, engine/device_floor.py): a ``time`` reply read
by ``WorkerClient`` (local, ssh, and the worker inside each Ray actor: every command's device
timings) whose device median is below the task's outputs written once at the chip's peak HBM
bandwidth is marked implausible with the floor named, and its speedup dropped. The fake device is a
real worker process whose ``time`` op answers a v6e timing 10x below the floor
(tests/data/device_floor/fake_device_worker.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from pallasite.analysis.types import Measurement, Provenance
from pallasite.engine import device_floor
from pallasite.engine.workers.client import WorkerConfig, run_requests_sync
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


MATMUL = Path(__file__).parent / "data" / "device_floor" / "matmul_8192.py"
FAKE_V5E = Path(__file__).parent / "data" / "device_floor" / "fake_v5e_matmul_worker.py"


def test_a_device_timing_below_the_compute_floor_is_implausible_not_a_speedup():
    """Issue 42: a device reporting 2.24 ms for an 8192^3 bf16 matmul on v5e (its matmul FLOPs at the
    chip's 197 TFLOP/s need 5.58 ms) was taken as a 2.7x speedup; the bandwidth floor alone (outputs
    written once, 0.16 ms) let it through. Through the real client path, with the FLOPs counted by the
    real program checks in the worker."""
    config = WorkerConfig(command=("env",), remote_worker=(sys.executable, str(FAKE_V5E)), platforms="cpu",
                          timeout_s=180)
    [reply] = run_requests_sync(config, [time_request(TaskFiles(str(MATMUL)), "time", runs=3, warmup=1)])
    assert reply.ok, reply.message
    work = reply.result.checks["floor_work"]["mxu_flops"]
    assert work == {"bfloat16": 2 * 8192 ** 3}  # one dot per grid step x 8*8*8 steps, counted from the trace
    cand, ref = reply.result.candidate, reply.result.reference
    assert cand.status == "implausible" and cand.median_ns is None
    assert "below the physical floor of 5581.277 us" in cand.error
    assert "1099.5 GFLOP of matmuls" in cand.error and "197 TFLOP/s" in cand.error
    assert ref.status == "ok" and ref.median_ns == 6.047e6  # above every floor: kept
    assert reply.result.speedup is None


def test_the_compute_floor_counts_only_work_that_certainly_runs():
    """A dot inside pl.when (a branch values decide) sets no floor; an unconditional one does, x the grid."""
    import jax
    import jax.numpy as jnp

    from pallasite.runner.program.certain_work import certain_mxu_flops

    def f(x, y, flag):
        a = x @ y
        b = jax.lax.cond(flag, lambda: x @ y, lambda: jnp.zeros_like(x))
        return a + b

    args = (jax.ShapeDtypeStruct((256, 256), jnp.bfloat16),) * 2 + (jax.ShapeDtypeStruct((), bool),)
    assert certain_mxu_flops(jax.make_jaxpr(f)(*args).jaxpr) == {"bfloat16": 2 * 256 ** 3}
    m = Measurement("ok", Provenance.DEVICE, "TPU v5 lite", "x", (1e6,), 1e6)  # 1 ms
    checks = {"floor_work": {"mxu_flops": {"bfloat16": 2 * 8192 ** 3}}}
    assert "5581.277 us" in device_floor.implausible(m, checks)
    assert device_floor.implausible(m, checks, compute=False) is None  # the reference's: outputs floor only
    assert device_floor.implausible(m, {"floor_work": {"mxu_flops": {"int8": 2 * 8192 ** 3}}}) is not None
    assert device_floor.implausible_seconds(6e-3, checks, "TPU v5 lite") is None
    assert "estimate of" in device_floor.implausible_seconds(1e-3, checks, "TPU v5 lite", "estimate")


@pytest.mark.pipeline
def test_pallasite_time_holds_a_device_to_floors_traced_from_the_users_file_whatever_it_reports(tmp_path):
    """Issue 49: ``pallasite time`` believed the worker's FLOPs. A device worker claiming 2.24 ms for an 8192^3
    bf16 matmul on v5e and reporting no outputs or FLOPs of its own is held to the floors a local worker traces
    from the user's file (the compute floor: 5.58 ms): "implausible", no speedup."""
    import json
    import subprocess

    liar = Path(__file__).parent / "data" / "device_floor" / "fake_lying_worker.py"
    done = subprocess.run([sys.executable, "-m", "pallasite.server.cli", "time", str(MATMUL), "--backend", "ssh",
                           "--ssh-command", "sh -c {worker}", "--remote-worker", f"{sys.executable} {liar}",
                           "--platforms", "cpu", "--runs", "3", "--format", "json", "--no-store"],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    doc = json.loads(done.stdout)
    cand = doc["result"]["candidate"]
    assert cand["status"] == "implausible" and "below the physical floor of 5581.277 us" in cand["error"], cand
    assert doc["result"]["speedup"] is None and doc["status"] == "implausible" and done.returncode == 2
