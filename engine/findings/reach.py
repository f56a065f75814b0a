"""Which pallas_call sites of the file a task entry reached (client side, never imports jax).

The worker traces each entry with ``pallas_call`` intercepted (``runner/reach.py``) and returns,
per call, the lines of the checked file on its call stack. A site is reached when one of those
lines lies in its ``pallas_call(...)`` expression (or, for a module-level
``functools.partial(pl.pallas_call, ...)`` decorator, which runs at import, when the kernel is the
site's). Sites no entry reached keep their tier-0 verdict and read "not reached: the task never calls this
kernel" for the compiler tiers (``TierState.NOT_REACHED``): "ok" only ever means that tier ran on that kernel.

``traced_calls`` keeps, per call, what the run learned (inputs, blocks, grid, tier 2's VMEM) as the
report's ``TracedCall``s, which the editor's hovers read (server/editor/hover_facts.py).
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Sequence

from ...analysis.types import TracedBlock, TracedCall
from ...analysis.verdict import TIER0_NOT_APPLICABLE

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
        for line in _get(call, "lines") or ():
            if span.line <= int(line) - 1 <= span.end_line:
                return True
        if getattr(site, "enclosing_function", None) is None and kernel is not None and \
                _get(call, "kernel_line") is not None and \
                kernel.line <= int(_get(call, "kernel_line")) - 1 <= kernel.end_line:
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


def traced_calls(entries: Sequence[Any]) -> tuple[TracedCall, ...]:
    """Every pallas_call the check's entries made (``CheckEntry`` with ``reached``), with what the run
    learned about it. Tier 2's VMEM report is per entry (the largest of its Mosaic kernels): it is given
    to a call when the entry made that one call; otherwise the why says what is missing."""
    out = []
    for entry in entries:
        reached = [c for c in (getattr(entry, "reached", None) or ()) if not getattr(c, "partial", False)]
        inputs = tuple((tuple(int(d) for d in sig.shape), str(sig.dtype)) for sig in entry.inputs)
        vmem, why = _compiled_vmem(entry, len(reached))
        for call in reached:
            out.append(TracedCall(
                entry=entry.name, lines=tuple(call.lines), kernel=call.kernel, kernel_line=call.kernel_line,
                inputs=inputs, vmem_bytes=call.vmem_bytes, grid=getattr(call, "grid", None),
                blocks=tuple(TracedBlock(b.role, b.index, tuple(b.shape), b.dtype, b.bytes, b.buffers)
                             for b in call.buffers),
                compiled_vmem_bytes=vmem, compiled_vmem_why=why))
    return tuple(out)


def _compiled_vmem(entry: Any, calls: int) -> tuple[int | None, str]:
    """(libtpu's scoped VMEM bytes for the entry's one kernel, "") or (None, why not)."""
    state = next((o.display() for o in entry.tiers if o.tier == 2), "not asked for")
    if state != "ok":
        return None, f"tier 2 (the libtpu compile) did not run here ({state})"
    memory = entry.memory or {}
    if "vmem_scoped_bytes" not in memory:
        return None, ("tier 2 ran, but libtpu wrote no VMEM report (its verdict may come from the results "
                      "store, or the installed libtpu does not write one)")
    if calls != 1 or memory.get("vmem_kernels", 1) != 1:
        return None, f"the task's entry {entry.name} makes {calls} pallas_call(s): the report is not split per call"
    return int(memory["vmem_scoped_bytes"]), ""
