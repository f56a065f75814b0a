"""The links ``ast_units`` puts on a tree, and how to free them: below both ``ast_units`` and
``tier0_state`` (a closed document's state frees the ast it did not keep: ``Tier0State.clear``), so
neither imports the other's way round.

- ``PARENT``: each node's parent link (``origins.parent_of`` reads it);
- ``UNITS``/``SPARE``: the module attributes holding the units a build used and its spares
  (``ast_units.Unit``: ``stmts`` and the lookup lists ``discard`` empties);
- ``walk(node)``: every node under ``node`` in ``ast.walk``'s order, as a list;
- ``discard(module)``: a module's nodes freed now, a unit at a time.
"""

from __future__ import annotations

import ast

PARENT = "_pallasite_parent"  # the attribute origins.parent_of reads
UNITS = "_pallasite_units"
SPARE = "_pallasite_spare_units"


def walk(node: ast.AST) -> list[ast.AST]:
    """Every node under ``node`` (itself first) in ``ast.walk``'s order (breadth first, children as
    ``ast.iter_child_nodes`` gives them), as a list: the fields read directly, not through
    ``iter_fields``/``iter_child_nodes`` generators (3-4 times faster on a kernel's function)."""
    found, base = [node], ast.AST
    for item in found:  # breadth first: the list grows while it is read
        for name in item._fields:
            value = getattr(item, name, None)
            if isinstance(value, base):
                found.append(value)
            elif value.__class__ is list:
                found.extend([child for child in value if isinstance(child, base)])
    return found


def discard(module: ast.Module) -> None:
    """Free ``module``'s nodes now, a unit at a time. Each node's parent link (and its parent's link
    to it) is a reference cycle: left to the garbage collector, a 5 MB document's ast (~5 million
    objects, 475 MB) took a 1.2 s collection holding the GIL, or, on the language server's tier-0
    thread (which freezes what exists after a big analysis: ``tier0_thread.collector_paused``),
    stayed for good (0.9 GB resident while the document was open). The links are taken off a unit's
    nodes and the unit's lists emptied, so its nodes go by reference counting (~0.2 s per MB of
    text; other threads run between units)."""
    built = [*getattr(module, UNITS, ()), *getattr(module, SPARE, ())]
    for name in [n for n in vars(module) if n.startswith("_pallasite_")]:
        delattr(module, name)
    module.body = []
    for unit in built:
        for stmt in unit.stmts:
            for node in walk(stmt):
                node.__dict__.pop(PARENT, None)
        for _, node in (*unit.defs, *unit.classes):  # what rules keep on a definition (rules/writes.py, megacore.py)
            for name in [n for n in node.__dict__ if n.startswith("_pallasite_")]:
                del node.__dict__[name]
        unit.stmts = []
        for name in ("positioned", "defs", "classes", "calls", "assigns", "imports", "sequences"):
            getattr(unit, name).clear()
        unit._exprs = None
        unit.facts.clear()
