"""The backend seam: how the engine reaches workers, whatever runs them.

A ``Backend`` starts its workers (and reads their handshakes), runs typed requests on them with
progress and cancellation, says what it is (``describe()``: host, devices, versions), and closes.
Every request ends in a ``Reply`` whose ``status`` says what happened — a failure is data, never an
exception and never a message to parse:

    ok          the op ran; ``result`` is its typed result (wire/messages.py)
    error       the op raised in the worker; ``error`` has its type, message and traceback
    not_started the worker could not be started (``start_problem`` says why; its environment, not the kernel;
                "unconfined": model-written code, and no confined worker can be made here)
    crashed     the worker died while running the request (``exit_code``, ``stderr_tail``)
    timed_out   the request ran past its time limit (``limit_s``)
    memory      the worker went over its memory limit (``memory_mb``)
    cancelled   the caller cancelled it

Requests name a *purpose* so a backend can keep them apart: ``check`` (on-save checks: short, never
queued behind a long job), ``job`` (long work: tier 3, tuning), ``device`` (timings that own the
accelerator: one at a time). Implementations: ``engine/workers/pool.py`` (a pool of warm local
workers), ``tests/fake_backend.py`` (in-process, scriptable, for tests). An ssh backend is the local
one with a launcher (``ssh HOST pallasite worker``); a Ray backend implements this interface too.

Cancelling: cancel the asyncio task awaiting ``request`` (the backend tells the worker, kills it
if it does not stop, and the task sees CancelledError).
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from ...wire.messages import ErrorInfo, Progress

Purpose = Literal["check", "job", "device"]
PURPOSES: tuple[str, ...] = ("check", "job", "device")
Status = Literal["ok", "error", "not_started", "crashed", "timed_out", "memory", "cancelled"]
StartProblem = Literal["not_found", "missing_module", "exited", "no_handshake", "version_mismatch", "unconfined"]
ProgressCallback = Callable[[Progress], "Awaitable[None] | None"]


@dataclass(frozen=True)
class Reply:
    """What became of one request. ``message`` is a sentence for people; decide on ``status`` and the fields."""

    status: Status
    result: Any = None  # the op's typed result (ok)
    error: ErrorInfo | None = None  # the op's exception (error); the OS error of an interpreter that cannot be run (not_started)
    message: str = ""
    elapsed_s: float = 0.0
    exit_code: int | None = None  # the worker's exit code; negative: killed by that signal
    stderr_tail: str = ""  # the worker's last stderr lines (crashes, kills, start-up failures)
    limit_s: float | None = None  # timed_out: the limit that applied
    memory_mb: int | None = None  # memory: the limit that applied
    start_problem: StartProblem | None = None  # not_started: why
    missing_module: str | None = None  # not_started / missing_module: which module the interpreter lacks
    launcher: tuple[str, ...] = ()  # not_started: the command prefix used (ssh ...), if any

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def why(self) -> str:
        """The failure in one line: the op's exception, else the message, else the status."""
        return f"{self.error.type}: {self.error.message}" if self.error else (self.message or self.status)


@dataclass(frozen=True)
class BackendInfo:
    """What a backend is: where its workers run and with what."""

    kind: str  # "local", "fake", "ssh", ...
    host: str
    workers: int  # how many workers it may run at once
    devices: tuple[str, ...] = ()  # device kinds of the worker's jax (e.g. ("cpu",) or ("TPU v6 lite", ...))
    versions: Mapping[str, str | None] = field(default_factory=dict)  # python, pallasite, jax, jaxlib, libtpu
    protocol: int | None = None
    problem: str | None = None  # a worker could not start or jax is unusable there


@runtime_checkable
class Backend(Protocol):
    """One way to reach workers. Safe to call ``request`` concurrently: the backend schedules."""

    async def start(self) -> BackendInfo:
        """Start (at least one) worker and read its handshake; raises nothing for worker trouble
        (``BackendInfo.problem`` says it)."""
        ...

    async def request(self, params: Any, *, purpose: Purpose = "check", timeout_s: float | None = None,
                      on_progress: ProgressCallback | None = None) -> Reply:
        """Run the op ``params`` names (``type(params).OP``) on a worker for ``purpose``."""
        ...

    def describe(self) -> BackendInfo:
        """What this backend is now (without starting anything)."""
        ...

    async def close(self) -> None:
        """Stop every worker; pending requests end "cancelled"."""
        ...


async def call_progress(callback: ProgressCallback | None, progress: Progress) -> None:
    """Deliver one progress report; a broken sink never breaks the request."""
    if callback is None:
        return
    try:
        value = callback(progress)
        if inspect.isawaitable(value):
            await value
    except Exception as exc:  # noqa: BLE001
        print(f"pallasite: progress callback failed: {exc}", file=sys.stderr)
