"""Feasibility never rejects a configuration the TPU compiler accepts: 6p_Paged_Attention's only
configuration (outputs blocked (None, 8, 128) over (64, 64, 1) arrays) compiles with libtpu, so
the rule that refused it (a block dim must divide its array dim) is gone."""

from __future__ import annotations

import os

import pytest

for _name, _value in {"JAX_PLATFORMS": "cpu", "TPU_WORKER_HOSTNAMES": "localhost", "TPU_SKIP_MDS_QUERY": "1",
                      "ALLOW_MULTIPLE_LIBTPU_LOAD": "1"}.items():
    os.environ.setdefault(_name, _value)

from pallasite.analysis.feasibility import rejections  # noqa: E402
from pallasite.analysis.types import chip_target  # noqa: E402
from pallasite.runner.program import cost_model  # noqa: E402
from pallasite.runner.program.program_price import price_program  # noqa: E402
from pallasite.runner.chip_probe import spec_from_jax  # noqa: E402

V5E = spec_from_jax(chip_target("v5e"))


def _paged_outputs():
    """6p's output blocking in miniature: per (batch, kv head) a (8, 128) block of the (64, 64, 128)
    output, and of its (64, 64, 1) softmax statistics (the block's last dim exceeds the array's)."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    def kernel(q_ref, o_ref, m_ref):
        o_ref[...] = q_ref[...] * 2
        m_ref[...] = jnp.full(m_ref.shape, -1.0, jnp.float32)

    def f(q):
        spec = pl.BlockSpec((None, 8, 128), lambda b, h: (b, h, 0))
        return pl.pallas_call(
            kernel, grid=(64, 8), in_specs=[spec], out_specs=[spec, spec],
            out_shape=[jax.ShapeDtypeStruct((64, 64, 128), q.dtype), jax.ShapeDtypeStruct((64, 64, 1), jnp.float32)],
        )(q)

    return f, jax.ShapeDtypeStruct((64, 64, 128), jnp.bfloat16)


def test_a_block_larger_than_its_array_dim_is_feasible():
    f, q = _paged_outputs()
    est = price_program(f, [q], V5E)
    assert est.status == "ok", est.error
    stats = est.calls[0].blocks[-1]
    # the squeezed leading dim: one row (the module's Mosaic window shows it as 1)
    assert [d or 1 for d in stats.block_shape] == [1, 8, 128] and stats.array_shape == (64, 64, 1)
    assert stats.hbm_bytes == 64 * 64 * 1 * 4  # only the bytes inside the array
    assert rejections(est, 16 << 20) == ()


@pytest.mark.tpu_compiler
def test_the_compiler_accepts_that_block():
    pytest.importorskip("libtpu")
    import jax

    from pallasite.runner.tiers import topology_device

    f, q = _paged_outputs()
    dev = topology_device("v5e")
    placed = jax.ShapeDtypeStruct(q.shape, q.dtype, sharding=jax.sharding.SingleDeviceSharding(dev))
    with jax.default_device(dev):
        compiled = jax.jit(f).trace(placed).lower().compile()
    assert compiled is not None
