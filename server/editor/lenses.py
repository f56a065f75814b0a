"""Code lenses: what appears above each pallas_call (only commands that exist)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from ...analysis.types import KernelSite, KernelVerdict, Span

from ..file_verdicts import lens_suffix

CHECK_COMMAND = "pallasite.check"


@dataclass(frozen=True)
class Lens:
    span: Span
    title: str
    command: str
    arguments: tuple[Any, ...]


def check_lenses(sites: Sequence[KernelSite], uri: str, chip: str, verdicts: Sequence[KernelVerdict] = (), *,
                 edited: bool = False, checking: bool = False) -> list[Lens]:
    """One "Check for <chip>" lens per TPU pallas_call, on the callee (none on GPU calls: the
    compiler tiers check TPU kernels only), with the last check's verdict for that call
    (``verdicts``: the report's, for ``chip``; ``edited``: the text changed since), or "Checking for
    <chip>…" while a check of the document runs."""
    if checking:
        return [Lens(site.call_span, f"Checking for {chip}…", CHECK_COMMAND, ({"uri": uri},))
                for site in sites if site.backend != "gpu"]
    return [Lens(site.call_span, f"Check for {chip}{lens_suffix(site, verdicts, edited)}", CHECK_COMMAND,
                 ({"uri": uri},)) for site in sites if site.backend != "gpu"]
