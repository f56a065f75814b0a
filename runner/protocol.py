"""The worker protocol: JSON lines between a client and a ``pallasite worker`` (stdlib only).

One JSON object per line, UTF-8, each with a ``kind``. The worker speaks first (``handshake``);
the client then sends ``request``s, and may send ``cancel`` or ``shutdown`` at any time. The
worker answers every request with exactly one ``result`` and may send ``progress`` before it.
docs/worker-protocol.md is the written contract; this module is its only implementation, used
by both sides (the client imports it without JAX).

Bump ``PROTOCOL_VERSION`` on any incompatible change; a client refuses a worker whose handshake
names another version (``check_handshake``).
"""

from __future__ import annotations

import itertools
import json
import os
import traceback as traceback_module
from dataclasses import dataclass, field
from typing import Any

PROTOCOL_VERSION = 1

# Message kinds, worker -> client
HANDSHAKE = "handshake"
PROGRESS = "progress"
RESULT = "result"
# Message kinds, client -> worker
REQUEST = "request"
CANCEL = "cancel"
SHUTDOWN = "shutdown"

CLIENT_KINDS = (REQUEST, CANCEL, SHUTDOWN)
WORKER_KINDS = (HANDSHAKE, PROGRESS, RESULT)

# The worker exits with this code when its own memory watchdog trips (--memory-mb), so a client
# that cannot watch the process itself (ssh) still learns why it died.
EXIT_MEMORY_LIMIT = 86

# Error types a worker reports that are about the protocol rather than the op.
ERROR_CANCELLED = "Cancelled"
ERROR_DEADLINE = "DeadlineExceeded"
ERROR_UNKNOWN_OP = "UnknownOp"
ERROR_BAD_REQUEST = "BadRequest"


class ProtocolError(ValueError):
    """A line that is not a valid protocol message (the message says what is wrong)."""


@dataclass(frozen=True)
class Handshake:
    """What a worker says about itself before anything else."""

    protocol: int
    pid: int
    pallasite: str | None = None
    python: str | None = None
    jax: str | None = None
    jaxlib: str | None = None
    libtpu: str | None = None
    platform: str | None = None  # jax.default_backend(), e.g. "cpu" or "tpu"
    devices: tuple[str, ...] = ()  # device_kind of each local device
    ops: tuple[str, ...] = ()  # the ops this worker serves
    startup_s: float | None = None  # seconds from process start to handshake (imports included)
    error: str | None = None  # e.g. "jax is not importable: ..." (the worker still serves ping)

    def to_message(self) -> dict[str, Any]:
        msg: dict[str, Any] = {"kind": HANDSHAKE}
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            msg[name] = list(value) if isinstance(value, tuple) else value
        return msg

    @staticmethod
    def from_message(msg: dict[str, Any]) -> "Handshake":
        names = Handshake.__dataclass_fields__
        values = {k: v for k, v in msg.items() if k in names}
        for key in ("devices", "ops"):
            values[key] = tuple(values.get(key) or ())
        if not isinstance(values.get("protocol"), int) or not isinstance(values.get("pid"), int):
            raise ProtocolError(f"handshake without integer 'protocol' and 'pid': {msg!r:.200}")
        return Handshake(**values)


def check_handshake(handshake: Handshake) -> None:
    """Raise ProtocolError if the worker speaks another protocol version."""
    if handshake.protocol != PROTOCOL_VERSION:
        raise ProtocolError(
            f"worker (pid {handshake.pid}) speaks protocol {handshake.protocol}, this client speaks "
            f"{PROTOCOL_VERSION}: install the same pallasite version in the worker's environment"
        )


@dataclass(frozen=True)
class ErrorInfo:
    """Why an op failed: the exception's type name, its message, and the formatted traceback."""

    type: str
    message: str
    traceback: str = ""

    @staticmethod
    def from_exception(exc: BaseException) -> "ErrorInfo":
        return ErrorInfo(
            type=type(exc).__name__,
            message=str(exc),
            traceback="".join(traceback_module.format_exception(exc)),
        )

    def to_json(self) -> dict[str, str]:
        return {"type": self.type, "message": self.message, "traceback": self.traceback}


