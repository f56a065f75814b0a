"""The channel between a judge and its candidate process: frames of JSON plus raw array bytes (never
pickle, so the judge parses nothing that can run code), the fresh interpreter that is the candidate's
process (``spawn``), and its end.

Worker side: imports jax and numpy lazily.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import struct
from typing import Any

MAX_FRAME = 1 << 30  # one frame from the candidate; a larger one ends the judging
_PR_SET_DUMPABLE = 4


class CandidateGone(Exception):
    """The candidate process ended or broke the framing (the message says how)."""


# --------------------------------------------------------------------------- frames


def send_frame(sock: socket.socket, header: dict[str, Any], arrays: list[Any] = ()) -> None:
    import numpy as np

    blobs = [np.ascontiguousarray(np.asarray(a)) for a in arrays]
    header = {**header, "arrays": [{"shape": list(b.shape), "dtype": b.dtype.name, "nbytes": b.nbytes} for b in blobs]}
    data = json.dumps(header, allow_nan=False, default=str).encode()
    sock.sendall(struct.pack(">Q", len(data)) + data)
    for blob in blobs:
        sock.sendall(memoryview(blob.view(np.uint8).reshape(-1)) if blob.size else b"")


def _exactly(sock: socket.socket, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise CandidateGone("the other process closed the channel")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def recv_frame(sock: socket.socket) -> tuple[dict[str, Any], list[Any]]:
    import jax.numpy as jnp
    import numpy as np

    (size,) = struct.unpack(">Q", _exactly(sock, 8))
    if size > MAX_FRAME:
        raise CandidateGone(f"a frame of {size} bytes is over the limit")
    try:
        header = json.loads(_exactly(sock, size))
        metas = header.pop("arrays", [])
        if not isinstance(header, dict) or not isinstance(metas, list):
            raise ValueError("not an object")
    except ValueError as exc:
        raise CandidateGone(f"a frame that is not JSON ({exc})") from exc
    arrays, total = [], 0
    for meta in metas:
        dtype, shape, nbytes = jnp.dtype(str(meta["dtype"])), tuple(int(d) for d in meta["shape"]), int(meta["nbytes"])
        total += nbytes
        if total > MAX_FRAME or nbytes != int(np.prod(shape, dtype=np.int64)) * dtype.itemsize:
            raise CandidateGone("array bytes that do not match their shape, or too many")
        arrays.append(np.frombuffer(_exactly(sock, nbytes), dtype=dtype).reshape(shape).copy())
    return header, arrays


def receive(sock: socket.socket) -> tuple[dict[str, Any], list[Any]]:
    """A frame from the candidate; the interpret-mode calls it saw are recorded here, so the worker
    refuses them as if this process had seen them (runner/interpret_guard.py)."""
    from .. import interpret_guard

    header, arrays = recv_frame(sock)
    interpret_guard.add_recorded(header.pop("interpret", None))
    return header, arrays


def end(sock: socket.socket, pid: int) -> None:
    """Close the channel and end the candidate process and its session (whatever they are doing)."""
    with contextlib.suppress(OSError):
        sock.close()
    with contextlib.suppress(OSError):
        os.killpg(pid, 9)
    with contextlib.suppress(OSError):
        os.kill(pid, 9)
    proc = _PROCS.pop(pid, None)
    if proc is not None:
        proc.wait()
    else:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)


_PROCS: dict[int, Any] = {}  # the candidate processes this judge started, by pid


def undumpable() -> None:
    """This process's memory and file descriptors out of reach of every other process of its user
    (no ptrace, no /proc/<pid>/mem or fd/)."""
    import ctypes

    ctypes.CDLL(None).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)


def spawn(kind: str, params: dict[str, Any]) -> tuple[socket.socket, int]:
    """A candidate process: a FRESH interpreter (``python -m pallasite.runner.judging.candidate``), never a
    fork of this one, holding one end of a socket pair and nothing else of ours (every other descriptor
    closed, stdin from /dev/null, its own session, jax on the CPU only). Its first frame is the request:
    ``kind`` ("export" or "check") and its ``params``. Returns (our end, its pid)."""
    import subprocess
    import sys

    ours, theirs = socket.socketpair()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PALLASITE_STANDIN")}
    env.update(JAX_PLATFORMS="cpu", PYTHONDONTWRITEBYTECODE="1", PYTHONUNBUFFERED="1")
    try:
        proc = subprocess.Popen([sys.executable, "-m", "pallasite.runner.judging.candidate", str(theirs.fileno())],
                                stdin=subprocess.DEVNULL, stdout=2, stderr=2, pass_fds=(theirs.fileno(),),
                                close_fds=True, env=env, start_new_session=True)
    finally:
        theirs.close()
    undumpable()  # the candidate may not read or write our memory
    _PROCS[proc.pid] = proc  # (its exit status is read through it: subprocess may reap it otherwise)
    send_frame(ours, {"kind": kind, "params": params})
    return ours, proc.pid


def gone_why(pid: int, error: BaseException) -> str:
    """Why the candidate's process stopped answering, in the user's words: killed (by the memory limit, most
    likely: the sandbox counts its files in /tmp and its shared memory too), or exited, or what broke."""
    import signal
    import subprocess

    from ..memory_guard import LIMIT_MB

    proc = _PROCS.get(pid)
    try:
        code = proc.wait(timeout=10.0) if proc is not None else None  # (a killed process may take seconds to end)
    except subprocess.TimeoutExpired:
        code = None
    if code is None:
        return f"the candidate's process failed: {error}"
    if code == -signal.SIGKILL:
        limit = f" of {LIMIT_MB} MiB" if LIMIT_MB else ""
        return (f"the candidate's process was killed (SIGKILL): it most likely went over the memory limit{limit} "
                "(its files in /tmp and its shared memory count too)")
    if code < 0:
        return f"the candidate's process died of signal {signal.Signals(-code).name}"
    return f"the candidate's process exited (code {code}) without answering"
