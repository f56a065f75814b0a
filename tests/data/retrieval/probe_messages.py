"""Reproduce the checker's real error messages, for the retrieval test set (queries.json).

Each probe is a small, real Pallas TPU kernel with one mistake. It is lowered for TPU on a CPU
host (tier 1: ``jax.export`` with ``platforms=("tpu",)``) or compiled deviceless with libtpu
(tier 2), and the exception's type and first lines are printed as JSON. Run it with the project's
interpreter when jax or libtpu changes, and refresh queries.json from the output:

    JAX_PLATFORMS=cpu TPU_WORKER_HOSTNAMES=localhost TPU_SKIP_MDS_QUERY=1 \
        python tests/data/retrieval/probe_messages.py > /tmp/messages.json

Not collected by pytest (no test_ prefix); it needs jax (and libtpu for tier 2).
"""

from __future__ import annotations

import json
import sys
import traceback

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

jax.config.update("jax_pallas_verbose_errors", True)


def tier1(fn, *args):
    from jax.sharding import AbstractDevice, AbstractMesh, use_abstract_mesh

    mesh = AbstractMesh((1,), ("x",), abstract_device=AbstractDevice(device_kind="TPU v5 lite", num_cores=1, platform="tpu"))
    with use_abstract_mesh(mesh):
        jax.export.export(jax.jit(fn), platforms=("tpu",))(*args)


_DEV = None


def tier2(fn, *args):
    global _DEV
    from jax.experimental import topologies

    if _DEV is None:
        _DEV = topologies.get_topology_desc(topology_name="v5e:2x2", platform="tpu").devices[0]
    sharding = jax.sharding.SingleDeviceSharding(_DEV)
    args = [jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=sharding) for a in args]
    with jax.default_device(_DEV):
        jax.jit(fn).trace(*args).lower().compile()


def sds(shape, dtype=jnp.float32):
    return jax.ShapeDtypeStruct(shape, dtype)


def copy_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...]


def call(kernel, x, block, index_map, grid, out=None, **kw):
    out = out or jax.ShapeDtypeStruct(x.shape, x.dtype)
    return pl.pallas_call(
        kernel,
        grid=grid,
        in_specs=[pl.BlockSpec(block, index_map)],
        out_specs=pl.BlockSpec(block, index_map),
        out_shape=out,
        **kw,
    )(x)


PROBES = {}


def probe(name, tier):
    def deco(f):
        PROBES[name] = (tier, f)
        return f

    return deco


@probe("block_not_divisible", 1)
def _():
    return lambda x: call(copy_kernel, x, (8, 100), lambda i: (i, 0), (2,)), sds((16, 200))


@probe("index_map_arity", 1)
def _():
    return lambda x: call(copy_kernel, x, (8, 128), lambda i, j: (i, 0), (2,)), sds((16, 128))


@probe("index_map_results", 1)
def _():
    return lambda x: call(copy_kernel, x, (8, 128), lambda i: (i,), (2,)), sds((16, 128))


@probe("index_map_float", 1)
def _():
    return lambda x: call(copy_kernel, x, (8, 128), lambda i: (i / 2, 0), (2,)), sds((16, 128))


def cumsum_kernel(x_ref, o_ref):
    o_ref[...] = jnp.cumsum(x_ref[...], axis=1)


@probe("cumsum", 1)
def _():
    return lambda x: call(cumsum_kernel, x, (8, 128), lambda i: (i, 0), (2,)), sds((16, 128))


def sort_kernel(x_ref, o_ref):
    o_ref[...] = jnp.sort(x_ref[...], axis=1)


@probe("sort", 1)
def _():
    return lambda x: call(sort_kernel, x, (8, 128), lambda i: (i, 0), (2,)), sds((16, 128))


def bad_store_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[:, :64]


@probe("store_shape", 1)
def _():
    return lambda x: call(bad_store_kernel, x, (8, 128), lambda i: (i, 0), (2,)), sds((16, 128))


def bad_dtype_store_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...].astype(jnp.bfloat16)


@probe("store_dtype", 1)
def _():
    return lambda x: call(bad_dtype_store_kernel, x, (8, 128), lambda i: (i, 0), (2,)), sds((16, 128))


@probe("dimension_semantics_length", 1)
def _():
    params = pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary"))
    return (lambda x: call(copy_kernel, x, (8, 128), lambda i: (i, 0), (2,), compiler_params=params)), sds((16, 128))


@probe("in_specs_count", 1)
def _():
    def f(x):
        spec = pl.BlockSpec((8, 128), lambda i: (i, 0))
        return pl.pallas_call(copy_kernel, grid=(2,), in_specs=[spec, spec], out_specs=spec,
                              out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)

    return f, sds((16, 128))


def three_ref_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...]


@probe("kernel_arity", 1)
def _():
    return lambda x: call(three_ref_kernel, x, (8, 128), lambda i: (i, 0), (2,)), sds((16, 128))


def smem_vector_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...]


@probe("smem_vector_load", 1)
def _():
    def f(x):
        return pl.pallas_call(
            smem_vector_kernel,
            in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM)],
            out_specs=pl.BlockSpec(memory_space=pltpu.VMEM),
            out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        )(x)

    return f, sds((8, 128))


def scratch_kernel(x_ref, o_ref, acc_ref):
    acc_ref[0:8, 0:128] = x_ref[...]
    o_ref[...] = acc_ref[0:8, 0:128]


