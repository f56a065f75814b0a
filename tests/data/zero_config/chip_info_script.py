"""A script that sizes its blocks from the chip it runs on (pltpu.get_tpu_info()), as tuned
kernels do. On a CPU it would fail with "Unsupported TPU device kind: cpu"; in script mode it runs
as on the target chip."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def relu_kernel(x_ref, o_ref):
    o_ref[...] = jnp.maximum(x_ref[...], 0.0)


def relu(x):
    info = pltpu.get_tpu_info()
    block_rows = 512 if info.vmem_capacity_bytes >= 64 * 2**20 else 256
    return pl.pallas_call(
        relu_kernel,
        grid=(x.shape[0] // block_rows,),
        in_specs=[pl.BlockSpec((block_rows, x.shape[1]), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((block_rows, x.shape[1]), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)


if __name__ == "__main__":
    x = jax.random.normal(jax.random.key(0), (2048, 256), jnp.float32)
    print(relu(x).max())
