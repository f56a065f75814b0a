"""Task formats and task mistakes as the compiler tiers see them (runner/tasks/tasks_runtime.py).

Native long form (several entries per file), JAXBench task files read as they are (with the
reference from a sibling baseline.py), and the task mistakes a user makes, each reported as a
PLS905 finding at the line that needs the change. Runs through one warm worker.
"""

from __future__ import annotations

import asyncio
import os

import pytest

from pallasite.engine.checker import Checker, CheckOptions
from pallasite.engine.workers.client import WorkerClient, WorkerConfig
from pallasite.engine.sources import sources_for
from pallasite.wire.messages import CheckParams

TASKS = os.path.join(os.path.dirname(__file__), "data", "compiler", "tasks")


@pytest.fixture(scope="module")
def env():
    loop = asyncio.new_event_loop()
    client = WorkerClient(WorkerConfig(timeout_s=120.0, memory_mb=3072))
    checker = Checker(CheckOptions(target="v5e", tiers=(0, 1), time_limit_s=120.0), client=client)

    class Env:
        def check(self, name):
            return loop.run_until_complete(checker.check(os.path.join(TASKS, name)))

        def raw(self, name, tiers=(1,)):
            params = CheckParams(source=sources_for(os.path.join(TASKS, name)), chip="v5e", tiers=tuple(tiers))
            reply = loop.run_until_complete(client.request(params))
            assert reply.status == "ok", reply.message
            return reply.result

    yield Env()
    loop.run_until_complete(client.close())
    loop.close()


def _errors(report):
    return [(f.code, f.span.line + 1) for f in report.findings if f.severity == "error"]


def _not_checked(report):
    """PLS9xx "could not check" findings: warnings, never errors."""
    return [(f.code, f.severity, f.span.line + 1) for f in report.findings if f.code.startswith("PLS9")]


def _line_of(name, needle):
    with open(os.path.join(TASKS, name), encoding="utf-8") as f:
        return next(i + 1 for i, line in enumerate(f) if needle in line)


def test_long_form_checks_each_entry_and_blames_only_the_broken_one(env):
    result = env.raw("long_form.py")
    entries = {e.name: e for e in result.entries}
    assert set(entries) == {"matmul", "softmax"}
    assert entries["matmul"].states() == {"1": "ok"}
    assert entries["matmul"].has_reference and entries["matmul"].tunables == {"bm": [256], "bn": [256], "bk": [512]}
    assert entries["softmax"].states() == {"1": "error"}
    assert entries["softmax"].tunables == {"block_rows": [8, 16, 32]}
    report = env.check("long_form.py")
    default_line = _line_of("long_form.py", "def softmax(x, *, block_rows: int = 4):")
    # tier 0's PLS001 and the lowering's PLS101 are one mistake: one finding, the lowering's agreement related,
    # both at the keyword default that set the block size (issue 14)
    [finding] = [f for f in report.findings if f.severity == "error" and f.span.line + 1 == default_line]
    assert (finding.code, [r.span.line + 1 for r in finding.related if "agrees with PLS001 (as PLS101)" in r.message]) == \
        ("PLS001", [default_line])
    verdicts = {k.name: dict(k.tiers)[1] for k in report.kernels}
    assert verdicts == {"matmul_kernel": "ok", "softmax_kernel": "error"}


def test_jaxbench_task_is_read_as_it_is_with_its_baseline(env):
    result = env.raw("jaxbench_add/task.py")
    [entry] = result.entries
    assert entry.name == "workload" and entry.format == "jaxbench"
    assert entry.has_reference is True  # workload() of the sibling baseline.py
    assert entry.states() == {"1": "ok"}
    assert entry.mosaic_calls == 1


def test_entry_named_wrong_is_pls905_at_the_setting(env):
    report = env.check("entry_named_wrong.py")
    assert _errors(report) == []
    assert _not_checked(report) == [("PLS905", "warning", _line_of("entry_named_wrong.py", "PALLASITE_ENTRY ="))]
    assert "scale_rows" in report.findings[0].message


def test_ambiguous_entry_is_pls905_naming_both_candidates(env):
    report = env.check("ambiguous_entry.py")
    [finding] = [f for f in report.findings if f.severity == "warning"]
    assert _errors(report) == []
    assert (finding.code, finding.span.line + 1) == ("PLS905", _line_of("ambiguous_entry.py", "def example_inputs"))
    assert "double" in finding.message and "triple" in finding.message and "PALLASITE_ENTRY" in finding.message


def test_failing_inputs_function_is_pls905_at_the_failing_line(env):
    report = env.check("inputs_raise.py")
    assert _errors(report) == []
    assert _not_checked(report) == [("PLS905", "warning", _line_of("inputs_raise.py", 'SETTINGS["columns"]'))]
    assert "KeyError" in report.findings[0].message


def test_inputs_made_as_arrays_are_read_abstractly_without_allocating(env):
    # 64 GiB of ones under a 3 GiB worker memory limit: only jax.eval_shape can read this.
    result = env.raw("huge_inputs.py")
    [entry] = result.entries
    assert entry.states() == {"1": "ok"}, entry.errors


def test_without_libtpu_tier2_is_skipped_with_the_install_hint_and_tier1_still_runs(monkeypatch):
    # In-process (worker side): pretend libtpu is not installed.
    import importlib.util as iu

    from pallasite.analysis import tier0
    from pallasite.runner import checks, tiers
    from pallasite.engine.findings import locate

    real_find_spec = iu.find_spec
    monkeypatch.setattr(iu, "find_spec",
                        lambda name, *a: None if name == "libtpu" else real_find_spec(name, *a))
    path = os.path.join(os.path.dirname(TASKS), "store_shape_fixed.py")
    result = checks.handle_check(CheckParams(source=sources_for(path), chip="v6e", tiers=(1, 2)))
    assert result.unavailable == {"2": tiers.LIBTPU_HINT}
    [entry] = result.entries
    assert entry.states() == {"1": "ok", "2": "skipped: libtpu is not installed"}
    with open(path, encoding="utf-8") as f:
        text = f.read()
    located = locate.locate_result(result, text, tier0.analyze(text, path, target="v6e"), "v6e")
    assert located.findings == ()
    assert located.notes == (f"tier 2 skipped: {tiers.LIBTPU_HINT} (PLS906)",)
    assert "pip install \"jax[tpu]==" in located.notes[0]


def test_entry_with_two_kernels_blames_the_one_that_failed(env):
    report = env.check("two_kernels.py")
    store_line = _line_of("two_kernels.py", "o_ref[...] = x_ref[...] + 1.0")
    # the declaration is the odd one out (the stored value has the input's float32): said there, the store related
    declared = _line_of("two_kernels.py", "out_shape=jax.ShapeDtypeStruct(x.shape, jnp.bfloat16)")
    assert _errors(report) == [("PLS104", declared)]
    assert store_line - 1 in [r.span.line for r in report.findings[0].related]  # spans are 0-based
    assert report.findings[0].kernel == "cast_kernel"
    verdicts = {k.name: dict(k.tiers)[1] for k in report.kernels}
    assert verdicts == {"scale_kernel": "skipped: kernel cast_kernel failed first", "cast_kernel": "error"}
