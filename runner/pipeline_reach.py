"""Blocks an ``emit_pipeline`` index map names past the end of its ref, found by tracing (worker side).

A kernel that pipelines over HBM refs itself (``pltpu.emit_pipeline(body, grid=..., in_specs=...,
out_specs=...)(x_hbm, o_hbm)``) has index maps no ``pallas_call`` BlockSpec shows: tier 1's
``block_reach`` never sees them, and when tier 3's run copies a block past the end the interpreter
names the DMA jax's pipeline made, inside jax, so the finding fell back to the ``pallas_call`` (or the
wrapper's ``return``). ``pipeline_past_end`` traces the entry once (``jax.make_jaxpr``, nothing runs) with
``emit_pipeline`` recording each pipeline it builds and the refs it is applied to, then runs each
BlockSpec's index map on the pipeline grid's corners with plain ints (``block_reach._past_end``): the
index maps whose block starts past their ref's end, with the line of the index map (a lambda's, or a
``def``'s) in the checked file. An index map that needs more than ints is left alone.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from typing import Any, Callable, Iterator

import jax

from .block_reach import MAX_CORNERS, _past_end

_NAME = "emit_pipeline"


def pipeline_past_end(fn: Callable[..., Any], args: tuple[Any, ...], path: str,
                      modules: tuple[Any, ...] = ()) -> list[tuple[int, str]]:
    """(1-based line of the index map, what it does) for each pipeline BlockSpec naming a block past its
    ref's end when ``fn(*args)`` is traced ([] when none, or when nothing could be traced)."""
    pipelines: list[tuple[Any, list[Any], list[Any], tuple[Any, ...]]] = []
    with _recording(pipelines, modules):
        for attempt in range(2):
            try:
                jax.make_jaxpr(fn)(*args)
            except Exception:  # noqa: BLE001 - whatever was recorded before the failure still counts
                pass
            if pipelines or attempt:
                break
            jax.clear_caches()  # a jitted entry traced before comes from jax's cache without building its pipelines
    out: list[tuple[int, str]] = []
    target = os.path.realpath(path)
    for grid, ins, outs, refs in pipelines:
        grid = (grid,) if isinstance(grid, int) else tuple(grid or ())
        if not grid or not all(isinstance(g, int) and g > 0 for g in grid) or 2 ** len(grid) > MAX_CORNERS:
            continue
        corners = list(itertools.product(*[sorted({0, g - 1}) for g in grid]))
        shapes = [tuple(getattr(r, "shape", ()) or ()) for r in refs]
        for role, specs, offset in (("input", ins, 0), ("output", outs, len(ins))):
            for index, spec in enumerate(specs):
                if offset + index >= len(shapes):
                    continue
                found = _past_end(spec, shapes[offset + index], corners)
                line = _index_map_line(spec, target)
                if found is None or line is None:
                    continue
                out.append((line, f"the pipeline's index map of {role} {index} returns block {found['block_index']} at "
                                  f"step {found['step']}: on axis {found['axis']} it starts at element {found['start']}, "
                                  f"past the ref's {found['dim']}"))
    return out


def _index_map_line(spec: Any, target: str) -> int | None:
    index_map = getattr(spec, "index_map", None)
    index_map = getattr(index_map, "index_map", index_map)  # jax wraps it (``_IndexMapFunc``)
    code = getattr(index_map, "__code__", None)
    if code is None or os.path.realpath(code.co_filename) != target:
        return None
    return code.co_firstlineno


def _as_list(specs: Any) -> list[Any]:
    if specs is None:
        return []
    return list(specs) if isinstance(specs, (list, tuple)) else [specs]


@contextlib.contextmanager
def _recording(pipelines: list[Any], modules: tuple[Any, ...]) -> Iterator[None]:
    """``emit_pipeline`` (jax's module, ``pltpu``, and the names the user's modules bound it to) recording
    the pipelines built while the block runs."""
    from jax._src.pallas.mosaic import pipeline as pipeline_mod
    from jax.experimental.pallas import tpu as pltpu

    original = pipeline_mod.emit_pipeline

    def emit_pipeline(body: Any, *a: Any, **kw: Any) -> Any:
        made = original(body, *a, **kw)

        def apply(*refs: Any, **more: Any) -> Any:
            pipelines.append((kw.get("grid"), _as_list(kw.get("in_specs")), _as_list(kw.get("out_specs")), refs))
            return made(*refs, **more)

        return apply

    holders = [pipeline_mod, pltpu]
    spaces = [m for m in modules if isinstance(m, dict) and m.get(_NAME) is original]  # `from ... import emit_pipeline`
    try:
        for holder in holders:
            setattr(holder, _NAME, emit_pipeline)
        for space in spaces:
            space[_NAME] = emit_pipeline
        yield
    finally:
        for holder in holders:
            setattr(holder, _NAME, original)
        for space in spaces:
            space[_NAME] = original
