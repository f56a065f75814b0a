"""The sandbox model-written code runs in: a process built from nothing, one per request.

A confined worker (``pallasite worker --confine``) never runs model code itself: it imports jax
once and then, for each request, ``fork``s a fresh child (``run``) that builds its own world
before it reads a byte of the candidate (the bubblewrap way: only what is bound exists):

- new user, mount, PID, network, IPC and UTS namespaces; the worker writes the child's uid/gid
  maps, so the child runs as uid/gid 1000 inside, which is ``nobody`` (65534) outside when
  pallasite runs as root (never root mapped to root) and the user's own uid otherwise;
- a fresh tmpfs as ``/``, holding read-only binds of the interpreter, its environment and
  packages (``readable_paths``), pallasite's own modules (an editable checkout is bound module
  folder by module folder, never its root with a ``.env``), the system's ``/usr`` and the dynamic
  loader's cache, the CPU topology under ``/sys/devices/system``; a minimal ``/dev`` (null, zero, full, random, urandom: no disks, no terminals);
  its own ``/proc``; a size-capped tmpfs ``/scratch`` that also backs ``/tmp`` and ``/dev/shm``.
  No home, no ``/run``, no project folder, no unix socket of the user's, whatever the venv's
  location; abstract sockets and the network are behind the new network namespace;
- a session of its own (no controlling terminal), every other file descriptor closed, no
  capabilities, ``no_new_privs``;
- memory limited by what the kernel counts: a memory cgroup per child where this process may
  create one (shared memory and tmpfs pages included), else an address-space limit; a process
  count limit; files capped at the scratch size; the time limit is the worker's (it kills the
  child).

The child talks to its worker through one pipe of JSON lines; the worker re-checks and re-encodes
every line, so the child cannot reach the client's protocol. Stdlib only.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import errno
import json
import os
import resource
import select
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

from . import process_tree
from .sandbox_cgroup import MemoryCgroup

INSIDE_ID = 1000  # uid and gid inside the sandbox
NOBODY = 65534  # what INSIDE_ID is outside when pallasite runs as root
SCRATCH = "/scratch"
DEVICES = ("null", "zero", "full", "random", "urandom")
SYSTEM_PATHS = ("/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin")
SYSTEM_INFO = ("/sys/devices/system/cpu", "/sys/devices/system/node")  # CPU counts (tcmalloc, XLA), read-only
ETC_FILES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime")
TPU_DEVICES = ("/dev/accel0", "/dev/accel1", "/dev/accel2", "/dev/accel3", "/dev/vfio")  # bound only where present

_CLONE_NEWNS, _CLONE_NEWUTS, _CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
_CLONE_NEWUSER, _CLONE_NEWPID, _CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 32, 4096, 16384, 1 << 18
_MNT_DETACH = 2
_SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}
_SYS_MOUNT_SETATTR = 442
_AT_FDCWD, _AT_RECURSIVE, _MOUNT_ATTR_RDONLY, _MOUNT_ATTR_NOSUID, _MOUNT_ATTR_NODEV = -100, 0x8000, 0x1, 0x2, 0x4
_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE = 1, 4
EXIT_SETUP = 71  # the child could not build its sandbox (its stderr says which step)


class SandboxError(OSError):
    """A step of building the sandbox failed (the message names the step and the system's reason)."""


@dataclasses.dataclass(frozen=True)
class Limits:
    """What one sandboxed child may use."""

    memory_mb: int = 4096
    scratch_mb: int = 1024
    processes: int = 4096  # threads count too (XLA starts one per core)
    open_files: int = 1024


@dataclasses.dataclass
class Outcome:
    """How a child ended: its messages were handed on as they came; this is the rest."""

    code: int | None  # exit code, or -signal
    memory_exceeded: bool = False
    killed_for: str | None = None  # "deadline", "cancelled", "too much output" when the worker killed it
    setup_error: str | None = None


# --------------------------------------------------------------------------- what is visible


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def package_root() -> str:
    """The folder holding pallasite's packages (this file is runner/isolation/sandbox.py)."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def readable_paths() -> list[str]:
    """Folders bound read-only: the interpreter's prefixes, the package folders on ``sys.path`` that lie
    in them or are site-/dist-packages, and the system's library folders. Nothing else of the user's."""
    prefixes = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)}
    prefixes |= {os.path.abspath(p) for p in (sys.prefix, sys.base_prefix)}
    chosen = set(prefixes)
    for entry in sys.path:
        if not entry or not os.path.isdir(entry):
            continue
        real = os.path.realpath(entry)
        if any(_under(real, p) for p in prefixes) or os.path.basename(real) in ("site-packages", "dist-packages"):
            chosen.add(real)
    for exe in (sys.executable, os.path.realpath(sys.executable)):
        chosen.add(os.path.dirname(exe))
    chosen |= {p for p in SYSTEM_PATHS if os.path.isdir(p) and not os.path.islink(p)}
    chosen |= {p for p in SYSTEM_INFO if os.path.isdir(p)}
    return sorted(p for p in chosen if os.path.exists(p))


def interpreter_links() -> list[str]:
    """The symlinks from ``sys.executable`` to the file it runs, hop by hop: a venv's ``python3`` may name a
    ``python3`` that is itself a link in a folder nothing else binds (a shim folder on PATH, a Homebrew
    ``bin``). Each is made again as a link in the sandbox, so exec'ing the interpreter works there and
    nothing else of that folder is shown."""
    hops, path = [], os.path.abspath(sys.executable)
    for _ in range(40):  # the kernel's own limit on a chain of links
        if not os.path.islink(path):
            break
        hops.append(path)
        path = os.path.normpath(os.path.join(os.path.dirname(path), os.readlink(path)))
    return hops


def package_paths() -> list[str]:
    """pallasite's own module folders and files when it is not inside a bound prefix (an editable
    checkout): each folder holding an ``__init__.py`` and the top-level ``.py`` files, so files
    beside them (a ``.env``, the tests, the user's notes) stay out."""
    root = package_root()
    if any(_under(root, p) for p in readable_paths()):
        return []
    found = []
    for entry in sorted(os.scandir(root), key=lambda e: e.name):
        if entry.is_dir(follow_symlinks=False) and os.path.isfile(os.path.join(entry.path, "__init__.py")):
            found.append(entry.path)
        elif entry.is_file(follow_symlinks=False) and entry.name.endswith(".py"):
            found.append(entry.path)
    return found


# --------------------------------------------------------------------------- system calls


def _libc() -> Any:
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, step: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise SandboxError(code, f"sandbox: {step} failed: {os.strerror(code)}")


def _mount(libc: Any, source: str | None, target: str, fstype: str | None, flags: int, data: str | None,
           step: str) -> None:
    _check(libc.mount(source.encode() if source else None, target.encode(), fstype.encode() if fstype else None,
                      ctypes.c_ulong(flags), data.encode() if data else None), step)


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]


