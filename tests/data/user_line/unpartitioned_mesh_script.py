"""From marin-community/marin#4122 and erfanzar/EasyDeL#149 ("Mosaic kernels cannot be
automatically partitioned. Please wrap the call in a shard_map"): a pallas_call applied to an
array sharded over a 4-device mesh without shard_map. Checked in script mode (8 virtual devices).
Expected: an error at the call that hands the sharded array to the kernel's function, which is
what to wrap in shard_map (issue 50: it was said at the pallas_call; tier 0 now says it there too)."""
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


if __name__ == "__main__":
    mesh = jax.make_mesh((4,), ("x",))
    x = jax.device_put(jnp.ones((512, 256), jnp.float32), NamedSharding(mesh, P("x", None)))
    print(double(x).sum())  # EXPECTED LINE
