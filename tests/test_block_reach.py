"""Blocks an index_map names past the end of their array, found from the call the task made (tier 1,
runner/block_reach.py; issue 50's blind-corpus class "an index_map reading a block past the end",
found at no tier when tier 3 did not run: tier 0 reads only outputs, whose shapes the source gives).
"""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl

from pallasite.engine.checker import CheckOptions
from pallasite.engine.engine import check_paths
from pallasite.runner.block_reach import blocks_past_end
from pallasite.runner.intercept import RecordedCall

RUNTIME = Path(__file__).parent / "data" / "runtime"


def _call(grid, in_map, rows=32, block=8):
    spec = pl.BlockSpec((block, 128), in_map)
    return RecordedCall(kernel=lambda x_ref, o_ref: None, out_shape=jax.ShapeDtypeStruct((rows, 128), jnp.float32),
                        kwargs={"grid": grid, "in_specs": [spec], "out_specs": pl.BlockSpec((block, 128), lambda i: (i, 0))},
                        file=None, line=None, operands=(jax.ShapeDtypeStruct((rows, 128), jnp.float32),))


@pytest.mark.parametrize("grid, in_map, rows, said", [
    ((4,), lambda i: (i + 1, 0), 32, [((4, 0), (3,))]),  # one block past the end on the last step
    ((4,), lambda i: (i, 0), 32, []),
    ((5,), lambda i: (i, 0), 36, []),  # a partial last block (pl.cdiv grid) is allowed
    ((2,), lambda i: (2 * i + 1, 0), 32, []),
    ((2,), lambda i: (2 * i + 3, 0), 32, [((5, 0), (1,))]),
    ((4,), lambda i: (i - 1, 0), 32, [((-1, 0), (0,))]),  # before the start
])
def test_blocks_past_the_end_from_the_grids_corners(grid, in_map, rows, said):
    found = blocks_past_end(_call(grid, in_map, rows))
    assert [(f["block_index"], f["step"]) for f in found if f["role"] == "in_specs"] == said


def test_an_index_map_that_needs_more_than_ints_is_left_to_tier_3():
    assert blocks_past_end(_call((4,), lambda i: ((i + 1).astype(jnp.int32), 0))) == []  # past the end, unread


def test_tier_1_says_it_at_the_inputs_blockspec_and_the_fixed_twin_is_silent():
    out = {Path(r.path).name: r for r in check_paths([str(RUNTIME / "oob_index_map_broken.py"),
                                                      str(RUNTIME / "oob_index_map_fixed.py")],
                                                     CheckOptions(target="v5e", tiers=(0, 1), time_limit_s=120))}
    broken = [(f.code, f.span.line + 1, f.tier) for f in out["oob_index_map_broken.py"].findings if f.severity == "error"]
    assert broken == [("PLS020", 20, 1)], broken
    assert "returns block (4, 0) at grid step (3,)" in out["oob_index_map_broken.py"].findings[0].message
    assert [f for f in out["oob_index_map_fixed.py"].findings if f.severity in ("error", "warning")] == []
