"""Stop the user's code before it reaches the worker's memory limit (worker side, stdlib only).

A guide written for a TPU makes arrays sized for 16 GiB of HBM at its top level (16384² matrices,
a 32768² input); on the worker's CPU they pass its memory limit, and a worker killed for memory
loses every kernel call its import had recorded. ``stop_near_limit()`` wraps such a run on the main
thread: a watcher polls the process's resident memory and, past ``SOFT_SHARE`` of the limit the
worker was started with (``LIMIT_MB``, its ``--memory-mb``), raises ``MemoryStop`` into the main
thread at its next Python instruction. The run ends there like at a deadline (``MemoryStop`` is a
``loader.StopLoading``) and the calls it made are checked in the memory left. One allocation far
past the limit in a single C call can still reach the hard limit first: then the worker is stopped
as before (PLS904).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import threading
from typing import Callable, Iterator

from .loader import StopLoading

LIMIT_MB = 0  # the worker's memory limit (``pallasite worker --memory-mb``); 0: no guard
LIMIT_ENV = "PALLASITE_WORKER_MEMORY_MB"  # the worker's limit, for the processes it starts (``limit_mb``)
SOFT_SHARE = 0.7  # of the limit, where the user's run is stopped
POLL_S = 0.05


def limit_mb() -> int:
    """The memory limit this process's checks share: the worker's own (``LIMIT_MB``), else the one the
    worker that started this process put in the environment (``LIMIT_ENV``: the judge's candidate
    process counts against its worker's limit), else 0 (unknown)."""
    if LIMIT_MB:
        return LIMIT_MB
    try:
        return max(int(os.environ.get(LIMIT_ENV, "0") or 0), 0)
    except ValueError:
        return 0


class MemoryStop(StopLoading):
    """Raised into the user's run when the worker's resident memory passed ``SOFT_SHARE`` of its limit."""

    def __init__(self, *args: object) -> None:
        super().__init__(*args)
        self.limit_mb = LIMIT_MB
        self.resident_mb = _MEASURED.get("mb", 0.0)


_MEASURED: dict[str, float] = {}


def resident_bytes() -> int | None:
    """This process's resident memory (Linux ``/proc/self/statm``; None elsewhere)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


@contextlib.contextmanager
def stop_near_limit() -> Iterator[None]:
    """Raise ``MemoryStop`` in this (main) thread when memory passes the soft limit, until the block ends."""
    if not LIMIT_MB or threading.current_thread() is not threading.main_thread() or resident_bytes() is None:
        yield
        return
    target = threading.get_ident()
    soft = SOFT_SHARE * LIMIT_MB * 2**20
    done, fired = threading.Event(), threading.Event()

    def watch() -> None:
        while not done.wait(POLL_S):
            rss = resident_bytes()
            if rss is not None and rss > soft:
                _MEASURED["mb"] = rss / 2**20
                fired.set()
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(target), ctypes.py_object(MemoryStop))
                return

    try:
        with watching(watch, "pallasite-memory-stop", done):
            yield
    finally:
        if fired.is_set():
            _absorb_pending()


@contextlib.contextmanager
def watching(watch: Callable[[], None], name: str, stop: threading.Event) -> Iterator[None]:
    """``watch`` on a daemon thread while the block runs; at its end ``stop`` is set and the thread joined
    (``watch`` waits on ``stop``, so it ends at once)."""
    thread = threading.Thread(target=watch, name=name, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def _absorb_pending() -> None:
    """Take delivery of a ``MemoryStop`` set after the block's code ended, here rather than in the
    worker's own code later. (Clearing it with ``PyThreadState_SetAsyncExc(id, NULL)`` instead leaves
    CPython 3.11's eval breaker set for good: every later bytecode then takes the slow path, and a
    trace under ``sys.setprofile`` — the time op's reference check — ran for minutes.)"""
    try:
        for _ in range(1000):  # backward jumps: the interpreter checks for a pending exception here
            pass
    except MemoryStop:
        pass
