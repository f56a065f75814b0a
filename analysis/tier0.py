"""Tier 0 of `pallasite check`: a kernel file read as source, never executed.

The contract other layers code against::

    analysis = analyze(text, path, target="v6e")
    analysis.uses_pallas   # the file imports Pallas (any alias)
    analysis.sites         # every pallas_call, as KernelSite
    analysis.tasks         # tasks found by the native convention (docs/task-convention.md)
    analysis.findings      # tier-0 findings, suppression comments NOT applied
    analysis.syntax_ok     # False: a PLS000 finding says where Python stopped

``analyze`` never raises on bad input: a file that does not parse gives a PLS000 finding (the
position and message come from Python's own parser, via ``compile(..., PyCF_ONLY_AST)``, which
executes nothing); a file that does not import Pallas gives no findings at all.
"""

from __future__ import annotations

import ast
import warnings
from dataclasses import dataclass

from . import ast_units, rules, sites as sites_mod, tasks as tasks_mod, tier0_memo
from .source import Source, parse_bytes
from .tier0_state import Tier0State
from .types import DEFAULT_CHIP, Finding, KernelSite, KernelTask, Span

DEFAULT_TARGET = DEFAULT_CHIP  # the one default (analysis.types)


@dataclass(frozen=True)
class SourceAnalysis:
    path: str | None
    uses_pallas: bool
    sites: tuple[KernelSite, ...]
    tasks: tuple[KernelTask, ...]
    findings: tuple[Finding, ...]  # tier-0 findings (suppressions NOT applied)
    syntax_ok: bool


def analyze(text: str, path: str | None = None, *, target: str = DEFAULT_TARGET,
            scoped_vmem: int | None = None, state: Tier0State | None = None) -> SourceAnalysis:
    """Read ``text`` (the file at ``path``, if any) as a Pallas kernel file for ``target``
    (``scoped_vmem``: the target's default scoped-VMEM limit, for the VMEM rule; None skips it).
    With a ``state`` (an open document's ``Tier0State``: the language server's ``Document`` owns
    one), the text is read incrementally: the state's last tree-sitter tree, Python ast units, kept
    sites and rule memos are reused where the text did not change, and the result of a text it had
    a moment ago (an undo) is handed out again (``tier0_memo``). Without one the text is read from
    scratch, touching nothing kept: the same answer (tests/test_tier0_incremental.py holds the two
    together). A text analysed with a document's state becomes that state's current text: a
    candidate, or any text that is not the document's, is analysed without it."""
    data, strict = _utf8(text) if state is not None else (b"", False)
    signature = tier0_memo.signature(path, data, target, scoped_vmem) if state is not None else None
    known = tier0_memo.get(state, signature)  # a text this document had a moment ago (an undo): its result
    if known is not None:
        # the state's tree follows the text all the same (incremental, ~1 ms): the next edit's
        # re-parse then covers that edit alone, not everything between this text and the last one
        parse_bytes(data, state)
        return known
    source = Source(text, state=state, data=data if strict else None)  # encoded once (a lone surrogate: Source says so)
    try:
        result = _analyze(source, text, path, target, scoped_vmem)
        tier0_memo.put(state, signature, result)
        return result
    finally:  # the memos hold scopes that hold the source: a cycle (with the whole tree) that only
        # the garbage collector would free, in a pass that holds the GIL for seconds; the Python ast
        # built for the rules goes back to ``ast_units`` for the document's next analysis
        ast_units.release(source.state, source.cache.get("python_ast", {}).get("module"))
        source.cache.clear()


def _analyze(source: Source, text: str, path: str | None, target: str, scoped_vmem: int | None) -> SourceAnalysis:
    uses_pallas = source.uses_pallas
    # Python's parser is the authority on syntax, but costs ~20 ms on a large file: ask it only
    # when tree-sitter saw a problem (it also flags the Python 2 statements it would accept).
    syntax = syntax_error(text, path, _error_prefix(source)) if source.has_error else None
    if not uses_pallas:
        return SourceAnalysis(path, False, (), (), (), syntax is None)
    if syntax is not None:
        found_sites = _safe_sites(source)
        return SourceAnalysis(path, True, found_sites, (), (syntax,), False)
    found_sites = _safe_sites(source)
    try:
        found_tasks = tasks_mod.find_tasks(source, path or "<text>")
    except Exception as err:  # noqa: BLE001 - the worker discovers tasks again; never fail tier 0
        warnings.warn(f"pallasite static task discovery failed ({type(err).__name__}: {err})", RuntimeWarning,
                      stacklevel=2)
        found_tasks = ()
    findings = rules.run_rules(source, found_sites, target=target, tasks=found_tasks, scoped_vmem=scoped_vmem)
    return SourceAnalysis(path, True, found_sites, found_tasks, findings, True)


def _utf8(text: str) -> tuple[bytes, bool]:
    """``text`` in UTF-8, and whether it encodes as such (a lone surrogate is kept, surrogatepass)."""
    try:
        return text.encode("utf-8"), True
    except UnicodeEncodeError:
        return text.encode("utf-8", errors="surrogatepass"), False


def _safe_sites(source: Source) -> tuple[KernelSite, ...]:
    return sites_mod.find_sites(source)  # reads each call defensively (see sites.find_sites)


def syntax_error(text: str, path: str | None = None, prefix: int | None = None) -> Finding | None:
    """A PLS000 finding at the first syntax error Python reports, or None if the text parses.
    ``prefix``: first compile only the text's first ``prefix`` characters (whole top-level
    statements past tree-sitter's first error): Python's parser holds the GIL for the whole text
    (0.1-0.5 s on 5 MB), which a language server's other requests would wait for."""
    if prefix is not None and prefix < len(text):
        found = syntax_error(text[:prefix], path)
        if found is not None:
            return found
    try:
        compile(text, path or "<kernel>", "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as err:
        return _syntax_finding(text, err)
    except (ValueError, TypeError) as err:  # e.g. NUL bytes in the source
        return Finding("PLS000", f"The file cannot be parsed as Python: {err}.", Span.point(0), "error", 0)
    return None


def _error_prefix(source: Source) -> int | None:
    """Characters up to the end of the top-level statement after the first one holding a
    tree-sitter error (None: no such statement, compile it all)."""
    statements = source.root.children
    for i, node in enumerate(statements):
        if node.has_error or node.type == "ERROR":
            if i + 1 >= len(statements):
                return None
            return len(source.data[:statements[i + 1].end_byte].decode("utf-8", errors="replace"))
    return None


def _syntax_finding(text: str, err: SyntaxError) -> Finding:
    lines = text.split("\n", (err.end_lineno or err.lineno or 1) + 1)
    line = max((err.lineno or 1) - 1, 0)
    column = max((err.offset or 1) - 1, 0)
    end_line = max((err.end_lineno or err.lineno or 1) - 1, line)
    end_column = max((err.end_offset or err.offset or 1) - 1, 0)
    if (end_line, end_column) <= (line, column):
        width = len(lines[line]) if line < len(lines) else 0
        end_line, end_column = line, min(column + 1, max(width, column))
    reason = err.msg or "invalid syntax"
    message = (f"Syntax error: {reason} (line {line + 1}, column {column + 1}). "
               "Fix it first: nothing else in the file can be checked until it parses.")
    return Finding("PLS000", message, Span(line, column, end_line, end_column), "error", 0)
