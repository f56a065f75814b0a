"""The plain-JAX reference of ragged_lengths_constant.py (copied beside it as baseline.py by the test)."""

import jax.numpy as jnp

CONFIG = {"page_size": 16}


def workload(q, k_pages, lengths, table):
    pages = k_pages[table]  # (batch, pages_per_seq, page_size, dim)
    n = lengths // CONFIG["page_size"]
    used = jnp.arange(table.shape[1])[None, :] < n[:, None]
    acc = jnp.where(used[:, :, None, None], pages, 0.0).sum(axis=(1, 2))
    return q + acc[:, None, :]
