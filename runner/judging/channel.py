"""The channel between a judge and its candidate process: frames of JSON plus raw array bytes (never
pickle, so the judge parses nothing that can run code), the fresh interpreter that is the candidate's
process (``spawn``), and its end (``end``).

The candidate's process puts itself in a PID namespace of its own first (runner/isolation/nest.py): the
process the judge started stays outside as its launcher, and ``end`` asks it to end process 1 and waits for
it, which returns only once every process of that namespace is gone (a ``setsid`` double-forked daemon
included). So when ``end`` returns, nothing of the candidate's side runs, and nothing of it could see the
judge or the verifier while it ran (its ``/proc`` is its own; both are undumpable too). Where no namespace
can be made here: a confined worker (model-written code) refuses (``NotIsolated``); the user's own file is
judged with today's ending (the process, its group and every process found below it) and a note saying so.

Worker side: imports jax and numpy lazily.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import socket
import struct
import subprocess
from typing import Any

from .frames import MAX_FRAME, CandidateGone, recv_frame, send_frame  # noqa: F401 - the channel's frames

_PR_SET_DUMPABLE = 4
CANDIDATE_MODULE = "pallasite.runner.judging.candidate"  # what runs in the candidate's process (the trust wall)


class NotIsolated(CandidateGone):
    """A confined worker's candidate process could not be put in a PID namespace of its own: not judged."""


@dataclasses.dataclass(frozen=True)
class Isolation:
    """How the candidate's side was kept and ended: ``nested`` in a PID namespace of its own (ended with it),
    else ``note`` says what held instead. ``candidate_pid``: the candidate's process as the judge sees it."""

    nested: bool
    candidate_pid: int | None
    note: str = ""


@dataclasses.dataclass
class _Started:
    proc: Any
    status: int | None  # the read end of the candidate's status line (None: read, or never asked for)
    isolation: Isolation | None = None
    failed: bool = False  # it said a namespace was asked for and not finished: it ended


def receive(sock: socket.socket) -> tuple[dict[str, Any], list[Any]]:
    """A frame from the candidate; the interpret-mode calls it saw are recorded here, so the worker
    refuses them as if this process had seen them (runner/tier3/interpret_guard.py)."""
    from ..tier3 import interpret_guard

    header, arrays = recv_frame(sock)
    interpret_guard.add_recorded(header.pop("interpret", None))
    return header, arrays


def end(sock: socket.socket, pid: int) -> Isolation:
    """Close the channel and end the candidate's side, whatever it is doing; returns only when all of it is
    gone (see the module docstring). A second call returns what the first found. In a confined worker, a
    candidate that was not nested raises ``NotIsolated`` once it is ended."""
    from ..isolation import process_tree
    from . import CONFINED

    with contextlib.suppress(OSError):
        sock.close()
    started = _PROCS.pop(pid, None)
    if started is None:
        return _ENDED.get(pid) or Isolation(False, pid, "the candidate's process was ended before")
    isolation = isolation_of(pid, started)
    if isolation.nested:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)  # the launcher ends process 1, waits for its namespace to empty, exits
        try:
            started.proc.wait(timeout=END_S)
        except subprocess.TimeoutExpired:  # (never seen) the launcher is stuck: its parent-death signal is left
            isolation = dataclasses.replace(isolation, note=f"the candidate's launcher did not end in {END_S:g} s "
                                                            "and was killed")
    if not isolation.nested or isolation.note:
        below = process_tree.kill_tree(pid)  # the process, and every process found below it, in any session
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)
        started.proc.wait()
        process_tree.reap(below)
    _ENDED[pid] = isolation
    if CONFINED and not isolation.nested:
        raise NotIsolated(refusal(isolation.note))
    return isolation


def refusal(note: str) -> str:
    """Why a confined worker's candidate is not judged (``note``: how it was kept instead)."""
    return (f"not judged: {note}; model-written code is judged only where its process can be given a PID namespace "
            "of its own, so nothing it starts outlives it or reaches the judge")


