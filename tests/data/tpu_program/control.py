"""Control flow and the grid for the judge's interpreter of the TPU program: loops (static and dynamic
fori_loop, while_loop), cond and switch, pl.when on program ids, an accumulator over a grid axis (the
matmul guide's kernel), run_scoped scratch, an SMEM counter carried across grid steps. Same conventions
as elementwise.py: ``CASES`` name -> (entry, inputs, reference).
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def _f32(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape, np.float32)


def loops(n, x):
    """A static fori_loop, one bounded by a prefetched scalar, a while_loop, cond and switch."""

    def kernel(n_ref, x_ref, a_ref, b_ref, c_ref, d_ref):
        x = x_ref[...]
        a_ref[...] = lax.fori_loop(0, 4, lambda i, acc: acc + x * i.astype(jnp.float32), jnp.zeros_like(x))
        b_ref[...] = lax.fori_loop(0, n_ref[0], lambda i, acc: acc * 0.5 + x, jnp.zeros_like(x))

        def cond(state):
            i, _ = state
            return i * i < n_ref[1]

        _, w = lax.while_loop(cond, lambda s: (s[0] + 1, s[1] + 1.0), (jnp.int32(0), jnp.zeros_like(x)))
        w_ref = c_ref
        w_ref[...] = lax.cond(n_ref[0] > 2, lambda: w * 2, lambda: w - 1)
        d_ref[...] = lax.switch(n_ref[1] % 3, [lambda: x, lambda: -x, lambda: x * x])

    spec = pltpu.PrefetchScalarGridSpec(num_scalar_prefetch=1, grid=(1,),
                                        in_specs=[pl.BlockSpec((8, 128), lambda i, n: (0, 0))],
                                        out_specs=[pl.BlockSpec((8, 128), lambda i, n: (0, 0))] * 4)
    outs = [jax.ShapeDtypeStruct((8, 128), jnp.float32)] * 4
    return pl.pallas_call(kernel, grid_spec=spec, out_shape=outs)(n, x)


def loop_inputs():
    return np.array([5, 30], np.int32), _f32((8, 128), 30)


def loops_reference_numpy(n, x):
    a = sum(x * np.float32(i) for i in range(4))
    b = np.zeros_like(x)
    for _ in range(int(n[0])):
        b = b * np.float32(0.5) + x
    trips = int(np.ceil(np.sqrt(int(n[1]))))
    w = np.full_like(x, float(trips))
    return a, b, w * 2 if n[0] > 2 else w - 1, [x, -x, x * x][int(n[1]) % 3]


def matmul(x, y):
    """The matmul guide's kernel: a float32 VMEM accumulator over the K axis, written out at the last K step."""

    def kernel(x_ref, y_ref, o_ref, acc_ref):
        @pl.when(pl.program_id(2) == 0)
        def _():
            acc_ref[...] = jnp.zeros_like(acc_ref)

        acc_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

        @pl.when(pl.program_id(2) == pl.num_programs(2) - 1)
        def _():
            o_ref[...] = acc_ref[...].astype(o_ref.dtype)

    m, k = x.shape
    n = y.shape[1]
    return pl.pallas_call(
        kernel, grid=(m // 128, n // 128, k // 128),
        in_specs=[pl.BlockSpec((128, 128), lambda i, j, kk: (i, kk)), pl.BlockSpec((128, 128), lambda i, j, kk: (kk, j))],
        out_specs=pl.BlockSpec((128, 128), lambda i, j, kk: (i, j)),
        out_shape=jax.ShapeDtypeStruct((m, n), jnp.bfloat16),
        scratch_shapes=[pltpu.VMEM((128, 128), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "arbitrary")))(x, y)


def matmul_inputs():
    return _f32((256, 384), 31).astype(jnp.bfloat16), _f32((384, 256), 32).astype(jnp.bfloat16)


def matmul_reference(x, y):
    return jnp.dot(x, y, preferred_element_type=jnp.float32, precision=lax.Precision.HIGHEST).astype(jnp.bfloat16)


def scratch_state(x):
    """An SMEM counter and a VMEM running sum carried across grid steps; run_scoped scratch per step."""

    def kernel(x_ref, o_ref, count_ref, total_ref, sum_ref):
        @pl.when(pl.program_id(0) == 0)
        def _():
            count_ref[0] = 0
            sum_ref[...] = jnp.zeros_like(sum_ref)

        count_ref[0] = count_ref[0] + pl.program_id(0) + 1
        sum_ref[...] += x_ref[...]

        def scoped(tmp_ref):
            tmp_ref[...] = sum_ref[...] * 2
            o_ref[...] = tmp_ref[...] + count_ref[0].astype(jnp.float32)

        pl.run_scoped(scoped, pltpu.VMEM((8, 128), jnp.float32))

        @pl.when(pl.program_id(0) == pl.num_programs(0) - 1)
        def _():
            total_ref[0] = count_ref[0]

    return pl.pallas_call(
        kernel, grid=(4,), in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
        out_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0)), pl.BlockSpec(memory_space=pltpu.SMEM)],
        out_shape=[jax.ShapeDtypeStruct((32, 128), jnp.float32), jax.ShapeDtypeStruct((1,), jnp.int32)],
        scratch_shapes=[pltpu.SMEM((1,), jnp.int32), pltpu.VMEM((8, 128), jnp.float32)])(x)


def scratch_inputs():
    return (_f32((32, 128), 33),)


def scratch_reference_numpy(x):
    out, total, count = np.zeros_like(x), 0, 0
    running = np.zeros((8, 128), np.float32)
    for i in range(4):
        count += i + 1
        running = running + x[8 * i:8 * i + 8]
        out[8 * i:8 * i + 8] = running * 2 + count
    return out, np.array([count], np.int32)


CASES = {
    "loops, cond, switch": ("loops", "loop_inputs", loops_reference_numpy),
    "matmul with an accumulator (the guide's)": ("matmul", "matmul_inputs", matmul_reference),
    "scratch across grid steps, run_scoped": ("scratch_state", "scratch_inputs", scratch_reference_numpy),
}
