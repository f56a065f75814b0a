"""A Python kernel file read as source with tree-sitter: spans, imports, constants, functions.

Nothing here executes the file or imports JAX. ``Source`` wraps one parsed text and answers the
questions every tier-0 module asks:

- ``span(node)``: a tree-sitter node's range as our ``Span`` (0-based lines, code-point columns);
- ``qualname(node)``: the dotted name an expression like ``pl.BlockSpec`` refers to, through the
  file's imports (``pl`` -> ``jax.experimental.pallas``), or ``None``;
- ``constants``: module-level int constants (``BLOCK = 128``, ``BM, BN = 128, 256``,
  ``TILE = 2 * BLOCK``) with the span of the value they came from;
- ``functions``: function definitions by name (module level and nested);
- ``uses_pallas``: whether the file imports Pallas under any alias;
- ``calls``, ``bindings``, ``branches``, ``scope_nodes``: every such node, in source order (one
  query in C, one pass over the tree); ``attributes`` and ``comments`` too, read when first asked;
- ``has_error``: tree-sitter saw a syntax error (or Python-2-only syntax it accepts).
"""

from __future__ import annotations

import bisect
import re
import time
from dataclasses import dataclass
from functools import lru_cache
from itertools import accumulate
from typing import Iterator

import tree_sitter_python
from tree_sitter import Language, Node, Parser, Query, QueryCursor, Tree

from .tier0_state import Tier0State
from .types import Span

PALLAS_MODULE = "jax.experimental.pallas"
PALLAS_PREFIXES = ("jax.experimental.pallas", "jax._src.pallas")
GPU_MODULES = ("jax.experimental.pallas.triton", "jax.experimental.pallas.mosaic_gpu",
               "jax._src.pallas.triton", "jax._src.pallas.mosaic_gpu")
TPU_MODULES = ("jax.experimental.pallas.tpu", "jax.experimental.pallas.tpu_sc", "jax._src.pallas.mosaic")


@lru_cache(maxsize=1)
def language() -> Language:
    return Language(tree_sitter_python.language())


@lru_cache(maxsize=1)
def _query() -> Query:
    """One pass in C over the tree for everything tier 0 looks up file-wide."""
    return Query(language(), """
        (import_statement) @import
        (import_from_statement) @from
        (function_definition) @def
        (call) @call
        (print_statement) @py2
        (exec_statement) @py2
        (global_statement) @global
        [(assignment) (augmented_assignment) (for_statement) (for_in_clause) (named_expression)
         (with_item) (as_pattern)] @bind
        (named_expression) @walrus
        [(if_statement) (while_statement) (elif_clause) (conditional_expression)] @branch
        [(lambda) (class_definition) (decorated_definition)] @scope
    """)


@lru_cache(maxsize=1)
def _attribute_query() -> Query:
    return Query(language(), "(attribute) @attr")


@lru_cache(maxsize=1)
def _comment_query() -> Query:
    return Query(language(), "(comment) @comment")


def parse(text: str, state: "Tier0State | None" = None) -> Tree:
    """The tree-sitter tree of ``text`` (never raises; errors become ERROR/MISSING nodes).

    With a ``state`` (the document's ``Tier0State``), the last tree parsed for that state is reused:
    unchanged text gets the same tree, edited text is re-parsed incrementally from a copy of it (the
    language server re-checks a file after each edit; a full parse of a 2,600-line file costs
    10-20 ms, an incremental one well under 1 ms). Trees are never edited in place once handed
    out, so older ``Source`` objects stay valid. ``forget(state)`` drops what a state keeps.
    """
    return parse_bytes(text.encode("utf-8"), state)


# A state keeps its last tree (``Tier0State.tree``), whether those bytes have no long comment run
# (``short``), and its last few earlier trees (``earlier``): an undo gets its tree back without a
# parse. Incremental relatives of the current tree, they share all but the edited part with it
# (tree-sitter's subtrees are reference counted): a few KB each, not a whole tree. The re-parse
# they spare is usually ~0.5 ms, but 3-8 ms after a line inserted at some places of splash attention.
EARLIER_TREES = 2
# Trees cost about 50 bytes of memory per byte of text: a state keeps none of a text over this (a
# 5 MB document's tree is 250 MB; its next analysis parses it whole, ~1.5 s of the ~8 s it takes).
KEEP_TREE_BYTES = 2 << 20


def forget(state: "Tier0State | None") -> None:
    """Drop what ``state`` keeps (a closed document); ``release_memory`` gives it back."""
    if state is not None:
        state.clear()


def release_memory(collect: bool = True) -> None:
    """Collect what cycles hold (a ``Source`` and its memos; ``collect``) and return freed heap pages
    to the system (glibc keeps them otherwise: a dropped 5 MB tree would stay in resident memory)."""
    global _LIBC
    import gc

    if collect:
        gc.collect()
    if _LIBC is None:
        try:
            import ctypes

            _LIBC = ctypes.CDLL("libc.so.6")
        except OSError:
            _LIBC = False
    if _LIBC:
        _LIBC.malloc_trim(0)


_LIBC = None

