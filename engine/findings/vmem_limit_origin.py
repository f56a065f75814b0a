"""A VMEM overflow caused by the call's own ``vmem_limit_bytes``, said where that limit was written
(client side, never imports jax).

``CompilerParams(vmem_limit_bytes=limit(config))`` with ``limit`` computing ``mib * 1024`` where
``mib * 1024 * 1024`` was meant asks for a 16 KiB scoped limit: every call using it runs out of VMEM,
and the compiler says so at each ``pallas_call`` (its message names no user line). The blocks are not
what is wrong there: the blocks would fit the chip's default scoped limit. ``to_vmem_limit`` moves
such a finding to the number that made the limit, as the program ran (the worker's carried places of
``vmem_limit_bytes``, through constants, dict entries, dataclass fields and helpers: a unit-sized
factor first, 1000 or 1024 and their powers, since a limit off by orders of magnitude is a unit written
wrong), with the ``pallas_call`` and the other numbers that made the limit related.
"""

from __future__ import annotations

from typing import Any, Mapping

from ...analysis.types import Related, Span

from .origin_findings import Moved, call_origins

SMALLEST_DEFAULT = 16 << 20  # the smallest default scoped VMEM limit of the chips (v5e, v4): blocks under it fit
_UNITS = {1000, 1024, 1000 ** 2, 1 << 20, 1000 ** 3, 1 << 30}


def to_vmem_limit(code: str, rec: Mapping[str, Any], site: Any, reached: Any, lines: list[str],
                  call: Span | None) -> Moved | None:
    """The overflow at the number that set the call's too-small ``vmem_limit_bytes`` (None: not that)."""
    if code != "PLS201" or site is None:
        return None
    vmem = rec.get("vmem") or {}
    requested, limit = vmem.get("requested"), vmem.get("limit")
    if not (isinstance(requested, int) and isinstance(limit, int)) or requested > SMALLEST_DEFAULT or limit >= requested:
        return None
    places = list(call_origins(site, reached).get("vmem_limit_bytes") or ())
    if not places:
        return None
    place = max(places, key=lambda p: (_number(p, lines) in _UNITS, -int(p[0])))
    others = [p for p in places if p is not place]
    related = ([Related(call, "the pallas_call that runs out of VMEM")] if call is not None else []) + \
        [Related(_span(p), "this number made the limit too") for p in others[:3]]
    said = (f"vmem_limit_bytes is {limit} bytes ({limit / 1024:.1f} KiB), set from the number written here as "
            f"the program ran: the blocks need {requested / 2**20:.1f} MiB, which the chip's default scoped limit "
            f"would hold; a unit written wrong (KiB for MiB?)")
    return Moved(span=_span(place), related=tuple(related), sentence=said)


def _span(place: Any) -> Span:
    return Span(int(place[0]) - 1, int(place[1]), int(place[0]) - 1, int(place[2]))


def _number(place: Any, lines: list[str]) -> float:
    line, col, end = int(place[0]) - 1, int(place[1]), int(place[2])
    text = lines[line][col:end] if 0 <= line < len(lines) else ""
    try:
        return float(text.replace("_", ""))
    except ValueError:
        return 0.0
