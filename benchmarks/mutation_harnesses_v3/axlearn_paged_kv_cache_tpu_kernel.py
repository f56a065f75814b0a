# harness for: axlearn:axlearn/common/kv_cache/paged_kv_cache_tpu_kernel.py
# ruff: noqa
# Appended to the kernel file by benchmarks/bench_mutations_public.py --corpus v3: tpu_scatter_update_pages_shmap_fn
# (the TPU kernel, called directly without the shard_map wrapper) on kv_pages (3 heads, 14 pages, page_size 16,
# head_dim 128) f32 with random contents, kv_proj (3, 6, 1, 128), page_indices (6, 3), key_positions (6,): positions
# in both 8-row halves of a page, one 0, one negative, one == page_size * pages_per_seq, one on a page-table entry 0.
# The reference writes kv_proj[h, b, 0] at row pos % 16 of page page_indices[b, pos // 16] of every head, skipping
# out-of-range positions and page-table entries 0 (the null page), and keeps every other row.
import jax
import jax.numpy as jnp

PALLASITE_ENTRY = "harness_paged_kv_cache_update"
TOLERANCE = {"atol": 1e-6, "rtol": 1e-6}


def harness_paged_kv_cache_update(kv_pages, kv_proj, page_indices, key_positions):
    return tpu_scatter_update_pages_shmap_fn(kv_pages, kv_proj, page_indices, key_positions)


def example_inputs():
    num_heads, num_pages, page_size, head_dim = 3, 14, 16, 128
    kv_pages = jax.random.normal(jax.random.key(0), (num_heads, num_pages, page_size, head_dim), jnp.float32)
    kv_proj = 2.0 + jax.random.normal(jax.random.key(1), (num_heads, 6, 1, head_dim), jnp.float32)
    page_indices = jnp.array(
        [[4, 9, 2], [7, 0, 11], [1, 12, 5], [3, 8, 6], [10, 0, 0], [13, 0, 0]], jnp.int32
    )
    # b0: page 1 (9), row 13; b1: page 1 -> null page 0, skipped; b2: page 2 (5), row 2;
    # b3: 48 == 16 * 3, out of range, skipped; b4: -3, skipped; b5: page 0 (13), row 0.
    key_positions = jnp.array([29, 21, 34, 48, -3, 0], jnp.int32)
    return (kv_pages, kv_proj, page_indices, key_positions)


def reference(kv_pages, kv_proj, page_indices, key_positions):
    num_heads, _, page_size, _ = kv_pages.shape
    pages_per_seq = page_indices.shape[1]
    out = kv_pages
    for b in range(page_indices.shape[0]):
        pos = key_positions[b]
        valid = (pos >= 0) & (pos < page_size * pages_per_seq)
        safe = jnp.where(valid, pos, 0)
        page = page_indices[b, safe // page_size]
        valid = valid & (page != 0)
        row = safe % page_size
        new = jnp.where(valid, kv_proj[:, b, 0, :], out[:, page, row, :])
        out = out.at[:, page, row, :].set(new)
    return out