# Parsing holds the GIL (3.5 s for 5 MB): past this size the text is handed to tree-sitter in
# chunks, and each chunk lets other threads run (a language server's event loop keeps answering).
# The chunks are views of the text, not copies: tree-sitter keeps every chunk it was given until
# the parse ends, and re-reads text when it looks ahead (1.2 GB of copies for a 0.5 MB file).
YIELD_ABOVE_BYTES = 256 * 1024
_CHUNK = 16 * 1024


class _YieldingReader:
    """Hands tree-sitter ``data`` a chunk at a time, letting other threads run between chunks.
    py-tree-sitter never drops its references to the chunks it was given, and each view holds the
    whole text: ``release()`` (after the parse) detaches them, or every big parse kept its text
    (5 MB after a 5 MB document was closed)."""

    def __init__(self, data: bytes) -> None:
        self.view = memoryview(data)
        self.given: list[memoryview] = []

    def __call__(self, offset: int, _point: object) -> memoryview:
        time.sleep(0)
        chunk = self.view[offset:offset + _CHUNK]
        self.given.append(chunk)
        return chunk

    def release(self) -> None:
        for chunk in (*self.given, self.view):
            try:
                chunk.release()
            except BufferError:  # still exported: left to its holder
                pass
        self.given = []


def _yielding_reader(data: bytes) -> _YieldingReader:
    return _YieldingReader(data)


# tree-sitter-python's scanner looks past every own-line comment that follows a newline to find
# the next line's indentation, once per comment: a run of N comment lines costs N^2 (a 0.5 MB file
# of commented-out code took 21 s). Runs this long are parsed with the comments blanked to spaces
# (same byte offsets; blank lines cost nothing), keeping any comment that mentions "pallasite"
# (suppressions). A blanked line that turns out to sit inside a string (tree-sitter says so after
# the parse) sends the text to a plain parse instead, which is then linear: no real comments.
# Measured on splash attention with a run of N comment lines added: a full parse costs 9 ms with
# N = 0-64, 11 ms with 128, 22 ms with 256, 60 ms with 512, 216 ms with 1,024; an incremental parse
# of an edit away from the run 0.6 ms whatever N. A masked text is read whole for runs after every
# edit (~2 ms on splash) and its per-statement captures are found again by a query of the whole tree
# (~1.7 ms more): so runs up to 127 lines are parsed as they are.
MASK_RUN = 128
_OWN_LINE_COMMENT = re.compile(rb"^[ \t\f]*(#[^\r\n]*)", re.M)


def _comment_runs(data: bytes, strings: list[tuple[int, int]]) -> list[list[tuple[int, int]]]:
    """Runs of own-line comments (byte ranges from ``#`` to the line's end) with only blank lines
    between them; a "comment" inside one of ``strings`` is string content and ends a run."""
    starts = [a for a, _ in strings]
    runs: list[list[tuple[int, int]]] = []
    previous_end = -1
    for match in _OWN_LINE_COMMENT.finditer(data):
        start, end = match.span(1)
        i = bisect.bisect_right(starts, start) - 1
        if i >= 0 and start < strings[i][1]:
            previous_end = -1
            continue
        if runs and previous_end >= 0 and not data[previous_end:match.start()].strip():
            runs[-1].append((start, end))
        else:
            runs.append([(start, end)])
        previous_end = end
    return runs


_STRING_OR_COMMENT = re.compile(rb"#|\"\"\"|'''|\"|'")


def _multiline_strings(data: bytes) -> list[tuple[int, int]]:
    """Byte ranges of the triple-quoted strings (the only literals spanning lines), read by a small
    lexer that skips comments and one-line strings."""
    out = []
    i = 0
    while (match := _STRING_OR_COMMENT.search(data, i)) is not None:
        token, start = match.group(), match.start()
        if token == b"#":
            i = data.find(b"\n", start)
            if i < 0:
                break
            continue
        line_end = data.find(b"\n", match.end()) if len(token) == 1 else -1
        j = match.end()
        while True:  # the closing quote, not escaped (a one-line string also ends at its line's end)
            j = data.find(token, j)
            if j < 0 or 0 <= line_end < j:
                j = -1
                break
            k = j
            while k > 0 and data[k - 1] == 0x5C:  # backslashes right before the quote
                k -= 1
            if (j - k) % 2 == 0:
                break
            j += 1
        if len(token) == 3:
            end = len(data) if j < 0 else j + 3
            out.append((start, end))
        else:
            end = j + 1 if j >= 0 else (line_end if line_end >= 0 else len(data))
        i = end
    return out


def _short_runs(data: bytes) -> bool:
    """Whether ``data`` has no run of ``MASK_RUN`` own-line comments (comment-like lines in
    strings counted too): then it is parsed as it is."""
    return data.count(b"#") < MASK_RUN or not any(len(run) >= MASK_RUN for run in _comment_runs(data, []))


