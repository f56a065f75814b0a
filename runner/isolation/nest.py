"""The candidate's process in a PID namespace of its own, which ends with it.

``enter(status_fd)`` is the first thing the candidate's process does (runner/judging/candidate.py), before
it reads a byte of the judge's request or imports anything of the candidate's:

1. ``unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID)``: a user namespace (so this works unprivileged:
   the process maps only its own uid and gid, to ``INSIDE_ID``, with setgroups denied), a mount namespace
   (its mounts made private: nothing propagates back) and a PID namespace for its children;
2. ``fork``: the child is process 1 of the new PID namespace. It dies with its parent (parent-death signal,
   and a pipe that tells it the parent is already gone), mounts a fresh ``/proc`` (showing only its own
   namespace: not the judge, not the verifier), drops every capability (bounding set, ambient, effective,
   permitted; ``no_new_privs``): as ``INSIDE_ID`` (not 0) it cannot gain one back, so it cannot unmount that
   ``/proc`` to see the old one (and the kernel locks the mounts it inherited anyway). ``enter`` returns in
   it: the candidate runs there;
3. the parent stays outside as the *launcher*: it closes every descriptor it held (the candidate's socket
   included), makes itself undumpable, and waits for process 1. A ``SIGTERM`` (the judge's ``end``) makes it
   SIGKILL process 1; when process 1 ends, the kernel kills every process in its namespace (a ``setsid``
   double-forked daemon included), and ``waitpid`` on it returns only once the namespace is empty. Then the
   launcher exits as process 1 did (the same code, or the same signal), so the judge's ``wait`` on the
   launcher returns only when nothing of the candidate's side is left.

It writes one line on ``status_fd`` for the judge: ``nested PID`` (process 1's pid as the judge sees it);
``plain WHY`` when no namespace can be made here (user namespaces turned off): the process goes on
un-nested, as before (unless the judge requires the namespace: a confined worker's); ``failed WHY`` when one was made but could not be finished (a ``/proc`` it may not
mount): the process ends (it can start no thread once it asked for a PID namespace), and the judge starts
another without nesting. Either way the judge decides (a confined worker refuses; the user's own file is
judged with a process-group kill and a note: runner/judging/channel.py).

``probe()``: whether it works here (the sandbox's own probe runs it: runner/isolation/sandbox.verify).

Worker side, standard library only (it runs before anything else in the candidate's process).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
from typing import Any

INSIDE_ID = 1000  # the candidate's uid and gid inside its namespace (never 0: no capability survives)
EXIT_SETUP = 71
# Set (to a reason) to act as if no namespace could be made here: the candidate goes on un-nested (tests use it)
NO_NEST_VARIABLE = "PALLASITE_NO_NESTED_NAMESPACE"

_CLONE_NEWNS, _CLONE_NEWUSER, _CLONE_NEWPID = 0x00020000, 0x10000000, 0x20000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REC, _MS_PRIVATE = 1, 2, 4, 8, 16384, 1 << 18
_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE = 1, 4


class NestError(OSError):
    """A step of making the namespace failed (the message names it and the system's reason)."""


def _libc() -> Any:
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, step: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise NestError(code, f"{step} failed: {os.strerror(code)}")


def _write(path: str, text: str) -> None:
    with open(path, "w") as out:
        out.write(text)


def _proc_flags() -> int:
    """The flags a new ``/proc`` must carry: those of the ``/proc`` mounted here (a namespace may not mount
    one less restricted than what it can already see; a sandbox's is read-only)."""
    flags = _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
    with contextlib.suppress(OSError):
        with open("/proc/self/mountinfo") as info:
            for line in info:
                fields = line.split()
                if len(fields) > 5 and fields[4] == "/proc":
                    options = fields[5].split(",")
                    flags = _MS_NOSUID | _MS_NODEV | _MS_NOEXEC | (_MS_RDONLY if "ro" in options else 0)
    return flags


def _unshare(libc: Any) -> None:
    """Steps 1: the namespaces, this process's uid and gid mapped, its mounts private."""
    uid, gid = os.geteuid(), os.getegid()
    _check(libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNS | _CLONE_NEWPID), "unshare (user, mount, PID namespaces)")
    libc.prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0)  # its own /proc files its own to write (a setuid left them root's)
    try:
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{INSIDE_ID} {uid} 1\n")
        _write("/proc/self/gid_map", f"{INSIDE_ID} {gid} 1\n")
    except OSError as exc:
        raise NestError(exc.errno or 1, f"writing the namespace's uid and gid maps failed: {exc.strerror or exc}") from None
    _check(libc.mount(None, b"/", None, ctypes.c_ulong(_MS_REC | _MS_PRIVATE), None), "making the mounts private")


