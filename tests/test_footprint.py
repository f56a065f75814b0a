"""Static arithmetic on block shapes (analysis/footprint.py): footprint, grid steps, tiling.

The sites are read from a real kernel file by tier 0 where the numbers depend on parsing
(tests/data/lsp/add_ok.py); the edge cases use hand-built sites.
"""

from __future__ import annotations

from pathlib import Path

from pallasite.analysis import footprint
from pallasite.analysis.tier0 import analyze
from pallasite.analysis.types import BlockSpecInfo, KernelSite, ScratchInfo, Span

MIB = 1 << 20
DATA = Path(__file__).parent / "data" / "lsp"


def spec(shape, role="in", position=0, memory_space=None):
    return BlockSpecInfo(span=Span(1, 0, 1, 30), block_shape=shape, role=role, position=position,
                         memory_space=memory_space, index_map_arity=1, index_map_results=len(shape))


def site(**kw):
    base = dict(kernel_name="k", span=Span(0, 0, 9, 1), call_span=Span(0, 0, 0, 14), grid=(8, 4),
                in_specs=(spec((512, 1024)),), out_specs=(spec((512, 1024), "out"),))
    base.update(kw)
    return KernelSite(**base)


def test_footprint_is_double_buffered_blocks_plus_scratch():
    s = site(scratch_shapes=(ScratchInfo(Span(3, 0, 3, 9), "VMEM", (512, 1024), "jnp.float32"),))
    total, complete = footprint.vmem_footprint(s, 32)
    assert (total, complete) == (2 * 2 * 2 * MIB + 2 * MIB, True)  # two 2 MiB blocks x2, 2 MiB scratch
    # the scratch keeps its own dtype when the blocks' element size changes
    assert footprint.vmem_footprint(s, 16).bytes == 2 * 2 * MIB + 2 * MIB


def test_blocks_outside_vmem_are_not_counted_and_non_static_ones_make_it_a_lower_bound():
    s = site(in_specs=(spec((512, 1024), memory_space="ANY"), spec(("bm", 128), position=1)))
    fp = footprint.vmem_footprint(s, 32)
    assert fp == (2 * 2 * MIB, False)  # only the output counted; "bm" unknown
    smem = site(scratch_shapes=(ScratchInfo(Span(3, 0, 3, 9), "SMEM", (8,), "jnp.int32"),))
    assert footprint.vmem_footprint(smem, 32).complete  # SMEM scratch is not VMEM: nothing missing
    unsized = site(scratch_shapes=(ScratchInfo(Span(3, 0, 3, 9), "VMEM", ("n", 128), "jnp.float32"),))
    assert not footprint.vmem_footprint(unsized, 32).complete
    assert not footprint.vmem_footprint(site(out_specs=None), 32).complete  # specs not read


def test_footprint_of_a_real_kernel_file():
    text = (DATA / "add_ok.py").read_text()  # three (256, 512) blocks; the grid depends on x.shape
    [s] = analyze(text, "add_ok.py").sites
    assert footprint.vmem_footprint(s, 32) == (3 * 2 * 256 * 512 * 4, True)  # 3 MiB at float32
    assert footprint.vmem_footprint(s, 16).bytes == 3 * MIB // 2
    assert footprint.grid_steps(s.grid) is None
    assert footprint.tiling(s.in_specs[0].block_shape, 8).legal  # 256 rows suit even int8


def test_grid_steps():
    assert footprint.grid_steps((8, 4)) == 32
    assert footprint.grid_steps(()) == 1
    assert footprint.grid_steps((8, "n")) is None
    assert footprint.grid_steps(None) is None


def test_block_elements_squeezes_none_dims():
    assert footprint.block_elements((None, 8, 128)) == 1024
    assert footprint.block_elements(("bm", 128)) is None


def test_tiling_uses_the_dtype_row_tiling():
    assert footprint.tiling_verdict((8, 128), 8).startswith("tiling: legal only if")  # int8 needs 32 rows
    assert footprint.tiling_verdict((32, 128), 8).startswith("tiling: legal (")
    assert footprint.tiling_verdict((8, 256), 16).startswith("tiling: legal (")  # bf16 8 rows compiles
    assert "not a multiple of 128" in footprint.tiling_verdict((8, 100), 32)
    assert "rows 32 is not a multiple of 64" in footprint.tiling_verdict((32, 128), 4)  # int4 packs 64 rows


def test_tiling_as_data():
    bad = footprint.tiling((8, 100), 8)
    assert bad.legal is False and bad.rows_needed == 32 and len(bad.problems) == 2
    assert footprint.tiling((16, 256), 32) == footprint.Tiling(True, (), 16, 256, 8)
    assert footprint.tiling((128,), 32).legal is None and "rank < 2" in footprint.tiling((128,), 32).text
    assert footprint.tiling(("bm", 128), 32).text == "tiling: not static, cannot tell"
