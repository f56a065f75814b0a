"""A DMA wait nothing can satisfy, said at once instead of hanging (worker side).

jax's TPU interpreter waits on a semaphore by running the DMAs that will signal it ("on_wait" mode) and, when
none is left, sleeping until another core or device signals it. With one core on one device there is no one
else: a kernel that waits for more than its copies signal (a ``pl.when`` inverted around a copy's start, a
wait on the wrong slot's semaphore) would hang on a TPU, and in interpret mode it slept until tier 3's time
limit (a PLS307 "not checked", never a catch). ``install`` wraps ``Semaphore.wait``: when the count is short
and no pending DMA will signal this semaphore, it raises ``KernelDeadlock`` with the semaphore's count and the
value waited for, which tier 3 reports as the kernel's failure (PLS300) - at once with one core, and after
``PATIENCE_S`` seconds in which nothing signalled it when tier 3 simulates two cores (the other core could). Idempotent; a jax without
the class is left alone.

A run may also be given a time limit (``deadline``): the interpreter's ref reads, writes and waits
(``tick``, called by the wrappers of ``interpret_views`` and by the wait above) raise ``RunPastLimit`` once it
has passed, which ends the run with that error instead of a loop that never ends (the locate step's edits:
a ``while`` condition made one off can loop forever). A loop that touches no ref is not stopped here.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, Iterator


class KernelDeadlock(RuntimeError):
    """The kernel waits on a semaphore no pending DMA or other core will signal: it would hang on a TPU."""


class RunPastLimit(RuntimeError):
    """The run went on past the time limit its caller gave (``deadline``)."""


_DEADLINE: list[float] = []  # the monotonic time the current run must end by (empty: no limit)


@contextlib.contextmanager
def deadline(seconds: float | None) -> Iterator[None]:
    """Runs inside end with ``RunPastLimit`` at their next ref access once ``seconds`` have passed."""
    if seconds is None:
        yield
        return
    _DEADLINE.append(time.monotonic() + seconds)
    try:
        yield
    finally:
        _DEADLINE.pop()


def tick() -> None:
    """Raise ``RunPastLimit`` when the current run's deadline has passed (called from the interpreter's callbacks)."""
    if _DEADLINE and time.monotonic() > _DEADLINE[-1]:
        raise RunPastLimit("the run went on past its time limit (a loop that never ends?)")


PATIENCE_S = 20.0  # with several cores, how long a wait may see nothing signal it before it is a deadlock


def install() -> bool:
    try:
        from jax._src.pallas.mosaic.interpret import shared_memory
    except ImportError:
        return False
    cls = getattr(shared_memory, "Semaphore", None)
    if cls is None or getattr(cls, "_pallasite_deadlock", False):
        return cls is not None
    wait0 = cls.wait

    def wait(self: Any, value: Any, global_core_id: Any, *args: Any, **kwargs: Any) -> Any:
        tick()
        memory = self.shared_memory
        if getattr(memory, "dma_execution_mode", "") == "on_wait":
            patience = 0.0 if getattr(memory, "num_cores", 0) == 1 else PATIENCE_S
            _run_pending(self, int(value), int(global_core_id), kwargs.get("logging_info"), patience)
        return wait0(self, value, global_core_id, *args, **kwargs)

    cls.wait = wait
    cls._pallasite_deadlock = True
    return True


def _run_pending(sem: Any, value: int, core: int, logging_info: Any, patience: float) -> None:
    """Run the DMAs that signal ``sem`` until its count reaches ``value``; raise when none is left short of it
    and, with other cores running, nothing has signalled it for ``patience`` seconds."""
    since = time.monotonic()
    while True:
        with sem.cv:
            count = int(sem.count_by_core[core])
            task = sem.tasks[core].pop() if count < value and sem.tasks[core] else None
            if count < value and task is None and time.monotonic() - since < patience:
                sem.cv.wait(timeout=0.1)  # another core may signal it
                if int(sem.count_by_core[core]) != count or sem.tasks[core]:
                    since = time.monotonic()
                continue
        if count >= value:
            return
        if task is None:
            alone = "one core, nothing else running" if patience == 0 else f"nothing signalled it for {patience:g} s"
            raise KernelDeadlock(f"deadlock: the kernel waits on DMA semaphore {sem.id} for {value} bytes, its count "
                                 f"is {count} and no copy in flight will signal it ({alone}): on a TPU this wait "
                                 f"hangs{_where(logging_info)}")
        task()
        since = time.monotonic()


def _where(logging_info: Any) -> str:
    """`` (at file:line)`` of the wait in the user's code, when jax passed where it was traced."""
    info = getattr(getattr(logging_info, "source_info", None), "traceback", None)
    frames = [f for f in (getattr(info, "frames", None) or ()) if "/jax/" not in str(getattr(f, "file_name", ""))]
    if not frames:
        return ""
    line = getattr(frames[0], "line_num", None) or getattr(frames[0], "start_line", None)
    return f" (the wait at {frames[0].file_name}:{line})"
