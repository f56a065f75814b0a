"""Tier-0 rules on the body of a kernel function (the function passed to pallas_call).

- PLS006 Python ``if``/``while``/conditional expression on a program_id value
- PLS009 the kernel returns a value
- PLS011 64-bit dtypes (float64/int64/uint64) inside a TPU kernel (fix: the 32-bit type): an error
  when the file enables jax_enable_x64 (the TPU lowering then fails), else a warning (jax silently
  truncates to 32 bits)
"""

from __future__ import annotations

from dataclasses import replace as dc_replace
from typing import Iterator

from tree_sitter import Node

from ..resolve import body_nodes, is_pallas_name, nested_scopes, own_nodes
from ..source import Source, walk
from ..types import Finding, Fix, KernelSite, Span
from .context import RuleContext, finding, replace
from .specs import ref_counts

_WIDE = {"float64": "float32", "int64": "int32", "uint64": "uint32"}


def kernels(ctx: RuleContext, *, tpu_only: bool) -> Iterator[tuple[KernelSite, Node]]:
    """(site, kernel function node) for each site whose kernel is defined in this file, once each."""
    seen: set[int] = set()
    for site in ctx.sites:
        if site.kernel_def_span is None or (tpu_only and site.backend == "gpu"):
            continue
        node = ctx.source.node_at(site.kernel_def_span, "function_definition")
        if node is None or node.id in seen:
            continue
        seen.add(node.id)
        yield site, node


def _is_program_id(source: Source, node: Node) -> bool:
    return node.type == "call" and is_pallas_name(source.qualname(node.child_by_field_name("function")), "program_id")


_SCALAR_NODES = {"binary_operator", "unary_operator", "parenthesized_expression", "identifier", "integer",
                 "float", "comparison_operator", "boolean_operator", "not_operator"}


def _is_grid_query(source: Source, node: Node) -> bool:
    """pl.program_id(...) or pl.num_programs(...): scalar int32 values inside a kernel."""
    return node.type == "call" and is_pallas_name(
        source.qualname(node.child_by_field_name("function")), "program_id", "num_programs")


def _scoped_conditions(source: Source, fn: Node, inherited: frozenset[str]) -> Iterator[tuple[Node, Node, frozenset[str]]]:
    """(branching node, its condition, names holding program_id values there) for ``fn`` and the
    functions nested in it, with Python's scoping: a nested function's parameters and its own
    non-program_id assignments shadow the outer names."""
    params = frozenset(_parameter_names(source, fn))
    body = fn.child_by_field_name("body")
    assigned: dict[str, list[Node | None]] = {}  # name -> every value bound to it (None: unknown)
    for node in body_nodes(source, body, "bind"):
        if node.type == "assignment":
            left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
            if left is not None and left.type == "identifier" and right is not None:
                assigned.setdefault(source.node_text(left), []).append(right)
            elif left is not None and left.type in ("pattern_list", "tuple_pattern") and right is not None and \
                    right.type in ("expression_list", "tuple") and \
                    len(left.named_children) == len(right.named_children):
                for target, value in zip(left.named_children, right.named_children):  # i, j = a, b
                    for ident in (n for n in walk(target) if n.type == "identifier"):
                        assigned.setdefault(source.node_text(ident), []).append(
                            value if target.type == "identifier" else None)
            elif left is not None:
                for ident in (n for n in walk(left) if n.type == "identifier"):
                    assigned.setdefault(source.node_text(ident), []).append(None)  # unpacked: not scalar
        elif node.type == "augmented_assignment":
            left = node.child_by_field_name("left")
            operator = node.child_by_field_name("operator")
            if left is not None and left.type == "identifier" and source.node_text(operator) in _ARITH_UPDATES:
                # ``i += 1``: arithmetic on a traced scalar stays traced, so ``i`` keeps its taint
                assigned.setdefault(source.node_text(left), []).append(left)
            else:
                for ident in (n for n in walk(left) if n.type == "identifier") if left is not None else ():
                    assigned.setdefault(source.node_text(ident), []).append(None)
        elif node.type in ("for_statement", "with_item", "named_expression"):
            target = node.child_by_field_name("left") or node.child_by_field_name("name")
            for ident in (n for n in walk(target) if n.type == "identifier") if target is not None else ():
                assigned.setdefault(source.node_text(ident), []).append(None)
    names = frozenset(_tainted_names(source, assigned, set(inherited - params - frozenset(assigned)), params))
    for node in body_nodes(source, body, "branch"):
        if node.type in ("if_statement", "while_statement", "elif_clause"):
            yield node, node.child_by_field_name("condition"), names
        elif node.type == "conditional_expression":
            parts = node.named_children
            if len(parts) == 3:
                yield node, parts[1], names
    for inner in nested_scopes(source, body) if body is not None else ():
        if inner.type == "decorated_definition":
            inner = inner.child_by_field_name("definition") or inner
        if inner.type in ("function_definition", "lambda"):
            yield from _scoped_conditions(source, inner, names)


