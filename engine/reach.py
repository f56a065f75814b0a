"""Which pallas_call sites of the file a task entry reached (client side, never imports jax).

The worker traces each entry with ``pallas_call`` intercepted (``runner/reach.py``) and returns,
per call, the lines of the checked file on its call stack. A site is reached when one of those
lines lies in its ``pallas_call(...)`` expression (or, for a module-level
``functools.partial(pl.pallas_call, ...)`` decorator, which runs at import, when the kernel is the
site's). Sites no entry reached keep their tier-0 verdict and read "not reached: the task never calls this
kernel" for the compiler tiers (``TierState.NOT_REACHED``): "ok" only ever means that tier ran on that kernel.
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Sequence

from ..analysis.verdict import TIER0_NOT_APPLICABLE

NOT_REACHED = "not reached: the task never calls this kernel"  # TierState.NOT_REACHED, as displayed


# tier 0's state for an entry of a file that writes no pallas_call and calls a library's, when the trace
# that would name the library's module failed first
LIBRARY_UNKNOWN = f"{TIER0_NOT_APPLICABLE}: the file writes no pallas_call (its kernel is a library's)"


def library_site(calls: Sequence[Mapping[str, Any]] | None) -> str | None:
    """Tier 0's state for an entry whose every pallas_call is made in another module (a library kernel
    the file calls: jax's ``flash_attention``): "not applicable: the site is in <module>" (tier 0 reads
    the pallas_calls written in the file, and these are not), or None when some call is the file's own."""
    if not calls or not all(_get(c, "site") for c in calls):
        return None
    names = [_get(c, "kernel_module") or os.path.basename(str(_get(c, "site")[0])) for c in calls]
    return f"{TIER0_NOT_APPLICABLE}: the site is in {', '.join(dict.fromkeys(names))}"


def site_reached(site: Any, calls: Sequence[Mapping[str, Any]]) -> bool:
    """Whether one of the recorded ``calls`` (runner/reach.py's records) is this KernelSite's."""
    span = getattr(site, "span", None)
    if span is None:
        return False
    kernel = getattr(site, "kernel_def_span", None)
    for call in calls:
        for line in call.get("lines") or ():
            if span.line <= int(line) - 1 <= span.end_line:
                return True
        if getattr(site, "enclosing_function", None) is None and kernel is not None and \
                call.get("kernel_line") is not None and kernel.line <= int(call["kernel_line"]) - 1 <= kernel.end_line:
            return True  # a module-level partial(pallas_call) decorator ran at import, not in the trace
    return False


def reached_sites(sites: Sequence[Any], calls: Sequence[Mapping[str, Any]] | None,
                  functions: Mapping[str, tuple[int, int]]) -> list[Any]:
    """The KernelSites ``calls`` reached: each by its own lines (``site_reached``), or, for a call a wrapper
    of another file made later (tokamax's ``call = custom_buffered_pallas_call(...)``, then ``call(...)``:
    the wrapper's ``pallas_call`` runs when ``call`` is applied, outside the site's lines), the one site of
    the function of the file that made it (``functions``: module-level function -> 0-based first and last
    line)."""
    found = [s for s in sites if site_reached(s, calls or ())]
    for call in calls or ():
        if not _get(call, "site") or any(site_reached(s, [call]) for s in sites):
            continue
        lines = [int(n) - 1 for n in _get(call, "lines") or ()]
        holders = {name for name, (first, last) in functions.items() if any(first <= n <= last for n in lines)}
        mine = [s for s in sites if getattr(s, "enclosing_function", None) in holders]
        if len(mine) == 1 and mine[0] not in found:
            found.append(mine[0])
    return found


def function_lines(text: str) -> dict[str, tuple[int, int]]:
    """Module-level function name -> its 0-based first and last line (empty when the text does not parse)."""
    import ast

    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return {}
    return {n.name: (n.lineno - 1, (n.end_lineno or n.lineno) - 1) for n in tree.body
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def reach_known(entries: Sequence[Any]) -> bool:
    """Whether every entry says what it reached (else nothing is marked not reached); a list cut short
    by a failed trace (``partial`` calls) says what was reached before it, not all."""
    return bool(entries) and all(getattr(e, "reached", None) is not None
                                 and not any(_get(c, "partial") for c in e.reached) for e in entries)


def _get(call: Any, name: str) -> Any:
    return call.get(name) if isinstance(call, Mapping) else getattr(call, name, None)
