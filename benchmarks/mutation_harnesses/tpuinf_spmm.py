# harness for: tpu-inference:tpu_inference/kernels/structured_sparse_matmul/v1/spmm.py
# ruff: noqa
# Appended to the kernel file by benchmarks/bench_mutations_public.py (issue 50's public mutation corpus): one
# case of the file's own test (tests/kernels/spmm_v1_test.py: 1:4 sparsity on the lhs's contracting dim, stride
# 128, m, k, n = 512, 512, 256), the sparse lhs encoded by the file's `Sparsifier` when the inputs are made;
# reference: the dense product of the lhs `Sparsifier.decode` gives back.
import jax
import jax.numpy as jnp

PALLASITE_ENTRY = "harness_spmm"
TOLERANCE = {"atol": 1e-3, "rtol": 1e-3}
_SPARSITY, _STRIDE, _DEFAULT, _LHS = (1, 4), 128, 1.9, (512, 512)


def harness_spmm(nonzeros, metadata, rhs):
    return structured_spmm(_SPARSITY, nonzeros, metadata, rhs, rhs_sparse=False, contract_sparse=True,
                           stride=_STRIDE, block_m=128, block_k=_LHS[1], block_n=128, default_value=_DEFAULT,
                           out_dtype=jnp.float32)


def example_inputs():
    k1, k2 = jax.random.split(jax.random.key(0))
    lhs = jax.random.normal(k1, _LHS, jnp.float32) / 100
    mask = gen_sparse_mask(jax.random.PRNGKey(123), _LHS, _SPARSITY, sparse_dim=1, stride=_STRIDE)
    sm = Sparsifier(lhs, mask, sparsity=_SPARSITY, sparse_dim=1, stride=_STRIDE)
    return sm.nonzeros, sm.metadata, jax.random.normal(k2, (_LHS[1], 256), jnp.float32) / 100


def reference(nonzeros, metadata, rhs):
    sm = object.__new__(Sparsifier)
    sm.shape, sm.dtype, sm.sparsity, sm.stride, sm.sparse_dim = _LHS, nonzeros.dtype, _SPARSITY, _STRIDE, 1
    sm.nonzeros, sm.metadata = nonzeros, metadata
    data, mask = sm.decode()
    return jnp.dot(jnp.where(mask, data, _DEFAULT), rhs, precision=jax.lax.Precision.HIGHEST)
