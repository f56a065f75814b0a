"""Tune's device timings on a device pool (engine/tuning/tune_workers.worker_timer over engine/workers/device_pool.py): a
batch's configurations are timed at once on the pool's workers and come back in the batch's order,
each configuration's timing from one worker's reply."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from fake_devices import FakeDevice, Gauge
from pallasite.analysis.types import Measurement, Provenance
from pallasite.engine.workers.backend import Reply
from pallasite.engine.workers.device_pool import DevicePool, Member
from pallasite.engine.tuning.tune_workers import worker_timer
from pallasite.wire import messages

FILE = next((Path(__file__).parent / "data" / "tune").glob("*.py"))
KIND = "TPU v6 lite"


def test_a_batch_is_timed_at_once_on_the_pool_in_the_batchs_order():
    gauge = Gauge()

    async def answer(device, params):
        await asyncio.sleep(0.05 if params["block"] % 2 else 0.01)  # finish out of order
        median = 1000.0 * params["block"]
        m = Measurement("ok", Provenance.DEVICE, device.kind, "fake", (median,) * 3, median)
        return Reply("ok", result=messages.TimeResult(verdict="ok", candidate=m, provenance="device"))

    pool = DevicePool([Member(f"w{i}", f"fake:{i}", (lambda i=i: FakeDevice(f"w{i}", KIND, answer, gauge)))
                       for i in range(4)])
    timer = worker_timer(pool, dict, "v6e", timeout_s=60.0)  # each request stands for its configuration here

    async def go():
        try:
            return await timer([{"block": b} for b in range(1, 9)])
        finally:
            await pool.close()

    timed = asyncio.run(go())
    assert [t.measured.median_ns for t in timed] == [1000.0 * b for b in range(1, 9)]
    assert [t.device_s for t in timed] == pytest.approx([1e-6 * b for b in range(1, 9)])
    assert all(t.candidate.device_kind == KIND for t in timed)
    assert gauge.most == 4


def test_tune_eval_and_search_take_the_pool_flags(monkeypatch):
    from pallasite.engine.workers import remote

    monkeypatch.setattr(remote, "ray_installed", lambda: True)  # settings only: no Ray runs (README's command has no ray extra)
    import argparse

    from pallasite.server.commands import cmd_tune, flags
    from pallasite.server import run_request

    tune = argparse.ArgumentParser()
    cmd_tune.add_arguments(tune, "tune")
    args = tune.parse_args(["k.py", "--backend", "ray", "--ray-resources", "TPU=1", "--devices", "8",
                            "--ray-placement", "strict_spread"])
    settings = run_request.device_settings(args)
    assert (settings.kind, settings.devices, settings.ray_resources, settings.ray_placement) == \
        ("ray", 8, {"TPU": 1.0}, "strict_spread")
    search = argparse.ArgumentParser()
    flags.add_backend(search, "search")
    hosts = run_request.device_settings(search.parse_args(["--backend", "ssh", "--host", "a", "--host", "b"]))
    assert hosts.all_hosts == ("a", "b")


def test_search_takes_the_rate_limits():
    import argparse

    from pallasite.server.commands import cmd_search

    parser = argparse.ArgumentParser()
    cmd_search.add_arguments(parser, "search")
    args = parser.parse_args(["k.py", "--requests-per-minute", "60", "--tokens-per-minute", "1e6"])
    assert (args.requests_per_minute, args.tokens_per_minute) == (60.0, 1e6)
