"""Python's ``ast`` of a kernel file, built one top-level statement at a time and reused across edits.

Two tier-0 rules (VMEM, megacore) and the origin tracer read the file through Python's ``ast``. A
full ``ast.parse`` of a 2,700-line kernel file costs 20-25 ms and every whole-tree walk another
10 ms; after an edit inside one function, all but that function's statement are unchanged. So:

- ``units(root, data)``: the file cut into *units*, runs of whole lines holding one or more
  top-level statements (from tree-sitter's tree, already parsed incrementally);
- ``module_for(text, data, starts, state)``: the ``ast.Module`` of the text, each unit parsed alone
  (its line numbers moved to where it sits) or, when a unit with the same text was parsed for the
  document's ``state`` (``Tier0State.units``) before, that unit's nodes taken over and moved in
  place (only their line numbers change);
- ``Unit.facts``: what a rule read from one unit's nodes (kept with the unit, so a rule that reads
  the file unit by unit reads only the edited one again);
- ``index_of(module)``: what the rules and the tracer look up file-wide (function and class
  definitions, imported names, calls, assignments, expressions by position), in the order a walk
  of the whole tree (``ast.walk``: breadth first) would give them, kept per unit so that a reused
  unit brings its lookups with it. A module from a plain ``ast.parse`` gets the same index (one
  unit holding every statement), so both paths answer the same.

The units a build no longer uses (the old text of an edited function) stay as spares, a few per
document (16, 64 KB of text), so that an undo finds them again.

Ownership: a state's units move into the module built from them (their nodes change line
numbers), so a module built for a state is used by one analysis at a time: ``module_for`` takes
the state's units out, ``release(state, module)`` hands them back when the analysis is done and
empties the module (the spare units' statements still name it as their parent). A second analysis
with the same state meanwhile finds none and parses the whole text. The units go with the state (a
closed document); a text over ``MAX_TEXT_BYTES`` keeps none (an ``ast`` costs over 100 bytes per
byte of text). Units not kept are freed at once when there are many (``discard``): every parent link
closes a reference cycle, which only the garbage collector would free.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from .ast_links import PARENT, SPARE as _SPARE, UNITS as _UNITS, discard, walk  # noqa: F401 (walk: rules read it here)
from .tier0_state import Tier0State

_INDEX = "_pallasite_index"
SPARE_UNITS = 16  # and at most SPARE_BYTES of their text (an ast costs over 100 bytes per byte of text)
SPARE_BYTES = 64 * 1024
MAX_TEXT_BYTES = 1 << 20
DISCARD_ABOVE_BYTES = 256 * 1024  # unkept units of more text than this are freed by ``discard``

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)
# Node kinds CPython's parser shares between every tree (one ``ast.Load()``, one ``ast.Add()``...):
# a parent link on one would keep the last tree parsed alive (600 MB for a 5 MB document), so
# they get none.
_SHARED = (ast.expr_context, ast.boolop, ast.operator, ast.unaryop, ast.cmpop)


@dataclass(eq=False)
class Unit:
    """One run of whole lines (``start``: its first 0-based line) and its parsed statements; its
    lookups hold (depth below the module, node) in ``ast.walk`` order, positions relative to ``start``."""

    text: str
    start: int
    stmts: list[ast.stmt]
    positioned: list[tuple[int, ast.AST]] = field(default_factory=list)  # every node with line numbers
    defs: list[tuple[int, ast.AST]] = field(default_factory=list)
    classes: list[tuple[int, ast.ClassDef]] = field(default_factory=list)
    calls: list[tuple[int, ast.Call]] = field(default_factory=list)
    assigns: list[tuple[int, ast.Assign]] = field(default_factory=list)
    imports: list[tuple[int, ast.AST]] = field(default_factory=list)
    sequences: list[tuple[int, ast.AST]] = field(default_factory=list)  # tuple and list displays
    _exprs: dict[tuple[int, int], list[tuple[int, ast.expr]]] | None = None  # (line - start, col), when asked
    # what a rule read from this unit's nodes alone (rules/sharding.py), kept with the unit: a unit
    # reused after an edit elsewhere brings its facts along, so the rule reads only the edited unit
    facts: dict[str, object] = field(default_factory=dict)

    def move(self, start: int) -> None:
        delta = start - self.start
        if delta:
            for _, node in self.positioned:
                node.lineno += delta
                node.end_lineno += delta
            self.start = start

    def expressions(self) -> dict[tuple[int, int], list[tuple[int, ast.expr]]]:
        """Expressions by (line - start, column): built when first asked (a changed unit is rarely asked)."""
        if self._exprs is None:
            found: dict[tuple[int, int], list[tuple[int, ast.expr]]] = {}
            for depth, node in self.positioned:
                if isinstance(node, ast.expr):
                    found.setdefault((node.lineno - 1 - self.start, node.col_offset), []).append((depth, node))
            self._exprs = found
        return self._exprs


_BUCKETS = {ast.FunctionDef: "defs", ast.AsyncFunctionDef: "defs", ast.ClassDef: "classes", ast.Call: "calls",
            ast.Assign: "assigns", ast.Import: "imports", ast.ImportFrom: "imports", ast.Tuple: "sequences",
            ast.List: "sequences"}
_POSITIONED: dict[type, bool] = {}


def _indexed(text: str, start: int, stmts: list[ast.stmt]) -> Unit:
    """A unit of ``stmts`` (line numbers already where the unit sits): parent links within it and
    its lookups, from one breadth-first walk (``ast.walk``'s order; children as
    ``ast.iter_child_nodes`` gives them, read directly: that generator was most of the cost)."""
    unit = Unit(text, start, stmts)
    positioned, buckets, shared, base = unit.positioned, _BUCKETS, _SHARED, ast.AST
    lists = {name: getattr(unit, name) for name in set(buckets.values())}
    level = [(1, s) for s in stmts]
    for depth, node in level:  # breadth first: the list grows while it is read
        kind = node.__class__
        has_lines = _POSITIONED.get(kind)
        if has_lines is None:
            has_lines = _POSITIONED[kind] = "end_lineno" in kind._attributes
        if has_lines and node.end_lineno is not None:
            positioned.append((depth, node))
        bucket = buckets.get(kind)
        if bucket is not None:
            lists[bucket].append((depth, node))
        below = depth + 1
        for name in kind._fields:
            value = getattr(node, name, None)
            if value.__class__ is list:
                for item in value:
                    if isinstance(item, base) and not isinstance(item, shared):
                        item._pallasite_parent = node
                        level.append((below, item))
            elif isinstance(value, base) and not isinstance(value, shared):
                value._pallasite_parent = node
                level.append((below, value))
    return unit


def _parsed(text: str, start: int) -> Unit:
    """``text`` (whole lines starting at line ``start``) parsed alone; raises SyntaxError/ValueError."""
    module = ast.parse(text)
    unit = _indexed(text, 0, module.body)
    unit.move(start)
    return unit


def units(root, data: bytes) -> list[tuple[int, int]] | None:
    """The file's units as (first line, first byte) of each, from tree-sitter's ``root``: a unit starts
    where a top-level statement starts at column 0 on a line no earlier statement reaches. None
    when the tree has errors (Python's own parser then reads the whole text)."""
    if root.has_error:
        return None
    out = [(0, 0)]
    reached = -1
    for child in root.children:
        (row, column), end_row = child.start_point, child.end_point[0]
        if column == 0 and row > reached and row > out[-1][0]:
            out.append((row, child.start_byte - column))
        reached = max(reached, end_row)
    return out


def module_for(text: str, data: bytes, starts: list[tuple[int, int]] | None,
               state: Tier0State | None) -> ast.Module | None:
    """The ``ast.Module`` of ``text`` (``data``: its UTF-8 bytes; ``starts``: ``units()``), None when
    Python cannot parse it. With a ``state``, the units last released to it are reused where their
    text is unchanged; hand them back with ``release(state, module)``."""
    if starts is None or "\r" in text or "\x0c" in text:  # line ends or indentation tree-sitter may read otherwise
        return whole(text)
    previous = None
    if state is not None:
        with state.lock:
            previous, state.units = state.units, None
    spare: dict[str, list[Unit]] = {}
    for unit in previous or ():  # the last build's units, then the spare ones before them
        spare.setdefault(unit.text, []).append(unit)
    built: list[Unit] = []
    bounds = [*starts, (None, len(data))]
    try:
        for (line, begin), (_, end) in zip(bounds, bounds[1:]):
            piece = data[begin:end].decode("utf-8", errors="surrogateescape")
            reused = spare.get(piece)
            if reused:
                unit = reused.pop(0)
                unit.move(line)
            else:
                unit = _parsed(piece, line)
            built.append(unit)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return whole(text)
    module = ast.Module(body=[s for u in built for s in u.stmts], type_ignores=[])
    for stmt in module.body:
        setattr(stmt, PARENT, module)
    setattr(module, _UNITS, built)
    kept, size = [], 0  # units this text no longer has (an undo brings them back), newest first
    for unit in (u for us in spare.values() for u in us):
        size += len(unit.text)
        if len(kept) >= SPARE_UNITS or size > SPARE_BYTES:
            break
        kept.append(unit)
    setattr(module, _SPARE, kept)
    return module


def release(state: Tier0State | None, module: ast.Module | None) -> None:
    """The units of ``module`` (built by ``module_for`` or ``whole``) kept for ``state``'s next build;
    not kept (no state, or over ``MAX_TEXT_BYTES`` of text): freed now if over ``DISCARD_ABOVE_BYTES``."""
    built = getattr(module, _UNITS, None) if module is not None else None
    if built is None:
        return
    size = sum(len(u.text) for u in built)
    if state is None or size > MAX_TEXT_BYTES:
        if state is not None and size > DISCARD_ABOVE_BYTES:  # freed after the diagnostics are out
            with state.lock:
                earlier, state.unkept = state.unkept, module
            if earlier is not None:
                discard(earlier)
        elif size > DISCARD_ABOVE_BYTES:
            discard(module)
        return
    kept = [*built, *getattr(module, _SPARE, ())]
    # Emptied: the statements a unit kept as a spare still name this module as their parent, and a
    # module holding its units, spares and index would keep every older build alive in a chain.
    for name in [n for n in vars(module) if n.startswith("_pallasite_")]:
        delattr(module, name)
    module.body = []
    with state.lock:
        state.units = kept


def discard_unkept(state: Tier0State) -> None:
    """Free the module ``state``'s last analysis built and did not keep (the language server calls
    this on its tier-0 thread once the document's diagnostics are published: ~1 s for 5 MB)."""
    with state.lock:
        module, state.unkept = state.unkept, None
    if module is not None:
        discard(module)


def whole(text: str) -> ast.Module | None:
    """``text`` parsed in one piece, with parent links and its index as one unit (None: no parse)."""
    try:
        module = ast.parse(text)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    unit = _indexed(text, 0, module.body)
    for stmt in module.body:
        setattr(stmt, PARENT, module)
    setattr(module, _UNITS, [unit])
    return module


class Index:
    """File-wide lookups of one module, each in ``ast.walk`` order (computed when first asked)."""

    def __init__(self, built: list[Unit]) -> None:
        self.units = built
        self._starts = [u.start for u in built]
        self._memo: dict[str, list] = {}

    def _merged(self, name: str) -> list:
        found = self._memo.get(name)
        if found is None:  # breadth first over the module: by depth, then in unit order (a stable sort)
            pairs = [p for u in self.units for p in getattr(u, name)]
            pairs.sort(key=lambda p: p[0])
            found = self._memo[name] = [node for _, node in pairs]
        return found

    @property
    def defs(self) -> list[ast.AST]:
        return self._merged("defs")

    @property
    def classes(self) -> list[ast.ClassDef]:
        return self._merged("classes")

    @property
    def calls(self) -> list[ast.Call]:
        return self._merged("calls")

    @property
    def assigns(self) -> list[ast.Assign]:
        return self._merged("assigns")

    @property
    def imports(self) -> list[ast.AST]:
        return self._merged("imports")

    @property
    def sequences(self) -> list[ast.AST]:
        return self._merged("sequences")

    def expressions_at(self, line: int, column: int) -> list[ast.expr]:
        """Expressions starting at 0-based ``line``, ``column``, in walk order."""
        import bisect

        i = bisect.bisect_right(self._starts, line) - 1
        found: list[tuple[int, ast.expr]] = []
        # a unit of several statements on the line of the next unit's start cannot exist (units
        # start on lines no earlier statement reaches), so one unit holds every node starting here
        if i >= 0:
            unit = self.units[i]
            found = unit.expressions().get((line - unit.start, column), [])
        return [node for _, node in sorted(found, key=lambda p: p[0])]


def index_of(module: ast.Module) -> Index:
    """The lookups of ``module`` (built once per module; a module from ``ast.parse`` elsewhere is
    indexed as one unit)."""
    index = getattr(module, _INDEX, None)
    if index is None:
        built = getattr(module, _UNITS, None)
        if built is None:
            built = [_indexed("", 0, module.body)]
            setattr(module, _UNITS, built)
        index = Index(built)
        setattr(module, _INDEX, index)
    return index
