"""The pallas_call hover from what the last check's run learned (the report's ``TracedCall``s,
engine/findings/reach.py): the example inputs the entry ran with, each block as traced (shape, dtype, bytes),
the VMEM the blocks take per grid step against the chip's scoped limit, the VMEM the TPU compiler
itself allocated where tier 2 ran (libtpu's VMEM report), the grid's step count and the bytes copied
between HBM and VMEM per step.

Plain functions of the site, its traced call and the chip's limits; hover_sources.py picks the call
and the words of where it came from. Every number says its source: "as traced" (the shapes and dtypes
of the check's run), "the compiler allocated" (tier 2), never an estimate presented as a measurement.
"""

from __future__ import annotations

from typing import Sequence

from ...analysis.dtypes import DTYPE_BITS
from ...analysis.footprint import grid_steps, tiling_verdict
from ...analysis.types import BlockSpecInfo, KernelSite, Span, TracedBlock, TracedCall
from ...engine.findings.reach import site_reached

from .hover import ChipLimits, mib, part_at, shape_text

_ROLES = {"in": "in_specs", "out": "out_specs"}


def traced_for(site: KernelSite, calls: Sequence[TracedCall], *, edited: bool) -> TracedCall | None:
    """The traced call that is this site's: by the lines on its stack (the text the check ran is this
    one), else by the kernel's name when one call alone has it (lines may have moved since)."""
    if not edited:
        for call in calls:
            if site_reached(site, [call]):
                return call
    named = [c for c in calls if site.kernel_name and c.kernel == site.kernel_name]
    return named[0] if len(named) == 1 else None


def inputs_text(call: TracedCall) -> str:
    """``float32[256,128], float32[128,256]``."""
    return ", ".join(f"{dtype}[{','.join(str(d) for d in shape)}]" for shape, dtype in call.inputs) or "no array inputs"


def block_of(call: TracedCall, spec: BlockSpecInfo) -> TracedBlock | None:
    return next((b for b in call.blocks if b.role == _ROLES[spec.role] and b.index == spec.position), None)


def block_line(spec: BlockSpecInfo, block: TracedBlock | None) -> str:
    """One BlockSpec as traced: its written shape, the traced dims, dtype, bytes and tiling."""
    label = f"`{spec.role}[{spec.position}]` {shape_text(spec.block_shape)}"
    if block is None:
        return f"- {label}: not a VMEM block in the traced call (memory space {spec.memory_space or 'not VMEM'})"
    traced = shape_text(block.shape)
    dims = "" if traced == shape_text(spec.block_shape) else f" = {traced}"
    bits = DTYPE_BITS.get(block.dtype)
    tiles = f"; {tiling_verdict(block.shape, bits)}" if bits else ""
    return f"- {label}{dims} {block.dtype}: {mib(block.bytes)}{tiles}"


def vmem_lines(call: TracedCall, chip: ChipLimits | None) -> list[str]:
    """The VMEM a grid step takes against the scoped limit: the compiler's own allocation where tier 2
    reported it, else the traced blocks (double-buffered) with why the compiler's is not known yet."""
    if call.compiled_vmem_bytes is not None:
        total, how = call.compiled_vmem_bytes, "as the TPU compiler allocated it (libtpu's VMEM report, tier 2)"
        also = f"- the blocks as traced: {mib(call.vmem_bytes)} (pipelined blocks double-buffered, scratch once)"
    else:
        total, how = call.vmem_bytes, "for the blocks as traced (pipelined blocks double-buffered, scratch once)"
        also = f"- the compiler's own allocation: not known yet: {call.compiled_vmem_why}"
    return [_share_line(total, chip, how), also]


