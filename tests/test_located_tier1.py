"""Lowering-time errors at the line that was written wrong (tests/data/located/), end to end.

Each fixture's line carrying ``# expect: CODE`` is where the finding must be. Before: an index_map
written as a function was blamed on the pallas_call (wrong arity) or on its ``def`` (wrong result
count), and a block size rejected by a library's own check was blamed on the ``raise``; a bad block
of a kernel with scalar-prefetch operands was matched to the wrong BlockSpec (the lowering's
``args[i]`` counts the prefetched operands) and a BlockSpec chosen under a branch (``if
transpose_rhs:``) left the finding at the ``in_specs`` list instead of the tile size's literal.
Third round: a bare ``assert`` on a scratch ref's shape inside the kernel was said at the assert;
an index_map function whose name does not say "index_map" was taken for the kernel (PLS110 at the
kernel's def), and one bound with ``functools.partial`` was a PLS100 at the partial's line.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pallasite.engine.checker import CheckOptions
from pallasite.engine.engine import check_paths

DATA = Path(__file__).parent / "data" / "located"
FILES = ("index_map_def_arity.py", "index_map_def_results.py", "library_check.py", "prefetch_block.py", "branch_spec.py",
         "scratch_shape_assert.py", "index_map_named_map.py", "index_map_partial.py", "index_map_two_returns.py")


@pytest.fixture(scope="module")
def reports():
    out = check_paths([str(DATA / n) for n in FILES], CheckOptions(target="v5e", tiers=(1,), time_limit_s=120))
    return {Path(r.path).name: r for r in out}


def _expected(name: str) -> tuple[str, int]:
    lines = (DATA / name).read_text().splitlines()
    [(code, line)] = [(m.group(1), i + 1) for i, text in enumerate(lines) if (m := re.search(r"# expect: (PLS\d+)", text))]
    return code, line


@pytest.mark.parametrize("name", FILES)
def test_error_is_at_the_line_written_wrong(reports, name):
    errors = [f for f in reports[name].findings if f.severity == "error"]
    assert [(f.code, f.span.line + 1) for f in errors] == [_expected(name)], \
        [f"{f.code}:{f.span.line + 1} {f.message}" for f in errors]


def test_library_check_names_the_value_and_relates_the_check(reports):
    [finding] = [f for f in reports["library_check.py"].findings if f.severity == "error"]
    assert "block_cols=200 must be a multiple of 128" in finding.message
    assert "a dict entry" in finding.message
    raise_line = next(i for i, t in enumerate((DATA / "library_check.py").read_text().splitlines()) if "raise ValueError" in t)
    assert any(r.span.line == raise_line and "the check that rejected" in r.message for r in finding.related)


def test_an_error_without_a_line_goes_to_the_call_the_entry_reached():
    """A VMEM overflow names no line of the file; with two pallas_calls in helpers, the one the
    entry's trace reached (runner/reach.py's call-stack lines) is the one (before: line 1)."""
    from pallasite.analysis.tier0 import analyze
    from pallasite.engine.findings import locate

    text = (DATA / "library_check.py").read_text()
    text = text.replace("def workload(x):", "def _twin(x):\n    return pl.pallas_call(\n        scale_kernel,\n"
                        "        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),\n    )(x)\n\n\ndef workload(x):")
    analysis = analyze(text, "two_sites.py")
    assert len(analysis.sites) == 2
    target = next(s for s in analysis.sites if s.enclosing_function == "_scale")
    rec = {"stage": "tier 2", "type": "JaxRuntimeError", "sentence": "Ran out of memory in memory space vmem",
           "message": "RESOURCE_EXHAUSTED: Ran out of memory in memory space vmem", "frames": [], "mentions": [],
           "refs": [], "vmem": {"requested": 64 << 20, "limit": 16 << 20}}
    reached = [{"lines": [target.span.line + 1, 60], "kernel": "scale_kernel", "buffers": []}]
    finding = locate.locate_record(rec, text, analysis, "v5e", tier=2, entry="workload", reached=reached)
    assert finding.code == "PLS201" and finding.span == locate.call_span(target)
    assert locate.locate_record(rec, text, analysis, "v5e", tier=2, entry="workload").span.line == 0


def test_a_bare_assert_on_a_scratch_shape_says_the_values_and_relates_the_assert(reports):
    """A bare assert in a kernel says nothing; the worker records what the names it compares held,
    and the finding goes to the declared dim, with the assert related (before: at the assert)."""
    [finding] = [f for f in reports["scratch_shape_assert.py"].findings if f.severity == "error"]
    assert "row_stats_ref.shape = (8, 100)" in finding.message
    lines = (DATA / "scratch_shape_assert.py").read_text().splitlines()
    assert_line = next(i for i, t in enumerate(lines) if t.strip() == "assert (")
    assert any(r.span.line == assert_line and "row_stats_ref.shape[1] = 100" in r.message for r in finding.related)


def test_a_named_index_map_of_the_wrong_arity_is_said_once_at_its_def_by_tier0():
    """Tier 0 reads a BlockSpec whose index_map is a function of the file: PLS002 goes to its def
    (where the parameters are written), once for every BlockSpec that shares it, each use related
    (before: at the name in each BlockSpec, twice)."""
    from pallasite.analysis.tier0 import analyze

    text = (DATA / "index_map_named_map.py").read_text().replace(
        "    specs = [pl.BlockSpec((8, cols), row_map) for _ in range(2)]\n", "").replace(
        "in_specs=specs,", "in_specs=[pl.BlockSpec((8, cols), row_map), pl.BlockSpec((8, cols), row_map)],")
    lines = text.splitlines()
    def_line = next(i for i, t in enumerate(lines) if "def row_map(i):" in t)
    use_line = next(i for i, t in enumerate(lines) if "in_specs=[pl.BlockSpec" in t)
    found = [f for f in analyze(text, "named.py").findings if f.code == "PLS002"]
    assert [f.span.line for f in found] == [def_line]
    assert any(r.span.line == use_line and "uses this index_map" in r.message for r in found[0].related)
