"""The worker protocol: JSON lines between a client and a ``pallasite worker`` (stdlib only).

One JSON object per line, UTF-8, each with a ``kind``. Payloads (params, results, progress) are the
typed dataclasses of ``wire/messages.py``, written with ``analysis.types.to_json`` and read back
strictly (``read_params``, ``read_result``, ``read_progress``). The worker speaks first (``handshake``);
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
from dataclasses import dataclass
from typing import Any

from ..analysis.types import to_json
from .messages import (  # noqa: F401 - re-exported: the payload types live there
    PARAMS,
    RESULTS,
    ErrorInfo,
    Progress,
    ProtocolError,
    Stage,
    decode_as,
)

PROTOCOL_VERSION = 2

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
        if not isinstance(msg.get("protocol"), int):
            raise ProtocolError(f"handshake without an integer 'protocol' (a pallasite worker older than "
                                f"protocol 1, or not a pallasite worker): {msg!r:.200}")
        if msg["protocol"] != PROTOCOL_VERSION:  # read nothing else: another version may differ in anything
            return Handshake(protocol=msg["protocol"], pid=msg.get("pid") if isinstance(msg.get("pid"), int) else 0,
                             pallasite=msg.get("pallasite") if isinstance(msg.get("pallasite"), str) else None)
        names = Handshake.__dataclass_fields__
        return decode_as(Handshake, {k: v for k, v in msg.items() if k in names}, "handshake")


def check_handshake(handshake: Handshake) -> None:
    """Raise ProtocolError if the worker speaks another protocol version."""
    if handshake.protocol != PROTOCOL_VERSION:
        theirs = f"pallasite {handshake.pallasite}" if handshake.pallasite else "another pallasite version"
        raise ProtocolError(
            f"the worker (pid {handshake.pid}, {theirs}) speaks worker protocol {handshake.protocol}; this "
            f"pallasite speaks protocol {PROTOCOL_VERSION}. Install the same pallasite version in the worker's "
            f"environment, pallasite {_own_version()}: `python -m pip install pallasite-{_own_version()}-py3-none-any.whl` "
            "(a wheel built in this checkout: `pip wheel --no-deps --wheel-dir dist .`) or `python -m pip install /path/to/pallasite` "
            "(docs/tpu.md)"
        )


def _own_version() -> str:
    from ..analysis.types import installed_versions

    return installed_versions().get("pallasite") or "<this version>"


def error_info(exc: BaseException) -> ErrorInfo:
    """An op's exception as data: its type name, message and formatted traceback."""
    return ErrorInfo(type=type(exc).__name__, message=str(exc),
                     traceback="".join(traceback_module.format_exception(exc)))


# --------------------------------------------------------------------------- building messages

_ids = itertools.count(1)


def new_request_id() -> str:
    """A request id unique within this client process (ids are opaque strings to the worker)."""
    return f"{os.getpid()}-{next(_ids)}"


def request(id: str, params: Any, deadline_s: float | None = None) -> dict[str, Any]:
    """A request for the op ``params`` names (a params dataclass of wire/messages.py)."""
    msg: dict[str, Any] = {"kind": REQUEST, "id": id, "op": type(params).OP, "params": to_json(params)}
    if deadline_s is not None:
        msg["deadline_s"] = deadline_s
    return msg


def progress(id: str, report: Progress) -> dict[str, Any]:
    return {"kind": PROGRESS, "id": id, **to_json(report)}


def result_ok(id: str, result: Any) -> dict[str, Any]:
    return {"kind": RESULT, "id": id, "ok": True, "result": to_json(result)}


def result_error(id: str | None, error: ErrorInfo) -> dict[str, Any]:
    return {"kind": RESULT, "id": id, "ok": False, "error": to_json(error)}


def read_params(op: str, params: Any) -> Any:
    """A request's params as the op's params type; ProtocolError for an unknown op or a bad field."""
    cls = PARAMS.get(op)
    if cls is None:
        raise ProtocolError(f"unknown op {op!r}; ops are {', '.join(sorted(PARAMS))}")
    return decode_as(cls, params, f"{op} params")


def read_result(op: str, result: Any) -> Any:
    """An ok result as the op's result type; ProtocolError names a missing or mistyped field."""
    cls = RESULTS.get(op)
    if cls is None:
        raise ProtocolError(f"unknown op {op!r}; ops are {', '.join(sorted(RESULTS))}")
    return decode_as(cls, result, f"{op} result")


def read_error(msg: dict[str, Any]) -> ErrorInfo:
    return decode_as(ErrorInfo, msg.get("error"), "result.error")


def read_progress(msg: dict[str, Any]) -> Progress:
    names = Progress.__dataclass_fields__
    return decode_as(Progress, {k: v for k, v in msg.items() if k in names}, "progress")


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
    if kind == RESULT and msg["ok"] and "result" not in msg:
        raise ProtocolError(f"an ok result needs its 'result': {line[:200]!r}")
    if kind == RESULT and not msg["ok"] and not isinstance(msg.get("error"), dict):
        raise ProtocolError(f"a failed result needs its 'error' object: {line[:200]!r}")
    return msg
