"""A throwaway process for the bytes the candidate sent: deserialized, verified and compiled where a crash
ends nothing but itself.

Parsing bytes from the candidate is not safe in the process that holds the device: a 1,556-byte mutated
module aborted inside ``Exported.mlir_module()`` (``malloc(): invalid size``), and a module calling an
allowed custom call with undersized results segfaulted when run. So the judge forks a *verifier* before
it starts any backend (``Throwaway.start``); for each module it is sent, the verifier forks once more and
that child deserializes the bytes, checks them (runner/judging/module_check.py: platforms, inputs,
custom calls from a short list with their result types, effects), reads what the judge needs from them
(``facts``) and compiles them for the CPU. It answers with the facts, or with why the module is refused;
a child that dies answers nothing, and the judge says "the candidate's module crashed the verifier"
(with the signal) and goes on. The judge deserializes the bytes itself only after they passed here.

Worker side: imports jax lazily (in the children).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import struct
from dataclasses import dataclass
from typing import Any

from .channel import undumpable

MAX_MODULE = 256 << 20


@dataclass(frozen=True)
class Checked:
    """The verifier's answer for one module: ``facts`` when it passed, else ``refused`` (why) or ``crashed``."""

    facts: dict[str, Any] | None = None
    refused: str = ""
    crashed: str = ""


def _send(sock: socket.socket, data: bytes) -> None:
    sock.sendall(struct.pack(">Q", len(data)) + data)


def _recv(sock: socket.socket, limit: int = MAX_MODULE) -> bytes | None:
    head = b""
    while len(head) < 8:
        chunk = sock.recv(8 - len(head))
        if not chunk:
            return None
        head += chunk
    (size,) = struct.unpack(">Q", head)
    if size > limit:
        return None
    chunks, left = [], size
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _verify_one(request: dict[str, Any], blob: bytes) -> dict[str, Any]:
    """In the per-module child: what the judge asked about ``blob``, as plain data."""
    from .module_check import Refused, verified

    try:
        exported, facts = verified(blob, request["signature"], request["platform"])
        if request.get("compile", True):
            import jax

            from ..program_export import structs

            jax.jit(exported.call).lower(*structs(request["concrete"])).compile()
    except Refused as exc:
        return {"refused": str(exc)[:2000]}
    except Exception as exc:  # noqa: BLE001 - a module that does not compile here is the candidate's
        return {"refused": f"the module does not compile for the CPU: {type(exc).__name__}: {str(exc)[:600]}"}
    return {"facts": facts}


def _child(sock: socket.socket, header: bytes, blob: bytes) -> None:
    code = 0
    try:
        answer = _verify_one(json.loads(header), blob)
        _send(sock, json.dumps(answer, default=str).encode())
    except BaseException:  # noqa: BLE001 - the server sees no answer
        code = 1
    os._exit(code)


def _serve(sock: socket.socket) -> None:
    """The verifier: one forked child per module; a child's death is the module's, said as such."""
    while True:
        header = _recv(sock, 1 << 20)
        blob = _recv(sock) if header is not None else None
        if header is None or blob is None:
            os._exit(0)
        ours, theirs = socket.socketpair()
        pid = os.fork()
        if pid == 0:
            ours.close()
            sock.close()
            _child(theirs, header, blob)
        theirs.close()
        answer = _recv(ours, 1 << 24)
        ours.close()
        _, status = os.waitpid(pid, 0)
        if answer is None:
            how = (f"signal {signal.Signals(os.WTERMSIG(status)).name}" if os.WIFSIGNALED(status)
                   else f"exit code {os.waitstatus_to_exitcode(status)}")
            answer = json.dumps({"crashed": f"the candidate's module crashed the verifier ({how})"}).encode()
        _send(sock, answer)


def _backend_started() -> bool:
    import sys

    bridge = sys.modules.get("jax._src.xla_bridge")
    return bool(getattr(bridge, "_backends", None))


class Throwaway:
    """The judge's verifier process (see the module docstring). Start it before any jax backend starts."""

    def __init__(self) -> None:
        # forked after a backend started (an unconfined worker warms one up), the verifier's children cannot
        # compile (the backend's threads did not survive the fork): they parse and check only
        self.after_backend = _backend_started()
        ours, theirs = socket.socketpair()
        pid = os.fork()
        if pid == 0:
            ours.close()
            undumpable()
            try:
                _serve(theirs)
            finally:
                os._exit(0)
        theirs.close()
        self.sock, self.pid = ours, pid

    def check(self, blob: bytes, signature: list[Any], platform: str, concrete: list[Any] | None = None) -> Checked:
        """The module ``blob`` verified against the judge's ``signature`` for ``platform`` and compiled for
        the CPU at ``concrete`` (the signature itself when it has no symbolic dims)."""
        request = {"signature": signature, "platform": platform, "concrete": concrete or signature,
                   "compile": platform == "cpu" and not self.after_backend}
        try:
            _send(self.sock, json.dumps(request).encode())
            _send(self.sock, blob)
            answer = _recv(self.sock, 1 << 24)
        except OSError as exc:
            return Checked(crashed=f"the verifier could not be reached ({exc})")
        if answer is None:
            return Checked(crashed="the verifier ended without an answer")
        data = json.loads(answer)
        return Checked(facts=data.get("facts"), refused=str(data.get("refused") or ""),
                       crashed=str(data.get("crashed") or ""))

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(self.pid, 0)