_ARITH_UPDATES = {"+=", "-=", "*=", "//=", "%=", "<<=", ">>=", "&=", "|=", "^="}


def _tainted_names(source: Source, assigned: dict[str, list[Node | None]], inherited: set[str],
                   params: frozenset[str]) -> set[str]:
    """The local names that certainly hold a program_id-derived scalar at every binding.

    Two passes, so that a loop counter such as ``i = pl.program_id(0)`` ... ``i = i + 1`` (or
    ``i += 1``) counts: names with at least one binding grounded in program_id (least fixed point),
    then of those, the names whose every binding is program_id arithmetic, assuming the others
    are (greatest fixed point). A name also bound to anything else (``i = 0``, a loop target) is
    not certain and is dropped; cycles with no program_id at their root never enter.
    """
    candidates = {name for name in assigned if name not in params}
    grounded = set(inherited)
    changed = True
    while changed:
        changed = False
        for name in candidates - grounded:
            if any(v is not None and _scalar_of_program_id(source, v, grounded) for v in assigned[name]):
                grounded.add(name)
                changed = True
    tainted = set(grounded)
    changed = True
    while changed:
        changed = False
        for name in list(tainted & candidates):
            if not all(v is not None and _scalar_of_program_id(source, v, tainted) for v in assigned[name]):
                tainted.discard(name)
                changed = True
    return tainted


def _parameter_names(source: Source, fn: Node) -> list[str]:
    params = fn.child_by_field_name("parameters")
    names = []
    for ident in (n for n in walk(params) if n.type == "identifier") if params is not None else ():
        parent = ident.parent
        if parent is not None and parent.type in ("default_parameter", "typed_default_parameter") \
                and parent.child_by_field_name("value") == ident:
            continue
        if parent is not None and parent.type == "type":
            continue
        names.append(source.node_text(ident))
    return names


def _scalar_of_program_id(source: Source, node: Node, tainted: set[str]) -> bool:
    """True when ``node`` is scalar arithmetic/comparison over a program_id value (certainly traced)."""
    if _is_program_id(source, node):
        return True
    if node.type not in _SCALAR_NODES:
        return False
    if node.type == "identifier":
        return source.node_text(node) in tainted
    if node.type == "comparison_operator" and any(
            source.node_text(op) in ("is", "is not", "in", "not in") for op in node.children if not op.is_named):
        return False
    children = node.named_children
    if not children or any(c.type not in _SCALAR_NODES and not _is_grid_query(source, c) for c in children):
        return False
    return any(_scalar_of_program_id(source, c, tainted) for c in children)


# ``Tier0State.program_id``: {(a kernel function's text, its column, the file's imports, the kernel's
# name): (its first line, its PLS006 findings)}: the findings of each kernel of the document's last
# analysis


def program_id_control_flow(ctx: RuleContext) -> Iterator[Finding]:
    """PLS006 per kernel function. What it reads is the function's own text (its body, the functions
    nested in it), the file's imports (which name is program_id, the ``pl`` alias of the fix) and
    the kernel's name: a kernel whose function, position but for its line, imports and name did
    not change since the document's last analysis (its ``Tier0State``) keeps its findings, moved to its
    line (reading the kernels again cost ~0.9 ms per edit on splash attention)."""
    source, state = ctx.source, ctx.source.state
    if state is None:
        for site, fn in kernels(ctx, tpu_only=False):
            yield from _program_id_findings(source, site, fn)
        return
    imports = tuple(sorted(source.imports.items()))
    with state.lock:
        previous, state.program_id = state.program_id or {}, None
    kept: dict[tuple, tuple[int, tuple[Finding, ...]]] = {}
    for site, fn in kernels(ctx, tpu_only=False):
        place = source.span(fn)
        reading = (source.data[fn.start_byte:fn.end_byte], place.column, imports, site.kernel_name)
        hit = previous.get(reading) or kept.get(reading)
        if hit is None:
            found = tuple(_program_id_findings(source, site, fn))
        else:
            found = hit[1] if hit[0] == place.line else tuple(_moved(f, place.line - hit[0]) for f in hit[1])
        kept[reading] = (place.line, found)
        yield from found
    with state.lock:
        state.program_id = kept


