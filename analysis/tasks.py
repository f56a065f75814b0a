"""Static discovery of tasks by the native convention (docs/task-convention.md), without running
anything: entries, their example-inputs function, reference, tolerance and tunables. JAXBench
task files (``create_inputs`` + ``workload``) and KernelBench-style files (``class Model`` with
``forward`` + ``get_inputs()``) are recognised too, in the worker's order.

The worker discovers tasks again at run time (the authority for what runs); this static view
feeds the language server (code lenses, tunables) and lets the checker say "no task" (PLS900)
without starting a worker. ``example_shapes`` reads literal ``ShapeDtypeStruct`` shapes from an
inputs function so the tiling rule can know array dims.
"""

from __future__ import annotations

import os

from tree_sitter import Node

from .callgraph import pallas_call_graph
from .resolve import Scope, call_arguments, callee_tail, elements, scope_for, splat_kind
from .sites import dtype_name
from .source import Source, module_functions, walk
from .types import KernelTask, Tunable

ENTRY_VARIABLE = "PALLASITE_ENTRY"


def find_tasks(source: Source, path: str) -> tuple[KernelTask, ...]:
    """The tasks the file defines by the native convention, long form first, else short form."""
    functions = module_functions(source)
    assignments = _module_assignments(source)
    if "workload" in functions and "create_inputs" in functions:  # JAXBench, as the worker reads it
        return (_jaxbench(source, path, functions),)
    if "get_inputs" in functions and _has_model_forward(source):  # KernelBench: class Model + get_inputs()
        return (KernelTask(path=path, entry="forward", format="kernelbench", inputs="get_inputs"),)
    long_form = [name for name in functions if not name.startswith("_") and f"{name}_inputs" in functions]
    if long_form:
        return tuple(_task(source, path, name, functions, assignments, f"{name}_inputs", f"{name}_reference",
                           f"{name}_tolerance", f"{name}_tunables") for name in long_form)
    if "example_inputs" not in functions:
        return ()
    entry = _entry(source, functions, assignments)
    if entry is None:
        return ()
    return (_task(source, path, entry, functions, assignments, "example_inputs", "reference", "TOLERANCE", "TUNABLES"),)


def _task(source: Source, path: str, entry: str, functions: dict[str, Node], assignments: dict[str, Node],
          inputs: str, reference: str, tolerance: str, tunables: str) -> KernelTask:
    atol, rtol = _tolerance(source, assignments.get(tolerance))
    candidates = _candidates(source, assignments.get(tunables))
    return KernelTask(
        path=path,
        entry=entry,
        format="native",
        inputs=inputs,
        reference=reference if reference in functions else None,
        atol=atol,
        rtol=rtol,
        tunables=entry_tunables(source, functions[entry], candidates) if entry in functions else (),
    )


def _has_model_forward(source: Source) -> bool:
    """A module-level ``class Model`` with a ``forward`` method (KernelBench's task form)."""
    for stmt in source.root.named_children:
        node = stmt.named_children[-1] if stmt.type == "decorated_definition" and stmt.named_children else stmt
        if node.type == "class_definition" and source.node_text(node.child_by_field_name("name")) == "Model":
            body = node.child_by_field_name("body")
            for member in body.named_children if body is not None else ():
                inner = member.named_children[-1] if member.type == "decorated_definition" and member.named_children else member
                if inner.type == "function_definition" and source.node_text(inner.child_by_field_name("name")) == "forward":
                    return True
    return False


def _jaxbench(source: Source, path: str, functions: dict[str, Node]) -> KernelTask:
    """A JAXBench task file: ``workload`` fed by ``create_inputs``; reference in a sibling baseline.py."""
    baseline = os.path.join(os.path.dirname(os.path.abspath(path)), "baseline.py") if path else None
    return KernelTask(
        path=path,
        entry="workload",
        format="jaxbench",
        inputs="create_inputs",
        reference_path=baseline if baseline and os.path.isfile(baseline) else None,
        tunables=entry_tunables(source, functions["workload"], {}),
    )


def _entry(source: Source, functions: dict[str, Node], assignments: dict[str, Node]) -> str | None:
    named = assignments.get(ENTRY_VARIABLE)
    if named is not None and named.type == "string":
        name = source.node_text(named).strip("'\"")
        return name if name in functions else None
    calling = _functions_reaching_pallas_call(source, functions)
    public = [name for name in calling if not name.startswith("_")]
    return public[0] if len(public) == 1 else None


def _functions_reaching_pallas_call(source: Source, functions: dict[str, Node]) -> list[str]:
    """Module-level functions that call pallas_call directly or through another function here."""
    reaching, _ = pallas_call_graph(source, functions)
    return [name for name in functions if name in reaching]


