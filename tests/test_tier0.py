"""The tier-0 contract: analyze() on syntax errors, non-Pallas files, unicode, jax's own kernels,
and suppression comments / severity overrides."""

from __future__ import annotations

import glob
import os
from pathlib import Path

import pytest

from pallasite.analysis.rules.apis import jax_root
from pallasite.analysis.suppress import apply_suppressions
from pallasite.analysis.tier0 import SourceAnalysis, analyze

DATA = Path(__file__).parent / "data" / "tier0"
HEADER = "from jax.experimental import pallas as pl\n"


def test_analysis_shape():
    path = DATA / "pls004_semantics_bad.py"
    result = analyze(path.read_text(), str(path), target="v5e")
    assert isinstance(result, SourceAnalysis)
    assert result.path == str(path) and result.uses_pallas and result.syntax_ok
    assert len(result.sites) == 1 and result.sites[0].kernel_name == "relu_kernel"
    assert [t.entry for t in result.tasks] == ["relu"]


def test_syntax_error_gives_pls000_at_pythons_position():
    text = HEADER + "def kernel(x_ref, o_ref):\n    o_ref[...] = (x_ref[...]\n\ny = 1\n"
    result = analyze(text, "k.py")
    assert not result.syntax_ok
    (finding,) = result.findings
    assert finding.code == "PLS000" and finding.severity == "error"
    assert finding.span.line == 2 and finding.span.column == 17  # the unclosed "("
    assert "never closed" in finding.message


def test_syntax_error_that_tree_sitter_accepts_is_still_reported():
    text = HEADER + 'print "hello"\n'  # Python 2: tree-sitter parses it, Python does not
    result = analyze(text)
    assert not result.syntax_ok and [f.code for f in result.findings] == ["PLS000"]
    assert result.findings[0].span.line == 1


def test_non_pallas_file_has_no_findings():
    text = "import jax.numpy as jnp\n\ndef f(x):\n    return x.astype(jnp.float64)\n"
    result = analyze(text, "plain.py")
    assert not result.uses_pallas and result.findings == () and result.sites == ()


@pytest.mark.parametrize("imports", [
    "from jax.experimental import pallas as pl",
    "import jax.experimental.pallas as pl",
    "from jax.experimental.pallas import tpu as pltpu",
    "from jax.experimental.pallas import pallas_call",
    "import jax.experimental.pallas.triton as plgpu",
])
def test_pallas_is_recognised_under_any_alias(imports):
    assert analyze(imports + "\n").uses_pallas


def test_unicode_columns_are_code_points():
    text = (DATA / "pls012_grid_float_bad.py").read_text().replace(
        "        grid=(x.shape[0] / BLOCK,),", '        name="größe∑", grid=(x.shape[0] / BLOCK,),')
    (finding,) = analyze(text).findings
    line = text.splitlines()[finding.span.line]
    assert line[finding.span.column:finding.span.end_column] == "x.shape[0] / BLOCK"
    assert finding.span.column == len('        name="größe∑", grid=(')


def test_unicode_before_the_span_on_the_same_line():
    text = (HEADER + "def k(x_ref, o_ref):\n"
            "    ß = 1; o_ref[...] = x_ref[...].astype(\"float64\")\n"
            "def f(x):\n    return pl.pallas_call(k, out_shape=x)(x)\n")
    (finding,) = analyze(text).findings
    line = text.splitlines()[finding.span.line]
    assert finding.code == "PLS011"
    assert line[finding.span.column:finding.span.end_column] == '"float64"'


@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_analyze_never_raises_on_odd_code():
    odd = [
        HEADER + "pl.pallas_call()\n",
        HEADER + "pl.pallas_call(*a, **k)(*b)\n",
        HEADER + "f = pl.pallas_call\nf(lambda *r: None, grid=g, in_specs=s)(x)\n",
        HEADER + "pl.pallas_call(k, grid=(1.5, 'a', None), in_specs=[*s], out_specs=pl.BlockSpec())(x)\n",
        HEADER + "pl.pallas_call(k, grid_spec=make(), compiler_params={'mosaic': 3})(x)\n",
        HEADER + "x = pl.BlockSpec(block_shape=SHAPE, index_map=lambda *a: a)\n",
        HEADER + "def k(a):\n  if pl.program_id(0):\n    return 1\npl.pallas_call(k, out_shape=[])()\n",
        "\x00",
        "",
    ]
    for text in odd:
        result = analyze(text)
        assert isinstance(result, SourceAnalysis)


def _jax_kernel_files() -> list[str]:
    root = jax_root()
    if root is None:
        return []
    files = glob.glob(os.path.join(root, "experimental", "pallas", "ops", "**", "*.py"), recursive=True)
    return sorted(f for f in files if "pallas_call" in Path(f).read_text(encoding="utf-8"))


JAX_KERNELS = _jax_kernel_files()


def test_jax_kernels_were_found():
    assert len(JAX_KERNELS) >= 10


