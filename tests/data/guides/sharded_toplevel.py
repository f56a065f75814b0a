"""A kernel applied at the top level to an array sharded over a 4-device mesh, without shard_map:
on a TPU the program does not compile (Mosaic kernels cannot be partitioned automatically). The
call is recorded and not run; the sharding of its operand says so, at the call that hands the sharded
array to the kernel's function (where the shard_map belongs; issue 50: it was at the pallas_call)."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.sharding import NamedSharding, PartitionSpec as P


def double_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2.0


@jax.jit
def double(x):
    return pl.pallas_call(
        double_kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)


mesh = jax.make_mesh((4,), ("x",))
x = jax.device_put(jnp.ones((512, 256), jnp.float32), NamedSharding(mesh, P("x", None)))
print(double(x).sum())  # EXPECTED LINE