def _stays_short(old: bytes, new: bytes, edit: dict | None = None) -> bool:
    """Whether ``new`` has no run of ``MASK_RUN`` own-line comments, given that ``old`` has none: a
    run ``old`` lacks must reach the lines the edit between them touched, so only those lines and
    the comment or blank lines around them are counted (reading every comment of the file cost
    0.6 ms per edit on splash attention). False when unsure (the counted lines reach ``MASK_RUN``,
    or the edit spans more than 64 KB): the caller reads the whole text."""
    edit = text_edit(old, new) if edit is None else edit
    lo = new.rfind(b"\n", 0, edit["start_byte"]) + 1  # the first edited line's start
    hi = new.find(b"\n", edit["new_end_byte"])  # the last edited line's end
    hi = len(new) if hi < 0 else hi
    if hi - lo > 64 * 1024:
        return False
    count = sum(1 for line in new[lo:hi].split(b"\n") if _line_kind(line) == "comment")
    at = lo  # the lines before, while they are comments or blank
    while count < MASK_RUN and at > 0:
        start = new.rfind(b"\n", 0, at - 1) + 1
        kind = _line_kind(new[start:at - 1])
        if kind == "code":
            break
        count += kind == "comment"
        at = start
    at = hi  # the lines after
    while count < MASK_RUN and at < len(new):
        end = new.find(b"\n", at + 1)
        end = len(new) if end < 0 else end
        kind = _line_kind(new[at + 1:end])
        if kind == "code":
            break
        count += kind == "comment"
        at = end
    return count < MASK_RUN


def _line_kind(line: bytes) -> str:
    """"comment" (an own-line comment, as ``_OWN_LINE_COMMENT`` reads one), "blank" or "code"."""
    rest = line.lstrip(b" \t\f")
    if rest.startswith(b"#"):
        return "comment"
    return "blank" if not line.strip() else "code"


def _masked(data: bytes, short: bool | None = None) -> tuple[bytes, list[int]]:
    """``data`` with long runs of own-line comments blanked, and where each blanked run starts
    (``short``: ``_short_runs(data)`` when the caller knows it)."""
    if _short_runs(data) if short is None else short:
        return data, []
    long = [run for run in _comment_runs(data, _multiline_strings(data)) if len(run) >= MASK_RUN]
    if not long:
        return data, []
    out = bytearray(data)
    firsts = []
    for run in long:
        blanked = [(s, e) for s, e in run if b"pallasite" not in data[s:e]]
        for s, e in blanked:
            out[s:e] = b" " * (e - s)
        if blanked:
            firsts.append(blanked[0][0])
    return bytes(out), firsts


def _inside_string(root: Node, offset: int) -> bool:
    node = root.descendant_for_byte_range(offset, offset + 1)
    while node is not None:
        if node.type in ("string", "string_content", "concatenated_string"):
            return True
        node = node.parent
    return False


def _captures(root: Node) -> dict[str, list[Node]]:
    """The file-wide query's captures. A big file is queried in ranges of whole top-level
    statements, letting other threads run between ranges (one call held the GIL 2 s on 5 MB)."""
    if root.end_byte <= YIELD_ABOVE_BYTES:
        return QueryCursor(_query()).captures(root)
    found: dict[str, list[Node]] = {}
    seen: set[tuple[int, int, str, str]] = set()
    children = root.children
    index = 0
    while index < len(children):
        start = children[index].start_byte
        while index < len(children) and children[index].end_byte - start < 4 * _CHUNK:
            index += 1
        end = children[index].end_byte if index < len(children) else root.end_byte
        index += 1
        cursor = QueryCursor(_query())
        cursor.set_byte_range(start, end)
        for name, nodes in cursor.captures(root).items():
            for node in nodes:
                key = (node.start_byte, node.end_byte, node.type, name)
                if key not in seen:
                    seen.add(key)
                    found.setdefault(name, []).append(node)
        time.sleep(0)
    return found


# ``Tier0State.statements``: {a top-level statement's bytes: its captures, per capture name the
# (start, end, kind id) of each node, byte offsets from the statement's start}: the last analysis's,
# for the document's next one
_Captured = tuple[tuple[str, tuple[tuple[int, int, int], ...]], ...]


# captures a kept statement leaves to be found again when first asked (``Source.bindings``,
# ``branches``, ``scope_nodes``): an edit whose sites are all kept reads none of them (splash
# attention: 740 of its 1,200 captures)
_DEFERRED = ("bind", "branch", "scope")
_Deferred = dict[str, list[tuple[Node, tuple[tuple[int, int, int], ...]]]]


def _refind(stmt: Node, spans: tuple[tuple[int, int, int], ...], out: list[Node]) -> bool:
    """Append to ``out`` the nodes of ``stmt`` at ``spans`` (offsets from its start, kind ids);
    False when one is not where it was."""
    base, find = stmt.start_byte, stmt.descendant_for_byte_range
    for start, end, kind in spans:
        a, b = base + start, base + end
        node = find(a, b)  # the smallest node holding the range: the capture, or one inside it
        if node is None or node.start_byte != a or node.end_byte != b:
            return False
        while node.kind_id != kind:
            node = node.parent
            if node is None or node.start_byte != a or node.end_byte != b:
                return False
        out.append(node)
    return True


