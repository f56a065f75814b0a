"""A kernel file that names sharding only in words, the way jax's splash attention does: comments
about shard_map, a method annotated with jax.sharding.NamedSharding, a device_put without a
sharding. No shard_map is called and nothing is placed with a sharding, so the sharding rules
(PLS115/PLS116) have nothing to read here; tier 0 runs after every edit, and they must cost
nothing on it (tests/test_sharding_rules.py counts their calls)."""

import dataclasses

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

BLOCK = 8


def scale_kernel(x_ref, o_ref):
    # one block per grid step; the caller may shard_map over the rows
    o_ref[...] = x_ref[...] * 2.0


def scale(x):
    rows, cols = x.shape
    return pl.pallas_call(
        scale_kernel,
        grid=(rows // BLOCK,),
        in_specs=[pl.BlockSpec((BLOCK, cols), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((BLOCK, cols), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)


@dataclasses.dataclass(frozen=True)
class Layout:
    rows: int

    def manual_sharding_spec(self, sharding: jax.sharding.NamedSharding):
        """A spec for shard_map over the rows: the sharding must divide them evenly."""
        shard_rows = sharding.shard_shape((self.rows, 128))[0]
        if self.rows % shard_rows:
            raise ValueError("the sharding must divide the rows evenly")
        return sharding.spec


def example_inputs():
    return (jax.device_put(jnp.ones((8 * BLOCK, 128), jnp.float32)),)


if __name__ == "__main__":
    print(scale(*example_inputs()).shape)
