"""Confinement of model-written code, worker side: a read-only world, a scratch folder, scratch paths.

Code a model wrote (a fixer's proposal, an optimize or search candidate, a test writer's tests,
what ``eval`` runs) runs only in a *confined* worker (``pallasite worker --confine SCRATCH``,
started by the engine for untrusted requests). Two pieces live here:

- ``lock_down(scratch)``: run first, inside the worker's own user, PID, mount and network namespaces
  (``engine/spawn.py`` starts it there): every mount becomes read-only except the scratch folder
  (``mount_setattr(MOUNT_ATTR_RDONLY, AT_RECURSIVE)``; ``/tmp`` and ``/dev/shm`` are private folders
  of the scratch, except one that holds the interpreter, its environment or pallasite, which stays
  shared and read-only: a venv or checkout under /tmp), then every capability is dropped (bounding
  set, ambient, inheritable, effective; no_new_privs), so the code cannot remount anything
  writable again. This matters when pallasite runs as root: ``--map-root-user`` maps to the real
  root, who owns the user's files, so without the read-only view it could still delete them.
  ``python -m pallasite.runner.confine SCRATCH -- CMD...`` locks down, then executes CMD.
- ``Scratch``: per request, a fresh folder under ``SCRATCH/work`` receives the files the request
  carries (``messages.Sources``: the candidate, its local modules and the task files kept beside
  it, such as a MaxKernel ``kernel_task.yaml``), the request's paths are rewritten to it (the
  candidate's ``__file__`` is a scratch path, never the user's), the working folder is changed to
  it, and every message the request sends back has the scratch paths replaced by the user's, so
  findings still name the user's file and lines. HOME, TMPDIR and the XDG folders point inside
  ``SCRATCH`` for the worker's whole life (``private_environment``).

Stdlib only (the worker imports it before anything else).
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import errno
import itertools
import os
import shutil
import socket
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

from pallasite.wire.messages import SourceFile, Sources

PRIVATE_DIRS = ("home", "tmp", "cache", "work")
SHARED_TEMP = ("/tmp", "/dev/shm")  # replaced by private folders of the scratch inside the namespace

_SYS_MOUNT_SETATTR = 442  # the same number on x86_64 and aarch64 (the generic syscall table)
_AT_FDCWD, _AT_RECURSIVE, _MOUNT_ATTR_RDONLY = -100, 0x8000, 0x1
_MS_BIND, _MS_REC = 4096, 16384
_PR_CAPBSET_DROP, _PR_SET_NO_NEW_PRIVS, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 24, 38, 47, 4
_CAP_VERSION_3 = 0x20080522


class ConfineError(OSError):
    """The lock-down could not be completed (the message says which step and why)."""


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _libc() -> Any:
    return ctypes.CDLL(None, use_errno=True)


def _fail(step: str) -> ConfineError:
    code = ctypes.get_errno()
    return ConfineError(code, f"confining the worker failed at {step}: {os.strerror(code)}")


def _needed_paths() -> list[str]:
    """What the confined worker must still see: its interpreter, its environment and pallasite."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return [sys.executable, sys.prefix, sys.base_prefix, package]


def private_temp_dirs(scratch: str, needed: list[str]) -> list[str]:
    """The shared temporary folders (``SHARED_TEMP``) to replace by private ones: each that exists, is
    not a link, and holds neither the scratch folder nor anything in ``needed`` (a private folder
    bound over it would hide them: a venv or a checkout under /tmp). One left shared stays read-only."""
    def under(path: str, folder: str) -> bool:
        return (os.path.abspath(path) + os.sep).startswith(folder + os.sep) or \
            (os.path.realpath(path) + os.sep).startswith(folder + os.sep)

    chosen = []
    for shared in SHARED_TEMP:
        folder = os.path.realpath(shared)
        if os.path.isdir(shared) and not os.path.islink(shared) and \
                not any(under(path, folder) for path in (scratch, *needed)):
            chosen.append(shared)
    return chosen


