# harness for: tokamax:tokamax/_src/ops/experimental/mla/pallas_mosaic_tpu_kernel.py
# ruff: noqa
# Appended to the kernel file by benchmarks/bench_mutations_public.py (issue 50's public mutation corpus): one
# short prefill and one decode sequence, inputs from tokamax's own `mla.utils.generate_mla_inputs` and the
# reference from tokamax's `mla.reference.mla_attention` (both the library's test helpers).
import jax
import jax.numpy as jnp
import numpy as np
from tokamax._src.ops.experimental.mla import reference as _mla_reference
from tokamax._src.ops.experimental.mla import utils as _mla_utils

PALLASITE_ENTRY = "harness_mla"
TOLERANCE = {"atol": 5e-2, "rtol": 5e-2}
_SEQS, _PAGE = [(4, 64), (1, 48)], 16


def harness_mla(ql_nope, q_pe, new_kv_c, new_k_pe, cache_kv, kv_lens, page_indices, cu_q_lens, distribution):
    out, _ = mla_ragged_paged_attention(ql_nope, q_pe, new_kv_c, new_k_pe, cache_kv, kv_lens, page_indices, cu_q_lens,
                                        distribution, num_kv_pages_per_block=2, num_queries_per_block=4,
                                        vmem_limit_bytes=64 * 1024 * 1024)
    return out


def example_inputs():
    pages = sum(-(-kv // _PAGE) for _, kv in _SEQS) + len(_SEQS)
    made = _mla_utils.generate_mla_inputs(_SEQS, 4, 128, 64, _PAGE, jnp.bfloat16, jnp.bfloat16, pages,
                                          rng=np.random.default_rng(0))
    return tuple(jnp.asarray(x) for x in made)


def reference(*args):
    out, _ = _mla_reference.mla_attention(*args)
    return out