# --------------------------------------------------------------------------- building messages

_ids = itertools.count(1)


def new_request_id() -> str:
    """A request id unique within this client process (ids are opaque strings to the worker)."""
    return f"{os.getpid()}-{next(_ids)}"


def request(id: str, op: str, params: dict[str, Any] | None = None, deadline_s: float | None = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"kind": REQUEST, "id": id, "op": op, "params": params or {}}
    if deadline_s is not None:
        msg["deadline_s"] = deadline_s
    return msg


def progress(id: str, message: str, fraction: float | None = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"kind": PROGRESS, "id": id, "message": message}
    if fraction is not None:
        msg["fraction"] = fraction
    return msg


def result_ok(id: str, result: Any) -> dict[str, Any]:
    return {"kind": RESULT, "id": id, "ok": True, "result": result}


def result_error(id: str | None, error: ErrorInfo) -> dict[str, Any]:
    return {"kind": RESULT, "id": id, "ok": False, "error": error.to_json()}


def cancel(id: str) -> dict[str, Any]:
    return {"kind": CANCEL, "id": id}


def shutdown() -> dict[str, Any]:
    return {"kind": SHUTDOWN}


# --------------------------------------------------------------------------- wire format


def encode(msg: dict[str, Any]) -> bytes:
    """One message as one line. Non-finite floats are refused (they are not JSON)."""
    return (json.dumps(msg, ensure_ascii=False, allow_nan=False, default=_default) + "\n").encode("utf-8")


def _default(value: Any) -> Any:
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    if hasattr(value, "tolist"):  # numpy scalars and arrays
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def decode(line: bytes | str) -> dict[str, Any]:
    """Parse one line into a message; ProtocolError says what is wrong with it."""
    if isinstance(line, bytes):
        try:
            line = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ProtocolError(f"message is not UTF-8: {exc}") from None
    try:
        msg = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ProtocolError(f"not a JSON line ({exc.msg} at column {exc.colno}): {line[:200]!r}") from None
    if not isinstance(msg, dict) or not isinstance(msg.get("kind"), str):
        raise ProtocolError(f"a message must be a JSON object with a string 'kind': {line[:200]!r}")
    kind = msg["kind"]
    if kind not in CLIENT_KINDS + WORKER_KINDS:
        raise ProtocolError(f"unknown message kind {kind!r}; known: {', '.join(CLIENT_KINDS + WORKER_KINDS)}")
    if kind in (REQUEST, PROGRESS, CANCEL) and not isinstance(msg.get("id"), str):
        raise ProtocolError(f"a {kind} message needs a string 'id': {line[:200]!r}")
    if kind == REQUEST:
        if not isinstance(msg.get("op"), str):
            raise ProtocolError(f"a request needs a string 'op': {line[:200]!r}")
        if not isinstance(msg.setdefault("params", {}), dict):
            raise ProtocolError(f"a request's 'params' must be an object: {line[:200]!r}")
        deadline = msg.get("deadline_s")
        if deadline is not None and not isinstance(deadline, (int, float)):
            raise ProtocolError(f"a request's 'deadline_s' must be a number of seconds: {line[:200]!r}")
    if kind == RESULT and not isinstance(msg.get("ok"), bool):
        raise ProtocolError(f"a result needs a boolean 'ok': {line[:200]!r}")
    return msg


@dataclass
class FileParams:
    """How a file travels in ``params``: its path on the worker's machine, plus optionally the
    editor's unsaved text. The text is compiled under the original path (no temp copy), so
    tracebacks name the user's file, line numbers match the buffer, and sibling imports resolve
    from the file's own directory."""

    path: str
    text: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @staticmethod
    def from_params(params: dict[str, Any]) -> "FileParams":
        path = params.get("path")
        if not isinstance(path, str) or not path:
            raise ProtocolError("params need 'path': the kernel file's path on the worker's machine")
        text = params.get("text")
        if text is not None and not isinstance(text, str):
            raise ProtocolError("params 'text', when given, must be the file's text as a string")
        extra = {k: v for k, v in params.items() if k not in ("path", "text")}
        return FileParams(path=path, text=text, extra=extra)
