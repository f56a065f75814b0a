"""A file's ``pallas_call`` sites kept across edits: a site whose inputs did not change is not read again.

Reading one site (``sites.read_site``) looks at the call's top-level statement (its enclosing
functions), the module's own statements (imports, constants, tuples), the definitions it resolves
by name (the kernel, index maps, helpers: ``Source.function``, which records each name asked while
``Source.lookups`` is a set) and a few file-wide facts (the imports, the names rebound by
``global`` or a walrus anywhere, the forwarding wrappers). Its result, a ``KernelSite``, is plain
data: no tree nodes. So after an edit a site is handed out again, its spans moved with the lines,
when all of that is unchanged:

- the bytes of the call's statement and the call's offset in it;
- in file order, the bytes of its *dependencies*: that statement, every top-level statement that
  is not a function or class definition, and every top-level statement holding a definition
  (at any depth) of a name the read looked up; the same names give the same statements only if
  the read would look up the same names, which it does when those bytes are the same;
- the imports, the rebound names and the wrappers.

Every dependency must start at column 0 (a statement after ``;`` on a line another statement
shares would move sideways), and every span of the kept site must lie inside one dependency: each
span then moves by its own statement's line delta, columns unchanged. A file with a syntax error,
without a state (``Tier0State``: an open document's) or over ``source.YIELD_ABOVE_BYTES`` is read
afresh. Kept in the document's state (``Tier0State.sites``): the last ``PER_STATE`` sites, gone with
the state.
"""

from __future__ import annotations

import bisect
import dataclasses
import operator
from typing import Any

from tree_sitter import Node

from .source import YIELD_ABOVE_BYTES, Source
from .types import KernelSite, Span

PER_STATE = 12  # entries hold their dependencies' bytes (splash attention: 30-100 KB each)
_DEFINITIONS = ("function_definition", "class_definition", "decorated_definition")

# ``Tier0State.sites``: (statement bytes, call start and end in it) -> [entries], newest last


@dataclasses.dataclass(frozen=True)
class _Entry:
    names: tuple[str, ...]  # the names the read looked up
    deps: tuple[tuple[bytes, bool], ...]  # each dependency's bytes, and whether it holds the call
    base: tuple  # the file-wide facts the read depends on
    lines: tuple[tuple[int, int], ...]  # each dependency's first and last line then
    site: KernelSite


class _Outside(Exception):
    """A span outside every dependency: the site cannot be moved, only read again."""


