"""Every ``pallas_call`` in a file, read as a ``KernelSite``: kernel, grid, BlockSpecs, scratch,
compiler params and the spans of each, resolved through literals, module constants, the entry's
tunable defaults and single local assignments.

Anything that cannot be resolved statically is recorded as ``None`` (or as its source text for a
single dim); nothing here raises on unusual code.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

from tree_sitter import Node

from .source import GPU_MODULES, PALLAS_PREFIXES, TPU_MODULES, Source, enclosing_function, outermost_function, walk
from .types import BlockSpecInfo, KernelSite, ScratchInfo, Span

_MAX_DEPTH = 8  # how many variable indirections to follow
# compiler_params dict keys that only GPU backends take (nested per backend, or Triton's flat form)
_GPU_PARAM_KEYS = ("triton", "mosaic_gpu", "num_warps", "num_stages")
_MUTATORS = {"append", "insert", "extend", "pop", "remove", "clear", "sort", "reverse", "update",
             "setdefault", "popitem", "__setitem__", "__delitem__"}


# ---------------------------------------------------------------------------- local scope


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
        while node is not None and node.type == "identifier" and depth < _MAX_DEPTH:
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
    for fn in reversed(chain):
        _collect(source, fn, scope)
    return scope


def _collect(source: Source, fn: Node, scope: Scope) -> None:
    params = fn.child_by_field_name("parameters")
    after_star = False
    param_names: list[str] = []
    for param in params.named_children if params is not None else ():
        if param.type == "keyword_separator" or splat_kind(param) == "*":
            after_star = True
        name_node = _param_name(param)
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
    for node in _own_nodes(body):
        if node.type == "assignment":
            left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
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


def _own_nodes(body: Node | None):
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


def _param_name(param: Node) -> Node | None:
    if param.type == "identifier":
        return param
    if param.type in ("typed_parameter", "list_splat_pattern", "dictionary_splat_pattern"):
        for child in param.named_children:
            if child.type == "identifier":
                return child
            if child.type in ("list_splat_pattern", "dictionary_splat_pattern"):
                return _param_name(child)
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
    """The qualified name of the function a call node calls, via imports (else its last name)."""
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
    if not qualname or not qualname.startswith(PALLAS_PREFIXES):
        return False
    return qualname.rsplit(".", 1)[-1] in names


def _is_partial(source: Source, node: Node) -> bool:
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


# ---------------------------------------------------------------------------- sites


def find_sites(source: Source) -> tuple[KernelSite, ...]:
    """Every pallas_call in the file, in source order."""
    sites: list[KernelSite] = []
    for node in source.calls:
        fn = node.child_by_field_name("function")
        if fn is None:
            continue
        if not is_pallas_name(source.qualname(fn), "pallas_call"):
            if not _is_partial(source, node):
                continue
            arguments = node.child_by_field_name("arguments")
            first = arguments.named_children[0] if arguments is not None and arguments.named_children else None
            if first is None or not is_pallas_name(source.qualname(first), "pallas_call"):
                continue
            fn = first  # functools.partial(pl.pallas_call, ...), usually a decorator on the kernel
        try:
            sites.append(read_site(source, node))
        except Exception as err:  # noqa: BLE001 - an unreadable call is recorded bare, never raised
            warnings.warn(f"pallasite could not read the pallas_call at line {node.start_point[0] + 1} "
                          f"({type(err).__name__}: {err}); recorded without details", RuntimeWarning, stacklevel=2)
            sites.append(KernelSite(kernel_name=None, span=source.span(node), call_span=source.span(fn),
                                    backend=file_backend(source)))
    return tuple(sites)


def read_site(source: Source, call: Node) -> KernelSite:
    """The KernelSite of ``pallas_call(kernel, ...)`` or of ``functools.partial(pallas_call, ...)``
    (as a decorator on the kernel, or with the kernel as its next argument)."""
    scope = scope_for(source, call)
    fn = call.child_by_field_name("function")
    positional, keywords, keyword_nodes, _ = call_arguments(source, call)
    partial_form = _is_partial(source, call)
    if partial_form:
        fn, positional = positional[0], positional[1:]
    kernel = positional[0] if positional else keywords.get("kernel")
    decorated = _decorated_function(call) if partial_form and kernel is None else None
    if decorated is not None:
        kernel = decorated.child_by_field_name("name")
        kernel_name, kernel_def = source.node_text(kernel), decorated
        kernel_params = _ref_params(source, decorated, set(), 0)
    else:
        kernel_name, kernel_def, kernel_params = _kernel(source, scope, kernel, call)

    grid_node = keywords.get("grid")
    in_node, out_node = keywords.get("in_specs"), keywords.get("out_specs")
    scratch_node = keywords.get("scratch_shapes")
    num_prefetch: int | None = 0
    grid_spec = scope.resolve(keywords.get("grid_spec"))
    if grid_spec is not None:
        if grid_spec.type == "call" and is_pallas_name(callee(source, grid_spec), "GridSpec", "PrefetchScalarGridSpec"):
            _, gs_kw, _, gs_splat = call_arguments(source, grid_spec)
            grid_node = gs_kw.get("grid", grid_node)
            in_node = gs_kw.get("in_specs", in_node)
            out_node = gs_kw.get("out_specs", out_node)
            scratch_node = gs_kw.get("scratch_shapes", scratch_node)
            num_prefetch = scope.value(gs_kw.get("num_scalar_prefetch")) if "num_scalar_prefetch" in gs_kw else 0
            if gs_splat:
                num_prefetch = None
        else:
            grid_node = in_node = out_node = scratch_node = None
            num_prefetch = None
    grid = _grid(source, scope, grid_node)
    in_specs = _specs(source, scope, in_node, "in")
    out_specs = _specs(source, scope, out_node, "out")
    out_shapes, out_dtypes = _out_shapes(source, scope, keywords.get("out_shape"))
    scratch = _scratch(source, scope, scratch_node) if scratch_node is not None else (
        () if grid_spec is None or num_prefetch is not None else None)
    cp_node = keywords.get("compiler_params")
    semantics, semantics_span, cp_backend = _compiler_params(source, scope, cp_node)
    operands = None if partial_form else _operands(source, call)

    backend = cp_backend or _scratch_backend(source, scope, scratch_node) or file_backend(source)
    outer = outermost_function(call)
    enclosing = source.node_text(outer.child_by_field_name("name")) if outer is not None else None
    return KernelSite(
        kernel_name=kernel_name,
        span=source.span(call),
        call_span=source.span(fn),
        enclosing_function=enclosing,
        kernel_def_span=source.span(kernel_def) if kernel_def is not None else None,
        kernel_params=kernel_params,
        grid=grid,
        grid_span=source.span(grid_node) if grid_node is not None else None,
        in_specs=in_specs,
        out_specs=out_specs,
        out_shape_count=len(out_shapes) if out_shapes is not None else None,
        scratch_shapes=scratch,
        num_scalar_prefetch=num_prefetch,
        dimension_semantics=semantics,
        dimension_semantics_span=semantics_span,
        compiler_params_span=source.span(cp_node) if cp_node is not None else None,
        keyword_spans=tuple((name, source.span(node)) for name, node in keyword_nodes.items()),
        backend=backend,
        out_shapes=out_shapes,
        out_dtypes=out_dtypes,
        operands=operands,
        kernel_name_span=source.span(kernel) if kernel is not None else None,
    )


def file_backend(source: Source) -> str:
    """"gpu" if the file imports only GPU Pallas, "tpu" if it imports TPU Pallas, else "unknown"."""
    tpu = source.imports_any(TPU_MODULES)
    gpu = source.imports_any(GPU_MODULES)
    if gpu and not tpu:
        return "gpu"
    if tpu and not gpu:
        return "tpu"
    return "unknown"


def _decorated_function(call: Node) -> Node | None:
    """The function a ``@functools.partial(pl.pallas_call, ...)`` decorator is applied to."""
    parent = call.parent
    if parent is None or parent.type != "decorator" or parent.parent is None:
        return None
    definition = parent.parent.child_by_field_name("definition")
    return definition if definition is not None and definition.type == "function_definition" else None


def _kernel(source: Source, scope: Scope, node: Node | None, call: Node):
    bound: set[str] = set()
    bound_positional = 0
    node = scope.resolve(node)
    if node is not None and node.type == "call" and _is_partial(source, node):
        positional, keywords, _, splat = call_arguments(source, node)
        if not positional or splat:
            return None, None, None
        node = scope.resolve(positional[0])
        bound = set(keywords)
        bound_positional = len(positional) - 1
    if node is None or node.type != "identifier":
        return None, None, None
    name = source.node_text(node)
    defn = source.function(name, near=call)
    if defn is None:
        return name, None, None
    return name, defn, _ref_params(source, defn, bound, bound_positional)


def _ref_params(source: Source, defn: Node, bound: set[str], bound_positional: int) -> tuple[str, ...]:
    """The parameters left for refs: positional ones not bound by functools.partial.

    A ``*args`` parameter appears as ``"*args"`` (the count is then open-ended).
    """
    params = defn.child_by_field_name("parameters")
    names: list[str] = []
    for param in params.named_children if params is not None else ():
        if param.type == "keyword_separator":
            break
        if splat_kind(param) == "*":
            names.append("*" + source.node_text(_param_name(param)))
            break
        if splat_kind(param) == "**" or param.type == "positional_separator":
            continue
        name_node = _param_name(param)
        if name_node is None:
            continue
        name = source.node_text(name_node)
        if name in bound:
            continue
        names.append(name)
    return tuple(names[bound_positional:])


def _grid(source: Source, scope: Scope, node: Node | None) -> tuple[int | str, ...] | None:
    if node is None:
        return None
    items = elements(source, scope, node)
    if items is None:
        resolved = scope.resolve(node)
        number = scope.value(resolved)
        if number is not None:
            return (number,)
        return None
    out: list[int | str] = []
    for item in items:
        number = scope.value(item)
        out.append(number if number is not None else source.node_text(item))
    return tuple(out)


def _specs(source: Source, scope: Scope, node: Node | None, role: str) -> tuple[BlockSpecInfo, ...] | None:
    """The leaves of in_specs/out_specs (nested lists/tuples flattened), or None if not literal."""
    if node is None:
        return None
    resolved = scope.resolve(node)
    leaves: list[Node] = []

    def flatten(n: Node, depth: int) -> None:
        items = elements(source, scope, n) if depth < _MAX_DEPTH else None
        if items is None:
            leaves.append(n)
            return
        for item in items:
            flatten(item, depth + 1)

    if resolved is not None and resolved.type in ("list", "tuple", "binary_operator"):
        if elements(source, scope, resolved) is None:
            return None
        flatten(resolved, 0)
    else:
        leaves.append(node)
    return tuple(block_spec(source, scope, leaf, role, position) for position, leaf in enumerate(leaves))


def block_spec(source: Source, scope: Scope, node: Node, role: str, position: int) -> BlockSpecInfo:
    """One entry of in_specs/out_specs. ``certain`` is False when it may stand for several specs."""
    resolved = scope.resolve(node)
    span = source.span(node)
    if resolved is None:
        return BlockSpecInfo(span=span, role=role, position=position, certain=False)  # type: ignore[arg-type]
    if resolved.type == "none":
        return BlockSpecInfo(span=span, role=role, position=position)  # type: ignore[arg-type]
    name = source.qualname(resolved)
    if is_pallas_name(name, "no_block_spec"):
        return BlockSpecInfo(span=span, role=role, position=position)  # type: ignore[arg-type]
    if resolved.type != "call" or not is_pallas_name(callee(source, resolved), "BlockSpec"):
        return BlockSpecInfo(span=span, role=role, position=position, certain=False)  # type: ignore[arg-type]
    span = source.span(resolved)
    positional, keywords, _, splat = call_arguments(source, resolved)
    shape_node = positional[0] if positional else keywords.get("block_shape")
    map_node = positional[1] if len(positional) > 1 else keywords.get("index_map")
    memory_node = keywords.get("memory_space")
    block_shape = dim_spans = dim_origins = None
    shape_span = None
    if shape_node is not None:
        shape_resolved = scope.resolve(shape_node)
        shape_span = source.span(shape_resolved)
        items = elements(source, scope, shape_resolved)
        if items is not None:
            dims: list[int | str | None] = []
            spans: list[Span] = []
            origins: list[Span | None] = []
            for item in items:
                dims.append(_dim(source, scope, item))
                spans.append(source.span(item))
                origins.append(scope.origin(item))
            block_shape, dim_spans, dim_origins = tuple(dims), tuple(spans), tuple(origins)
    arity, results, map_span = _index_map(source, scope, map_node)
    memory = _memory_space(source, scope.resolve(memory_node)) if memory_node is not None else None
    return BlockSpecInfo(
        span=span,
        block_shape=block_shape,
        block_shape_span=shape_span,
        dim_spans=dim_spans or (),
        index_map_span=map_span,
        index_map_arity=arity,
        index_map_results=results,
        memory_space=memory,
        role=role,  # type: ignore[arg-type]
        position=position,
        dim_origins=dim_origins or (),
        certain=not splat,
    )


def _dim(source: Source, scope: Scope, node: Node) -> int | str | None:
    if node.type == "none":
        return None
    number = scope.value(node)
    if number is not None:
        return number
    resolved = scope.resolve(node)
    if resolved is not None and resolved.type == "none":
        return None
    if resolved is not None and resolved.type == "call" and is_pallas_name(callee(source, resolved), "Squeezed"):
        return None
    if resolved is not None and is_pallas_name(source.qualname(resolved), "squeezed"):
        return None
    return source.node_text(node)


def _index_map(source: Source, scope: Scope, node: Node | None) -> tuple[int | None, int | None, Span | None]:
    if node is None:
        return None, None, None
    resolved = scope.resolve(node)
    if resolved is not None and resolved.type == "identifier":
        defn = source.function(source.node_text(resolved), near=node)
        if defn is None:
            return None, None, source.span(node)
        return _def_arity(source, defn), _def_results(source, defn), source.span(node)
    if resolved is None or resolved.type != "lambda":
        return None, None, source.span(node)
    params = resolved.child_by_field_name("parameters")
    arity: int | None = 0
    for param in params.named_children if params is not None else ():
        if splat_kind(param) or param.type == "keyword_separator":
            arity = None
            break
        if param.type in ("default_parameter",):
            arity = None
            break
        arity = (arity or 0) + 1
    body = resolved.child_by_field_name("body")
    return arity, _result_count(source, body), source.span(resolved)


def _result_count(source: Source, body: Node | None) -> int | None:
    while body is not None and body.type == "parenthesized_expression" and body.named_child_count == 1:
        inner = body.named_children[0]
        if inner.type == "tuple":
            body = inner
            break
        body = inner
    if body is None or body.type not in ("tuple", "expression_list"):
        return None
    items = [c for c in body.named_children if c.type != "comment"]
    if any(c.type in ("list_splat", "parenthesized_list_splat") for c in items):
        return None
    return len(items)


def _def_arity(source: Source, defn: Node) -> int | None:
    params = defn.child_by_field_name("parameters")
    count = 0
    for param in params.named_children if params is not None else ():
        if splat_kind(param) or param.type in ("keyword_separator", "default_parameter", "typed_default_parameter"):
            return None
        count += 1
    return count


def _def_results(source: Source, defn: Node) -> int | None:
    counts = set()
    for node in _own_nodes(defn.child_by_field_name("body")):
        if node.type == "return_statement":
            value = node.named_children[0] if node.named_children else None
            counts.add(_result_count(source, value))
    if len(counts) == 1:
        return counts.pop()
    return None


def _memory_space(source: Source, node: Node | None) -> str | None:
    if node is None:
        return None
    if node.type == "call":
        node = node.child_by_field_name("function")
    text = source.node_text(node)
    tail = text.rsplit(".", 1)[-1]
    return tail or None


def _out_shapes(source: Source, scope: Scope, node: Node | None):
    """(per-output shape: tuple of dims, or the shape expression's text; per-output dtype text)."""
    if node is None:
        return None, None
    resolved = scope.resolve(node)
    items = elements(source, scope, resolved) if resolved is not None and resolved.type in ("list", "tuple") else None
    if items is None:
        if resolved is not None and resolved.type == "call" and _is_array_spec(source, resolved):
            items = [resolved]
        else:
            return None, None
    shapes: list = []
    dtypes: list = []
    for item in items:
        if elements(source, scope, item) is not None:
            return None, None  # a nested pytree of outputs: the leaf count is not certain here
        item = scope.resolve(item)
        if item is None or item.type != "call" or not _is_array_spec(source, item):
            shapes.append(None)
            dtypes.append(None)
            continue
        positional, keywords, _, _ = call_arguments(source, item)
        shape_node = positional[0] if positional else keywords.get("shape")
        dtype_node = positional[1] if len(positional) > 1 else keywords.get("dtype")
        shape_items = elements(source, scope, shape_node) if shape_node is not None else None
        if shape_items is not None:
            shapes.append(tuple(_dim(source, scope, d) for d in shape_items))
        else:
            shapes.append(source.node_text(shape_node) if shape_node is not None else None)
        dtypes.append(dtype_name(source, dtype_node))
    return tuple(shapes), tuple(dtypes)


def _is_array_spec(source: Source, call: Node) -> bool:
    name = callee(source, call) or ""
    tail = callee_tail(source, call) or ""
    return name in ("jax.ShapeDtypeStruct", "jax.core.ShapeDtypeStruct") or tail == "ShapeDtypeStruct"


def dtype_name(source: Source, node: Node | None) -> str | None:
    """``jnp.float32`` / ``jax.numpy.float32`` / ``"float32"`` -> ``"float32"``; else the text."""
    if node is None:
        return None
    if node.type == "string":
        return source.node_text(node).strip("'\"")
    qual = source.qualname(node)
    if qual and (qual.startswith("jax.numpy.") or qual.startswith("numpy.")):
        return qual.rsplit(".", 1)[-1]
    text = source.node_text(node)
    if node.type == "attribute" and text.endswith(".dtype"):
        return text
    return text


def _scratch(source: Source, scope: Scope, node: Node) -> tuple[ScratchInfo, ...] | None:
    items = elements(source, scope, node)
    if items is None:
        return None
    out = []
    for item in items:
        resolved = scope.resolve(item) or item
        kind = "unknown"
        shape = None
        dtype = None
        if resolved.type == "call":
            fn = resolved.child_by_field_name("function")
            text = source.node_text(fn)
            positional, keywords, _, _ = call_arguments(source, resolved)
            if text.endswith(("SemaphoreType.DMA", "SemaphoreType.REGULAR", "SemaphoreType.BARRIER")):
                kind = "SemaphoreType." + text.rsplit(".", 1)[-1]
            else:
                kind = text.rsplit(".", 1)[-1]
            shape_node = positional[0] if positional else keywords.get("shape")
            shape_items = elements(source, scope, shape_node) if shape_node is not None else None
            if shape_items is not None:
                shape = tuple(_dim(source, scope, d) for d in shape_items)
            dtype_node = positional[1] if len(positional) > 1 else keywords.get("dtype")
            dtype = dtype_name(source, dtype_node)
        else:
            text = source.node_text(resolved)
            if "SemaphoreType" in text:
                kind = "SemaphoreType." + text.rsplit(".", 1)[-1]
        out.append(ScratchInfo(span=source.span(item), kind=kind, shape=shape, dtype=dtype))
    return tuple(out)


def _scratch_backend(source: Source, scope: Scope, node: Node | None) -> str | None:
    items = elements(source, scope, node) if node is not None else None
    for item in items or ():
        resolved = scope.resolve(item) or item
        fn = resolved.child_by_field_name("function") if resolved.type == "call" else resolved
        qual = source.qualname(fn) or ""
        if qual.startswith(TPU_MODULES):
            return "tpu"
        if qual.startswith(GPU_MODULES):
            return "gpu"
    return None


def _compiler_params(source: Source, scope: Scope, node: Node | None):
    """(dimension_semantics, its span, backend the params imply)."""
    resolved = scope.resolve(node)
    if resolved is None:
        return None, None, None
    semantics_node = None
    backend = None
    if resolved.type == "call":
        name = callee(source, resolved) or ""
        tail = callee_tail(source, resolved) or ""
        _, keywords, _, _ = call_arguments(source, resolved)
        if tail == "dict":
            mosaic = scope.resolve(keywords.get("mosaic") or keywords.get("mosaic_tpu"))
            if mosaic is not None:
                backend = "tpu"
                semantics_node = _dict_value(source, scope, mosaic, "dimension_semantics")
            elif any(k in keywords for k in _GPU_PARAM_KEYS):
                backend = "gpu"
        elif name.startswith(TPU_MODULES) or tail in ("CompilerParams", "TPUCompilerParams") and not name.startswith(GPU_MODULES):
            backend = "tpu" if not name.startswith(GPU_MODULES) and "gpu" not in name and "triton" not in name else "gpu"
            semantics_node = keywords.get("dimension_semantics") if backend == "tpu" else None
        if name.startswith(GPU_MODULES) or "triton" in name.lower() or "gpu" in tail.lower():
            backend = "gpu"
            semantics_node = None
    elif resolved.type == "dictionary":
        for pair in resolved.named_children:
            if pair.type != "pair":
                continue
            key = source.node_text(pair.child_by_field_name("key")).strip("'\"")
            if key in ("mosaic", "mosaic_tpu"):
                backend = "tpu"
                semantics_node = _dict_value(source, scope, scope.resolve(pair.child_by_field_name("value")), "dimension_semantics")
            elif key in _GPU_PARAM_KEYS:
                backend = "gpu"
    if semantics_node is None:
        return None, None, backend
    items = elements(source, scope, semantics_node)
    if items is None:
        return None, source.span(semantics_node), backend
    values = []
    for item in items:
        item = scope.resolve(item) or item
        if item.type == "string":
            values.append(source.node_text(item).strip("'\"").lower())
        else:
            values.append(source.node_text(item).rsplit(".", 1)[-1].lower())
    return tuple(values), source.span(semantics_node), backend


def _dict_value(source: Source, scope: Scope, node: Node | None, key: str) -> Node | None:
    if node is None:
        return None
    if node.type == "call" and callee_tail(source, node) == "dict":
        _, keywords, _, _ = call_arguments(source, node)
        return keywords.get(key)
    if node.type == "dictionary":
        for pair in node.named_children:
            if pair.type == "pair" and source.node_text(pair.child_by_field_name("key")).strip("'\"") == key:
                return pair.child_by_field_name("value")
    return None


def _operands(source: Source, call: Node) -> tuple[str, ...] | None:
    """The texts of the arguments the pallas_call result is applied to: ``pallas_call(...)(x, y)``."""
    parent = call.parent
    if parent is None or parent.type != "call" or parent.child_by_field_name("function") != call:
        return None
    positional, keywords, _, splat = call_arguments(source, parent)
    if splat or keywords:
        return None
    return tuple(source.node_text(p) for p in positional)
