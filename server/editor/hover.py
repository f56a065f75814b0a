"""Hover text (markdown) for a pallas_call, a BlockSpec, a grid, a kernel function, and the
error catalog's explanation of the findings under the cursor.

Plain functions of analysis results; the LSP layer only picks what is under the cursor.
Numbers say where they came from: block bytes, the footprint, grid steps and tiling are the
static arithmetic of ``analysis/footprint.py`` on the block shape and a dtype read from the file's
example inputs (or shown per dtype when unknown); the VMEM limit names its source (the chip
table, or "unknown"); compile results name tier, chip and who said so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Sequence

from ...analysis.dtypes import DTYPE_BITS, block_bytes
from ...analysis.footprint import block_elements, grid_steps, in_vmem, scratch_bytes, tiling_verdict, vmem_footprint
from ...analysis.types import BlockSpecInfo, Finding, KernelSite, KernelVerdict, Span
from ...knowledge import catalog

# element sizes shown when the source does not say the dtype (bits)
UNKNOWN_DTYPE_BITS = (32, 16, 8)
_DTYPE_RE = re.compile(r"\b(?:jnp|np|jax\.numpy|numpy)\.("
                       + "|".join(sorted(DTYPE_BITS, key=len, reverse=True)) + r")\b")


@dataclass(frozen=True)
class ChipLimits:
    """What hovers compare against, and where those numbers came from."""

    name: str
    scoped_vmem_bytes: int | None = None  # the compiler's default scoped VMEM limit
    vmem_bytes: int | None = None  # VMEM capacity per TensorCore
    source: str = "unknown"  # e.g. "chip table (libtpu 0.0.42.1 probe)"


@dataclass(frozen=True)
class KernelResult:
    """One known compile result for a kernel (from the last check or the results store)."""

    tier: int
    chip: str
    status: str  # "ok", "error", "skipped: ...", "not run"
    provenance: str  # e.g. "last check in this session, 14:02:11 UTC", "results store (.pallasite)"


def dtypes_in(text: str) -> list[str]:
    """The distinct dtype names written in ``text``, in order of appearance."""
    return list(dict.fromkeys(m.group(1) for m in _DTYPE_RE.finditer(text)))


def mib(n: int) -> str:
    if n >= 1 << 20:
        return f"{n / (1 << 20):.2f} MiB"
    if n >= 1 << 10:
        return f"{n / (1 << 10):.1f} KiB"
    return f"{n} B"


def _per_elem(bits: int) -> str:
    return f"{bits // 8} B/elem" if bits % 8 == 0 else f"{bits} bits/elem"


def shape_text(shape: Sequence[int | str | None] | None) -> str:
    if shape is None:
        return "?"
    return "(" + ", ".join("None" if d is None else str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def written_dtype(site: KernelSite, spec: BlockSpecInfo) -> str | None:
    """An output block's element type as its ``out_shape`` writes it (``jnp.float32``), when it names one."""
    if spec.role != "out" or not site.out_dtypes or spec.position >= len(site.out_dtypes):
        return None
    name = (site.out_dtypes[spec.position] or "").split(".")[-1]
    return name if name in DTYPE_BITS else None


def _spec_line(spec: BlockSpecInfo, dtype: str | None) -> str:
    label = f"`{spec.role}[{spec.position}]` {shape_text(spec.block_shape)}"
    if not in_vmem(spec):
        return f"- {label}: memory space {spec.memory_space}, not a VMEM block"
    elems = block_elements(spec.block_shape)
    if elems is None:
        return f"- {label}: size not static"
    if dtype is not None:
        bits = DTYPE_BITS[dtype]
        return f"- {label}: {mib(block_bytes(elems, bits))} as {dtype}; {tiling_verdict(spec.block_shape, bits)}"
    per = ", ".join(f"{mib(block_bytes(elems, b))} at {_per_elem(b)}" for b in UNKNOWN_DTYPE_BITS)
    return f"- {label}: {per} (dtype not known from the source)"


NOT_KNOWN_YET = ("not known yet: {why}; the compiler tiers' run gives it (save the file in a trusted folder, "
                 "or run *Check*)")


def unknown_sizes(site: KernelSite) -> str:
    """Why a site's VMEM footprint cannot be read from the source: the blocks whose size is not static."""
    specs = (*(site.in_specs or ()), *(site.out_specs or ()))
    names = [f"{s.role}[{s.position}] {shape_text(s.block_shape)}" for s in specs
             if block_elements(s.block_shape) is None and in_vmem(s)]
    if names:
        return "the block sizes of " + ", ".join(names) + " are not static"
    return "the in_specs / out_specs are not read from the source"


