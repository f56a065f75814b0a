"""Value origins through the code users write (analysis/origins.py, analysis/check_values.py).

Each fixture of tests/data/origins/ is a small real Pallas kernel whose block sizes travel before
they reach a BlockSpec: through a ``functools.partial`` alias, a jitted function's static
argument built from a TUNED_PARAMS list, arithmetic, a ``**dict`` splat into a dataclass, a
classmethod and a helper returning the sizes, a parameter a branch may replace. The line where
the value is written carries a ``# origin`` comment; every trace must end there. Each failed
before the data-flow followed that step (the trace stopped at the BlockSpec's expression).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pallasite.analysis.check_values import culprit
from pallasite.analysis.origins import trace
from pallasite.analysis.tier0 import analyze

DATA = Path(__file__).parent / "data" / "origins"


def _marked(text: str, tag: str = "") -> int:
    """The 0-based line carrying ``# origin`` (``# origin: tag``)."""
    mark = "# origin" + (f": {tag}" if tag else "")
    lines = [i for i, line in enumerate(text.splitlines()) if line.rstrip().endswith(mark)]
    assert len(lines) == 1, (mark, lines)
    return lines[0]


def _dims(name: str):
    text = (DATA / name).read_text()
    sites = analyze(text, name).sites
    return text, sites


def test_partial_alias_keywords_reach_the_block_spec():
    text, [site] = _dims("partial_alias.py")
    spec = site.in_specs[0]
    rows, cols = (trace(text, d) for d in spec.dim_spans)
    assert (rows.line, rows.value, rows.kind) == (_marked(text), 64, "argument")
    assert (cols.line, cols.value) == (_marked(text), 384)


def test_jit_static_argument_from_a_tuned_list_entry():
    text, [site] = _dims("jit_static_list.py")
    bm, bn = (trace(text, d) for d in site.in_specs[0].dim_spans)
    assert (bm.line, bm.value, bm.kind) == (_marked(text), 128, "list entry")
    assert "TUNED_PARAMS['block_shape'][1] = 256" in bn.what


def test_arithmetic_dict_splat_classmethod_and_returned_pair():
    text, sites = _dims("arithmetic_and_splat.py")
    by_fn = {s.enclosing_function: s for s in sites}
    rows = trace(text, by_fn["copy"].in_specs[0].dim_spans[0])  # 2 * blocks.rows, blocks = Blocks(**SIZES)
    assert (rows.line, rows.value) == (_marked(text, "rows"), 24)
    assert not rows.exact  # the block is twice the value written there
    default = trace(text, by_fn["copy_default"].in_specs[0].dim_spans[0])  # Blocks.default().rows
    assert (default.line, default.value) == (_marked(text, "default"), 16)
    pair = [trace(text, d) for d in by_fn["copy_pair"].in_specs[0].dim_spans]  # bm, bn = pick_pair()
    assert [(o.line, o.value) for o in pair] == [(_marked(text, "pair"), 40), (_marked(text, "pair"), 512)]


def test_a_branch_that_may_replace_a_parameter_and_frames_choosing_the_call_site():
    text, [site] = _dims("conditional_tiling.py")
    tm_span = site.in_specs[0].dim_spans[0]
    assert trace(text, tm_span).kind == "expression"  # two call sites pass different tilings: no guess
    lines = text.splitlines()
    small = next(i for i, line in enumerate(lines) if "return neg(x, tiling=(8, 128))" in line) + 1
    spec_line = tm_span.line + 1
    frames = ((small, "small"), (spec_line, "neg"))
    tm = trace(text, tm_span, frames=frames)
    assert (tm.line, tm.value) == (_marked(text, "small"), 8)


def test_a_local_copy_of_a_parameter_that_a_branch_may_replace():
    """``bq = block_q`` then ``if bq is None: bq, bk = _lookup(...)``: the lookup computes, the
    caller wrote 256 (before: two assignments to ``bq`` stopped the trace at the BlockSpec)."""
    text, [site] = _dims("tuned_or_looked_up.py")
    bq, bk = (trace(text, d) for d in site.in_specs[0].dim_spans)
    assert (bq.line, bq.value, bq.kind) == (_marked(text), 256, "dict entry")
    assert bk.value == 512 and "block_k" in bk.what
    no_default = text.replace("    bq = block_q\n", "    bq = block_q\n    bq = bq\n")
    unknown = trace(no_default, _dims_of(no_default)[0])
    assert unknown is None or unknown.kind == "expression"  # two plain assignments: no guess


def _dims_of(text: str):
    return analyze(text, "t.py").sites[0].in_specs[0].dim_spans


