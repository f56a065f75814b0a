"""The cost model against hand counts on kernels whose bytes and FLOPs can be counted
(tests/data/tune/: tiled matmul with and without re-fetch, element-wise, reduction, scalar
prefetch), its roofline against the formula worked by hand, and the worker's estimate op."""

from __future__ import annotations

import dataclasses
import functools
import os

import pytest

for _name, _value in {"JAX_PLATFORMS": "cpu", "TPU_WORKER_HOSTNAMES": "localhost", "TPU_SKIP_MDS_QUERY": "1",
                      "ALLOW_MULTIPLE_LIBTPU_LOAD": "1"}.items():
    os.environ.setdefault(_name, _value)  # before libtpu loads in this process

from pallasite.analysis.types import chip_target  # noqa: E402
from pallasite.runner import cost_model  # noqa: E402
from pallasite.runner.chip_probe import spec_from_jax  # noqa: E402
from pallasite.runner.loader import user_module  # noqa: E402
from pallasite.engine.sources import sources_for  # noqa: E402
from pallasite.wire.messages import EstimateParams  # noqa: E402
from pallasite.runner.tune_ops import handle_estimate as _handle_estimate  # noqa: E402

DATA = os.path.join(os.path.dirname(__file__), "data", "tune")
V5E = spec_from_jax(chip_target("v5e"))


def handle_estimate(params: dict):
    """The op with its typed params, its result as JSON (what the client receives)."""
    from pallasite.analysis.types import to_json

    params = dict(params)
    source = sources_for(params.pop("path"))
    configs = tuple(params.pop("configs", ()))
    return to_json(_handle_estimate(EstimateParams(source=source, configs=configs, **params)))


def _estimate(name: str, entry: str, **config):
    path = os.path.join(DATA, f"{name}.py")
    with user_module(path) as module:
        fn = getattr(module, entry)
        return cost_model.estimate(functools.partial(fn, **config), module.example_inputs(), V5E)


def _blocks(call):
    return [(b.origin, b.fetches, b.hbm_bytes) for b in call.blocks]


def test_tiled_matmul_refetches_both_operands_every_step():
    est = _estimate("matmul", "matmul")  # bm=256, bn=256, bk=512 on (1024, 2048) @ (2048, 1024) bf16
    assert est.status == "ok" and est.label == "estimate (v5e)"
    (call,) = est.calls
    assert call.grid == (4, 4, 4) and call.steps == 64
    # x's index (i, k) and y's (k, j) change at every step; the output (i, j) once per (i, j)
    assert _blocks(call) == [("args[0]", 64, 64 * 256 * 512 * 2), ("args[1]", 64, 64 * 512 * 256 * 2),
                             ("outputs", 16, 16 * 256 * 256 * 2)]
    assert call.hbm_bytes == 35_651_584
    assert call.mxu_flops == 64 * 2 * 256 * 256 * 512
    assert call.flops == 64 * (2 * 256 * 256 * 512 + 256 * 256)  # + the accumulate's add
    assert call.transcendentals == 0
    assert call.vmem_bytes == 2 * 256 * 512 * 2 + 2 * 512 * 256 * 2 + 2 * 256 * 256 * 2 + 256 * 256 * 4
    assert call.scratch_bytes == 256 * 256 * 4
    assert call.mxu_efficiency == 1.0
    assert call.dimension_semantics == ("parallel", "parallel", "arbitrary")


def test_tiled_matmul_without_refetch_when_k_is_one_block():
    est = _estimate("matmul", "matmul", bk=2048)  # grid (4, 4, 1): x's block (i, 0) stays while j runs
    (call,) = est.calls
    assert call.grid == (4, 4, 1)
    assert _blocks(call) == [("args[0]", 4, 4 * 256 * 2048 * 2), ("args[1]", 16, 16 * 2048 * 256 * 2),
                             ("outputs", 16, 16 * 256 * 256 * 2)]
    assert call.hbm_bytes == 23_068_672