def _moved(found: Finding, lines: int) -> Finding:
    """``found`` with every span it holds ``lines`` lines further down."""
    def span(s: Span) -> Span:
        return dc_replace(s, line=s.line + lines, end_line=s.end_line + lines)

    fix = found.fix
    if fix is not None:
        fix = dc_replace(fix, edits=tuple(dc_replace(e, span=span(e.span)) for e in fix.edits))
    return dc_replace(found, span=span(found.span), fix=fix,
                      related=tuple(dc_replace(r, span=span(r.span)) for r in found.related))


def _program_id_findings(source: Source, site: KernelSite, fn: Node) -> Iterator[Finding]:
    for node, condition, tainted in _scoped_conditions(source, fn, frozenset()):
        if condition is None or not _scalar_of_program_id(source, condition, set(tainted)):
            continue
        keyword = {"if_statement": "if", "elif_clause": "elif", "while_statement": "while",
                   "conditional_expression": "... if ... else"}[node.type]
        yield finding(
            "PLS006",
            f"Python `{keyword}` on a program_id value in kernel {site.kernel_name}(): program_id is "
            "a traced value, so Python cannot branch on it (TracerBoolConversionError). Use "
            "`@pl.when(cond)` for a conditional block, or jax.lax.cond / jnp.where.",
            source.span(condition), kernel=site.kernel_name,
            fix=_when_fix(source, node, condition) if node.type == "if_statement" else None)


_SAFE_IN_WHEN = {"expression_statement", "comment", "pass_statement"}


def _when_fix(source: Source, node: Node, condition: Node) -> Fix | None:
    """Rewrite ``if cond:`` + body as ``@pl.when(cond)`` on a nested function, when that keeps the
    meaning: no else/elif, a body on its own lines that only stores into refs or calls functions
    (no local assignments, return, break or continue that would change scope or flow)."""
    alias = next((a for a, m in source.imports.items() if m == "jax.experimental.pallas"), None)
    body = node.child_by_field_name("consequence")
    if alias is None or body is None or node.child_by_field_name("alternative") is not None:
        return None
    if body.start_point[0] == node.start_point[0]:
        return None  # `if c: x` on one line
    for statement in body.named_children:
        if statement.type not in _SAFE_IN_WHEN:
            return None
        for sub in walk(statement):
            if sub.type in ("assignment", "augmented_assignment"):
                left = sub.child_by_field_name("left")
                if left is None or left.type != "subscript":
                    return None  # a local name would become local to the nested function
            elif sub.type in ("named_expression", "yield", "await", "lambda"):
                return None
    first, last = node.start_point[0], body.end_point[0]
    lines = source.text.split("\n")
    if last >= len(lines):
        return None
    indent = lines[first][: len(lines[first]) - len(lines[first].lstrip())]
    body_lines = lines[body.start_point[0]: last + 1]
    if len(lines[first]) - len(lines[first].lstrip()) != source.span(node).column:
        return None  # something precedes the `if` on its line
    # the body keeps its indentation: `def _():` sits where `if` was, one level above it
    new = f"@{alias}.when({source.node_text(condition)})\n{indent}def _():\n" + "\n".join(body_lines)
    span = source.span(node)
    return replace("Run the block under @pl.when(...) instead of a Python if",
                   Span(span.line, span.column, last, len(lines[last])), new)


def kernel_returns(ctx: RuleContext) -> Iterator[Finding]:
    for site, fn in kernels(ctx, tpu_only=False):
        body = fn.child_by_field_name("body")
        for node in own_nodes(body):
            if node.type != "return_statement" or not node.named_children:
                continue
            value = node.named_children[0]
            if not _certainly_a_value(ctx.source, value):
                continue  # e.g. `return other_kernel(...)` may well return None
            out_ref = _single_output_ref(site)
            fix = None
            if out_ref is not None and node.start_point[0] == node.end_point[0]:
                fix = replace(f"Store into {out_ref} instead of returning", ctx.source.span(node),
                              f"{out_ref}[...] = {ctx.source.node_text(value)}")
            yield finding(
                "PLS009",
                f"Kernel {site.kernel_name}() returns a value; Pallas kernels must return None and write "
                f"results into their output refs, e.g. `{out_ref or 'o_ref'}[...] = value`.",
                ctx.source.span(node), kernel=site.kernel_name, fix=fix)


