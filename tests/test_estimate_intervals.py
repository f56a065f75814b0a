"""Every estimate carries an interval (the model's leave-family-out error on published TPU times), a
speedup whose range holds 1.0x says "measure this on a device", two timings whose intervals overlap are
not distinguishable, and a kernel the model cannot price says why (pl.kernel over a SparseCore mesh,
core_map) instead of giving a figure for the program without it."""

from __future__ import annotations

import os

import pytest

for _name, _value in {"JAX_PLATFORMS": "cpu"}.items():
    os.environ.setdefault(_name, _value)

from pallasite.analysis.types import CostEstimate  # noqa: E402
from pallasite.analysis.verdict import Timing, distinguishable  # noqa: E402
from pallasite.engine.estimates import pair, straddles  # noqa: E402
from pallasite.runner.program import cost_model  # noqa: E402
from pallasite.runner.program.program_price import price_program  # noqa: E402

MODEL = cost_model.MODEL


def _est(seconds: float, interval: tuple[float, float] | None) -> CostEstimate:
    return CostEstimate(chip="v6e", config=(), status="ok", seconds=seconds, bound="compute", model=MODEL,
                        interval=interval)


def test_a_timing_carries_its_interval_through_json():
    t = Timing(2e-3, "estimate", "v6e", MODEL, "m", interval=(1.5e-3, 3e-3))
    back = Timing.from_json(t.to_json())
    assert back == t and back.interval == (1.5e-3, 3e-3)
    assert Timing.from_json(Timing(1e-3, "device", "TPU v6 lite").to_json()).interval is None
    with pytest.raises(ValueError):
        Timing(1e-3, "estimate", "v6e", MODEL, interval=(2e-3, 1e-3))  # low above high


def test_overlapping_intervals_are_not_distinguishable():
    a = Timing(2e-3, "estimate", "v6e", MODEL, interval=(1.5e-3, 3e-3))
    b = Timing(2.5e-3, "estimate", "v6e", MODEL, interval=(2e-3, 3.5e-3))
    c = Timing(5e-3, "estimate", "v6e", MODEL, interval=(4e-3, 6e-3))
    assert distinguishable(a, b) is False  # a tie within the model's error: measure on a device
    assert distinguishable(a, c) is True and distinguishable(c, a) is True
    assert distinguishable(a, Timing(2e-3, "estimate", "v6e", MODEL)) is None  # no interval: not known
    assert distinguishable(a, Timing(2e-3, "device", "TPU v6 lite")) is None  # not one method: not comparable


def test_a_speedup_whose_range_holds_one_says_measure_on_a_device():
    kernel = _est(1e-3, (0.8e-3, 1.4e-3))
    close = pair(kernel, {"seconds": 1.1e-3, "model": MODEL, "chip": "v6e", "interval": [0.9e-3, 1.2e-3]}, "v6e")
    lo, hi = close.speedup_interval
    assert lo == pytest.approx(0.9e-3 / 1.4e-3) and hi == pytest.approx(1.2e-3 / 0.8e-3)
    assert "measure this on a device" in close.caveat and "0.64x to 1.50x" in close.caveat
    far = pair(kernel, {"seconds": 9e-3, "model": MODEL, "chip": "v6e", "interval": [8e-3, 10e-3]}, "v6e")
    assert far.speedup == pytest.approx(9.0) and far.caveat is None  # 5.7x-12.5x: the sign is known
    t = far.kernel_timing("v6e", MODEL)
    assert t.interval == (0.8e-3, 1.4e-3) and "range 800 us to 1.4 ms" in t.method
    assert far.reference_timing("v6e", MODEL).interval == (8e-3, 10e-3)
    assert straddles(None) is None and straddles((1.01, 2.0)) is None


def test_interval_is_the_figure_over_the_error_band():
    lo_err, hi_err = cost_model.ERROR_BANDS["kernel"]
    assert cost_model.interval(1e-3, "kernel") == pytest.approx((1e-3 / hi_err, 1e-3 / lo_err))
    lo, hi = cost_model.interval(1e-3, "xla", unchecked_s=0.6e-3)
    assert lo == pytest.approx(0.4e-3 / cost_model.ERROR_BANDS["xla"][1])
    assert hi == pytest.approx(1e-3 / cost_model.ERROR_BANDS["xla"][0])


