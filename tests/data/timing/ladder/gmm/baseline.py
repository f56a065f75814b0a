"""Reference grouped matmul (Megablox GMM) in plain jnp: row r of the (m, k) lhs is multiplied by
rhs[g], g the group its row falls in by the int32 group_sizes (consecutive rows per group; sizes
multiples of 128, uneven, some empty when there are fewer row tiles than groups); sizes from CONFIG."""
import jax
import jax.numpy as jnp

CONFIG = {"name": "ladder_gmm", "m": 2048, "k": 256, "n": 256, "num_groups": 8, "atol": 1e-3, "rtol": 1e-3}
ROW_TILE = 128  # the group sizes are multiples of it


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


def workload(lhs, rhs, group_sizes):
    row_group = jnp.searchsorted(jnp.cumsum(group_sizes), jnp.arange(lhs.shape[0]), side="right")
    every = jnp.einsum("mk,gkn->gmn", lhs, rhs, preferred_element_type=jnp.float32)
    out = jnp.take_along_axis(every, row_group[None, :, None], axis=0)[0]
    return out.astype(lhs.dtype)
