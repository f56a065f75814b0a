"""Starting, watching and ending worker processes so that kernel code cannot outlive or hold us.

Every local worker is started here (``start``), and on Linux:

- in a **new session** (its own process group), so it is killed as a group (``kill``);
- with **PR_SET_PDEATHSIG = SIGKILL**, so a worker ends by itself when the process that started it
  dies, even one that blocks SIGINT/SIGTERM (set in the child before exec; if the parent is already
  gone by then, the child exits at once);
- optionally in a **sandbox**: ``unshare --user --map-root-user --pid --fork --mount-proc
  --kill-child``, a PID and mount namespace in which the worker is process 1 and sees only its own
  processes in ``/proc`` (so not the server, the editor or the user's shell and their
  environments); when the worker ends, the kernel ends every process in its namespace, including
  children that called ``setsid``. ``sandbox_available()`` probes once whether the system allows it;
- a worker for model-written code is **confined** (``confined``): it runs no model code itself but
  forks, for each request, a fresh child that builds a sandbox from nothing (``runner/isolation/sandbox.py``:
  its own user, mount, PID, network, IPC and UTS namespaces, an empty root with only the
  interpreter and its packages bound read-only, a size-capped scratch, uid nobody). It starts
  outside any namespace of ours, so that as root it may map its children to ``nobody``.
  ``confinement_problem(python)`` probes once per interpreter whether the system allows it;
- the starting process becomes a **child subreaper** (``adopt_orphans``), so a kernel's child that
  escapes the group with ``setsid`` and loses its parent is re-parented to us, not to init, and is
  killed with its worker (``kill`` ends such orphans too).

A worker's exit is noticed from the **process** (``exited``: a pidfd, else polling the return code),
never from end-of-output on its pipes: a grandchild holding the pipes open cannot make us wait.
``kill_all`` ends every worker this process started (used when the server exits).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import functools
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any


LINUX = sys.platform.startswith("linux")
PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER, PR_SET_DUMPABLE = 1, 36, 4
SANDBOX_PREFIX = ("unshare", "--user", "--map-root-user", "--pid", "--fork", "--mount-proc", "--kill-child", "--")
# Process 1 of the namespace is a shell that runs the worker as its child: a process 1 ignores
# signals it sends itself (a kernel's os.kill(os.getpid(), ...)) and must reap orphans; the shell
# does both. A worker killed by signal N makes the shell exit 128+N (mapped back in ``exited``).
SANDBOX_INIT = ("/bin/sh", "-c", '"$@"; exit $?', "pallasite-sandbox")
# Set (to a reason) to act as if namespaces were unavailable: the sandbox probes fail (tests use it).
NO_NAMESPACES_VARIABLE = "PALLASITE_NO_NAMESPACES"

_started: dict[int, asyncio.subprocess.Process] = {}  # pid -> live workers started here
# workers being started: while one is, orphans are not reaped (a second worker replaced meanwhile, with two check
# workers, killed the new one as an orphan before it was in _started: "killed by SIGKILL" before its handshake)
_spawning = 0
_in_sandbox: set[int] = set()  # pids of those started in the sandbox
_adopting = False  # whether this process was made a subreaper (on its first worker)
_families: dict[int, set[int]] = {}  # a killed worker's pid -> its descendants then (reaped after its exit)
_ending: set[asyncio.Task] = set()  # workers whose start was cancelled, being ended (a reference keeps each)
REAP_S = 1.0  # after a worker's exit, how long its leftovers (killed) may take to be reaped


@functools.lru_cache(maxsize=1)
def _libc() -> Any:
    if not LINUX:
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except OSError:
        return None


def prctl(option: int, value: int) -> bool:
    """``prctl(option, value)``; whether it worked (False off Linux)."""
    libc = _libc()
    if libc is None:
        return False
    return libc.prctl(ctypes.c_int(option), ctypes.c_ulong(value), ctypes.c_ulong(0), ctypes.c_ulong(0),
                      ctypes.c_ulong(0)) == 0


def adopt_orphans() -> bool:
    """Make this process a child subreaper (orphaned descendants are re-parented to it)."""
    return prctl(PR_SET_CHILD_SUBREAPER, 1)


def hide_from_children() -> bool:
    """Mark this process non-dumpable: processes of the same user (kernel code in a worker) can no
    longer read its ``/proc/PID/environ`` or ``mem`` or attach a debugger to it."""
    return prctl(PR_SET_DUMPABLE, 0)


def _child_setup(parent: int) -> None:
    """Runs in the child between fork and exec (keep it tiny: no imports, no allocation-heavy work)."""
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before the line above: do not run orphaned
        os._exit(1)


@functools.lru_cache(maxsize=1)
def sandbox_available() -> str | None:
    """None when the sandbox works here; else why not (a sentence for the user)."""
    if not LINUX:
        return "the sandbox needs Linux namespaces"
    if os.environ.get(NO_NAMESPACES_VARIABLE):
        return f"namespaces are turned off here ({NO_NAMESPACES_VARIABLE}={os.environ[NO_NAMESPACES_VARIABLE]})"
    if shutil.which("unshare") is None:
        return "the `unshare` command (util-linux) is not installed"
    try:
        done = subprocess.run([*SANDBOX_PREFIX, *SANDBOX_INIT, "true"], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"`unshare` could not run ({exc})"
    if done.returncode != 0:
        why = done.stderr.decode("utf-8", "replace").strip().splitlines()
        return f"the system refuses unprivileged namespaces ({why[-1] if why else f'exit {done.returncode}'})"
    return None


def sandboxed(argv: Sequence[str], mode: str) -> tuple[list[str], str | None]:
    """``argv`` inside the sandbox when ``mode`` asks for it and the system allows it.
    ``mode``: "auto" (where it works), "on" (required: the reason it is missing is returned as an
    error), "off". Returns (argv to run, a problem to report or None)."""
    if mode == "off" or not argv or shutil.which(argv[0]) is None:
        return list(argv), None  # (a missing program fails to start with its own clear error)
    problem = sandbox_available()
    if problem is None:
        return [*SANDBOX_PREFIX, *SANDBOX_INIT, *argv], None
    return list(argv), (problem if mode == "on" else None)


@functools.lru_cache(maxsize=8)
def confinement_problem(python: str) -> str | None:
    """None when a worker run by ``python`` can build the sandbox of model-written code here
    (``runner/isolation/sandbox.py``'s probe, run by that interpreter: namespaces, an empty root, uid nobody, no
    network); else why not (a sentence for the user)."""
    if not LINUX:
        return "the sandbox needs Linux namespaces"
    if os.environ.get(NO_NAMESPACES_VARIABLE):
        return f"namespaces are turned off here ({NO_NAMESPACES_VARIABLE}={os.environ[NO_NAMESPACES_VARIABLE]})"
    try:
        done = subprocess.run([python, "-P", "-m", "pallasite.runner.isolation.sandbox"], capture_output=True, timeout=60,
                              env=_probe_env())
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"the sandbox probe could not run ({exc})"
    if done.returncode != 0:
        why = (done.stdout + done.stderr).decode("utf-8", "replace").strip().splitlines()
        return f"a sandbox for model-written code cannot be made here ({why[0] if why else f'exit {done.returncode}'})"
    return None


def _probe_env() -> dict[str, str]:
    from ...wire.env import worker_environment

    return worker_environment(os.environ)


def confined(argv: Sequence[str]) -> list[str]:
    """``argv`` of a worker for model-written code (check ``confinement_problem`` first): it is started
    as it is, and sandboxes each request itself (runner/isolation/sandbox.py)."""
    return list(argv)


async def start(argv: Sequence[str], *, env: Mapping[str, str], cwd: str | None, limit: int,
                own_session: bool = True) -> asyncio.subprocess.Process:
    """Start a worker with piped stdin/stdout/stderr (see the module docstring)."""
    global _adopting
    if not _adopting:
        _adopting = adopt_orphans() or True
    global _spawning
    parent = os.getpid()
    _spawning += 1  # until it is in _started, a new worker in its own session looks like an orphan
    sandbox = argv[:len(SANDBOX_PREFIX)] == list(SANDBOX_PREFIX)
    try:
        # shielded: a start cancelled midway (a cancelled tune starting a worker) would otherwise be ended by
        # asyncio, which kills the process it started alone: the sandbox's `unshare`, whose namespace's shell is
        # then re-parented here and never reaped (a zombie child of the server). It is ended whole instead.
        creating = asyncio.ensure_future(asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            cwd=cwd, env=dict(env), start_new_session=own_session, limit=limit,
            preexec_fn=functools.partial(_child_setup, parent) if LINUX and own_session else None,
        ))
        try:
            proc = await asyncio.shield(creating)
        except asyncio.CancelledError:
            creating.add_done_callback(functools.partial(_end_unwanted, sandbox))
            raise
        _register(proc, sandbox)
    finally:
        _spawning -= 1
    return proc


def _register(proc: asyncio.subprocess.Process, sandbox: bool) -> None:
    _started[proc.pid] = proc
    if sandbox:
        _in_sandbox.add(proc.pid)


def _end_unwanted(sandbox: bool, creating: "asyncio.Future[asyncio.subprocess.Process]") -> None:
    """A worker whose start was cancelled, once it exists: killed whole (its group and descendants), then
    reaped with what it left (``exited``)."""
    if creating.cancelled() or creating.exception() is not None:
        return
    proc = creating.result()
    _register(proc, sandbox)
    kill(proc, orphans=False)
    task = asyncio.ensure_future(exited(proc))
    _ending.add(task)
    task.add_done_callback(_ending.discard)


async def exited(proc: asyncio.subprocess.Process, poll_s: float = 0.05) -> int:
    """The process's exit code, as soon as it exits (not when its pipes close)."""
    if proc.returncode is None and LINUX and hasattr(os, "pidfd_open"):
        try:
            fd = os.pidfd_open(proc.pid)
        except OSError:
            fd = None
        if fd is not None:
            loop = asyncio.get_running_loop()
            gone = loop.create_future()
            loop.add_reader(fd, lambda: gone.done() or gone.set_result(None))
            try:
                await gone
            finally:
                loop.remove_reader(fd)
                os.close(fd)
    while proc.returncode is None:  # the child watcher records the status right after the exit
        await asyncio.sleep(poll_s)
    _started.pop(proc.pid, None)
    reap_leftovers(proc.pid)
    code = proc.returncode
    if proc.pid in _in_sandbox and 128 < code < 128 + 65:
        return -(code - 128)  # the sandbox's shell reports a worker killed by signal N as 128+N
    return code


