"""The engine owns the device (engine/workers/device.py): one open, queued device worker per run, shared by
the test, profile and tune phases (before issue 23 each phase started a worker of its own)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from pallasite.engine.workers.backend import Reply
from pallasite.engine.checker import CheckOptions
from pallasite.engine.engine import Engine
from pallasite.engine.workers.remote import BackendSettings
from pallasite.engine.tuning.judge_tune import device_profile

ADD = (Path(__file__).parent / "data" / "optimize" / "add.py").read_text()


class CountingBackend:
    def __init__(self, log: list) -> None:
        self.log, self.active, self.max_active = log, 0, 0

    async def request(self, params, *, purpose="device", timeout_s=None, on_progress=None):
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        await asyncio.sleep(0.01)
        self.active -= 1
        self.log.append(type(params).OP)
        return Reply("error", message="a fake device: no timing")

    async def close(self):
        self.log.append("closed")


def test_one_device_worker_serves_every_phase_of_a_run(tmp_path):
    from judging import file_evaluator

    opened, log = [], []

    def opener(settings, base):
        backend = CountingBackend(log)
        opened.append(backend)
        return backend

    async def go():
        engine = Engine(use_store=False)
        engine.device_opener = opener
        settings = BackendSettings(kind="ssh", host="tpu-vm")
        ev = file_evaluator(engine, str(tmp_path / "add.py"), ADD, CheckOptions(tiers=(0,)), device=settings)
        results = await asyncio.gather(ev.test(ADD), ev.measure(ADD), ev.test(ADD))
        profile = await device_profile(ev.judge, ADD)
        again = ev.judge.device_backend()
        assert again is next(iter(engine._devices.values())) and again.requests == 2
        await engine.close()
        return results, profile

    results, profile = asyncio.run(go())
    assert len(opened) == 1 and opened[0].max_active == 1  # one worker, one request at a time
    # the judge's memo by candidate text: the test and the measure of one text share one device job
    assert log.count("time") == 1 and log.count("profile") == 1 and log[-1] == "closed"
    assert not results[0].ok and results[1].summary == "not timed" and "no timing" in results[1].evidence
    assert profile.startswith("device profile not taken")
