"""A sparse mixture-of-experts layer with a scalar-prefetch grouped matmul (a test fixture).

Tokens are routed to their top-1 expert, sorted by expert, padded per expert to whole row tiles, and a
Pallas kernel multiplies each row tile by its expert's weight: the tile's expert id and row offset are
scalar-prefetched (``PrefetchScalarGridSpec``), so the weight BlockSpec's index map reads them. The
grid is static (the most tiles any routing can make); tiles past the routed ones are skipped with
``pl.when``. ``reference()`` is the same layer in plain JAX (a gather of each token's expert weight).
"""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

TOKENS, DIM, HIDDEN, EXPERTS, TILE = 4096, 1024, 2048, 8, 256
MAX_TILES = TOKENS // TILE + EXPERTS


def _route(x, router):
    expert = jnp.argmax(x @ router, axis=-1).astype(jnp.int32)
    order = jnp.argsort(expert)
    counts = jnp.bincount(expert, length=EXPERTS)
    tiles = (counts + TILE - 1) // TILE
    tile_start = jnp.cumsum(tiles) - tiles
    tile_expert = jnp.repeat(jnp.arange(EXPERTS, dtype=jnp.int32), tiles, total_repeat_length=MAX_TILES)
    used = jnp.sum(tiles)
    row_start = jnp.cumsum(counts) - counts
    t = jnp.arange(MAX_TILES, dtype=jnp.int32)
    tile_row = (row_start[tile_expert] + (t - tile_start[tile_expert]) * TILE).astype(jnp.int32)
    return order, tile_expert, jnp.minimum(tile_row // TILE, TOKENS // TILE - 1), used.astype(jnp.int32)


def _kernel(tile_expert, tile_block, used, x_ref, w_ref, o_ref):
    @pl.when(pl.program_id(0) < used[0])
    def _():
        o_ref[...] = jnp.dot(x_ref[...], w_ref[0], preferred_element_type=jnp.float32).astype(o_ref.dtype)


def moe(x, router, weights):
    order, tile_expert, tile_block, used = _route(x, router)
    xs = x[order]
    spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=3, grid=(MAX_TILES,),
        in_specs=[pl.BlockSpec((TILE, DIM), lambda t, e, b, u: (b[t], 0)),
                  pl.BlockSpec((1, DIM, HIDDEN), lambda t, e, b, u: (e[t], 0, 0))],
        out_specs=pl.BlockSpec((TILE, HIDDEN), lambda t, e, b, u: (b[t], 0)))
    out = pl.pallas_call(_kernel, grid_spec=spec, out_shape=jax.ShapeDtypeStruct((TOKENS, HIDDEN), x.dtype))(
        tile_expert, tile_block, used.reshape(1), xs, weights)
    return jnp.zeros_like(out).at[order].set(out)


def reference(x, router, weights):
    expert = jnp.argmax(x @ router, axis=-1)
    return jnp.einsum("td,tdh->th", x, weights[expert]).astype(x.dtype)


def example_inputs():
    k = jax.random.split(jax.random.key(0), 3)
    return (jax.random.normal(k[0], (TOKENS, DIM), jnp.bfloat16),
            jax.random.normal(k[1], (DIM, EXPERTS), jnp.bfloat16),
            jax.random.normal(k[2], (EXPERTS, DIM, HIDDEN), jnp.bfloat16) * 0.02)


PALLASITE_ENTRY = "moe"