def isolation_of(pid: int, started: Any = None) -> Isolation:
    """How the candidate ``pid`` is kept: its status line, read once (it comes before the candidate reads
    anything); waits for it at most ``STATUS_S``."""
    import select

    started = started or _PROCS.get(pid)
    if started is None:
        return _ENDED.get(pid) or Isolation(False, pid, "no such candidate process")
    if started.isolation is not None:
        return started.isolation
    line = ""
    if started.status is not None:
        ready, _, _ = select.select([started.status], [], [], STATUS_S)
        if ready:
            with contextlib.suppress(OSError):
                line = os.read(started.status, 4096).decode("utf-8", "replace").strip()
        os.close(started.status)
        started.status = None
    word, _, rest = line.partition(" ")
    if word == "nested" and rest.isdigit():
        global _NESTED_HERE
        _NESTED_HERE = True
        started.isolation = Isolation(True, int(rest))
        return started.isolation
    if word in ("plain", "failed"):  # found once: later candidates of this process start plain
        global _PLAIN_WHY
        _PLAIN_WHY = _PLAIN_WHY or rest
        started.failed = word == "failed"
    why = rest if rest else "the candidate's process ended before it said whether it has one"
    started.isolation = Isolation(False, pid, (FAILED_NOTE if word == "failed" else PLAIN_NOTE).format(why=why))
    return started.isolation


PLAIN_NOTE = ("the candidate's process ran without a PID namespace of its own here ({why}): it was ended with its "
              "process group and every process found below it, so a process it detached (setsid, double fork) "
              "could outlive it")
FAILED_NOTE = ("the candidate's process could not be given a PID namespace of its own here ({why}) and ended before "
               "it ran anything")
STATUS_S = 60.0  # the candidate's status line, at most (its interpreter's start, on a loaded machine)
END_S = 30.0  # the launcher's end, at most
_PROCS: dict[int, _Started] = {}  # the candidate processes this judge started, by pid
_ENDED: dict[int, Isolation] = {}
_PLAIN_WHY: str | None = None  # why no namespace can be made here (found once: runner/isolation/nest.py)
_NESTED_HERE = False  # a candidate of this process was nested (the next ones need not be awaited)
_PREFORKED: list[tuple[socket.socket, int]] = []  # a candidate's process forked at this request's clean point


def prefork() -> None:
    """Fork the candidate's process now, at this request's clean point (runner/judging/forked.py: one thread, no
    backend, nothing of the judge's yet), for the ``spawn`` that comes later: a fresh interpreter's state without
    its 2 s. Nothing happens where the point is not clean or no namespace can be made (``spawn`` then starts a
    fresh interpreter as before). The process waits for its request on its socket, holding nothing else."""
    from . import CONFINED, forked

    if _PREFORKED or _PLAIN_WHY is not None or not forked.clean():
        return
    undumpable()  # before the candidate exists: it may not read or write our memory
    _PREFORKED.append(_start(nested=True, fork=CONFINED or _NESTED_HERE))


def undumpable() -> None:
    """This process's memory and file descriptors out of reach of every other process of its user
    (no ptrace, no /proc/<pid>/mem or fd/)."""
    import ctypes

    ctypes.CDLL(None).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)


def spawn(kind: str, params: dict[str, Any]) -> tuple[socket.socket, int]:
    """A candidate process: a FRESH interpreter (``python -m pallasite.runner.judging.candidate``), never a
    fork of this one, holding one end of a socket pair and nothing else of ours (every other descriptor
    closed, stdin from /dev/null, its own session, jax on the CPU only), which first puts itself in a PID
    namespace of its own (runner/isolation/nest.py; not where that was found impossible before). This process
    is undumpable before it exists. Its first frame is the request: ``kind`` ("export" or "check") and its
    ``params``. Returns (our end, the pid ``end`` and ``gone_why`` take).

    Outside a confined worker, the first candidate's word on its namespace is awaited here: where none can be
    finished, that process has ended, and a plain one is started instead (and every later one, at once)."""
    from . import CONFINED

    if CONFINED and _PLAIN_WHY is not None:
        raise NotIsolated(refusal(PLAIN_NOTE.format(why=_PLAIN_WHY)))
    undumpable()  # before the candidate exists: it may not read or write our memory
    sock, pid = _PREFORKED.pop() if _PREFORKED else _start(nested=_PLAIN_WHY is None)
    started = _PROCS[pid]
    if not CONFINED and started.status is not None and not _NESTED_HERE:
        isolation_of(pid)
        if started.failed:  # it ended: a plain one instead
            started.proc.wait()
            _PROCS.pop(pid, None)
            sock.close()
            sock, pid = _start(nested=False)
    try:
        send_frame(sock, {"kind": kind, "params": params})
    except OSError as exc:  # it ended before its request (a namespace it had to have and could not make)
        why = gone_why(pid, exc)
        with contextlib.suppress(CandidateGone):
            end(sock, pid)
        raise CandidateGone(why) from None
    return sock, pid


