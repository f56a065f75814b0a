"""Tier 0 gives its memory back: what a parse of a document made is freed with the document
(the language server's target: <= 100 MiB after a 5 MB document was opened and closed)."""

from __future__ import annotations

import gc
import sys

from pallasite.analysis import ast_units
from pallasite.analysis.source import YIELD_ABOVE_BYTES, parse_bytes
from pallasite.analysis.tier0_state import Tier0State


def test_a_parsed_tree_is_freed_when_dropped():
    """Parent links never go on the nodes CPython's parser shares between trees (``ast.Load()``,
    ``ast.Add()``): one there kept the last tree parsed alive, 600 MB after a 5 MB document closed."""
    import ast
    import weakref

    from pallasite.analysis import origins

    origins.parse.cache_clear()
    text = "def f(x, y):\n    z = x + y\n    return -z if z > 0 and y else z\n"
    trees = [ast_units.whole(text), origins.parse(text)]
    origins.parse.cache_clear()
    refs = [weakref.ref(tree) for tree in trees]
    del trees
    gc.collect()
    assert [ref() for ref in refs] == [None, None]


def test_a_big_parse_does_not_keep_its_text():
    """A text over YIELD_ABOVE_BYTES goes to tree-sitter in chunks (views of it); py-tree-sitter keeps
    its references to them, so the views are released after the parse, or each big parse kept its
    whole text alive."""
    data = b"x = [1, 2, 3]\n" * (YIELD_ABOVE_BYTES // 8)
    before = sys.getrefcount(data)
    state = Tier0State()
    tree = parse_bytes(data, state)
    assert tree.root_node.end_byte == len(data) and not tree.root_node.has_error
    state.clear()
    del tree
    gc.collect()
    assert sys.getrefcount(data) == before


def test_edits_keep_a_bounded_number_of_ast_nodes():
    """Each edit parses one unit and keeps the one it replaced as a spare (16 at most): the nodes
    alive stay the same however many edits follow. (A released module used to keep its units and
    spares, and each spare its module: every build stayed alive, 13 MB per 80 edits of splash.)"""
    import ast

    from pallasite.analysis.source import Source

    key = Tier0State()
    base = "".join(f"def f{i}(x):\n    y = x + {i}\n    return y\n\n\n" for i in range(30))

    def build(i: int) -> None:
        text = base.replace(f"y = x + {i % 30}\n", f"y = x + {i % 30}\n    z = {i}\n")
        source = Source(text, state=key)
        module = ast_units.module_for(source.text, source.data, ast_units.units(source.root, source.data), key)
        assert ast.dump(module) == ast.dump(ast.parse(text))
        ast_units.release(key, module)

    def alive() -> int:
        gc.collect()
        return sum(1 for o in gc.get_objects() if isinstance(o, ast.AST))

    for i in range(40):
        build(i)
    settled = alive()
    for i in range(40, 120):
        build(i)
    assert alive() <= settled
    key.clear()
