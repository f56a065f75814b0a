"""Plain-JAX matmuls around a Pallas kernel, as JAXBench's MLA attention does (low-rank projections
in XLA, the attention in a pallas_call, an f32 x bf16 output projection): jax lowers every
``dot_general`` once per platform, so each matmul sits in a platform case, and the mixed one's CPU
branch upcasts its bf16 operand first. Not a branch on the platform: the judge must accept it.

``narrowed`` is the attack the rule must still refuse: the TPU branch casts to bf16 before the same
matmul the CPU branch does in f32 (``lax.platform_dependent``), so the judge would test a more
precise program than the TPU runs."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def matmul_kernel(x_ref, w_ref, o_ref):
    o_ref[...] = jnp.dot(x_ref[...], w_ref[...], preferred_element_type=jnp.float32).astype(o_ref.dtype)


def pallas_matmul(x, w):
    return pl.pallas_call(matmul_kernel, grid=(x.shape[0] // 128,),
                          in_specs=[pl.BlockSpec((128, x.shape[1]), lambda i: (i, 0)),
                                    pl.BlockSpec(w.shape, lambda i: (0, 0))],
                          out_specs=pl.BlockSpec((128, w.shape[1]), lambda i: (i, 0)),
                          out_shape=jax.ShapeDtypeStruct((x.shape[0], w.shape[1]), x.dtype))(x, w)


def projected(x, down, w, out):
    h = jnp.dot(x, down)  # bf16 x bf16: the same op on both platforms
    y = pallas_matmul(h, w).astype(jnp.float32)
    return jnp.dot(y, out)  # f32 x bf16: the CPU upcasts ``out`` to f32 first


def narrowed(x, down, w, out):
    y = pallas_matmul(jnp.dot(x, down), w).astype(jnp.float32)

    def tpu(a, b):
        return jnp.dot(a.astype(jnp.bfloat16), b, preferred_element_type=jnp.float32)

    return jax.lax.platform_dependent(y, out.astype(jnp.float32), tpu=tpu,
                                      default=lambda a, b: jnp.dot(a, b, preferred_element_type=jnp.float32))


def example_inputs():
    bf16 = jnp.bfloat16
    return (jax.ShapeDtypeStruct((256, 256), bf16), jax.ShapeDtypeStruct((256, 128), bf16),
            jax.ShapeDtypeStruct((128, 128), bf16), jax.ShapeDtypeStruct((128, 256), bf16))
