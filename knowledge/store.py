"""The results store: every check, measurement, tuning run, agent step and LLM call, in SQLite (WAL).

It lives at ``<workspace>/.pallasite/results.sqlite``. Rows are keyed by a ``ResultKey``: what was
compiled or run (the tier-1 lowered module text when there is one, else the kernel file plus its
local imports), on which inputs, with which config, for which chip, under which jax/libtpu and
backend. So a hover can show "latest compile status per tier and chip", the checker can reuse a
verdict instead of recomputing it, and agents can look up what was measured before.

    store = ResultsStore.open(workspace)
    key = ResultKey(code_hash=source_hash(path), kernel="matmul", inputs=(((1024, 1024), "bfloat16"),),
                    config=(("bm", 256),), chip="v6e", jax_version="0.10.2")
    store.put_check(key, tier=2, status="ok", findings=(), path=path)
    store.latest_checks(path=path, kernel="matmul")      # newest row per (tier, chip)

Safety: WAL journal, a busy timeout, short ``BEGIN IMMEDIATE`` write transactions retried on
SQLITE_BUSY, so the server and CLI can write at once; a process killed mid-write loses only the
transaction it had not committed (WAL with synchronous=NORMAL survives process crashes; a power
cut may lose the last commits but never corrupts the file). The schema is versioned
(``store_schema``) and migrated when opened.
"""

from __future__ import annotations

import functools
import json
import os
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence, TypeVar

from ..analysis.local_imports import local_imports, source_hash  # noqa: F401 (the store's API)
from ..analysis.types import Finding, Measurement, Provenance, ResultKey, code_hash, from_json, to_json  # noqa: F401

from . import store_schema

STORE_DIR = ".pallasite"
STORE_FILE = "results.sqlite"
BUSY_TIMEOUT_S = 10.0

T = TypeVar("T")


class _Current:
    def __repr__(self) -> str:
        return "CURRENT"


CURRENT: Any = _Current()  # estimates(): this pallasite's cost model / version (the default filter)


# --------------------------------------------------------------------------- records


@dataclass(frozen=True)
class CheckRecord:
    id: int
    key: ResultKey
    digest: str
    tier: int
    status: str  # "ok", "error", "skipped: <why>"
    findings: tuple[Finding, ...]
    path: str | None
    kernel: str | None
    created: float  # seconds since the epoch

    @property
    def chip(self) -> str | None:
        return self.key.chip


@dataclass(frozen=True)
class MeasurementRecord:
    id: int
    key: ResultKey
    digest: str
    measurement: Measurement  # carries its Provenance
    path: str | None
    kernel: str | None
    created: float
    run_id: int | None = None


@dataclass(frozen=True)
class EstimateRecord:
    """A model's estimate (not a measurement): which model, for which chip (``key.chip``), its figure."""

    id: int
    key: ResultKey
    model: str
    status: str
    seconds: float | None
    payload: dict
    path: str | None
    kernel: str | None
    created: float
    run_id: int | None = None


@dataclass(frozen=True)
class VerdictRecord:
    """A correctness verdict (e.g. tier 3 in interpret mode against the reference): no timing."""

    id: int
    key: ResultKey
    method: str
    state: str
    payload: dict
    path: str | None
    kernel: str | None
    created: float


@dataclass(frozen=True)
class TuningRecord:
    id: int
    key: ResultKey
    best_config: tuple[tuple[str, Any], ...] | None
    summary: dict
    created: float


@dataclass(frozen=True)
class AgentStepRecord:
    id: int
    run_id: str
    step: int
    kind: str
    payload: dict
    digest: str | None
    created: float


@dataclass(frozen=True)
class LLMCallRecord:
    id: int
    run_id: str
    step: int
    provider: str
    model: str | None
    system: str
    prompt: str
    response: str | None  # None: the call failed (``error`` says why)
    error: str | None
    usage: dict
    seconds: float | None
    created: float


@dataclass(frozen=True)
class StoreInfo:
    path: Path
    exists: bool
    size_bytes: int  # the database plus its -wal/-shm files
    schema_version: int
    counts: dict[str, int]


