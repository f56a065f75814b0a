"""A throwaway process for the bytes the candidate sent: deserialized, verified and compiled where a crash
ends nothing but itself.

Parsing bytes from the candidate is not safe in the process that holds the device: a 1,556-byte mutated
module aborted inside ``Exported.mlir_module()`` (``malloc(): invalid size``), and a module calling an
allowed custom call with undersized results segfaulted when run. So the judge starts a *verifier*: a fresh
interpreter (``python -m pallasite.runner.judging.throwaway``; a fork of a process whose backend already
runs threads can deadlock in its child), holding one socket; for each module it is sent, the verifier
forks a child that deserializes the bytes, checks them (runner/judging/module_check.py: platforms, inputs,
custom calls from a short list with their result types, effects), reads what the judge needs from them
(``facts``) and compiles them for the CPU. It answers with the facts, or with why the module is refused;
a child that dies answers nothing, and the judge says "the candidate's module crashed the verifier"
(with the signal) and goes on; one that takes longer than ``MODULE_S`` is killed and said so. The judge
deserializes the bytes itself only after they passed here.

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


MAX_MODULE = 256 << 20
MODULE_S = 180.0  # one module's check and compile, at most


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
        exported, facts = verified(blob, request["signature"], request["platform"], request.get("concrete"))
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
        ours.settimeout(MODULE_S)
        try:
            answer = _recv(ours, 1 << 24)
        except socket.timeout:
            answer = json.dumps({"crashed": f"the module's check took over {MODULE_S:g} s and was stopped"}).encode()
        ours.close()
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        if answer is None:
            how = (f"signal {signal.Signals(os.WTERMSIG(status)).name}" if os.WIFSIGNALED(status)
                   else f"exit code {os.waitstatus_to_exitcode(status)}")
            answer = json.dumps({"crashed": f"the candidate's module crashed the verifier ({how})"}).encode()
        _send(sock, answer)


class Throwaway:
    """The judge's verifier process (see the module docstring)."""

    def __init__(self) -> None:
        import subprocess
        import sys

        ours, theirs = socket.socketpair()
        try:
            self.proc = subprocess.Popen([sys.executable, "-m", "pallasite.runner.judging.throwaway",
                                          str(theirs.fileno())], stdin=subprocess.DEVNULL, stdout=2, stderr=2,
                                         pass_fds=(theirs.fileno(),), close_fds=True, start_new_session=True,
                                         env={**os.environ, "JAX_PLATFORMS": "cpu"})
        finally:
            theirs.close()
        self.sock = ours
        self.sock.settimeout(MODULE_S + 60.0)  # (its own import included)

    def check(self, blob: bytes, signature: list[Any], platform: str, concrete: list[Any] | None = None) -> Checked:
        """The module ``blob`` verified against the judge's ``signature`` for ``platform`` and compiled for
        the CPU at ``concrete`` (the signature itself when it has no symbolic dims)."""
        request = {"signature": signature, "platform": platform, "concrete": concrete or signature,
                   "compile": platform == "cpu"}
        try:
            _send(self.sock, json.dumps(request).encode())
            _send(self.sock, blob)
            answer = _recv(self.sock, 1 << 24)
        except socket.timeout:
            return Checked(crashed=f"the verifier did not answer in {MODULE_S:g} s (the module's check was stopped)")
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
            os.killpg(self.proc.pid, signal.SIGKILL)  # the verifier and every child it forked
        with contextlib.suppress(OSError):
            self.proc.kill()
        self.proc.wait()


def main(argv: list[str]) -> int:
    sock = socket.socket(fileno=int(argv[1]))
    import jax  # noqa: F401 - imported once here, before any child is forked

    _serve(sock)
    return 0


if __name__ == "__main__":
    import sys

    os._exit(main(sys.argv))