def _become_init(libc: Any, alive_r: int) -> None:
    """In process 1 of the new namespace: die with the launcher, a fresh ``/proc``, no capability."""
    from ..capabilities import drop_capabilities

    _check(libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "setting the parent-death signal")
    os.set_blocking(alive_r, False)
    try:
        if os.read(alive_r, 1) == b"":  # the launcher ended before the line above: end too
            os._exit(EXIT_SETUP)
    except BlockingIOError:
        pass
    os.close(alive_r)
    _check(libc.mount(b"proc", b"/proc", b"proc", ctypes.c_ulong(_proc_flags()), None), "mounting a fresh /proc")
    drop_capabilities(libc)  # bounding set, ambient, no_new_privs, effective and permitted


def enter(status_fd: int, required: bool = False) -> None:
    """See the module docstring: returns in process 1 of a new PID namespace (or, where none can be made,
    in this process un-nested, unless ``required``: then it ends); the launcher never returns."""
    libc = _libc()
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # the judge's end is ours
    try:
        if os.environ.get(NO_NEST_VARIABLE):
            raise NestError(0, f"unshare: namespaces are turned off here ({NO_NEST_VARIABLE}="
                               f"{os.environ[NO_NEST_VARIABLE]})")
        _unshare(libc)
    except NestError as exc:
        if exc.strerror.startswith("unshare") and not required:  # nothing changed: this process goes on, un-nested
            _say(status_fd, f"plain {exc.strerror}")
            return
        _fail(status_fd, exc.strerror)
    alive_r, alive_w = os.pipe()  # held by the launcher: its end is the child's EOF
    said_r, said_w = os.pipe()  # the child's word: "ok", or why not
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    pid = os.fork()
    if pid == 0:
        os.close(alive_w)
        os.close(said_r)
        os.close(status_fd)
        try:
            _become_init(libc, alive_r)
        except BaseException as exc:  # noqa: BLE001 - said to the launcher, which tells the judge
            os.write(said_w, f"{getattr(exc, 'strerror', None) or exc}".encode()[:500])
            os._exit(EXIT_SETUP)
        os.write(said_w, b"ok")
        os.close(said_w)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
        return
    os.close(alive_r)
    os.close(said_w)
    with os.fdopen(said_r, "rb") as said:
        word = said.read().decode("utf-8", "replace")
    if word != "ok":
        os.waitpid(pid, 0)
        _fail(status_fd, word or "process 1 of the namespace ended at once")
    _say(status_fd, f"nested {pid}")
    _launch(libc, pid, alive_w)


def _fail(status_fd: int, why: str) -> None:
    """A namespace asked for and not finished: this process can start no thread now; it ends."""
    _say(status_fd, f"failed {why}")
    os._exit(EXIT_SETUP)


def _say(status_fd: int, line: str) -> None:
    with contextlib.suppress(OSError):
        os.write(status_fd, (" ".join(line.split())[:1000] + "\n").encode())
    with contextlib.suppress(OSError):
        os.close(status_fd)


def _launch(libc: Any, pid: int, alive_w: int) -> None:
    """The launcher: nothing held but ``alive_w``, undumpable; SIGTERM ends process 1; then its exit status."""
    os.closerange(3, alive_w)
    os.closerange(alive_w + 1, 1 << 16)
    libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    signal.signal(signal.SIGTERM, lambda *_: os.kill(pid, signal.SIGKILL))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
    _, status = os.waitpid(pid, 0)  # returns once process 1 is gone, and with it every process of its namespace
    if os.WIFSIGNALED(status):  # the same signal, so the judge reads it as the candidate's (a memory kill: SIGKILL)
        sig = os.WTERMSIG(status)
        with contextlib.suppress(OSError, ValueError):
            signal.signal(sig, signal.SIG_DFL)  # (not for SIGKILL, whose action is the default anyway)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {sig})
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)
    os._exit(os.waitstatus_to_exitcode(status))


def probe() -> str | None:
    """None when a candidate's process can be nested here, else why not (a sentence). Forks (call it from a
    process with no threads: the sandbox's probe)."""
    read_status, write_status = os.pipe()
    launcher = os.fork()
    if launcher == 0:
        os.close(read_status)
        code = 3
        try:
            enter(write_status)
            mine = {name for name in os.listdir("/proc") if name.isdigit()}
            status = open("/proc/self/status").read()
            caps = next((line.split()[1] for line in status.splitlines() if line.startswith("CapEff:")), "")
            code = 0 if os.getpid() == 1 and mine == {"1"} and int(caps or "1", 16) == 0 else 4
        finally:
            os._exit(code)
    os.close(write_status)
    with os.fdopen(read_status, "rb") as stream:
        said = stream.read().decode("utf-8", "replace").strip()
    _, status = os.waitpid(launcher, 0)
    code = os.waitstatus_to_exitcode(status)
    if not said.startswith("nested"):
        return f"the candidate's process cannot be given a PID namespace of its own here ({said[6:] or said})"
    if code != 0:
        return f"a nested candidate process still sees other processes or holds capabilities (code {code})"
    return None
