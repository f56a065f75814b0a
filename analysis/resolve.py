"""What a name or expression in a kernel file certainly stands for, read statically.

``Scope`` holds, for the functions around a node, the names assigned exactly once (to follow
``spec = pl.BlockSpec(...)`` into ``in_specs=[spec, spec]``) and the ints known there (module
constants, tunable defaults, single local int assignments) with the span each came from. Names
that are rebound, mutated in place (``specs.append(...)``) or loop variables are uncertain and
resolve to nothing. Also: call-argument splitting and the names of called functions.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from tree_sitter import Node

from .source import PALLAS_PREFIXES, Source, enclosing_function, is_module_level, walk
from .types import Span

MAX_DEPTH = 8  # how many variable indirections to follow
_MUTATORS = {"append", "insert", "extend", "pop", "remove", "clear", "sort", "reverse", "update",
             "setdefault", "popitem", "__setitem__", "__delitem__"}


@dataclass
class Scope:
    """What is certain about names inside one function: single assignments and int defaults."""

    source: Source
    assigned: dict[str, Node] = field(default_factory=dict)  # name -> the one value assigned to it
    ints: dict[str, int] = field(default_factory=dict)  # name -> int (tunable defaults, local ints)
    int_spans: dict[str, Span] = field(default_factory=dict)  # where each int came from
    shadowed: set[str] = field(default_factory=set)  # names rebound locally: no module constant

    def value(self, node: Node | None) -> int | None:
        if node is None:
            return None
        if node.type == "identifier":
            name = self.source.node_text(node)
            if name in self.ints:
                return self.ints[name]
            if name in self.shadowed:
                return None
        return self.source.int_value(node, self._lookup())

    def _lookup(self) -> dict[str, int]:
        table = {name: c.value for name, c in self.source.constants.items() if name not in self.shadowed}
        table.update(self.ints)
        return table

    def origin(self, node: Node) -> Span | None:
        """Span of the constant/default a bare name resolved through, if any."""
        if node.type != "identifier":
            return None
        name = self.source.node_text(node)
        if name in self.int_spans:
            return self.int_spans[name]
        if name in self.shadowed:
            return None
        const = self.source.constants.get(name)
        return const.span if const else None

    def resolve(self, node: Node | None) -> Node | None:
        """Follow a bare name to the single expression assigned to it (a few levels deep)."""
        depth = 0
        while node is not None and node.type == "identifier" and depth < MAX_DEPTH:
            target = self.assigned.get(self.source.node_text(node))
            if target is None:
                return node
            node = target
            depth += 1
        while node is not None and node.type == "parenthesized_expression" and node.named_child_count == 1:
            node = node.named_children[0]
        return node


def scope_for(source: Source, node: Node) -> Scope:
    """The scope of the functions around ``node``: outer functions first, inner ones override."""
    fn = enclosing_function(node)
    key = fn.id if fn is not None else None
    cache = source.cache.setdefault("scopes", {})
    if key in cache:
        return cache[key]
    scope = Scope(source)
    cache[key] = scope
    chain: list[Node] = []
    while fn is not None:
        chain.append(fn)
        fn = enclosing_function(fn)
    scope.assigned.update(module_tuples(source))
    for fn in reversed(chain):
        _collect(source, fn, scope)
    return scope


def module_tuples(source: Source) -> dict[str, Node]:
    """Module-level names bound exactly once, to a tuple (``GRID = (4, 2)``, ``SEM = ("parallel",)``)
    or to another such name: tuples cannot be mutated, so the value is certain everywhere a
    function does not rebind the name. Names rebound anywhere at module level (``if``/``for``/
    ``with``/``try`` blocks included), imported, declared ``global`` in some function or bound by
    a walrus are left out."""
    cache = source.cache.setdefault("module", {})
    if "tuples" in cache:
        return cache["tuples"]
    counts: dict[str, int] = {}
    values: dict[str, Node] = {}
    stack = list(reversed(source.root.named_children))
    while stack:  # module-level statements only, descending into blocks but not defs or classes
        node = stack.pop()
        kind = node.type
        if kind in ("function_definition", "class_definition", "decorated_definition"):
            continue
        if kind == "expression_statement":
            for child in node.named_children:
                if child.type in ("assignment", "augmented_assignment"):
                    stack.append(child)  # chained ``a = b = (1,)`` nests assignments on the right
            continue
        if kind == "assignment":
            left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
            if left is not None and left.type == "identifier":
                name = source.node_text(left)
                counts[name] = counts.get(name, 0) + 1
                if right is not None:
                    values[name] = right
                    if right.type == "assignment":
                        stack.append(right)
            elif left is not None:
                for ident in _identifiers(left):
                    counts[source.node_text(ident)] = 2  # unpacked or subscripted: uncertain
            continue
        if kind in ("augmented_assignment", "for_statement", "as_pattern", "delete_statement"):
            target = node.child_by_field_name("left") or node.child_by_field_name("alias")
            for ident in _identifiers(target if target is not None else node):
                counts[source.node_text(ident)] = 2  # rebound (``with ... as``/``except ... as`` too)
        stack.extend(reversed(node.named_children))
    rebound = set(source.imports) | source.rebound_anywhere
    found: dict[str, Node] = {}
    for name, value in values.items():
        if counts.get(name) != 1 or name in rebound:
            continue
        inner = value
        while inner.type == "parenthesized_expression" and inner.named_child_count == 1:
            inner = inner.named_children[0]
        if inner.type in ("tuple", "identifier"):
            found[name] = inner
    for name in [n for n, v in found.items() if v.type == "identifier"]:
        target, depth = found[name], 0  # an alias counts only when it leads to a tuple
        while target is not None and target.type == "identifier" and depth < MAX_DEPTH:
            target, depth = found.get(source.node_text(target)), depth + 1
        if target is None or target.type != "tuple":
            del found[name]
    cache["tuples"] = found
    return found


def _collect(source: Source, fn: Node, scope: Scope) -> None:
    params = fn.child_by_field_name("parameters")
    after_star = False
    param_names: list[str] = []
    for param in params.named_children if params is not None else ():
        if param.type == "keyword_separator" or splat_kind(param) == "*":
            after_star = True
        name_node = param_name(param)
        if name_node is None:
            continue
        name = source.node_text(name_node)
        param_names.append(name)
        scope.shadowed.add(name)
        scope.ints.pop(name, None)
        scope.assigned.pop(name, None)
        if after_star and param.type in ("default_parameter", "typed_default_parameter"):
            default = param.child_by_field_name("value")
            number = source.int_value(default)
            if number is not None and default is not None:
                scope.ints[name] = number
                scope.int_spans[name] = source.span(default)
    counts: dict[str, int] = {name: 1 for name in param_names}  # a reassigned parameter is uncertain
    values: dict[str, Node] = {}
    body = fn.child_by_field_name("body")
    for node in _binding_nodes(source, body):
        if node.type == "assignment":
            left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
            while right is not None and right.type == "assignment":  # chained ``bm = bn = 128``: the last value
                right = right.child_by_field_name("right")
            pairs: list[tuple[Node, Node | None]] = []
            if left is not None and left.type == "identifier":
                pairs.append((left, right))
            elif left is not None and left.type in ("pattern_list", "tuple_pattern"):
                rights = right.named_children if right is not None and right.type in ("expression_list", "tuple") else []
                for i, target in enumerate(left.named_children):
                    pairs.append((target, rights[i] if len(rights) == len(left.named_children) else None))
            for target, value in pairs:
                if target.type != "identifier":
                    continue
                name = source.node_text(target)
                counts[name] = counts.get(name, 0) + 1
                if value is not None:
                    values[name] = value
        if node.type == "attribute" and node.parent is not None and node.parent.type == "call":
            obj, attr = node.child_by_field_name("object"), node.child_by_field_name("attribute")
            if obj is not None and obj.type == "identifier" and source.node_text(attr) in _MUTATORS:
                counts[source.node_text(obj)] = 2  # mutated in place: its literal value is not certain
        elif node.type == "assignment":
            left = node.child_by_field_name("left")
            if left is not None and left.type == "subscript":
                obj = left.child_by_field_name("value")
                if obj is not None and obj.type == "identifier":
                    counts[source.node_text(obj)] = 2
        if node.type in ("augmented_assignment", "for_statement", "for_in_clause", "named_expression",
                           "with_item", "global_statement", "nonlocal_statement", "as_pattern"):
            target = node.child_by_field_name("left") or node.child_by_field_name("name")
            for ident in _identifiers(target) if target is not None else ():
                counts[source.node_text(ident)] = 2  # rebound: uncertain
            if node.type in ("with_item", "as_pattern"):
                for ident in _identifiers(node):
                    if ident.parent is not None and ident.parent.type in ("as_pattern_target",):
                        counts[source.node_text(ident)] = 2
    for name, count in counts.items():
        if count == 1 and name in param_names:
            continue  # a parameter never reassigned: keep its tunable default, if any
        scope.shadowed.add(name)
        scope.ints.pop(name, None)
        scope.assigned.pop(name, None)
        if count == 1 and name in values:
            scope.assigned[name] = values[name]
            number = scope.value(values[name])
            if number is not None:
                scope.ints[name] = number
                origin = scope.origin(values[name])
                scope.int_spans[name] = origin or source.span(values[name])


def body_nodes(source: Source, body: Node | None, kind: str) -> list[Node]:
    """The ``source.bindings`` (kind "bind") or ``source.branches`` (kind "branch") inside
    ``body``, outside nested functions, lambdas and classes, in source order: byte ranges over
    the file-wide lists (no walk of the tree)."""
    if body is None:
        return []
    nodes, starts = _indexed(source, kind)
    lo, hi = bisect.bisect_left(starts, body.start_byte), bisect.bisect_left(starts, body.end_byte)
    nested = nested_scopes(source, body)
    if not nested:
        return [n for n in nodes[lo:hi] if n.end_byte <= body.end_byte]
    nested_starts = [n.start_byte for n in nested]
    own = []
    for node in nodes[lo:hi]:
        if node.end_byte > body.end_byte:
            continue
        i = bisect.bisect_right(nested_starts, node.start_byte) - 1
        if i >= 0 and node.start_byte < nested[i].end_byte:
            continue  # inside a nested function, lambda or class
        own.append(node)
    return own


def nested_scopes(source: Source, body: Node) -> list[Node]:
    """The outermost function definitions, lambdas, classes and decorated definitions inside ``body``."""
    nodes, starts = _indexed(source, "scope")
    lo, hi = bisect.bisect_left(starts, body.start_byte), bisect.bisect_left(starts, body.end_byte)
    outer: list[Node] = []
    for node in nodes[lo:hi]:
        if node.end_byte > body.end_byte or node.start_byte == body.start_byte and node.end_byte == body.end_byte:
            continue
        if outer and node.start_byte < outer[-1].end_byte:
            continue  # inside the previous one (a decorated definition's def, a nested def)
        outer.append(node)
    return outer


def _indexed(source: Source, kind: str) -> tuple[list[Node], list[int]]:
    cache = source.cache.setdefault("index", {})
    if kind not in cache:
        if kind == "bind":
            nodes = sorted(source.bindings + _mutator_attributes(source), key=lambda n: n.start_byte)
        else:
            nodes = source.branches if kind == "branch" else source.scope_nodes
        cache[kind] = (nodes, [n.start_byte for n in nodes])
    return cache[kind]


def _mutator_attributes(source: Source) -> list[Node]:
    """The ``obj.append``-style attributes that are called (they may mutate ``obj`` in place)."""
    found = []
    for call in source.calls:
        fn = call.child_by_field_name("function")
        if fn is not None and fn.type == "attribute":
            found.append(fn)
    return found


def _binding_nodes(source: Source, body: Node | None) -> list[Node]:
    """The nodes of a function body that bind or mutate names, outside nested functions/classes."""
    return body_nodes(source, body, "bind")


def own_nodes(body: Node | None):
    """Nodes of a function body, not descending into nested functions, lambdas or classes."""
    if body is None:
        return
    stack = [body]
    while stack:
        node = stack.pop()
        yield node
        for child in reversed(node.children):
            if child.type not in ("function_definition", "lambda", "class_definition", "decorated_definition"):
                stack.append(child)


def _identifiers(node: Node):
    return [n for n in walk(node) if n.type == "identifier"]


def splat_kind(param: Node) -> str | None:
    """"*" or "**" for ``*args``/``**kw`` parameters (typed or not), else None."""
    node = param
    if node.type == "typed_parameter" and node.named_children:
        node = node.named_children[0]
    if node.type == "list_splat_pattern":
        return "*"
    if node.type == "dictionary_splat_pattern":
        return "**"
    return None


def param_name(param: Node) -> Node | None:
    """The identifier node naming a parameter of any form (typed, defaulted, *args, **kw)."""
    if param.type == "identifier":
        return param
    if param.type in ("typed_parameter", "list_splat_pattern", "dictionary_splat_pattern"):
        for child in param.named_children:
            if child.type == "identifier":
                return child
            if child.type in ("list_splat_pattern", "dictionary_splat_pattern"):
                return param_name(child)
        return None
    if param.type in ("default_parameter", "typed_default_parameter"):
        name = param.child_by_field_name("name")
        return name if name is not None and name.type == "identifier" else None
    return None


# ---------------------------------------------------------------------------- call helpers


def call_arguments(source: Source, call: Node) -> tuple[list[Node], dict[str, Node], dict[str, Node], bool]:
    """(positional args, keyword name -> value, keyword name -> keyword_argument node, has splat)."""
    args = call.child_by_field_name("arguments")
    positional: list[Node] = []
    keywords: dict[str, Node] = {}
    keyword_nodes: dict[str, Node] = {}
    splat = False
    if args is None or args.type != "argument_list":
        return positional, keywords, keyword_nodes, args is not None  # generator argument: unknown
    for child in args.named_children:
        if child.type == "keyword_argument":
            name = source.node_text(child.child_by_field_name("name"))
            value = child.child_by_field_name("value")
            if value is not None:
                keywords[name] = value
                keyword_nodes[name] = child
        elif child.type in ("list_splat", "dictionary_splat"):
            splat = True
        elif child.type != "comment":
            positional.append(child)
    return positional, keywords, keyword_nodes, splat


def callee(source: Source, node: Node | None) -> str | None:
    """The qualified name of the function a call node calls, via the imports (None if unknown)."""
    if node is None or node.type != "call":
        return None
    fn = node.child_by_field_name("function")
    return source.qualname(fn)


def callee_tail(source: Source, node: Node | None) -> str | None:
    """The last dotted component of the called name (``pltpu.VMEM(...)`` -> ``VMEM``)."""
    if node is None or node.type != "call":
        return None
    fn = node.child_by_field_name("function")
    if fn is None:
        return None
    if fn.type == "identifier":
        return source.node_text(fn)
    if fn.type == "attribute":
        return source.node_text(fn.child_by_field_name("attribute"))
    return None


def is_pallas_name(qualname: str | None, *names: str) -> bool:
    """Whether ``qualname`` is one of ``names`` exported by Pallas (public or jax._src path)."""
    if not qualname or not qualname.startswith(PALLAS_PREFIXES):
        return False
    return qualname.rsplit(".", 1)[-1] in names


def is_partial(source: Source, node: Node) -> bool:
    name = callee(source, node)
    return name in ("functools.partial",)


def elements(source: Source, scope: Scope, node: Node | None) -> list[Node] | None:
    """The items of a list/tuple literal (after resolving a name), or None if not a literal."""
    node = scope.resolve(node)
    if node is None:
        return None
    if node.type in ("list", "tuple", "expression_list"):
        items = [c for c in node.named_children if c.type != "comment"]
        if any(c.type in ("list_splat", "parenthesized_list_splat") for c in items):
            return None
        return items
    if node.type == "binary_operator" and source.node_text(node.child_by_field_name("operator")) == "*":
        left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
        times = scope.value(right)
        inner = elements(source, scope, left) if times is not None else None
        if inner is None:
            times = scope.value(left)
            inner = elements(source, scope, right) if times is not None else None
        if inner is not None and times is not None and 0 <= times <= 64:
            return inner * times
    return None


# ---------------------------------------------------------------------------- helper functions


def helper_scope(source: Source, caller: Scope, call: Node) -> tuple[Scope, Node] | None:
    """For ``make_specs(bn)``, a call of a plain function of this file with one ``return``: the
    scope of that function with its parameters bound to the call's int arguments (or their
    defaults), and the returned expression. None when anything makes that uncertain: a decorated
    or generator helper, several returns, ``*args``/``**kw`` on either side, unknown keywords, a
    parameter reassigned in the helper."""
    fn = call.child_by_field_name("function")
    if fn is None or fn.type != "identifier":
        return None
    defn = source.function(source.node_text(fn), near=call)
    if defn is None or defn.parent is None or defn.parent.type == "decorated_definition":
        return None
    if enclosing_function(call) is defn:
        return None  # recursion
    body = defn.child_by_field_name("body")
    own = list(own_nodes(body))
    if any(n.type in ("yield", "await") for n in own):
        return None
    returns = [n for n in own if n.type == "return_statement"]
    if len(returns) != 1 or not returns[0].named_children:
        return None
    value = returns[0].named_children[0]
    bound = _bind_arguments(source, defn, call)
    if bound is None:
        return None
    base = scope_for(source, value)
    scope = Scope(source, dict(base.assigned), dict(base.ints), dict(base.int_spans), set(base.shadowed))
    rebound = {source.node_text(ident) for node in _binding_nodes(source, body) if node.type != "attribute"
               for ident in _identifiers(node.child_by_field_name("left") or node.child_by_field_name("name")
                                         or node)}
    for name, (arg, is_default) in bound.items():
        scope.ints.pop(name, None)
        scope.int_spans.pop(name, None)
        if name in rebound:
            continue
        if is_default and not is_module_level(defn) and _identifiers(arg):
            continue  # a nested helper's default may name the enclosing function's locals
        number = source.int_value(arg) if is_default else caller.value(arg)
        if number is None:
            continue
        scope.ints[name] = number
        scope.int_spans[name] = source.span(arg) if is_default else (caller.origin(arg) or source.span(arg))
    return scope, value


def _bind_arguments(source: Source, defn: Node, call: Node) -> dict[str, tuple[Node, bool]] | None:
    """Parameter name -> (argument node, whether it is the parameter's default), as Python binds
    them for ``call``; None when the binding is not certain."""
    positional, keywords, _, splat = call_arguments(source, call)
    if splat:
        return None
    params = defn.child_by_field_name("parameters")
    bound: dict[str, tuple[Node, bool]] = {}
    index, keyword_only = 0, False
    for param in params.named_children if params is not None else ():
        if param.type == "positional_separator":
            continue
        if param.type == "keyword_separator":
            keyword_only = True
            continue
        if splat_kind(param) is not None:
            return None
        name_node = param_name(param)
        if name_node is None:
            return None
        name = source.node_text(name_node)
        if not keyword_only and index < len(positional):
            bound[name] = (positional[index], False)
            index += 1
            if name in keywords:
                return None  # given twice: Python raises
        elif name in keywords:
            bound[name] = (keywords[name], False)
        elif param.type in ("default_parameter", "typed_default_parameter"):
            default = param.child_by_field_name("value")
            if default is None:
                return None
            bound[name] = (default, True)
        else:
            return None  # a required parameter left out: Python raises
    if index < len(positional) or set(keywords) - set(bound):
        return None
    return bound
