"""The compiled module's reader (runner/program/compiled_ops.py) and how runner/program/cost_model.price_hlo prices
its op classes: a gather reads the rows it picks, not its whole operand (a paged KV cache is read page
by page); an in-place dynamic-update-slice writes its update; an op XLA ran no cost model for is priced
by its own vector work; a gather is held to its row rate."""

from __future__ import annotations

import dataclasses

import pytest

from pallasite.analysis.types import ChipSpec
from pallasite.runner.program import cost_model
from pallasite.runner.program.compiled_ops import hlo_ops

V6E = ChipSpec(name="v6e", device_kind="TPU v6 lite", topology="v6e:2x2", generation=6, cores_per_chip=1,
               device_cores=1, megacore=False, bf16_flops=920e12, int8_ops=1840e12, fp8_ops=920e12,
               hbm_bytes=34_400_000_000, hbm_bytes_per_s=1.64e12, vmem_bytes=128 << 20, smem_bytes=1 << 20,
               mxu_size=256, num_mxus=2, lanes=128, sublanes=8)

# A module as XLA's TPU passes leave it (the shape of what compiled.as_text() prints for a paged-attention
# reference): a fused gather of 2048 pages of a 1 GiB cache, an output updated in place, a broadcast XLA gave
# only a fallback estimate for, and a matmul fusion with its classic estimate.
MODULE = """HloModule jit_workload, entry_computation_layout={(bf16[16384,16,16,128]{3,2,1,0})->bf16[4096,64,128]{2,1,0}}

%fused_gather (param_0.8: bf16[16384,16,16,128], param_1.17: s32[2048]) -> bf16[2048,16,128] {
  %param_0.8 = bf16[16384,16,16,128]{3,2,1,0:T(8,128)(2,1)} parameter(0)
  %param_1.17 = s32[2048]{0:T(1024)} parameter(1)
  %reshape.1 = s32[2048,1]{1,0:T(8,128)} reshape(%param_1.17)
  ROOT %gather.0 = bf16[2048,16,128]{2,1,0:T(8,128)(2,1)} gather(%param_0.8, %reshape.1), offset_dims={1,2}, collapsed_slice_dims={0,2}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,16,1,128}
}

%fused_update (param_0.1: bf16[4096,64,128], param_1.1: bf16[512,64,128], param_2.1: s32[]) -> bf16[4096,64,128] {
  %param_0.1 = bf16[4096,64,128]{2,1,0:T(8,128)(2,1)} parameter(0)
  %param_1.1 = bf16[512,64,128]{2,1,0:T(8,128)(2,1)} parameter(1)
  %param_2.1 = s32[]{:T(128)} parameter(2)
  %constant.0 = s32[]{:T(128)} constant(0)
  ROOT %dynamic-update-slice.1 = bf16[4096,64,128]{2,1,0:T(8,128)(2,1)} dynamic-update-slice(%param_0.1, %param_1.1, %param_2.1, %constant.0, %constant.0)
}

%fused_dot (param_0.2: bf16[512,128], param_1.2: bf16[128,2048]) -> f32[512,2048] {
  %param_0.2 = bf16[512,128]{1,0:T(8,128)(2,1)} parameter(0)
  %param_1.2 = bf16[128,2048]{1,0:T(8,128)(2,1)} parameter(1)
  ROOT %convolution.1 = f32[512,2048]{1,0:T(8,128)} convolution(%param_0.2, %param_1.2), dim_labels=bf_io->bf
}

ENTRY %main (kv: bf16[16384,16,16,128], idx: s32[2048], out: bf16[4096,64,128], upd: bf16[512,64,128], at: s32[], a: bf16[512,128], b: bf16[128,2048]) -> bf16[4096,64,128] {
  %kv = bf16[16384,16,16,128]{3,2,1,0:T(8,128)(2,1)} parameter(0)
  %idx = s32[2048]{0:T(1024)} parameter(1)
  %out = bf16[4096,64,128]{2,1,0:T(8,128)(2,1)} parameter(2)
  %upd = bf16[512,64,128]{2,1,0:T(8,128)(2,1)} parameter(3)
  %at = s32[]{:T(128)} parameter(4)
  %a = bf16[512,128]{1,0:T(8,128)(2,1)} parameter(5)
  %b = bf16[128,2048]{1,0:T(8,128)(2,1)} parameter(6)
  %gather_fusion = bf16[2048,16,128]{2,1,0:T(8,128)(2,1)} fusion(%kv, %idx), kind=kCustom, calls=%fused_gather
  %constant.5 = bf16[]{:T(256)} constant(0)
  %broadcast.54 = bf16[64,4096,64]{2,1,0:T(8,128)(2,1)} broadcast(%constant.5), dimensions={}, backend_config={"window_config":{"estimated_cycles":"756800","cost_model_type":"COST_MODEL_TYPE_INVALID"}}
  %dot_fusion = f32[512,2048]{1,0:T(8,128)} fusion(%a, %b), kind=kOutput, calls=%fused_dot, backend_config={"window_config":{"estimated_cycles":"4000","cost_model_type":"COST_MODEL_TYPE_CLASSIC"}}
  ROOT %update_fusion = bf16[4096,64,128]{2,1,0:T(8,128)(2,1)} fusion(%out, %upd, %at), kind=kLoop, calls=%fused_update, backend_config={"window_config":{"estimated_cycles":"9000","cost_model_type":"COST_MODEL_TYPE_CLASSIC"}}
}
"""


