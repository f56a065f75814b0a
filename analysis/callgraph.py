"""A file's call graph, closed over: which module-level functions reach pallas_call through the others.

Used by the source reading of tasks (``analysis/tasks.py``) and of inferred inputs
(``analysis/inferred_inputs.py``); the closure itself is ``analysis.types.reaching``, which the worker's
run-time discovery (``runner/tasks/tasks_runtime.py``, which may import only ``analysis.types``) shares.
"""

from __future__ import annotations

from tree_sitter import Node

from .source import Source
from .types import reaching


def module_owners(functions: dict[str, Node]) -> dict[int, str]:
    """Each module-level function's name by its node's id, for ``owner_of`` (built once per file: a
    map built per call made the check of a 5 MB file spend minutes on the server's event loop)."""
    return {defn.id: name for name, defn in functions.items()}


def owner_of(node: Node, owners: dict[int, str]) -> str | None:
    """The module-level function a node is inside (None at module level); ``owners``: ``module_owners()``."""
    parent = node.parent
    owner = None
    while parent is not None:
        if parent.type == "function_definition" and parent.id in owners:
            owner = owners[parent.id]
        parent = parent.parent
    return owner


def pallas_call_graph(source: Source, functions: dict[str, Node],
                      owners: dict[int, str] | None = None) -> tuple[set[str], dict[str, set[str]]]:
    """The module-level functions that call pallas_call directly or through another function here, and
    each function's calls by name (a function passed as an argument counts: ``partial(fn, ...)``, ``map(fn, ...)``)."""
    owners = module_owners(functions) if owners is None else owners
    calls: dict[str, set[str]] = {name: set() for name in functions}
    direct: set[str] = set()
    for node in source.calls:
        owner = owner_of(node, owners)
        if owner is None:
            continue
        fn = node.child_by_field_name("function")
        qual = source.qualname(fn) or ""
        if qual.endswith(".pallas_call") and qual.startswith("jax"):
            direct.add(owner)
        if fn is not None and fn.type == "identifier":
            calls[owner].add(source.node_text(fn))
        arguments = node.child_by_field_name("arguments")
        for arg in arguments.named_children if arguments is not None else ():
            if arg.type == "identifier":
                calls[owner].add(source.node_text(arg))
    return reaching(direct, calls), calls