def reap_leftovers(pid: int, wait_s: float = REAP_S) -> list[int]:
    """After the worker ``pid`` exited: the processes it left that come back to this process (a child
    subreaper), killed and reaped, so none stays a zombie here: its descendants when it was killed (``kill``)
    and what is left of its session (the sandbox's shell, once ``unshare`` is gone, is re-parented here).
    Waits at most ``wait_s``; returns those reaped."""
    left = set(_families.pop(pid, ())) | set(_session_children(pid))
    left.discard(pid)
    reaped: list[int] = []
    deadline = time.monotonic() + wait_s
    for other in left:
        _signal(other, group=False)
    while left:
        for other in list(left):
            try:
                if os.waitpid(other, os.WNOHANG)[0] == other:
                    reaped.append(other)
                    left.discard(other)
            except ChildProcessError:  # not ours: another's to reap (a process inside the namespace), or gone
                left.discard(other)
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.005)
    return reaped


def _session_children(sid: int) -> list[int]:
    """Our children in session ``sid`` (a worker's own session), zombies included."""
    if not LINUX:
        return []
    try:
        import psutil

        found = []
        for child in psutil.Process().children():
            with contextlib.suppress(OSError):
                if os.getsid(child.pid) == sid:
                    found.append(child.pid)
        return found
    except Exception:  # noqa: BLE001 - psutil missing: the group kill remains
        return []


