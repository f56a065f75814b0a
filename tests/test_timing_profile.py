"""Profiler parsing, the roofline, the NaN pre-fill used on devices, and the `profile` op on CPU.

The device path (device planes /device:TPU:N) is exercised on a synthetic xplane built with
``ProfileData.from_text_proto``, the same parser a live trace goes through; no device is needed.
"""

from __future__ import annotations

import os
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
from jax.profiler import ProfileData

from pallasite.runner.measure import profiling, timing_guards
from pallasite.runner.tier3.nan_prefill import nan_prefilled

DATA = Path(__file__).parent / "data" / "timing"


def _event(meta: int, offset_ns: int, duration_ns: int) -> str:
    return f"events {{ metadata_id: {meta} offset_ps: {offset_ns * 1000} duration_ps: {duration_ns * 1000} }}"


def synthetic_tpu_trace() -> ProfileData:
    """Two runs of the candidate module (5 us, 7 us) and one of the reference on /device:TPU:0,
    kernel events inside them (two overlapping), and a host plane that must not count."""
    modules = " ".join([_event(1, 0, 5000), _event(2, 10000, 9000), _event(1, 20000, 7000)])
    ops = " ".join([_event(3, 500, 3000), _event(3, 2000, 2000),  # overlap: union 3.5 us, not 5.0
                    _event(4, 11000, 8000),  # inside the reference: not the candidate's
                    _event(3, 20500, 4000), _event(5, 25000, 1000)])
    text = f"""
    planes {{ id: 1 name: "/device:TPU:0"
      lines {{ id: 1 name: "XLA Modules" timestamp_ns: 1000000 {modules} }}
      lines {{ id: 2 name: "XLA Ops" timestamp_ns: 1000000 {ops} }}
      event_metadata {{ key: 1 value {{ id: 1 name: "jit_pallasite_candidate(42)" }} }}
      event_metadata {{ key: 2 value {{ id: 2 name: "jit_pallasite_reference(43)" }} }}
      event_metadata {{ key: 3 value {{ id: 3 name: "add_kernel" }} }}
      event_metadata {{ key: 4 value {{ id: 4 name: "fusion" }} }}
      event_metadata {{ key: 5 value {{ id: 5 name: "copy.1" }} }}
    }}
    planes {{ id: 2 name: "/host:CPU"
      lines {{ id: 1 name: "XLA Modules" timestamp_ns: 1000000 {_event(1, 0, 999999)} }}
      event_metadata {{ key: 1 value {{ id: 1 name: "jit_pallasite_candidate(42)" }} }}
    }}"""
    return ProfileData.from_text_proto(text)


def test_module_times_come_from_device_planes_only():
    profile = synthetic_tpu_trace()
    assert [p.name for p in profiling.device_planes(profile)] == ["/device:TPU:0"]
    assert profiling.module_times(profile, "jit_pallasite_candidate") == [5000.0, 7000.0]
    assert profiling.module_times(profile, "jit_pallasite_reference") == [9000.0]
    assert profiling.module_times(profile, "jit_other") == []


def test_kernel_times_take_the_union_of_overlapping_events_inside_the_module():
    kernels = profiling.kernel_times(synthetic_tpu_trace(), "jit_pallasite_candidate")
    assert kernels["add_kernel"] == {"total_ns": 3500.0 + 4000.0, "count": 3}
    assert kernels["copy.1"] == {"total_ns": 1000.0, "count": 1}
    assert "fusion" not in kernels  # ran inside the reference's module


def test_union_of_intervals():
    assert profiling.union_ns([]) == 0
    assert profiling.union_ns([(0, 10), (5, 15), (20, 30), (21, 22)]) == 25


