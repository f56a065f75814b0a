# A hostile candidate's module-level code (tests/test_candidate_isolation.py puts it above a right kernel): it
# tries every way a process of the same user reaches another - a signal to every pid there is (kill(pid, 0): pid 1
# was the judge in the sandbox), /proc's listing, pidfd_open and pidfd_getfd, ptrace, and reading /proc/<pid>/fd,
# mem and environ - on every process that is not its own, and the pids the test names ({outsiders}: the test and
# its worker). It raises, naming what it reached, when anything answered; its own process is the control (each
# way must work on itself, or the probe is broken).
import ctypes as _ct
import os as _os


def _own():
    return {int(t) for t in _os.listdir("/proc/self/task")} | {_os.getpid()}


def _opens(pid):
    """The ways in that need no signal: each one that worked."""
    found = []
    libc = _ct.CDLL(None, use_errno=True)
    try:
        pidfd = _os.pidfd_open(pid)
        found.append("pidfd_open")
        if any(libc.syscall(438, pidfd, fd, 0) >= 0 for fd in range(32)):  # pidfd_getfd
            found.append("pidfd_getfd")
        _os.close(pidfd)
    except OSError:
        pass
    for name in ("environ", "mem"):
        try:
            with open(f"/proc/{pid}/{name}", "rb") as f:
                f.read(1) if name == "environ" else f.seek(0)
            found.append(f"/proc/{pid}/{name}")
        except OSError:
            pass
    try:
        _os.listdir(f"/proc/{pid}/fd")
        found.append(f"/proc/{pid}/fd")
    except OSError:
        pass
    if pid not in _own() and libc.ptrace(0x4206, pid, 0, 0) == 0:  # PTRACE_SEIZE (it does not stop the tracee)
        found.append("ptrace")
    return found


def _probe():
    own = _own()
    control = _opens(_os.getpid())
    if "pidfd_open" not in control or "/proc/%d/fd" % _os.getpid() not in control:
        raise RuntimeError(f"the reach probe is broken: on its own process only {control} worked")
    _os.kill(_os.getpid(), 0)
    try:
        top = int(open("/proc/sys/kernel/pid_max").read())
    except (OSError, ValueError):
        top = 1 << 22
    reached = {}
    for pid in range(1, top + 1):
        if pid in own:
            continue
        try:
            _os.kill(pid, 0)
        except OSError:
            continue
        reached.setdefault(pid, []).append("kill")
    listed = {int(n) for n in _os.listdir("/proc") if n.isdigit()} - own
    for pid in listed:
        reached.setdefault(pid, []).append("/proc listing")
    for pid in {1, *reached, *[{outsiders}]} - own:
        ways = _opens(pid)
        if ways:
            reached.setdefault(pid, []).extend(ways)
    if reached:
        raise RuntimeError(f"the candidate reached other processes: {reached}")


_probe()
