"""Fake device workers for pool tests (engine/workers/device_pool.py): in-process, with a device kind.

``FakeDevice(kind, answer)`` handshakes as a worker whose devices are ``(kind,)`` and answers each
request with ``await answer(device, params)`` (a ``Reply``); it counts what it ran and how many ran
at once across all fakes sharing one ``Gauge``. ``ok_after(delay)`` answers ``ok`` with the params
echoed (a ``PingResult``-like record naming the device) after ``delay`` seconds.
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

from pallasite.engine.workers.backend import Reply
from pallasite.wire import protocol

_pids = itertools.count(200_000)


@dataclass
class Gauge:
    active: int = 0
    most: int = 0


@dataclass(frozen=True)
class Echo:
    params: Any
    device: str
    kind: str


class FakeDevice:
    def __init__(self, name: str, kind: str, answer: Callable[["FakeDevice", Any], Awaitable[Reply]],
                 gauge: Gauge | None = None, fail_start: str | None = None) -> None:
        self.name, self.kind, self.answer, self.gauge = name, kind, answer, gauge or Gauge()
        self.fail_start = fail_start
        self.handshake: Any = None
        self.ran: list[Any] = []
        self.starts = 0
        self.closed = False

    async def start(self) -> Any:
        if self.fail_start:
            raise ConnectionError(self.fail_start)
        if self.handshake is None:
            self.starts += 1
            self.handshake = protocol.Handshake(protocol=protocol.PROTOCOL_VERSION, pid=next(_pids), jax="0.0-fake",
                                                platform="tpu", devices=(self.kind,))
        return self.handshake

    async def request(self, params: Any, *, purpose: str = "device", timeout_s: float | None = None,
                      on_progress: Any = None) -> Reply:
        await self.start()
        self.gauge.active += 1
        self.gauge.most = max(self.gauge.most, self.gauge.active)
        try:
            self.ran.append(params)
            return await self.answer(self, params)
        finally:
            self.gauge.active -= 1

    async def close(self) -> None:
        self.closed = True


def ok_after(delay_s: float = 0.0) -> Callable[[FakeDevice, Any], Awaitable[Reply]]:
    async def answer(device: FakeDevice, params: Any) -> Reply:
        await asyncio.sleep(delay_s)
        return Reply("ok", result=Echo(params, device.name, device.kind))

    return answer


@dataclass
class Crashes:
    """Crash the worker on the listed (device name, params) pairs once each; ok otherwise."""

    on: set = field(default_factory=set)
    delay_s: float = 0.0

    async def __call__(self, device: FakeDevice, params: Any) -> Reply:
        await asyncio.sleep(self.delay_s)
        if (device.name, params) in self.on or (device.name, "*") in self.on:
            self.on.discard((device.name, params))
            device.handshake = None  # its worker died: a new one starts for the next job
            return Reply("crashed", message="the worker was killed by SIGKILL (9) while running the request",
                         exit_code=-9)
        return Reply("ok", result=Echo(params, device.name, device.kind))
