"""A throwaway process for the bytes the candidate sent: deserialized, verified and planned where a crash
ends nothing but itself.

Parsing bytes from the candidate is not safe in the process that holds the device: a 1,556-byte mutated
module aborted inside ``Exported.mlir_module()`` (``malloc(): invalid size``), and a module calling an
allowed custom call with undersized results segfaulted when run. So the judge starts a *verifier*: a fresh
interpreter (``python -m pallasite.runner.judging.throwaway``; a fork of a process whose backend already
runs threads can deadlock in its child), holding one socket; for each module it is sent, the verifier
forks a child that deserializes the bytes, checks them (runner/judging/module_check.py: a TPU program, its
inputs, custom calls from a short list with their result types, effects), reads what the judge needs from
them (``facts``, the TPU program planned by the judge's interpreter included), or prices them for a chip
by the cost model (``price``:
runner/program/module_cost.price_exported, out of reach of any process that ran the candidate's or the user's
code). It answers with the facts (and the estimate), or with why the module is refused;
a child that dies answers nothing, and the judge says "the candidate's module crashed the verifier"
(with the signal) and goes on; one that takes longer than ``MODULE_S`` is killed and said so. The judge
deserializes the bytes itself only after they passed here.

Out of the candidate's reach: the verifier makes itself undumpable as the first thing its ``main`` does and
says so (``ready``) before the judge starts the candidate's process (which cannot see it anyway: that process
has a PID namespace of its own, runner/isolation/nest.py). Every request carries a secret the judge makes for it
(random, never sent to the candidate), and every answer must carry it back: one that does not is "the
verifier's answer was not its own", and every later answer of that verifier too (nothing it says is then
believed, so nothing is ranked).

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

from ..isolation.sandbox_server import recv_exactly


MAX_MODULE = 256 << 20
MODULE_S = 180.0  # one module's check and plan, at most
READY = b"ready"  # the verifier's first word: undumpable from here on
NOT_ITS_OWN = "the verifier's answer was not its own"
_PR_SET_DUMPABLE = 4


@dataclass(frozen=True)
class Checked:
    """The verifier's answer for one module: ``facts`` when it passed, else ``refused`` (why) or ``crashed``."""

    facts: dict[str, Any] | None = None
    refused: str = ""
    crashed: str = ""
    estimate: dict[str, Any] | None = None  # the module priced for a chip (CostEstimate JSON), when asked


def _send(sock: socket.socket, data: bytes) -> None:
    sock.sendall(struct.pack(">Q", len(data)) + data)


def _recv(sock: socket.socket, limit: int = MAX_MODULE) -> bytes | None:
    head = recv_exactly(sock, 8)
    if head is None:
        return None
    (size,) = struct.unpack(">Q", head)
    return None if size > limit else recv_exactly(sock, size)


def _priced(exported: Any, request: dict[str, Any], values: list[Any] | None) -> dict[str, Any]:
    """The verified module priced by the cost model for the request's chip (``price_exported`` never raises)."""
    from ...analysis.types import ChipSpec, from_json, to_json
    from ..program.module_cost import price_exported

    price = request["price"]
    config = tuple((str(k), v) for k, v in price.get("config") or ())
    return to_json(price_exported(exported, from_json(ChipSpec, price["chip"]), request["concrete"], config=config,
                                  values=values))


def _values(metas: list[Any], data: bytes) -> list[Any]:
    """The judge's concrete inputs (integers: scalar-prefetch tables, lengths) from raw bytes, None where abstract."""
    import numpy as np

    out, at = [], 0
    for meta in metas:
        if meta is None:
            out.append(None)
            continue
        n = int(meta["nbytes"])
        out.append(np.frombuffer(data[at:at + n], dtype=np.dtype(meta["dtype"])).reshape(meta["shape"]))
        at += n
    return out


