"""Stored estimates are keyed by the cost model and the pallasite version that made them (issue 42/44):
tune's stored estimates used to carry neither, so a changed model silently reused old figures under
its new name. Through tune's own store keys (engine/tuning/tune_store.StoreKeys) and a real results store."""

from __future__ import annotations

import sqlite3

import pytest

from pallasite.analysis.types import CostEstimate
from pallasite.analysis.verdict import COST_MODEL
from pallasite.engine.tuning.tune import TuneOptions
from pallasite.engine.tuning.tune_store import StoreKeys
from pallasite.knowledge import store as store_mod
from pallasite.knowledge import store_schema
from pallasite.knowledge.store import ResultsStore

TEXT = "def kernel(x):\n    return x\n"


def _keys(tmp_path, store):
    path = tmp_path / "k.py"
    path.write_text(TEXT)
    return StoreKeys(str(path), TEXT, TuneOptions(entry="kernel", chip="v5e"), store)


def _estimate(seconds: float, model: str = COST_MODEL) -> CostEstimate:
    return CostEstimate(chip="v5e", config=(("bm", 128),), status="ok", seconds=seconds, bound="compute", model=model)


def test_a_changed_cost_model_or_pallasite_version_does_not_reuse_a_stored_estimate(tmp_path, monkeypatch):
    with ResultsStore.open(tmp_path) as store:
        keys = _keys(tmp_path, store)
        config = (("bm", 128),)
        keys.put_estimates({config: _estimate(1e-3)})
        assert keys.stored_estimates([config])[config].seconds == 1e-3  # same model, same version: reused
        (row,) = store.estimates(path=keys.path)
        assert row.seconds == 1e-3
        made_by = store._read("SELECT cost_model, pallasite_version FROM estimates", ())[0]
        assert made_by[0].startswith(COST_MODEL + " @") and made_by[1] == store_mod.current_pallasite_version()
        monkeypatch.setattr(store_mod, "current_cost_model", lambda: "pallasite roofline v99")
        assert keys.stored_estimates([config]) == {}  # a new model: the old figure is not its own
        monkeypatch.undo()
        monkeypatch.setattr(store_mod, "_cost_model_digest", lambda: "0123456789ab")
        assert keys.stored_estimates([config]) == {}  # the same name, changed code (a refit factor): not reused
        monkeypatch.undo()
        monkeypatch.setattr(store_mod, "current_pallasite_version", lambda: "99.0")
        assert keys.stored_estimates([config]) == {}  # a new pallasite: neither
        monkeypatch.undo()
        assert keys.stored_estimates([config])[config].seconds == 1e-3
        # an estimate a worker made with another model is stored under that model, not the current one
        keys.put_estimates({config: _estimate(2e-3, model="pallasite roofline v2")})
        assert keys.stored_estimates([config])[config].seconds == 1e-3
        (old,) = store.estimates(path=keys.path, cost_model="pallasite roofline v2")
        assert old.seconds == 2e-3


def test_estimates_stored_before_schema_v5_are_kept_but_never_reused(tmp_path):
    """A v4 store's estimate row (no model or version in its key) migrates to v5 and is not reused."""
    path = tmp_path / store_mod.STORE_DIR / store_mod.STORE_FILE
    path.parent.mkdir()
    db = sqlite3.connect(path, isolation_level=None)
    assert store_schema.migrate(db, upto=4) == 4
    keys = _keys(tmp_path, None)
    from dataclasses import replace

    from pallasite.analysis.local_imports import source_hash
    from pallasite.analysis.types import ResultKey, installed_versions

    v = installed_versions()
    key = replace(ResultKey(code_hash=source_hash(keys.path, TEXT), kernel="kernel", chip="v5e",
                            jax_version=v["jax"], libtpu_version=v["libtpu"], backend="cost-model"),
                  config=(("bm", 128),))
    payload = '{"estimate": {"chip": "v5e", "config": [["bm", 128]], "status": "ok", "seconds": 0.005}}'
    db.execute("INSERT INTO estimates (key, key_json, source_hash, path, kernel, chip, model, status, seconds,"
               " payload_json, created) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
               (key.digest(), key.to_json(), "h", keys.path, "kernel", "v5e",
                "pallasite cost model (roofline over traced counts)", "ok", 5e-3, payload, 1.0))
    db.close()
    with ResultsStore.open(tmp_path) as store:
        assert store.info().schema_version == store_schema.SCHEMA_VERSION == 5
        keys = _keys(tmp_path, store)
        assert keys._key((("bm", 128),)).digest() == key.digest()  # the same key tune asks for
        assert keys.stored_estimates([(("bm", 128),)]) == {}
        (row,) = store.estimates(path=keys.path, cost_model=None, pallasite_version=None)
        assert row.seconds == 5e-3


@pytest.mark.parametrize("given", [COST_MODEL, None])  # this pallasite's model named, or left to the store
def test_put_estimate_names_the_model_that_made_it(tmp_path, given):
    with ResultsStore.open(tmp_path) as store:
        keys = _keys(tmp_path, store)
        store.put_estimate(keys._key(()), model="m", status="ok", seconds=1.0, payload={}, cost_model=given)
        (row,) = store.estimates(keys._key(()))
        assert row.seconds == 1.0
