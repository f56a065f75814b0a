"""A task whose example inputs are built with numpy from a jax array (a sort order as a table), as
tpu-inference's ``Sparsifier`` builds its metadata: ``jax.eval_shape`` cannot trace that, so the
shapes are taken from one concrete call."""

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl


def _kernel(x_ref, order_ref, o_ref):
    o_ref[...] = x_ref[...] + order_ref[...].astype(jnp.float32)


def add_order(x, order):
    return pl.pallas_call(_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x, order)


def example_inputs():
    x = jax.random.normal(jax.random.key(0), (8, 128), jnp.float32)
    order = np.argsort(np.asarray(x), axis=1).astype(np.int32)
    return x, jnp.asarray(order)


def reference(x, order):
    return x + order.astype(jnp.float32)
