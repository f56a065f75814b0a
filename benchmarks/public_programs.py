"""The programs behind the published TPU times of benchmarks/data/public_tpu_timings.json.

Each is written here from its source's description (the same grid, block specs, branches and shapes),
not copied: jax's Pallas matmul guide (bench_matmul_guide.py's kernels), its block-sparse guide (the
block-sparse @ dense kernel and the dense @ dense kernel with a block-sparse output mask), JAXBench's
README (XLA's GEMM and the checkout's own 8p_GEMM kernel), and jax's SparseCore guide (the TensorCore
gather and add, and its two SparseCore kernels). ``program(point, jaxbench)`` returns
(callable, arguments) for one point; the SparseCore ones are made for a 7x chip (``target_chip``).
"""

from __future__ import annotations

import importlib.util
import os
from typing import Any


def masked_matmul(size: int = 16384, blk: int = 512, blk_k: int = 1024) -> tuple[Any, list[Any]]:
    """Dense @ dense with a lower-triangular block-sparse output mask (the sparse guide's second
    example): a (M/bm, N/bn, K/bk) grid, four scalar-prefetched maps (the block mask, the mask block to
    use, the next non-skipped i and j), a pl.when that skips masked-out output blocks, and index maps
    that stop moving their blocks where the step is skipped."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    nb = size // blk
    block_mask = np.tril(np.ones((nb, nb), np.int32))
    # the next non-zero block at or after (i, j) in row-major order, as the guide's sparsify_mask builds it
    prefetch_i, prefetch_j = np.zeros((nb, nb), np.int32), np.zeros((nb, nb), np.int32)
    prefetch_mask = np.zeros((nb, nb), np.int32)
    next_i, next_j, next_type = nb - 1, nb - 1, 0
    for i in range(nb - 1, -1, -1):
        for j in range(nb - 1, -1, -1):
            if block_mask[i, j]:
                next_i, next_j, next_type = i, j, 1 if i == j else 0
            prefetch_i[i, j], prefetch_j[i, j], prefetch_mask[i, j] = next_i, next_j, next_type

    def body(mask_ref, _types, _pi, _pj, x_ref, y_ref, m_ref, o_ref, acc_ref):
        i, j, k = pl.program_id(0), pl.program_id(1), pl.program_id(2)

        @pl.when(k == 0)
        def _init():
            o_ref[...] = jnp.zeros_like(o_ref)
            acc_ref[...] = jnp.zeros_like(acc_ref)

        @pl.when(mask_ref[i, j] != 0)
        def _compute():
            acc_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

            @pl.when(k == pl.num_programs(2) - 1)
            def _store():
                o_ref[...] = (m_ref[0, ...] * acc_ref[...]).astype(o_ref.dtype)

    def x_map(i, j, k, bm, pm, pi, pj):
        return pi[i, j], (bm[i, j] != 0) * k

    def y_map(i, j, k, bm, pm, pi, pj):
        return (bm[i, j] != 0) * k, pj[i, j]

    spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=4, grid=(nb, nb, size // blk_k),
        in_specs=[pl.BlockSpec((blk, blk_k), x_map), pl.BlockSpec((blk_k, blk), y_map),
                  pl.BlockSpec((1, blk, blk), lambda i, j, k, bm, pm, *_: (pm[i, j], 0, 0))],
        out_specs=pl.BlockSpec((blk, blk), lambda i, j, k, *_: (i, j)),
        scratch_shapes=[pltpu.VMEM((blk, blk), jnp.float32)])
    call = pl.pallas_call(body, grid_spec=spec, out_shape=jax.ShapeDtypeStruct((size, size), jnp.bfloat16))
    args = [block_mask, prefetch_mask, prefetch_i, prefetch_j,
            jax.ShapeDtypeStruct((size, size), jnp.bfloat16), jax.ShapeDtypeStruct((size, size), jnp.bfloat16),
            jax.ShapeDtypeStruct((2, blk, blk), jnp.int32)]
    return call, args


def sc_add_one(rows: int, cols: int) -> tuple[Any, list[Any]]:
    """x + 1 on the SparseCore vector subcores: pl.kernel over a VectorSubcoreMesh, emit_pipeline over
    (8, 128) blocks split across cores and subcores."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu
    from jax.experimental.pallas import tpu_sc as plsc

    mesh = plsc.VectorSubcoreMesh(core_axis_name="core", subcore_axis_name="subcore")
    x = jax.ShapeDtypeStruct((rows, cols), jnp.int32)

    def fn(x):
        @pl.kernel(out_type=jax.ShapeDtypeStruct(x.shape, x.dtype), mesh=mesh)
        def kernel(x_hbm, o_hbm):
            def step(i_vmem, o_vmem):
                o_vmem[...] = i_vmem[...] + 1

            pltpu.emit_pipeline(step, grid=(rows // 8, cols // 128),
                                in_specs=[pl.BlockSpec((8, 128), lambda i, j: (i, j))],
                                out_specs=[pl.BlockSpec((8, 128), lambda i, j: (i, j))],
                                core_axis_name=("core", "subcore"),
                                dimension_semantics=(pltpu.PARALLEL, pltpu.PARALLEL))(x_hbm, o_hbm)
        return kernel(x)

    return fn, [x]


def sc_gather(rows: int, cols: int, indices: int, window: int = 128) -> tuple[Any, list[Any]]:
    """A pipelined indexed-DMA gather on the SparseCore vector subcores (the guide's gather kernel's shape)."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu
    from jax.experimental.pallas import tpu_sc as plsc

    mesh = plsc.VectorSubcoreMesh(core_axis_name="core", subcore_axis_name="subcore")

    def fn(x, idx):
        idx = idx.reshape((1, indices))

        @pl.kernel(out_type=jax.ShapeDtypeStruct((indices, cols), x.dtype), mesh=mesh)
        def kernel(x_hbm, i_hbm, o_hbm):
            def step(i_vmem, o_vmem):
                pltpu.sync_copy(x_hbm.at[i_vmem.at[0]], o_vmem)

            pltpu.emit_pipeline(step, grid=(indices // window,),
                                in_specs=[pl.BlockSpec((1, window), lambda i: (0, i))],
                                out_specs=[pl.BlockSpec((window, cols), lambda i: (i, 0))],
                                core_axis_name="subcore", dimension_semantics=(pltpu.PARALLEL,))(i_hbm, o_hbm)
        return kernel(x, idx)

    return fn, [jax.ShapeDtypeStruct((rows, cols), jnp.int32), jax.ShapeDtypeStruct((indices,), jnp.int32)]


def _jaxbench_kernel(task: str, jaxbench: str | None) -> tuple[Any, list[Any]]:
    import jax

    if not jaxbench:
        raise FileNotFoundError(f"{task}: give --jaxbench (a JAXBench benchmark folder) to count this point")
    path = os.path.join(jaxbench, task, "optimized.py")
    spec = importlib.util.spec_from_file_location(f"jaxbench_{task}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    made = jax.eval_shape(module.create_inputs)
    return module.workload, list(made if isinstance(made, (tuple, list)) else (made,))


def program(point: dict, jaxbench: str | None = None) -> tuple[Any, list[Any]]:
    """(callable, arguments) for one published point (see the module docstring)."""
    import jax
    import jax.numpy as jnp

    import bench_matmul_guide as guide

    kind, a = point["program"], point.get("args") or {}
    bf16 = jnp.bfloat16
    if kind == "matmul_guide":
        sq = [jax.ShapeDtypeStruct((a["size"], a["size"]), bf16)] * 2
        fn = jnp.matmul if a["variant"] == "xla" else guide.program(a["variant"], tuple(a["blocks"]))
        return fn, sq
    if kind == "dense_matmul":
        return (lambda x, y: x @ y), [jax.ShapeDtypeStruct((a["size"], a["size"]), bf16)] * 2
    if kind == "sparse_dsd":
        call, kargs, *_ = guide.sparse_points()
        return call, kargs
    if kind == "masked_matmul":
        return masked_matmul()
    if kind == "masked_reference":
        size = 16384
        return ((lambda mask, x, y: mask * (x @ y)),
                [jax.ShapeDtypeStruct((size, size), jnp.int32)] + [jax.ShapeDtypeStruct((size, size), bf16)] * 2)
    if kind == "jaxbench_gemm_reference":
        return jnp.dot, [jax.ShapeDtypeStruct((a["m"], a["k"]), bf16), jax.ShapeDtypeStruct((a["k"], a["n"]), bf16)]
    if kind == "jaxbench_task_kernel":
        return _jaxbench_kernel(a["task"], jaxbench)
    if kind == "take_rows":
        return ((lambda x, i: jnp.take(x, i, axis=0)),
                [jax.ShapeDtypeStruct((a["rows"], a["cols"]), jnp.int32), jax.ShapeDtypeStruct((a["indices"],), jnp.int32)])
    if kind == "add_one":
        return (lambda x: x + 1), [jax.ShapeDtypeStruct((a["rows"], a["cols"]), jnp.int32)]
    if kind == "sc_add_one":
        return sc_add_one(a["rows"], a["cols"])
    if kind == "sc_gather":
        return sc_gather(a["rows"], a["cols"], a["indices"])
    raise ValueError(f"unknown program {kind!r} in the data file")