def _start(nested: bool, fork: bool = False) -> tuple[socket.socket, int]:
    """The candidate's process: a fresh interpreter, or (``fork``: at a clean point only, ``prefork``) a fork of
    this one that runs the same main."""
    import sys

    from . import CONFINED

    ours, theirs = socket.socketpair()
    status_r, status_w = os.pipe() if nested else (None, None)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PALLASITE_STANDIN")}
    env.update(JAX_PLATFORMS="cpu", PYTHONDONTWRITEBYTECODE="1", PYTHONUNBUFFERED="1")
    passed = (theirs.fileno(),) + ((status_w,) if status_w is not None else ())
    required = ["required"] if nested and CONFINED else []  # model-written code never runs un-nested
    try:
        if fork:
            proc: Any = _forked_candidate(passed, required)
        else:
            proc = subprocess.Popen([sys.executable, "-m", CANDIDATE_MODULE, *map(str, passed),
                                     *required],
                                    stdin=subprocess.DEVNULL, stdout=2, stderr=2, pass_fds=passed, close_fds=True,
                                    env=env, start_new_session=True)
    except BaseException:
        for fd in (status_r, status_w):
            if fd is not None:
                os.close(fd)
        raise
    finally:
        theirs.close()
    if status_w is not None:
        os.close(status_w)
    # (its exit status is read through ``proc``: subprocess may reap it otherwise)
    _PROCS[proc.pid] = _Started(proc, status_r, None if nested else Isolation(
        False, proc.pid, PLAIN_NOTE.format(why=_PLAIN_WHY or "not asked for")))
    return ours, proc.pid


def _forked_candidate(passed: tuple[int, ...], required: list[str]) -> Any:
    from .forked import fork_child

    def run() -> int:  # (in the candidate's process: its module is imported there, never on the judge's side)
        import importlib

        os.environ.update(JAX_PLATFORMS="cpu", PYTHONDONTWRITEBYTECODE="1")
        for name in [n for n in os.environ if n.startswith("PALLASITE_STANDIN")]:
            del os.environ[name]
        return importlib.import_module(CANDIDATE_MODULE).main(["candidate", *map(str, passed), *required])

    return fork_child(run, passed)


def gone_why(pid: int, error: BaseException) -> str:
    """Why the candidate's process stopped answering, in the user's words: killed (by the memory limit, most
    likely: the sandbox counts its files in /tmp and its shared memory too), or exited, or what broke."""
    from ..memory_guard import LIMIT_MB

    if isinstance(error, NotIsolated):
        return str(error)
    started = _PROCS.get(pid)
    if started is not None and isolation_of(pid, started).note and started.failed:
        from . import CONFINED

        return refusal(started.isolation.note) if CONFINED else f"not judged: {started.isolation.note}"
    proc = started.proc if started is not None else None
    try:
        code = proc.wait(timeout=10.0) if proc is not None else None  # (a killed process may take seconds to end)
    except subprocess.TimeoutExpired:
        code = None
    if code is None:
        return f"the candidate's process failed: {error}"
    if code == -signal.SIGKILL:
        limit = f" of {LIMIT_MB} MiB" if LIMIT_MB else ""
        return (f"the candidate's process was killed (SIGKILL): it most likely went over the memory limit{limit} "
                "(its files in /tmp and its shared memory count too)")
    if code < 0:
        return f"the candidate's process died of signal {signal.Signals(-code).name}"
    return f"the candidate's process exited (code {code}) without answering"
