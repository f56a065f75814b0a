"""Tier 0 on kernels and sharded arrays (issue 50's sharding class, analysis/rules/sharding.py).

tests/data/sharding/ holds broken files, each marking its line with ``# expect: CODE``, and their
fixed twins (``*_fixed.py``), which must be silent. Before the rules, the broken ones were found at
no tier: the out_shape without the manual axis type under shard_map (jax refuses it while tracing)
and the kernel applied to a sharded array outside shard_map (jax on a TPU refuses to partition it).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pallasite.analysis.source import apply_edits
from pallasite.analysis.tier0 import analyze

DATA = Path(__file__).parent / "data" / "sharding"
BROKEN = ("vma_out_shape.py", "unsharded_call.py")
FIXED = ("vma_out_shape_fixed.py", "unsharded_call_fixed.py")
SHARDING_CODES = ("PLS115", "PLS116")


def _expected(name: str) -> tuple[str, int]:
    lines = (DATA / name).read_text().splitlines()
    [(code, line)] = [(m.group(1), i + 1) for i, text in enumerate(lines) if (m := re.search(r"# expect: (PLS\d+)", text))]
    return code, line


def _sharding(text: str) -> list:
    return [f for f in analyze(text).findings if f.code in SHARDING_CODES]


@pytest.mark.parametrize("name", BROKEN)
def test_the_broken_file_is_found_at_its_line(name):
    found = _sharding((DATA / name).read_text())
    assert [(f.code, f.span.line + 1, f.severity) for f in found] == [(*_expected(name), "error")], found


@pytest.mark.parametrize("name", FIXED)
def test_the_fixed_twin_is_silent(name):
    assert _sharding((DATA / name).read_text()) == []


def test_the_out_shape_fix_passes_the_operands_manual_axis_type():
    text = (DATA / "vma_out_shape.py").read_text()
    [finding] = _sharding(text)
    fixed = apply_edits(text, finding.fix.edits)
    assert "jax.ShapeDtypeStruct(x.shape, x.dtype, manual_axis_type=jax.typeof(x).manual_axis_type)" in fixed
    assert _sharding(fixed) == []


def test_the_unpartitioned_call_names_the_shard_map_to_write():
    [finding] = _sharding((DATA / "unsharded_call.py").read_text())
    assert "jax.shard_map(double, mesh=mesh, in_specs=P('x', None), out_specs=P('x', None))(x)" in finding.message


KERNEL = '''
import functools
import jax
from jax.experimental import pallas as pl
from jax.sharding import PartitionSpec as P

def k(x_ref, o_ref):
    o_ref[...] = x_ref[...]

{decorator}
def per_shard(x):
    return pl.pallas_call(k, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
'''


@pytest.mark.parametrize("decorator, said", [
    ('@functools.partial(jax.shard_map, mesh=None, in_specs=P("x"), out_specs=P("x"))', True),
    ('@jax.shard_map(mesh=None, in_specs=P("x"), out_specs=P("x"))', True),
    ('@functools.partial(jax.shard_map, mesh=None, in_specs=P("x"), out_specs=P("x"), check_vma=False)', False),
    ("", False),
])
def test_a_decorating_shard_map_is_read_and_check_vma_false_is_silent(decorator, said):
    assert bool(_sharding(KERNEL.format(decorator=decorator))) is said