@pytest.mark.filterwarnings("error::RuntimeWarning")  # a rule that crashed would hide findings
@pytest.mark.parametrize("path", JAX_KERNELS, ids=lambda p: p.split("ops" + os.sep)[-1])
def test_no_errors_on_jax_own_kernels(path):
    result = analyze(Path(path).read_text(encoding="utf-8"), path)
    assert result.syntax_ok and result.sites
    errors = [(f.code, f.span.line + 1, f.message) for f in result.findings if f.severity == "error"]
    assert errors == []


# ---------------------------------------------------------------------------- suppressions


def _bad(name: str) -> str:
    return (DATA / name).read_text()


def test_suppression_on_the_same_line():
    text = _bad("pls004_semantics_bad.py").replace(
        '("parallel",)),', '("parallel",)),  # pallasite: ignore[PLS004]')
    findings = analyze(text).findings
    assert [f.code for f in findings] == ["PLS004"]
    assert apply_suppressions(findings, text, {}) == ()


def test_suppression_on_the_line_above():
    text = _bad("pls009_kernel_returns_bad.py").replace(
        "    return jnp.exp", "    # pallasite: ignore\n    return jnp.exp")
    findings = analyze(text).findings
    assert [f.code for f in findings] == ["PLS009"]
    assert apply_suppressions(findings, text, {}) == ()


def test_suppression_of_another_code_keeps_the_finding():
    text = _bad("pls004_semantics_bad.py").replace(
        '("parallel",)),', '("parallel",)),  # pallasite: ignore[PLS001, PLS002]')
    assert [f.code for f in apply_suppressions(analyze(text).findings, text, {})] == ["PLS004"]


def test_trailing_comment_on_the_line_above_does_not_suppress():
    text = _bad("pls009_kernel_returns_bad.py").replace(
        "def exp_kernel(x_ref, o_ref):", "def exp_kernel(x_ref, o_ref):  # pallasite: ignore")
    assert [f.code for f in apply_suppressions(analyze(text).findings, text, {})] == ["PLS009"]


def test_suppression_text_inside_a_string_is_not_a_comment():
    text = _bad("pls009_kernel_returns_bad.py").replace(
        "    return jnp.exp(x_ref[...])", '    return jnp.exp(x_ref[...]) + len("# pallasite: ignore")')
    findings = analyze(text).findings
    assert [f.code for f in apply_suppressions(findings, text, {})] == ["PLS009"]


def test_severity_overrides():
    text = _bad("pls004_semantics_bad.py")
    findings = analyze(text).findings
    (warned,) = apply_suppressions(findings, text, {"PLS004": "warning"})
    assert warned.severity == "warning" and warned.code == "PLS004"
    assert apply_suppressions(findings, text, {"PLS004": "off"}) == ()
    assert apply_suppressions(findings, text, {"PLS001": "off"}) == findings
    assert apply_suppressions(findings, text, {"PLS004": "loud"}) == findings  # invalid: ignored


def test_a_failing_rule_is_skipped_with_a_warning(monkeypatch):
    from pallasite.analysis import rules

    def broken(ctx):
        raise KeyError("boom")
        yield  # pragma: no cover

    real = rules.all_rules
    monkeypatch.setattr(rules, "all_rules", lambda: (broken, *real()))
    with pytest.warns(RuntimeWarning, match="broken failed"):
        result = analyze(_bad("pls004_semantics_bad.py"))
    assert [f.code for f in result.findings] == ["PLS004"]


@pytest.mark.slow
@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_whole_installed_jax_reads_without_crashing():
    root = jax_root()
    assert root is not None
    count = 0
    for path in glob.glob(os.path.join(root, "**", "*.py"), recursive=True):
        text = Path(path).read_text(encoding="utf-8", errors="replace")
        assert isinstance(analyze(text, path), SourceAnalysis)
        count += 1
    assert count > 500


def test_apply_edits_with_unicode_and_overlaps():
    from pallasite.analysis.source import apply_edits
    from pallasite.analysis.types import Span, TextEdit

    text = "größe = 1\nx = 'ü'; y = 2\n"
    edits = [TextEdit(Span(1, 9, 1, 10), "y2"), TextEdit(Span(0, 0, 0, 5), "size")]
    assert apply_edits(text, edits) == "size = 1\nx = 'ü'; y2 = 2\n"
    with pytest.raises(ValueError, match="overlapping"):
        apply_edits(text, [TextEdit(Span(0, 0, 0, 5), "a"), TextEdit(Span(0, 3, 0, 6), "b")])


def test_tier0_never_imports_jax():
    code = ("import sys; from pallasite.analysis.tier0 import analyze; "
            f"analyze(open({str(DATA / 'pls007_renamed_api_bad.py')!r}).read()); "
            "print(sorted(m for m in sys.modules if m == 'jax' or m.startswith(('jax.', 'jaxlib'))))")
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_syntax_error_column_counts_code_points():
    text = HEADER + 's = "größe∑" ) 1\n'
    (finding,) = analyze(text).findings
    line = text.splitlines()[finding.span.line]
    assert finding.code == "PLS000" and line[finding.span.column:finding.span.end_column] == ")"
