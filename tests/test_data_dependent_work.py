"""Data-dependent work priced as done (issue 34): where scalar-prefetch values decide which grid steps
compute (``pl.when`` on a block-mask entry, splash attention's structure), the cost model walks the
kernel body at each grid step with those values and prices only the steps that run; the K/V index
map repeating a block on a skipped step moves nothing. Fixture: tests/data/timing/ladder/splash/
(block-sparse causal attention, block mask by scalar prefetch), estimated at a real size from
abstract inputs (nothing allocated) against the same kernel with every block computed and against
the dense XLA reference."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

for _name, _value in {"JAX_PLATFORMS": "cpu", "TPU_WORKER_HOSTNAMES": "localhost", "TPU_SKIP_MDS_QUERY": "1",
                      "ALLOW_MULTIPLE_LIBTPU_LOAD": "1"}.items():
    os.environ.setdefault(_name, _value)

jax = pytest.importorskip("jax")

from pallasite.analysis.types import chip_target  # noqa: E402
from pallasite.runner.program import cost_model  # noqa: E402
from pallasite.runner.program.program_price import price_program  # noqa: E402
from pallasite.runner.chip_probe import spec_from_jax  # noqa: E402

SPLASH = Path(__file__).parent / "data" / "timing" / "ladder" / "splash"
V5E = spec_from_jax(chip_target("v5e"))
SHAPE = (2, 8, 8192, 128)  # batch, heads, seq, head_dim: 16 x 16 blocks of 512, 136 of them at or below the diagonal
BLOCKS = {"block_q": 512, "block_kv": 512}


def _module(name: str, **overrides):
    spec = importlib.util.spec_from_file_location(f"splash_{name}", SPLASH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.TUNED_PARAMS = dict(BLOCKS)
    for key, value in overrides.items():
        setattr(module, key, value)
    return module


def _args():
    return [jax.ShapeDtypeStruct(SHAPE, "bfloat16")] * 3


def test_a_block_sparse_kernel_is_priced_for_the_blocks_it_computes():
    sparse = price_program(_module("optimized").workload, _args(), V5E)
    dense = price_program(_module("optimized", SKIP=False).workload, _args(), V5E)
    assert sparse.status == dense.status == "ok", (sparse.error, dense.error)
    (s,), (d,) = sparse.calls, dense.calls
    assert s.steps == d.steps == 2 * 8 * 16 * 16  # the same grid: the skipping is in the body
    assert s.flops_count == d.flops_count == "exact"
    computed = 16 * 17 // 2  # blocks at or below the diagonal, per (batch, head)
    assert s.mxu_flops == d.mxu_flops * computed // (16 * 16)  # exactly the computed blocks' matmuls
    assert 0.5 < s.flops / d.flops < 0.55  # about half (136 of 256 blocks, and the same finishing work)
    k = next(b for b in s.blocks if b.role == "in" and b.position == 1)
    # a skipped step repeats its K block: no copy; and row 1 starts on block 0, which row 0 ends holding
    assert k.fetches == 2 * 8 * (computed - 1)
    assert next(b for b in d.blocks if b.role == "in" and b.position == 1).fetches == 2 * 8 * 16 * 16
    assert sparse.compute_s < 0.56 * dense.compute_s  # the per-step overhead stays: every step is still run
    assert sparse.seconds < dense.seconds
    # 4096 steps: whole runs of the inner (query, K/V) axes at a sample of (batch, head), exact here
    assert any("walked at 256 of 4096" in n for n in s.notes)


def test_the_block_sparse_kernel_beats_the_dense_xla_reference_that_computes_every_score():
    sparse = price_program(_module("optimized").workload, _args(), V5E)
    reference = cost_model.estimate_reference(_module("baseline").workload, _args(), V5E)
    assert reference["seconds"] > sparse.seconds, (reference, sparse.seconds)


def test_values_the_model_cannot_know_give_a_stated_upper_bound():
    """The same mask passed as an abstract argument: which blocks run is unknown before running."""
    module = _module("optimized")
    kind, nxt = module.block_mask(16, 16)

    def with_mask(kind_arg, next_arg, q, k, v):
        module.block_mask = lambda nq, nkv: (kind_arg, next_arg)
        return module.workload(q, k, v)

    masks = [jax.ShapeDtypeStruct(kind.shape, "int32"), jax.ShapeDtypeStruct(nxt.shape, "int32")]
    est = price_program(with_mask, masks + _args(), V5E)
    assert est.status == "ok", est.error
    (call,) = est.calls
    assert call.flops_count == "upper bound"
    assert any("do not decide" in n and "upper bound" in n for n in call.notes)
    from pallasite.engine.estimates import _caveat

    assert "the kernel's work is an upper bound" in _caveat(est) and "a lower bound" in _caveat(est)


def test_a_vmapped_kernel_reads_its_own_program_ids():
    """``jax.vmap`` over a pallas_call puts a grid axis in front that the body's ``pl.program_id``
    does not count (JAXBench's 4p vmaps splash over the batch): the walk leaves it out, else the
    mask was read at the wrong block (out of range: every step an upper bound)."""
    one = (1,) + SHAPE[1:]
    sparse = price_program(_module("optimized").workload, [jax.ShapeDtypeStruct(one, "bfloat16")] * 3, V5E)
    batched = price_program(jax.vmap(_module("optimized").workload),
                                  [jax.ShapeDtypeStruct((2,) + one, "bfloat16")] * 3, V5E)
    (s,), (b,) = sparse.calls, batched.calls
    assert b.grid == (2,) + s.grid and b.flops_count == "exact"
    assert b.mxu_flops == 2 * s.mxu_flops


def _one_block_kernel(decide):
    """A grid of 4 steps over (8, 128) blocks whose ``pl.when`` on ``decide(i, lens_ref)`` guards an exp."""
    import jax.numpy as jnp
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    def kernel(lens_ref, x_ref, o_ref):
        o_ref[...] = x_ref[...]

        @pl.when(decide(pl.program_id(0), lens_ref))
        def _():
            o_ref[...] = jnp.exp(x_ref[...])

    def f(lens, x):
        spec = pl.BlockSpec((8, 128), lambda i, lens_: (i, 0))
        return pl.pallas_call(kernel, grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1, grid=(4,), in_specs=[spec], out_specs=spec),
            out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(lens, x)
    return f


def test_values_a_decided_branch_or_loop_returns_decide_later_branches():
    """JAXBench 6p computes the next block's indices with lax.cond and a fori_loop over its lengths,
    then ``pl.when(next_b < batch)``: what a decided cond or a fully simulated loop returns was not
    kept, so every later branch on it was an upper bound."""
    import numpy as np

    lens = np.array([1, 0, 1, 1], np.int32)
    x = jax.ShapeDtypeStruct((32, 128), "float32")

    def by_cond(i, lens_ref):  # steps 0 and 2 -> 1 and 3 < 3? only step 0
        nxt = jax.lax.cond(lens_ref[i] > 0, lambda: i + 1, lambda: i + 2)
        return nxt < 2

    def by_loop(i, lens_ref):  # a fori_loop up to a prefetched bound: a while loop
        return jax.lax.fori_loop(0, lens_ref[i] + i, lambda _, c: c + 1, 0) == 1

    for decide, runs in ((by_cond, 1), (by_loop, 2)):  # by_loop: steps 0 (1 + 0) and 1 (0 + 1)
        est = price_program(_one_block_kernel(decide), [lens, x], V5E)
        assert est.status == "ok", est.error
        (call,) = est.calls
        assert call.flops_count == "exact", call.notes
        assert call.transcendentals == runs * 8 * 128
