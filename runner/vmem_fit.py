"""A VMEM overflow within a few percent of the limit, said so, with the limit that fits (worker side).

libtpu's compiler decides what a kernel's blocks, scratch and internal buffers take in VMEM, and that
figure moves between compiler versions: a kernel published as running on a chip can overflow its
scoped VMEM by a few percent under another libtpu. ``near_limit(record, lowered, target)`` adds to a
tier-2 VMEM record (``record["vmem"]``: requested and limit) that is within ``NEAR`` of its limit:

- ``over``: by how much (0.057: 5.7% over);
- ``decided_by``: the libtpu version whose compiler said so (other versions may differ);
- ``fits_with`` and ``verified``: a scoped VMEM limit (whole MiB, one MiB above what was requested,
  then a tenth more) with which tier 2 compiled the same lowered module for the chip — libtpu's
  ``xla_tpu_scoped_vmem_limit_kib``, the default a kernel's ``vmem_limit_bytes`` replaces — or
  ``not_verified`` with why (a kernel whose own ``vmem_limit_bytes`` is the limit still overflows).

Imports nothing of jax: the compile is runner/tiers.py's, passed in.
"""

from __future__ import annotations

import math
from typing import Any

from ..analysis.types import installed_versions

NEAR = 0.10  # a record this close to its limit (requested / limit - 1) is a near-limit finding
MIB = 1 << 20


def proposals(requested: int) -> tuple[int, ...]:
    """The limits tried, in bytes: one MiB above the request rounded up to a MiB, then a tenth more."""
    first = math.ceil((requested + MIB) / MIB) * MIB
    return (first, math.ceil(first * 1.1 / MIB) * MIB)


def near_limit(record: dict[str, Any], lowered: Any, target: str, compile_with: Any) -> None:
    """Add ``record["vmem"]["near_limit"]`` when the overflow is within ``NEAR`` (see the module doc).
    ``compile_with(lowered, target, limit_bytes)`` compiles the module with a scoped VMEM limit and raises
    when it does not fit (runner/tiers.compile_with_vmem_limit)."""
    vmem = record.get("vmem")
    if not vmem or not vmem.get("requested") or not vmem.get("limit"):
        return
    over = vmem["requested"] / vmem["limit"] - 1
    if not 0 < over <= NEAR:
        return
    libtpu = installed_versions().get("libtpu")
    near: dict[str, Any] = {"over": over, "decided_by": f"libtpu {libtpu}" if libtpu else "libtpu (version unknown)"}
    if lowered is None:
        near["not_verified"] = "the lowered module was not kept (tier 1 did not run here)"
    else:
        why = ""
        for limit in proposals(vmem["requested"]):
            try:
                compile_with(lowered, target, limit)
            except Exception as exc:  # noqa: BLE001 - that limit does not fit either: the next one
                why = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
                continue
            near["fits_with"] = limit
            near["verified"] = f"tier 2 compiled it for {target} with a scoped VMEM limit of {limit // MIB} MiB"
            break
        else:
            near["not_verified"] = f"tier 2 did not compile it with {', '.join(f'{p // MIB} MiB' for p in proposals(vmem['requested']))}: {why}"
    vmem["near_limit"] = near


_NOTED: dict[int, tuple[BaseException, dict[str, Any]]] = {}  # id(exception) -> (it, its near-limit figures)


def annotate(exc: BaseException, lowered: Any, target: str, compile_with: Any) -> None:
    """For a compile that raised ``exc``: its near-limit figures (``near_limit``), kept for the record made
    from it elsewhere (``noted``; jax's runtime errors take no attributes of their own)."""
    from .errors import vmem_figures

    figures = vmem_figures(str(exc))
    if figures is None:
        return
    near_limit({"vmem": figures}, lowered, target, compile_with)
    if "near_limit" in figures:
        _NOTED.clear()  # one compile's error at a time
        _NOTED[id(exc)] = (exc, figures["near_limit"])


def noted(exc: BaseException) -> dict[str, Any] | None:
    """The near-limit figures ``annotate`` kept for ``exc``, or None."""
    held = _NOTED.get(id(exc))
    return held[1] if held is not None and held[0] is exc else None
