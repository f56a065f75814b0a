"""Each tier-0 rule against its fixture pair in tests/data/tier0/ (see expected.json):
the broken file gives exactly the expected code at the expected line, its fixed twin gives no
error, and the rule's mechanical fix (when it has one) applied to the broken text removes it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pallasite.analysis.codes import CODES
from pallasite.analysis.source import apply_edits
from pallasite.analysis.tier0 import analyze
from pallasite.analysis.types import Fix

DATA = Path(__file__).parent / "data" / "tier0"
EXPECTED = {k: v for k, v in json.loads((DATA / "expected.json").read_text()).items() if not k.startswith("_")}
BROKEN = sorted(EXPECTED)


def apply_fix(text: str, fix: Fix) -> str:
    return apply_edits(text, fix.edits)


def test_every_tier0_rule_has_a_fixture_pair():
    codes = {entry["code"] for entries in EXPECTED.values() for entry in entries}
    tier0 = {code for code in CODES if code.startswith("PLS0") and code != "PLS000"}
    assert codes == tier0
    for name in BROKEN:
        assert (DATA / name.replace("_bad.py", "_ok.py")).exists(), name


@pytest.mark.parametrize("name", BROKEN)
def test_broken_fixture_reports_exactly_the_expected_finding(name):
    path = DATA / name
    result = analyze(path.read_text(), str(path))
    got = [(f.code, f.span.line + 1) for f in result.findings]
    want = [(e["code"], e["line"]) for e in EXPECTED[name]]
    assert got == want, [f.message for f in result.findings]
    for finding in result.findings:
        assert finding.tier == 0 and finding.severity == CODES[finding.code].severity
        assert len(finding.message) > 40 and finding.message.rstrip().endswith(".")


@pytest.mark.parametrize("name", BROKEN)
def test_fixed_twin_has_no_errors(name):
    path = DATA / name.replace("_bad.py", "_ok.py")
    result = analyze(path.read_text(), str(path))
    assert result.syntax_ok and result.uses_pallas and result.sites
    assert [f.code for f in result.findings if f.severity == "error"] == []
    assert [f.code for f in result.findings] == []


NO_MECHANICAL_FIX = {"pls006_program_id_while_bad.py"}  # a Python while has no one-edit rewrite


@pytest.mark.parametrize("name", [n for n in BROKEN if EXPECTED[n][0]["code"] in
                                  ("PLS001", "PLS004", "PLS006", "PLS007", "PLS009", "PLS010", "PLS011", "PLS012",
                                                                  "PLS016")
                                  and n not in NO_MECHANICAL_FIX])
def test_fix_removes_the_finding(name):
    text = (DATA / name).read_text()
    findings = analyze(text).findings
    assert len(findings) == 1 and findings[0].fix is not None
    fixed = apply_fix(text, findings[0].fix)
    assert fixed != text
    assert [f.code for f in analyze(fixed).findings] == []
    compile(fixed, name, "exec")


def test_tiling_fix_edits_the_constant_the_dim_came_from():
    text = (DATA / "pls001_tiling_bad.py").read_text()
    (finding,) = analyze(text).findings
    fixed = apply_fix(text, finding.fix)
    assert "BLOCK_COLS = 128\n" in fixed
    assert "pl.BlockSpec((BLOCK_ROWS, BLOCK_COLS)" in fixed
    assert "100" in finding.message and "512" in finding.message


def test_semantics_fix_appends_arbitrary():
    text = (DATA / "pls004_semantics_bad.py").read_text()
    (finding,) = analyze(text).findings
    assert 'dimension_semantics=("parallel", "arbitrary")' in apply_fix(text, finding.fix)


def test_semantics_fix_trims_extra_entries():
    text = (DATA / "pls004_semantics_ok.py").read_text().replace(
        '("parallel", "parallel")', '["parallel", "parallel", "arbitrary"]')
    (finding,) = analyze(text).findings
    assert finding.code == "PLS004"
    assert 'dimension_semantics=["parallel", "parallel"]' in apply_fix(text, finding.fix)


def test_tiling_rule_silent_when_the_array_dims_are_unknown():
    text = (DATA / "pls001_tiling_bad.py").read_text()
    without_task = text[: text.index("def example_inputs")]
    assert [f.code for f in analyze(without_task).findings] == []


def test_tiling_rule_silent_when_the_block_equals_the_full_array_dim():
    text = (DATA / "pls001_tiling_bad.py").read_text().replace("(1024, 512)", "(1024, 100)")
    assert [f.code for f in analyze(text).findings] == []


def test_tiling_rule_uses_literal_out_shape():
    text = (DATA / "pls001_tiling_ok.py").read_text()
    text = text.replace("out_specs=spec,", "out_specs=pl.BlockSpec((BLOCK_ROWS, 200), lambda i, j: (i, j)),")
    text = text.replace("jax.ShapeDtypeStruct(x.shape, x.dtype)", "jax.ShapeDtypeStruct((1024, 512), jnp.float32)")
    text = text[: text.index("def example_inputs")]  # no task: only out_shape makes the dims literal
    findings = analyze(text).findings
    assert [(f.code, "out_specs[0]" in f.message) for f in findings] == [("PLS001", True)]


def test_int8_rule_silent_for_bf16():
    text = (DATA / "pls010_int8_rows_bad.py").read_text().replace("jnp.int8", "jnp.bfloat16")
    assert [f.code for f in analyze(text).findings] == []


def test_program_id_rule_follows_arithmetic_but_not_is_none():
    text = (DATA / "pls006_program_id_if_ok.py").read_text().replace(
        "    k = pl.program_id(1)\n",
        "    k = pl.program_id(1)\n    last = k + 1 == pl.num_programs(1)\n"
        "    if o_ref is None:\n        return\n    while last:\n        pass\n")
    findings = analyze(text).findings
    assert [f.code for f in findings] == ["PLS006"]
    assert "while" in findings[0].message


def test_gpu_file_gets_no_tpu_rules():
    text = (DATA / "pls011_float64_bad.py").read_text().replace(
        "from jax.experimental import pallas as pl\n",
        "from jax.experimental import pallas as pl\nfrom jax.experimental.pallas import triton as plgpu\n")
    result = analyze(text)
    assert result.sites[0].backend == "gpu"
    assert [f.code for f in result.findings] == []
    tpu = analyze((DATA / "pls011_float64_bad.py").read_text())
    assert [f.code for f in tpu.findings] == ["PLS011"]


def test_gpu_compiler_params_make_the_site_gpu():
    text = (DATA / "pls004_semantics_bad.py").read_text().replace(
        'pltpu.CompilerParams(dimension_semantics=("parallel",))', "plgpu.CompilerParams(num_warps=4)")
    text = text.replace("from jax.experimental.pallas import tpu as pltpu",
                        "from jax.experimental.pallas import triton as plgpu")
    result = analyze(text)
    assert result.sites[0].backend == "gpu" and result.findings == ()


def test_deprecated_api_is_a_warning_with_jax_message():
    text = ("from jax.experimental import pallas as pl\nfrom jax.experimental.pallas import tpu as pltpu\n"
            "def k(s_ref):\n    pltpu.semaphore_signal(s_ref)\n")
    (finding,) = analyze(text).findings
    assert finding.code == "PLS007" and finding.severity == "warning"
    assert "pl.semaphore_signal" in finding.message


def test_unknown_pallas_attribute_is_reported():
    text = "from jax.experimental import pallas as pl\nspec = pl.BlockSpecc((8, 128), lambda i: (i, 0))\n"
    (finding,) = analyze(text).findings
    assert finding.code == "PLS007" and (finding.span.line, finding.span.column) == (1, 7)


def test_kernel_params_with_defaults_may_stay_unfilled():
    text = (DATA / "pls005_kernel_params_bad.py").read_text()
    # three refs + one defaulted parameter: four refs fit, and so would three
    text = text.replace("def scaled_sum_kernel(x_ref, y_ref, o_ref, *, scale):",
                        "def scaled_sum_kernel(x_ref, y_ref, o_ref, acc_ref=None, *, scale):")
    assert [f.code for f in analyze(text).findings] == []
    too_few = text.replace("scratch_shapes=[pltpu.VMEM((block_rows, 128), jnp.float32)],",
                           "scratch_shapes=[pltpu.VMEM((block_rows, 128), jnp.float32)] * 3,")
    (finding,) = analyze(too_few).findings
    assert finding.code == "PLS005" and "3 scratch buffer(s)" in finding.message


def test_program_id_rule_respects_nested_function_scopes():
    # `last` holds a program_id comparison in the kernel, but inside `step` it is a plain Python
    # parameter (the kernel calls step(True)/step(False) through lax.cond): no finding there.
    text = (DATA / "pls006_program_id_if_ok.py").read_text().replace(
        "    o_ref[...] += jnp.sum(x_ref[...], axis=1, keepdims=True)\n",
        "    last = k == pl.num_programs(1) - 1\n\n"
        "    def step(last):\n"
        "        if last:\n"
        "            o_ref[...] += 0.0\n"
        "        o_ref[...] += jnp.sum(x_ref[...], axis=1, keepdims=True)\n\n"
        "    jax.lax.cond(last, lambda: step(True), lambda: step(False))\n")
    assert [f.code for f in analyze(text).findings] == []
    closure = text.replace("    def step(last):\n", "    def step(flag):\n")
    (finding,) = analyze(closure).findings  # now `last` is the kernel's traced value, seen by closure
    assert finding.code == "PLS006"


def test_returning_a_call_that_may_be_none_is_not_reported():
    text = (DATA / "pls009_kernel_returns_bad.py").read_text().replace(
        "    return jnp.exp(x_ref[...])",
        "    return helper(x_ref, o_ref)\n\n\ndef helper(x_ref, o_ref):\n    o_ref[...] = jnp.exp(x_ref[...])")
    assert [f.code for f in analyze(text).findings] == []


def test_interpret_mode_sites_get_no_tpu_compiler_rules():
    text = (DATA / "pls001_tiling_bad.py").read_text()
    interpreted = text.replace("        out_specs=spec,\n", "        out_specs=spec,\n        interpret=True,\n")
    assert [f.code for f in analyze(interpreted).findings] == []
    unknown = text.replace("        out_specs=spec,\n", "        out_specs=spec,\n        interpret=INTERPRET,\n")
    assert [f.code for f in analyze(unknown).findings] == []
    compiled = text.replace("def add(x, y):", "def add(x, y, *, interpret=False):").replace(
        "        out_specs=spec,\n", "        out_specs=spec,\n        interpret=interpret,\n")
    assert [f.code for f in analyze(compiled).findings] == ["PLS001"]


def test_nested_output_pytrees_are_not_counted():
    text = (DATA / "pls008_out_specs_count_ok.py").read_text().replace(
        "out_specs=[spec],", "out_specs=[spec, (spec,) * 2],").replace(
        "out_shape=[jax.ShapeDtypeStruct(x.shape, x.dtype)],",
        "out_shape=[jax.ShapeDtypeStruct(x.shape, x.dtype), (jax.ShapeDtypeStruct(x.shape, x.dtype),) * 2],")
    assert [f.code for f in analyze(text).findings if f.code == "PLS008"] == []


def test_related_locations():
    text = (DATA / "pls001_tiling_bad.py").read_text()
    (finding,) = analyze(text).findings
    assert text.splitlines()[finding.span.line] == "BLOCK_COLS = 100"  # issue 14: where the value was written
    (related,) = finding.related
    assert "pl.BlockSpec((BLOCK_ROWS, BLOCK_COLS)" in text.splitlines()[related.span.line]
    text5 = (DATA / "pls005_kernel_params_bad.py").read_text()
    (finding5,) = analyze(text5).findings
    assert "pl.pallas_call" in text5.splitlines()[finding5.related[0].span.line]
    text2 = (DATA / "pls002_index_map_arity_bad.py").read_text()
    (finding2,) = analyze(text2).findings
    assert "grid=" in text2.splitlines()[finding2.related[0].span.line]


def test_float64_without_x64_is_a_warning():
    text = (DATA / "pls011_float64_bad.py").read_text().replace(
        'jax.config.update("jax_enable_x64", True)', "")
    (finding,) = analyze(text).findings
    assert finding.code == "PLS011" and finding.severity == "warning" and "silently" in finding.message


def test_program_id_fix_rewrites_the_if_as_pl_when():
    text = (DATA / "pls006_program_id_if_bad.py").read_text()
    (finding,) = analyze(text).findings
    fixed = apply_fix(text, finding.fix)
    assert "    @pl.when(k == 0)\n    def _():\n        o_ref[...] = jnp.zeros_like(o_ref)\n" in fixed
    assert "    o_ref[...] += jnp.sum(x_ref[...], axis=1, keepdims=True)" in fixed


def test_program_id_fix_not_offered_when_the_body_assigns_locals():
    text = (DATA / "pls006_program_id_if_bad.py").read_text().replace(
        "        o_ref[...] = jnp.zeros_like(o_ref)\n", "        zero = jnp.zeros_like(o_ref)\n        o_ref[...] = zero\n")
    (finding,) = analyze(text).findings
    assert finding.code == "PLS006" and finding.fix is None


def test_return_fix_stores_into_the_output_ref():
    text = (DATA / "pls009_kernel_returns_bad.py").read_text()
    (finding,) = analyze(text).findings
    assert "o_ref[...] = jnp.exp(x_ref[...])" in apply_fix(text, finding.fix)
    assert apply_fix(text, finding.fix) == (DATA / "pls009_kernel_returns_ok.py").read_text().replace(
        "PLS009, fixed: the kernel writes its output ref and returns None.",
        "PLS009, broken: the kernel returns its result instead of writing it to the output ref.")


def test_removed_load_store_get_advice_that_the_installed_jax_supports():
    from pallasite.analysis.rules.apis import ADVICE, PALLAS, TPU, exports

    text = "from jax.experimental import pallas as pl\ndef k(x_ref, o_ref):\n    pl.store(o_ref, (), pl.load(x_ref, ()))\n"
    findings = analyze(text).findings
    assert [f.code for f in findings] == ["PLS007", "PLS007"]
    assert all("pltpu." in f.message and "plgpu." in f.message for f in findings)
    assert exports(PALLAS) is not None and "load" not in exports(PALLAS).names
    assert {"load", "store"} <= exports(TPU).names and set(ADVICE[PALLAS]) == {"load", "store"}
    assert {"load", "store"} <= exports("jax.experimental.pallas.triton").names


def test_flat_triton_compiler_params_make_the_site_gpu():
    text = (DATA / "pls011_float64_bad.py").read_text().replace(
        "        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),\n",
        "        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),\n        compiler_params=dict(num_warps=4),\n")
    result = analyze(text)
    assert result.sites[0].backend == "gpu" and result.findings == ()


def test_api_check_reads_the_jax_named_by_pallasite_jax_path(tmp_path, monkeypatch):
    from pallasite.analysis.rules import apis

    fake = tmp_path / "jax"
    (fake / "experimental" / "pallas").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "version.py").write_text('_version = "0.99.0"\n')
    (fake / "experimental" / "pallas" / "__init__.py").write_text(
        "from jax._src.pallas.core import BlockSpec as BlockSpec\nfrom x import pallas_call as pallas_call\n")
    (fake / "experimental" / "pallas" / "tpu.py").write_text("from y import TPUCompilerParams as TPUCompilerParams\n")
    monkeypatch.setenv("PALLASITE_JAX_PATH", str(fake))
    for cached in (apis.jax_root, apis.module_file, apis.installed_version):
        cached.cache_clear()
    try:
        text = (DATA / "pls007_renamed_api_bad.py").read_text()
        assert [f.code for f in analyze(text).findings] == []  # this "jax" still has TPUCompilerParams
        (finding,) = analyze(text.replace("pl.BlockSpec(", "pl.GridSpec(", 1)).findings
        assert "0.99.0" in finding.message
    finally:
        monkeypatch.delenv("PALLASITE_JAX_PATH")
        for cached in (apis.jax_root, apis.module_file, apis.installed_version):
            cached.cache_clear()
