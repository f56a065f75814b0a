# harness for: axlearn:axlearn/common/flash_attention/tpu_splash_attention.py
# ruff: noqa
# Appended to the kernel file by benchmarks/bench_mutations_public.py --corpus v3: make_splash_mha_single_device
# on 4 q heads over 2 kv heads of 64, q 256 x kv 512, blocks q 128 / kv 256 / kv compute 128, called twice:
# A) per-head numpy masks (two local windows, two offset causals, one of them without the first 64 keys; partial mask blocks), segment ids and a logit
# sink, forward and the vjp (fused bwd kernel); B) one CausalMask(offset 256) for all heads (mask_function path),
# forward and the vjp (separate dq and dkv kernels). The reference is a plain masked softmax with the sink as an
# extra logit, differentiated by jax.vjp.
import jax
import jax.numpy as jnp
import numpy as np

# jax-version shims (axlearn pins jax 0.8.3): newer jax dropped pl.load, pl.store and pltpu.repeat, which this
# file's kernels call; they are put back (only where missing) as the plain ref indexing / repeat they stood for.
# And axlearn passes the block sizes as get_kernel_name's first argument, which newer jax's get_kernel_name has no
# parameter for; the name only labels the pallas_call.
import inspect as _inspect

from jax._src.pallas.mosaic import primitives as _mosaic_primitives

if "load" not in vars(pl):
    def _pl_load(ref, idx):
        return ref[idx]

    def _pl_store(ref, idx, val):
        ref[idx] = val

    pl.load, pl.store = _pl_load, _pl_store
if "repeat" not in vars(pltpu):
    pltpu.repeat = _mosaic_primitives.repeat

if "is_mqa" in list(_inspect.signature(get_kernel_name).parameters)[:1]:
    _jax_get_kernel_name = get_kernel_name

    def get_kernel_name(block_sizes, *args, **kwargs):
        return _jax_get_kernel_name(*args, **kwargs)


PALLASITE_ENTRY = "harness_splash_attention"
TOLERANCE = {"atol": 1e-4, "rtol": 1e-4}

_HEADS, _KV_HEADS, _Q_LEN, _KV_LEN, _HEAD_DIM = 4, 2, 256, 512, 64
_OFFSET = 256


def _np_masks():
    qpos = np.arange(_Q_LEN)[:, None] + _OFFSET
    kpos = np.arange(_KV_LEN)[None, :]
    local_a = (kpos <= qpos) & (qpos - kpos <= 150)
    local_b = (kpos <= qpos + 40) & (qpos - kpos <= 300)
    causal_a = kpos <= qpos
    causal_b = (kpos <= qpos) & (kpos >= 64)
    return np.stack([local_a, causal_a, local_b, causal_b])


def _segments():
    qseg = (np.arange(_Q_LEN) + _OFFSET >= 420).astype(np.int32)
    kseg = (np.arange(_KV_LEN) >= 420).astype(np.int32)
    return qseg, kseg


def _block_sizes(fused):
    return BlockSizes(block_q=128, block_kv=256, block_kv_compute=128, block_q_dkv=128, block_kv_dkv=256,
                      block_kv_dkv_compute=128, block_q_dq=None if fused else 128,
                      block_kv_dq=None if fused else 256, use_fused_bwd_kernel=fused)


def harness_splash_attention(q, k, v, logit_sink, do):
    masks = _np_masks()
    mha_a = mask_lib.MultiHeadMask([mask_lib.NumpyMask(m) for m in masks])
    kernel_a = make_splash_mha_single_device(mha_a, block_sizes=_block_sizes(True))
    qseg, kseg = _segments()
    seg = SegmentIds(q=jnp.asarray(qseg), kv=jnp.asarray(kseg))
    out_a, vjp_a = jax.vjp(lambda q, k, v, s: kernel_a(q, k, v, segment_ids=seg, logit_sink=s), q, k, v, logit_sink)
    grads_a = vjp_a(do)

    mha_b = mask_lib.MultiHeadMask([mask_lib.CausalMask((_Q_LEN, _KV_LEN), offset=_OFFSET)] * _HEADS)
    kernel_b = make_splash_mha_single_device(mha_b, block_sizes=_block_sizes(False))
    out_b, vjp_b = jax.vjp(lambda q, k, v: kernel_b(q, k, v), q, k, v)
    grads_b = vjp_b(do)
    return (out_a, *grads_a, out_b, *grads_b)


def example_inputs():
    ks = jax.random.split(jax.random.key(5), 5)
    q = 0.2 * jax.random.normal(ks[0], (_HEADS, _Q_LEN, _HEAD_DIM), jnp.float32)
    k = jax.random.normal(ks[1], (_KV_HEADS, _KV_LEN, _HEAD_DIM), jnp.float32)
    v = jax.random.normal(ks[2], (_KV_HEADS, _KV_LEN, _HEAD_DIM), jnp.float32) + 0.3
    logit_sink = 2.0 * jax.random.normal(ks[3], (_HEADS,), jnp.float32)
    do = jax.random.normal(ks[4], (_HEADS, _Q_LEN, _HEAD_DIM), jnp.float32)
    return (q, k, v, logit_sink, do)


def _ref_attention(q, k, v, mask, logit_sink):
    groups = _HEADS // _KV_HEADS
    kk = jnp.repeat(k, groups, axis=0)
    vv = jnp.repeat(v, groups, axis=0)
    logits = jnp.einsum("hqd,hkd->hqk", q, kk, precision="highest")
    logits = jnp.where(mask, logits, -jnp.inf)
    if logit_sink is not None:
        sink = jnp.broadcast_to(logit_sink[:, None, None], (_HEADS, _Q_LEN, 1))
        logits = jnp.concatenate([logits, sink], axis=-1)
        vv = jnp.concatenate([vv, jnp.zeros_like(vv[:, :1])], axis=1)
    p = jax.nn.softmax(logits, axis=-1)
    return jnp.einsum("hqk,hkd->hqd", p, vv, precision="highest")


def reference(q, k, v, logit_sink, do):
    qseg, kseg = _segments()
    mask_a = jnp.asarray(_np_masks() & (qseg[None, :, None] == kseg[None, None, :]))
    out_a, vjp_a = jax.vjp(lambda q, k, v, s: _ref_attention(q, k, v, mask_a, s), q, k, v, logit_sink)
    grads_a = vjp_a(do)
    qpos = jnp.arange(_Q_LEN)[:, None] + _OFFSET
    mask_b = jnp.broadcast_to(jnp.arange(_KV_LEN)[None, :] <= qpos, (_HEADS, _Q_LEN, _KV_LEN))
    out_b, vjp_b = jax.vjp(lambda q, k, v: _ref_attention(q, k, v, mask_b, None), q, k, v)
    grads_b = vjp_b(do)
    return (out_a, *grads_a, out_b, *grads_b)