def _limit_line(total: int, complete: bool, chip: ChipLimits | None, label: str, why: str = "") -> str:
    if not complete and total == 0:  # nothing static: no number, and why
        why = why or "no block size is static"
        return f"- double-buffered VMEM footprint ({label}): " + NOT_KNOWN_YET.format(why=why)
    prefix = "at least " if not complete else ""
    line = f"- double-buffered VMEM footprint ({label}): {prefix}{mib(total)}"
    if chip is None or chip.scoped_vmem_bytes is None:
        name = chip.name if chip else "the target"
        return line + f" (scoped VMEM limit for {name} not known: run `pallasite chips` to measure it)"
    share = 100 * total / chip.scoped_vmem_bytes
    verdict = "over the limit: expect a VMEM OOM (PLS201)" if total > chip.scoped_vmem_bytes else f"{share:.0f}%"
    return (line + f" of {mib(chip.scoped_vmem_bytes)} scoped VMEM on {chip.name} ({verdict}; "
            f"limit from {chip.source})")


def site_hover(site: KernelSite, chip: ChipLimits | None, dtype: str | None, dtype_source: str = "",
               grid_value: tuple[int, ...] | None = None) -> str:
    """The pallas_call hover: blocks, footprint against the chip's scoped VMEM, grid steps, tiling.
    ``grid_value``: the grid evaluated at the task's example shapes, when it is not static."""
    title = f"**pallas_call** of `{site.kernel_name or '?'}`"
    if site.enclosing_function:
        title += f" in `{site.enclosing_function}`"
    if site.backend == "gpu":
        return (title + "\n\nA GPU pallas_call: TPU block tiling and VMEM limits do not apply.\n"
                + grid_hover(site, grid_value))
    out = [title, ""]
    if dtype:
        out.append(f"Element type {dtype}{' (' + dtype_source + ')' if dtype_source else ''}.")
    else:
        out.append("Element type not known from the source: sizes shown per element size"
                   + (" (outputs: as out_shape writes them)." if any(
                       written_dtype(site, s) for s in site.out_specs or ()) else "."))
    out.append("")
    specs = (*(site.in_specs or ()), *(site.out_specs or ()))
    out.extend(_spec_line(s, dtype or written_dtype(site, s)) for s in specs)
    for scratch in site.scratch_shapes or ():
        size = scratch_bytes(scratch)
        out.append(f"- scratch {scratch.kind} {shape_text(scratch.shape)} {scratch.dtype or ''}: "
                   f"{mib(size) if size is not None else 'size not static'}")
    why = unknown_sizes(site)
    for bits in [DTYPE_BITS[dtype]] if dtype else UNKNOWN_DTYPE_BITS[:2]:
        total, complete = vmem_footprint(site, bits)
        out.append(_limit_line(total, complete, chip, dtype or _per_elem(bits), why))
    out.append(grid_hover(site, grid_value))
    return "\n".join(out)


def grid_hover(site: KernelSite, grid_value: tuple[int, ...] | None = None) -> str:
    """Grid steps: from the static grid, else from ``grid_value`` (the task's example shapes)."""
    if site.grid is None:
        return "- grid: not static (or not given: one step)"
    steps = grid_steps(site.grid)
    sem = f"; dimension_semantics {list(site.dimension_semantics)}" if site.dimension_semantics else ""
    if steps is not None:
        count = f"{steps} steps"
    elif grid_value is not None:
        count = f"{shape_text(grid_value)} = {grid_steps(grid_value)} steps at the example inputs' shapes"
    else:
        count = "step count " + NOT_KNOWN_YET.format(why="the grid depends on values the source does not fix")
    return f"- grid {shape_text(site.grid)}: {count}{sem}"


def spec_hover(spec: BlockSpecInfo, site: KernelSite, dtype: str | None) -> str:
    head = f"**BlockSpec** {spec.role}[{spec.position}] of `{site.kernel_name or '?'}`"
    dtype = dtype or written_dtype(site, spec)
    lines = [head, "", _spec_line(spec, dtype)]
    elems = block_elements(spec.block_shape)
    if elems is not None and in_vmem(spec):
        sizes = [DTYPE_BITS[dtype]] if dtype else UNKNOWN_DTYPE_BITS
        lines.append("- double-buffered: " + ", ".join(f"{mib(2 * block_bytes(elems, b))} at {_per_elem(b)}"
                                                      for b in sizes))
    if spec.index_map_arity is not None:
        lines.append(f"- index_map takes {spec.index_map_arity} argument(s), returns "
                     f"{spec.index_map_results if spec.index_map_results is not None else '?'} index(es)")
    return "\n".join(lines)


def kernel_hover(name: str, results: Iterable[KernelResult], compiled: str = "") -> str:
    """The kernel function hover: the file's compile verdict from the last check (``compiled``: the one
    vocabulary, "compiled for v6e (tiers 0,1,2)" / "not compiled for v6e: <why>"), then the latest
    per-tier results known, each with its provenance."""
    rows = sorted(results, key=lambda r: (r.chip, r.tier))
    out = [f"**kernel** `{name}`", ""]
    if compiled:
        out += [f"The file at the last check: **{compiled}**", ""]
    if not rows:
        out.append("No compile results yet: save the file (in a trusted folder) or run *Check*.")
        return "\n".join(out)
    out.append("| tier | chip | result | from |")
    out.append("|---|---|---|---|")
    for r in rows:
        out.append(f"| {r.tier} | {r.chip} | {r.status} | {r.provenance} |")
    return "\n".join(out)


