"""As ragged_paged, with the query lengths a module constant (JAXBench 7p's layout): at a reduced num_seqs
their offsets run past the query buffer, so no reduced size is an instance of the task.
Reference ragged paged attention: sequences of ragged query lengths (``cu_q_lens``) and KV lengths
over a paged KV cache; each sequence's queries are its last tokens, causal over its keys. Rows past
the last sequence's queries are padding (zeros)."""
import jax
import jax.numpy as jnp

CONFIG = {"name": "ladder_ragged_constant", "num_seqs": 4, "max_q": 8, "head_dim": 128, "page_size": 16,
          "pages_per_seq": 8, "atol": 1e-4, "rtol": 1e-3}

Q_LENS = (1, 7, 8, 8)  # one serving step's query lengths, fixed as JAXBench 7p fixes its scenario

def create_inputs(dtype=jnp.float32):
    b, mq, d = CONFIG["num_seqs"], CONFIG["max_q"], CONFIG["head_dim"]
    size, per = CONFIG["page_size"], CONFIG["pages_per_seq"]
    k1, k2, k3, k4, k5, k6 = jax.random.split(jax.random.key(6), 6)
    q = jax.random.normal(k1, (b * mq, d), dtype)
    k_pages = jax.random.normal(k2, (b * per, size, d), dtype)
    v_pages = jax.random.normal(k3, (b * per, size, d), dtype)
    q_lens = jnp.array(Q_LENS, jnp.int32)  # the scenario's constants: they do not follow CONFIG
    kv_lens = jnp.maximum(jax.random.randint(k5, (len(Q_LENS),), 1, per * size + 1), q_lens).astype(jnp.int32)
    cu_q_lens = jnp.concatenate([jnp.zeros(1, jnp.int32), jnp.cumsum(q_lens).astype(jnp.int32)])
    table = jax.random.permutation(k6, b * per).astype(jnp.int32).reshape(b, per)
    return q, k_pages, v_pages, kv_lens, table, cu_q_lens


def workload(q, k_pages, v_pages, kv_lens, table, cu_q_lens):
    b, per = table.shape
    size, d = k_pages.shape[1], k_pages.shape[2]
    rows = jnp.arange(q.shape[0])
    seq = jnp.clip(jnp.searchsorted(cu_q_lens, rows, side="right") - 1, 0, b - 1)  # each row's sequence
    real = rows < cu_q_lens[-1]
    k = k_pages[table].reshape(b, per * size, d)[seq]  # (rows, keys, d)
    v = v_pages[table].reshape(b, per * size, d)[seq]
    qpos = kv_lens[seq] - (cu_q_lens[seq + 1] - rows)  # the queries are the sequence's last tokens
    s = jnp.einsum("rd,rkd->rk", q, k) / jnp.sqrt(jnp.float32(d))
    keys = jnp.arange(per * size)[None, :]
    s = jnp.where((keys <= qpos[:, None]) & (keys < kv_lens[seq][:, None]), s, -1e30)
    out = jnp.einsum("rk,rkd->rd", jax.nn.softmax(s, axis=-1), v)
    return jnp.where(real[:, None], out, 0.0).astype(q.dtype)
