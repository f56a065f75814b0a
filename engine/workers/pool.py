"""A pool of workers kept apart by purpose: the scheduling every process-per-worker backend shares.

``PoolBackend`` implements ``engine/workers/backend.py``'s ``Backend`` over *lanes*, one per purpose, each
with its own workers (started lazily, kept warm):

- ``check``: ``sizes["check"]`` workers for on-save checks and ``pallasite check DIR --jobs N``;
  they never run long jobs, so a check never waits behind one;
- ``job``: workers for long work (tier 3 on request, tuning batches, chip probes);
- ``device``: one worker that owns the accelerator (the user's ``JAX_PLATFORMS``); timings run
  on it one at a time. Check and job workers run JAX on CPU, so they never hold the chips.

A request waits for an idle worker of its lane; cancelling the waiting task frees the worker
(``WorkerClient`` cancels the op, kills a worker that does not stop, and restarts it later). A
worker that crashes answers its request "crashed" and is restarted for the next one; the others
keep running.

``local_backend(config, checks=N)`` builds the local pool of ``WorkerClient``s; an ssh backend is the
same pool with ``WorkerConfig.command = ("ssh", HOST)``; ``tests/fake_backend.py`` fills it with
in-process fake workers for tests.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import socket
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from .backend import PURPOSES, BackendInfo, ProgressCallback, Purpose, Reply
from .client import WorkerClient, WorkerConfig


class Worker(Protocol):
    """What a lane needs of a worker (``WorkerClient`` is one)."""

    handshake: Any

    async def start(self) -> Any: ...

    async def request(self, params: Any, *, purpose: str = "check", timeout_s: float | None = None,
                      on_progress: ProgressCallback | None = None) -> Reply: ...

    async def close(self) -> None: ...


class _Lane:
    def __init__(self, purpose: str, size: int, make: Callable[[str], Worker]) -> None:
        self.purpose = purpose
        self.size = size
        self.make = make
        self.workers: list[Worker] = []
        self.idle: asyncio.Queue[Worker] | None = None

    def _queue(self) -> asyncio.Queue[Worker]:
        if self.idle is None:
            self.idle = asyncio.Queue()
        return self.idle

    async def acquire(self) -> Worker:
        queue = self._queue()
        if queue.empty() and len(self.workers) < self.size:
            worker = self.make(self.purpose)
            self.workers.append(worker)
            return worker
        return await queue.get()

    def release(self, worker: Worker) -> None:
        self._queue().put_nowait(worker)

    @property
    def busy(self) -> int:
        return len(self.workers) - (self.idle.qsize() if self.idle is not None else 0)


class PoolBackend:
    """Workers by purpose (see the module docstring). ``make(purpose)`` builds one worker."""

    def __init__(self, make: Callable[[str], Worker], sizes: Mapping[str, int] | None = None, *,
                 kind: str = "local", host: str | None = None) -> None:
        sizes = {"check": 1, "job": 1, "device": 1, **dict(sizes or {})}
        for purpose, size in sizes.items():
            if purpose not in PURPOSES:
                raise ValueError(f"unknown purpose {purpose!r}; purposes are {', '.join(PURPOSES)}")
            if size < 0 or (purpose == "device" and size > 1):
                raise ValueError(f"lane {purpose!r}: size {size} (device: 0 or 1; others: 0 or more)")
        self.kind = kind
        self.host = host or socket.gethostname()
        self.lanes = {purpose: _Lane(purpose, int(size), make) for purpose, size in sizes.items()}
        self.closed = False

    # ------------------------------------------------------------------ Backend

    async def start(self) -> BackendInfo:
        """Start one check worker (and read its handshake), so ``describe`` can say what runs there."""
        lane = self.lanes["check"]
        worker = await lane.acquire()
        try:
            await worker.start()
        except Exception as exc:  # noqa: BLE001 - a worker that cannot start is described, not raised
            info = self.describe()
            return dataclasses.replace(info, problem=str(exc))
        finally:
            lane.release(worker)
        return self.describe()

    async def request(self, params: Any, *, purpose: Purpose = "check", timeout_s: float | None = None,
                      on_progress: ProgressCallback | None = None) -> Reply:
        if self.closed:
            return Reply("cancelled", message="the backend was closed")
        lane = self.lanes.get(purpose)
        if lane is None or lane.size == 0:
            return Reply("not_started", message=f"this {self.kind} backend has no {purpose!r} worker "
                         f"(lanes: {', '.join(p for p, l in self.lanes.items() if l.size)})", start_problem="not_found")
        worker = await lane.acquire()  # cancelling while waiting simply stops waiting
        if self.closed:  # closed while this request waited: do not restart a worker for it
            lane.release(worker)
            return Reply("cancelled", message="the backend was closed")
        try:
            return await worker.request(params, purpose=purpose, timeout_s=timeout_s, on_progress=on_progress)
        finally:
            lane.release(worker)

    def describe(self) -> BackendInfo:
        hello = next((w.handshake for lane in self.lanes.values() for w in lane.workers
                      if getattr(w, "handshake", None) is not None), None)
        versions = {}
        if hello is not None:
            versions = {name: getattr(hello, name, None) for name in ("python", "pallasite", "jax", "jaxlib", "libtpu")}
        return BackendInfo(kind=self.kind, host=self.host, workers=sum(lane.size for lane in self.lanes.values()),
                           devices=tuple(getattr(hello, "devices", ()) or ()), versions=versions,
                           protocol=getattr(hello, "protocol", None), problem=getattr(hello, "error", None))

    def grow(self, purpose: str, size: int) -> None:
        """Let a lane run up to ``size`` workers (never fewer than it has); new ones start with their first
        request (the keeper of warm workers grows its check lane when a run asks for more: engine/workers/warm_keeper.py)."""
        lane = self.lanes[purpose]
        lane.size = max(lane.size, int(size))

    async def replace_idle(self, purpose: str) -> int:
        """Replace the idle workers of a lane by fresh ones (started by their first request), so what those kept
        of their last requests goes back (tune's estimating worker after pricing the reference: libtpu, ~1 GiB;
        issue 44). Returns how many were replaced; a busy worker is left alone."""
        lane = self.lanes.get(purpose)
        if self.closed or lane is None or lane.idle is None:
            return 0
        old = []
        while not lane.idle.empty():
            old.append(lane.idle.get_nowait())
        for worker in old:
            fresh = lane.make(purpose)
            lane.workers[lane.workers.index(worker)] = fresh
            lane.idle.put_nowait(fresh)  # a request waiting for a worker gets this one
        await asyncio.gather(*(w.close() for w in old), return_exceptions=True)
        return len(old)

    async def close(self) -> None:
        self.closed = True
        workers = [w for lane in self.lanes.values() for w in lane.workers]
        await asyncio.gather(*(w.close() for w in workers), return_exceptions=True)

    # ------------------------------------------------------------------ state, for status lines and tests

    def busy(self, purpose: str) -> int:
        """How many workers of a lane are running a request now."""
        return self.lanes[purpose].busy

    def workers(self, purpose: str) -> list[Worker]:
        return list(self.lanes[purpose].workers)


def default_checks() -> int:
    """How many check workers ``pallasite check DIR`` runs by default: one per core, at most 4
    (each warm worker holds 0.5-1 GiB once libtpu has compiled a few kernels)."""
    return max(1, min(os.cpu_count() or 1, 4))


def local_backend(config: WorkerConfig | None = None, *, checks: int = 1, jobs: int = 1,
                  device: bool = False) -> PoolBackend:
    """The local pool: ``checks`` check workers, ``jobs`` job workers, and a device worker when
    ``device`` (it leaves JAX_PLATFORMS as the user has it, so JAX uses the accelerator)."""
    config = config or WorkerConfig()

    def make(purpose: str) -> WorkerClient:
        if purpose == "device":
            return WorkerClient(dataclasses.replace(config, platforms=None))
        return WorkerClient(config)

    launcher = config.command
    kind, host = ("command", " ".join(launcher)) if launcher else ("local", None)
    return PoolBackend(make, {"check": checks, "job": jobs, "device": 1 if device else 0}, kind=kind, host=host)
