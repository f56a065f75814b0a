"""Provider keys and other secrets, kept in this process's memory and out of every child's reach.

A kernel (the user's or a model's) runs in a worker whose environment is an allowlist
(wire/env.py), but it could still read ``/proc/<parent>/environ`` of the process that started it.
So every ``pallasite`` command (server/cli.py) calls ``keep_in_memory_only`` first: when the
environment holds anything secret-looking (a name matching wire/env.py's deny patterns:
``GEMINI_API_KEY``, ``OPENAI_API_KEY``, ``AWS_*``, ``GOOGLE_*``, ``SSH_AUTH_SOCK``, ...), the
process re-executes itself with those variables removed, handing their values over through an
in-memory file descriptor that is read and closed at once. From then on the values live only in
this module's dictionary; the process is also marked non-dumpable, so processes of the same user
cannot read its memory through ``/proc`` or a debugger (root still can).

Use ``get(name)`` to read a key (it falls back to ``os.environ`` in a process that was not
re-executed, e.g. a library caller or a test), ``launcher_environment()`` for a program that must
see them (an ``ssh`` launcher needs ``SSH_AUTH_SOCK``); never pass them to a worker.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence

from ...wire.env import is_denied

HANDOFF = "PALLASITE_SECRETS_FD"  # the inherited descriptor holding the values (re-exec only)
_held: dict[str, str] = {}
_reexecuted = False


def get(name: str, default: str | None = None) -> str | None:
    """A secret by its environment name (e.g. ``"GEMINI_API_KEY"``), or ``default``."""
    if name in _held:
        return _held[name]
    value = os.environ.get(name)
    return default if value is None else value


def names() -> list[str]:
    """The names of the secrets held (never their values)."""
    return sorted(set(_held) | {k for k in os.environ if is_denied(k) and k != HANDOFF})


def launcher_environment() -> dict[str, str]:
    """``os.environ`` with the secrets put back, for a launcher such as ``ssh`` (not a worker)."""
    return {**os.environ, **_held}


def reexecuted() -> bool:
    """Whether this process re-executed itself to drop its secrets from its environment."""
    return _reexecuted


def secret_names(env: dict[str, str] | os._Environ) -> list[str]:
    return [k for k in env if is_denied(k) and k != HANDOFF]


def keep_in_memory_only(argv: Sequence[str], module: str = "pallasite.server.cli", *, hand_over: bool = True) -> None:
    """Called first thing by every command. In the re-executed process: take the secrets from the
    hand-off descriptor. Otherwise, if the environment holds secrets: re-execute
    ``python -m module *argv`` without them (does not return); ``hand_over=False`` (a worker, where
    kernel code runs) drops them instead of keeping them in memory. Off Linux, or if the re-exec cannot
    happen, the secrets are removed from ``os.environ`` (children no longer inherit them; the
    process's own ``/proc`` environment still shows them) and a warning says so."""
    global _reexecuted
    fd_text = os.environ.pop(HANDOFF, None)
    if fd_text is not None:
        _take(fd_text)
        _reexecuted = True
        _hide()
        return
    found = secret_names(os.environ)
    if not found:
        _hide()
        return
    values = {k: os.environ[k] for k in found}
    clean = {k: v for k, v in os.environ.items() if k not in values}
    if not hand_over:
        values = {}
    try:
        if values:
            clean[HANDOFF] = str(_handoff(values))
        else:
            clean[HANDOFF] = ""  # re-executed with nothing to take (marks the re-execution)
        sys.stdout.flush()
        sys.stderr.flush()
        os.execve(sys.executable, [sys.executable, "-m", module, *argv], clean)
    except OSError as exc:  # cannot re-execute: at least keep them from every child
        _held.update(values)
        for key in found:
            os.environ.pop(key, None)
        print(f"pallasite: could not re-start without the secret environment variables ({exc}); "
              "they are kept from workers, but this process's /proc environment still shows them.",
              file=sys.stderr)


def _handoff(values: dict[str, str]) -> int:
    data = json.dumps(values).encode("utf-8")
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("pallasite-secrets", 0)
        os.write(fd, data)
        os.lseek(fd, 0, os.SEEK_SET)
        os.set_inheritable(fd, True)  # the re-executed process reads it, then closes it
        return fd
    read_end, write_end = os.pipe()
    if len(data) > 60_000:
        raise OSError("too many secret variables to hand over through a pipe")
    os.write(write_end, data)
    os.close(write_end)
    os.set_inheritable(read_end, True)
    return read_end


def _take(fd_text: str) -> None:
    if not fd_text:
        return
    try:
        fd = int(fd_text)
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        os.close(fd)
        _held.update(json.loads(b"".join(chunks) or b"{}"))
    except (OSError, ValueError) as exc:
        print(f"pallasite: could not read the secrets handed over at start-up ({exc}); "
              "provider keys are unavailable in this session.", file=sys.stderr)


def _hide() -> None:
    from . import spawn

    spawn.hide_from_children()
