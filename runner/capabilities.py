"""Capabilities dropped for good: what the sandbox (runner/isolation/sandbox.py) and the candidate's own namespace
(runner/isolation/nest.py) end their set-up with. ``drop_bounding_set`` / ``drop_capabilities``: no capability
now or after any exec.

Stdlib only (the candidate's process calls it before it imports anything else).
"""

from __future__ import annotations

import ctypes
import errno
import os
from typing import Any

_PR_CAPBSET_DROP, _PR_SET_NO_NEW_PRIVS, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 24, 38, 47, 4
_CAP_VERSION_3 = 0x20080522


class ConfineError(OSError):
    """The lock-down could not be completed (the message says which step and why)."""


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _libc() -> Any:
    return ctypes.CDLL(None, use_errno=True)


def _fail(step: str) -> ConfineError:
    code = ctypes.get_errno()
    return ConfineError(code, f"confining the worker failed at {step}: {os.strerror(code)}")


def drop_bounding_set(libc: Any = None) -> None:
    """No capability can come back through an exec: the bounding set emptied (needs CAP_SETPCAP)."""
    libc = libc or _libc()
    try:
        last = int(open("/proc/sys/kernel/cap_last_cap").read())
    except (OSError, ValueError):
        last = 63
    for cap in range(last + 1):
        if libc.prctl(_PR_CAPBSET_DROP, ctypes.c_ulong(cap), 0, 0, 0) != 0 and ctypes.get_errno() != errno.EINVAL:
            raise _fail(f"dropping capability {cap} from the bounding set")


def drop_capabilities(libc: Any = None, bounding: bool = True) -> None:
    """No capability now or after any exec: the bounding set emptied (``bounding``), ambient and
    inheritable cleared, no_new_privs set, then effective and permitted cleared."""
    libc = libc or _libc()
    if bounding:
        drop_bounding_set(libc)
    if libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 and ctypes.get_errno() != errno.EINVAL:
        raise _fail("clearing the ambient capabilities")
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise _fail("setting no_new_privs")
    header, data = _CapHeader(_CAP_VERSION_3, 0), (_CapData * 2)()
    if libc.capset(ctypes.byref(header), data) != 0:
        raise _fail("clearing the capabilities (capset)")
