"""MaxKernel task folders as MaxKernel's harness runs them: input_gen_code sees jax/jnp/np without
importing them, and a get_inputs() that needs a concrete float (jnp.sqrt) still loads.

Both fixtures failed before (NameError: name 'jnp' / ConcretizationTypeError as PLS905)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pallasite.engine.checker import CheckOptions
from pallasite.engine.engine import check_paths

DATA = Path(__file__).parent / "data" / "maxkernel"


@pytest.fixture(scope="module")
def reports():
    paths = [DATA / "harness_names_task" / "kernel.py", DATA / "sqrt_scale_task" / "kernel.py"]
    out = check_paths([str(p) for p in paths], CheckOptions(target="v5e", tiers=(1, 3), time_limit_s=120))
    return {Path(r.path).parent.name: r for r in out}


@pytest.mark.pipeline
def test_input_gen_code_gets_the_harness_names(reports):
    report = reports["harness_names_task"]
    assert [f.code for f in report.findings] == [], [f.message for f in report.findings]
    assert {dict(k.tiers)[1] for k in report.kernels} == {"ok"}
    assert {dict(k.tiers)[3] for k in report.kernels} == {"ok"}  # compared with reference.computation


def test_get_inputs_computing_a_float_with_jnp_sqrt_loads(reports):
    report = reports["sqrt_scale_task"]
    assert [f.code for f in report.findings] == [], [f.message for f in report.findings]
    notes = [n for n in report.notes if n.startswith("tier 3:")]
    assert len(notes) == 2 and "float32[256, 128]" in notes[1]  # both cases, their own shapes
    assert {dict(k.tiers)[3] for k in report.kernels} == {"ok"}


def test_concrete_fallback_only_for_concretization_errors():
    import jax
    import jax.numpy as jnp

    from pallasite.runner.concrete_inputs import concrete_shapes, needs_concrete_values

    def scale():
        return [jnp.zeros((4, 8))], [float(1.0 / jnp.sqrt(64))]

    with pytest.raises(Exception) as info:
        jax.eval_shape(scale)
    assert needs_concrete_values(info.value)
    assert not needs_concrete_values(NameError("name 'jnp' is not defined"))
    arrays, statics = concrete_shapes(scale)
    assert arrays[0] == jax.ShapeDtypeStruct((4, 8), jnp.float32) and statics == [0.125]
