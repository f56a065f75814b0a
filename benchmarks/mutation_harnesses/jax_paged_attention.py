# harness for: jax-ops:paged_attention/paged_attention_kernel.py
# ruff: noqa
# Appended to the kernel file by benchmarks/bench_mutations_public.py (issue 50's public mutation corpus): the
# smallest call of `paged_attention` its docstring allows, with a reference written here (not jax's).
import jax
import jax.numpy as jnp

PALLASITE_ENTRY = "harness_paged_attention"
_PAGE, _PAGES_PER_SEQ, _LENGTHS = 16, 4, (40, 64)
TOLERANCE = {"atol": 2e-2, "rtol": 2e-2}  # the kernel uses approximate reciprocals: 7e-3 off in float32


def harness_paged_attention(q, k_pages, v_pages, lengths, page_indices):
    return paged_attention(q, k_pages, v_pages, lengths, page_indices, pages_per_compute_block=2)


def example_inputs():
    kq, kk, kv = jax.random.split(jax.random.key(0), 3)
    q = jax.random.normal(kq, (2, 4, 128), jnp.float32)
    k_pages = jax.random.normal(kk, (2, 8, _PAGE, 128), jnp.float32)
    v_pages = jax.random.normal(kv, (2, 8, _PAGE, 128), jnp.float32)
    page_indices = jnp.array([[7, 1, 4, 2], [0, 5, 3, 6]], jnp.int32)
    return q, k_pages, v_pages, jnp.array(_LENGTHS, jnp.int32), page_indices


def reference(q, k_pages, v_pages, lengths, page_indices):
    b, hq, d = q.shape
    hkv = k_pages.shape[0]
    k = k_pages[:, page_indices].reshape(hkv, b, -1, d)  # [hkv, b, seq, d]
    v = v_pages[:, page_indices].reshape(hkv, b, -1, d)
    qg = q.reshape(b, hkv, hq // hkv, d)
    s = jnp.einsum("bhgd,hbsd->bhgs", qg, k)
    mask = jnp.arange(k.shape[2])[None, :] < lengths[:, None]
    s = jnp.where(mask[:, None, None, :], s, -jnp.inf)
    p = jax.nn.softmax(s, axis=-1)
    return jnp.einsum("bhgs,hbsd->bhgd", p, v).reshape(b, hq, d)