def entry_tunables(source: Source, defn: Node, candidates: dict[str, tuple[int, ...]]) -> tuple[Tunable, ...]:
    """Keyword-only parameters with int defaults, with their candidate values and spans."""
    params = defn.child_by_field_name("parameters")
    found: list[Tunable] = []
    keyword_only = False
    for param in params.named_children if params is not None else ():
        if param.type == "keyword_separator" or splat_kind(param) == "*":
            keyword_only = True
            continue
        if not keyword_only or param.type not in ("default_parameter", "typed_default_parameter"):
            continue
        value = source.int_value(param.child_by_field_name("value"))
        if value is None or isinstance(value, bool):
            continue
        name = source.node_text(param.child_by_field_name("name"))
        found.append(Tunable(name=name, default=value, candidates=candidates.get(name, ()), span=source.span(param),
                             value_span=source.span(param.child_by_field_name("value"))))
    return tuple(found)


def _tolerance(source: Source, node: Node | None) -> tuple[float | None, float | None]:
    values = _dict_items(source, node)
    return _float(source, values.get("atol")), _float(source, values.get("rtol"))


def _candidates(source: Source, node: Node | None) -> dict[str, tuple[int, ...]]:
    out: dict[str, tuple[int, ...]] = {}
    for key, value in _dict_items(source, node).items():
        if value.type in ("list", "tuple"):
            ints = [source.int_value(v) for v in value.named_children]
            if all(i is not None for i in ints):
                out[key] = tuple(ints)  # type: ignore[arg-type]
    return out


def _dict_items(source: Source, node: Node | None) -> dict[str, Node]:
    items: dict[str, Node] = {}
    if node is None:
        return items
    if node.type == "dictionary":
        for pair in node.named_children:
            if pair.type == "pair":
                key, value = pair.child_by_field_name("key"), pair.child_by_field_name("value")
                if key is not None and key.type == "string" and value is not None:
                    items[source.node_text(key).strip("'\"")] = value
    elif node.type == "call" and callee_tail(source, node) == "dict":
        _, keywords, _, _ = call_arguments(source, node)
        items.update(keywords)
    return items


def _float(source: Source, node: Node | None) -> float | None:
    if node is None:
        return None
    text = source.node_text(node).replace("_", "")
    try:
        return float(text)
    except ValueError:
        return None


def _module_assignments(source: Source) -> dict[str, Node]:
    out: dict[str, Node] = {}
    for stmt in source.root.named_children:
        if stmt.type == "expression_statement" and stmt.named_child_count == 1:
            child = stmt.named_children[0]
            if child.type == "assignment":
                left, right = child.child_by_field_name("left"), child.child_by_field_name("right")
                if left is not None and left.type == "identifier" and right is not None:
                    out[source.node_text(left)] = right
    return out


# ---------------------------------------------------------------------------- example shapes


def example_shapes(source: Source, inputs: str | None) -> tuple[tuple[tuple[int, ...], str | None] | None, ...] | None:
    """Per positional argument, (shape, dtype) when the inputs function states it literally."""
    if not inputs:
        return None
    defn = module_functions(source).get(inputs)
    if defn is None:
        return None
    returns = [n for n in walk(defn) if n.type == "return_statement"]
    if len(returns) != 1 or not returns[0].named_children:
        return None
    value_node = returns[0].named_children[0]
    scope = scope_for(source, value_node)
    items = elements(source, scope, value_node)
    if items is None:
        items = [value_node]
    return tuple(_array(source, scope, item) for item in items)


def _array(source: Source, scope: Scope, node: Node) -> tuple[tuple[int, ...], str | None] | None:
    node = scope.resolve(node)
    if node is None or node.type != "call":
        return None
    tail = callee_tail(source, node)
    positional, keywords, _, _ = call_arguments(source, node)
    if tail in ("ShapeDtypeStruct", "zeros", "ones", "empty"):
        shape_node = positional[0] if positional else keywords.get("shape")
        dtype_node = positional[1] if len(positional) > 1 else keywords.get("dtype")
    elif tail in ("normal", "uniform", "randint", "bernoulli"):
        shape_node = positional[1] if len(positional) > 1 else keywords.get("shape")
        dtype_node = keywords.get("dtype")
        if dtype_node is None and tail == "randint" and len(positional) > 4:
            dtype_node = positional[4]
        elif dtype_node is None and tail in ("normal", "uniform") and len(positional) > 2:
            dtype_node = positional[2]
    else:
        return None
    dims = elements(source, scope, shape_node) if shape_node is not None else None
    if dims is None:
        return None
    values = [scope.value(d) for d in dims]
    if any(v is None for v in values):
        return None
    dtype = dtype_name(source, dtype_node) if dtype_node is not None else ("float32" if tail != "randint" else None)
    return tuple(values), dtype  # type: ignore[arg-type]
