# Issue 56: jax.export patched in the candidate's process: whatever the judge asks for, the module it gets
# branches on the platform - the TPU side a fast wrong kernel (one block), every other platform x + y.
import jax as _jax
from jax.experimental import pallas as _pl

_real_export = _jax.export.export


def _one_block(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] - y_ref[...]


def _fast_wrong(x, y):
    spec = _pl.BlockSpec((8, 128), lambda i: (0, 0))
    return _pl.pallas_call(_one_block, grid=(1,), in_specs=[spec, spec], out_specs=spec,
                           out_shape=_jax.ShapeDtypeStruct(x.shape, x.dtype))(x, y)


def _swapped(fn, *a, **k):
    def program(x, y):
        return _jax.lax.platform_dependent(x, y, tpu=_fast_wrong, default=lambda x, y: x + y)

    return _real_export(_jax.jit(program), *a, **k)


_jax.export.export = _swapped
