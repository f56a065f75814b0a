"""Tier-0 results of texts a document had a moment ago, so that an undo (or a statement typed and
then removed) gets its analysis back without reading the text again.

``analyze(text, path)`` is a function of the text, the path, the target chip and the scoped-VMEM
limit (it reads nothing else that changes while a server runs: the installed jax's API table is
read once). So its ``SourceAnalysis`` (frozen: sites, tasks, findings) can be handed out again for
the same four. Kept in the document's ``Tier0State.results``: the last ``PER_STATE`` results, keyed
by the path and a BLAKE2b digest of the text (not the text: a few 1 MB texts would weigh more than
the results); texts over ``MAX_TEXT_BYTES`` are not kept. They go with the state (a closed document).
"""

from __future__ import annotations

import hashlib
from typing import Any

from .tier0_state import Tier0State

PER_STATE = 8
MAX_TEXT_BYTES = 1 << 20


def signature(path: str | None, data: bytes, target: str, scoped_vmem: int | None) -> tuple | None:
    """What a result is kept under (None: a text too big to keep)."""
    if len(data) > MAX_TEXT_BYTES:
        return None
    return path, target, scoped_vmem, len(data), hashlib.blake2b(data, digest_size=16).digest()


def get(state: Tier0State | None, sig: tuple | None) -> Any:
    if state is None or sig is None:
        return None
    with state.lock:
        kept = state.results
        found = kept.get(sig)
        if found is not None:
            kept.move_to_end(sig)
        return found


def put(state: Tier0State | None, sig: tuple | None, result: Any) -> None:
    if state is None or sig is None:
        return
    with state.lock:
        kept = state.results
        kept[sig] = result
        kept.move_to_end(sig)
        while len(kept) > PER_STATE:
            kept.popitem(last=False)