CHECKED = '''
import jax
from jax.experimental import pallas as pl

TUNED = {"block": 256, "compute": 100}
LANES = 128


def _forward(x, block, compute):
    if block % compute:
        raise ValueError(f"{block=} must be a multiple of {compute=}")
    if compute % LANES:
        raise ValueError(f"compute={compute} must be a multiple of {LANES}")
    return x


def entry(x):
    return _forward(x, TUNED["block"], compute=TUNED["compute"])
'''


def test_a_failed_check_is_traced_to_the_value_it_rejected():
    lines = CHECKED.splitlines()
    raise_line = next(i for i, line in enumerate(lines) if "must be a multiple of {compute=}" in line) + 1
    call_line = next(i for i, line in enumerate(lines) if "return _forward(" in line) + 1
    frames = ((call_line, "entry"), (raise_line, "_forward"))
    found = culprit(CHECKED, frames, "block=256 must be a multiple of compute=100")
    assert found is not None and found.name == "compute"
    assert (found.origin.line, found.origin.value) == (lines.index('TUNED = {"block": 256, "compute": 100}'), 100)
    assert found.check_line == raise_line - 1


def test_a_value_that_went_through_object_state_is_found_by_its_one_literal():
    text = CHECKED.replace('return _forward(x, TUNED["block"], compute=TUNED["compute"])',
                           'return Holder(compute=TUNED["compute"]).run(x)').replace(
        "def entry(x):", "class Holder:\n    def __init__(self, **kw):\n        self.kw = kw\n\n"
                         "    def run(self, x):\n        return _forward(x, 256, **self.kw)\n\n\ndef entry(x):")
    lines = text.splitlines()
    raise_line = next(i for i, line in enumerate(lines) if "must be a multiple of {compute=}" in line) + 1
    run_line = next(i for i, line in enumerate(lines) if "return _forward(x, 256, **self.kw)" in line) + 1
    found = culprit(text, ((run_line, "run"), (raise_line, "_forward")), "block=256 must be a multiple of compute=100.")
    assert found is not None and found.origin.value == 100 and found.origin.kind == "dict entry"
    assert lines[found.origin.line].startswith("TUNED = ")


def test_no_culprit_when_the_message_names_no_written_value_and_none_breaks_the_tiling():
    text = CHECKED.replace('"compute": 100', '"compute": 64')
    lines = text.splitlines()
    raise_line = next(i for i, line in enumerate(lines) if "must be a multiple of {LANES}" in line) + 1
    call_line = next(i for i, line in enumerate(lines) if "return _forward(" in line) + 1
    assert culprit(text, ((call_line, "entry"), (raise_line, "_forward")), "something else failed") is None


@pytest.mark.parametrize("name", ["partial_alias.py", "jit_static_list.py", "arithmetic_and_splat.py",
                                  "conditional_tiling.py", "tuned_or_looked_up.py"])
def test_fixtures_are_clean_kernels_for_tier0(name):
    text = (DATA / name).read_text()
    assert [f.code for f in analyze(text, name).findings if f.severity == "error"] == []


def test_a_check_written_over_several_lines_is_found_from_the_line_the_traceback_names():
    """Python 3.11 names the line of the failing part of a multi-line raise (its message line); the
    check is still the raise (before: no failing statement, no culprit)."""
    text = CHECKED.replace('        raise ValueError(f"{block=} must be a multiple of {compute=}")',
                           '        raise ValueError(\n            f"{block=} must be a multiple of {compute=}"\n        )')
    lines = text.splitlines()
    message_line = next(i for i, line in enumerate(lines) if "must be a multiple of {compute=}" in line) + 1
    call_line = next(i for i, line in enumerate(lines) if "return _forward(" in line) + 1
    found = culprit(text, ((call_line, "entry"), (message_line, "_forward")), "block=256 must be a multiple of compute=100")
    assert found is not None and found.name == "compute" and found.check_line == message_line - 2


def test_min_of_a_written_size_and_a_shape_traces_to_the_size_as_a_chosen_value():
    """``bq = min(blocks.block_q, x.shape[0])``: the one argument written somewhere is followed,
    marked ``chosen`` (min may have taken the shape instead) and not exact (before: the trace
    stopped at the min)."""
    text, sites = _dims("min_and_self.py")
    site = next(s for s in sites if s.enclosing_function == "_clipped")
    found = trace(text, site.in_specs[0].dim_spans[0])
    assert (found.line, found.value, found.kind) == (_marked(text, "clipped"), 60, "argument")
    assert found.chosen and not found.exact


