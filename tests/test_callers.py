"""A kernel file with no inputs of its own, checked through a call found in the workspace (issue 50).

tests/data/callers/ holds small workspaces (a ``pyproject.toml`` marks each root): ``plain`` (a kernel
module and a pytest-style test calling it), ``unittest_pkg`` (a package re-exporting an op whose kernel
module only ``ops.py`` imports, tested by a ``unittest.TestCase``), ``none`` (no caller at all). Before,
each kernel file read "not compiled for v6e: tier 2 skipped: no example inputs (PLS900)".
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from pallasite.analysis.callers import Limits, find_callers, workspace_root
from pallasite.engine.checker import CheckOptions, Checker

DATA = Path(__file__).parent / "data" / "callers"


def _check(path: Path, tiers=(0, 1), **options):
    async def run():
        checker = Checker(CheckOptions(target="v6e", tiers=tiers, **options))
        try:
            return await checker.check(str(path))
        finally:
            await checker.close()

    return asyncio.run(run())


def test_the_workspace_root_is_the_nearest_project_folder(tmp_path):
    assert workspace_root(str(DATA / "plain" / "kernels" / "scale.py")) == str(DATA / "plain")
    loose = tmp_path / "a" / "k.py"
    loose.parent.mkdir()
    loose.write_text("")
    assert workspace_root(str(loose), cwd=str(tmp_path)) == str(tmp_path)  # no marker: the working folder
    assert workspace_root(str(loose), cwd="/nonexistent") == str(loose.parent)


def test_a_test_that_imports_the_module_is_its_caller_with_the_test_that_reaches_it():
    search = find_callers(str(DATA / "plain" / "kernels" / "scale.py"))
    (caller,) = search.callers
    assert caller.shown == "tests/test_scale.py" and caller.alias == "kernels.scale" and caller.exact
    assert caller.tests == ("test_scale_doubles",)  # through the helper it calls, not only by name
    assert search.files == 3 and not search.stopped  # kernels/__init__.py, kernels/scale.py, the test


def test_a_kernel_module_reached_through_the_packages_op_is_followed_to_its_tests():
    search = find_callers(str(DATA / "unittest_pkg" / "mm" / "kernel.py"))
    (caller,) = search.callers
    assert caller.shown == "tests/test_ops.py" and caller.alias == "mm.kernel" and not caller.exact
    assert caller.tests == ("MatmulTest.test_matmul",)  # test_shapes_only does not use the package


def test_the_search_is_bounded_and_says_where_it_stopped():
    search = find_callers(str(DATA / "plain" / "kernels" / "scale.py"), limits=Limits(files=1))
    assert search.stopped == "the limit of 1 files" and search.files == 1
    assert "stopped at the limit of 1 files" in search.describe()
    assert not find_callers(str(DATA / "none" / "kernels" / "scale.py")).callers


def test_a_kernel_module_is_checked_at_the_shapes_its_test_calls_it_with():
    report = _check(DATA / "plain" / "kernels" / "scale.py")
    assert not [f for f in report.findings if f.code == "PLS900"], report.findings
    (kernel,) = report.kernels
    assert dict(kernel.tiers)[1] == "ok"
    (note,) = [n for n in report.notes if "checked as called from" in n]
    assert "scale: checked as called from tests/test_scale.py:15 (test_scale_doubles)" in note


def test_a_wrong_block_reached_only_through_a_test_is_found_in_the_kernel_file(tmp_path):
    import shutil

    shutil.copytree(DATA / "plain", tmp_path / "plain")
    test = tmp_path / "plain" / "tests" / "test_scale.py"
    test.write_text(test.read_text().replace("block_rows=16", "block_rows=12"))  # 12 rows: not a multiple of 8
    report = _check(tmp_path / "plain" / "kernels" / "scale.py")
    (error,) = [f for f in report.findings if f.severity == "error"]
    # at the BlockSpec of kernels/scale.py: the 12 was written in the test, not at the file's default of 8
    assert error.code == "PLS101" and error.span.line == 14, error
    (called,) = [r for r in error.related if r.path is not None]  # the test's call is a related place
    assert called.path.endswith("tests/test_scale.py") and called.span.line == 14


def test_a_unittest_case_reaching_the_kernel_through_the_package_gives_its_shapes():
    report = _check(DATA / "unittest_pkg" / "mm" / "kernel.py")
    assert dict(report.kernels[0].tiers)[1] == "ok", report
    assert any("matmul: checked as called from tests/test_ops.py:17 (test_matmul)" in n for n in report.notes)


def test_without_a_caller_the_message_says_what_was_searched_and_the_one_line_to_add():
    report = _check(DATA / "none" / "kernels" / "scale.py")
    (missing,) = [f for f in report.findings if f.code == "PLS900"]
    assert "No file of the workspace calls it (searched 2 Python files" in missing.message
    assert ("add `def example_inputs(): return (jax.ShapeDtypeStruct((1024, 128), jnp.float32),)` (one "
            "ShapeDtypeStruct per argument of scale") in missing.message


def test_callers_are_not_searched_when_the_options_say_so():
    report = _check(DATA / "plain" / "kernels" / "scale.py", callers=False)
    assert [f.code for f in report.findings] == ["PLS900"]


def test_a_test_importing_the_package_by_its_installed_name_runs_the_checked_copy():
    """The test puts an installed copy of the package first on its path (as jax's tests import
    jax.experimental.pallas.ops.tpu from the jax wheel, not from a copy of ops/tpu beside them): its
    import of ``vendorpkg.scale`` gives the file being checked, whose 12-row blocks the lowering rejects."""
    report = _check(DATA / "copy" / "src" / "vendorpkg" / "scale.py")
    (error,) = [f for f in report.findings if f.severity == "error"]
    assert error.code == "PLS101" and "(12, 128)" in error.message and error.span.line == 11
    assert any("checked as called from tests/test_vendor.py:15 (test_scale)" in n for n in report.notes)


def test_a_helper_named_like_an_inputs_function_is_not_a_task():
    from pallasite.analysis.tier0 import analyze
    from pallasite.engine.checker import _has_task

    helper = "def static_validate_inputs(q, k):\n    pass\n"
    assert not _has_task(analyze(helper, "k.py"), helper)  # jax's ragged paged attention has one
    long_form = "def matmul(x, y):\n    pass\n\ndef matmul_inputs():\n    pass\n"
    assert _has_task(analyze(long_form, "k.py"), long_form)
    assert _has_task(analyze("PALLASITE_ENTRY = 'f'\n", "k.py"), "PALLASITE_ENTRY = 'f'\n")


def test_a_benchmark_scripts_main_is_a_caller_and_so_is_top_level_code(tmp_path):
    search = find_callers(str(DATA / "bench" / "kernels" / "rmsnorm.py"))
    (caller,) = search.callers
    assert caller.shown == "benchmarks/bench_rmsnorm.py" and caller.tests == ("main",) and not caller.at_import
    script = tmp_path / "run.py"  # a notebook-style script: the call at its top level
    kernel = tmp_path / "kern.py"
    kernel.write_text("def f(x):\n    return x\n")
    script.write_text("import kern\n\nx = kern.f(1)\n")
    (found,) = find_callers(str(kernel), str(tmp_path)).callers
    assert found.at_import and found.tests == ()


def test_a_benchmark_gives_the_shapes_of_the_kernel_it_times():
    report = _check(DATA / "bench" / "kernels" / "rmsnorm.py")
    assert dict(report.kernels[0].tiers)[1] == "ok", report
    assert any("rmsnorm: checked as called from benchmarks/bench_rmsnorm.py:13 (main)" in n for n in report.notes)


def test_a_wrappers_deferred_call_reaches_the_one_site_of_the_function_that_made_it():
    """tokamax's ``call = custom_buffered_pallas_call(...)`` (a wrapper of another file, read by tier 0 as the
    site) then ``call(...)``: the wrapper's pallas_call runs at the later line, outside the site."""
    from types import SimpleNamespace

    from pallasite.analysis.types import Span
    from pallasite.engine.findings import reach

    text = "def gmm(x):\n    call = wrap(k,\n        grid=g)\n    y = 1\n    return call(x)\n\ndef tgmm(x):\n    return 0\n"
    site = SimpleNamespace(span=Span(1, 11, 2, 15), kernel_def_span=None, enclosing_function="gmm")
    other = SimpleNamespace(span=Span(7, 11, 7, 12), kernel_def_span=None, enclosing_function="tgmm")
    functions = reach.function_lines(text)
    assert functions == {"gmm": (0, 4), "tgmm": (6, 7)}
    deferred = {"lines": [5], "kernel": "pipeline", "site": ["/lib/mosaic_tpu.py", 250]}
    assert reach.reached_sites([site, other], [deferred], functions) == [site]
    assert reach.reached_sites([site, other], [{**deferred, "site": None}], functions) == []  # the file's own call
    assert reach.reached_sites([site, other], [{"lines": [2], "kernel": "k"}], functions) == [site]  # by its lines