def _descendants(pid: int) -> list[int]:
    try:
        import psutil

        return [p.pid for p in psutil.Process(pid).children(recursive=True)]
    except Exception:  # noqa: BLE001 - gone already, or psutil missing: the group kill remains
        return []


def _orphans() -> list[int]:
    """Our children that we did not start and that live in another session: a worker's descendants
    re-parented to us (our own helper subprocesses share our session and are left alone)."""
    try:
        import psutil

        ours = os.getsid(0)
        out = []
        for child in psutil.Process().children():
            with contextlib.suppress(OSError):
                if child.pid not in _started and os.getsid(child.pid) != ours:
                    out.append(child.pid)
        return out
    except Exception:  # noqa: BLE001
        return []


def _signal(pid: int, group: bool) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if group:
            os.killpg(pid, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)


def kill(proc: asyncio.subprocess.Process | None, *, orphans: bool = True) -> None:
    """SIGKILL the worker, its process group, every descendant (also those in other sessions), and
    (``orphans``) our adopted orphans; reap the orphans. Returns at once; ``exited`` tells when."""
    if proc is not None:
        family = _descendants(proc.pid) if proc.returncode is None else []
        _families.setdefault(proc.pid, set()).update(family)  # reaped after its exit (``exited``)
        if proc.returncode is None:
            _signal(proc.pid, group=True)
            _signal(proc.pid, group=False)
        for pid in family:
            _signal(pid, group=False)
    if orphans and LINUX and not _spawning:
        _end_orphans()


def _end_orphans() -> None:
    for pid in _orphans():
        _signal(pid, group=False)
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, 0)


def release(proc: asyncio.subprocess.Process) -> None:
    """Close our ends of an exited worker's pipes (a grandchild may still hold its ends)."""
    transport = getattr(proc, "_transport", None)
    if transport is not None:
        with contextlib.suppress(Exception):
            transport.close()


def kill_all() -> list[int]:
    """SIGKILL every worker started here (and its group, descendants, our orphans): the pids signalled."""
    pids = list(_started)
    for proc in list(_started.values()):
        kill(proc, orphans=False)
    _end_orphans()
    return pids


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False