class StoreError(RuntimeError):
    """The store cannot be opened or written (the message says where and what to do)."""


class StoreDamaged(StoreError):
    """SQLite found the store's file damaged (``PRAGMA quick_check`` on open, or a read or write
    that met a malformed page): nothing is recorded there until it is cleared. ``why``: SQLite's words."""

    def __init__(self, message: str, why: str = "") -> None:
        super().__init__(message)
        self.why = why


# --------------------------------------------------------------------------- the store


def store_path(workspace: str | Path) -> Path:
    return Path(workspace) / STORE_DIR / STORE_FILE


GITIGNORE = "# Created by pallasite: its results store, plans and reports, never committed.\n*\n"


def pallasite_folder(workspace: str | Path) -> Path:
    """``<workspace>/.pallasite``, made if missing, with a ``.gitignore`` of ``*`` inside when it is made
    (so a project's git, and a pre-commit hook's check, never sees it as untracked). Everything that
    writes under ``.pallasite/`` makes it through here."""
    folder = Path(workspace) / STORE_DIR
    if not folder.is_dir():
        folder.mkdir(parents=True, exist_ok=True)
        ignore = folder / ".gitignore"
        if not ignore.exists():
            ignore.write_text(GITIGNORE, encoding="utf-8")
    return folder


PROJECT_MARKERS = ("pyproject.toml", ".git")


def find_workspace(start: str | Path = ".", outside: str | Path | None = None) -> Path:
    """The one rule for where a workspace's store lives (``check``, ``store`` and the server use it).

    The workspace is the nearest folder at or above ``start`` holding a ``pyproject.toml`` or a
    ``.git``; a ``.pallasite`` folder counts only within it (the nearest one between ``start`` and
    the project folder, inclusive), so a stray ``~/.pallasite`` above a project never captures it.
    With no project folder above ``start``, the workspace is ``outside``'s (the folder a command was
    run from, so ``pallasite store`` run there finds it) when given, else ``start`` itself (a file:
    its folder).
    """
    here = Path(start).resolve()
    if here.is_file() or (not here.exists() and here.suffix == ".py"):
        here = here.parent
    chain = (here, *here.parents)
    project = next((f for f in chain if any((f / m).exists() for m in PROJECT_MARKERS)), None)
    if project is None:
        return find_workspace(outside) if outside is not None else here
    for folder in chain:
        if (folder / STORE_DIR).is_dir():
            return folder
        if folder == project:
            break
    return project


