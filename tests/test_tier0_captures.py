"""Tier 0's file-wide query reused per top-level statement (analysis/source._captures_by_statement):
after each edit, the lists a ``Source`` holds (calls, attributes, comments, bindings, branches,
scopes, functions, imports, constants) are the same nodes, in the same order, as a fresh query of
the whole tree gives."""

from __future__ import annotations

import os
import random

from pallasite.analysis import source as source_mod
from pallasite.analysis.rules.apis import jax_root
from pallasite.analysis.source import Source, forget
from pallasite.analysis.tier0_state import Tier0State

TRICKY = '''import functools
from jax.experimental import pallas as pl
a = 1; b = f(2)  # two statements on a line
a = 1; b = f(2)


@functools.partial(pl.pallas_call, out_shape=None)
def kernel(x_ref, o_ref):
    with open(x) as g, h(y) as (p, q):
        o_ref[...] = x_ref[...] if g else [v for v in q]
    # a comment at the end of the body

# a comment between
def kernel(x_ref, o_ref):
    (lambda z: z.append(1))(x_ref)
    while (n := n - 1):
        print(n)


class K:
    def f(self):
        return pl.program_id(0)
'''


def _lists(source: Source) -> dict:
    def spans(nodes):
        return [(n.start_byte, n.end_byte, n.type) for n in nodes]

    return {"calls": spans(source.calls), "attributes": spans(source.attributes), "comments": spans(source.comments),
            "bindings": spans(source.bindings), "branches": spans(source.branches),
            "scopes": spans(source.scope_nodes), "functions": {k: spans(v) for k, v in source.functions.items()},
            "imports": dict(source.imports), "constants": dict(source.constants), "has_error": source.has_error,
            "rebound": sorted(source.rebound_anywhere)}


def _edits(text: str, rng: random.Random, count: int) -> list[str]:
    lines, out = text.split("\n"), []
    for _ in range(count):
        i = rng.randrange(len(lines))
        kind = rng.random()
        indent = lines[i][:len(lines[i]) - len(lines[i].lstrip())]
        if kind < 0.3:
            lines.insert(i, f"{indent}_probe = g({i}).h")
        elif kind < 0.5 and len(lines) > 2:
            del lines[i]
        elif kind < 0.7:
            lines.insert(i, lines[rng.randrange(len(lines))])  # a line copied elsewhere (may not parse)
        elif kind < 0.85:
            lines[i] = lines[i] + "  # note"
        else:
            lines.insert(i, "")
        out.append("\n".join(lines))
    return out


def _check(text: str, seed: int, count: int) -> int:
    key = Tier0State()
    reused = 0
    for edited in [text, *_edits(text, random.Random(seed), count)]:
        kept = dict(key.statements or {})
        incremental = Source(edited, state=key)
        reused += sum(1 for stmt in incremental.root.children
                      if incremental.data[stmt.start_byte:stmt.end_byte] in kept)
        assert _lists(incremental) == _lists(Source(edited)), edited
    forget(key)
    assert key.statements is None
    return reused


def test_the_tricky_file_after_random_edits():
    assert _check(TRICKY, 1, 60) > 100


def test_jax_kernels_after_random_edits():
    root = jax_root()
    names = ("splash_attention/splash_attention_kernel.py", "megablox/gmm.py")
    paths = [os.path.join(root or "", "experimental", "pallas", "ops", "tpu", n) for n in names]
    paths = [p for p in paths if os.path.exists(p)]
    for i, path in enumerate(paths):
        with open(path, encoding="utf-8") as handle:
            assert _check(handle.read(), i, 25) > 25 * 20


def test_a_statement_parsed_again_is_queried_not_reused(monkeypatch):
    key = Tier0State()
    Source(TRICKY, state=key)
    queried = []
    real = source_mod._query_statements

    def spy(root, statements, *args):
        queried.append([s.type for s in statements])
        return real(root, statements, *args)

    monkeypatch.setattr(source_mod, "_query_statements", spy)
    Source(TRICKY.replace("print(n)", "print(n + 1)"), state=key)
    assert queried == [["function_definition"]]  # the edited function alone
    forget(key)


def test_a_file_parsed_with_comment_runs_blanked_after_random_edits(monkeypatch):
    """Statements are known by the bytes tree-sitter parsed (here with the long comment runs
    blanked): the per-statement captures still equal a whole read, and are reused."""
    run = "\n".join(["# commented-out line"] * (3 * source_mod.MASK_RUN) + ["# pallasite: ignore[PLS001]"])
    inner = "\n".join(["    # an indented note"] * (3 * source_mod.MASK_RUN))
    text = TRICKY.replace("# a comment between", run).replace("    # a comment at the end of the body", inner)
    key = Tier0State()
    whole = []  # texts whose captures came from a query of the whole tree
    real = source_mod._captures
    monkeypatch.setattr(source_mod, "_captures", lambda root: (whole.append(root.has_error), real(root))[1])
    masked = 0
    for edited in [text, *_edits(text, random.Random(3), 60)]:
        incremental = Source(edited, state=key)
        masked += key.tree[0] != incremental.data
        assert _lists(incremental) == _lists(Source(edited)), edited
    forget(key)
    # mostly blanked; read whole only for a syntax error (or the fresh reads compared with)
    assert masked > 30 and whole.count(False) <= 61 + 5


def test_kept_statements_bindings_branches_and_scopes_are_found_when_asked(monkeypatch):
    """An edit whose sites are all kept reads no bindings, branches or scopes: the kept statements'
    ones are found again only when first asked, and then equal a whole read."""
    key = Tier0State()
    Source(TRICKY, state=key)
    found_again = []
    real = source_mod._refind
    monkeypatch.setattr(source_mod, "_refind", lambda stmt, spans, out: found_again.append(len(spans)) or real(stmt, spans, out))
    edited = TRICKY.replace("print(n)", "print(n + 1)")
    incremental = Source(edited, state=key)
    before = len(found_again)
    assert incremental._deferred and all(name in source_mod._DEFERRED for name in incremental._deferred)
    whole = Source(edited)
    for name in ("bindings", "branches", "scope_nodes"):
        assert [(n.start_byte, n.end_byte, n.type) for n in getattr(incremental, name)] == \
            [(n.start_byte, n.end_byte, n.type) for n in getattr(whole, name)]
    assert len(found_again) > before  # found when asked, not before
    forget(key)
