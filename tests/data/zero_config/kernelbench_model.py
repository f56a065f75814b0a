"""A KernelBench-style task file (as JAXBench's generated Pallas files are written): a Model whose
forward runs the kernel, get_inputs() and get_init_inputs(); no pallasite convention."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def scale_bias_kernel(x_ref, w_ref, o_ref):
    o_ref[...] = x_ref[...] * w_ref[...]


class Model:
    def __init__(self, features: int):
        self.weight = jnp.full((1, features), 0.5, jnp.float32)

    def forward(self, x):
        rows, cols = x.shape
        return pl.pallas_call(
            scale_bias_kernel,
            grid=(rows // 256,),
            in_specs=[pl.BlockSpec((256, cols), lambda i: (i, 0)), pl.BlockSpec((1, cols), lambda i: (0, 0))],
            out_specs=pl.BlockSpec((256, cols), lambda i: (i, 0)),
            out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        )(x, self.weight)


FEATURES = 512


def get_inputs():
    return [jax.random.normal(jax.random.PRNGKey(0), (4096, FEATURES))]


def get_init_inputs():
    return [FEATURES]