def _captures_by_statement(root: Node, data: bytes, state: Tier0State | None, tree: Tree | None = None,
                           deferred: _Deferred | None = None) -> dict[str, list[Node]]:
    """The file-wide query's captures, per top-level statement: a statement whose bytes the file's
    last analysis saw keeps its captures, found again in this tree by their byte ranges (a C call
    each); only the other statements are queried (the query visits every node of what it covers:
    3 ms for splash attention's 19,000 nodes, where finding its 2,200 captures again costs 1.5 ms).
    A statement is known by the bytes tree-sitter parsed (``tree``'s: the text, or the text with
    long comment runs blanked; comments are not captured). Any doubt (no state, a big file, syntax
    errors, a tree not ``state``'s current one, a capture not found) queries the whole tree; the
    captures are the same either way, in the same order. With ``deferred``, the ``_DEFERRED``
    captures of kept statements go there, (statement, spans), to be found again when asked."""
    if state is None or root.end_byte > YIELD_ABOVE_BYTES or root.has_error:
        return _captures(root)
    with state.lock:
        entry = state.tree
    if entry is not None and (entry[0] is data or (tree is not None and entry[1] is tree and len(entry[0]) == len(data))):
        data = entry[0]  # what the tree was parsed from (the same offsets)
    else:
        return _captures(root)
    with state.lock:
        previous, state.statements = state.statements or {}, None
    found: dict[str, list[Node]] = {}
    table: dict[bytes, _Captured] = {}
    pending: list[Node] = []  # consecutive statements not seen before: queried together
    for stmt in [*root.children, None]:
        text = data[stmt.start_byte:stmt.end_byte] if stmt is not None else b""
        kept = previous.get(text) if stmt is not None else None
        if kept is None and stmt is not None:
            pending.append(stmt)
            continue
        if pending:
            _query_statements(root, pending, data, found, table)
            pending = []
        if stmt is None:
            break
        for name, spans in kept:
            if deferred is not None and name in _DEFERRED:
                deferred.setdefault(name, []).append((stmt, spans))
            elif not _refind(stmt, spans, found.setdefault(name, [])):
                if deferred is not None:
                    deferred.clear()
                return _captures(root)  # not where it was: read the file afresh
        table[text] = kept
    with state.lock:
        state.statements = table
    return found


def _query_statements(root: Node, statements: list[Node], data: bytes, found: dict[str, list[Node]],
                      table: dict[bytes, _Captured]) -> None:
    """Query the byte range of consecutive top-level ``statements``; their captures go to ``found``
    (in the query's order) and, per statement, to ``table``."""
    begin, end = statements[0].start_byte, statements[-1].end_byte
    cursor = QueryCursor(_query())
    cursor.set_byte_range(begin, end)
    starts = [stmt.start_byte for stmt in statements]
    rows: list[dict[str, list[tuple[int, int, int]]]] = [{} for _ in statements]
    for name, nodes in cursor.captures(root).items():
        for node in nodes:
            a, b = node.start_byte, node.end_byte
            if a < begin or b > end:
                continue  # a node around or beside these statements (the query gives every one it meets)
            found.setdefault(name, []).append(node)
            i = bisect.bisect_right(starts, a) - 1
            rows[i].setdefault(name, []).append((a - starts[i], b - starts[i], node.kind_id))
    for stmt, row in zip(statements, rows):
        table[data[stmt.start_byte:stmt.end_byte]] = tuple((name, tuple(spans)) for name, spans in row.items())


def _parsed_as(state: Tier0State, data: bytes) -> bool:
    """Whether ``state``'s tree was parsed from ``data`` itself (no comments blanked for the parse)."""
    with state.lock:
        entry = state.tree
    return entry is not None and entry[0] is data


def _earlier_tree(state: Tier0State, data: bytes) -> Tree | None:
    """The tree of one of ``state``'s earlier texts equal to ``data`` (an undo), made its current
    tree again: no parse at all. The tree it replaces becomes an earlier one (a redo)."""
    with state.lock:
        earlier, current = state.earlier, state.tree
        if not earlier or current is None:
            return None
        for i, (parsed, tree, short) in enumerate(earlier):
            if len(parsed) == len(data) and parsed == data:
                del earlier[i]
                earlier.append((current[0], current[1], state.short is current[0]))
                state.tree = (data, tree)  # ``data`` itself: _parsed_as(state, data) holds
                state.short = data if short else None
                return tree
    return None


def _keep_earlier(state: Tier0State, replaced: tuple[bytes, Tree] | None, short: bool) -> None:
    """Keep the tree ``state`` had until now (its text parsed as it is, no comments blanked) among
    its earlier ones (called with ``state.lock`` held)."""
    if replaced is None:
        return
    state.earlier.append((replaced[0], replaced[1], short))
    del state.earlier[:-EARLIER_TREES]


def parse_bytes(data: bytes, state: Tier0State | None = None) -> Tree:
    short, edit, previous = None, None, None
    if state is not None:
        restored = _earlier_tree(state, data)
        if restored is not None:
            return restored
        with state.lock:  # the document's last text had no long comment run: does this edit make one?
            previous, known_short = state.tree, state.short
        if previous is not None and known_short is previous[0]:
            edit = text_edit(previous[0], data)  # asked once: the parse below edits the same tree
            short = _stays_short(previous[0], data, edit) or None
    if short is None:
        short = _short_runs(data)
    parsed, blanked = _masked(data, short)
    tree = _parse(parsed, state, (previous[0], edit) if edit is not None and parsed is data else None)
    if blanked and any(_inside_string(tree.root_node, offset) for offset in blanked):
        parsed = data  # a "comment" line was string content: parse the text as it is
        tree = _parse(parsed, state)
    if state is not None and len(parsed) > KEEP_TREE_BYTES:
        with state.lock:
            state.tree, state.short, state.earlier, state.statements = None, None, [], None
    elif state is not None:
        with state.lock:
            replaced = state.tree
            if replaced is not None and replaced[1] is not tree:
                _keep_earlier(state, replaced, state.short is replaced[0])
            state.tree = (parsed, tree)
            state.short = parsed if short else None  # these very bytes have no long comment run
    return tree


