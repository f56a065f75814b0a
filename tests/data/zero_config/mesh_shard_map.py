"""A 4-device Mesh + shard_map around a Pallas kernel (script mode): each device runs the kernel
on its (256, 512) shard. Needs several devices: pallasite's workers start with virtual CPU devices."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.sharding import NamedSharding, PartitionSpec as P

from jax import shard_map


def scale_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2.0


def scale(x):
    return pl.pallas_call(
        scale_kernel,
        grid=(x.shape[0] // 128,),
        in_specs=[pl.BlockSpec((128, x.shape[1]), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((128, x.shape[1]), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        interpret=jax.default_backend() != "tpu",
    )(x)


if __name__ == "__main__":
    mesh = jax.make_mesh((4,), ("x",))  # "Number of devices 1 must be >= ..." on a 1-device backend
    sharded = jax.jit(shard_map(scale, mesh=mesh, in_specs=P("x", None), out_specs=P("x", None), check_vma=False))
    x = jax.device_put(jnp.ones((1024, 512), jnp.float32), NamedSharding(mesh, P("x", None)))
    print(sharded(x).sum())
