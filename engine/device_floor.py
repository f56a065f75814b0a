"""Physical floors under every device timing: a kernel cannot finish before its outputs are written,
nor before the matmuls it certainly does have run at the chip's peak.

A ``time`` reply passes through ``floored_reply`` in the one place every worker's reply is read
(``engine/workers/client.WorkerClient``: local, ssh, and the worker inside each Ray actor), so ``time``,
``tune``, ``optimize``, ``search`` and ``eval`` all see the same rule: the candidate's (and the
reference's) device median must be at least

- **the bandwidth floor**: the bytes of the task's outputs (``checks["outputs"]``, reported by the
  worker) written once at the chip's peak HBM bandwidth, and
- **the compute floor** (issue 42, the candidate's timing only): the matmul FLOPs the traced program certainly does
  (``checks["floor_work"]``: every ``dot_general`` outside a ``pl.when``/``cond``/``while``, in the
  program and in each kernel body x its grid steps; runner/program/body_counts ``certain_mxu_flops``, a lower
  bound of the work) at the chip's peak MXU rate for their dtype (bf16's for float32 operands, twice
  it for int8/fp8: the fastest the chip could run them, so the floor is never too high).

A timing below either floor is not a kernel's time (a timer that missed the work, a result computed
elsewhere, a cached buffer): its measurement becomes ``status="implausible"`` with no median, and
the error names the floor, so no speedup is ever divided from it. ``implausible_seconds`` applies
the same floors to any figure (an estimate, a stored timing). Peak figures are the published
per-chip ones (the largest a device kind can have); an unknown device kind gets no floor.

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


# peak bf16 MXU FLOP/s of one jax device of that kind (a whole chip for megacore v4/v5p), published figures;
# the largest of jax's table and the vendor's (v6e: jax says 920, Google 918), so the floor is never too high
PEAK_BF16 = (("v7", 2.307e15), ("v6", 9.2e14), ("v5p", 4.59e14), ("v5 lite", 1.97e14), ("v5e", 1.97e14),
             ("v5", 4.59e14), ("v4", 2.75e14), ("v3", 1.23e14), ("v2", 4.6e13))


def peak_flops(device_kind: str | None, dtype: str = "bfloat16") -> float | None:
    """The fastest the device kind can run matmuls with ``dtype`` operands (8-bit types: twice bf16)."""
    kind = (device_kind or "").lower()
    rate = next((r for piece, r in PEAK_BF16 if piece in kind), None)
    if rate is None:
        return None
    return rate * 2 if dtype.startswith(("int8", "uint8", "float8", "int4", "uint4")) else rate


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


def bandwidth_floor_ns(checks: dict[str, Any] | None, device_kind: str | None) -> tuple[float, str] | None:
    nbytes, rate = output_bytes(checks), peak_hbm(device_kind)
    if not nbytes or not rate:
        return None
    return nbytes / rate * 1e9, (f"{nbytes / 2**20:.2f} MiB of outputs written once at {device_kind}'s peak HBM "
                                 f"bandwidth {rate / 1e9:.0f} GB/s")


def compute_floor_ns(checks: dict[str, Any] | None, device_kind: str | None) -> tuple[float, str] | None:
    work = ((checks or {}).get("floor_work") or {}).get("mxu_flops") or {}
    seconds, flops = 0.0, 0
    for dtype, n in work.items():
        rate = peak_flops(device_kind, str(dtype))
        if rate is None or not n:
            continue
        seconds += float(n) / rate
        flops += int(n)
    if not flops:
        return None
    return seconds * 1e9, (f"the compute floor: {flops / 1e9:.1f} GFLOP of matmuls the program certainly does at "
                           f"{device_kind}'s peak {peak_flops(device_kind) / 1e12:.0f} TFLOP/s (bf16)")


def floor_ns(checks: dict[str, Any] | None, device_kind: str | None) -> tuple[float, str] | None:
    """(the higher floor in ns, how it is made) for these checks on this device kind, or None."""
    floors = [f for f in (bandwidth_floor_ns(checks, device_kind), compute_floor_ns(checks, device_kind)) if f]
    return max(floors, key=lambda f: f[0]) if floors else None


def implausible_seconds(seconds: float | None, checks: dict[str, Any] | None, device_kind: str | None,
                        what: str = "time") -> str | None:
    """Why ``seconds`` (a device or estimated figure for ``device_kind``) is below a physical floor, or None."""
    if not seconds:
        return None
    floor = floor_ns(checks, device_kind)
    if floor is None or seconds * 1e9 >= floor[0]:
        return None
    article = "an" if what[:1] in "aeiou" else "a"
    return (f"implausible: {article} {what} of {seconds * 1e6:.3f} us is below the physical floor of "
            f"{floor[0] / 1e3:.3f} us ({floor[1]})")


def implausible(m: Any, checks: dict[str, Any] | None, compute: bool = True) -> str | None:
    """Why this measurement is below the physical floor, or None. ``compute``: the compute floor
    applies too (the candidate's: ``floor_work`` counts the candidate's program, never the reference's)."""
    if m is None or str(getattr(m.provenance, "value", m.provenance)) != "device" or not m.median_ns:
        return None
    floor = floor_ns(checks, m.device_kind) if compute else bandwidth_floor_ns(checks, m.device_kind)
    if floor is None or m.median_ns >= floor[0]:
        return None
    return (f"implausible: a device median of {m.median_ns / 1e3:.3f} us is below the physical floor of "
            f"{floor[0] / 1e3:.3f} us ({floor[1]})")


def floored(reply: Any, floors: dict[str, Any] | None = None) -> Any:
    """The reply with each device timing below the floor marked implausible (see the module doc).
    ``floors``: the figures to hold it to, made from the user's own file (``pallasite time``: never what
    the device's worker reports), instead of the reply's own checks."""
    result = getattr(reply, "result", None)
    if result is None or not hasattr(result, "candidate") or not hasattr(result, "checks"):
        return reply
    checks = floors if floors is not None else result.checks
    changes: dict[str, Any] = {}
    for role in ("candidate", "reference"):
        m = getattr(result, role, None)
        why = implausible(m, checks, compute=role == "candidate")
        if why:
            changes[role] = dataclasses.replace(m, status="implausible", median_ns=None, error=why)
    if not changes:
        return reply
    changes["speedup"] = None  # a ratio with an implausible side is no speedup
    return dataclasses.replace(reply, result=dataclasses.replace(result, **changes))


def floored_reply(op: str, reply: Any) -> Any:
    """``floored`` for a ``time``/``profile`` reply; any other op's reply as it is."""
    return floored(reply) if op in ("time", "profile") else reply
