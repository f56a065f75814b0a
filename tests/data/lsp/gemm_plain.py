"""LSP fixture: a plain GEMM as a newcomer writes it, with no example_inputs(): chained block-size
constants, an out_shape that names float32, a grid that depends on the inputs' shapes, and a
__main__ call that gives the check its shapes (float32[256,128] @ float32[128,256]). Nothing is wrong."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

BM = BN = BK = 128


def gemm_kernel(x_ref, y_ref, o_ref):
    @pl.when(pl.program_id(2) == 0)
    def _init():
        o_ref[...] = jnp.zeros_like(o_ref)

    o_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)


def gemm(x, y):
    m, k = x.shape
    _, n = y.shape
    return pl.pallas_call(
        gemm_kernel,
        grid=(m // BM, n // BN, k // BK),
        in_specs=[
            pl.BlockSpec((BM, BK), lambda i, j, kk: (i, kk)),
            pl.BlockSpec((BK, BN), lambda i, j, kk: (kk, j)),
        ],
        out_specs=pl.BlockSpec((BM, BN), lambda i, j, kk: (i, j)),
        out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
    )(x, y)


if __name__ == "__main__":
    x = jnp.ones((256, 128), jnp.float32)
    print(gemm(x, jnp.ones((128, 256), jnp.float32)).shape)