def _parse(data: bytes, state: Tier0State | None, known: tuple[bytes, dict] | None = None) -> Tree:
    """A full or, from ``state``'s last tree, incremental parse of ``data`` (``known``: the text the
    caller found that tree parsed from, and its edit to ``data``)."""
    previous = None
    if state is not None:
        with state.lock:
            previous = state.tree
    parser = Parser(language())
    if previous is not None and previous[0] == data:
        return previous[1]
    source = _yielding_reader(data) if len(data) > YIELD_ABOVE_BYTES else data
    try:
        if previous is None:
            return parser.parse(source)
        old_data, old_tree = previous
        edited = old_tree.copy()
        edited.edit(**(known[1] if known is not None and known[0] is old_data else text_edit(old_data, data)))
        return parser.parse(source, edited)
    finally:
        if isinstance(source, _YieldingReader):
            source.release()


def text_edit(old: bytes, new: bytes) -> dict:
    """The one edit that turns ``old`` into ``new`` (common prefix and suffix kept), in the
    keyword form ``Tree.edit`` takes: byte offsets and (row, byte column) points."""
    return _text_edit(old, new)


def _text_edit(old: bytes, new: bytes) -> dict:
    limit = min(len(old), len(new))
    lo, hi = 0, limit
    while lo < hi:  # longest common prefix: slice comparisons run in C
        mid = (lo + hi + 1) // 2
        if old[:mid] == new[:mid]:
            lo = mid
        else:
            hi = mid - 1
    start = lo
    lo, hi = 0, limit - start
    while lo < hi:  # longest common suffix not overlapping the prefix
        mid = (lo + hi + 1) // 2
        if old[len(old) - mid:] == new[len(new) - mid:]:
            lo = mid
        else:
            hi = mid - 1
    old_end, new_end = len(old) - lo, len(new) - lo
    return {"start_byte": start, "old_end_byte": old_end, "new_end_byte": new_end,
            "start_point": _point(old, start), "old_end_point": _point(old, old_end),
            "new_end_point": _point(new, new_end)}


def _point(data: bytes, offset: int) -> tuple[int, int]:
    return data.count(b"\n", 0, offset), offset - (data.rfind(b"\n", 0, offset) + 1)


@dataclass(frozen=True)
class Constant:
    """A module-level int constant: its value and the span of the expression it came from."""

    name: str
    value: int
    span: Span


_PLUS_ONE = (1).__add__


def _ORDER(node: Node) -> tuple[int, int, int]:
    """In source order, a node before the nodes it holds."""
    return node.start_byte, -node.end_byte, -node.descendant_count


