"""Labels of timings (issue 23): host wall clock is never labelled device, and no interpret-mode or
host-clock run is shown as a speedup (the `time` summary line, hovers and lenses)."""

from __future__ import annotations

from types import SimpleNamespace

import jax.numpy as jnp
import numpy as np

from pallasite.runner.measure import timing
from pallasite.server.reports import timing_format


def _prepared_claiming_a_device() -> timing.Prepared:
    """A task prepared as if a TPU were present: the profiler's trace then holds no TPU plane, which is
    exactly the "trace fell short" case (the timing falls back to the host's wall clock)."""
    task = SimpleNamespace(entry=lambda x: x * 2.0, inputs=None, name="double", format="native")
    return timing.Prepared(task=task, module=None, path="double.py", reference=lambda x: x + x, reference_file=None,
                           config={}, platform="tpu", device_kind="TPU v6 lite")


def test_host_wall_clock_is_never_labelled_device():
    prep = _prepared_claiming_a_device()
    shapes = (SimpleNamespace(shape=(8, 128), dtype=np.float32),)
    import jax

    shapes = (jax.ShapeDtypeStruct((8, 128), jnp.float32),)
    timed = timing.time_pair(prep, shapes, seed=0, runs=2, warmup=1, say=lambda m: None)
    assert timed["device_ns"] is None and timed["host_clock"] is True
    assert "wall clock" in timed["method"]
    m = timing.measurement(prep, timed["wall_ns"]["pallasite_candidate"], timed["method"], host_clock=True)
    assert m.provenance.value == "host"
    assert "device" not in timing_format.label({"provenance": m.provenance.value, "device_kind": m.device_kind})
    # a device timing of the profiler's device plane keeps its provenance
    assert timing.measurement(prep, [1.0, 2.0], "xprof").provenance.value == "device"


def _result(cand_prov: str, ref_prov: str, kind: str = "cpu") -> dict:
    def m(prov: str, ns: float) -> dict:
        return {"provenance": prov, "device_kind": kind, "median_ns": ns, "method": "m"}

    return {"verdict": "ok", "candidate": m(cand_prov, 1000.0), "reference": m(ref_prov, 2000.0),
            "speedup": {"value": 2.0, "baseline": "the reference compiled by XLA on the same device", "provenance": cand_prov}}


def test_summary_line_shows_no_interpret_mode_or_host_clock_speedup():
    line = timing_format.summary_line(_result("interpret", "host"))
    assert "CPU interpret mode: not TPU time" in line and "x vs" not in line
    assert "x vs" not in timing_format.summary_line(_result("host", "host", "TPU v6 lite"))
    device = timing_format.summary_line(_result("device", "device", "TPU v6 lite"))
    assert device.endswith("2.00x vs the XLA reference")


def test_hover_lists_estimates_apart_from_device_measurements():
    from pallasite.analysis.types import Measurement, Provenance
    from pallasite.server.editor import timing_lsp

    def record(kernel: str, prov: Provenance, kind: str) -> SimpleNamespace:
        m = Measurement(status="ok", provenance=prov, device_kind=kind, method="cost model", median_ns=5000.0)
        return SimpleNamespace(kernel=kernel, measurement=m, created=0.0, key=SimpleNamespace(backend="estimate"))

    from pallasite.server.features import FeatureState

    session = SimpleNamespace(features=FeatureState(), engine=SimpleNamespace(stored_measurements=lambda path: [
        record("add", Provenance.ESTIMATE, "v6e")]))
    text = timing_lsp.hover_section(session, "k.py", {"add"})
    assert "**measured" not in text and "**estimated, or not TPU time**" in text and "estimate for v6e" in text
    session.engine.stored_measurements = lambda path: [record("add", Provenance.DEVICE, "TPU v6 lite")]
    assert "**measured on a device**" in timing_lsp.hover_section(session, "k.py", {"add"})