def test_a_sparsecore_kernel_is_not_estimated_and_says_why():
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu
    from jax.experimental.pallas import tpu_sc as plsc

    from pallasite.analysis.types import chip_target
    from pallasite.runner.chip_probe import spec_from_jax

    def add_one(x):  # x + 1 on the SparseCore vector subcores (pl.kernel, emit_pipeline)
        mesh = plsc.VectorSubcoreMesh(core_axis_name="core", subcore_axis_name="subcore")

        @pl.kernel(out_type=jax.ShapeDtypeStruct(x.shape, x.dtype), mesh=mesh)
        def kernel(x_hbm, o_hbm):
            def step(i_vmem, o_vmem):
                o_vmem[...] = i_vmem[...] + 1

            pltpu.emit_pipeline(step, grid=(x.shape[0] // 8, x.shape[1] // 128),
                                in_specs=[pl.BlockSpec((8, 128), lambda i, j: (i, j))],
                                out_specs=[pl.BlockSpec((8, 128), lambda i, j: (i, j))],
                                core_axis_name=("core", "subcore"),
                                dimension_semantics=(pltpu.PARALLEL, pltpu.PARALLEL))(x_hbm, o_hbm)
        return kernel(x)

    # the program loads and exports (its questions about the chip answered as 7x's while it is traced), and
    # its module names the SparseCore kernel; what no public source gives is said: before (issue 60), the
    # module pricer priced it as a TensorCore kernel
    est = price_program(add_one, [jax.ShapeDtypeStruct((256, 128), jnp.int32)], spec_from_jax(chip_target("7x")))
    assert est.status == "trace_error" and est.seconds is None
    assert "over a VectorSubcoreMesh" in est.error and "SparseCore" in est.error
    assert "subcores (16), lanes (16)" in est.error and "clock" in est.error  # what the table has, what it lacks
    paired = pair(est, {"seconds": 1e-6, "model": MODEL, "chip": "7x"}, "7x")
    assert paired.speedup is None and "over a VectorSubcoreMesh" in paired.why


def test_a_scalar_prefetch_moe_kernel_is_estimated_from_its_routing():
    """A sparse-MoE grouped matmul whose weight block follows a scalar-prefetched expert id
    (tests/data/moe/sparse_moe.py): with the task's own inputs the routing is computed and each
    expert's weights are counted where the tiles change expert; with abstract inputs the estimate
    says it assumed zeros. Either way a figure with its interval, never a silent gap."""
    import importlib.util

    import jax

    from pallasite.analysis.types import chip_target
    from pallasite.runner.chip_probe import spec_from_jax

    path = os.path.join(os.path.dirname(__file__), "data", "moe", "sparse_moe.py")
    spec = importlib.util.spec_from_file_location("sparse_moe_fixture", path)
    moe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(moe)
    chip = spec_from_jax(chip_target("v6e"))
    k = jax.random.split(jax.random.key(0), 3)
    x = jax.random.normal(k[0], (moe.TOKENS, moe.DIM), jax.numpy.bfloat16)
    router = jax.random.normal(k[1], (moe.DIM, moe.EXPERTS), jax.numpy.bfloat16)
    weights = jax.ShapeDtypeStruct((moe.EXPERTS, moe.DIM, moe.HIDDEN), jax.numpy.bfloat16)  # too big to evaluate
    known = price_program(moe.moe, [x, router, weights], chip)
    blind = price_program(moe.moe, list(jax.eval_shape(moe.example_inputs)), chip)
    for est in (known, blind):
        assert est.status == "ok" and est.seconds > 0 and est.interval[0] < est.seconds < est.interval[1]
    (kcall,), (bcall,) = known.calls, blind.calls
    weight_block = moe.DIM * moe.HIDDEN * 2
    [kw] = [b for b in kcall.blocks if b.block_shape == (1, moe.DIM, moe.HIDDEN)]
    [bw] = [b for b in bcall.blocks if b.block_shape == (1, moe.DIM, moe.HIDDEN)]
    assert bw.fetches == 1 and any("zeros assumed" in n for n in bcall.notes)  # blind: expert 0 throughout
    assert kw.fetches >= 4 and kw.hbm_bytes == kw.fetches * weight_block  # known: one fetch per expert change
    assert not any("zeros assumed" in n for n in kcall.notes)
