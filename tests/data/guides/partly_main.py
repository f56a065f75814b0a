"""One kernel called at the top level, a second one only in the __main__ block (at shapes a helper
makes): the import reaches the first; pallasite runs the block for the second."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def double_kernel(x_ref, o_ref):
  o_ref[...] = x_ref[...] * 2


def double(x):
  return pl.pallas_call(double_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


def negate_kernel(x_ref, o_ref):
  o_ref[...] = -x_ref[...]


def negate(x):
  return pl.pallas_call(
      negate_kernel,
      grid=(x.shape[0] // 64,),
      in_specs=[pl.BlockSpec((64, 128), lambda i: (i, 0))],
      out_specs=pl.BlockSpec((64, 128), lambda i: (i, 0)),
      out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
  )(x)


def inputs():
  return jnp.arange(256 * 128, dtype=jnp.float32).reshape(256, 128)


print(double(jnp.ones((8, 128), jnp.float32)))

if __name__ == "__main__":
  print(negate(inputs()).sum())
