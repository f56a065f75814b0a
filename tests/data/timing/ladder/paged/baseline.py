"""Reference page gather: each sequence's pages, in its page table's order, as one sequence."""
import jax
import jax.numpy as jnp

CONFIG = {"name": "ladder_paged", "num_seqs": 4, "pages_per_seq": 16, "page_size": 16, "width": 128,
          "atol": 1e-6, "rtol": 1e-6}


def create_inputs(dtype=jnp.float32):
    k1, k2 = jax.random.split(jax.random.key(4))
    total = CONFIG["num_seqs"] * CONFIG["pages_per_seq"]
    pages = jax.random.normal(k1, (total, CONFIG["page_size"], CONFIG["width"]), dtype)
    table = jax.random.permutation(k2, total).astype(jnp.int32).reshape(CONFIG["num_seqs"], CONFIG["pages_per_seq"])
    return pages, table


def workload(pages, table):
    s, p = table.shape
    return pages[table].reshape(s, p * pages.shape[1], pages.shape[2])