def _read_only(libc: Any, target: str, devices: bool = False) -> None:
    """Every mount at and under ``target`` read-only and nosuid (and nodev unless it holds ``devices``)."""
    flags = _MOUNT_ATTR_RDONLY | _MOUNT_ATTR_NOSUID | (0 if devices else _MOUNT_ATTR_NODEV)
    attr = _MountAttr(flags, 0, 0, 0)
    _check(libc.syscall(_SYS_MOUNT_SETATTR, _AT_FDCWD, target.encode(), _AT_RECURSIVE, ctypes.byref(attr),
                        ctypes.sizeof(attr)), f"making {target} read-only")


def _bind(libc: Any, source: str, root: str, *, writable: bool = False) -> None:
    where = root + source
    if os.path.isdir(source):
        os.makedirs(where, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(where), exist_ok=True)
        if not os.path.exists(where):
            open(where, "w").close()
    _mount(libc, source, where, None, _MS_BIND | _MS_REC, None, f"binding {source}")
    if not writable:
        _read_only(libc, where, devices=source.startswith("/dev/"))


# --------------------------------------------------------------------------- the child's side


def _build_root(libc: Any, mountpoint: str, limits: Limits, binds: list[str], files: list[str],
                links: list[str]) -> None:
    """Inside the new namespaces, as the namespace's root: the new ``/``, then pivot into it."""
    _mount(libc, None, "/", None, _MS_REC | _MS_PRIVATE, None, "making the mounts private")
    root = mountpoint
    _mount(libc, "tmpfs", root, "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=0755,size=16m", "mounting the new root")
    # the scratch first (one size-capped tmpfs, also /tmp and /dev/shm), so that an interpreter or
    # checkout living under /tmp is bound on top of the private /tmp, not hidden by it
    os.makedirs(root + SCRATCH)
    _mount(libc, "tmpfs", root + SCRATCH, "tmpfs", _MS_NOSUID | _MS_NODEV,
           f"mode=0700,uid={INSIDE_ID},gid={INSIDE_ID},size={limits.scratch_mb}m", "mounting the scratch")
    for sub in ("tmp", "shm", "home", "cache", "work"):
        os.makedirs(root + SCRATCH + "/" + sub)
        os.chown(root + SCRATCH + "/" + sub, INSIDE_ID, INSIDE_ID)
    os.makedirs(root + "/tmp")
    _mount(libc, root + SCRATCH + "/tmp", root + "/tmp", None, _MS_BIND, None, "binding /tmp")
    for path in binds:
        _bind(libc, path, root)
    for path in files:
        _bind(libc, path, root)
    for link in SYSTEM_PATHS:  # merged-/usr systems: /lib -> usr/lib and so on
        if os.path.islink(link) and not os.path.lexists(root + link):
            os.symlink(os.readlink(link), root + link)
    for link in links:  # the links to the interpreter that no bound folder holds
        if not os.path.lexists(root + link):
            os.makedirs(os.path.dirname(root + link), exist_ok=True)
            os.symlink(os.readlink(link), root + link)
    # /etc: the loader's cache and a passwd that names the sandbox's user, nothing else
    os.makedirs(root + "/etc", exist_ok=True)
    for name in ETC_FILES:
        if os.path.exists("/etc/" + name):
            _bind(libc, "/etc/" + name, root)
    with open(root + "/etc/passwd", "w") as out:
        out.write(f"root:x:0:0::/:/bin/false\nsandbox:x:{INSIDE_ID}:{INSIDE_ID}::{SCRATCH}/home:/bin/false\n")
    with open(root + "/etc/group", "w") as out:
        out.write(f"root:x:0:\nsandbox:x:{INSIDE_ID}:\n")
    with open(root + "/etc/hosts", "w") as out:
        out.write("127.0.0.1 localhost\n")
    # /dev: the harmless devices only (no disk, no terminal, no /dev/pts)
    os.makedirs(root + "/dev")
    _mount(libc, "tmpfs", root + "/dev", "tmpfs", _MS_NOSUID, "mode=0755,size=64k", "mounting /dev")
    for name in DEVICES:
        _bind(libc, "/dev/" + name, root)
    for device in TPU_DEVICES:  # a local TPU host: the chips, so a sandboxed candidate can be timed on them
        if os.path.exists(device):
            _bind(libc, device, root, writable=True)
    os.makedirs(root + "/dev/shm")
    _mount(libc, root + SCRATCH + "/shm", root + "/dev/shm", None, _MS_BIND, None, "binding /dev/shm")
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2")):
        os.symlink(target, root + "/dev/" + name)
    _read_only(libc, root + "/dev", devices=True)
    os.makedirs(root + "/proc")
    # writable (as every /proc is): a process may write its own child user namespace's uid map there, which the
    # judge's candidate process does to get a PID namespace of its own (runner/isolation/nest.py); uid 1000
    # with no capability writes nothing else of note (/proc/sys is root's)
    _mount(libc, "proc", root + "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, None, "mounting /proc")
    # into the new root; the old one is detached and gone
    os.chdir(root)
    machine = os.uname().machine
    _check(libc.syscall(_SYS_PIVOT_ROOT.get(machine, 41), b".", b"."), "pivot_root")
    _check(libc.umount2(b".", _MNT_DETACH), "detaching the old root")
    os.chdir("/")
    _mount(libc, None, "/", None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID | _MS_NODEV, None,
           "making / read-only")


def _become_nobody(libc: Any, limits: Limits, cgroup: bool) -> None:
    from .. import capabilities

    capabilities.drop_bounding_set(libc)  # needs CAP_SETPCAP: before the user ids change
    with contextlib.suppress(OSError):
        os.setgroups([])
    os.setresgid(INSIDE_ID, INSIDE_ID, INSIDE_ID)
    os.setresuid(INSIDE_ID, INSIDE_ID, INSIDE_ID)
    capabilities.drop_capabilities(libc, bounding=False)
    mb = 2**20
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.scratch_mb * mb,) * 2)
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits.open_files,) * 2)
    resource.setrlimit(resource.RLIMIT_NPROC, (limits.processes,) * 2)
    if not cgroup:  # no memory cgroup: the address space is what the kernel can count
        space = (limits.memory_mb + 8192) * mb  # XLA reserves address space well beyond what it touches
        resource.setrlimit(resource.RLIMIT_AS, (space, space))