def test_roofline_bound_and_fraction():
    # v5e-like peaks: ridge 240 FLOP/byte
    mem = profiling.roofline(flops=1e9, nbytes=1e9, seconds=2e-3, peak_flops=197e12, peak_bytes_per_s=820e9)
    assert mem["bound"] == "memory"
    assert mem["achieved_bytes_per_s"] == pytest.approx(5e11)
    assert mem["fraction_of_roofline"] == pytest.approx(5e11 / 820e9)
    comp = profiling.roofline(flops=1e12, nbytes=1e8, seconds=1e-2, peak_flops=197e12, peak_bytes_per_s=820e9)
    assert comp["bound"] == "compute"
    assert comp["fraction_of_roofline"] == pytest.approx(1e14 / 197e12)
    unknown = profiling.roofline(flops=None, nbytes=1e6, seconds=None, peak_flops=None, peak_bytes_per_s=None)
    assert unknown["bound"] is None and unknown["achieved_bytes_per_s"] is None


def test_one_trace_per_process(tmp_path):
    with profiling.capture(str(tmp_path / "a")) as trace:
        with pytest.raises(profiling.TraceBusy):
            with profiling.capture(str(tmp_path / "b")):
                pass
        jnp.ones(4).block_until_ready()
    assert trace.path and os.path.isfile(trace.path) and trace.path.endswith(".xplane.pb")
    assert profiling.load(trace.path).find_plane_with_name("/host:CPU") is not None


def _half_grid_add(x):
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2

    spec = pl.BlockSpec((8, 128), lambda i: (i, 0))
    return pl.pallas_call(kernel, grid=(1,), in_specs=[spec], out_specs=spec,
                          out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


def test_nan_prefill_exposes_unwritten_blocks_where_memory_is_zeroed():
    """What a device gives: memory not NaN-filled. Without the pre-fill the unwritten half is 0 and
    an all-zero reference there would pass; with it the half comes back NaN."""
    x = jnp.ones((16, 128), jnp.float32)
    with pltpu.force_tpu_interpret_mode(pltpu.InterpretParams(uninitialized_memory="zero")):
        plain = np.asarray(_half_grid_add(x))
        with nan_prefilled() as skipped:
            filled = np.asarray(jax.jit(_half_grid_add)(x))
    assert skipped == []
    assert (plain[8:] == 0).all() and (plain[:8] == 2).all()
    assert np.isnan(filled[8:]).all() and (filled[:8] == 2).all()
    problem = timing_guards.compare_outputs(filled, np.full((16, 128), 2.0, np.float32), (1e-5, 1e-5))
    assert problem["trick"] == "partial_write"


def test_degenerate_comparisons_are_refused():
    tol = (1e-3, 1e-3)
    assert timing_guards.degenerate(np.full((4, 4), 1e-6), tol)["trick"] == "degenerate_comparison"
    assert "constant" in timing_guards.degenerate(np.full((4, 4), 3.0), tol)["message"]
    assert timing_guards.degenerate(np.arange(16.0).reshape(4, 4), tol) is None


def test_profile_op_on_cpu_returns_the_trace_and_an_estimated_bound(tmp_path):
    from pallasite.runner.judging.timing_profile import handle_profile

    result = handle_profile({"path": str(DATA / "honest_add.py"), "runs": 2, "chip": "v5e",
                             "trace_dir": str(tmp_path)})
    assert result["verdict"] == "ok", result
    assert result["trace"].startswith(str(tmp_path)) and os.path.isfile(result["trace"])
    prof = result["profile"]
    assert prof["device_ns"] is None and "not TPU time" in prof["time_source"]
    assert prof["wall_ns"] > 0 and prof["profiler_overhead"] is not None
    roof = prof["roofline"]
    assert prof["chip"] == "v5e" and roof["bound"] == "memory"  # an add: 1 FLOP per 12 bytes
    assert roof["achieved_flops_per_s"] is None  # never computed from interpret time
    assert roof["flops"] == 256 * 128 and roof["bytes"] == 3 * 256 * 128 * 4
    assert result["provenance"] == "interpret"


def test_profile_op_rejects_an_exploit_before_tracing():
    from pallasite.runner.judging.timing_profile import handle_profile

    result = handle_profile({"path": str(DATA / "no_pallas.py"), "runs": 1})
    assert result["verdict"] == "rejected" and result["trace"] is None
    assert [r["trick"] for r in result["rejections"]] == ["no_pallas_call"]
