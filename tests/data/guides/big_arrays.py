"""Guide style, sized for a TPU's HBM: after its kernel call, the file makes arrays far larger than a
CPU worker's memory limit. The import is stopped short of the limit; the call made before is checked."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def inc_kernel(x_ref, o_ref):
  o_ref[...] = x_ref[...] + 1


out = pl.pallas_call(inc_kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32))(jnp.zeros((8, 128)))
chunks = [jnp.ones((64, 2**20), jnp.uint8) for _ in range(64)]  # 4 GiB, 64 MiB at a time  # EXPECTED LINE