def _share_line(total: int, chip: ChipLimits | None, how: str) -> str:
    """``- VMEM per grid step: 384.0 KiB <how>: 1.2% of the 32.00 MiB scoped VMEM on v6e (limit from ...)``."""
    head = f"- VMEM per grid step: {mib(total)} {how}"
    if chip is None or chip.scoped_vmem_bytes is None:
        name = chip.name if chip else "the target"
        return head + f"; the scoped VMEM limit for {name} is not known: run `pallasite chips` to measure it"
    limit = f"the {mib(chip.scoped_vmem_bytes)} scoped VMEM on {chip.name} (limit from {chip.source})"
    if total > chip.scoped_vmem_bytes:
        return head + f": over {limit}: expect a VMEM OOM (PLS201)"
    share = 100 * total / chip.scoped_vmem_bytes
    return head + f": {share:.1f}% of {limit}" if share < 10 else head + f": {share:.0f}% of {limit}"


def grid_lines(site: KernelSite, call: TracedCall) -> list[str]:
    """The grid as traced with its step count, and the bytes one step copies between HBM and VMEM."""
    sem = f"; dimension_semantics {list(site.dimension_semantics)}" if site.dimension_semantics else ""
    if call.grid is None:
        grid = "- grid: not known from the traced call (the worker did not send it)"
    else:
        written = f"{shape_text(site.grid)} = " if site.grid is not None and tuple(site.grid) != call.grid else ""
        grid = f"- grid {written}{shape_text(call.grid)}: {grid_steps(call.grid)} steps as traced{sem}"
    moved = sum(b.bytes for b in call.blocks if b.role in ("in_specs", "out_specs"))
    step = (f"- per grid step: at most {mib(moved)} copied between HBM and VMEM (one block of each input and "
            "output; a block whose index does not change from one step to the next is not copied again)")
    return [grid, step]


def traced_site_hover(site: KernelSite, call: TracedCall, chip: ChipLimits | None, provenance: str) -> str:
    """The pallas_call hover from the traced call (``provenance``: which check, when)."""
    title = f"**pallas_call** of `{site.kernel_name or call.kernel or '?'}`"
    if site.enclosing_function:
        title += f" in `{site.enclosing_function}`"
    out = [title, "", f"As the last check ran it: entry `{call.entry}` with {inputs_text(call)} ({provenance}).", ""]
    out += [block_line(s, block_of(call, s)) for s in (*(site.in_specs or ()), *(site.out_specs or ()))]
    out += [f"- scratch {shape_text(b.shape)} {b.dtype}: {mib(b.bytes)}"
            for b in call.blocks if b.role == "scratch_shapes"]
    out += vmem_lines(call, chip)
    out += grid_lines(site, call)
    return "\n".join(out)


def traced_spec_hover(spec: BlockSpecInfo, site: KernelSite, call: TracedCall, provenance: str) -> str:
    """The BlockSpec hover from the traced call: the block's dtype and bytes, double-buffered."""
    block = block_of(call, spec)
    lines = [f"**BlockSpec** {spec.role}[{spec.position}] of `{site.kernel_name or '?'}`", "",
             block_line(spec, block)]
    if block is not None:
        lines.append(f"- double-buffered: {mib(block.bytes * block.buffers)}")
    if spec.index_map_arity is not None:
        lines.append(f"- index_map takes {spec.index_map_arity} argument(s), returns "
                     f"{spec.index_map_results if spec.index_map_results is not None else '?'} index(es)")
    lines.append(f"\nAs the last check ran it: entry `{call.entry}` with {inputs_text(call)} ({provenance}).")
    return "\n".join(lines)


def traced_hover_at(sites: Sequence[KernelSite], line: int, column: int, chip: ChipLimits | None,
                    traced: dict[Span, tuple[TracedCall, str]]) -> tuple[str, Span] | None:
    """The hover of the BlockSpec, grid or pallas_call at (line, column) from its traced call
    (``traced``: site span -> (call, provenance)); None where the check's run made no call of that site
    (the source's reading answers then: hover.hover_at)."""
    found = part_at(sites, line, column)
    if found is None or found[1].span not in traced or found[1].backend == "gpu":
        return None
    kind, site, spec, span = found
    call, provenance = traced[site.span]
    if kind == "spec":
        return traced_spec_hover(spec, site, call, provenance), span
    if kind == "grid":
        return f"**grid** of `{site.kernel_name or '?'}`\n\n" + "\n".join(grid_lines(site, call)), span
    return traced_site_hover(site, call, chip, provenance), span