class SiteMemo:
    """The kept sites of one analysis's file (``begin``), looked up and stored per call."""

    def __init__(self, source: Source, wrappers: frozenset[str]) -> None:
        self.source = source
        data = source.data
        self.statements = [c for c in source.root.children if c.type != "comment"]
        self.starts = [s.start_byte for s in self.statements]
        self.texts = [data[s.start_byte:s.end_byte] for s in self.statements]
        self.module = [i for i, s in enumerate(self.statements) if s.type not in _DEFINITIONS]
        self.base = (tuple(sorted(source.imports.items())), tuple(source.imported_modules),
                     frozenset(source.rebound_anywhere), wrappers)
        self._defining: dict[str, list[int]] = {}
        for name, defs in source.functions.items():
            self._defining[name] = sorted({self._statement(d.start_byte) for d in defs})
        self.used: list[tuple[tuple, _Entry]] = []  # (bucket, entry) handed out or stored this analysis

    def _statement(self, offset: int) -> int:
        return bisect.bisect_right(self.starts, offset) - 1

    def _dependencies(self, at: int, names: tuple[str, ...]) -> list[int] | None:
        deps = {at, *self.module}
        for name in names:
            deps.update(self._defining.get(name, ()))
        ordered = sorted(deps)
        if any(self.statements[i].start_point[1] != 0 for i in ordered):
            return None
        return ordered

    def _bucket(self, call: Node) -> tuple[int, tuple] | None:
        at = self._statement(call.start_byte)
        if at < 0:
            return None
        start = self.starts[at]
        return at, (self.texts[at], call.start_byte - start, call.end_byte - start)

    def get(self, call: Node) -> KernelSite | None:
        """The kept site of ``call``, moved to where its statements now are, or None."""
        found = self._bucket(call)
        if found is None:
            return None
        at, bucket = found
        with self.source.state.lock:
            entries = list(self.source.state.sites.get(bucket, ()))
        for entry in reversed(entries):
            if entry.base != self.base:
                continue
            deps = self._dependencies(at, entry.names)
            if deps is None or len(deps) != len(entry.deps):
                continue
            if any(self.texts[i] != text or (i == at) != holds for i, (text, holds) in zip(deps, entry.deps)):
                continue
            moves = [(first, last, self.statements[i].start_point[0] - first)
                     for i, (first, last) in zip(deps, entry.lines)]
            try:  # (every span lies in a dependency: checked when it was kept)
                site = moved(entry.site, moves) if any(delta for _, _, delta in moves) else entry.site
            except _Outside:
                continue
            self.used.append((bucket, entry))
            return site
        return None

    def put(self, call: Node, site: KernelSite, names: set[str]) -> None:
        """Keep ``site``, read just now from ``call`` after looking up ``names``."""
        found = self._bucket(call)
        if found is None:
            return
        at, bucket = found
        looked = tuple(sorted(names))
        deps = self._dependencies(at, looked)
        if deps is None:
            return
        lines = tuple((self.statements[i].start_point[0], self.statements[i].end_point[0]) for i in deps)
        try:
            moved(site, [(first, last, 0) for first, last in lines])  # every span inside a dependency
        except _Outside:
            return
        entry = _Entry(looked, tuple((self.texts[i], i == at) for i in deps), self.base, lines, site)
        self.used.append((bucket, entry))

    def finish(self) -> None:
        """Store what this analysis used and read, newest last; older entries beyond ``PER_STATE`` go."""
        state = self.source.state
        with state.lock:
            kept = state.sites
            for bucket, entry in self.used:
                entries = kept.pop(bucket, [])
                entries = [e for e in entries if e is not entry] + [entry]
                kept[bucket] = entries[-4:]
            while sum(len(v) for v in kept.values()) > PER_STATE and kept:
                kept.popitem(last=False)


def begin(source: Source, wrappers: frozenset[str]) -> SiteMemo | None:
    """The memo for ``source``'s sites, or None where sites are always read afresh."""
    if source.state is None or source.root.has_error or source.root.end_byte > YIELD_ABOVE_BYTES:
        return None
    return SiteMemo(source, wrappers)


def moved(value: Any, moves: list[tuple[int, int, int]]) -> Any:
    """``value`` (a site, its specs, tuples, spans) with each span moved by the line delta of the
    dependency holding it: ``moves`` are (first line, last line, delta), sorted, not overlapping.
    Raises ``_Outside`` for a span outside all of them. Parts without a moved span are shared."""
    firsts = [first for first, _, _ in moves]

    def span(s: Span) -> Span:
        i = bisect.bisect_right(firsts, s.line) - 1
        if i < 0 or s.end_line > moves[i][1] or s.end_line < s.line:
            raise _Outside
        delta = moves[i][2]
        return s if not delta else Span(s.line + delta, s.column, s.end_line + delta, s.end_column)

    def walk(item: Any) -> Any:
        cls = item.__class__
        if cls in _PLAIN:
            return item
        if cls is Span:
            return span(item)
        if cls is tuple:
            out = [walk(x) for x in item]
            return item if all(map(operator.is_, out, item)) else tuple(out)
        names = _fields(cls)
        if not names:
            return item
        changes = {}
        for name in names:
            old = getattr(item, name)
            new = walk(old)
            if new is not old:
                changes[name] = new
        if not changes:
            return item
        copy = object.__new__(cls)  # a frozen dataclass: its fields set as ``dataclasses.replace`` would
        copy.__dict__.update(item.__dict__)
        copy.__dict__.update(changes)
        return copy

    return walk(value)


_PLAIN = frozenset({int, str, float, bool, type(None), bytes})
_FIELDS: dict[type, tuple[str, ...]] = {}


def _fields(cls: type) -> tuple[str, ...]:
    names = _FIELDS.get(cls)
    if names is None:
        if not dataclasses.is_dataclass(cls) or getattr(cls, "__slots__", None):
            raise _Outside  # not a type this module knows how to move: read the site again
        names = _FIELDS[cls] = tuple(f.name for f in dataclasses.fields(cls))
    return names

