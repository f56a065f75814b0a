"""A physical floor under every device timing: a kernel cannot finish before its outputs are written.

A ``time`` reply passes through ``floored_reply`` in the one place every worker's reply is read
(``engine/client.WorkerClient``: local, ssh, and the worker inside each Ray actor), so ``time``,
``tune``, ``optimize``, ``search`` and ``eval`` all see the same rule: the candidate's (and the reference's)
device median must be at least the bytes of the task's outputs (``checks["outputs"]``, reported by
the worker) written once at the chip's peak HBM bandwidth. A timing below that floor is not a
kernel's time (a timer that missed the work, a result computed elsewhere, a cached buffer): its
measurement becomes ``status="implausible"`` with no median, and the error names the floor, so no
speedup is ever divided from it. Peak bandwidths are the published per-chip figures (the largest a
device kind can have, so the floor is never too high); an unknown device kind gets no floor, said
in the note. No flops floor: the worker does not report the kernel's flops with its timing.

Client side: no JAX.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from ..analysis.dtypes import DTYPE_BITS, block_bytes

# peak HBM bandwidth of one chip, bytes/s, by a piece of its jax device_kind (published figures)
PEAK_HBM = (("v7", 7.37e12), ("v6", 1.64e12), ("v5p", 2.765e12), ("v5 lite", 8.19e11), ("v5e", 8.19e11),
            ("v5", 2.765e12), ("v4", 1.228e12), ("v3", 9.0e11), ("v2", 7.0e11))


def peak_hbm(device_kind: str | None) -> float | None:
    kind = (device_kind or "").lower()
    for piece, rate in PEAK_HBM:
        if piece in kind:
            return rate
    return None


def output_bytes(checks: dict[str, Any] | None) -> int | None:
    outputs = (checks or {}).get("outputs")
    if not outputs:
        return None
    bits = [DTYPE_BITS.get("bool_" if str(dtype) == "bool" else str(dtype)) for _, dtype in outputs]
    if None in bits:
        return None  # a dtype the table does not know: no floor rather than a wrong one
    return sum(block_bytes(math.prod(shape), b) for (shape, _), b in zip(outputs, bits))


def floor_ns(checks: dict[str, Any] | None, device_kind: str | None) -> tuple[float, str] | None:
    """(the floor in ns, how it is made) for these checks on this device kind, or None."""
    nbytes, rate = output_bytes(checks), peak_hbm(device_kind)
    if not nbytes or not rate:
        return None
    return nbytes / rate * 1e9, (f"{nbytes / 2**20:.2f} MiB of outputs written once at {device_kind}'s peak HBM "
                                 f"bandwidth {rate / 1e9:.0f} GB/s")


def implausible(m: Any, checks: dict[str, Any] | None) -> str | None:
    """Why this measurement is below the physical floor, or None."""
    if m is None or str(getattr(m.provenance, "value", m.provenance)) != "device" or not m.median_ns:
        return None
    floor = floor_ns(checks, m.device_kind)
    if floor is None or m.median_ns >= floor[0]:
        return None
    return (f"implausible: a device median of {m.median_ns / 1e3:.3f} us is below the physical floor of "
            f"{floor[0] / 1e3:.3f} us ({floor[1]})")


def floored(reply: Any) -> Any:
    """The reply with each device timing below the floor marked implausible (see the module doc)."""
    result = getattr(reply, "result", None)
    if result is None or not hasattr(result, "candidate") or not hasattr(result, "checks"):
        return reply
    changes: dict[str, Any] = {}
    for role in ("candidate", "reference"):
        m = getattr(result, role, None)
        why = implausible(m, result.checks)
        if why:
            changes[role] = dataclasses.replace(m, status="implausible", median_ns=None, error=why)
    if not changes:
        return reply
    changes["speedup"] = None  # a ratio with an implausible side is no speedup
    return dataclasses.replace(reply, result=dataclasses.replace(result, **changes))


def floored_reply(op: str, reply: Any) -> Any:
    """``floored`` for a ``time``/``profile`` reply; any other op's reply as it is."""
    return floored(reply) if op in ("time", "profile") else reply