def _verify_one(request: dict[str, Any], blob: bytes, values: list[Any] | None = None) -> dict[str, Any]:
    """In the per-module child: what the judge asked about ``blob``, as plain data."""
    from .module_check import Refused, verified

    try:
        exported, facts = verified(blob, request["signature"], request.get("concrete"), facts=not request.get("price"))
        if request.get("price"):
            return {"facts": facts, "estimate": _priced(exported, request, values)}
    except Refused as exc:
        return {"refused": str(exc)[:2000]}
    except Exception as exc:  # noqa: BLE001 - a module the checks cannot read is the candidate's
        return {"refused": f"the module cannot be read: {type(exc).__name__}: {str(exc)[:600]}"}
    return {"facts": facts}


def _child(sock: socket.socket, header: bytes, blob: bytes, data: bytes) -> None:
    code = 0
    try:
        request = json.loads(header)
        answer = _verify_one(request, blob, _values(request["values"], data) if request.get("values") else None)
        _send(sock, json.dumps({**answer, "secret": request.get("secret")}, default=str).encode())
    except BaseException:  # noqa: BLE001 - the server sees no answer
        code = 1
    os._exit(code)


def _serve(sock: socket.socket) -> None:
    """The verifier: one forked child per module; a child's death is the module's, said as such. Every
    answer carries back the secret of the request it answers."""
    while True:
        header = _recv(sock, 1 << 20)
        blob = _recv(sock) if header is not None else None
        data = _recv(sock) if blob is not None else None  # the judge's concrete inputs (empty: none)
        if header is None or blob is None or data is None:
            os._exit(0)
        ours, theirs = socket.socketpair()
        pid = os.fork()
        if pid == 0:
            ours.close()
            sock.close()
            _child(theirs, header, blob, data)
        theirs.close()
        ours.settimeout(MODULE_S)
        crashed = ""
        try:
            answer = _recv(ours, 1 << 24)
        except socket.timeout:
            answer, crashed = None, f"the module's check took over {MODULE_S:g} s and was stopped"
        ours.close()
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        if answer is None:
            how = (f"signal {signal.Signals(os.WTERMSIG(status)).name}" if os.WIFSIGNALED(status)
                   else f"exit code {os.waitstatus_to_exitcode(status)}")
            crashed = crashed or f"the candidate's module crashed the verifier ({how})"
            answer = json.dumps({"crashed": crashed, "secret": _secret(header)}).encode()
        _send(sock, answer)


def _secret(header: bytes) -> Any:
    """The secret of the judge's request (the judge's own bytes)."""
    try:
        return json.loads(header).get("secret")
    except (ValueError, AttributeError):
        return None


