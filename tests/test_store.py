"""The results store: typed round trips, keys, source hashing, migrations, and durability under
kill -9 and concurrent writers (real subprocesses writing to one SQLite file)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pallasite.analysis.types import Finding, Fix, Measurement, Provenance, Span, TextEdit
from pallasite.knowledge import store_schema
from pallasite.knowledge.store import (ResultKey, ResultsStore, StoreError, clear, local_imports, source_hash, store_path,
                                       summarize_checks)
from pallasite.server.cli import main


def key(**kw) -> ResultKey:
    base = dict(code_hash="source:abc", kernel="matmul", inputs=(((1024, 512), "bfloat16"), ((512, 256), "bfloat16")),
                config=(("bm", 256), ("bk", 512)), chip="v6e", jax_version="0.10.2", libtpu_version="0.0.42.1")
    base.update(kw)
    return ResultKey(**base)


@pytest.fixture
def store(tmp_path):
    with ResultsStore.open(tmp_path) as s:
        yield s


FINDING = Finding("PLS101", "Block shape (8, 100) of args[0] is not tileable", Span(11, 4, 11, 40), tier=1,
                  fix=Fix("use (8, 128)", (TextEdit(Span(11, 17, 11, 25), "(8, 128)"),)), origin="jax lowering",
                  chip="v6e", kernel="matmul")


# --------------------------------------------------------------------------- keys and hashes


def test_digest_is_stable_across_processes_and_config_order():
    k = key()
    code = ("from pallasite.knowledge.store import ResultKey; "
            "print(ResultKey('source:abc', kernel='matmul', inputs=(((1024, 512), 'bfloat16'), ((512, 256), 'bfloat16')),"
            " config=(('bk', 512), ('bm', 256)), chip='v6e', jax_version='0.10.2', libtpu_version='0.0.42.1').digest())")
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                           env={**os.environ, "PYTHONHASHSEED": "123"})
    assert other.returncode == 0, other.stderr
    assert other.stdout.strip() == k.digest()


@pytest.mark.parametrize("change", [dict(chip="v5e"), dict(config=(("bm", 128), ("bk", 512))),
                                    dict(jax_version="0.10.3"), dict(libtpu_version=None), dict(backend="ssh:tpu1"),
                                    dict(inputs=(((2048, 512), "bfloat16"),)), dict(code_hash="lowered:def"),
                                    dict(kernel="other")])
def test_every_key_field_changes_the_digest(change):
    assert key(**change).digest() != key().digest()


def test_key_json_round_trip():
    assert ResultKey.from_json(key().to_json()) == key()
    lowered = key(code_hash="lowered:def")
    assert lowered.code_kind == "lowered" and ResultKey.from_json(lowered.to_json()) == lowered


def test_digests_and_stored_keys_are_those_of_the_first_schema():
    """The key types were merged (the checker's CacheKey into ResultKey): rows stored before must
    still be found, so the digest and the stored JSON keep their first form (values computed with
    the earlier knowledge/store_keys.py)."""
    k = ResultKey("lowered:abc", kernel="matmul", inputs=(((1024, 512), "bfloat16"),),
                  config=(("bn", 256), ("bm", 128)), chip="v6e", jax_version="0.10.2", libtpu_version="0.0.42.1")
    assert k.digest() == "b5e145c1b6f2b9a4ae2cf0bec7c7085e3262990eb882c1a1154605c1b2fad965"
    assert ResultKey("source:abc", kernel="add", chip="v5e").digest() == (
        "f60f518ebf1e8aed5fc1fb14df3354db330f480720597e92308fe8a5efdbca4a")
    stored = ('{"backend": "local", "chip": "v6e", "config": [["bn", 256], ["bm", 128]], "inputs": '
              '[[[1024, 512], "bfloat16"]], "jax_version": "0.10.2", "kernel": "matmul", "libtpu_version": '
              '"0.0.42.1", "source_hash": "lowered:abc", "source_kind": "lowered"}')
    assert k.to_json() == stored and ResultKey.from_json(stored) == k


def test_one_code_hash_for_the_worker_and_the_store(tmp_path):
    import hashlib

    from pallasite.analysis.types import code_hash

    module = "module @m { func.func @main() { return } }"
    assert code_hash("lowered", module) == "lowered:" + hashlib.sha256(module.encode()).hexdigest()
    kernel = tmp_path / "kernel.py"
    kernel.write_text("X = 1\n")
    assert source_hash(kernel) == "source:" + hashlib.sha256(b"X = 1\n").hexdigest()  # no local imports


def test_source_hash_follows_local_imports(tmp_path):
    (tmp_path / "helpers.py").write_text("BLOCK = 128\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "tiles.py").write_text("from .. import helpers\nROWS = 8\n")
    (tmp_path / "unrelated.py").write_text("X = 1\n")
    kernel = tmp_path / "kernel.py"
    kernel.write_text("import numpy as np\nimport helpers\nfrom pkg.tiles import ROWS\n")
    deps = local_imports(kernel)
    assert {p.name for p in deps} == {"helpers.py", "tiles.py", "__init__.py"}
    before = source_hash(kernel)
    (tmp_path / "unrelated.py").write_text("X = 2\n")
    assert source_hash(kernel) == before
    (tmp_path / "pkg" / "tiles.py").write_text("from .. import helpers\nROWS = 16\n")
    assert source_hash(kernel) != before


def test_the_hash_covers_exactly_the_modules_a_worker_request_carries(tmp_path):
    """A kernel inside a package, opened as a workspace of its own folder, imports a sibling package's
    module by its absolute name: the worker gets that module (engine/sources.py), so a change to it
    must change the hash that keys cached verdicts. Before: the hash had its own finder, which missed
    it, and a stale tier-1 verdict would have been reused."""
    from pallasite.engine.sources import sources_for

    pkg = tmp_path / "pkg"
    (pkg / "kernels").mkdir(parents=True)
    for init in (pkg / "__init__.py", pkg / "kernels" / "__init__.py"):
        init.write_text("")
    (pkg / "common.py").write_text("BLOCK = 128\n")
    kernel = pkg / "kernels" / "k.py"
    kernel.write_text("from pkg.common import BLOCK\nfrom . import tiles\n")
    (pkg / "kernels" / "tiles.py").write_text("ROWS = 8\n")
    carried = {m.path for m in sources_for(str(kernel)).modules}
    assert str(pkg / "common.py") in carried
    assert {str(p) for p in local_imports(kernel, root=kernel.parent)} == carried
    before = source_hash(kernel, root=kernel.parent)
    (pkg / "common.py").write_text("BLOCK = 256\n")
    assert source_hash(kernel, root=kernel.parent) != before


def test_source_hash_of_a_file_that_does_not_parse(tmp_path):
    kernel = tmp_path / "broken.py"
    kernel.write_text("def f(:\n")
    assert source_hash(kernel).startswith("source:")
    assert source_hash(kernel) != source_hash(kernel, text="def f():\n    pass\n")


# --------------------------------------------------------------------------- round trips


def test_checks_round_trip_and_latest_per_tier_and_chip(store):
    store.put_check(key(), tier=1, status="error", findings=[FINDING], path="/w/k.py")
    store.put_check(key(), tier=2, status="error", findings=[FINDING], path="/w/k.py")
    newest = store.put_check(key(), tier=2, status="ok", path="/w/k.py")
    store.put_check(key(chip="v5e"), tier=2, status="ok", path="/w/k.py")
    store.put_check(key(kernel="softmax"), tier=2, status="ok", path="/w/k.py")
    latest = store.latest_checks(path="/w/k.py", kernel="matmul")
    assert [(r.tier, r.chip, r.status) for r in latest] == [(1, "v6e", "error"), (2, "v5e", "ok"), (2, "v6e", "ok")]
    assert latest[0].findings == (FINDING,)
    assert latest[2].id == newest and latest[2].key.jax_version == "0.10.2"


def test_hover_summary_names_tier_chip_verdict_and_provenance(store):
    store.put_check(key(), tier=1, status="ok")
    store.put_check(key(), tier=2, status="error", findings=[FINDING])
    records = store.latest_checks(kernel="matmul")
    lines = summarize_checks(records, now=records[-1].created + 180)
    assert lines[0].startswith("tier 1 (lowering) for v6e: ok - jax 0.10.2, libtpu 0.0.42.1, local")
    assert lines[1].startswith("tier 2 (TPU compiler) for v6e: error PLS101 - ") and lines[1].endswith("3 min ago")


def test_check_for_reuses_only_an_exact_key(store):
    store.put_check(key(), tier=2, status="ok")
    assert store.check_for(key(), 2).status == "ok"
    assert store.check_for(key(), 1) is None
    assert store.check_for(key(libtpu_version="0.0.43"), 2) is None


def test_measurements_keep_provenance(store):
    device = Measurement("ok", Provenance.DEVICE, "TPU v6 lite", "xprof device time", samples_ns=(10.0, 11.0, 12.0),
                         median_ns=11.0, config=(("bk", 512), ("bm", 256)), jax_version="0.10.2")
    interp = Measurement("ok", Provenance.INTERPRET, "cpu", "wall clock, interpret mode", median_ns=9e6)
    store.put_measurement(key(), device, path="/w/k.py")
    store.put_measurement(key(), interp, path="/w/k.py")
    got = store.measurements(key())
    assert [r.measurement for r in got] == [interp, device]  # newest first
    assert [r.measurement for r in store.measurements(path="/w/k.py", provenance=Provenance.DEVICE)] == [device]
    with pytest.raises(ValueError, match="Provenance"):
        store.put_measurement(key(), Measurement("ok", "device", "x", "y"))  # type: ignore[arg-type]



def test_the_engine_reads_a_files_measurements_on_its_one_store_connection(tmp_path):
    """Hovers read stored timings through ``Engine.stored_measurements`` (the connection the engine
    keeps per workspace), and a workspace without a store is not given one by a hover."""
    import asyncio

    from pallasite.engine.engine import Engine

    kernel = tmp_path / "k.py"
    engine = Engine(workspace=tmp_path)
    try:
        assert engine.stored_measurements(str(kernel)) == [] and not (tmp_path / ".pallasite").exists()
        with ResultsStore.open(tmp_path) as s:
            s.put_measurement(key(), Measurement("ok", Provenance.DEVICE, "TPU v6 lite", "xprof", median_ns=11.0),
                              path=str(kernel))
        (got,) = engine.stored_measurements(str(kernel))
        assert got.measurement.median_ns == 11.0 and got.measurement.device_kind == "TPU v6 lite"
        assert engine.stored_measurements(str(tmp_path / "other.py")) == []
    finally:
        asyncio.run(engine.close())

def test_tuning_run_keeps_failures_as_data_and_picks_the_best(store):
    results = [(key(config=(("bm", bm),)), Measurement(status, Provenance.DEVICE, "TPU v6 lite", "xprof", median_ns=t))
               for bm, status, t in ((128, "ok", 30.0), (256, "ok", 20.0), (1024, "oom", None))]
    run = store.put_tuning(key(), results, path="/w/k.py")
    (record,) = store.tuning_runs(key())
    assert record.id == run and record.best_config == (("bm", 256),)
    assert record.summary["configs"] == 3 and record.summary["ok"] == 2
    statuses = sorted(r.measurement.status for r in store.measurements(run_id=run))
    assert statuses == ["ok", "ok", "oom"]


def test_agent_steps_in_order(store):
    for step, kind in [(1, "implement"), (0, "plan"), (2, "check")]:
        store.put_agent_step("run-7", step, kind, {"note": kind}, key=key())
    steps = store.agent_steps("run-7")
    assert [(s.step, s.kind, s.payload["note"]) for s in steps] == [(0, "plan", "plan"), (1, "implement", "implement"),
                                                                   (2, "check", "check")]
    assert steps[0].digest == key().digest()


def test_store_is_in_wal_mode(store):
    assert store._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


# --------------------------------------------------------------------------- schema


def test_migration_from_version_1_keeps_old_rows(tmp_path):
    path = store_path(tmp_path)
    path.parent.mkdir()
    db = sqlite3.connect(path, isolation_level=None)
    assert store_schema.migrate(db, upto=1) == 1
    db.execute("INSERT INTO checks (key, key_json, source_hash, path, kernel, tier, chip, status, findings_json,"
               " jax_version, libtpu_version, backend, created) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
               (key().digest(), key().to_json(), "source:abc", "/w/k.py", "matmul", 2, "v6e", "ok", "[]",
                "0.10.2", "0.0.42.1", "local", 1.0))
    db.execute("INSERT INTO measurements (key, key_json, source_hash, path, kernel, chip, status, provenance, median_ns,"
               " measurement_json, created) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
               (key().digest(), key().to_json(), "source:abc", "/w/k.py", "matmul", "v6e", "ok", "estimate", 5.0,
                json.dumps({"status": "ok", "provenance": "estimate", "device_kind": "v6e", "method": "cost model",
                            "median_ns": 5.0}), 1.0))
    db.close()
    with ResultsStore(path) as s:
        assert s.info().schema_version == store_schema.SCHEMA_VERSION == 5
        assert s.check_for(key(), 2).status == "ok"
        # v4 (issue 23): the old estimate row moved out of the measurements into the estimates
        assert s.measurements(key()) == []
        assert s.estimates(key()) == []  # v5: made by no known model: never reused as the current model's
        (e,) = s.estimates(key(), cost_model=None, pallasite_version=None)
        assert e.model == "cost model" and e.seconds == 5e-9 and e.key.chip == "v6e" and e.run_id is None
        s.put_agent_step("r", 0, "plan", {})  # tables added by v2 work
        s.put_llm_call("r", 1, provider="scripted", model=None, system="s", prompt="p", response="{}")  # v3
        assert [c.response for c in s.llm_calls("r")] == ["{}"]
    versions = [r[0] for r in sqlite3.connect(path).execute("SELECT version FROM schema_version ORDER BY version")]
    assert versions == [1, 2, 3, 4, 5]


def test_migration_to_v4_keeps_estimates_verdicts_and_measurements_apart(tmp_path):
    """Issue 23: a v3 store held cost-model estimates and tier-3 verdicts as measurements (JSON in
    ``error``); v4 moves them to their own tables, and device timings stay measurements."""
    path = store_path(tmp_path)
    path.parent.mkdir()
    db = sqlite3.connect(path, isolation_level=None)
    assert store_schema.migrate(db, upto=3) == 3

    def put(prov, method, error, median):
        m = {"status": "ok", "provenance": prov, "device_kind": "v6e" if prov == "estimate" else "cpu",
             "method": method, "median_ns": median, "error": error}
        db.execute("INSERT INTO measurements (key, key_json, source_hash, path, kernel, chip, status, provenance,"
                   " median_ns, measurement_json, created) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                   (key().digest(), key().to_json(), "source:abc", "/w/k.py", "matmul", "v6e", "ok", prov, median,
                    json.dumps(m), 1.0))

    put("estimate", "pallasite cost model", json.dumps({"estimate": {"seconds": 1e-6}, "entry": "mm"}), 1000.0)
    put("interpret", "tier 3: TPU interpret mode on CPU vs the reference", json.dumps({"state": "ok"}), None)
    put("device", "xprof", None, 2000.0)
    db.close()
    with ResultsStore(path) as s:
        (e,) = s.estimates(key(), model="pallasite cost model", cost_model=None, pallasite_version=None)
        assert e.payload["entry"] == "mm" and e.seconds == 1e-6
        (v,) = s.verdicts(key())
        assert v.state == "ok" and v.method.startswith("tier 3")
        assert [r.measurement.provenance for r in s.measurements(key())] == [Provenance.DEVICE]
        with pytest.raises(ValueError, match="put_estimate"):
            s.put_measurement(key(), Measurement("ok", Provenance.ESTIMATE, "v6e", "cost model", median_ns=1.0))
        assert s.info().counts["estimates"] == 1 and s.info().counts["verdicts"] == 1


def test_newer_schema_is_refused_with_advice(tmp_path):
    with ResultsStore.open(tmp_path) as s:
        s._db.execute("INSERT INTO schema_version VALUES (99, 0)")
    with pytest.raises(StoreError, match="newer than this pallasite's.*pallasite store clear"):
        ResultsStore.open(tmp_path)


def test_garbage_file_gives_a_clear_error(tmp_path):
    path = store_path(tmp_path)
    path.parent.mkdir()
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreError, match="pallasite store clear"):
        ResultsStore(path)


# --------------------------------------------------------------------------- processes

WRITER = textwrap.dedent("""
    import os, sys, time
    from pallasite.knowledge.store import ResultKey, ResultsStore
    workspace, name, count, ack, go = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
    store = ResultsStore.open(workspace, busy_timeout_s=30)
    while go != "-" and not os.path.exists(go):
        time.sleep(0.005)
    with open(ack, "a") as acked:
        for i in range(count):
            k = ResultKey("source:" + name, kernel=name, config=(("i", i),), chip="v6e")
            row = store.put_check(k, tier=1, status="ok", path=name)
            acked.write(f"{row}\\n")  # written only after the commit returned
            acked.flush()
""")


def writer(tmp_path: Path, name: str, count: int, go: str = "-") -> tuple[subprocess.Popen, Path]:
    ack = tmp_path / f"{name}.acked"
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), name, str(count), str(ack), go],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc, ack


def acked_ids(ack: Path) -> set[int]:
    if not ack.exists():
        return set()
    return {int(line) for line in ack.read_text().splitlines() if line.strip()}


def test_kill_9_mid_burst_loses_nothing_committed(tmp_path):
    proc, ack = writer(tmp_path, "burst", 100_000)
    deadline = time.monotonic() + 60
    while len(acked_ids(ack)) < 200 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.01)
    assert proc.poll() is None, proc.communicate()[1]
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    committed = acked_ids(ack)
    assert len(committed) >= 200
    with ResultsStore.open(tmp_path) as s:
        assert s.integrity_ok()
        present = {r[0] for r in s._db.execute("SELECT id FROM checks WHERE path = 'burst'")}
    assert committed <= present, f"{len(committed - present)} acknowledged rows lost"


def test_two_processes_writing_at_once_lose_nothing(tmp_path):
    ResultsStore.open(tmp_path).close()  # create and migrate first, like the server would
    go = tmp_path / "go"
    procs = [writer(tmp_path, name, 150, str(go)) for name in ("server", "cli")]
    time.sleep(0.5)
    go.write_text("")
    for proc, _ in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    with ResultsStore.open(tmp_path) as s:
        assert s.integrity_ok()
        for name in ("server", "cli"):
            rows = s._db.execute("SELECT COUNT(DISTINCT key) FROM checks WHERE path = ?", (name,)).fetchone()[0]
            assert rows == 150, name
    assert len(acked_ids(procs[0][1]) | acked_ids(procs[1][1])) == 300


# --------------------------------------------------------------------------- CLI


def test_cli_store_info_and_clear(tmp_path, capsys):
    with ResultsStore.open(tmp_path) as s:
        s.put_check(key(), tier=1, status="ok")
    keep = tmp_path / ".pallasite" / "settings-note.txt"
    keep.write_text("not ours to delete")
    assert main(["store", "info", "--workspace", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert str(store_path(tmp_path)) in out and "checks        1" in out
    assert main(["store", "clear", "--workspace", str(tmp_path)]) == 0
    assert "removed" in capsys.readouterr().out
    assert not store_path(tmp_path).exists() and keep.exists()
    assert main(["store", "--workspace", str(tmp_path)]) == 0
    assert "no results store yet" in capsys.readouterr().out
    assert clear(tmp_path) == []