def test_mxu_efficiency_of_a_partly_filled_mxu():
    est = _estimate("matmul", "matmul", bm=128, bn=64, bk=256)  # 64 output columns fill half a 128 MXU
    (call,) = est.calls
    assert call.mxu_efficiency == 0.5


def test_elementwise_counts_and_the_roofline_by_hand():
    est = _estimate("elementwise", "fused")  # block_rows=64, BLOCK_COLS=1024 on (512, 2048) f32
    (call,) = est.calls
    assert call.grid == (8, 2)
    assert _blocks(call) == [(o, 16, 16 * 64 * 1024 * 4) for o in ("args[0]", "args[1]", "outputs")]
    assert call.flops == 16 * 2 * 64 * 1024 and call.mxu_flops == 0  # a mul and an add per element
    assert call.transcendentals == 16 * 64 * 1024  # exp
    # the roofline, worked by hand from v5e's table
    clock = V5E.bf16_flops / (2 * V5E.num_mxus * V5E.mxu_size ** 2)
    vector = (call.flops + call.transcendentals) / (clock * V5E.lanes * V5E.sublanes)
    memory = call.hbm_bytes / V5E.hbm_bytes_per_s
    overhead = 16 * 0.35e-6
    # model v2: the first step's two input blocks and the last output block are not hidden
    bubble = 3 * 64 * 1024 * 4 / V5E.hbm_bytes_per_s
    assert est.model == "pallasite roofline v2" and est.xla_bytes == 0  # nothing outside the kernel
    assert est.compute_s == pytest.approx(vector, rel=1e-12)
    assert est.memory_s == pytest.approx(memory, rel=1e-12)
    assert est.seconds == pytest.approx(bubble + max(memory - bubble, vector + overhead) + 2e-6, rel=1e-12)
    assert est.bound == "memory"


def test_reduction_writes_its_accumulated_output_once_per_row_block():
    est = _estimate("reduction", "rowsum")  # TUNED_PARAMS block_rows=64, block_cols=512 on (256, 4096) f32
    (call,) = est.calls
    assert call.grid == (4, 8)
    assert _blocks(call) == [("args[0]", 32, 32 * 64 * 512 * 4), ("outputs", 4, 4 * 64 * 128 * 4)]
    assert call.flops == 32 * (64 * 512 + 64 * 128)  # reduce_sum over its inputs + the accumulate
    # the pl.when branch only zeroes the block: no work depends on it, so the count is exact, not bounded
    assert call.flops_count == "exact" and not any("pl.when" in n for n in call.notes)


def test_scalar_prefetch_index_map_sees_the_real_ids():
    # ids = [3, 3, 1, 1, 1, 0, 3, 3]: x's block index changes 4 times -> 4 fetches
    result = handle_estimate({"path": os.path.join(DATA, "prefetch.py"), "chip": "v5e", "probe": False})
    (est,) = result["estimates"]
    (call,) = est["calls"]
    block = 16 * 256 * 4
    assert [(b["origin"], b["fetches"], b["hbm_bytes"]) for b in call["blocks"]] == [
        ("args[1]", 4, 4 * block), ("outputs", 8, 8 * block)]
    assert call["hbm_bytes"] == 12 * block + 8 * 4  # + the ids themselves, once, into SMEM
    assert call["flops"] == 8 * 16 * 256
    assert not call["notes"]  # the values were known: nothing assumed


def test_estimate_op_applies_each_kind_of_tunable():
    result = handle_estimate({"path": os.path.join(DATA, "reduction.py"), "chip": "v5e", "probe": False,
                              "configs": [{"block_rows": 64, "block_cols": 512}, {"block_rows": 128, "block_cols": 1024}],
                              "kinds": {"block_rows": "tuned_params", "block_cols": "tuned_params"}})
    grids = [e["calls"][0]["grid"] for e in result["estimates"]]
    assert grids == [[4, 8], [2, 4]]
    consts = handle_estimate({"path": os.path.join(DATA, "elementwise.py"), "chip": "v5e", "probe": False,
                              "configs": [{"block_rows": 32, "BLOCK_COLS": 512}],
                              "kinds": {"block_rows": "keyword", "BLOCK_COLS": "constant"}})
    assert consts["estimates"][0]["calls"][0]["grid"] == [16, 4]
    assert result["reference"] is None or "flops" in result["reference"] or "error" in result["reference"]