def _child(ready_w: int, go_r: int, out_w: int, body: Callable[[Callable[[dict[str, Any]], None]], None],
           mountpoint: str, limits: Limits, binds: list[str], files: list[str], keep_fds: tuple[int, ...],
           links: list[str]) -> None:
    """The forked child (never returns). Stage 1 makes the namespaces; stage 2 (PID 1 of the new PID
    namespace) builds the root, becomes nobody and runs ``body``."""
    try:
        libc = _libc()
        os.setsid()  # no controlling terminal
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        keep = {0, 1, 2, ready_w, go_r, out_w, *keep_fds}
        for fd in _open_fds():
            if fd not in keep:
                with contextlib.suppress(OSError):
                    os.close(fd)
        _check(libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNS | _CLONE_NEWPID | _CLONE_NEWNET | _CLONE_NEWIPC
                            | _CLONE_NEWUTS), "unshare (user, mount, PID, network, IPC, UTS namespaces)")
        os.write(ready_w, b"u")
        answer = os.read(go_r, 64)
        os.close(go_r)
        if not answer.startswith(b"go"):
            raise SandboxError(errno.EPERM, "sandbox: the worker could not set the user ids: "
                                            + answer.decode("utf-8", "replace"))
        cgroup = answer == b"go cgroup"
        pid = os.fork()
        if pid:  # stage 1: tell the worker stage 2's pid (as process 1 of its namespace, only a SIGKILL
            # from outside ends it: the parent-death signal does not), then wait for it
            os.write(ready_w, f"{pid}\n".encode())
            os.close(ready_w)
            os.close(out_w)
            _, status = os.waitpid(pid, 0)
            os._exit(os.waitstatus_to_exitcode(status) & 0xFF if os.WIFEXITED(status)
                     else 128 + os.WTERMSIG(status))
        os.close(ready_w)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        _build_root(libc, mountpoint, limits, binds, files, links)
        with contextlib.suppress(OSError):
            socket.sethostname("sandbox")
        _become_nobody(libc, limits, cgroup)
    except BaseException as exc:  # noqa: BLE001 - reported on stderr, then the setup exit code
        with contextlib.suppress(Exception):
            os.write(2, f"pallasite sandbox: {exc}\n".encode())
        os._exit(EXIT_SETUP)
    code = 0
    try:
        os.environ.update(HOME=SCRATCH + "/home", TMPDIR="/tmp", TMP="/tmp", TEMP="/tmp",
                          XDG_CACHE_HOME=SCRATCH + "/cache", XDG_CONFIG_HOME=SCRATCH + "/home/.config",
                          XDG_DATA_HOME=SCRATCH + "/home/.local")
        tempfile.tempdir = None
        os.chdir(SCRATCH + "/work")
        out = os.fdopen(out_w, "wb", buffering=0)

        def send(message: dict[str, Any]) -> None:
            out.write((json.dumps(message, allow_nan=False, default=str) + "\n").encode())

        body(send)
    except BaseException:  # noqa: BLE001 - the body reports its own failures; this is the last word
        import traceback

        traceback.print_exc()
        code = 1
    os._exit(code)


