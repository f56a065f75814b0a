# harness for: axlearn:axlearn/common/flash_attention/tpu_decoding.py
# ruff: noqa
# Appended to the kernel file by benchmarks/bench_mutations_public.py --corpus v3: TPUDecoding (this file's class,
# tpu_block_size 128, softmax_scale 1/8) called twice on one decoding step: 4 sequences decoding at positions
# 44, 300, 255, 129 of a 384-long KV cache, 8 q heads over 2 kv heads of 64; call A with a sliding window of 100,
# a per-head 4-d bias and a logit sink, call B with a left_right_window_mask(120, 32) MaskFnAttentionBias and a
# broadcast (1, 1, 1, 384) bias. The reference: a plain softmax over the cache, masked by length (cache keys
# past the decoded position) and left window, with the sink as an extra logit.
import jax
import jax.numpy as jnp

from axlearn.common.attention_bias import MaskFnAttentionBias as _MaskFnAttentionBias
from axlearn.common.attention_bias import CompositeAttentionBias as _CompositeAttentionBias
from axlearn.common.attention_bias import SlidingWindowAttentionBias as _SlidingWindowAttentionBias
from axlearn.common.attention_bias import TensorAttentionBias as _TensorAttentionBias
from axlearn.common.attention_bias import left_right_window_mask as _left_right_window_mask
from axlearn.common.attention_bias import sliding_window_causal_mask as _sliding_window_causal_mask

PALLASITE_ENTRY = "harness_tpu_decoding"
TOLERANCE = {"atol": 2e-5, "rtol": 2e-5}

_BATCH, _SEQ, _HEADS, _KV_HEADS, _HEAD_DIM = 4, 384, 8, 2, 64
_POSITIONS = (44, 300, 255, 129)
_WINDOW = 100
_LEFT = 120
_SCALE = 0.125


def _decoding():
    return TPUDecoding.default_config().set(softmax_scale=_SCALE, tpu_block_size=128).instantiate()


def harness_tpu_decoding(q, k, v, positions, bias4d, bias2d, logit_sink):
    pos = dict(target_positions=positions[:, None], source_positions=jnp.tile(jnp.arange(_SEQ), (_BATCH, 1)))
    window = _SlidingWindowAttentionBias(
        mask=_sliding_window_causal_mask(_WINDOW), sliding_window_size=_WINDOW, **pos)
    fn = _decoding()
    out_a = fn(dict(query=q, key=k, value=v, logit_sink=logit_sink,
                    bias=_CompositeAttentionBias([window, _TensorAttentionBias(bias4d)])))
    out_b = fn(dict(query=q, key=k, value=v,
                    bias=_CompositeAttentionBias([_MaskFnAttentionBias(_left_right_window_mask(_LEFT, 32), **pos),
                                                    _TensorAttentionBias(bias2d)])))
    return out_a, out_b


def example_inputs():
    ks = jax.random.split(jax.random.key(11), 6)
    q = jax.random.normal(ks[0], (_BATCH, 1, _HEADS, _HEAD_DIM), jnp.float32)
    k = jax.random.normal(ks[1], (_BATCH, _SEQ, _KV_HEADS, _HEAD_DIM), jnp.float32)
    v = jax.random.normal(ks[2], (_BATCH, _SEQ, _KV_HEADS, _HEAD_DIM), jnp.float32) + 0.25
    bias4d = 0.5 * jax.random.normal(ks[3], (_BATCH, _HEADS, 1, _SEQ), jnp.float32)
    bias2d = 0.5 * jax.random.normal(ks[4], (1, 1, 1, _SEQ), jnp.float32)
    logit_sink = 2.0 * jax.random.normal(ks[5], (_HEADS,), jnp.float32)
    return (q, k, v, jnp.asarray(_POSITIONS, jnp.int32), bias4d, bias2d, logit_sink)


def _ref(q, k, v, positions, bias, logit_sink, window):
    groups = _HEADS // _KV_HEADS
    qg = q[:, 0].reshape(_BATCH, _KV_HEADS, groups, _HEAD_DIM)
    logits = jnp.einsum("bhgd,bkhd->bhgk", qg, k, precision="highest") * _SCALE
    logits = logits + jnp.broadcast_to(bias, (_BATCH, _HEADS, 1, _SEQ)).reshape(_BATCH, _KV_HEADS, groups, _SEQ)
    kpos = jnp.arange(_SEQ)[None, None, None, :]
    qpos = positions[:, None, None, None]
    valid = (kpos <= qpos) & (qpos - kpos <= window)
    logits = jnp.where(valid, logits, -jnp.inf)
    vv = v
    if logit_sink is not None:
        sink = jnp.broadcast_to(logit_sink.reshape(1, _KV_HEADS, groups, 1), (_BATCH, _KV_HEADS, groups, 1))
        logits = jnp.concatenate([logits, sink], axis=-1)
        vv = jnp.concatenate([v, jnp.zeros_like(v[:, :1])], axis=1)
    p = jax.nn.softmax(logits, axis=-1)
    out = jnp.einsum("bhgk,bkhd->bhgd", p, vv, precision="highest")
    return out.reshape(_BATCH, 1, _HEADS, _HEAD_DIM)


def reference(q, k, v, positions, bias4d, bias2d, logit_sink):
    return (_ref(q, k, v, positions, bias4d, logit_sink, _WINDOW),
            _ref(q, k, v, positions, bias2d, None, _LEFT))
