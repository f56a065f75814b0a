# harness for: sglang-jax:python/sgl_jax/srt/kernels/dsa/sparse_mla_prefill.py
# ruff: noqa
# Appended to the kernel file by benchmarks/bench_mutations_public.py --corpus v3: sparse_mla_attention on the flat
# latent cache: 2 requests x 3 queries, 4 heads (padded to 16 inside), latent 256 + rope 64, 200 tokens, 5 selected
# 16-token units per query (some -1 padding, some past the query position or past the cache end), 2 units a chunk
# (a partial last chunk), float32; one query position (205) lies past the cache end. The reference is plain JAX:
# gather the selected units' rows, mask -1 / causal / end-of-cache keys, softmax(q.k * sm_scale) over the rest,
# times the first 256 latent dims.
import jax
import jax.numpy as jnp
import numpy as np

_RB = 16
_LORA = 256
_SCALE = 1.0 / np.sqrt(192.0)
PALLASITE_ENTRY = "harness_sparse_mla"
TOLERANCE = {"atol": 1e-4, "rtol": 1e-4}


def harness_sparse_mla(q, kv, indices, positions):
    return sparse_mla_attention(q, kv, indices, positions, kv_lora_rank=_LORA, read_block=_RB, block_units=2,
                                sm_scale=_SCALE)


def example_inputs():
    B, S, H, Dk, T, K = 2, 3, 4, _LORA + 64, 200, 5
    rng = np.random.default_rng(3)
    q = jnp.asarray(rng.normal(size=(B, S, H, Dk)), jnp.float32)
    kv = jnp.asarray(rng.normal(size=(B, T, Dk)), jnp.float32)
    positions = np.asarray([[40, 121, 205], [77, 150, 183]], np.int32)  # 205 > T: only the kp < T mask hides 200..205
    num_units = (T + _RB - 1) // _RB
    indices = np.stack([np.stack([rng.permutation(num_units)[:K] for _ in range(S)]) for _ in range(B)])
    indices[0, 0, 0] = 0  # unit 0 always visible
    indices[0, 1, 4] = -1
    indices[1, 2, 3:] = -1
    indices[1, 0, 1] = num_units - 1  # past the query position and past the cache end
    indices[0, 2, 2] = num_units - 1  # partly past the cache end (tokens 192..207 of 200)
    return (q, kv, jnp.asarray(indices, jnp.int32), jnp.asarray(positions))


def reference(q, kv, indices, positions):
    T = kv.shape[1]
    kp = jnp.maximum(indices, 0)[..., None] * _RB + jnp.arange(_RB)  # [B, S, K, RB]
    valid = (indices[..., None] >= 0) & (kp <= positions[:, :, None, None]) & (kp < T)
    kp = kp.reshape(*kp.shape[:2], -1)
    valid = valid.reshape(kp.shape)
    rows = jax.vmap(lambda kv_b, kp_b: kv_b[jnp.minimum(kp_b, T - 1)])(kv, kp)  # [B, S, K*RB, Dk]
    s = jnp.einsum("bshd,bskd->bshk", q, rows, precision=jax.lax.Precision.HIGHEST) * _SCALE
    s = jnp.where(valid[:, :, None, :], s, -jnp.inf)
    p = jax.nn.softmax(s, axis=-1)
    return jnp.einsum("bshk,bskd->bshd", p, rows[..., :_LORA], precision=jax.lax.Precision.HIGHEST)
