"""Guide style (distributed): a kernel that reads its device's index along the mesh axis, called inside
shard_map at the top level. Applied again outside shard_map the axis is unbound: that is no error
of the kernel, so the tiers say they were skipped and why, and nothing is reported. (Issue 50: with jax
0.10 shard_map checks varying axes by default, so the first out_shape says how its output varies and the
second shard_map turns the check off; as first written, both were refused by jax while tracing.)"""
import functools
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
from jax.sharding import PartitionSpec as P

mesh = jax.make_mesh((4,), ("x",))


def kernel(x_ref, o_ref):
  o_ref[...] = x_ref[...] + jax.lax.axis_index("x").astype(jnp.float32)


def local(x):
  return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(
      x.shape, x.dtype, manual_axis_type=jax.typeof(x).manual_axis_type))(x)


x = jax.device_put(jnp.ones((32, 128)), jax.sharding.NamedSharding(mesh, P("x", None)))
y = jax.jit(jax.shard_map(local, mesh=mesh, in_specs=P("x", None), out_specs=P("x", None)))(x)

# as jax's distributed guide writes it: the pallas_call made outside, applied inside shard_map
made = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((16, 128), jnp.float32))
z = jax.jit(jax.shard_map(made, mesh=mesh, in_specs=P("x", None), out_specs=P("x", None), check_vma=False))(
    jax.device_put(jnp.ones((64, 128)), jax.sharding.NamedSharding(mesh, P("x", None))))
