"""What tier 0 keeps of one document between its analyses: one ``Tier0State`` per open document.

``analyze(text, path, state=state)`` reads the text incrementally from what the same state kept
from its last analysis, and leaves there what the next one will reuse:

- ``tree``: the last tree-sitter tree and the bytes it was parsed from (``source.parse_bytes``),
  ``short`` (those bytes, when they hold no long comment run) and ``earlier`` (the last replaced
  trees, for an undo);
- ``statements``: each top-level statement's captures of the file-wide query (``source``);
- ``units``: Python ``ast`` units of the last build and a few spares (``ast_units``); ``unkept``:
  the last build of a text too big to keep, until ``ast_units.discard_unkept`` frees it (``clear``:
  ``ast_links.discard``);
- ``sites``: the kept ``pallas_call`` sites (``site_memo``);
- ``program_id``: PLS006's findings per kernel (``rules/kernel.py``);
- ``results``: the last few results, by a digest of the text (``tier0_memo``).

The server's ``Document`` owns one and drops it with the document (``clear`` on close, so a big
tree's memory goes back at once). Nothing else shares it: the CLI checker and the agents' candidate
checks analyse with no state (or a fresh one of their own), so a candidate text analysed under the
user's path never replaces the open document's trees and memos. A state serves one document:
its fields are read and replaced under ``lock`` (the event loop and the tier-0 thread may both
analyse a document whose size crossed ``TIER0_INLINE_CHARS`` meanwhile).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any


@dataclass(eq=False)
class Tier0State:
    """Tier 0's incremental state for one document (see the module docstring for each field)."""

    tree: tuple[bytes, Any] | None = None  # (parsed bytes, tree_sitter.Tree)
    short: bytes | None = None
    earlier: list[tuple[bytes, Any, bool]] = field(default_factory=list)
    statements: dict[bytes, Any] | None = None
    units: list[Any] | None = None
    unkept: Any = None  # an ast.Module
    sites: OrderedDict = field(default_factory=OrderedDict)
    program_id: dict[tuple, Any] | None = None
    results: OrderedDict = field(default_factory=OrderedDict)
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False)

    def clear(self) -> None:
        """Drop everything kept (a closed document; ``source.release_memory`` gives it back)."""
        with self.lock:
            self.tree, self.short, self.statements, self.units, self.program_id = None, None, None, None, None
            unkept, self.unkept = self.unkept, None
            self.earlier = []
            self.sites = OrderedDict()
            self.results = OrderedDict()
        if unkept is not None:
            from .ast_links import discard

            discard(unkept)

    def __repr__(self) -> str:  # never the trees and texts
        size = len(self.tree[0]) if self.tree is not None else 0
        return f"Tier0State({size} bytes parsed, {len(self.results)} results kept)"