def test_self_attributes_trace_to_the_constructor_default_or_the_argument_of_its_call():
    """``br, bc = self.block_rows, self.block_cols`` in a method: the one ``self.x = ...`` of the
    class, then ``__init__``'s parameter: the argument where the class is called, else its default
    (before: the trace stopped at the method's unpacking)."""
    text, sites = _dims("min_and_self.py")
    site = next(s for s in sites if s.enclosing_function == "__call__")
    rows, cols = (trace(text, d) for d in site.in_specs[0].dim_spans)
    assert (rows.line, rows.value, rows.kind) == (_marked(text, "default"), 8, "keyword default")
    assert (cols.line, cols.value, cols.kind) == (_marked(text, "argument"), 512, "argument")


def test_a_chosen_size_the_lowering_did_not_see_is_not_blamed():
    """When min() took the other value (the message's block dim is not the traced size), the block
    finding stays at the BlockSpec."""
    from pallasite.engine.findings.origin_findings import to_origin

    text, sites = _dims("min_and_self.py")
    site = next(s for s in sites if s.enclosing_function == "_clipped")
    spec = site.in_specs[0]
    lines = text.splitlines()
    said = "Block spec for args[0] in pallas_call has block shape ({}, 512), array shape (100, 512)"
    moved = to_origin("PLS101", {"message": said.format(60)}, spec, text, lines)
    assert moved is not None and moved.span.line == _marked(text, "clipped")
    assert to_origin("PLS101", {"message": said.format(44)}, spec, text, lines) is None


def test_an_out_shape_returned_by_a_helper_is_followed_to_its_dtype():
    """``out_shape=_out(x)``: the dtype written in the helper's ``ShapeDtypeStruct`` (before: the
    call ``_out(x)`` itself, at the pallas_call)."""
    from pallasite.analysis.call_values import output_dtype

    text, [site] = _dims("out_shape_helper.py")
    found = output_dtype(text, site.span, 0)
    assert found is not None and found.line == _marked(text) and "jnp.int32" in found.what


def test_dict_get_and_a_kwargs_passthrough_are_followed():
    """``config.get("block_rows", 8)``: the dict's entry, else the default given; ``_copy(x,
    **options)`` in ``def copy_any(x, **options)``: the keyword where copy_any is called (before:
    both stopped at the expression; the trace is given the frames of the run that failed)."""
    text, [site] = _dims("get_and_kwargs.py")
    lines = text.splitlines()
    rows_dim, cols_dim = site.in_specs[0].dim_spans
    via_config = ((lines.index("    return _copy(x, block_rows=rows, block_cols=cols)") + 1, "copy_configured"),
                  (site.span.line + 1, "_copy"))
    rows, cols = trace(text, rows_dim, frames=via_config), trace(text, cols_dim, frames=via_config)
    assert (rows.line, rows.value, rows.kind) == (_marked(text, "entry"), 16, "dict entry")
    assert (cols.line, cols.value) == (_marked(text, "default"), 256)
    via_wrapper = ((_marked(text, "passed") + 1, "bench"), (lines.index("    return _copy(x, **options)") + 1, "copy_any"),
                   (site.span.line + 1, "_copy"))
    passed = trace(text, rows_dim, frames=via_wrapper)
    assert (passed.line, passed.value, passed.kind) == (_marked(text, "passed"), 32, "argument")


def test_the_pallas_call_at_a_position_is_the_first_such_call_in_walk_order():
    """``call_values.pallas_call_at`` looks among the expressions starting at the position: the call
    it finds is the first pallas_call starting there in ``ast.walk`` order, for every site of the
    fixtures and of jax's Pallas ops files, and none where no pallas_call starts."""
    import ast as ast_mod
    import glob
    import os

    from pallasite.analysis import ast_units
    from pallasite.analysis.rules.apis import jax_root
    from pallasite.analysis.call_values import pallas_call_at
    from pallasite.analysis.origins import callee_name
    from pallasite.analysis.tier0 import analyze
    from pallasite.analysis.types import Span

    here = os.path.dirname(__file__)
    paths = sorted(glob.glob(os.path.join(here, "data", "tier0", "*.py")))
    if jax_root() is not None:
        paths += sorted(glob.glob(os.path.join(jax_root(), "experimental", "pallas", "ops", "**", "*.py"), recursive=True))
    checked = 0
    for path in paths:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        tree = ast_units.whole(text)
        if tree is None:
            continue
        first: dict = {}
        for node in ast_mod.walk(tree):
            if isinstance(node, ast_mod.Call) and (callee_name(node) or "").endswith("pallas_call"):
                first.setdefault((node.lineno - 1, node.col_offset), node)
        spans = [site.span for site in analyze(text, None).sites] + [Span(line, col, line, col) for line, col in first]
        for span in spans:
            assert pallas_call_at(tree, span) is first.get((span.line, span.column)), (path, span)
            checked += 1
        assert pallas_call_at(tree, Span(0, 0, 0, 0)) is first.get((0, 0))
    assert checked > 50
