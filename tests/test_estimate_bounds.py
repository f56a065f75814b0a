"""Every estimate states which term bounds it and the achieved-efficiency factors it used, with where
each came from (issue 44): through the worker's real ``estimate`` op into engine/estimates.pair and
the words a Timing carries (its ``method``)."""

from __future__ import annotations

import os

for _name, _value in {"JAX_PLATFORMS": "cpu", "TPU_WORKER_HOSTNAMES": "localhost", "TPU_SKIP_MDS_QUERY": "1"}.items():
    os.environ.setdefault(_name, _value)

from pallasite.analysis.types import CostEstimate, from_json, to_json  # noqa: E402
from pallasite.engine.estimates import pair_result  # noqa: E402
from pallasite.engine.sources import sources_for  # noqa: E402
from pallasite.runner.program import cost_model  # noqa: E402
from pallasite.runner.tune_ops import handle_estimate  # noqa: E402
from pallasite.wire.messages import EstimateParams  # noqa: E402

DATA = os.path.join(os.path.dirname(__file__), "data", "tune")


def test_the_pair_says_each_sides_bound_and_factors():
    path = os.path.join(DATA, "matmul.py")
    result = handle_estimate(EstimateParams(source=sources_for(path), chip="v5e", reference=True, probe=False))
    paired = pair_result(result)
    assert paired.kernel_s and paired.reference_s
    assert paired.kernel_bound in ("compute", "memory", "overhead")
    assert paired.reference_bound in ("compute", "memory", "overhead")
    words = paired.kernel_method()
    assert f"{paired.kernel_bound}-bound" in words
    assert f"mxu_efficiency {cost_model.FACTORS.mxu_efficiency:.4g}" in words
    assert "fitted on jax's Pallas matmul guide" in words and "hbm_efficiency 1 (assumed" in words
    assert "leave-family-out" in words and "range " in words  # where the factors come from, and the interval
    assert paired.kernel_interval and paired.kernel_interval[0] < paired.kernel_s < paired.kernel_interval[1]
    assert f"{paired.reference_bound}-bound" in paired.reference_method()
    assert "factors:" in paired.reference_method()
    # the factors, terms and interval survive the store's JSON round trip (tune keeps estimates there)
    est = result.estimates[0]
    back = from_json(CostEstimate, to_json(est))
    assert back.factors == est.factors and back.interval == est.interval and back.terms == est.terms


def test_an_estimate_below_the_chips_floor_is_refused_not_paired():
    """The floors every device timing is held to hold the model's own figures too (issue 42): an
    estimate faster than its counted matmuls at the chip's peak is no estimate."""
    import dataclasses

    path = os.path.join(DATA, "matmul.py")
    result = handle_estimate(EstimateParams(source=sources_for(path), chip="v5e", reference=True, probe=False))
    est = result.estimates[0]
    (call,) = est.calls
    floor = call.mxu_flops / 197e12
    assert est.seconds >= floor and pair_result(result).kernel_s == est.seconds
    too_fast = dataclasses.replace(result, estimates=(dataclasses.replace(est, seconds=floor / 2),))
    paired = pair_result(too_fast)
    assert paired.kernel_s is None and paired.speedup is None
    assert "implausible: an estimate of" in paired.why and "below the physical floor" in paired.why
