"""The jobs registry: long work the engine runs in the background, with progress, cancel and result.

A job is one asyncio task running a coroutine (a check, a tier-3 run, a tuning batch) that the
engine started for a caller. The registry gives it an id and keeps what a status bar, an LSP
progress report or an agent needs: its kind, its file, its latest structured ``Progress``, and
at the end its result or its error. A job whose coroutine returns a ``Reply`` that is not "ok"
(a crash, a time or memory limit) is *failed* with that reply's status and message, so a
worker's death is recorded on the job it killed and nowhere else.

    job = engine.jobs.submit("tier3", path, lambda report: backend.request(params, purpose="job",
                                                                           on_progress=report))
    engine.jobs.cancel(job.id)       # frees its worker
    await engine.jobs.wait(job.id)   # the finished Job

Client side, no LSP and no JAX.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from ..wire.messages import Progress

from .workers.backend import Reply

JobState = Literal["pending", "running", "done", "failed", "cancelled"]
ReportProgress = Callable[[Progress], None]


@dataclass
class Job:
    """One job's record (mutated only by the registry)."""

    id: str
    kind: str  # "check", "tier3", "tune", ...
    file: str | None
    state: JobState = "pending"
    progress: Progress | None = None
    result: Any = None
    error: str | None = None  # why it failed: a sentence for people
    failure: str | None = None  # the Reply status that failed it ("crashed", "timed_out", ...) or "exception"
    created: float = field(default_factory=time.time)
    finished: float | None = None
    task: asyncio.Task | None = field(default=None, repr=False)

    @property
    def done(self) -> bool:
        return self.state in ("done", "failed", "cancelled")


class JobRegistry:
    """Every job of one engine, by id (the finished ones too, up to ``keep`` of them)."""

    def __init__(self, keep: int = 200) -> None:
        self.keep = keep
        self._jobs: dict[str, Job] = {}
        self._ids = itertools.count(1)
        self.listeners: list[Callable[[Job], None]] = []  # told of every change (status bars)

    def submit(self, kind: str, file: str | None,
               run: Callable[[ReportProgress], Awaitable[Any]]) -> Job:
        """Start ``run(report_progress)`` as a job now (inside a running event loop)."""
        job = Job(id=f"job-{next(self._ids)}", kind=kind, file=file)
        self._jobs[job.id] = job

        def report(progress: Progress) -> None:
            job.progress = progress
            self._tell(job)

        job.task = asyncio.ensure_future(self._run(job, run, report))
        self._prune()
        return job

    async def _run(self, job: Job, run: Callable[[ReportProgress], Awaitable[Any]], report: ReportProgress) -> Any:
        job.state = "running"
        self._tell(job)
        try:
            value = await run(report)
        except asyncio.CancelledError:
            self._finish(job, "cancelled", error="cancelled")
            raise
        except Exception as exc:  # noqa: BLE001 - a failed job is data
            self._finish(job, "failed", error=f"{type(exc).__name__}: {exc}", failure="exception")
            return None
        if isinstance(value, Reply) and not value.ok:
            state = "cancelled" if value.status == "cancelled" else "failed"
            self._finish(job, state, result=value, error=value.message or value.status, failure=value.status)
        else:
            self._finish(job, "done", result=value)
        return value

    def _finish(self, job: Job, state: JobState, *, result: Any = None, error: str | None = None,
                failure: str | None = None) -> None:
        job.state, job.result, job.error, job.failure = state, result, error, failure
        job.finished = time.time()
        self._tell(job)

    def _tell(self, job: Job) -> None:
        for listener in list(self.listeners):
            try:
                listener(job)
            except Exception:  # noqa: BLE001 - a broken listener must not break the job
                pass

    def _prune(self) -> None:
        finished = [j for j in self._jobs.values() if j.done]
        for job in finished[: max(0, len(finished) - self.keep)]:
            self._jobs.pop(job.id, None)

    # ------------------------------------------------------------------ queries and control

    def get(self, job_id: str) -> Job | None:
        return self._jobs.get(job_id)

    def list(self, *, kind: str | None = None, file: str | None = None, active: bool | None = None) -> list[Job]:
        return [j for j in self._jobs.values()
                if (kind is None or j.kind == kind) and (file is None or j.file == file)
                and (active is None or (not j.done) == active)]

    def cancel(self, job_id: str) -> bool:
        """Cancel a job (its worker is told, or killed if it does not stop); False if it was not running."""
        job = self._jobs.get(job_id)
        if job is None or job.done or job.task is None:
            return False
        job.task.cancel()
        return True

    async def wait(self, job_id: str) -> Job:
        """The job once it has finished (whatever its state)."""
        job = self._jobs[job_id]
        if job.task is not None:
            try:
                await asyncio.shield(job.task)
            except asyncio.CancelledError:
                if not job.done:  # the waiter itself was cancelled
                    raise
            except Exception:  # noqa: BLE001 - recorded on the job
                pass
        return job

    async def cancel_all(self) -> None:
        tasks = [j.task for j in self._jobs.values() if j.task is not None and not j.done]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