def test_a_config_that_does_not_trace_is_data():
    est = _estimate("matmul", "matmul", bm=0)
    assert est.status == "trace_error" and "ZeroDivisionError" in est.error


def test_same_program_same_hash_different_blocks_different_hash():
    a, b, c = _estimate("matmul", "matmul"), _estimate("matmul", "matmul"), _estimate("matmul", "matmul", bk=1024)
    assert a.program_hash == b.program_hash != c.program_hash


def test_megacore_splits_parallel_work_over_two_cores():
    v5p = spec_from_jax(chip_target("v5p"))
    one = dataclasses.replace(v5p, device_cores=1)
    path = os.path.join(DATA, "matmul.py")
    with user_module(path) as module:
        two_cores = cost_model.estimate(module.matmul, module.example_inputs(), v5p)
        one_core = cost_model.estimate(module.matmul, module.example_inputs(), one)
    # the work halves; the launch and the pipeline's first and last copies (each core has its own) do not
    assert two_cores.compute_s == pytest.approx(one_core.compute_s / 2, rel=1e-12)
    assert two_cores.memory_s == pytest.approx(one_core.memory_s / 2, rel=1e-12)
    assert one_core.seconds / 2 < two_cores.seconds < one_core.seconds * 0.6


@pytest.mark.tpu_compiler
def test_reference_cost_is_xlas_own_for_the_chip():
    pytest.importorskip("libtpu")
    result = handle_estimate({"path": os.path.join(DATA, "matmul.py"), "chip": "v5e", "probe": False,
                              "reference": True})
    ref = result["reference"]
    # the same model as the kernel, with the bytes XLA's own compile for v5e moves; XLA's figures beside
    assert ref["model"] == cost_model.MODEL and "compiled for v5e" in ref["bytes_source"]
    assert ref["bytes_accessed"] == ref["xla"]["bytes_accessed"] and "compiled for v5e" in ref["xla"]["source"]
    assert ref["flops"] == 2 * 1024 * 2048 * 1024 and ref["optimal_seconds"] > 0
    assert ref["seconds"] >= 2 * 1024 * 2048 * 1024 / V5E.bf16_flops


def test_vmem_and_scoped_limit_reach_feasibility_through_the_op():
    from pallasite.analysis.feasibility import rejections
    from pallasite.analysis.types import CostEstimate, from_json

    result = handle_estimate({"path": os.path.join(DATA, "matmul.py"), "chip": "v5e", "probe": False,
                              "configs": [{"bm": 1024, "bn": 1024, "bk": 2048}], "kinds": {}})
    est = from_json(CostEstimate, result["estimates"][0])
    (call,) = est.calls
    # x and y blocks double-buffered, the output block double-buffered, the f32 accumulator
    assert call.vmem_bytes == 2 * (1024 * 2048 * 2) * 2 + 2 * 1024 * 1024 * 2 + 1024 * 1024 * 4 == 24 << 20
    (r,) = rejections(est, 16 << 20)
    assert r.reason == "vmem" and "24.00 MiB" in r.message


def test_edge_blocks_count_only_the_bytes_inside_the_array():
    import numpy as np

    table = np.array([[0, 0], [1, 0], [2, 0]])  # three row blocks of 8 over 20 rows: 8 + 8 + 4
    assert cost_model._moves(table, [8, 128], (20, 128), 32) == (3, (8 + 8 + 4) * 128 * 4)
    assert cost_model._moves(table, [8, 128], (20, 128), 4) == (3, (8 + 8 + 4) * 128 // 2)  # int4: packed
    elem = np.array([[0, 0], [5, 0], [5, 0]])  # pl.Element rows: offsets, not block indices
    assert cost_model._moves(elem, [8, 128], (20, 128), 32, (True, False)) == (2, (8 + 8) * 128 * 4)