def _ops():
    ops, notes = hlo_ops(MODULE)
    assert not notes
    return {o.name: o for o in ops}


def test_a_gather_reads_the_rows_it_picks_not_its_whole_operand():
    g = _ops()["gather_fusion"]
    page_rows = 2048 * 16 * 128 * 2  # 2048 gathered (16, 128) bf16 slices
    # read the slices, write the result, read the indices: not the 1 GiB cache (before: 1 GiB + 16 MiB)
    assert g.hbm_bytes == page_rows + page_rows + 2048 * 4
    assert g.klass == "gather" and g.slices == 2048


def test_an_in_place_update_writes_its_update_only():
    u = _ops()["update_fusion"]
    update = 512 * 64 * 128 * 2
    assert u.hbm_bytes == update + update + 4  # the update read and written, the offset read; the buffer not read
    assert u.klass == "vector"


def test_op_classes_and_the_cost_model_xla_used():
    ops = _ops()
    assert ops["dot_fusion"].klass == "mxu" and ops["dot_fusion"].cost_model == "CLASSIC"
    assert ops["broadcast.54"].cost_model == "INVALID" and ops["broadcast.54"].work == 64 * 4096 * 64


def test_price_hlo_prices_each_class_by_its_own_rule():
    ops = list(_ops().values())
    f = cost_model.FACTORS
    got = cost_model.price_hlo(ops, V6E, f)
    clock, bw = cost_model.tensorcore_clock_hz(V6E), V6E.hbm_bytes_per_s * f.hbm_efficiency
    by = dict(got["by_class"])
    ops_by = _ops()
    # the gather: at least its rows at the derived row rate, at least its bytes
    rows = 2048 * f.gather_cycles_per_row / clock
    assert by["gather"] == pytest.approx(max(rows, ops_by["gather_fusion"].hbm_bytes / bw), rel=1e-9)
    # the broadcast XLA gave only a fallback for (756,800 cycles for 16.8M elements): its own work at the
    # vector rate, far under XLA's number (which is slower than writing its bytes)
    broadcast = max(64 * 4096 * 64 / cost_model.vector_ops_per_s(V6E), ops_by["broadcast.54"].hbm_bytes / bw)
    xla_fallback = 756800 / clock * f.xla_cycles_scale
    assert broadcast < xla_fallback / 10
    mxu = max(4000 / clock * f.xla_cycles_scale, ops_by["dot_fusion"].hbm_bytes / bw)
    update = max(9000 / clock * f.xla_cycles_scale, ops_by["update_fusion"].hbm_bytes / bw)
    assert by["mxu"] == pytest.approx(mxu, rel=1e-9)
    assert by["vector"] == pytest.approx(broadcast + update, rel=1e-9)
    assert got["seconds"] == pytest.approx(sum(by.values()), rel=1e-9)
    assert {name for name, _ in got["terms"]} == {"compute", "hbm", "per-op overhead", "per-step overhead"}
    # the interval's low end lets the classes no public point checks fall to their bytes
    lo, hi = cost_model.interval(got["seconds"], "xla", got["unchecked_s"])
    lo_err, hi_err = cost_model.ERROR_BANDS["xla"]
    assert hi == pytest.approx(got["seconds"] / lo_err) and lo == pytest.approx((got["seconds"] - got["unchecked_s"]) / hi_err)
    assert got["unchecked_s"] > 0 and lo < got["seconds"] / hi_err


def test_without_the_row_rate_a_gather_is_its_bytes_and_a_launch():
    ops = [_ops()["gather_fusion"]]
    got = cost_model.price_hlo(ops, V6E, dataclasses.replace(cost_model.FACTORS, gather_cycles_per_row=0.0))
    assert got["seconds"] == pytest.approx(ops[0].hbm_bytes / V6E.hbm_bytes_per_s + cost_model.LAUNCH_OVERHEAD_S)
