"""Verdicts that cannot lie, on real-size fixtures (tests/data/honest/), end to end through the checker.

Each test failed before its fix: tier 3 ran the 4096 x 4096 GEMM at full size (its grid_spec's
BlockSpecs were not read); a forward-only task marked the backward kernels "ok"; a tier-3 memory
stop flipped tiers 1-2 to "error"; the vmapped kernel's interpreter failure was the kernel's PLS300;
a reference with another parameter list was "kernel failed".
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from pallasite.engine.checker import CheckOptions, Checker, check_paths

DATA = Path(__file__).parent / "data" / "honest"
FILES = ("gemm_4096.py", "vmapped_blocks.py", "reference_mismatch.py", "forward_only_task.py")


@pytest.fixture(scope="module")
def reports():
    out = check_paths([str(DATA / n) for n in FILES], CheckOptions(target="v5e", tiers=(0, 1, 3), time_limit_s=180))
    return {Path(r.path).name: r for r in out}


def _states(report):
    return [dict(k.tiers) for k in report.kernels]


def test_real_size_gemm_is_interpreted_shrunk_and_says_so(reports):
    report = reports["gemm_4096.py"]
    assert [f.code for f in report.findings if f.severity in ("error", "warning")] == [], \
        [f.message for f in report.findings]
    assert _states(report) == [{0: "ok", 1: "ok", 2: "not run", 3: "ok"}]
    note = next(n for n in report.notes if n.startswith("tier 3:"))
    assert ("interpret run at bfloat16[1024, 1024], bfloat16[1024, 1024], shrunk from bfloat16[4096, 4096], "
            "bfloat16[4096, 4096] (block shapes kept, the grid shrunk") in note
    assert "CPU interpret mode (not TPU time)" in note


def test_vmapped_kernel_interpreter_failure_is_not_checked_with_the_upstream_reason(reports):
    report = reports["vmapped_blocks.py"]
    found = [(f.code, f.severity) for f in report.findings]
    assert found == [("PLS306", "warning")], [f.message for f in report.findings]
    message = report.findings[0].message
    assert "jax.vmap" in message and "safe_zip() argument" in message
    states = _states(report)[0]
    assert states[1] == "ok"
    assert states[3].startswith("not checked: jax's TPU interpreter")


def test_reference_with_another_signature_is_a_task_error(reports):
    report = reports["reference_mismatch.py"]
    assert [(f.code, f.span.line + 1) for f in report.findings] == [("PLS905", 28)], [f.message for f in report.findings]
    assert "the reference cannot be called like the candidate" in report.findings[0].message
    states = _states(report)[0]
    assert states[1] == "ok" and states[3].startswith("not checked: the reference")


def test_kernels_the_task_does_not_reach_are_not_reached(reports):
    report = reports["forward_only_task.py"]
    by_name = {k.name: dict(k.tiers) for k in report.kernels}
    assert by_name["scale_fwd_kernel"] == {0: "ok", 1: "ok", 2: "not run", 3: "ok"}
    for name in ("scale_bwd_x_kernel", "scale_bwd_w_kernel"):
        assert by_name[name] == {0: "ok", 1: "not reached by the task", 2: "not run", 3: "not reached by the task"}


def test_a_raise_in_an_unreached_kernel_does_not_read_ok():
    path = DATA / "forward_only_task.py"
    text = path.read_text().replace("    dx_ref[...] = g_ref[...] * w_ref[...]",
                                    "    raise RuntimeError('broken')\n    dx_ref[...] = g_ref[...] * w_ref[...]")

    async def run():
        checker = Checker(CheckOptions(target="v5e", tiers=(1,), time_limit_s=120))
        try:
            return await checker.check(str(path), text)
        finally:
            await checker.close()

    report = asyncio.run(run())
    by_name = {k.name: dict(k.tiers) for k in report.kernels}
    assert by_name["scale_bwd_x_kernel"][1] == "not reached by the task"
    assert by_name["scale_fwd_kernel"][1] == "ok"


def test_tier3_memory_stop_leaves_tiers_1_and_2_ok():
    report = check_paths([str(DATA / "tier3_memory_stop.py")],
                         CheckOptions(target="v5e", tiers=(1, 2, 3), memory_mb=1500, time_limit_s=120))[0]
    assert [(f.code, f.severity, f.tier) for f in report.findings] == [("PLS307", "warning", 3)], \
        [f.message for f in report.findings]
    assert "memory limit (1500 MiB)" in report.findings[0].message
    states = _states(report)[0]
    assert states[1] == "ok" and states[2] == "ok"
    assert states[3] == "not checked: the interpret-mode run reached the memory limit (1500 MiB) (PLS307)"


# --------------------------------------------------------------------------- where values were written


ORIGINS = {  # file -> (code, line of the value that breaks the rule, what the message names)
    "origin_dict_entry.py": ("PLS101", 14, "a dict entry: TUNED_PARAMS['block_n'] = 200"),
    "origin_dataclass_field.py": ("PLS101", 15, "a dataclass field default: RmsNormConfig.block_rows = 100"),
    "origin_keyword_default.py": ("PLS101", 15, "a keyword default: block_cols=96"),
}


@pytest.fixture(scope="module")
def origin_reports():
    out = check_paths([str(DATA / n) for n in ORIGINS], CheckOptions(target="v5e", tiers=(0, 1), time_limit_s=120))
    return {Path(r.path).name: r for r in out}


@pytest.mark.parametrize("name", sorted(ORIGINS))
def test_block_size_finding_is_at_the_line_that_set_it(origin_reports, name):
    code, line, said = ORIGINS[name]
    report = origin_reports[name]
    errors = [f for f in report.findings if f.severity == "error"]
    assert [(f.code, f.span.line + 1) for f in errors] == [(code, line)], [f.message for f in errors]
    assert said in errors[0].message
    related = {r.message for r in errors[0].related}
    assert "the BlockSpec that uses this value" in related
    assert related & {"the pallas_call", "in this pallas_call"}


def test_origin_tracing_follows_unpacking_splats_and_call_sites():
    from pallasite.analysis.origins import trace
    from pallasite.analysis.tier0 import analyze

    text = (DATA / "gemm_4096.py").read_text()
    [site] = analyze(text, "gemm_4096.py").sites
    origin = trace(text, site.in_specs[0].dim_spans[0])  # block_m, passed as matmul(x, y, **TUNED)
    assert origin.line + 1 == 15 and origin.value == 512
    text = (DATA / "origin_dict_entry.py").read_text()
    [site] = analyze(text, "origin_dict_entry.py").sites
    origin = trace(text, site.out_specs[0].dim_spans[0])  # bm, from `bm, bn = block_shape`
    assert (origin.line + 1, origin.kind, origin.value) == (12, "dict entry", 256)
    assert trace("x = (", site.span) is None  # no parse: no origin, no exception


def test_tier0_reads_a_pallas_call_wrapper_as_a_site():
    from pallasite.analysis.tier0 import analyze

    result = analyze((DATA / "wrapper_site.py").read_text(), "wrapper_site.py")
    assert [s.kernel_name for s in result.sites if s.kernel_name == "copy_kernel"] == ["copy_kernel"] * 2
    assert [(f.code, f.span.line + 1) for f in result.findings] == [("PLS002", 37)]
    imported = ("from jax.experimental import pallas as pl\nfrom tokamax.kernels import block\n\n"
                "def f(x):\n    return block.pallas_call(k, out_shape=x, grid=(2,), in_specs=[pl.BlockSpec((8, 128), "
                "lambda i, j: (i, 0))], out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)))(x)\n")
    result = analyze(imported, "imported.py")
    assert [s.span.line + 1 for s in result.sites] == [5]
    assert "PLS002" in [f.code for f in result.findings]
