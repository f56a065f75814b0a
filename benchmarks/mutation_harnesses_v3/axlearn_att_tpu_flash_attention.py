# harness for: axlearn:axlearn/common/flash_attention/tpu_attention.py
# ruff: noqa
# Appended to the kernel file by benchmarks/bench_mutations_public.py --corpus v3: the file's own pallas_calls
# (_flash_attention_impl, _flash_attention_bwd_dkv, _flash_attention_bwd_dq: grids, index maps with causal
# block skipping; the kernel bodies are jax's) through _pallas_tpu_flash_attention, causal, softmax_scale 0.125,
# a full (2, 3, 384, 256) bias and segment ids, q 384 x kv 256, 128 blocks, forward and the vjp in q, k, v, bias.
# The reference: a plain causal (top-left aligned) softmax of (q.k + bias) * scale (the bias goes in before the
# scale, as jax's kernel body does), segment-masked, differentiated by jax.vjp.
import jax
import jax.numpy as jnp

PALLASITE_ENTRY = "harness_tpu_flash_attention"
TOLERANCE = {"atol": 1e-4, "rtol": 1e-4}

_B, _H, _Q_LEN, _KV_LEN, _D = 2, 3, 384, 256, 64
_SCALE = 0.125
_SEG_START = 150


def _segments():
    qseg = (jnp.arange(_Q_LEN) >= _SEG_START).astype(jnp.int32)
    kseg = (jnp.arange(_KV_LEN) >= _SEG_START).astype(jnp.int32)
    # The second batch row has no segment boundary.
    return (jnp.stack([qseg, jnp.zeros_like(qseg)]), jnp.stack([kseg, jnp.zeros_like(kseg)]))


def harness_tpu_flash_attention(q, k, v, ab, do):
    block_sizes = LegacyBlockSizes(
        block_q=128, block_k_major=128, block_k=128, block_b=1,
        block_q_major_dkv=128, block_k_major_dkv=128, block_k_dkv=128, block_q_dkv=128,
        block_k_major_dq=128, block_k_dq=128, block_q_dq=128)
    qseg, kseg = _segments()
    seg = LegacySegmentIds(q=qseg, kv=kseg)

    def fn(q, k, v, ab):
        return _pallas_tpu_flash_attention(q, k, v, ab, seg, causal=True, softmax_scale=_SCALE,
                                           block_sizes=block_sizes)

    out, vjp = jax.vjp(fn, q, k, v, ab)
    return (out, *vjp(do))


def example_inputs():
    ks = jax.random.split(jax.random.key(23), 5)
    q = jax.random.normal(ks[0], (_B, _H, _Q_LEN, _D), jnp.float32)
    k = jax.random.normal(ks[1], (_B, _H, _KV_LEN, _D), jnp.float32)
    v = jax.random.normal(ks[2], (_B, _H, _KV_LEN, _D), jnp.float32) + 0.3
    ab = 0.5 * jax.random.normal(ks[3], (_B, _H, _Q_LEN, _KV_LEN), jnp.float32)
    do = jax.random.normal(ks[4], (_B, _H, _Q_LEN, _D), jnp.float32)
    return (q, k, v, ab, do)


def _ref(q, k, v, ab):
    qseg, kseg = _segments()
    # jax's legacy flash kernel adds the bias before the softmax scale.
    logits = (jnp.einsum("bhqd,bhkd->bhqk", q, k, precision="highest") + ab) * _SCALE
    causal = jnp.arange(_Q_LEN)[:, None] >= jnp.arange(_KV_LEN)[None, :]
    mask = causal[None, None] & (qseg[:, None, :, None] == kseg[:, None, None, :])
    p = jax.nn.softmax(jnp.where(mask, logits, -jnp.inf), axis=-1)
    return jnp.einsum("bhqk,bhkd->bhqd", p, v, precision="highest")


def reference(q, k, v, ab, do):
    out, vjp = jax.vjp(_ref, q, k, v, ab)
    return (out, *vjp(do))
