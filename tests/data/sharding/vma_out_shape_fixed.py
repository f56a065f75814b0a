"""A kernel run per shard with jax.shard_map, whose out_shape says nothing about how the output varies
across the mesh: shard_map checks varying axes by default (check_vma=True), and jax refuses the
pallas_call while tracing ("`manual_axis_type` on `jax.ShapeDtypeStruct` must not be `None`").
The fixed twin: the struct takes the operand's manual axis type."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.sharding import PartitionSpec as P


def double_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2.0


def double_shard(x):
    return pl.pallas_call(
        double_kernel,
        grid=(x.shape[0] // 8,),
        in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype, manual_axis_type=jax.typeof(x).manual_axis_type),
    )(x)


def double(x, mesh):
    return jax.shard_map(double_shard, mesh=mesh, in_specs=P("x", None), out_specs=P("x", None))(x)


if __name__ == "__main__":
    mesh = jax.make_mesh((jax.device_count(),), ("x",))
    x = jax.device_put(jnp.ones((8 * 16, 128), jnp.float32), jax.sharding.NamedSharding(mesh, P("x", None)))
    print(double(x, mesh).shape)
