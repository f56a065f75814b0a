"""What the judge's side and the candidate's process share, and nothing else: the frames of the channel between
them (JSON plus raw array bytes, never pickle, so the judge parses nothing that can run code) and the words of
an export's refusal. The trust wall (issue 61): the candidate's process runs runner/judging/candidate.py, which
imports this module and nothing else of the judging wing; the judge's side never imports candidate.py
(tests/test_trust_wall.py reads every import).

Worker side: imports jax and numpy lazily.
"""

from __future__ import annotations

import json
import socket
import struct
from typing import Any

MAX_FRAME = 1 << 30  # one frame from the candidate; a larger one ends the judging
HOST_CALLBACKS = ("the program needs host callbacks, which a serialized module cannot carry (jax.debug.print, "
                  "jax.pure_callback, io_callback, or a pallas_call in TPU interpret mode lower to them)")


class CandidateGone(Exception):
    """The candidate process ended or broke the framing (the message says how)."""


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
        try:
            chunk = sock.recv(min(left, 1 << 20))
        except (ConnectionResetError, BrokenPipeError) as exc:  # it ended with our frame unread
            raise CandidateGone(f"the other process ended ({exc.strerror or exc})") from None
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


def refusal_for(exc: BaseException) -> str | None:
    """Why an export failed, when the failure is the program's (host callbacks, effects), else None."""
    text = f"{type(exc).__name__}: {exc}"
    if "host_callbacks" in text or "callback" in text.lower():
        return f"{HOST_CALLBACKS}: {text[:300]}"
    if "effect" in text.lower() and isinstance(exc, (NotImplementedError, ValueError)):
        return f"the program has side effects a serialized module cannot carry: {text[:300]}"
    return None