def verdict_results(verdicts: Iterable[KernelVerdict], name: str, chip: str, provenance: str) -> list[KernelResult]:
    """A checker report's per-kernel tier states as ``KernelResult``s for ``name``."""
    out = []
    for v in verdicts:
        if v.name != name:
            continue
        out.extend(KernelResult(tier, chip, status, provenance) for tier, status in v.tiers if status != "not run")
    return out


def hover_at(sites: Sequence[KernelSite], line: int, column: int, chip: ChipLimits | None, dtype: str | None,
             dtype_source: str = "", grids: dict[Span, tuple[int, ...]] | None = None) -> tuple[str, Span] | None:
    """The site hover text for what is at (line, column): a BlockSpec, the grid, or the call.
    ``grids``: site span -> its grid evaluated at the task's example shapes (when not static)."""
    grids = grids or {}
    found = part_at(sites, line, column)
    if found is None:
        return None
    kind, site, spec, span = found
    if kind == "spec":
        return spec_hover(spec, site, dtype), span
    if kind == "grid":
        return f"**grid** of `{site.kernel_name or '?'}`\n\n" + grid_hover(site, grids.get(site.span)), span
    return site_hover(site, chip, dtype, dtype_source, grids.get(site.span)), span


def part_at(sites: Sequence[KernelSite], line: int, column: int
            ) -> tuple[str, KernelSite, BlockSpecInfo | None, Span] | None:
    """What of a pallas_call is at (line, column): ("spec", site, spec, its span), ("grid", site, None,
    span) or ("call", site, None, the callee's span); a BlockSpec first (it may be written before the
    call), then the grid value or the ``grid=`` keyword, then the call."""
    for site in sites:
        for spec in (*(site.in_specs or ()), *(site.out_specs or ())):
            if spec.span.contains(line, column):
                return "spec", site, spec, spec.span
    for site in sites:
        for span in (site.grid_span, site.keyword_span("grid")):
            if span is not None and span.contains(line, column):
                return "grid", site, None, span
    for site in sites:
        if site.span.contains(line, column):
            return "call", site, None, site.call_span
    return None


def kernel_at(sites: Sequence[KernelSite], line: int, column: int) -> str | None:
    """The kernel name whose def line is under the cursor."""
    for site in sites:
        span = site.kernel_def_span
        if span is not None and span.line == line and site.kernel_name:
            return site.kernel_name
    return None


# --------------------------------------------------------------------------- the error catalog


def findings_at(findings: Iterable[Finding], line: int, column: int) -> list[Finding]:
    """The findings whose range holds (line, column), in order, one per code."""
    seen: set[str] = set()
    out = []
    for f in findings:
        if f.span.contains(line, column) and f.code not in seen:
            seen.add(f.code)
            out.append(f)
    return out


def explanations(codes: Iterable[str]) -> str | None:
    """The catalog entries of ``codes`` as markdown (one section each), or None if there are none."""
    parts = []
    for code in dict.fromkeys(codes):
        try:
            parts.append(catalog.explain(code, markdown=True))
        except (catalog.UnknownCode, catalog.CatalogError):
            continue
    return "\n\n---\n\n".join(parts) if parts else None


def with_explanations(found: tuple[str, Span] | None, findings: Sequence[Finding]) -> tuple[str, Span] | None:
    """The hover for a position: its own content (if any), then the explanation of each finding
    there. The range is the content's, else the first finding's."""
    explained = explanations(f.code for f in findings)
    if explained is None:
        return found
    if found is None:
        return explained, findings[0].span
    text, span = found
    return f"{text}\n\n---\n\n{explained}", span


def with_never_ran(found: tuple[str, Span] | None, said: str | None, line: int) -> tuple[str, Span] | None:
    """The hover with "never ran in any check: lines a-b; ..." first when ``line`` lies in such a range
    (engine/findings/never_ran.py's PLS308), so the hover of any line of it says so."""
    if said is None:
        return found
    text = f"**{said[0].upper()}{said[1:]}** (PLS308)"
    if found is None:
        return text, Span(line, 0, line, 0)
    return f"{text}\n\n---\n\n{found[0]}", found[1]


def explain_code(code: object) -> dict[str, object]:
    """The ``pallasite.explain`` command's answer: the code's catalog entry as markdown, or why not."""
    if not isinstance(code, str) or not code.strip():
        return {"ok": False, "message": f"pallasite.explain: give a finding code such as \"PLS001\", got {code!r}."}
    try:
        entry = catalog.entry(code)
        return {"ok": True, "code": entry.code, "title": entry.title, "markdown": catalog.explain(code, markdown=True)}
    except (catalog.UnknownCode, catalog.CatalogError) as err:
        return {"ok": False, "message": f"pallasite.explain: {err}"}

