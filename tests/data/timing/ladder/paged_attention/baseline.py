"""Reference decode attention over a paged KV cache, in its own layout and names (as JAXBench's 6p:
``num_seqs``/``num_query_heads`` where the kernel says ``batch``/``heads``, both 8; K and V pages
stacked in one argument): each sequence's pages gathered in page-table order, keys past its
length masked out."""
import jax
import jax.numpy as jnp

CONFIG = {"name": "ladder_paged_attention", "num_seqs": 8, "num_query_heads": 8, "head_dim": 128,
          "page_size": 16, "pages_per_seq": 8, "atol": 1e-4, "rtol": 1e-3}


def create_inputs(dtype=jnp.float32):
    b, h, d = CONFIG["num_seqs"], CONFIG["num_query_heads"], CONFIG["head_dim"]
    size, per = CONFIG["page_size"], CONFIG["pages_per_seq"]
    k1, k2, k3, k4, k5 = jax.random.split(jax.random.key(5), 5)
    q = jax.random.normal(k1, (b, h, d), dtype)
    k_pages = jax.random.normal(k2, (b * per, size, d), dtype)
    v_pages = jax.random.normal(k3, (b * per, size, d), dtype)
    lengths = jax.random.randint(k4, (b,), 1, per * size + 1).astype(jnp.int32)
    table = jax.random.permutation(k5, b * per).astype(jnp.int32).reshape(b, per)
    return q, jnp.stack([k_pages, v_pages]), lengths, table


def workload(q, kv_pages, lengths, table):
    b, per = table.shape
    size, d = kv_pages.shape[2], kv_pages.shape[3]
    k = kv_pages[0][table].reshape(b, per * size, d)
    v = kv_pages[1][table].reshape(b, per * size, d)
    s = jnp.einsum("bhd,bkd->bhk", q, k) / jnp.sqrt(jnp.float32(d))
    s = jnp.where(jnp.arange(per * size)[None, None, :] < lengths[:, None, None], s, -1e30)
    return jnp.einsum("bhk,bkd->bhd", jax.nn.softmax(s, axis=-1), v)