@probe("vmem_oom_scratch", 2)
def _():
    def f(x):
        return pl.pallas_call(
            scratch_kernel,
            grid=(2,),
            in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
            out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
            out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
            scratch_shapes=[pltpu.VMEM((65536, 1024), jnp.float32)],  # 256 MiB
        )(x)

    return f, sds((16, 128))


@probe("vmem_oom_blocks", 2)
def _():
    # a (4096, 4096) f32 block is 64 MiB; double-buffered in and out it is 256 MiB
    return lambda x: call(copy_kernel, x, (4096, 4096), lambda i: (i, 0), (2,)), sds((8192, 4096))


def reshape_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...].reshape(32, 32)


@probe("shape_cast", 2)
def _():
    def f(x):
        return pl.pallas_call(
            reshape_kernel,
            in_specs=[pl.BlockSpec((8, 128), lambda: (0, 0))],
            out_specs=pl.BlockSpec((32, 32), lambda: (0, 0)),
            out_shape=jax.ShapeDtypeStruct((32, 32), x.dtype),
        )(x)

    return f, sds((8, 128))


def lane_offset_kernel(x_ref, o_ref):
    i = pl.program_id(0)
    o_ref[...] = x_ref[:, pl.ds(i * 3, 128)]


@probe("unaligned_lane_offset", 2)
def _():
    def f(x):
        return pl.pallas_call(
            lane_offset_kernel,
            grid=(2,),
            in_specs=[pl.BlockSpec((8, 512), lambda i: (0, 0))],
            out_specs=pl.BlockSpec((8, 128), lambda i: (0, i)),
            out_shape=jax.ShapeDtypeStruct((8, 256), x.dtype),
        )(x)

    return f, sds((8, 512))


@probe("int8_tiling", 2)
def _():
    return lambda x: call(copy_kernel, x, (8, 128), lambda i: (i, 0), (4,)), sds((32, 128), jnp.int8)


def f64_kernel(x_ref, o_ref):
    o_ref[...] = (x_ref[...].astype(jnp.float64) * 2).astype(jnp.float32)


@probe("float64", 1)
def _():
    jax.config.update("jax_enable_x64", True)
    return lambda x: call(f64_kernel, x, (8, 128), lambda i: (i, 0), (2,)), sds((16, 128))


def branchy_kernel(x_ref, o_ref):
    if pl.program_id(0) == 0:  # Python control flow on a traced value
        o_ref[...] = x_ref[...]
    else:
        o_ref[...] = x_ref[...] * 2


@probe("python_if_on_program_id", 1)
def _():
    return lambda x: call(branchy_kernel, x, (8, 128), lambda i: (i, 0), (2,)), sds((16, 128))


def returning_kernel(x_ref, o_ref):
    return x_ref[...] + 1


@probe("kernel_returns_value", 1)
def _():
    return lambda x: call(returning_kernel, x, (8, 128), lambda i: (i, 0), (2,)), sds((16, 128))


@probe("out_specs_count", 1)
def _():
    def f(x):
        spec = pl.BlockSpec((8, 128), lambda i: (i, 0))
        return pl.pallas_call(copy_kernel, grid=(2,), in_specs=[spec], out_specs=[spec, spec],
                              out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)

    return f, sds((16, 128))


def oob_kernel(x_ref, o_ref):
    i = pl.program_id(0)
    o_ref[...] = x_ref[pl.ds(i * 8 + 8, 8), :]


def run_interpret(fn, *args):
    import numpy as np

    arrays = [np.ones(a.shape, a.dtype) for a in args]
    jax.block_until_ready(fn(*arrays))


@probe("interpret_oob_read", 3)
def _():
    def f(x):
        return pl.pallas_call(
            oob_kernel,
            grid=(2,),
            in_specs=[pl.BlockSpec(memory_space=pltpu.VMEM)],
            out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
            out_shape=jax.ShapeDtypeStruct((16, 128), x.dtype),
            interpret=pltpu.InterpretParams(out_of_bounds_reads="raise"),
        )(x)

    return f, sds((16, 128))


@probe("block_rank", 1)
def _():
    return lambda x: call(copy_kernel, x, (8, 128), lambda i: (i, 0), (2,)), sds((2, 16, 128))


@probe("grid_not_int", 1)
def _():
    return lambda x: call(copy_kernel, x, (8, 128), lambda i: (i, 0), (x.shape[0] / 8,)), sds((16, 128))


@probe("missing_api", 1)
def _():
    def f(x):
        params = pltpu.TPUCompilerParams(dimension_semantics=("parallel",))
        return call(copy_kernel, x, (8, 128), lambda i: (i, 0), (2,), compiler_params=params)

    return f, sds((16, 128))


def main(names):
    out = {}
    for name, (tier, make) in PROBES.items():
        if names and name not in names:
            continue
        jax.config.update("jax_enable_x64", False)
        fn, *args = make()
        try:
            {1: tier1, 2: tier2, 3: run_interpret}[tier](fn, *args)
            out[name] = {"tier": tier, "error": None}
        except Exception as e:  # noqa: BLE001 - we report whatever the compiler raised
            text = str(e)
            out[name] = {"tier": tier, "type": type(e).__name__, "message": text[:3000],
                         "cause": repr(e.__cause__)[:1500] if e.__cause__ else None}
        print(name, "done", file=sys.stderr, flush=True)
    json.dump(out, sys.stdout, indent=1)


if __name__ == "__main__":
    main(sys.argv[1:])
