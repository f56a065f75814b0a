"""Code lenses: what appears above each pallas_call (only commands that exist)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from ..analysis.types import KernelSite, KernelVerdict, Span

CHECK_COMMAND = "pallasite.check"


@dataclass(frozen=True)
class Lens:
    span: Span
    title: str
    command: str
    arguments: tuple[Any, ...]


def _verdict_suffix(site: KernelSite, verdicts: Sequence[KernelVerdict]) -> str:
    """" (last: tier 1 ok, tier 2 error)" from the last report's verdict for this call, if any."""
    for v in verdicts:
        if v.span == site.span or v.name == (site.kernel_name or site.enclosing_function):
            states = [f"tier {t} {s}" for t, s in v.tiers if t > 0 and s in ("ok", "error")]
            if states:
                return " (last: " + ", ".join(states) + ")"
    return ""


def check_lenses(sites: Sequence[KernelSite], uri: str, chip: str,
                 verdicts: Sequence[KernelVerdict] = ()) -> list[Lens]:
    """One "Check for <chip>" lens per TPU pallas_call, on the callee (none on GPU calls: the
    compiler tiers check TPU kernels only)."""
    return [Lens(site.call_span, f"Check for {chip}{_verdict_suffix(site, verdicts)}", CHECK_COMMAND,
                 ({"uri": uri},)) for site in sites if site.backend != "gpu"]