class ResultsStore:
    """A typed API over the SQLite file; one connection, safe to share between threads."""

    def __init__(self, path: str | Path, *, busy_timeout_s: float = BUSY_TIMEOUT_S) -> None:
        self.path = Path(path)
        self.busy_timeout_s = busy_timeout_s
        self._lock = threading.RLock()
        try:
            if self.path.parent.name == STORE_DIR:
                pallasite_folder(self.path.parent.parent)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(self.path), timeout=busy_timeout_s, isolation_level=None,
                                       check_same_thread=False)
        except (OSError, sqlite3.Error) as err:
            raise StoreError(f"cannot open the results store at {self.path}: {err}; check the folder "
                             "is writable, or remove it with `pallasite store clear`") from err
        try:
            self._retry(self._setup)
        except StoreDamaged:
            self._db.close()
            raise
        except sqlite3.DatabaseError as err:
            self._db.close()
            raise StoreError(f"the results store at {self.path} is unreadable ({err}); "
                             "`pallasite store clear` removes it (it only holds cached results)") from err
        except store_schema.SchemaTooNew as err:
            self._db.close()
            raise StoreError(str(err)) from err

    @classmethod
    def open(cls, workspace: str | Path, **kw: Any) -> "ResultsStore":
        return cls(store_path(workspace), **kw)

    def _setup(self) -> None:
        self._db.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_s * 1000)}")
        try:  # every page's structure, before anything is read from or written into it
            problems = [str(row[0]) for row in self._db.execute("PRAGMA quick_check(3)").fetchall()]
        except sqlite3.DatabaseError as err:
            if isinstance(err, sqlite3.OperationalError) and _busy(err):
                raise
            problems = [str(err)]
        if problems != ["ok"]:
            raise self.damaged("; ".join(problems))
        mode = self._db.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise sqlite3.OperationalError(f"could not switch to WAL journal mode (got {mode})")
        self._db.execute("PRAGMA synchronous = NORMAL")
        self._db.execute("PRAGMA foreign_keys = ON")
        if store_schema.current_version(self._db) != store_schema.SCHEMA_VERSION:
            store_schema.migrate(self._db)  # a newer schema raises SchemaTooNew with advice

    def damaged(self, why: str) -> StoreDamaged:
        return StoreDamaged(f"the results store at {self.path} is damaged (SQLite: {why[:300]}), so results are "
                            "not being recorded; `pallasite store clear` removes it (it only holds results that "
                            "can be computed again; the next run starts a fresh one)", why[:300])

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> "ResultsStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ transactions

    def _retry(self, action: Callable[[], T]) -> T:
        """Run ``action``, retrying on SQLITE_BUSY/LOCKED with backoff until the busy timeout."""
        deadline = time.monotonic() + self.busy_timeout_s
        delay = 0.005
        while True:
            try:
                with self._lock:
                    return action()
            except sqlite3.OperationalError as err:
                if not _busy(err) or time.monotonic() > deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 0.2)
            except sqlite3.DatabaseError as err:  # a page found malformed while reading or writing
                if "malformed" in str(err).lower() or "not a database" in str(err).lower():
                    raise self.damaged(str(err)) from err
                raise

    def _write(self, statements: Callable[[sqlite3.Connection], T]) -> T:
        """One short write transaction (BEGIN IMMEDIATE ... COMMIT), retried when busy."""

        def attempt() -> T:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                result = statements(self._db)
                self._db.execute("COMMIT")
                return result
            except BaseException:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise

        return self._retry(attempt)

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        return self._retry(lambda: self._db.execute(sql, params).fetchall())

    # ------------------------------------------------------------------ checks

    def put_check(self, key: ResultKey, *, tier: int, status: str, findings: Sequence[Finding] = (),
                  path: str | None = None) -> int:
        """Record one tier's verdict for ``key``; returns the row id (once committed)."""
        row = (key.digest(), key.to_json(), key.code_hash, path, key.kernel, tier, key.chip, status,
               json.dumps(to_json(tuple(findings))), key.jax_version, key.libtpu_version, key.backend,
               time.time())
        return self._write(lambda db: db.execute(
            "INSERT INTO checks (key, key_json, source_hash, path, kernel, tier, chip, status, findings_json,"
            " jax_version, libtpu_version, backend, created) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)", row).lastrowid)

    def check_for(self, key: ResultKey, tier: int) -> CheckRecord | None:
        """The newest verdict for exactly this key and tier (reuse instead of recompiling)."""
        rows = self._read(f"SELECT {_CHECK_COLUMNS} FROM checks WHERE key = ? AND tier = ? "
                          "ORDER BY created DESC, id DESC LIMIT 1", (key.digest(), tier))
        return _check(rows[0]) if rows else None

    def latest_checks(self, *, path: str | None = None, kernel: str | None = None,
                      source_hash: str | None = None) -> list[CheckRecord]:
        """The newest verdict per (tier, chip) among rows matching the filters, by tier then chip."""
        where, params = _filters(path=path, kernel=kernel, source_hash=source_hash)
        rows = self._read(f"SELECT {_CHECK_COLUMNS} FROM checks {where} ORDER BY created DESC, id DESC", params)
        newest: dict[tuple[int, str | None], CheckRecord] = {}
        for row in rows:
            record = _check(row)
            newest.setdefault((record.tier, record.chip), record)
        return sorted(newest.values(), key=lambda r: (r.tier, r.chip or ""))

    # ------------------------------------------------------------------ measurements

    def put_measurement(self, key: ResultKey, measurement: Measurement, *, path: str | None = None,
                        run_id: int | None = None) -> int:
        """A timing as the worker reported it (device, interpret or host: its provenance says which);
        key it by what the worker reported (its device kind and versions). Estimates are not measurements:
        ``put_estimate``."""
        if not isinstance(measurement.provenance, Provenance):
            raise ValueError("a measurement needs a Provenance (device, interpret or host)")
        if measurement.provenance is Provenance.ESTIMATE:
            raise ValueError("an estimate is not a measurement: store it with put_estimate (naming its model)")
        row = (key.digest(), key.to_json(), key.code_hash, path, key.kernel, key.chip, measurement.status,
               measurement.provenance.value, measurement.median_ns, json.dumps(to_json(measurement)),
               time.time(), run_id)
        return self._write(lambda db: db.execute(
            "INSERT INTO measurements (key, key_json, source_hash, path, kernel, chip, status, provenance,"
            " median_ns, measurement_json, created, run_id) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", row).lastrowid)

    def measurements(self, key: ResultKey | None = None, *, path: str | None = None, kernel: str | None = None,
                     chip: str | None = None, provenance: Provenance | None = None,
                     run_id: int | None = None, limit: int = 1000) -> list[MeasurementRecord]:
        """Measurements, newest first, for ``key`` (exact) or matching the filters."""
        where, params = _filters(key=key.digest() if key else None, path=path, kernel=kernel, chip=chip,
                                 provenance=provenance.value if provenance else None, run_id=run_id)
        rows = self._read(f"SELECT id, key, key_json, measurement_json, path, kernel, created, run_id "
                          f"FROM measurements {where} ORDER BY created DESC, id DESC LIMIT ?", (*params, limit))
        return [MeasurementRecord(r[0], ResultKey.from_json(r[2]), r[1], from_json(Measurement, json.loads(r[3])),
                                  r[4], r[5], r[6], r[7]) for r in rows]

    # ------------------------------------------------------------------ estimates and verdicts

    def put_estimate(self, key: ResultKey, *, model: str, status: str, seconds: float | None, payload: dict,
                     path: str | None = None, run_id: int | None = None, cost_model: str | None = None,
                     pallasite_version: str | None = None) -> int:
        """An estimate, keyed (schema v5) by the cost model that made it — ``cost_model``, else the model
        its payload's estimate names, else the current one — and the pallasite version (this one's
        unless given), so ``estimates`` never hands a changed model's caller an old figure."""
        made_by = cost_model or _payload_model(payload) or current_cost_model()
        if made_by == current_cost_model().split(" @")[0]:  # this pallasite's model: keyed by its code too
            made_by = current_cost_model()
        version = pallasite_version or current_pallasite_version()
        row = (key.digest(), key.to_json(), key.code_hash, path, key.kernel, key.chip, model, status, seconds,
               json.dumps(payload, default=str), time.time(), run_id, made_by, version)
        return self._write(lambda db: db.execute(
            "INSERT INTO estimates (key, key_json, source_hash, path, kernel, chip, model, status, seconds, payload_json,"
            " created, run_id, cost_model, pallasite_version) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)", row).lastrowid)

    def estimates(self, key: ResultKey | None = None, *, model: str | None = None, path: str | None = None,
                  run_id: int | None = None, limit: int = 1000, cost_model: Any = CURRENT,
                  pallasite_version: Any = CURRENT) -> list[EstimateRecord]:
        """Estimates, newest first, for ``key`` (exact) or matching the filters; by default only those
        made by the current cost model and pallasite version (``CURRENT``; None: any, rows stored before
        schema v5 included)."""
        made_by = current_cost_model() if cost_model is CURRENT else cost_model
        version = current_pallasite_version() if pallasite_version is CURRENT else pallasite_version
        where, params = _filters(key=key.digest() if key else None, model=model, path=path, run_id=run_id,
                                 cost_model=made_by, pallasite_version=version)
        rows = self._read(f"SELECT id, key_json, model, status, seconds, payload_json, path, kernel, created, run_id "
                          f"FROM estimates {where} ORDER BY created DESC, id DESC LIMIT ?", (*params, limit))
        return [EstimateRecord(r[0], ResultKey.from_json(r[1]), r[2], r[3], r[4], json.loads(r[5]), *r[6:]) for r in rows]

    def put_verdict(self, key: ResultKey, *, method: str, state: str, payload: dict, path: str | None = None) -> int:
        row = (key.digest(), key.to_json(), key.code_hash, path, key.kernel, key.chip, method, state,
               json.dumps(payload, default=str), time.time())
        return self._write(lambda db: db.execute(
            "INSERT INTO verdicts (key, key_json, source_hash, path, kernel, chip, method, state, payload_json, created)"
            " VALUES (?,?,?,?,?,?,?,?,?,?)", row).lastrowid)

    def verdicts(self, key: ResultKey | None = None, *, method: str | None = None, path: str | None = None,
                 limit: int = 1000) -> list[VerdictRecord]:
        where, params = _filters(key=key.digest() if key else None, method=method, path=path)
        rows = self._read(f"SELECT id, key_json, method, state, payload_json, path, kernel, created "
                          f"FROM verdicts {where} ORDER BY created DESC, id DESC LIMIT ?", (*params, limit))
        return [VerdictRecord(r[0], ResultKey.from_json(r[1]), r[2], r[3], json.loads(r[4]), *r[5:]) for r in rows]

    # ------------------------------------------------------------------ tuning

    def put_tuning(self, key: ResultKey, results: Sequence[tuple[ResultKey, Measurement]], *,
                   path: str | None = None, best: Any = None) -> int:
        """One autotuning run: every config's measurement (failures included) and the best config.

        ``key`` is the kernel without a config; each result's key carries its config. The best is
        ``best`` when given (what the run chose), else the ok result with the lowest median; the run
        and its rows are committed together."""
        ok = [(k, m) for k, m in results if m.status == "ok" and m.median_ns is not None]
        if best is None:
            best = min(ok, key=lambda km: km[1].median_ns)[0].config if ok else None
        else:
            best = tuple(best)
        summary = {"configs": len(results), "ok": len(ok),
                   "best_median_ns": min((m.median_ns for _, m in ok), default=None),
                   "provenance": sorted({m.provenance.value for _, m in results})}
        base = key.without_config()

        def write(db: sqlite3.Connection) -> int:
            run = db.execute(
                "INSERT INTO tuning_runs (key, key_json, path, kernel, chip, best_config_json, summary_json, created)"
                " VALUES (?,?,?,?,?,?,?,?)",
                (base.digest(), base.to_json(), path, base.kernel, base.chip,
                 json.dumps(best) if best is not None else None, json.dumps(summary), time.time())).lastrowid
            for rkey, m in results:
                if m.provenance is Provenance.ESTIMATE:  # a ranking by estimates: the estimates table
                    db.execute(
                        "INSERT INTO estimates (key, key_json, source_hash, path, kernel, chip, model, status, seconds,"
                        " payload_json, created, run_id, cost_model, pallasite_version)"
                        " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                        (rkey.digest(), rkey.to_json(), rkey.code_hash, path, rkey.kernel, rkey.chip, m.method,
                         m.status, m.median_ns / 1e9 if m.median_ns is not None else None,
                         json.dumps({"note": m.error} if m.error else {}), time.time(), run, current_cost_model(),
                         current_pallasite_version()))
                    continue
                db.execute(
                    "INSERT INTO measurements (key, key_json, source_hash, path, kernel, chip, status, provenance,"
                    " median_ns, measurement_json, created, run_id) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                    (rkey.digest(), rkey.to_json(), rkey.code_hash, path, rkey.kernel, rkey.chip, m.status,
                     m.provenance.value, m.median_ns, json.dumps(to_json(m)), time.time(), run))
            return run

        return self._write(write)

    def tuning_runs(self, key: ResultKey | None = None, *, path: str | None = None,
                    kernel: str | None = None) -> list[TuningRecord]:
        where, params = _filters(key=key.without_config().digest() if key else None, path=path, kernel=kernel)
        rows = self._read(f"SELECT id, key_json, best_config_json, summary_json, created FROM tuning_runs {where} "
                          "ORDER BY created DESC, id DESC", params)
        return [TuningRecord(r[0], ResultKey.from_json(r[1]),
                             tuple((str(k), v) for k, v in json.loads(r[2])) if r[2] else None,
                             json.loads(r[3]), r[4]) for r in rows]

    # ------------------------------------------------------------------ agent steps

    def put_agent_step(self, run_id: str, step: int, kind: str, payload: dict, *,
                       key: ResultKey | None = None) -> int:
        text = json.dumps(payload, default=str)
        return self._write(lambda db: db.execute(
            "INSERT INTO agent_steps (run_id, step, kind, key, payload_json, created) VALUES (?,?,?,?,?,?)",
            (run_id, step, kind, key.digest() if key else None, text, time.time())).lastrowid)

    def agent_steps(self, run_id: str) -> list[AgentStepRecord]:
        rows = self._read("SELECT id, run_id, step, kind, payload_json, key, created FROM agent_steps "
                          "WHERE run_id = ? ORDER BY step, id", (run_id,))
        return [AgentStepRecord(r[0], r[1], r[2], r[3], json.loads(r[4]), r[5], r[6]) for r in rows]

    # ------------------------------------------------------------------ LLM calls

    def put_llm_call(self, run_id: str, step: int, *, provider: str, model: str | None, system: str,
                     prompt: str, response: str | None, error: str | None = None, usage: dict | None = None,
                     seconds: float | None = None) -> int:
        """Record one model call of an agent run. The caller redacts secrets first (agents/llm/keys.py)."""
        row = (run_id, step, provider, model, system, prompt, response, error, json.dumps(usage or {}),
               seconds, time.time())
        return self._write(lambda db: db.execute(
            "INSERT INTO llm_calls (run_id, step, provider, model, system, prompt, response, error, usage_json,"
            " seconds, created) VALUES (?,?,?,?,?,?,?,?,?,?,?)", row).lastrowid)

    def llm_calls(self, run_id: str) -> list[LLMCallRecord]:
        """The calls of one run, in order (what ``--provider replay:<run-id>`` replays)."""
        rows = self._read("SELECT id, run_id, step, provider, model, system, prompt, response, error, usage_json,"
                          " seconds, created FROM llm_calls WHERE run_id = ? ORDER BY step, id", (run_id,))
        return [LLMCallRecord(*r[:9], json.loads(r[9]), r[10], r[11]) for r in rows]

    # ------------------------------------------------------------------ housekeeping

    def info(self) -> StoreInfo:
        counts = {t: self._read(f"SELECT COUNT(*) FROM {t}")[0][0]
                  for t in ("checks", "measurements", "estimates", "verdicts", "tuning_runs", "agent_steps", "llm_calls")}
        version = self._retry(lambda: store_schema.current_version(self._db))
        return StoreInfo(self.path, True, _files_size(self.path), version, counts)

    def integrity_ok(self) -> bool:
        return self._read("PRAGMA integrity_check")[0][0] == "ok"