def _unsandboxed_child(out_w: int, body: Callable[..., None], keep_fds: tuple[int, ...]) -> None:
    """The user opted in to run model code without namespaces: still a fresh process of its own."""
    code = 0
    try:
        os.setsid()
        _libc().prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        for fd in _open_fds():
            if fd not in {0, 1, 2, out_w, *keep_fds}:
                with contextlib.suppress(OSError):
                    os.close(fd)
        out = os.fdopen(out_w, "wb", buffering=0)
        body(lambda message: out.write((json.dumps(message, allow_nan=False, default=str) + "\n").encode()))
    except BaseException:  # noqa: BLE001
        import traceback

        traceback.print_exc()
        code = 1
    os._exit(code)


def _open_fds() -> list[int]:
    try:
        return [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:
        return list(range(3, 256))


# --------------------------------------------------------------------------- the worker's side


def _write_maps(pid: int) -> None:
    outside = NOBODY if os.geteuid() == 0 else os.geteuid()
    outside_gid = NOBODY if os.geteuid() == 0 else os.getegid()
    if os.geteuid() != 0:
        with open(f"/proc/{pid}/setgroups", "w") as out:
            out.write("deny")
    # As root, the child builds its root as uid 0 (its files must be owned by a mapped uid, and it
    # reads the bind sources as root), then becomes INSIDE_ID = nobody for good: no capability is
    # left to change back, and no_new_privs and nosuid mounts rule out set-uid programs.
    setup = "0 0 1\n" if os.geteuid() == 0 else ""
    with open(f"/proc/{pid}/uid_map", "w") as out:
        out.write(f"{setup}{INSIDE_ID} {outside} 1\n")
    with open(f"/proc/{pid}/gid_map", "w") as out:
        out.write(f"{setup}{INSIDE_ID} {outside_gid} 1\n")


@dataclasses.dataclass
class Sandboxes:
    """The factory of sandboxed children, forking the process it is used in: the fork server's
    (runner/isolation/sandbox_server.py: a process with one thread) and the probe's. ``confined``: build the sandbox
    (else a plain fresh process: the user opted in to run without namespaces). ``binds`` and ``links``:
    what is bound and linked in (default: ``readable_paths() + package_paths()``, ``interpreter_links()``)."""

    limits: Limits = dataclasses.field(default_factory=Limits)
    confined: bool = True
    mountpoint: str = ""
    keep_fds: tuple[int, ...] = ()
    binds: list[str] | None = None
    links: list[str] | None = None
    _count: int = 0

    def __post_init__(self) -> None:
        if self.confined and not self.mountpoint:
            self.mountpoint = tempfile.mkdtemp(prefix="pallasite-root-")
        if self.binds is None:
            self.binds = readable_paths() + package_paths() if self.confined else []
        if self.links is None:
            self.links = interpreter_links() if self.confined else []
        self._binds = list(self.binds)

    def start(self, body: Callable[[Callable[[dict[str, Any]], None]], None]) -> "Child":
        """Fork a child that builds its sandbox and runs ``body(send)``; messages come back through ``Child``."""
        self._count += 1
        out_r, out_w = os.pipe()
        cgroup = MemoryCgroup.create(f"pallasite-{os.getpid()}-{self._count}", self.limits.memory_mb,
                                     self.limits.processes) if self.confined else None
        if not self.confined:
            pid = os.fork()
            if pid == 0:
                os.close(out_r)
                _unsandboxed_child(out_w, body, self.keep_fds)
            os.close(out_w)
            return Child(pid, out_r, cgroup=None, setup_failed=None)
        ready_r, ready_w = os.pipe()
        go_r, go_w = os.pipe()
        dirs = [p for p in self._binds if os.path.isdir(p)]
        files = [p for p in self._binds if not os.path.isdir(p)]
        pid = os.fork()
        if pid == 0:
            for fd in (out_r, ready_r, go_w):
                os.close(fd)
            _child(ready_w, go_r, out_w, body, self.mountpoint, self.limits, dirs, files, self.keep_fds,
                   list(self.links or ()))
        for fd in (out_w, ready_w, go_r):
            os.close(fd)
        problem = None
        try:
            if os.read(ready_r, 1) != b"u":
                problem = "the child ended before making its namespaces"
            else:
                _write_maps(pid)
                if cgroup is not None:
                    cgroup.add(pid)
        except OSError as exc:
            problem = f"writing the child's user ids or cgroup failed: {exc}"
        with contextlib.suppress(OSError):
            os.write(go_w, (b"go cgroup" if cgroup is not None else b"go") if problem is None else problem.encode())
        os.close(go_w)
        inner = None
        with contextlib.suppress(OSError, ValueError), os.fdopen(ready_r, "rb") as stream:
            inner = int(stream.read(32).strip() or b"0") or None  # stage 2's pid, once stage 1 has forked it
        return Child(pid, out_r, cgroup=cgroup, setup_failed=problem, inner=inner)


class Child:
    """One sandboxed child: its messages (``messages``), then how it ended (``outcome``)."""

    MAX_LINE = 64 * 2**20  # one message; a child that writes more is killed

    def __init__(self, pid: int, out_r: int, cgroup: MemoryCgroup | None, setup_failed: str | None,
                 inner: int | None = None) -> None:
        self.pid, self.out_r, self.cgroup, self.setup_failed = pid, out_r, cgroup, setup_failed
        self.inner = inner  # the sandboxed process (process 1 of its PID namespace), as this process sees it
        self.killed_for: str | None = None
        self.descendants: list[int] = []  # the processes below it that ``kill`` signalled (``outcome`` reaps)

    def kill(self, why: str) -> None:
        """SIGKILL the sandboxed process (ending everything in its PID namespace), its parent, and every
        process they started, in whatever session (an unconfined child has no PID namespace of its own:
        the judge's candidate process would outlive it)."""
        if self.killed_for is None:
            self.killed_for = why
            self.descendants = process_tree.kill_tree(self.pid)
        for pid in (self.inner, self.pid):
            if pid:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)

    def messages(self, deadline: float | None = None) -> Iterator[dict[str, Any] | str]:
        """Each JSON object the child sends (a line that is not one comes as its text)."""
        buffer = b""
        with os.fdopen(self.out_r, "rb", buffering=0) as stream:
            while True:
                timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
                ready, _, _ = select.select([stream], [], [], timeout)
                if not ready:
                    self.kill("deadline")
                    continue
                chunk = stream.read(1 << 16)
                if not chunk:
                    break
                buffer += chunk
                if len(buffer) > self.MAX_LINE:
                    self.kill("too much output")
                    buffer = b""
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    try:
                        value = json.loads(line)
                    except ValueError:
                        yield line.decode("utf-8", "replace")[:200]
                        continue
                    yield value if isinstance(value, dict) else str(value)[:200]

    def outcome(self) -> Outcome:
        _, status = os.waitpid(self.pid, 0)
        if self.killed_for is not None and self.inner:  # orphaned by its parent's kill: ours to reap
            for _ in range(200):
                try:
                    if os.waitpid(self.inner, os.WNOHANG)[0]:
                        break
                except ChildProcessError:
                    break
                time.sleep(0.01)
        process_tree.reap(self.descendants)  # (re-parented here: the worker is their child subreaper)
        code = os.waitstatus_to_exitcode(status)
        if code > 128 and code - 128 < 65:  # stage 1 reports stage 2's signal as 128 + N
            code = -(code - 128)
        exceeded = self.cgroup.exceeded() if self.cgroup is not None else False
        if self.cgroup is not None:
            self.cgroup.remove()
        setup = self.setup_failed or ("the sandbox could not be built (see the worker's stderr)"
                                      if code == EXIT_SETUP else None)
        return Outcome(code=code, memory_exceeded=exceeded, killed_for=self.killed_for, setup_error=setup)


