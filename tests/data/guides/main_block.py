"""Guide style with a __main__ block: the kernel is called only there, at shapes a loop makes, so
nothing is read from the source and the import makes no call; pallasite runs the block (as
`--script` would) and checks each call it records."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def softmax_kernel(x_ref, o_ref):
  x = x_ref[...]
  e = jnp.exp(x - jnp.max(x, axis=-1, keepdims=True))
  o_ref[...] = e / jnp.sum(e, axis=-1, keepdims=True)


def softmax(x, block_rows):
  rows, cols = x.shape
  return pl.pallas_call(
      softmax_kernel,
      grid=(rows // block_rows,),
      in_specs=[pl.BlockSpec((block_rows, cols), lambda i: (i, 0))],
      out_specs=pl.BlockSpec((block_rows, cols), lambda i: (i, 0)),
      out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
      compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)),
  )(x)


def sizes():
  return [(rows, 256) for rows in (256, 1024)]


if __name__ == "__main__":
  for shape in sizes():
    x = jax.random.normal(jax.random.key(0), shape, jnp.float32)
    out = softmax(x, 128)
    assert jnp.allclose(out.sum(axis=-1), 1.0, atol=1e-3), "rows must sum to one"
