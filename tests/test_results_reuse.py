"""Reusing stored verdicts: `pallasite check` records every check and skips an unchanged tier 2.

The checker asks the worker for tier 1 (which returns the lowered module's hash), looks the tier-2
verdict up in the results store (engine/store_cache.py over knowledge/store.py) and asks the
worker for tier 2 only on a miss. A counting wrapper around one real, warm worker tells whether
tier 2 was requested. Tier 2 needs libtpu (``tpu_compiler``); the broken-cache test does not.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import shutil

import pytest

from pallasite.knowledge.store import ResultsStore
from pallasite.engine.checker import Checker, CheckOptions
from pallasite.engine.workers.client import Reply
from pallasite.engine.store_cache import StoreCache, workspace_for
from pallasite.wire.messages import check_result_from_plain

HERE = os.path.dirname(__file__)
FIXTURE = os.path.join(HERE, "data", "results_reuse", "scaled_rows.py")
CORPUS = os.path.join(HERE, "data", "compiler")
HAS_LIBTPU = importlib.util.find_spec("libtpu") is not None


class CountingClient:
    """A real worker client that remembers the tiers of every check request."""

    def __init__(self, inner):
        self.inner = inner
        self.tiers: list[tuple[int, ...]] = []

    async def request(self, params, **kwargs):
        self.tiers.append(tuple(params.tiers))
        return await self.inner.request(params, **kwargs)

    def tier2_requests(self) -> int:
        return sum(2 in t for t in self.tiers)


@pytest.fixture(scope="module")
def worker():
    from pallasite.engine.workers.client import WorkerClient, WorkerConfig

    loop = asyncio.new_event_loop()
    client = WorkerClient(WorkerConfig(timeout_s=180.0))
    yield loop, client
    loop.run_until_complete(client.close())
    loop.close()


@pytest.fixture
def check(worker, tmp_path):
    """check(path, text=None, target="v5e") -> (FileReport, tier-2 requests it made), one store."""
    loop, inner = worker
    cache = StoreCache(tmp_path)

    def run(path, text=None, target="v5e"):
        client = CountingClient(inner)
        checker = Checker(CheckOptions(target=target, tiers=(0, 1, 2), time_limit_s=180.0), client=client, cache=cache)
        report = loop.run_until_complete(checker.check(path, text))
        return report, client.tier2_requests()

    yield run
    cache.close()


def _copy(tmp_path, source=FIXTURE) -> str:
    target = tmp_path / os.path.basename(source)
    shutil.copy(source, target)
    return str(target)


def _reuse_notes(report):
    return [n for n in report.notes if "reused from" in n]


@pytest.mark.tpu_compiler
@pytest.mark.skipif(not HAS_LIBTPU, reason="libtpu is not installed")
def test_second_check_of_an_unchanged_file_reuses_tier2(check, tmp_path):
    path = _copy(tmp_path)
    first, compiled = check(path)
    assert compiled == 1 and _reuse_notes(first) == []
    assert [dict(k.tiers)[2] for k in first.kernels] == ["ok"]
    second, compiled = check(path)
    assert compiled == 0  # the worker was not asked for tier 2
    [note] = _reuse_notes(second)
    assert note.startswith("tier 2 for v5e reused from ") and ".pallasite/results.sqlite" in note
    assert "scale_rows: ok" in note and "libtpu" in note
    assert [dict(k.tiers)[2] for k in second.kernels] == ["ok"]
    with ResultsStore.open(tmp_path) as store:
        assert store.info().counts["checks"] == 3  # tier 1 twice, tier 2 once (reuse is not re-recorded)


@pytest.mark.tpu_compiler
@pytest.mark.skipif(not HAS_LIBTPU, reason="libtpu is not installed")
def test_a_reused_error_keeps_its_finding_at_its_line(check, tmp_path):
    path = _copy(tmp_path, os.path.join(CORPUS, "reshape_relayout_broken.py"))
    first, compiled = check(path)
    assert compiled == 1
    second, compiled = check(path)
    assert compiled == 0 and _reuse_notes(second)
    errors = lambda r: [(f.code, f.span.line + 1, f.message) for f in r.findings if f.severity == "error"]  # noqa: E731
    assert errors(second) == errors(first) and errors(first)[0][:2] == ("PLS202", 13)
    assert [dict(k.tiers)[2] for k in second.kernels] == ["error"]


@pytest.mark.tpu_compiler
@pytest.mark.skipif(not HAS_LIBTPU, reason="libtpu is not installed")
@pytest.mark.parametrize("old, new", [
    ("SCALE = 2.0", "SCALE = 3.0"),  # a module constant the kernel reads
    ("    return x * SCALE", "    return x + SCALE"),  # the body of a helper function the kernel calls
], ids=["module-constant", "helper-function"])
def test_an_edit_that_changes_the_lowered_kernel_recompiles(check, tmp_path, old, new):
    path = _copy(tmp_path)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    assert text.count(old) == 1
    check(path, text)
    _, compiled = check(path, text.replace(old, new))
    assert compiled == 1  # same lines, different kernel: not reused
    report, compiled = check(path, text)
    assert compiled == 0 and _reuse_notes(report)  # back to the original: its verdict is still stored


@pytest.mark.tpu_compiler
@pytest.mark.skipif(not HAS_LIBTPU, reason="libtpu is not installed")
def test_another_chip_does_not_reuse(check, tmp_path):
    path = _copy(tmp_path)
    check(path, target="v5e")
    report, compiled = check(path, target="v6e")
    assert compiled == 1 and _reuse_notes(report) == []
    _, compiled = check(path, target="v6e")
    assert compiled == 0


class FailingCache:
    """A results cache whose storage is broken."""

    def source_hash(self, path, text):
        raise OSError("disk I/O error")

    def get(self, key, tier):
        raise OSError("disk I/O error")

    def put(self, key, tier, status, findings, *, path):
        raise OSError("disk I/O error")


def test_a_broken_cache_is_one_note_and_the_check_still_runs():
    import json

    with open(os.path.join(CORPUS, "records.json"), encoding="utf-8") as f:
        recorded = json.load(f)["cases"]["store_shape"]  # the worker's real tier-1 result

    class Client:
        async def request(self, params, **kwargs):
            return Reply(status="ok", result=check_result_from_plain(recorded))

    checker = Checker(CheckOptions(target="v5e", tiers=(0, 1, 2)), client=Client(), cache=FailingCache())
    report = asyncio.run(checker.check(os.path.join(CORPUS, "store_shape_broken.py")))
    assert [(f.code, f.span.line + 1) for f in report.findings if f.severity == "error"] == [("PLS104", 13)]
    notes = [n for n in report.notes if n.startswith("results cache not used")]
    assert len(notes) == 1 and "disk I/O error" in notes[0]


def test_the_store_lives_in_the_nearest_workspace(tmp_path):
    (tmp_path / "pyproject.toml").write_text("")
    kernels = tmp_path / "kernels"
    kernels.mkdir()
    (kernels / "k.py").write_text("")
    assert workspace_for([str(kernels / "k.py")]) == tmp_path.resolve()
    (kernels / ".pallasite").mkdir()
    assert workspace_for([str(kernels / "k.py")]) == kernels.resolve()  # a store within the project wins


def test_a_stray_ancestor_store_is_ignored(tmp_path, monkeypatch, capsys):
    """A ``.pallasite`` above the project (say ``~/.pallasite``) must not capture it: check, store
    and the server all place the store in the project (nearest pyproject.toml or .git)."""
    from pallasite.knowledge.store import find_workspace
    from pallasite.server.cli import main

    home = tmp_path / "home"
    (home / ".pallasite").mkdir(parents=True)
    project = home / "proj"
    (project / ".git").mkdir(parents=True)
    (project / "kernels").mkdir()
    kernel = project / "kernels" / "k.py"
    kernel.write_text("")
    assert workspace_for([str(kernel)]) == project.resolve()
    assert find_workspace(project / "kernels") == project.resolve()
    monkeypatch.chdir(project / "kernels")
    assert main(["store", "info"]) == 0
    assert str(project / ".pallasite" / "results.sqlite") in capsys.readouterr().out
    loose = tmp_path / "loose"  # no project above: the folder itself, not the stray store above it
    loose.mkdir()
    assert find_workspace(loose / "k.py") == loose.resolve()


@pytest.mark.tpu_compiler
@pytest.mark.skipif(not HAS_LIBTPU, reason="libtpu is not installed")
def test_tier3_still_runs_after_a_reused_tier2_and_skips_after_a_reused_error(worker, tmp_path):
    loop, inner = worker
    cache = StoreCache(tmp_path)

    def run(path):
        client = CountingClient(inner)
        checker = Checker(CheckOptions(target="v5e", tiers=(0, 1, 2, 3), time_limit_s=180.0), client=client, cache=cache)
        return loop.run_until_complete(checker.check(path)), client.tiers

    try:
        clean = _copy(tmp_path)
        run(clean)
        report, asked = run(clean)
        assert asked == [(1,), (3,)]  # tier 2 reused, tier 3 asked for
        assert [(dict(k.tiers)[2], dict(k.tiers)[3]) for k in report.kernels] == [("ok", "ok")]
        assert _reuse_notes(report) and any(n.startswith("tier 3: scale_rows ran") for n in report.notes)
        broken = _copy(tmp_path, os.path.join(CORPUS, "reshape_relayout_broken.py"))
        run(broken)
        report, asked = run(broken)
        assert (2,) not in asked and (2, 3) not in asked
        assert [(dict(k.tiers)[2], dict(k.tiers)[3]) for k in report.kernels] == [("error", "skipped: tier 2 failed")]
    finally:
        cache.close()
