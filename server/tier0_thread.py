"""Tier 0 of big documents, off the event loop: the one tier-0 thread, and what keeps that thread
from holding the GIL for long (the server's other requests wait for the GIL, not for the thread).

- ``pool()``: the single-thread executor tier 0 of documents over ``TIER0_INLINE_CHARS`` runs on;
- ``collector_off()``: the cyclic collector off while any document is analysed (tier 0 makes no cycles);
- ``freeze_startup()``: what existed before the first document's tier 0 left out of collections;
- ``collector_paused()``: the same for such a document, and
  what exists afterwards frozen out of later collections (a 5 MB analysis makes ~450,000 objects:
  the full collections it triggered held the GIL 0.2-1.8 s each);
- ``dispose(value)``: a big analysis freed a piece at a time (freeing it in one go, one cascade of
  deallocations in C, held the GIL 0.15 s for a 5 MB document);
- ``RELEASE_ABOVE_CHARS``: closing a document this big collects garbage and trims the heap.

Tier 0's own analysis leaves no reference cycles (analysis/tier0.py clears its memo), so nothing
it makes waits for a collection; cycles other code makes while the collector is paused wait for
the next big document's close (``Session.close`` unfreezes and collects).
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Iterator

# Closing a document bigger than this collects garbage and trims the heap (a few ms) so that its
# trees' memory goes back to the system at once.
RELEASE_ABOVE_CHARS = 64_000
# Documents up to this many characters are analysed on the event loop when a request needs it
# (a few ms); bigger ones only on the tier-0 thread, so they never hold up other requests.
TIER0_INLINE_CHARS = 200_000
_TIER0_POOL: ThreadPoolExecutor | None = None


_PAUSES = 0  # collector_off()s running now, on any thread
_WAS_ENABLED = True  # whether the collector was on when the first of them began
_PAUSE_LOCK = threading.Lock()


@contextlib.contextmanager
def collector_off() -> Iterator[None]:
    """The cyclic collector off for the duration of one tier-0 run (it makes no cycles: what it
    allocates is freed by reference counting). On while typing in a 2,700-line file, the collector
    ran ~1.5 times per analysis, 0.75 ms on average and up to 46 ms for a full collection.
    Nested and concurrent uses (the event loop and the tier-0 thread) turn it back on when the last
    one ends, and only if it was on before the first began."""
    global _PAUSES, _WAS_ENABLED
    with _PAUSE_LOCK:
        if _PAUSES == 0:
            _WAS_ENABLED = gc.isenabled()
        _PAUSES += 1
        gc.disable()
    try:
        yield
    finally:
        with _PAUSE_LOCK:
            _PAUSES -= 1
            if _PAUSES == 0 and _WAS_ENABLED:
                gc.enable()


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic collector paused for the duration; afterwards what exists is frozen
    (``gc.freeze``: left out of later collections) and the collector runs again."""
    with collector_off():
        try:
            yield
        finally:
            gc.freeze()


_STARTUP_FROZEN = False


def freeze_startup() -> None:
    """Once, before the first document's tier 0: what the server made while starting (its modules,
    pygls, lsprotocol, cattrs: ~60,000 objects) is left out of later collections (``gc.freeze``).
    A full collection then traverses what the documents' analyses keep, not the whole process: in
    240 edits of splash attention in process, the full collections took 15.7 ms (one) instead of 93
    ms (two, one of 75 ms) that landed in some edit's wait. What startup left in cycles stays
    (``Session.close`` of a big document unfreezes it all)."""
    global _STARTUP_FROZEN
    if not _STARTUP_FROZEN:
        _STARTUP_FROZEN = True
        gc.freeze()


def dispose(value: Any) -> None:
    """Drop ``value`` (tuples, lists and dataclasses, followed) a piece at a time: other threads run
    between pieces."""
    pending, seen = [value], set()
    del value
    while pending:
        item = pending.pop()
        if id(item) in seen:  # shared, or a cycle: expanded once
            continue
        seen.add(id(item))
        if isinstance(item, (tuple, list)):
            pending.extend(item)
        elif dataclasses.is_dataclass(item) and not isinstance(item, type):
            pending.extend(getattr(item, f.name) for f in dataclasses.fields(item))
        del item


def pool() -> ThreadPoolExecutor:
    global _TIER0_POOL
    if _TIER0_POOL is None:
        _TIER0_POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pallasite-tier0")
    return _TIER0_POOL