class Source:
    """One parsed text plus the lookups tier 0 needs. Build with ``Source(text)``."""

    # while a set: every name ``function()`` is asked for is added to it (site_memo.py records what
    # reading one pallas_call looked up by name, to know which definitions its result depends on)
    lookups: set[str] | None = None

    def __init__(self, text: str, state: Tier0State | None = None, data: bytes | None = None) -> None:
        self.text = text
        # the document's tier-0 state: its trees (and ast units, kept sites...) are reused from it
        self.state = state
        self.data = text.encode("utf-8") if data is None else data  # ``data``: the caller's encoding of it
        self.tree = parse_bytes(self.data, state)
        self.root = self.tree.root_node
        self._split: list[bytes] | None = None  # the lines, split when first needed
        self._starts: list[int] | None = None
        self.cache: dict[str, dict] = {}  # per-text memo for analyses built on this source
        self.imports: dict[str, str] = {}  # local name -> dotted module/member path
        self.imported_modules: list[str] = []
        self.functions: dict[str, list[Node]] = {}  # name -> function_definition nodes
        self.constants: dict[str, Constant] = {}
        self._scan()

    # ------------------------------------------------------------------ positions

    def column(self, row: int, byte_column: int) -> int:
        """The code-point column of a byte column on a 0-based row."""
        if row >= len(self._lines):
            return byte_column
        line = self._lines[row]
        prefix = line[:byte_column]
        if prefix.isascii():
            return len(prefix)
        return len(prefix.decode("utf-8", errors="replace"))

    @property
    def _lines(self) -> list[bytes]:
        if self._split is None:
            self._split = self.data.split(b"\n")
        return self._split

    def span(self, node: Node) -> Span:
        """The node's span; its columns from the bytes before it on its lines (no line split)."""
        (r0, c0), (r1, c1) = node.start_point, node.end_point
        return Span(r0, self._column_before(node.start_byte, c0), r1, self._column_before(node.end_byte, c1))

    def _column_before(self, offset: int, byte_column: int) -> int:
        prefix = self.data[offset - byte_column:offset]
        return len(prefix) if prefix.isascii() else len(prefix.decode("utf-8", errors="replace"))

    def offset(self, line: int, column: int) -> int:
        """The byte offset of a 0-based line and code-point column."""
        if line >= len(self._lines):
            return len(self.data)
        start = self._line_start(line)
        row = self._lines[line]
        if row.isascii():
            return start + min(column, len(row))
        return start + len(row.decode("utf-8", errors="replace")[:column].encode("utf-8"))

    def _line_start(self, line: int) -> int:
        if self._starts is None:  # each line's length plus its break, summed in C (a loop in Python
            # over splash attention's 2,700 lines cost 0.7 ms, paid by the first rule asking an offset)
            self._starts = [0, *accumulate(map(_PLUS_ONE, map(len, self._lines)))][:len(self._lines)]
        return self._starts[line]

    def node_at(self, span: Span, kind: str | None = None) -> Node | None:
        """The node covering exactly ``span`` (the outermost one; of type ``kind`` if given)."""
        start, end = self.offset(span.line, span.column), self.offset(span.end_line, span.end_column)
        node = self.root.descendant_for_byte_range(start, end)
        best = None
        while node is not None and node.start_byte >= start and node.end_byte <= end:
            if node.start_byte == start and node.end_byte == end and (kind is None or node.type == kind):
                best = node
            node = node.parent
        return best

    def node_text(self, node: Node | None) -> str:
        if node is None:
            return ""
        return self.data[node.start_byte:node.end_byte].decode("utf-8", errors="replace")

    # ------------------------------------------------------------------ names

    def qualname(self, node: Node | None) -> str | None:
        """``pl.BlockSpec`` -> ``jax.experimental.pallas.BlockSpec`` via the imports, else None."""
        if node is None:
            return None
        if node.type == "identifier":
            return self.imports.get(self.node_text(node))
        if node.type == "attribute":
            base = self.qualname(node.child_by_field_name("object"))
            attr = node.child_by_field_name("attribute")
            if base is None or attr is None:
                return None
            return f"{base}.{self.node_text(attr)}"
        return None

    @property
    def uses_pallas(self) -> bool:
        return any(m.startswith(PALLAS_PREFIXES) for m in self.imported_modules)

    def imports_any(self, prefixes: tuple[str, ...]) -> bool:
        return any(m.startswith(prefixes) for m in self.imported_modules)

    # ------------------------------------------------------------------ constants

    def int_value(self, node: Node | None, local: dict[str, int] | None = None) -> int | None:
        """The int an expression evaluates to from literals and known names, else None."""
        if node is None:
            return None
        kind = node.type
        if kind == "integer":
            try:
                return int(self.node_text(node).replace("_", ""), 0)
            except ValueError:
                return None
        if kind == "identifier":
            name = self.node_text(node)
            if local is not None and name in local:
                return local[name]
            const = self.constants.get(name)
            return const.value if const else None
        if kind == "parenthesized_expression":
            inner = node.named_children
            return self.int_value(inner[0], local) if len(inner) == 1 else None
        if kind == "unary_operator":
            operand = self.int_value(node.child_by_field_name("argument"), local)
            op = self.node_text(node.child_by_field_name("operator"))
            if operand is None:
                return None
            return -operand if op == "-" else operand if op == "+" else None
        if kind == "binary_operator":
            left = self.int_value(node.child_by_field_name("left"), local)
            right = self.int_value(node.child_by_field_name("right"), local)
            if left is None or right is None:
                return None
            return _arith(self.node_text(node.child_by_field_name("operator")), left, right)
        return None

    # ------------------------------------------------------------------ scanning

    def _scan(self) -> None:
        self._deferred: _Deferred = {}
        found = _captures_by_statement(self.root, self.data, self.state, self.tree, self._deferred)
        self._found = {name: found.get(name, []) for name in _DEFERRED}
        # in source order, a node before the nodes it holds: the query's own order is not that
        # (a ``with`` item and the ``as`` pattern of the same bytes came either way round), and a
        # file read per statement (``_captures_by_statement``) must list them as a whole read does
        order = _ORDER
        self.calls: list[Node] = sorted(found.get("call", []), key=order)
        for node in sorted(found.get("import", []) + found.get("from", []), key=order):
            if node.type == "import_statement":
                self._import(node)
            else:
                self._import_from(node)
        for node in sorted(found.get("def", []), key=order):
            name = node.child_by_field_name("name")
            if name is not None:
                self.functions.setdefault(self.node_text(name), []).append(node)
        self.has_error = self.root.has_error or bool(found.get("py2"))
        # names a function declares ``global`` or a walrus binds: module values that may change
        self.rebound_anywhere: set[str] = {
            self.node_text(ident)
            for node in found.get("global", []) for ident in node.named_children if ident.type == "identifier"}
        self.rebound_anywhere.update(self.node_text(node.child_by_field_name("name"))
                                     for node in found.get("walrus", []))
        self._defs = found.get("def", [])
        for stmt in self.root.named_children:
            if stmt.type == "expression_statement" and stmt.named_child_count == 1:
                child = stmt.named_children[0]
                if child.type == "assignment":
                    self._constant(child)

    # for per-function lookups by byte range (resolve.body_nodes): name bindings, branches, and the
    # nodes that open a new scope; found when first asked (the kept statements' ones deferred)

    @property
    def bindings(self) -> list[Node]:
        return self._lazy("bindings", "bind")

    @property
    def branches(self) -> list[Node]:
        return self._lazy("branches", "branch")

    @property
    def scope_nodes(self) -> list[Node]:
        return self._lazy("scope_nodes", "scope", self._defs)

    def _lazy(self, attribute: str, name: str, extra: list[Node] = ()) -> list[Node]:
        found = self.__dict__.get("_" + attribute)
        if found is None:
            nodes = list(self._found.get(name, []))
            for stmt, spans in self._deferred.get(name, ()):
                if not _refind(stmt, spans, nodes):  # not where it was: this name read afresh
                    nodes = _captures(self.root).get(name, [])
                    break
            found = sorted([*nodes, *extra], key=_ORDER)
            self.__dict__["_" + attribute] = found
        return found

    @property
    def comments(self) -> list[Node]:
        """Every comment node, in source order: a query of its own when first asked (no rule reads
        them; splash attention's 183 were found again after every edit when the file-wide query
        captured them)."""
        found = self.cache.setdefault("source", {}).get("comments")
        if found is None:
            nodes = QueryCursor(_comment_query()).captures(self.root).get("comment", [])
            found = self.cache["source"]["comments"] = sorted(
                nodes, key=lambda node: (node.start_byte, -node.end_byte, -node.descendant_count))
        return found

    @property
    def attributes(self) -> list[Node]:
        """Every ``x.y`` attribute node, in source order: a query of its own when first asked (the
        rules on the edit path find the few they need by their text: the 786 of splash attention
        were a third of the file-wide query's captures, found again after every edit)."""
        found = self.cache.setdefault("source", {}).get("attributes")
        if found is None:
            nodes = QueryCursor(_attribute_query()).captures(self.root).get("attr", [])
            found = self.cache["source"]["attributes"] = sorted(
                nodes, key=lambda node: (node.start_byte, -node.end_byte, -node.descendant_count))
        return found

    def _import(self, node: Node) -> None:
        for child in node.named_children:
            if child.type == "dotted_name":
                dotted = self.node_text(child)
                self.imported_modules.append(dotted)
                top = dotted.split(".")[0]
                self.imports.setdefault(top, top)
            elif child.type == "aliased_import":
                dotted = self.node_text(child.child_by_field_name("name"))
                alias = self.node_text(child.child_by_field_name("alias"))
                self.imported_modules.append(dotted)
                self.imports[alias] = dotted

    def _import_from(self, node: Node) -> None:
        module_node = node.child_by_field_name("module_name")
        module = self.node_text(module_node)
        if module.startswith("."):
            return
        self.imported_modules.append(module)
        for child in node.children_by_field_name("name"):
            if child.type == "dotted_name":
                name = self.node_text(child)
                self.imports[name.split(".")[-1]] = f"{module}.{name}"
                self.imported_modules.append(f"{module}.{name}")
            elif child.type == "aliased_import":
                name = self.node_text(child.child_by_field_name("name"))
                alias = self.node_text(child.child_by_field_name("alias"))
                self.imports[alias] = f"{module}.{name}"
                self.imported_modules.append(f"{module}.{name}")

    def _constant(self, node: Node) -> None:
        left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
        if left is None or right is None:
            return
        if right.type == "assignment":  # chained, ``BM = BN = BK = 128``: every target gets the last value
            self._constant(right)
            while right is not None and right.type == "assignment":
                right = right.child_by_field_name("right")
            if right is None:
                return
        if left.type == "identifier":
            self._bind(left, right)
        elif left.type in ("pattern_list", "tuple_pattern") and right.type in ("expression_list", "tuple"):
            targets, values = left.named_children, right.named_children
            if len(targets) == len(values):
                for target, value in zip(targets, values):
                    if target.type == "identifier":
                        self._bind(target, value)

    def _bind(self, target: Node, value: Node) -> None:
        name = self.node_text(target)
        number = self.int_value(value)
        if number is None:
            self.constants.pop(name, None)  # rebound to something unknown: no longer certain
        elif name in self.constants and self.constants[name].value != number:
            self.constants.pop(name, None)
        else:
            self.constants[name] = Constant(name, number, self.span(value))

    def function(self, name: str, near: Node | None = None) -> Node | None:
        """The definition ``name`` is bound to where ``near`` uses it, as Python binds it.

        A closure's binding first: a def of that name in a function around ``near`` (the latest
        one before ``near`` there). Else the module's: the latest module-level def before ``near``
        (notebook-style files redefine ``matmul_kernel`` several times; each use sees the one
        above it), else the only module-level def. None where it cannot tell (several defs, none
        before the use), so the rules say nothing rather than compare with the wrong one.
        """
        if self.lookups is not None:
            self.lookups.add(name)
        defs = self.functions.get(name)
        if not defs:
            return None
        if near is not None:
            scope = enclosing_function(near)
            while scope is not None:
                inner = [d for d in defs if d.parent is not None and _is_in(d, scope) and d is not scope
                         and enclosing_function(d) is not None and enclosing_function(d).id == scope.id]
                if inner:
                    return _latest_before(inner, near) or inner[-1]
                scope = enclosing_function(scope)
        module = [d for d in defs if _module_level(d)]
        if len(module) == 1:
            return module[0]
        if module:
            return _latest_before(module, near) if near is not None else None
        return defs[0] if len(defs) == 1 else None


