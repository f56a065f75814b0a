"""The grouped matmul kernel with a planted bug: a row tile's group is found from the row past its
last, so the last tile of each group but the final one is multiplied by the next group's rhs (wrong
at every size with two or more groups). Otherwise as optimized.py."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

CONFIG = {"name": "ladder_gmm", "m": 2048, "k": 256, "n": 256, "num_groups": 8, "atol": 1e-3, "rtol": 1e-3}
ROW_TILE = 128  # the group sizes are multiples of it
TM, TN = ROW_TILE, 128
LAST_ROW = True  # planted: the group found from the row past the tile, so a group's last tile reads the next group's rhs


def create_inputs(dtype=jnp.float32):
    k1, k2 = jax.random.split(jax.random.key(11))
    g, tiles = CONFIG["num_groups"], CONFIG["m"] // ROW_TILE
    lhs = jax.random.normal(k1, (CONFIG["m"], CONFIG["k"]), dtype)
    rhs = jax.random.normal(k2, (g, CONFIG["k"], CONFIG["n"]), dtype) * 0.1
    # uneven, summing to m at any CONFIG: the first half of the groups a tile more than the second
    # half, the remainder tiles to the first groups (with fewer tiles than groups, some groups empty)
    per = jnp.full((g,), tiles // g, jnp.int32) + (jnp.arange(g) < tiles % g).astype(jnp.int32)
    if tiles // g >= 2 and g >= 2:
        per = per + jnp.where(jnp.arange(g) < g // 2, 1, -1).astype(jnp.int32)
    return lhs, rhs, (per * ROW_TILE).astype(jnp.int32)


def _group_of(i, sizes_ref, num_groups):
    """The group of row tile i: how many groups end at or before its first row."""
    row = (i + 1) * TM if LAST_ROW else i * TM

    def body(g, carry):
        end, group = carry
        end = end + sizes_ref[g]
        return end, group + (end <= row).astype(jnp.int32)

    _, group = jax.lax.fori_loop(0, num_groups, body, (jnp.int32(0), jnp.int32(0)))
    return jnp.minimum(group, num_groups - 1)


def _kernel(sizes_ref, lhs_ref, rhs_ref, o_ref):
    o_ref[...] = jnp.dot(lhs_ref[...], rhs_ref[0], preferred_element_type=jnp.float32).astype(o_ref.dtype)


def workload(lhs, rhs, group_sizes):
    m, k = lhs.shape
    g, _, n = rhs.shape
    return pl.pallas_call(
        _kernel,
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1, grid=(m // TM, n // TN),
            in_specs=[pl.BlockSpec((TM, k), lambda i, j, sizes: (i, 0)),
                      pl.BlockSpec((1, k, TN), lambda i, j, sizes: (_group_of(i, sizes, g), 0, j))],
            out_specs=pl.BlockSpec((TM, TN), lambda i, j, sizes: (i, j))),
        out_shape=jax.ShapeDtypeStruct((m, n), lhs.dtype),
    )(group_sizes, lhs, rhs)
