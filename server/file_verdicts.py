"""What the status bar and the code lenses say about one file's last verdict, as plain functions of
its snapshot: the same words everywhere, so the lens, the status bar and the Problems panel agree.

``file_verdict`` is one entry of the ``files`` list of the ``pallasite/status`` notification (the
clients show the entry of the active editor's document; they decide nothing): while a check runs,
"checking"; after one, the file's compile verdict as `pallasite check` words it (server/reports/report_format.py),
marked "edited since" when the text changed after the check; before any check, tier 0's count.
``lens_suffix`` is the "(last: tier 1 ok, tier 2 ok)" after "Check for v6e".
"""

from __future__ import annotations

from typing import Any, Sequence

from ..analysis.types import KernelSite, KernelVerdict

EDITED = "edited since"


def _edited(snap: Any) -> bool:
    """Whether the text changed after the check whose report the snapshot holds."""
    checked = getattr(snap, "report_version", None)
    return checked is not None and checked != snap.version


def file_verdict(snap: Any, tiers: Sequence[int], checking: bool, target: str | None = None) -> dict[str, str]:
    """``{"state", "verdict", "detail"}`` for the status bar: ``state`` is "checking", "ok" (compiled
    for the chip), "error" (not compiled: an error), "unknown" (not compiled for the chip, or not
    checked: the why says which) or "tier0" (no compiler check for ``target`` yet: tier 0's findings)."""
    from .reports.report_format import compile_line, compiled_for

    if checking:
        return {"state": "checking", "verdict": "checking…", "detail": f"checking {snap.path}"}
    report, chip = snap.report, snap.report_chip
    if target is not None and chip != target:  # a verdict for another chip says nothing of this one
        report = None
    result = compiled_for(report, tiers, chip) if report is not None and chip else None
    if result is not None and report.kernels:
        state = "ok" if result.ok else "error" if result.ok is False else "unknown"
        words = result.text().replace(f" for {chip}", "", 1)  # the status bar names the chip already
        detail = compile_line(result, chip)
        if _edited(snap):
            words, detail = f"{words} ({EDITED})", f"{detail} (the text was {EDITED})"
        return {"state": state, "verdict": words, "detail": f"{detail}: the last check of {snap.path}"}
    errors = sum(1 for f in snap.tier0 if f.severity == "error")
    others = len(snap.tier0) - errors
    words = (f"tier 0: {errors} error(s)" if errors else f"tier 0: {others} finding(s)" if others
             else "tier 0: no findings")
    return {"state": "tier0", "verdict": words,
            "detail": f"{words} (source rules; the compiler tiers have not checked {snap.path} yet)"}


def lens_suffix(site: KernelSite, verdicts: Sequence[KernelVerdict], edited: bool = False) -> str:
    """" (last: tier 1 ok, tier 2 error)" from the last report's verdict for this call, if any; with
    "; edited since" when the text changed after that check."""
    for v in verdicts:
        if v.span == site.span or v.name == (site.kernel_name or site.enclosing_function):
            states = [f"tier {t} {s}" for t, s in v.tiers if t > 0 and s in ("ok", "error")]
            if states:
                return " (last: " + ", ".join(states) + (f"; {EDITED}" if edited else "") + ")"
    return ""


def files_status(session: Any) -> list[dict[str, str]]:
    """``[{"uri", "state", "verdict", "detail"}]``: the ``file_verdict`` of every open kernel document
    (the status notification's ``files``; a list, so no client reads a URI as a field name)."""
    out = []
    for doc in session.documents.values():
        if not doc.uses_pallas:
            continue
        checking = doc.check_task is not None and not doc.check_task.done()
        chosen = session.settings_for(doc.path)
        out.append({"uri": doc.uri, **file_verdict(doc.snapshot, chosen.tiers, checking, chosen.target)})
    return out
