"""DMAs a kernel issues itself from ``pl.ANY`` operands, counted from its Mosaic body (the module it exports)
against a hand count (tests/data/tune/manual_dma.py: a fori_loop of chunk copies and a pl.when copy)."""

from __future__ import annotations

import os

import pytest

for _name, _value in {"JAX_PLATFORMS": "cpu", "TPU_WORKER_HOSTNAMES": "localhost", "TPU_SKIP_MDS_QUERY": "1",
                      "ALLOW_MULTIPLE_LIBTPU_LOAD": "1"}.items():
    os.environ.setdefault(_name, _value)

from pallasite.analysis.types import chip_target  # noqa: E402
from pallasite.runner.program.program_price import price_program  # noqa: E402
from pallasite.runner.chip_probe import spec_from_jax  # noqa: E402
from pallasite.runner.loader import user_module  # noqa: E402

DATA = os.path.join(os.path.dirname(__file__), "data", "tune")
V5E = spec_from_jax(chip_target("v5e"))
CHUNK_BYTES = 64 * 512 * 2  # one bf16 (64, 512) chunk


def _estimate(concrete: bool):
    import numpy as np

    with user_module(os.path.join(DATA, "manual_dma.py")) as module:
        x, n = module.example_inputs()
        args = [x, np.array([4, 2], np.int32)] if concrete else [x, n]
        return price_program(module.chunk_sum, args, V5E)


def test_copies_from_pl_any_are_counted_by_hand():
    est = _estimate(concrete=True)
    assert est.status == "ok", est.error
    (call,) = est.calls
    assert call.grid == (2,)
    x = next(b for b in call.blocks if b.role == "in")
    assert x.memory_space == "any" and x.hbm_bytes == 0  # not a pipelined block: the kernel copies it
    # step 0: 4 loop copies (n_chunks[0]) + the pl.when copy; step 1: 2 loop copies
    assert (call.dma_copies, call.dma_bytes, call.dma_count) == (7, 7 * CHUNK_BYTES, "exact")
    assert any("7 copies, 458752 bytes over the grid" in n for n in call.notes)
    out = next(b for b in call.blocks if b.role == "out")
    prefetch = 2 * 4  # n_chunks, copied to SMEM once
    assert est.memory_s == pytest.approx((call.dma_bytes + out.hbm_bytes + prefetch) / V5E.hbm_bytes_per_s, rel=1e-12)


def test_unknown_trip_counts_are_a_stated_bound_never_a_silent_one():
    """n_chunks abstract: the loop's trip count is unknown. Failed before (issue 56): the loop was counted
    once a step (3 copies, "a lower bound", 2.3x under the hand count of 7). Now it is bounded by what it
    can reach: each trip copies 64 of x's 512 rows at 64 x the loop index, so at most 8 trips a step."""
    est = _estimate(concrete=False)
    (call,) = est.calls
    # 8 bounded trips at each of the 2 steps, + the pl.when copy the program id decides (step 0)
    assert (call.dma_copies, call.dma_bytes, call.dma_count) == (17, 17 * CHUNK_BYTES, "upper bound")
    assert call.flops_count == "upper bound"
    assert any("bounded at 8 trips" in n and "(64 of 512 per trip)" in n for n in call.notes)
    exact = _estimate(concrete=True)
    assert est.seconds >= exact.seconds and call.dma_bytes >= exact.calls[0].dma_bytes


def test_a_copy_outside_any_branch_or_loop_is_exact():
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu


    def kernel(x_hbm, o_hbm, buf, sem):
        pltpu.async_copy(x_hbm.at[pl.ds(8, 16)], buf, sem).wait()  # in: 16 x 256 f32
        pltpu.async_copy(buf, o_hbm.at[pl.ds(0, 16)], sem).wait()  # out: the same bytes back to HBM

    def f(x):
        return pl.pallas_call(kernel, in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                              out_specs=pl.BlockSpec(memory_space=pl.ANY),
                              out_shape=jax.ShapeDtypeStruct((16, 256), jnp.float32),
                              scratch_shapes=[pltpu.VMEM((16, 256), jnp.float32), pltpu.SemaphoreType.DMA(())])(x)

    (call,) = price_program(f, [jax.ShapeDtypeStruct((64, 256), jnp.float32)], V5E).calls
    assert (call.dma_copies, call.dma_bytes, call.dma_count) == (2, 2 * 16 * 256 * 4, "exact")


def test_a_dynamic_grid_is_estimated_at_the_sizes_the_inputs_give_or_says_why():
    import jax.numpy as jnp
    import numpy as np

    with user_module(os.path.join(DATA, "dynamic_grid.py")) as module:
        x = jnp.ones((1024, 512), jnp.float32)
        counts = np.array([100, 100, 100, 84], np.int32)  # 384 rows: 3 blocks of 128
        est = price_program(module.scale_active, [x, counts], V5E)
        assert est.status == "ok", est.error
        (call,) = est.calls
        assert call.grid == (3,) and call.steps == 3
        assert [b.hbm_bytes for b in call.blocks] == [3 * 128 * 512 * 4] * 2
        assert any("dynamic grid dim 0 = 3" in n for n in call.notes)
        blind = price_program(module.scale_active, module.example_inputs(), V5E)
    assert blind.status == "trace_error" and blind.error.startswith("no estimate: the grid")
    assert "dynamic size" in blind.error and "inputs()" in blind.error


def test_a_scalar_the_kernel_stores_is_followed_across_grid_steps():
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    def kernel(flag_ref, x_hbm, o_ref, buf, sem):
        @pl.when(flag_ref[0] == 0)  # only until the first step sets the flag
        def _load():
            pltpu.async_copy(x_hbm.at[pl.ds(0, 8)], buf, sem).wait()

        flag_ref[0] = 1
        o_ref[...] = buf[...]

    def f(flag, x):
        return pl.pallas_call(
            kernel,
            grid_spec=pltpu.PrefetchScalarGridSpec(
                num_scalar_prefetch=1, grid=(3,), in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                out_specs=pl.BlockSpec((8, 128), lambda i, flag: (i, 0)),
                scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32), pltpu.SemaphoreType.DMA(())]),
            out_shape=jax.ShapeDtypeStruct((24, 128), jnp.float32))(flag, x)

    est = price_program(f, [np.zeros((1,), np.int32), jax.ShapeDtypeStruct((24, 128), jnp.float32)], V5E)
    assert est.status == "ok", est.error
    (call,) = est.calls
    # step 0 copies, then the flag is 1: one copy in all, exactly (not 3, not "an upper bound")
    assert (call.dma_copies, call.dma_bytes, call.dma_count) == (1, 8 * 128 * 4, "exact")
