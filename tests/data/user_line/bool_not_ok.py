"""From jax-ml/jax#24243 ("[Pallas TPU] Error when negating a boolean value"): logical_not on a
boolean block failed in the TPU pipeline of jax 0.4.35; the issue is fixed, and with the installed
jax/libtpu this kernel lowers and compiles. Expected: no error (a false error here would be ours)."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def not_kernel(x_ref, o_ref):
    o_ref[...] = jnp.logical_not(x_ref[...])


def logical_not(x):
    return pl.pallas_call(not_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, jnp.bool_))(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((8, 128), jnp.bool_),)
