# harness for: jax-ops:splash_attention/splash_attention_kernel.py
# ruff: noqa
# Appended to the kernel file by benchmarks/bench_mutations_public.py (issue 50's public mutation corpus): the
# forward kernel of `make_splash_mha` on a causal mask, two heads, two q and two kv blocks; reference written here.
import jax
import jax.numpy as jnp

PALLASITE_ENTRY = "harness_splash"
TOLERANCE = {"atol": 2e-2, "rtol": 2e-2}
_SEQ, _HEADS = 256, 2


def harness_splash(q, k, v):
    mask = mask_lib.MultiHeadMask([mask_lib.CausalMask((_SEQ, _SEQ)) for _ in range(_HEADS)])
    sizes = BlockSizes(block_q=128, block_kv=128, block_kv_compute=128)
    kernel = make_splash_mha(mask, block_sizes=sizes, head_shards=1, q_seq_shards=1)
    return kernel(q, k, v)


def example_inputs():
    s = jax.ShapeDtypeStruct((_HEADS, _SEQ, 128), jnp.float32)
    return s, s, s


def reference(q, k, v):
    s = jnp.einsum("hqd,hkd->hqk", q, k)
    causal = jnp.arange(_SEQ)[:, None] >= jnp.arange(_SEQ)[None, :]
    p = jax.nn.softmax(jnp.where(causal, s, -jnp.inf), axis=-1)
    return jnp.einsum("hqk,hkd->hqd", p, v)
