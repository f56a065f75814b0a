"""A kernel's own check of its block sizes (``bkv % bkv_compute``), as splash attention has: the sizes
are written in a tuned table, built into a dataclass, kept as keyword arguments of a kernel object
and read back as attributes three calls later, where the check raises. 384 does not divide 512: the
finding belongs on the numbers that were written (the 512, the subject of the message, with the 384
related), not on the ``raise``."""

import dataclasses
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

PALLASITE_ENTRY = "attend"

TUNED_PARAMS = {
    "block_q": 256,
    "block_kv": 512,  # origin
    "block_kv_compute": 384,  # fed the check
}


@dataclasses.dataclass(frozen=True)
class BlockSizes:
    block_q: int
    block_kv: int
    block_kv_compute: int | None = None

    def __post_init__(self):
        if self.block_kv_compute is None:
            object.__setattr__(self, "block_kv_compute", self.block_kv)


def _kernel(q_ref, k_ref, o_ref, *, bkv_compute):
    acc = jnp.zeros(o_ref.shape, jnp.float32)
    for c in range(k_ref.shape[0] // bkv_compute):
        k = k_ref[c * bkv_compute:(c + 1) * bkv_compute, :]
        acc += jnp.dot(q_ref[...], k.T, preferred_element_type=jnp.float32)[:, :o_ref.shape[1]]
    o_ref[...] = acc.astype(o_ref.dtype)


def _forward(q, k, block_sizes):
    bq, bkv = block_sizes.block_q, block_sizes.block_kv
    bkv_compute = block_sizes.block_kv_compute
    if bkv % bkv_compute:
        raise ValueError(f"{bkv=} must be a multiple of {bkv_compute=}.")
    return pl.pallas_call(
        functools.partial(_kernel, bkv_compute=bkv_compute),
        grid=(q.shape[0] // bq,),
        in_specs=[pl.BlockSpec((bq, 128), lambda i: (i, 0)), pl.BlockSpec((bkv, 128), lambda i: (0, 0))],
        out_specs=pl.BlockSpec((bq, 128), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((q.shape[0], 128), q.dtype),
    )(q, k)


class AttentionKernel:
    def __init__(self, **kwargs):
        self.kwargs = kwargs

    def __call__(self, q, k):
        return _forward(q, k, **self.kwargs)


def make_kernel(block_sizes):
    return AttentionKernel(block_sizes=block_sizes)


def attend(q, k):
    sizes = BlockSizes(**TUNED_PARAMS)
    return make_kernel(sizes)(q, k)


def example_inputs():
    return (jax.ShapeDtypeStruct((512, 128), jnp.float32), jax.ShapeDtypeStruct((512, 128), jnp.float32))
