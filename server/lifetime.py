"""Nothing outlives the editor: how `pallasite serve` ends, with its workers and their children.

The server ends within a second of any of: the end of its input (the editor quit or crashed), the
``exit`` notification, SIGTERM/SIGHUP/SIGINT. Ending means: SIGKILL every worker this process
started, their process groups and descendants (engine/workers/spawn.py), then exit — without waiting for
asyncio to wind down tasks that talk to workers that are already gone. A server killed outright
(SIGKILL) cannot do this; its workers then end by themselves (PR_SET_PDEATHSIG, engine/workers/spawn.py).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from typing import BinaryIO

from ..engine.workers import spawn

logger = logging.getLogger(__name__)
GRACE_S = 0.5  # after the workers are killed, how long the normal shutdown may take before _exit
exit_code = 0  # what the server exits with (the LSP rule: 1 when `exit` came without `shutdown`)


def end_workers() -> None:
    killed = spawn.kill_all()
    if killed:
        logger.info("ended workers %s", killed)


def end_soon(code: int = 0, grace_s: float = GRACE_S) -> None:
    """Kill the workers now; let the process exit normally, or force it after ``grace_s``."""
    global exit_code
    exit_code = code
    end_workers()
    timer = threading.Timer(grace_s, end_now, args=(code,))
    timer.daemon = True
    timer.start()


def end_now(code: int = 0) -> None:
    end_workers()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - the editor may have closed our output already
            pass
    logging.shutdown()
    os._exit(code)


def end_with_signals() -> None:
    """SIGTERM/SIGHUP (the editor or the session ending) and SIGINT end the server and its workers."""
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        try:
            signal.signal(sig, lambda signum, frame: end_now(128 + signum))
        except (ValueError, OSError):  # not the main thread, or a signal the platform lacks
            pass


class EndOnEof:
    """The server's stdin: at end of input (the editor is gone), end the workers and the server."""

    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream

    def readline(self, *args) -> bytes:
        return self._watch(self.stream.readline(*args))

    def read(self, *args) -> bytes:
        return self._watch(self.stream.read(*args))

    def _watch(self, data: bytes) -> bytes:
        if not data:
            end_soon(0)
        return data

    def __getattr__(self, name: str):
        return getattr(self.stream, name)
