"""Tier 0 runs with Python's cyclic collector off (server/tier0_thread.collector_off): an analysis
makes no reference cycles, and while it was on a full collection could land in the middle of a
keystroke's analysis (up to 46 ms on jax's splash-attention file)."""

from __future__ import annotations

import gc
import os
import threading
from types import SimpleNamespace

from pallasite.server import tier0_runs, tier0_thread
from pallasite.server.documents import Document
from pallasite.server.settings import Settings

TILING = os.path.join(os.path.dirname(__file__), "data", "tier0", "pls001_tiling_bad.py")


def test_the_inline_run_analyses_with_the_collector_off(monkeypatch):
    with open(TILING, encoding="utf-8") as handle:
        text = handle.read()
    seen = []
    real = tier0_runs.tier0_snapshot

    def snapshot(*args, **kwargs):
        seen.append(gc.isenabled())
        return real(*args, **kwargs)

    monkeypatch.setattr(tier0_runs, "tier0_snapshot", snapshot)
    settings = Settings(target="v5e")
    session = SimpleNamespace(settings=settings, tier0_stopped=set(), tier0_failed=set())
    doc = Document.opened("file:///k.py", TILING, 1, text)
    assert gc.isenabled()
    tier0_runs.run_tier0(session, doc)
    assert seen == [False] and gc.isenabled()
    assert [f.code for f in doc.tier0] == ["PLS001"] and doc.analysis_version == 1


def test_the_collector_comes_back_when_the_last_pause_ends():
    assert gc.isenabled()
    inside, release = threading.Event(), threading.Event()

    def other():  # the tier-0 thread, pausing while the event loop's run is going on
        with tier0_thread.collector_off():
            inside.set()
            release.wait(10)

    with tier0_thread.collector_off():
        worker = threading.Thread(target=other)
        worker.start()
        assert inside.wait(10)
    assert not gc.isenabled()  # the other pause is still going on
    release.set()
    worker.join(10)
    assert gc.isenabled()
    with tier0_thread.collector_off():
        with tier0_thread.collector_off():
            pass
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off():
    gc.disable()
    try:
        with tier0_thread.collector_off():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()



def test_the_debounced_run_publishes_before_the_collector_comes_back(monkeypatch):
    """The collection an analysis puts off runs once the collector is on again (at the next
    allocation): the diagnostics go out first (server/checks.tier0_after)."""
    import asyncio
    from collections import deque

    from pallasite.server import checks

    with open(TILING, encoding="utf-8") as handle:
        text = handle.read()
    published, sent = [], []
    session = SimpleNamespace(settings=Settings(target="v5e"), tier0_stopped=set(), tier0_failed=set(),
                              tier0_seconds=deque(), publish=lambda doc: published.append(gc.isenabled()),
                              notify_status=lambda: sent.append(("status", len(published))))
    doc = Document.opened("file:///k.py", TILING, 1, text)
    tier0_runs.run_tier0(session, doc)  # a Pallas file already: the run starts no check
    assert gc.isenabled()
    asyncio.run(checks.tier0_after(session, doc, 0))
    assert published == [False] and gc.isenabled() and len(session.tier0_seconds) == 1
    assert sent == [("status", 1)]  # the status bar's tier-0 count, once, after the diagnostics went out


def test_what_the_server_made_before_the_first_tier0_run_is_frozen(monkeypatch):
    """Full collections traverse what the documents keep, not every module of the server."""
    monkeypatch.setattr(tier0_thread, "_STARTUP_FROZEN", False)
    with open(TILING, encoding="utf-8") as handle:
        text = handle.read()
    session = SimpleNamespace(settings=Settings(target="v5e"), tier0_stopped=set(), tier0_failed=set())
    frozen_before = gc.get_freeze_count()
    try:
        tier0_runs.run_tier0(session, Document.opened("file:///k.py", TILING, 1, text))
        assert gc.get_freeze_count() > frozen_before and tier0_thread._STARTUP_FROZEN
        count = gc.get_freeze_count()
        tier0_runs.run_tier0(session, Document.opened("file:///k.py", TILING, 2, text + "\n"))
        assert gc.get_freeze_count() <= count  # once only (frozen objects may still be freed)
    finally:
        gc.unfreeze()