def _latest_before(defs: list[Node], near: Node) -> Node | None:
    """The last of ``defs`` (in source order) that starts before ``near``."""
    before = [d for d in defs if d.start_byte < near.start_byte]
    return max(before, key=lambda d: d.start_byte) if before else None


def _arith(op: str, a: int, b: int) -> int | None:
    try:
        if op == "+":
            return a + b
        if op == "-":
            return a - b
        if op == "*":
            return a * b
        if op == "//":
            return a // b
        if op == "%":
            return a % b
        if op == "**" and 0 <= b <= 64:
            return a ** b
        if op == "<<" and 0 <= b <= 64:
            return a << b
        if op == ">>" and b >= 0:
            return a >> b
    except ZeroDivisionError:
        return None
    return None


def _walk(node: Node) -> Iterator[Node]:
    cursor = node.walk()
    reached_root = False
    while not reached_root:
        yield cursor.node
        if cursor.goto_first_child():
            continue
        if cursor.goto_next_sibling():
            continue
        while True:
            if not cursor.goto_parent():
                reached_root = True
                break
            if cursor.goto_next_sibling():
                break


def walk(node: Node) -> Iterator[Node]:
    """Every node under ``node`` (itself included), depth first."""
    return _walk(node)


def enclosing_function(node: Node) -> Node | None:
    parent = node.parent
    while parent is not None:
        if parent.type == "function_definition":
            return parent
        parent = parent.parent
    return None


