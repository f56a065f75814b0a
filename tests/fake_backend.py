"""A backend for tests: the real pool scheduling (engine/workers/pool.py) over in-process fake workers.

Each request asks a *script* what to do: ``script(params, purpose) -> FakeStep`` (how long to take,
what progress to report, and whether to answer with a result, fail with an error, or crash). No
process starts and no kernel runs, so tests of scheduling, cancellation, crashes and jobs take
milliseconds (or the seconds they ask for) and say exactly what they exercise.

    backend = fake_backend(lambda params, purpose: FakeStep(delay_s=30) if purpose == "job" else FakeStep())
    reply = await backend.request(PingParams())
"""

from __future__ import annotations

import asyncio
import itertools
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pallasite.wire import messages, protocol

from pallasite.engine.workers.backend import ProgressCallback, Reply, call_progress
from pallasite.engine.workers.pool import PoolBackend

_pids = itertools.count(100_000)


@dataclass(frozen=True)
class FakeStep:
    """What a fake worker does with one request."""

    delay_s: float = 0.0
    result: Any = None  # the typed result, or a callable(params) -> result; None: a default for the op
    error: messages.ErrorInfo | None = None  # answer "error" with this
    crash: bool = False  # die after the delay: "crashed" (the worker restarts for the next request)
    progress: tuple[messages.Progress, ...] = ()  # reported before the delay


FakeScript = Callable[[Any, str], FakeStep]


def default_result(params: Any) -> Any:
    """A plausible ok result for any op (every tier asked for passes; one entry named ``kernel``)."""
    if isinstance(params, messages.PingParams):
        return messages.PingResult(pong=True, pid=os.getpid())
    if isinstance(params, messages.VersionsParams):
        return messages.Versions(python="fake", platform="cpu", devices=("cpu",))
    if isinstance(params, messages.ChipsParams):
        return messages.ChipsResult(chips=())
    if isinstance(params, messages.ImportParams):
        return messages.ImportResult(module="fake", path=params.source.path)
    if isinstance(params, messages.CheckParams):
        outcomes = tuple(messages.TierOutcome(t, messages.TierState.OK) for t in params.tiers)
        return messages.CheckResult(chip=params.chip, tiers=tuple(params.tiers), tasks_found=1,
                                    entries=(messages.CheckEntry(name="kernel", tiers=outcomes),))
    if isinstance(params, (messages.TimeParams, messages.ProfileParams)):
        return messages.TimeResult(verdict="ok", entry=params.entry or "kernel", path=params.source.path,
                                   config=dict(params.config))
    raise TypeError(f"no default result for {type(params).__name__}")


@dataclass
class FakeWorker:
    """One in-process worker following ``script``; counts what happened to it."""

    script: FakeScript
    purpose: str
    handshake: Any = None
    starts: int = 0
    served: int = 0
    crashes: int = 0
    cancelled: int = 0
    running: bool = False
    log: list[str] = field(default_factory=list)

    async def start(self) -> protocol.Handshake:
        if self.handshake is None:
            self.starts += 1
            self.handshake = protocol.Handshake(protocol=protocol.PROTOCOL_VERSION, pid=next(_pids), python="fake",
                                                platform="cpu", devices=("cpu",), ops=tuple(sorted(messages.PARAMS)))
        return self.handshake

    async def request(self, params: Any, *, purpose: str = "check", timeout_s: float | None = None,
                      on_progress: ProgressCallback | None = None) -> Reply:
        await self.start()
        step = self.script(params, purpose)
        started = time.monotonic()
        self.running = True
        self.log.append(f"{type(params).OP} for {purpose}")
        try:
            for report in step.progress:
                await call_progress(on_progress, report)
            try:
                await asyncio.wait_for(asyncio.sleep(step.delay_s), timeout_s)
            except asyncio.TimeoutError:
                return Reply("timed_out", message=f"the request ran past its limit of {timeout_s:g} s and was stopped",
                             elapsed_s=time.monotonic() - started, limit_s=timeout_s)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        finally:
            self.running = False
        elapsed = time.monotonic() - started
        if step.crash:
            self.crashes += 1
            self.handshake = None  # restarted on the next request
            return Reply("crashed", message="the worker was killed by SIGKILL (9) while running the request; "
                         "it will be restarted", elapsed_s=elapsed, exit_code=-9, stderr_tail="(fake worker)")
        if step.error is not None:
            return Reply("error", error=step.error, message=f"{step.error.type}: {step.error.message}", elapsed_s=elapsed)
        self.served += 1
        result = step.result(params) if callable(step.result) else step.result
        return Reply("ok", result=result if result is not None else default_result(params), elapsed_s=elapsed)

    async def close(self) -> None:
        self.handshake = None


def fake_backend(script: FakeScript | None = None, sizes: Mapping[str, int] | None = None) -> PoolBackend:
    """A pool of fake workers (default lanes: one check, one job, one device worker)."""
    script = script or (lambda params, purpose: FakeStep())
    return PoolBackend(lambda purpose: FakeWorker(script, purpose), sizes, kind="fake", host="in-process")