def lock_down(scratch: str) -> None:
    """Inside fresh user + mount namespaces: everything read-only but ``scratch``, then no capabilities."""
    libc = _libc()
    scratch = os.path.realpath(scratch)
    writable = [scratch]
    binds = [(scratch, scratch)]
    for shared in private_temp_dirs(scratch, _needed_paths()):  # a private /tmp and /dev/shm (libtpu logs to /tmp/tpu_logs)
        private = os.path.join(scratch, "mounts", shared.strip("/").replace("/", "_"))
        os.makedirs(private, exist_ok=True)
        binds.append((private, shared))
        writable.append(shared)
    for source, target in binds:
        if libc.mount(source.encode(), target.encode(), None, _MS_BIND | _MS_REC, None) != 0:
            raise _fail(f"bind-mounting {source} on {target}")
    steps = [("/", _MOUNT_ATTR_RDONLY, 0)] + [(path, 0, _MOUNT_ATTR_RDONLY) for path in writable]
    for path, attr_set, attr_clr in steps:
        attr = _MountAttr(attr_set, attr_clr, 0, 0)
        if libc.syscall(_SYS_MOUNT_SETATTR, _AT_FDCWD, path.encode(), _AT_RECURSIVE, ctypes.byref(attr),
                        ctypes.sizeof(attr)) != 0:
            raise _fail(f"making the mounts under {path} {'read-only' if attr_set else 'writable'} (mount_setattr)")
    drop_capabilities(libc)


def drop_capabilities(libc: Any = None) -> None:
    """No capability now or after any exec: the bounding set emptied, ambient and inheritable
    cleared, no_new_privs set, then effective and permitted cleared."""
    libc = libc or _libc()
    try:
        last = int(open("/proc/sys/kernel/cap_last_cap").read())
    except (OSError, ValueError):
        last = 63
    for cap in range(last + 1):
        if libc.prctl(_PR_CAPBSET_DROP, ctypes.c_ulong(cap), 0, 0, 0) != 0 and ctypes.get_errno() != errno.EINVAL:
            raise _fail(f"dropping capability {cap} from the bounding set")
    if libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 and ctypes.get_errno() != errno.EINVAL:
        raise _fail("clearing the ambient capabilities")
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise _fail("setting no_new_privs")
    header, data = _CapHeader(_CAP_VERSION_3, 0), (_CapData * 2)()
    if libc.capset(ctypes.byref(header), data) != 0:
        raise _fail("clearing the capabilities (capset)")


def verify(scratch: str) -> str | None:
    """Run inside a locked-down namespace (the engine's probe): None when confinement holds, else
    what does not (a sentence)."""
    outside = os.path.dirname(os.path.realpath(scratch))
    try:
        with tempfile.NamedTemporaryFile(dir=outside, prefix=".pallasite-probe-"):
            return f"{outside} is still writable"
    except OSError:
        pass
    try:
        with tempfile.NamedTemporaryFile(dir=scratch):
            pass
    except OSError as exc:
        return f"the scratch folder is not writable ({exc})"
    try:
        with socket.create_connection(("192.0.2.1", 9), timeout=1):  # TEST-NET-1: never routed
            return "the network is reachable"
    except OSError as exc:
        if exc.errno not in (errno.ENETUNREACH, errno.EHOSTUNREACH, errno.EACCES, errno.EPERM):
            return f"the network answered ({exc})"
    return None


def private_environment(scratch: str) -> None:
    """HOME, TMPDIR and the XDG folders inside ``scratch``; the working folder its ``work``."""
    for name in PRIVATE_DIRS:
        os.makedirs(os.path.join(scratch, name), exist_ok=True)
    home, tmp, cache = (os.path.join(scratch, name) for name in ("home", "tmp", "cache"))
    os.environ.update(HOME=home, TMPDIR=tmp, TMP=tmp, TEMP=tmp, XDG_CACHE_HOME=cache,
                      XDG_CONFIG_HOME=os.path.join(home, ".config"), XDG_DATA_HOME=os.path.join(home, ".local"))
    tempfile.tempdir = None  # re-read TMPDIR
    os.chdir(os.path.join(scratch, "work"))