def outermost_function(node: Node) -> Node | None:
    found = None
    parent = node.parent
    while parent is not None:
        if parent.type == "function_definition":
            found = parent
        parent = parent.parent
    return found


def _module_level(defn: Node) -> bool:
    parent = defn.parent
    if parent is not None and parent.type == "decorated_definition":
        parent = parent.parent
    return parent is not None and parent.type == "module"


def _is_in(inner: Node, outer: Node) -> bool:
    return outer.start_byte <= inner.start_byte and inner.end_byte <= outer.end_byte


def is_module_level(defn: Node) -> bool:
    return _module_level(defn)


def is_in(inner: Node, outer: Node) -> bool:
    """Whether ``inner`` lies within ``outer``'s bytes."""
    return _is_in(inner, outer)


def string_keyed_pairs(source: "Source", node: Node | None) -> Iterator[tuple[str, Node]]:
    """``(key, value node)`` of each entry of a dict display whose key is a string literal (others are skipped)."""
    if node is None or node.type != "dictionary":
        return
    for pair in node.named_children:
        if pair.type != "pair":
            continue
        key, value = pair.child_by_field_name("key"), pair.child_by_field_name("value")
        if key is not None and key.type == "string" and value is not None:
            yield source.node_text(key).strip("'\""), value


def calls_holding(source: "Source", words: set[str]) -> list[Node]:
    """The file's calls (in source order) whose bytes hold one of ``words``: a search of the text in C and a
    bisect per call (``source.calls`` is kept per statement between edits), so tier 0 after an edit of a
    large file tests no call in Python that cannot hold the word."""
    data, hits = source.data, []
    for word in words:
        encoded = word.encode("utf-8")
        at = data.find(encoded)
        while at >= 0:
            hits.append(at)
            at = data.find(encoded, at + 1)
    if not hits:
        return []
    hits.sort()
    found = []
    for node in source.calls:
        i = bisect.bisect_left(hits, node.start_byte)
        if i < len(hits) and hits[i] < node.end_byte:
            found.append(node)
    return found


def module_functions(source: "Source") -> dict[str, Node]:
    """Module-level function definitions by name (the last one of a redefined name)."""
    out: dict[str, Node] = {}
    for name, defs in source.functions.items():
        for defn in defs:
            if is_module_level(defn):
                out[name] = defn
    return out



def apply_edits(text: str, edits) -> str:
    """``text`` with the ``TextEdit``s applied (spans refer to the original text; no overlaps)."""
    source = Source.__new__(Source)  # positions only: no parse needed
    source.text, source.data = text, text.encode("utf-8")
    source._split, source._starts = None, None
    data = source.data
    ordered = sorted(edits, key=lambda e: (e.span.line, e.span.column, e.span.end_line, e.span.end_column))
    for earlier, later in zip(ordered, ordered[1:]):
        if (later.span.line, later.span.column) < (earlier.span.end_line, earlier.span.end_column):
            raise ValueError(f"overlapping edits at line {later.span.line + 1}")
    for edit in reversed(ordered):
        start = source.offset(edit.span.line, edit.span.column)
        end = source.offset(edit.span.end_line, edit.span.end_column)
        data = data[:start] + edit.new_text.encode("utf-8") + data[end:]
    return data.decode("utf-8")