# --------------------------------------------------------------------------- the probe


def probe() -> str | None:
    """None when a sandboxed child can be made here and holds; else what fails (a sentence)."""
    sandboxes = Sandboxes(limits=Limits(memory_mb=512, scratch_mb=16))
    try:
        home = os.path.expanduser("~")
        child = sandboxes.start(lambda send: send({"problem": verify(home)}))
        seen = [m for m in child.messages(time.monotonic() + 30) if isinstance(m, dict)]
        outcome = child.outcome()
    finally:
        with contextlib.suppress(OSError):
            os.rmdir(sandboxes.mountpoint)
    if outcome.setup_error or not seen:
        return outcome.setup_error or f"the sandboxed child ended with code {outcome.code} and no answer"
    return seen[0].get("problem")


def verify(home: str = "") -> str | None:
    """Run inside a sandbox: None when it holds, else what does not (a sentence). ``home``: the user's
    home outside; inside it may hold only the folders leading to a bound interpreter."""
    if os.getuid() == 0 or os.geteuid() == 0:
        return "the sandbox runs as root"
    for path in ("/run", "/var", "/dev/pts", "/sys/block", "/sys/class", "/dev/sda", "/dev/vda", "/dev/tty"):
        if os.path.exists(path):
            return f"{path} is visible"
    if home and os.path.isdir(home):
        for entry in os.scandir(home):
            if not entry.is_dir(follow_symlinks=False) or not any(_under(p, entry.path) for p in readable_paths()):
                return f"{entry.path} is visible"
    for path in ("/", "/usr"):
        try:
            with tempfile.NamedTemporaryFile(dir=path):
                return f"{path} is writable"
        except OSError:
            pass
    try:
        with tempfile.NamedTemporaryFile(dir=SCRATCH + "/work"):
            pass
    except OSError as exc:
        return f"the scratch folder is not writable ({exc})"
    try:
        with socket.create_connection(("192.0.2.1", 9), timeout=1):
            return "the network is reachable"
    except OSError as exc:
        if exc.errno not in (errno.ENETUNREACH, errno.EHOSTUNREACH, errno.EACCES, errno.EPERM):
            return f"the network answered ({exc})"
    from . import nest  # the judge's candidate process must get a PID namespace of its own in here

    return nest.probe()


if __name__ == "__main__":
    problem = probe()
    print(problem or "the sandbox holds")
    sys.exit(3 if problem else 0)