# --------------------------------------------------------------------------- one request


class Scratch:
    """A fresh folder per request under ``root/work`` (see the module docstring)."""

    def __init__(self, root: str) -> None:
        self.root = os.path.realpath(root)
        self._count = itertools.count(1)

    @contextlib.contextmanager
    def request(self, params: Any) -> Iterator[tuple[Any, "PathMap"]]:
        """(params with every ``Sources`` moved into a fresh folder, the map back); the working
        folder is that folder for the duration (the worker restores its own afterwards)."""
        folder = os.path.join(self.root, "work", f"request-{next(self._count)}")
        os.makedirs(folder)
        paths = PathMap()
        moved = _move(params, folder, paths)
        os.chdir(folder)
        try:
            yield moved, paths
        finally:
            with contextlib.suppress(OSError):
                os.chdir(os.path.join(self.root, "work"))
            shutil.rmtree(folder, ignore_errors=True)


@dataclasses.dataclass
class PathMap:
    """Scratch path -> the user's path, applied to every string of an outgoing message."""

    pairs: list[tuple[str, str]] = dataclasses.field(default_factory=list)

    def add(self, scratch: str, original: str) -> None:
        self.pairs.append((scratch, original))
        self.pairs.sort(key=lambda pair: len(pair[0]), reverse=True)

    def back(self, value: Any) -> Any:
        if isinstance(value, str):
            for scratch, original in self.pairs:
                if scratch in value:
                    value = value.replace(scratch, original)
            return value
        if isinstance(value, dict):
            return {k: self.back(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(self.back(v) for v in value)
        return value


def _move(value: Any, folder: str, paths: PathMap) -> Any:
    """``value`` (a params dataclass) with each ``Sources`` in it written under ``folder``."""
    if isinstance(value, Sources):
        return _move_sources(value, folder, paths)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {f.name: _move(getattr(value, f.name), folder, paths) for f in dataclasses.fields(value)
                   if isinstance(getattr(value, f.name), Sources)}
        return dataclasses.replace(value, **changes) if changes else value
    return value


def _move_sources(sources: Sources, folder: str, paths: PathMap) -> Sources:
    base = os.path.abspath(sources.root or os.path.dirname(sources.file.path))
    target = os.path.join(folder, "files")
    known = dict(paths.pairs)
    if target in known and known[target] != base:  # a second Sources from another folder (a reference file)
        target = os.path.join(folder, f"files-{len(paths.pairs)}")
    if target not in known:
        paths.add(target, base)

    def place(file: SourceFile) -> SourceFile:
        original = os.path.abspath(file.path)
        rel = os.path.relpath(original, base)
        if rel.startswith(os.pardir):  # outside the root: keep its name, in a folder of its own
            rel = os.path.join("_outside", str(len(paths.pairs)), os.path.basename(original))
        new = os.path.join(target, rel)
        os.makedirs(os.path.dirname(new), exist_ok=True)
        with open(new, "w", encoding="utf-8") as out:
            out.write(file.text)
        paths.add(new, original)
        return dataclasses.replace(file, path=new)

    return dataclasses.replace(sources, file=place(sources.file), modules=tuple(place(m) for m in sources.modules),
                               root=target if sources.root else None)


# --------------------------------------------------------------------------- the lock-down helper


def main(argv: list[str]) -> int:
    """``confine SCRATCH -- CMD ...``: lock down, then execute CMD; ``confine --verify SCRATCH``:
    the engine's probe (exit 0 when confinement holds, else 3 with the reason on stderr)."""
    if len(argv) == 2 and argv[0] == "--verify":
        problem = verify(argv[1])
        if problem:
            print(problem, file=sys.stderr)
        return 3 if problem else 0
    if len(argv) < 3 or argv[1] != "--":
        print("usage: python -m pallasite.runner.confine SCRATCH -- CMD [ARG...]", file=sys.stderr)
        return 2
    try:
        lock_down(argv[0])
    except OSError as exc:
        print(f"pallasite: {exc}", file=sys.stderr)
        return 3
    os.execvp(argv[2], argv[2:])
    return 2  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
