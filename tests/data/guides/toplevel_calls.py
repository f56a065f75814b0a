"""Guide style: kernels called at the top level of the file, without interpret, and their results
checked with numpy right after (as jax's Pallas TPU guides do in their notebook cells). On a CPU
the first call would stop the import; pallasite records each call and compiles it for the TPU."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def add_kernel(x_ref, y_ref, o_ref):
  o_ref[...] = x_ref[...] + y_ref[...]


def add(x, y):
  block = pl.BlockSpec((128, 256), lambda i: (i, 0))
  return pl.pallas_call(
      add_kernel,
      out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
      grid=(x.shape[0] // 128,),
      in_specs=[block, block],
      out_specs=block,
  )(x, y)


x = jnp.ones((512, 256), jnp.float32)
y = 2 * jnp.ones((512, 256), jnp.float32)
np.testing.assert_allclose(add(x, y), x + y)


def matmul_kernel(x_ref, y_ref, z_ref, acc_ref, *, nsteps):
  @pl.when(pl.program_id(2) == 0)
  def _():
    acc_ref[...] = jnp.zeros_like(acc_ref)

  acc_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

  @pl.when(pl.program_id(2) == nsteps - 1)
  def _():
    z_ref[...] = acc_ref[...].astype(z_ref.dtype)


@functools.partial(jax.jit, static_argnames=["bm", "bk", "bn"])
def matmul(x, y, *, bm=128, bk=128, bn=128):
  m, k = x.shape
  _, n = y.shape
  return pl.pallas_call(
      functools.partial(matmul_kernel, nsteps=k // bk),
      grid_spec=pltpu.PrefetchScalarGridSpec(
          num_scalar_prefetch=0,
          in_specs=[pl.BlockSpec((bm, bk), lambda i, j, k: (i, k)),
                    pl.BlockSpec((bk, bn), lambda i, j, k: (k, j))],
          out_specs=pl.BlockSpec((bm, bn), lambda i, j, k: (i, j)),
          scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)],
          grid=(m // bm, n // bn, k // bk),
      ),
      out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
      compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "arbitrary")),
  )(x, y)


a = jax.random.normal(jax.random.key(0), (512, 512), dtype=jnp.bfloat16)
b = jax.random.normal(jax.random.key(1), (512, 256), dtype=jnp.bfloat16)
for bm, bk in [(128, 128), (256, 512)]:
  out = matmul(a, b, bm=bm, bk=bk)
  print(bm, bk, out.shape)
