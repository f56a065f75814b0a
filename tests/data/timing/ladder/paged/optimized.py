"""A page gather by scalar prefetch: the page table goes to SMEM and each grid step's index map
reads the page it copies (paged attention's structure)."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

CONFIG = {"name": "ladder_paged", "num_seqs": 4, "pages_per_seq": 16, "page_size": 16, "width": 128,
          "atol": 1e-6, "rtol": 1e-6}
SHIFT = 0


def create_inputs(dtype=jnp.float32):
    k1, k2 = jax.random.split(jax.random.key(4))
    total = CONFIG["num_seqs"] * CONFIG["pages_per_seq"]
    pages = jax.random.normal(k1, (total, CONFIG["page_size"], CONFIG["width"]), dtype)
    table = jax.random.permutation(k2, total).astype(jnp.int32).reshape(CONFIG["num_seqs"], CONFIG["pages_per_seq"])
    return pages, table


def _kernel(table_ref, page_ref, o_ref):
    o_ref[...] = page_ref[...]


def workload(pages, table):
    s, p = table.shape
    total, size, width = pages.shape
    out = pl.pallas_call(
        _kernel,
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1, grid=(s, p),
            in_specs=[pl.BlockSpec((1, size, width), lambda i, j, t: ((t[i, (j + SHIFT) % p]), 0, 0))],
            out_specs=pl.BlockSpec((1, size, width), lambda i, j, t: (i * p + j, 0, 0))),
        out_shape=jax.ShapeDtypeStruct((s * p, size, width), pages.dtype),
    )(table, pages)
    return out.reshape(s, p * size, width)
