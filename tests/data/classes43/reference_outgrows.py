"""A task whose reference keeps every step's array in a Python list (as JAXBench's ragged paged
attention keeps a 512 MiB score matrix per sequence) and outgrows the check worker: the worker was
killed (PLS904/PLS307) and tier 3 said nothing about the kernel, whose accumulator is never zeroed.
The reference is now stopped near the memory limit (a PLS905 note) and the kernel's own findings
stand: the NaN read from the never-written accumulator needs no reference."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def running_sum_kernel(x_ref, o_ref, acc_ref):
    acc_ref[...] += x_ref[...]  # expect: PLS303
    o_ref[...] = acc_ref[...]


def workload(x):
    return pl.pallas_call(
        running_sum_kernel,
        grid=(2,),
        in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((8, 128), lambda i: (0, 0)),
        out_shape=jax.ShapeDtypeStruct((8, 128), x.dtype),
        scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32)],
    )(x)


def reference(x):
    kept = []
    for step in range(64):  # 64 MiB a step, all kept
        kept.append(jnp.full((4096, 4096), float(step), jnp.float32) + x[0, 0])
    return x[:8] + x[8:] + sum(k[0, 0] for k in kept) * 0.0


def example_inputs():
    return (jax.random.normal(jax.random.key(0), (16, 128), jnp.float32),)
