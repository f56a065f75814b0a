"""Tier-0 results of texts a file had a moment ago, so that an undo (or a statement typed and then
removed) gets its analysis back without reading the text again.

``analyze(text, path)`` is a function of the text, the path, the target chip and the scoped-VMEM
limit (it reads nothing else that changes while a server runs: the installed jax's API table is
read once). So its ``SourceAnalysis`` (frozen: sites, tasks, findings) can be handed out again for
the same four. Kept per path: the last ``PER_KEY`` results, keyed by a BLAKE2b digest of the text
(not the text: a few 1 MB texts per file would weigh more than the results); texts over
``MAX_TEXT_BYTES`` are not kept; at most ``MAX_KEYS`` paths. ``forget(key)`` drops a path's results
(``source.forget`` calls it when the document closes).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from typing import Any

PER_KEY = 8
MAX_KEYS = 16
MAX_TEXT_BYTES = 1 << 20

_RESULTS: OrderedDict[str, OrderedDict[tuple, Any]] = OrderedDict()
_LOCK = threading.Lock()


def signature(data: bytes, target: str, scoped_vmem: int | None) -> tuple | None:
    """What a result is kept under (None: a text too big to keep)."""
    if len(data) > MAX_TEXT_BYTES:
        return None
    return target, scoped_vmem, len(data), hashlib.blake2b(data, digest_size=16).digest()


def get(key: str | None, sig: tuple | None) -> Any:
    if key is None or sig is None:
        return None
    with _LOCK:
        kept = _RESULTS.get(key)
        found = kept.get(sig) if kept is not None else None
        if found is not None:
            kept.move_to_end(sig)
        return found


def put(key: str | None, sig: tuple | None, result: Any) -> None:
    if key is None or sig is None:
        return
    with _LOCK:
        kept = _RESULTS.setdefault(key, OrderedDict())
        kept[sig] = result
        kept.move_to_end(sig)
        while len(kept) > PER_KEY:
            kept.popitem(last=False)
        _RESULTS.move_to_end(key)
        while len(_RESULTS) > MAX_KEYS:
            _RESULTS.popitem(last=False)


def forget(key: str) -> None:
    with _LOCK:
        _RESULTS.pop(key, None)
