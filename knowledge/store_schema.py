"""The results store's schema: numbered migrations, applied in order, recorded in schema_version.

A migration is a plain function of an open connection, run inside the transaction that also
records its number, so a database is always at exactly one version. Never edit a released
migration: add the next one. ``SCHEMA_VERSION`` is the number of the last migration.

v1  checks and measurements, keyed by the ResultKey digest
v2  tuning runs (measurements gain run_id), agent steps, lookup indexes
v3  llm_calls: every prompt and response of an agent run (secrets redacted before writing)
v4  estimates and verdicts apart from measurements: a model's estimate (which model, its seconds and
    its breakdown) and a correctness verdict (tier 3's) are not measurements; old rows that stored
    them as measurements (JSON in ``error``) are moved over
v5  estimates keyed by the cost model and the pallasite version that made them (``cost_model``,
    ``pallasite_version``): a changed model never reuses an old figure. Rows stored before keep NULL
    in both, which no current model matches (they are kept, for the record, and never reused)
"""

from __future__ import annotations

import sqlite3
import time
from typing import Callable


# the columns every keyed table starts with: a result and what it is of (ResultKey.digest() and the key itself)
KEYED = """            id INTEGER PRIMARY KEY,
            key TEXT NOT NULL,
            key_json TEXT NOT NULL,
            source_hash TEXT NOT NULL,
            path TEXT,
            kernel TEXT,
            chip TEXT,"""


def _v1(db: sqlite3.Connection) -> None:
    db.execute("""
        CREATE TABLE checks (
            id INTEGER PRIMARY KEY,
            key TEXT NOT NULL,            -- ResultKey.digest()
            key_json TEXT NOT NULL,       -- the ResultKey itself
            source_hash TEXT NOT NULL,
            path TEXT,
            kernel TEXT,
            tier INTEGER NOT NULL,
            chip TEXT,
            status TEXT NOT NULL,         -- "ok", "error", "skipped: <why>"
            findings_json TEXT NOT NULL,  -- list of analysis.types.Finding via to_json
            jax_version TEXT,
            libtpu_version TEXT,
            backend TEXT,
            created REAL NOT NULL
        )""")
    db.execute(f"""
        CREATE TABLE measurements (
{KEYED}
            status TEXT NOT NULL,
            provenance TEXT NOT NULL,     -- device / estimate / interpret
            median_ns REAL,
            measurement_json TEXT NOT NULL,  -- analysis.types.Measurement via to_json
            created REAL NOT NULL
        )""")
    db.execute("CREATE INDEX checks_key ON checks(key, tier)")
    db.execute("CREATE INDEX measurements_key ON measurements(key)")


def _v2(db: sqlite3.Connection) -> None:
    db.execute("ALTER TABLE measurements ADD COLUMN run_id INTEGER")
    db.execute("""
        CREATE TABLE tuning_runs (
            id INTEGER PRIMARY KEY,
            key TEXT NOT NULL,            -- digest of the ResultKey with an empty config
            key_json TEXT NOT NULL,
            path TEXT,
            kernel TEXT,
            chip TEXT,
            best_config_json TEXT,        -- null when no configuration succeeded
            summary_json TEXT NOT NULL,
            created REAL NOT NULL
        )""")
    db.execute("""
        CREATE TABLE agent_steps (
            id INTEGER PRIMARY KEY,
            run_id TEXT NOT NULL,         -- the agent run's own id
            step INTEGER NOT NULL,
            kind TEXT NOT NULL,           -- "plan", "implement", "check", "measure", ...
            key TEXT,                     -- ResultKey digest of the candidate, when there is one
            payload_json TEXT NOT NULL,
            created REAL NOT NULL
        )""")
    db.execute("CREATE INDEX checks_path ON checks(path, kernel, created)")
    db.execute("CREATE INDEX measurements_path ON measurements(path, kernel, created)")
    db.execute("CREATE INDEX agent_steps_run ON agent_steps(run_id, step)")


def _v3(db: sqlite3.Connection) -> None:
    db.execute("""
        CREATE TABLE llm_calls (
            id INTEGER PRIMARY KEY,
            run_id TEXT NOT NULL,         -- the agent run (e.g. one `pallasite fix`), for replay
            step INTEGER NOT NULL,        -- the call's number within the run, from 1
            provider TEXT NOT NULL,       -- "gemini", "openai", "scripted", ...
            model TEXT,
            system TEXT NOT NULL,         -- the system instruction sent (redacted)
            prompt TEXT NOT NULL,         -- the prompt sent (redacted)
            response TEXT,                -- the reply text (redacted); null when the call failed
            error TEXT,                   -- why the call failed (redacted)
            usage_json TEXT NOT NULL,     -- input/output/thinking tokens, cost
            seconds REAL,
            created REAL NOT NULL
        )""")
    db.execute("CREATE INDEX llm_calls_run ON llm_calls(run_id, step)")


