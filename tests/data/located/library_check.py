"""A kernel library in the same file checks its block sizes before building the pallas_call; the
tuned value is set in a TUNED_PARAMS dict and reaches the check through a config object kept on
an instance. The check rejects it: the finding belongs at the dict entry, not at the raise."""

import dataclasses

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

LANES = 128
TUNED_PARAMS = {"block_rows": 64, "block_cols": 200}  # expect: PLS100


@dataclasses.dataclass(frozen=True)
class Tiles:
    rows: int
    cols: int


def _validate(tiles: Tiles) -> None:
    if tiles.cols % LANES:
        raise ValueError(f"block_cols={tiles.cols} must be a multiple of {LANES}")


class Scaler:
    def __init__(self, **options):
        self.options = options

    def __call__(self, x):
        return _scale(x, **self.options)


def scale_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 3.0


def _scale(x, tiles):
    _validate(tiles)
    spec = pl.BlockSpec((tiles.rows, tiles.cols), lambda i, j: (i, j))
    return pl.pallas_call(
        scale_kernel,
        grid=(x.shape[0] // tiles.rows, x.shape[1] // tiles.cols),
        in_specs=[spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)


def workload(x):
    tiles = Tiles(rows=TUNED_PARAMS["block_rows"], cols=TUNED_PARAMS["block_cols"])
    return Scaler(tiles=tiles)(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((128, 400), jnp.float32),)


PALLASITE_ENTRY = "workload"
