"""Tier 3: TPU interpret-mode runs of the runtime fixtures, end to end through the checker.

All fixtures of tests/data/runtime/ are checked once for v5p (a two-core megacore chip), by one
worker (tier 3 only, so libtpu is not needed); each broken file must give its expected finding at
the expected line (expected.json was written before the code), each fixed twin none. The one-core
targets (v5e, v6e) are checked on the fixtures that are wrong only with two TensorCores.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pallasite.engine.checker import CheckOptions
from pallasite.engine.engine import check_paths

DATA = Path(__file__).parent / "data" / "runtime"
EXPECTED = {k: v for k, v in json.loads((DATA / "expected.json").read_text()).items() if not k.startswith("_")}


@pytest.fixture(scope="module")
def reports():
    paths = [str(DATA / name) for name in EXPECTED]
    out = check_paths(paths, CheckOptions(target="v5p", tiers=(3,), time_limit_s=120))
    return {Path(r.path).name: r for r in out}


TWO_CORE_ONLY = {"race_cores_broken.py": ("PLS301", 26), "parallel_reduction_broken.py": ("PLS304", 41)}


@pytest.mark.parametrize("target", [pytest.param("v5e", marks=pytest.mark.pipeline), "v6e"])
def test_one_core_targets_warn_about_what_only_two_cores_get_wrong(target):
    """On a one-TensorCore chip these kernels compute the right result: a warning naming the
    two-core chips, not an error; and the tier-3 verdict is ok."""
    out = check_paths([str(DATA / n) for n in TWO_CORE_ONLY], CheckOptions(target=target, tiers=(3,), time_limit_s=120))
    for report in out:
        got = [f for f in report.findings if f.tier == 3]
        code, line = TWO_CORE_ONLY[Path(report.path).name]
        assert [(f.code, f.span.line + 1, f.severity) for f in got] == [(code, line, "warning")], [f.message for f in got]
        assert got[0].message.startswith(f"correct on {target} (1 TensorCore) but wrong on two-core chips such as v4/v5p: ")
        assert {dict(k.tiers)[3] for k in report.kernels} == {"ok"}


def test_one_core_verdict_keeps_errors_the_chip_itself_makes():
    from pallasite.runner.tier3.interpret import one_core_verdict

    own = [{"code": "PLS302", "severity": "error", "sentence": "oob", "message": "oob"}]
    two = [{"code": "PLS302", "severity": "error", "sentence": "oob", "message": "oob"},
           {"code": "PLS301", "severity": "error", "sentence": "race between TensorCores", "message": "x"}]
    out = one_core_verdict(own, two, "v6e")
    assert [(r["code"], r["severity"]) for r in out] == [("PLS302", "error"), ("PLS301", "warning")]
    assert out[1]["message"] == "also wrong on two-core chips such as v4/v5p: race between TensorCores"


def test_without_a_reference_a_one_core_run_is_not_called_correct(tmp_path):
    """A kernel with no reference that only two cores leave NaN: on v6e its outputs are all written,
    and that is all tier 3 can say; "correct" and "matches the reference" would claim values it never
    compared (it said both for jax's matmul with its init on the wrong grid axis, wrong on v6e too)."""
    text = (DATA / "parallel_reduction_broken.py").read_text()
    cut = text.index("def reference(")
    path = tmp_path / "no_reference.py"
    path.write_text(text[:cut])
    [report] = check_paths([str(path)], CheckOptions(target="v6e", tiers=(3,), time_limit_s=120))
    got = [f for f in report.findings if f.tier == 3]
    assert [(f.code, f.severity) for f in got] == [("PLS304", "warning")], [f.message for f in got]
    message = got[0].message
    assert message.startswith("on v6e (1 TensorCore) every output comes back written (there is no reference, so its "
                              "values were not compared), but wrong on two-core chips such as v4/v5p: "), message
    assert "correct on" not in message and "matches the reference" not in message, message
    assert "there is no reference, so the values were not compared" in message, message


def test_one_core_verdict_without_a_reference_says_what_it_saw():
    from pallasite.runner.tier3.interpret import one_core_verdict

    two = [{"code": "PLS303", "severity": "error", "sentence": "blocks come back NaN", "message": "x"}]
    [rec] = one_core_verdict([], two, "v5e", compared=False)
    assert rec["severity"] == "warning" and rec["message"].startswith("on v5e (1 TensorCore) every output comes back "
                                                                      "written"), rec
    [rec] = one_core_verdict([], two, "v5e")
    assert rec["message"].startswith("correct on v5e (1 TensorCore) but wrong on"), rec


def test_a_tier_2_that_fails_only_for_vmem_still_gets_tier_3():
    """The blocks overflow v6e's scoped VMEM (tier 2) and the kernel triples where the reference doubles: the
    second was never said, tier 3 being skipped after any tier-2 failure."""
    [report] = check_paths([str(DATA / "vmem_over_and_wrong.py")], CheckOptions(target="v6e", tiers=(2, 3),
                                                                                 time_limit_s=120))
    got = sorted((f.code, f.tier, f.span.line + 1) for f in report.findings if f.severity == "error")
    assert got == [("PLS201", 2, 8), ("PLS304", 3, 17)], [f.message for f in report.findings]


def test_only_a_vmem_failure_of_tier_2_lets_tier_3_run():
    from pallasite.wire.messages import ErrorRecord, tier2_only_vmem

    vmem = {"stage": "tier 2", "tier": 2, "vmem": {"requested": 1}, "mosaic_codes": ["E1001"]}
    other = {"stage": "tier 2", "tier": 2, "vmem": None, "mosaic_codes": ["E2003"]}
    assert tier2_only_vmem([vmem]) and not tier2_only_vmem([vmem, other]) and not tier2_only_vmem([])
    typed = ErrorRecord(stage="tier 2", type="XlaRuntimeError", sentence="", message="", tier=2, mosaic_codes=("E1001",))
    assert tier2_only_vmem([typed]) and not tier2_only_vmem([ErrorRecord(stage="tier 2", type="X", sentence="",
                                                                          message="", tier=2)])


def test_target_cores_follow_jax_chip_table():
    from pallasite.runner.tier3.interpret import target_cores

    assert [target_cores(t) for t in ("v4", "v5p", "v5e", "v6e", None)] == [2, 2, 1, 1, 2]


@pytest.mark.pipeline
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_gives_expected_tier3_findings(reports, name):
    report = reports[name]
    got = [f for f in report.findings if f.tier == 3]
    want = EXPECTED[name]
    messages = [f"{f.code}:{f.span.line + 1}: {f.message}" for f in got]
    assert {f.code for f in got} == {w["code"] for w in want}, messages
    for expected in want:
        hits = [f for f in got if (f.code, f.span.line + 1) == (expected["code"], expected["line"])]
        assert hits, (expected, messages)
        assert any(expected["says"] in f.message for f in hits), (expected, messages)
    assert all(f.origin == "TPU interpreter" for f in got)
    states = {dict(k.tiers).get(3) for k in report.kernels}
    has_error = any(w["code"] != "PLS305" for w in want)
    assert states == ({"error"} if has_error else {"ok"})


@pytest.mark.pipeline
def test_every_run_reports_its_interpret_time_as_not_tpu_time(reports):
    for name, report in reports.items():
        notes = [n for n in report.notes if n.startswith("tier 3:")]
        assert len(notes) == 1, (name, report.notes)
        assert "CPU interpret mode (not TPU time)" in notes[0]
        seconds = float(notes[0].split(" ran in ")[1].split(" s ")[0])
        assert seconds > 0


@pytest.mark.pipeline
def test_large_inputs_are_shrunk_to_whole_blocks(reports):
    note = next(n for n in reports["large_shapes.py"].notes if n.startswith("tier 3:"))
    assert ("interpret run at float32[256, 1024], float32[256, 1024], shrunk from float32[4096, 2048], "
            "float32[4096, 2048]") in note


@pytest.mark.pipeline
def test_small_inputs_run_as_given(reports):
    note = next(n for n in reports["oob_dma_broken.py"].notes if n.startswith("tier 3:"))
    assert "float32[32, 128]" in note and "shrunk" not in note


def test_a_too_large_run_ends_as_a_memory_finding():
    report = check_paths([str(DATA / "too_large.py")], CheckOptions(target="v5e", tiers=(3,), memory_mb=1200, time_limit_s=120))[0]
    codes = [(f.code, f.span.line + 1) for f in report.findings]
    assert ("PLS904", 15) in codes, report.findings
    assert {dict(k.tiers)[3] for k in report.kernels} == {"error"}


# --------------------------------------------------------------------------- pieces


def test_blocks_hit_names_block_indices():
    from pallasite.runner.tier3.interpret_compare import blocks_hit

    mask = np.zeros((16, 256), bool)
    mask[8:16, 128:256] = True
    mask[0, 0] = True
    assert blocks_hit(mask, (8, 128)) == [(0, 0), (1, 1)]


def test_compare_separates_nan_fill_from_wrong_numbers():
    from pallasite.runner.tier3.interpret_compare import compare

    ref = np.ones((8, 4), np.float32)
    out = ref.copy()
    out[0:2] = np.nan
    out[5, 3] = 1.5
    problems = compare(out, ref, (1e-5, 1e-5))
    kinds = {p["kind"]: p for p in problems}
    assert kinds["nan"]["mask"].sum() == 8
    assert kinds["mismatch"]["count"] == 1
    assert kinds["mismatch"]["max_abs"] == pytest.approx(0.5)
    assert compare(ref, ref, (0.0, 0.0)) == []


def test_shrink_keeps_dims_multiples_of_their_blocks():
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    from pallasite.runner.intercept import RecordedCall
    from pallasite.runner.tier3.interpret import shrink_shapes

    x = jax.ShapeDtypeStruct((4096, 2048), jnp.float32)
    y = jax.ShapeDtypeStruct((2048, 4096), jnp.float32)
    call = RecordedCall(kernel=lambda *r: None, out_shape=None, file=None, line=None, kwargs={
        "in_specs": [pl.BlockSpec((256, 512), lambda i, j, k: (i, k)), pl.BlockSpec((512, 128), lambda i, j, k: (k, j))]})
    call.operands = (x, y)
    (sx, sy), shrunk = shrink_shapes((x, y), [call])
    assert shrunk
    assert sx.shape == (512, 1024) and sy.shape == (1024, 512)  # K (2048) cut by 512 in both: same size
    small = jax.ShapeDtypeStruct((64, 128), jnp.float32)
    assert shrink_shapes((small,), [call]) == ((small,), False)


def test_shrink_shrinks_a_shared_size_in_the_small_input_too():
    """jax's blocked matmul at (1024, 2048) @ (2048, 512): only x is over the limit, but K is shared, so
    y's K shrinks with it (it stayed 2048 and the reference raised on the shrunk inputs: PLS905)."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.experimental import pallas as pl

    from pallasite.runner.intercept import RecordedCall
    from pallasite.runner.tier3.interpret import shrink_shapes

    x = jax.ShapeDtypeStruct((1024, 2048), jnp.bfloat16)
    y = jax.ShapeDtypeStruct((2048, 512), jnp.bfloat16)
    table = np.zeros((512,), np.int32)  # a small given array keeps its values even where a size matches
    call = RecordedCall(kernel=lambda *r: None, out_shape=None, file=None, line=None, kwargs={
        "in_specs": [pl.BlockSpec((256, 256), lambda i, j, k: (i, k)), pl.BlockSpec((256, 256), lambda i, j, k: (k, j))]})
    call.operands = (x, y)
    (sx, sy, st), shrunk = shrink_shapes((x, y, table), [call])
    assert shrunk and sx.shape[1] == sy.shape[0] < 2048 and st is table


def test_intercept_patches_names_imported_from_pallas_and_restores_them():
    from jax.experimental import pallas as pl

    from pallasite.runner.intercept import intercept_pallas_calls

    namespace = {"pallas_call": pl.pallas_call, "other": len}
    original = pl.pallas_call
    with intercept_pallas_calls(modules=(namespace,)) as calls:
        assert namespace["pallas_call"] is not original and pl.pallas_call is namespace["pallas_call"]
        assert namespace["other"] is len
    assert namespace["pallas_call"] is original and pl.pallas_call is original
    assert calls == []


@pytest.mark.slow
def test_jax_own_kernels_run_clean_in_tier3():
    """jax's flash attention, paged attention, blocked matmul and megablox gmm: no tier-3 errors.

    megablox's group sizes are an int32 input given only as a shape, so they are zero-filled and its
    output is never written: that must be a warning that says why, not an error.
    """
    real = Path(__file__).parent / "data" / "real"
    names = ["flash_attention_causal.py", "paged_attention_decode.py", "matmul_blocked.py", "megablox_gmm.py"]
    out = check_paths([str(real / n) for n in names], CheckOptions(target="v5e", tiers=(3,), time_limit_s=300))
    for report in out:
        errors = [f for f in report.findings if f.severity == "error"]
        assert errors == [], (report.path, [f.message for f in errors])
        assert {dict(k.tiers)[3] for k in report.kernels} == {"ok"}, report.path
    gmm = out[-1]
    assert [f.code for f in gmm.findings] == ["PLS303"]
    assert gmm.findings[0].severity == "warning" and "integer inputs were filled with 0" in gmm.findings[0].message


def test_cli_runs_tier3_on_demand_and_reports_the_time_note():
    import subprocess
    import sys

    path = DATA / "oob_dma_broken.py"
    proc = subprocess.run([sys.executable, "-m", "pallasite.server.cli", "check", "--tiers", "3", "--target", "v5e",
                           "--format", "json", str(path)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr[-2000:]
    report = json.loads(proc.stdout)["files"][0]
    assert [(f["code"], f["line"], f["origin"]) for f in report["findings"]] == [("PLS302", 18, "TPU interpreter")]
    assert any(n.startswith("tier 3: shifted ran in") and "not TPU time" in n for n in report["notes"])


@pytest.mark.pipeline
def test_cross_core_race_gets_advice_that_fits_it(reports):
    """The message itself says what to do; the registry hint and catalog entry cover both kinds of race."""
    import re

    from pallasite.analysis.codes import CODES
    from pallasite.knowledge.catalog import entry

    finding = next(f for f in reports["race_cores_broken.py"].findings if f.code == "PLS301")
    assert 'make that axis "arbitrary" or give each step its own block' in finding.message
    # said at the "parallel" entry (expected.json, line 26); the out_specs whose map ignores the axis is related
    assert [r.span.line + 1 for r in finding.related if r.message == "the out_specs"] == [24], finding.related
    hint = CODES["PLS301"].hint
    assert "semaphore" in hint and "TensorCores" in hint and '"arbitrary"' in hint
    catalog = entry("PLS301")
    assert "TensorCores" in catalog.explanation and '"arbitrary"' in catalog.fix
    assert any(re.search(p, finding.message, re.IGNORECASE) for p in catalog.patterns)


@pytest.mark.pipeline
def test_knowledge_says_tier3_catches_a_reduction_axis_marked_parallel(reports):
    from pallasite.knowledge.catalog import entry

    caught = [f for f in reports["parallel_reduction_broken.py"].findings if f.code == "PLS304"]
    assert caught and "marked \"parallel\"" in caught[0].message  # what the texts below must agree with
    explanation = " ".join(entry("PLS304").explanation.split())
    assert "not in the interpreter" not in explanation
    assert "rerunning with every axis \"arbitrary\"" in explanation
    guides = Path(__file__).parents[1] / "knowledge" / "guides"
    semantics = " ".join((guides / "dimension-semantics.md").read_text().split())
    assert "interpret mode does not detect it either" not in semantics and "pallasite's tier 3 does" in semantics
    interpret = " ".join((guides / "interpret-mode.md").read_text().split())
    assert "It does not detect a reduction axis" not in interpret and "pallasite's tier 3 does" in interpret
