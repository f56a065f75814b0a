"""A store the lowering rejects for its dtype (``Invalid dtype for swap``), said at the declaration
that gave the ref its dtype when the declaration is the odd one out (issue 50).

Each fixture of tests/data/dtype_declared/ marks the finding's line with ``# expect: CODE``. Before
engine/findings/store_dtype.py, a float stored into a float ref of another width stayed at the store with no
place at the declaration: an ``out_shape`` made bfloat16 in a helper of a float32 kernel, and a
bfloat16 ``scratch_shapes`` entry, were said at the store; a store that lost its ``.astype`` had no
related place at the ``out_shape``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pallasite.engine.checker import CheckOptions
from pallasite.engine.engine import check_paths

DATA = Path(__file__).parent / "data" / "dtype_declared"
NAMES = ("out_shape_narrow.py", "store_missing_cast.py", "scratch_narrow.py", "sibling_output_narrow.py")


def _line_of(name: str, pattern: str) -> int:
    lines = (DATA / name).read_text().splitlines()
    [line] = [i + 1 for i, text in enumerate(lines) if re.search(pattern, text)]
    return line


@pytest.fixture(scope="module")
def reports():
    out = check_paths([str(DATA / n) for n in NAMES], CheckOptions(target="v5e", tiers=(0, 1), time_limit_s=120))
    return {Path(r.path).name: r for r in out}


def _error(reports, name):
    [finding] = [f for f in reports[name].findings if f.severity == "error"]
    return finding


@pytest.mark.parametrize("name", NAMES)
def test_the_dtype_finding_is_at_the_expected_line(reports, name):
    finding = _error(reports, name)
    assert (finding.code, finding.span.line + 1) == ("PLS104", _line_of(name, r"# expect: PLS104")), finding.message


def test_an_odd_out_shape_declaration_is_the_place_and_the_store_related(reports):
    finding = _error(reports, "out_shape_narrow.py")
    store = _line_of("out_shape_narrow.py", r"o_ref\[\.\.\.\] = ")
    assert "the kernel computes float32: its inputs are float32" in finding.message
    assert any(r.span.line + 1 == store and "stores float32 values into o_ref" in r.message for r in finding.related)


def test_a_store_that_lost_its_cast_stays_with_the_declaration_related(reports):
    finding = _error(reports, "store_missing_cast.py")
    declared = _line_of("store_missing_cast.py", r"out_shape=jax.ShapeDtypeStruct")
    assert "`.astype(o_ref.dtype)`" in finding.message
    assert any(r.span.line + 1 == declared and "declared here" in r.message for r in finding.related)


def test_an_odd_scratch_declaration_is_the_place(reports):
    finding = _error(reports, "scratch_narrow.py")
    assert "acc_ref's dtype is declared bfloat16 here (scratch_shapes[0])" in finding.message
