"""A main() that calls its kernel only on a TPU (asking jax for the backend and the device kind),
with the inputs made by a helper, and a reference path everywhere else. pallasite answers those
questions as the target TPU, so the kernel path runs and its call is compiled (not run)."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def scale_kernel(x_ref, o_ref):
  o_ref[...] = x_ref[...] * 2.0


def scale(x):
  rows = 256 if pltpu.get_tpu_info().vmem_capacity_bytes >= 64 * 2**20 else 128
  return pl.pallas_call(
      scale_kernel,
      grid=(x.shape[0] // rows,),
      in_specs=[pl.BlockSpec((rows, x.shape[1]), lambda i: (i, 0))],
      out_specs=pl.BlockSpec((rows, x.shape[1]), lambda i: (i, 0)),
      out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
  )(x)


def make_inputs(n):
  return jax.random.normal(jax.random.key(n), (n, 512), jnp.float32)


def main():
  x = make_inputs(1024)
  on_tpu = jax.default_backend() == "tpu" and "TPU" in jax.devices()[0].device_kind
  y = scale(x) if on_tpu else x * 2.0
  print(jax.devices()[0].platform, y.shape)


if __name__ == "__main__":
  main()
