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


def test_an_index_map_whose_results_are_exchanged_is_said_at_the_map_not_the_grid():
    def tile(i, j):
        return (j, i)  # (i, j) was meant: on a (4, 2) grid block (0, 3) of a (64, 256) array lies past its end

    spec = pl.BlockSpec((16, 128), tile)
    call = RecordedCall(kernel=lambda x_ref, o_ref: None, out_shape=jax.ShapeDtypeStruct((64, 256), jnp.float32),
                        kwargs={"grid": (4, 2), "in_specs": [spec],
                                "out_specs": pl.BlockSpec((16, 128), lambda i, j: (i, j))},
                        file=None, line=None, operands=(jax.ShapeDtypeStruct((64, 256), jnp.float32),))
    (found,) = blocks_past_end(call)
    assert found["reordered"] == (0, 1) and found["map_at"] == (__file__, tile.__code__.co_firstlineno)
    from pallasite.runner.block_reach import grid_axis_past, past_end_record

    assert grid_axis_past(found, (4, 2)) is None  # the grid is not the one to fix
    assert "results 0 and 1 exchanged" in past_end_record(found, None, None)["sentence"]
    # a grid one step too long is not "reordered": no exchange of results puts (i, j) on a (5, 2) grid inside
    grid_long = RecordedCall(kernel=call.kernel, out_shape=call.out_shape, file=None, line=None,
                             kwargs={**call.kwargs, "grid": (5, 2), "in_specs": [pl.BlockSpec((16, 128), lambda i, j: (i, j))]},
                             operands=call.operands)
    assert not blocks_past_end(grid_long)[0].get("reordered")


def test_check_says_the_exchanged_results_at_the_index_map():
    (report,) = check_paths([str(Path(__file__).parent / "data" / "locate" / "named_index_map.py")],
                            CheckOptions(target="v6e", tiers=(0, 1), time_limit_s=120))
    errors = [(f.code, f.span.line + 1) for f in report.findings if f.severity == "error"]
    assert errors == [("PLS020", 17)], errors  # the def of the map (was: 27, the in_specs entry)
