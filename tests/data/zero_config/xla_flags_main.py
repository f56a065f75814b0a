"""A script that sets its own device count before importing jax (a common way to test sharded
code on a laptop): it shards an array over 2 of them, then calls a Pallas kernel."""
import os

os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax.experimental import pallas as pl  # noqa: E402
from jax.sharding import NamedSharding, PartitionSpec as P  # noqa: E402


def double_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2


def double(x):
    return pl.pallas_call(
        double_kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        interpret=True,
    )(x)


if __name__ == "__main__":
    assert jax.device_count() == 2, f"expected the 2 devices this file asked for, got {jax.device_count()}"
    mesh = jax.make_mesh((2,), ("x",))
    x = jnp.ones((16, 128), jnp.float32)
    print(jax.device_put(x, NamedSharding(mesh, P("x", None))).sum())
    print(double(x).sum())