_TIER_NAMES = {0: "source rules", 1: "lowering", 2: "TPU compiler", 3: "interpret mode"}


def summarize_checks(records: Sequence[CheckRecord], now: float | None = None) -> list[str]:
    """One line per record for a hover: tier, chip, verdict (with codes), versions, backend, age.

        tier 2 (TPU compiler) for v6e: error PLS201 - jax 0.10.2, libtpu 0.0.42.1, local, 3 min ago
    """
    now = time.time() if now is None else now
    lines = []
    for r in records:
        codes = sorted({f.code for f in r.findings})
        verdict = r.status + (f" {', '.join(codes)}" if codes else "")
        versions = [f"jax {r.key.jax_version}" if r.key.jax_version else None,
                    f"libtpu {r.key.libtpu_version}" if r.key.libtpu_version else None, r.key.backend]
        where = f" for {r.chip}" if r.chip else ""
        lines.append(f"tier {r.tier} ({_TIER_NAMES.get(r.tier, '?')}){where}: {verdict} - "
                     f"{', '.join(v for v in versions if v)}, {_age(now - r.created)}")
    return lines


def _age(seconds: float) -> str:
    seconds = max(0.0, seconds)
    for unit, size in (("day", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            n = int(seconds // size)
            return f"{n} {unit}{'s' if unit == 'day' and n > 1 else ''} ago"
    return "just now"


_CHECK_COLUMNS = "id, key, key_json, tier, status, findings_json, path, kernel, created"


def _check(row: tuple) -> CheckRecord:
    findings = tuple(from_json(Finding, f) for f in json.loads(row[5]))
    return CheckRecord(row[0], ResultKey.from_json(row[2]), row[1], row[3], row[4], findings, row[6], row[7], row[8])


# the files whose code makes an estimate: a change to any of them (a refit factor, a new count) is a new model
COST_MODEL_FILES = ("runner/program/cost_model.py", "runner/program/body_counts.py", "runner/program/step_counts.py", "runner/program/module_cost.py",
                    "runner/program/kernel_cost.py", "runner/program/mosaic_counts.py", "runner/program/module_xla.py", "runner/program/module_values.py",
                    "runner/program/loop_bounds.py", "runner/program/compiled_ops.py", "runner/program/program_price.py")


def current_cost_model() -> str:
    """The cost model this pallasite's worker estimates with: its name (runner/program/cost_model.MODEL, held
    equal to analysis.verdict.COST_MODEL by a test) and a digest of the code that makes its figures
    (``COST_MODEL_FILES``, read as text), so a changed factor or count is a changed model even under
    the same name."""
    from ..analysis.verdict import COST_MODEL

    return f"{COST_MODEL} @{_cost_model_digest()}"


@functools.cache
def _cost_model_digest() -> str:
    import hashlib

    root = Path(__file__).resolve().parent.parent
    h = hashlib.sha256()
    for name in COST_MODEL_FILES:
        try:
            h.update((root / name).read_bytes())
        except OSError:
            h.update(name.encode())
    return h.hexdigest()[:12]


def current_pallasite_version() -> str:
    from ..analysis.types import installed_versions

    return installed_versions().get("pallasite") or "unknown"


def _payload_model(payload: Any) -> str | None:
    est = payload.get("estimate") if isinstance(payload, dict) else None
    model = est.get("model") if isinstance(est, dict) else None
    return str(model) if model else None


def _filters(**values: Any) -> tuple[str, tuple]:
    clauses = [(f"{name} = ?", value) for name, value in values.items() if value is not None]
    if not clauses:
        return "", ()
    return "WHERE " + " AND ".join(c for c, _ in clauses), tuple(v for _, v in clauses)


def _store_files(path: Path) -> list[Path]:
    return [p for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm"), Path(f"{path}-journal")) if p.exists()]


def _files_size(path: Path) -> int:
    return sum(p.stat().st_size for p in _store_files(path))


def _busy(err: sqlite3.OperationalError) -> bool:
    text = str(err).lower()
    return "locked" in text or "busy" in text


def problem(workspace: str | Path) -> str | None:
    """Why results cannot be recorded in the workspace's store (damaged, unreadable, a newer
    schema), or None: it is fine, or not created yet (this never creates it)."""
    path = store_path(workspace)
    if not path.exists():
        return None
    try:
        with ResultsStore(path):
            return None
    except StoreError as err:
        return str(err)


def info(workspace: str | Path) -> StoreInfo:
    """Where the store is and what it holds; does not create it."""
    path = store_path(workspace)
    if not path.exists():
        return StoreInfo(path, False, 0, 0, {})
    with ResultsStore(path) as store:
        return store.info()


def clear(workspace: str | Path) -> list[Path]:
    """Delete the store's files (results.sqlite and its -wal/-shm); nothing else. Returns them."""
    path = store_path(workspace)
    removed = []
    for file in _store_files(path):
        try:
            os.remove(file)
            removed.append(file)
        except FileNotFoundError:
            continue
    return removed
