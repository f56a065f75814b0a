"""A damaged results store is found and said: SQLite's ``quick_check`` runs when the store opens,
`pallasite store` explains and offers `clear`, `check` and `tune` say once that results are not
recorded and why (before: a page-corrupted file was read and written without a word, and `tune`
died with a traceback)."""

from __future__ import annotations

import asyncio
import os
import shutil
import sqlite3
from pathlib import Path

import pytest

from pallasite.analysis.types import ResultKey
from pallasite.knowledge.store import ResultsStore, StoreDamaged, StoreError, problem, store_path
from pallasite.server.cli import main

DATA = Path(__file__).parent / "data"
PAGE = 4096


def damage(workspace: Path) -> Path:
    """A real store with a few hundred rows, its fourth page's b-tree header overwritten."""
    with ResultsStore.open(workspace) as store:
        for i in range(300):
            store.put_check(ResultKey(code_hash=f"source:{i}", kernel="k", chip="v5e"), tier=1, status="ok",
                            path=f"/x/{i}.py")
    path = store_path(workspace)
    db = sqlite3.connect(path)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    assert path.stat().st_size > 8 * PAGE
    with open(path, "r+b") as f:
        f.seek(3 * PAGE)
        f.write(bytes([0x0D, 0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x01, 0xFF]) + b"\xa5" * 600)
    return path


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("")
    damage(tmp_path)
    return tmp_path


def test_opening_a_page_corrupted_store_says_it_is_damaged(project):
    with pytest.raises(StoreDamaged, match="is damaged .*not being recorded.*pallasite store clear") as caught:
        ResultsStore.open(project)
    assert "malformed" in caught.value.why or "btree" in caught.value.why.lower()
    assert "is damaged" in problem(project)
    assert problem(project / "elsewhere") is None  # no store there: nothing to say, nothing created


def test_pallasite_store_explains_and_offers_clear(project, capsys):
    assert main(["store", "--workspace", str(project)]) == 1
    out = capsys.readouterr().out
    assert str(store_path(project)) in out and "damaged: SQLite says" in out and "pallasite store clear" in out
    assert main(["store", "clear", "--workspace", str(project)]) == 0
    assert not store_path(project).exists()
    with ResultsStore.open(project) as fresh:  # the next run starts a fresh one
        fresh.put_check(ResultKey(code_hash="source:new", kernel="k", chip="v5e"), tier=1, status="ok")


def test_check_says_once_that_results_are_not_recorded(project, capsys):
    for name in ("add_ok.py", "add_ok_copy.py"):
        shutil.copy(DATA / "lsp" / "add_ok.py", project / name)
    status = main(["check", str(project / "add_ok.py"), str(project / "add_ok_copy.py"), "--tiers", "0-1"])
    err = capsys.readouterr().err
    assert status == 0
    assert err.count("results are not recorded") == 1 and str(store_path(project)) in err and "is damaged" in err


@pytest.mark.pipeline
def test_tune_says_that_results_are_not_recorded_and_still_tunes(project, capsys, monkeypatch):
    from pallasite.engine.sources import sources_for
    from pallasite.wire.messages import EstimateParams
    from pallasite.runner.tune_ops import handle_estimate
    from pallasite.engine.tuning import tune_workers

    for name, value in {"JAX_PLATFORMS": "cpu", "TPU_WORKER_HOSTNAMES": "localhost", "TPU_SKIP_MDS_QUERY": "1"}.items():
        monkeypatch.setenv(name, value)
    path = project / "matmul.py"
    shutil.copy(DATA / "tune" / "matmul.py", path)

    def in_process(backend, path, text, chip, entry, **kw):  # the worker's op, run here
        async def estimate(configs, kinds):
            return handle_estimate(EstimateParams(source=sources_for(path, text), chip=chip,
                                                  configs=tuple(configs), kinds=dict(kinds), probe=False))
        return estimate

    monkeypatch.setattr(tune_workers, "worker_estimator", in_process)  # what the run's Judge estimates with
    assert main(["tune", str(path), "--target", "v5e", "--verify", "0"]) == 0
    captured = capsys.readouterr()
    assert captured.err.count("results are not recorded") == 1 and "is damaged" in captured.err
    assert "best: " in captured.out


def test_a_store_failing_during_tuning_is_said_once_in_the_notes(tmp_path):
    from pallasite.engine.tuning.tune import TuneOptions, tune
    from test_tune import _estimator, _read

    path, text = _read("matmul")
    make, _ = _estimator()
    store = ResultsStore(tmp_path / "r.sqlite")
    calls = []

    def broken(*args, **kwargs):
        calls.append(1)
        raise StoreDamaged("the results store at r.sqlite is damaged (SQLite: database disk image is malformed)",
                           "database disk image is malformed")

    store.put_estimate = broken  # the file went bad after it was opened (estimates: their own table since v4)
    try:
        report = asyncio.run(tune(path, text, TuneOptions(chip="v5e"), make(path, text), store=store))
    finally:
        store.close()
    assert report.best is not None and len(calls) == 1  # switched off after the first failure
    assert [n for n in report.notes if "results are not recorded" in n] == [
        "results are not recorded: the results store at r.sqlite is damaged (SQLite: database disk image is "
        "malformed)"]
    assert isinstance(StoreDamaged("x"), StoreError)
    assert os.path.exists(tmp_path / "r.sqlite")