def _single_output_ref(site: KernelSite) -> str | None:
    """The kernel's output ref parameter when the call certainly has exactly one output."""
    counts = ref_counts(site)
    params = site.kernel_params
    if counts is None or params is None or any(p.startswith("*") for p in params):
        return None
    prefetch, inputs, outputs, scratch = counts
    if outputs != 1 or len(params) != prefetch + inputs + outputs + scratch:
        return None
    return params[prefetch + inputs]


_VALUE_NODES = {"binary_operator", "unary_operator", "subscript", "integer", "float", "string", "tuple",
                "list", "dictionary", "comparison_operator", "true", "false", "list_comprehension"}


def _certainly_a_value(source: Source, node: Node) -> bool:
    """A returned expression that cannot be None: arithmetic, a ref read, a literal, a jnp/lax call."""
    while node.type == "parenthesized_expression" and node.named_child_count == 1:
        node = node.named_children[0]
    if node.type in _VALUE_NODES:
        return True
    if node.type == "call":
        qual = source.qualname(node.child_by_field_name("function")) or ""
        return qual.startswith(("jax.numpy.", "jax.lax.", "jax.nn.", "numpy."))
    return False


def wide_dtypes(ctx: RuleContext) -> Iterator[Finding]:
    x64 = enables_x64(ctx.source)
    for site, fn in kernels(ctx, tpu_only=True):
        if b"64" not in ctx.source.data[fn.start_byte:fn.end_byte]:
            continue  # no 64-bit name can appear: skip the walk
        for node in walk(fn):
            name = None
            if node.type in ("attribute", "identifier"):
                if node.parent is not None and node.parent.type == "attribute" and node.parent.child_by_field_name("object") == node:
                    continue
                qual = ctx.source.qualname(node) or ""
                if qual.startswith(("jax.numpy.", "numpy.")) and qual.rsplit(".", 1)[-1] in _WIDE:
                    name = qual.rsplit(".", 1)[-1]
            elif node.type == "string" and _is_dtype_argument(ctx.source, node):
                text = ctx.source.node_text(node).strip("'\"")
                if text in _WIDE:
                    name = text
            if name is None:
                continue
            text = ctx.source.node_text(node)
            fix = replace(f"Use {_WIDE[name]}", ctx.source.span(node), text.replace(name, _WIDE[name]))
            if x64:
                yield finding(
                    "PLS011",
                    f"{text} in TPU kernel {site.kernel_name}(): this file enables jax_enable_x64, and TPUs "
                    f"have no 64-bit vector types, so the TPU lowering fails (\"64-bit types are not "
                    f"supported\"). Use {_WIDE[name]} inside the kernel.",
                    ctx.source.span(node), kernel=site.kernel_name, fix=fix)
            else:
                yield dc_replace(finding(
                    "PLS011",
                    f"{text} in TPU kernel {site.kernel_name}(): with jax_enable_x64 off (the default) jax "
                    f"silently computes this in {_WIDE[name]}; with it on, the TPU lowering fails. "
                    f"Write {_WIDE[name]} to say what runs.",
                    ctx.source.span(node), kernel=site.kernel_name, fix=fix), severity="warning")


def enables_x64(source: Source) -> bool:
    """The file turns on 64-bit types: jax.config.update("jax_enable_x64", True) or enable_x64()."""
    if "x64" not in source.text:
        return False
    for call in source.calls:
        fn = call.child_by_field_name("function")
        name = source.node_text(fn)
        arguments = call.child_by_field_name("arguments")
        args = [a for a in arguments.named_children if a.type != "comment"] if arguments is not None else []
        if name.endswith("config.update") and len(args) == 2 and args[0].type == "string" \
                and "jax_enable_x64" in source.node_text(args[0]) and args[1].type == "true":
            return True
        if name.endswith("enable_x64") and (not args or args[0].type == "true"):
            return True
    return False


def _is_dtype_argument(source: Source, node: Node) -> bool:
    parent = node.parent
    if parent is not None and parent.type == "keyword_argument":
        return source.node_text(parent.child_by_field_name("name")) == "dtype"
    if parent is not None and parent.type == "argument_list":
        call = parent.parent
        fn = call.child_by_field_name("function") if call is not None else None
        return fn is not None and fn.type == "attribute" and source.node_text(fn.child_by_field_name("attribute")) == "astype"
    return False


RULES = (program_id_control_flow, kernel_returns, wide_dtypes)