def _v4(db: sqlite3.Connection) -> None:
    import json

    db.execute("""
        CREATE TABLE estimates (
            id INTEGER PRIMARY KEY,
            key TEXT NOT NULL,            -- ResultKey.digest(): chip = the chip estimated for
            key_json TEXT NOT NULL,
            source_hash TEXT NOT NULL,
            path TEXT,
            kernel TEXT,
            chip TEXT,
            model TEXT NOT NULL,          -- the model that made the figure (the cost model, XLA's cost analysis)
            status TEXT NOT NULL,
            seconds REAL,
            payload_json TEXT NOT NULL,   -- the model's breakdown (a CostEstimate, the VMEM limit used, ...)
            created REAL NOT NULL,
            run_id INTEGER                -- the tuning run that ranked by it, if any
        )""")
    db.execute(f"""
        CREATE TABLE verdicts (
{KEYED}
            method TEXT NOT NULL,         -- what decided it (tier 3 interpret mode vs the reference, ...)
            state TEXT NOT NULL,          -- "ok", "error", "skipped: <why>"
            payload_json TEXT NOT NULL,
            created REAL NOT NULL
        )""")
    db.execute("CREATE INDEX estimates_key ON estimates(key, model)")
    db.execute("CREATE INDEX verdicts_key ON verdicts(key, method)")
    rows = db.execute("SELECT id, key, key_json, source_hash, path, kernel, chip, status, provenance, median_ns,"
                      " measurement_json, created, run_id FROM measurements WHERE provenance IN ('estimate', 'interpret')"
                      ).fetchall()
    for (id_, key, key_json, source, path, kernel, chip, status, prov, median, m_json, created, run_id) in rows:
        m = json.loads(m_json)
        error = m.get("error") or ""
        payload = json.loads(error) if error.startswith("{") else ({"note": error} if error else {})
        if prov == "estimate":
            db.execute("INSERT INTO estimates (key, key_json, source_hash, path, kernel, chip, model, status, seconds,"
                       " payload_json, created, run_id) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                       (key, key_json, source, path, kernel, chip, m.get("method") or "unknown model", status,
                        median / 1e9 if median is not None else None, json.dumps(payload), created, run_id))
        elif str(m.get("method") or "").startswith("tier 3") and error.startswith("{"):
            db.execute("INSERT INTO verdicts (key, key_json, source_hash, path, kernel, chip, method, state,"
                       " payload_json, created) VALUES (?,?,?,?,?,?,?,?,?,?)",
                       (key, key_json, source, path, kernel, chip, m["method"], str(payload.get("state") or status),
                        json.dumps(payload), created))
        else:
            continue  # an interpret-mode timing stays a (labelled) measurement
        db.execute("DELETE FROM measurements WHERE id = ?", (id_,))


def _v5(db: sqlite3.Connection) -> None:
    # the model's name, version and code digest ("pallasite roofline v3 @<digest>")
    db.execute("ALTER TABLE estimates ADD COLUMN cost_model TEXT")
    db.execute("ALTER TABLE estimates ADD COLUMN pallasite_version TEXT")
    db.execute("CREATE INDEX estimates_made_by ON estimates(key, cost_model, pallasite_version)")


MIGRATIONS: tuple[Callable[[sqlite3.Connection], None], ...] = (_v1, _v2, _v3, _v4, _v5)
SCHEMA_VERSION = len(MIGRATIONS)


def current_version(db: sqlite3.Connection) -> int:
    row = db.execute("SELECT name FROM sqlite_master WHERE type='table' AND name='schema_version'").fetchone()
    if row is None:
        return 0
    value = db.execute("SELECT MAX(version) FROM schema_version").fetchone()[0]
    return int(value or 0)


class SchemaTooNew(RuntimeError):
    """The database was written by a newer pallasite (its schema version is higher than ours)."""


def migrate(db: sqlite3.Connection, upto: int = SCHEMA_VERSION) -> int:
    """Bring ``db`` (autocommit mode) to version ``upto`` in one write transaction; returns it."""
    db.execute("BEGIN IMMEDIATE")
    try:
        db.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL, applied REAL NOT NULL)")
        version = current_version(db)
        if version > SCHEMA_VERSION:
            raise SchemaTooNew(
                f"the results store has schema version {version}, newer than this pallasite's "
                f"{SCHEMA_VERSION}: upgrade pallasite, or run `pallasite store clear` to start afresh")
        for number in range(version + 1, upto + 1):
            MIGRATIONS[number - 1](db)
            db.execute("INSERT INTO schema_version (version, applied) VALUES (?, ?)", (number, time.time()))
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    return max(version, upto)
