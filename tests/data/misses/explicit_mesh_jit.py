"""A kernel applied, inside jax.jit, to an array placed sharded over an Explicit mesh, outside shard_map (line 30):
on a TPU the partitioner cannot split a Mosaic kernel. Under jit an Auto mesh's type carries the mesh but
no spec, and the check saw nothing (issue 57's held-out miss); the Explicit one is the same at its line."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.sharding import NamedSharding, PartitionSpec as P


def double_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2.0


def double(x):
    return pl.pallas_call(
        double_kernel,
        grid=(x.shape[0] // 8,),
        in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)


def run(rows):
    mesh = jax.make_mesh((jax.device_count(),), ("x",), axis_types=(jax.sharding.AxisType.Explicit,))
    sharding = NamedSharding(mesh, P("x", None))
    x = jax.device_put(jnp.ones((rows, 128), jnp.float32), sharding)
    doubled = jax.jit(double)
    return doubled(x)  # expect: PLS115


if __name__ == "__main__":
    print(run(8 * 16).shape)
