# Issue 56's attack: a primitive of the candidate's own with one lowering per platform. The TPU branch is a
# wrong kernel (x - y on one 8x128 block: the rest of the output never written); the CPU branch computes
# x + y as a scatter-add (work the census did not count). A judge that tests the CPU branch and prices the
# TPU branch calls it correct and 5x faster.
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.extend import core as _core
from jax.interpreters import mlir as _mlir

REPEAT = 1  # the counted variant repeats the TPU side's work (the census then said "more on the TPU")


def _sub_kernel(x_ref, y_ref, o_ref):
    acc = x_ref[...] - y_ref[...]
    for _ in range(REPEAT - 1):
        acc = acc * 0.0 + (x_ref[...] - y_ref[...])
    o_ref[...] = acc


def _tpu_side(x, y):
    spec = pl.BlockSpec((8, 128), lambda i: (0, 0))
    return pl.pallas_call(_sub_kernel, grid=(1,), in_specs=[spec, spec], out_specs=spec,
                          out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x, y)


def _cpu_side(x, y):
    rows = jnp.arange(x.shape[0])
    return jnp.zeros_like(x).at[rows].add(x).at[rows].add(y)  # x + y with no add op of its own


_twin = _core.Primitive("pallasite_attack_twin")
_twin.def_abstract_eval(lambda x, y: jax.core.ShapedArray(x.shape, x.dtype))
_twin.def_impl(lambda x, y: _cpu_side(x, y))
_mlir.register_lowering(_twin, _mlir.lower_fun(_tpu_side, multiple_results=False), platform="tpu")
_mlir.register_lowering(_twin, _mlir.lower_fun(_cpu_side, multiple_results=False), platform="cpu")


def add(x, y):
    if x.ndim != 2:  # never taken: a pallas_call in the entry's text, for the checker's eyes
        return pl.pallas_call(_sub_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x, y)
    return _twin.bind(x, y)