class Throwaway:
    """The judge's verifier process (see the module docstring)."""

    def __init__(self) -> None:
        """A fresh interpreter, or at a request's clean point (runner/judging/forked.py: one thread, no backend,
        nothing of the judge's yet) a fork of this one running the same main: the same process without its 2 s."""
        import subprocess

        from .forked import clean, fork_child

        ours, theirs = socket.socketpair()
        fd = theirs.fileno()
        try:
            if clean() and type(self).command is Throwaway.command:
                self.proc: Any = fork_child(lambda: _forked_main(fd), (fd,))
            else:
                self.proc = subprocess.Popen(self.command(fd), stdin=subprocess.DEVNULL, stdout=2, stderr=2,
                                             pass_fds=(fd,), close_fds=True, start_new_session=True,
                                             env={**os.environ, "JAX_PLATFORMS": "cpu"})
        finally:
            theirs.close()
        self.sock = ours
        self.sock.settimeout(MODULE_S + 60.0)  # (its own import included)
        self._ready = False
        self._forged = ""  # set once an answer was not its own: nothing it says is believed after

    @staticmethod
    def command(fd: int) -> list[str]:
        """The verifier's command line, holding the socket ``fd``."""
        import sys

        return [sys.executable, "-m", "pallasite.runner.judging.throwaway", str(fd)]

    def ready(self) -> None:
        """Wait for the verifier's first word: it is undumpable from then on (call before the candidate's
        process is started). A verifier that never says it is left to ``_ask``, which then finds it gone."""
        if not self._ready:
            self._ready = True
            try:
                word = _recv(self.sock, 64)
            except OSError:
                word = None
            if word != READY:
                self._forged = f"{NOT_ITS_OWN} (it did not start as the verifier: {word!r:.60})"

    def check(self, blob: bytes, signature: list[Any], concrete: list[Any] | None = None) -> Checked:
        """The module ``blob`` verified against the judge's ``signature``, its TPU program's facts read and
        planned at ``concrete`` (the signature itself when it has no symbolic dims)."""
        request = {"signature": signature, "concrete": concrete or signature}
        return self._ask(request, blob)

    def price(self, blob: bytes, signature: list[Any], chip: dict[str, Any], values: list[Any] | None = None,
              config: dict[str, Any] | None = None) -> Checked:
        """The module ``blob`` verified against the judge's concrete ``signature`` for the TPU (its only
        platform needed) and priced by the cost model for ``chip`` (ChipSpec JSON), ``values`` the judge's
        concrete inputs (None where abstract); ``config`` names the configuration in the estimate."""
        request = {"signature": signature, "concrete": signature,
                   "price": {"chip": chip, "config": sorted((config or {}).items())}}
        return self._ask(request, blob, values)

    def _ask(self, request: dict[str, Any], blob: bytes, values: list[Any] | None = None) -> Checked:
        import secrets

        import numpy as np

        self.ready()
        if self._forged:
            return Checked(crashed=self._forged)
        request["secret"] = secret = secrets.token_hex(16)  # this request's: never sent to the candidate

        arrays = [None if v is None else np.ascontiguousarray(v) for v in values or ()]
        if any(a is not None for a in arrays):
            request["values"] = [None if a is None else {"shape": list(a.shape), "dtype": a.dtype.name,
                                                         "nbytes": a.nbytes} for a in arrays]
        data = b"".join(a.tobytes() for a in arrays if a is not None)
        try:
            _send(self.sock, json.dumps(request).encode())
            _send(self.sock, blob)
            _send(self.sock, data)
            answer = _recv(self.sock, 1 << 24)
        except socket.timeout:
            return Checked(crashed=f"the verifier did not answer in {MODULE_S:g} s (the module's check was stopped)")
        except OSError as exc:
            return Checked(crashed=f"the verifier could not be reached ({exc})")
        if answer is None:
            return Checked(crashed="the verifier ended without an answer")
        try:
            data = json.loads(answer)
            own = isinstance(data, dict) and data.get("secret") == secret
        except ValueError:
            own = False
        if not own:
            self._forged = f"{NOT_ITS_OWN}: nothing it says is believed"
            return Checked(crashed=self._forged)
        return Checked(facts=data.get("facts"), refused=str(data.get("refused") or ""),
                       crashed=str(data.get("crashed") or ""), estimate=data.get("estimate"))

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()
        with contextlib.suppress(OSError):
            os.killpg(self.proc.pid, signal.SIGKILL)  # the verifier and every child it forked
        with contextlib.suppress(OSError):
            self.proc.kill()
        self.proc.wait()


def _imported() -> None:
    """What every child uses, imported once here before any child is forked (a child would import it again
    per module: half a second each), and no backend started (a fork of a process whose backend runs
    threads can deadlock in its child)."""
    import jax  # noqa: F401
    from jax._src.interpreters import mlir  # noqa: F401
    from jax._src.lib import tpu  # noqa: F401 - Mosaic's dialect, read by the pricer
    from jax._src.lib.mlir.dialects import hlo, mhlo  # noqa: F401 - loaded lazily by jax otherwise
    from jaxlib.mlir.dialects import func, stablehlo  # noqa: F401

    from ..program import kernel_cost, module_cost, module_facts, module_read, module_values, module_xla  # noqa: F401
    from ..program import program_export  # noqa: F401
    from ..tpu_program import hlo_exec  # noqa: F401
    from . import module_check  # noqa: F401


def _forked_main(fd: int) -> int:
    os.environ["JAX_PLATFORMS"] = "cpu"  # a device worker's judge holds the chip; its verifier never does
    return main(["throwaway", str(fd)])


def main(argv: list[str]) -> int:
    import ctypes

    ctypes.CDLL(None).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)  # first: no other process of this user reaches it
    sock = socket.socket(fileno=int(argv[1]))
    _send(sock, READY)
    _imported()
    _serve(sock)
    return 0


if __name__ == "__main__":
    import sys

    os._exit(main(sys.argv))
