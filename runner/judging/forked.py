"""The judge's other processes - the verifier and the candidate's - forked from a clean point instead of started
as fresh interpreters (issue 56: judging one candidate cost ~7 s, ~2 s of it each interpreter's `import jax`).

A judged request's process is, at its very start, a clean pre-imported interpreter: forked from the sandbox's
one-thread fork server (runner/isolation/sandbox_server.py), jax and pallasite's runner imported, no backend started, no
thread, and nothing of the judge's yet (no trusted side loaded, no seed, no secret, no verifier socket). Forked
there, before anything of the judge exists, a child is what a fresh interpreter would be, ~2 s sooner:

- ``clean()``: whether this process is at such a point (one thread, no jax backend); elsewhere (an unconfined
  warm worker that ran other requests) the judge starts fresh interpreters as before;
- ``fork_child(run, keep)``: fork; the child keeps only the descriptors ``keep`` (everything else closed), starts
  a session of its own, restores the default signal handlers and runs ``run()``, then ends with ``os._exit``
  (no interpreter teardown, no handler of the parent's); the parent gets a ``Forked``: the ``subprocess.Popen``
  the channel and the verifier use (``pid``, ``wait``, ``poll``, ``kill``, ``returncode``).

Worker side, standard library only.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from typing import Callable, Iterable


def clean() -> bool:
    """Whether a fork here copies nothing but a fresh interpreter's state: one thread, no jax backend started."""
    if threading.active_count() != 1:
        return False
    bridge = sys.modules.get("jax._src.xla_bridge")
    return not getattr(bridge, "_backends", None)


class Forked:
    """A forked child, as much of ``subprocess.Popen`` as the judge uses."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                done, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                return self.returncode
            if done:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        import subprocess

        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"pid {self.pid}", timeout)
            time.sleep(0.005)
        return self.returncode  # type: ignore[return-value]

    def kill(self) -> None:
        if self.returncode is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def fork_child(run: Callable[[], int | None], keep: Iterable[int]) -> Forked:
    """``run()`` in a forked child holding only the descriptors ``keep`` (see the module docstring)."""
    keep = sorted(set(keep) | {0, 1, 2})
    pid = os.fork()
    if pid:
        return Forked(pid)
    code = 70
    try:
        os.setsid()
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_DFL)
        low = 3
        for fd in keep[3:] + [os.sysconf("SC_OPEN_MAX")]:
            os.closerange(low, fd)
            low = fd + 1
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        code = int(run() or 0)
    except BaseException:  # noqa: BLE001 - the child never returns into the parent's code
        code = 70
    finally:
        sys.stdout.flush()
        os._exit(code)
