"""Every ``pallas_call`` in a file, read as a ``KernelSite``: kernel, grid, BlockSpecs, scratch,
compiler params and the spans of each, resolved through literals, module constants, the entry's
tunable defaults and single local assignments.

Anything that cannot be resolved statically is recorded as ``None`` (or as its source text for a
single dim); nothing here raises on unusual code.
"""

from __future__ import annotations

import dataclasses
import warnings

from tree_sitter import Node

from . import site_memo
from .blockspecs import block_spec, dim
from .resolve import (MAX_DEPTH, Scope, call_arguments, callee, callee_tail, elements, helper_scope,
                      is_pallas_name, is_partial, param_name, scope_for, splat_kind)
from .source import GPU_MODULES, TPU_MODULES, Source, calls_holding, outermost_function
from .types import BlockSpecInfo, KernelSite, ScratchInfo
from .wrappers import forwarding_wrappers, is_wrapper_call

# compiler_params dict keys that only GPU backends take (nested per backend, or Triton's flat form)
_GPU_PARAM_KEYS = ("triton", "mosaic_gpu", "num_warps", "num_stages")


# ---------------------------------------------------------------------------- sites


def find_sites(source: Source) -> tuple[KernelSite, ...]:
    """Every pallas_call in the file, in source order. A file read before (``source.key``) keeps
    the sites whose statements and definitions did not change (site_memo.py)."""
    memo = site_memo.begin(source, forwarding_wrappers(source))
    try:
        return _find_sites(source, memo)
    finally:
        if memo is not None:
            memo.finish()


def _find_sites(source: Source, memo: "site_memo.SiteMemo | None") -> tuple[KernelSite, ...]:
    sites: list[KernelSite] = []
    for node in _candidates(source):
        fn = node.child_by_field_name("function")
        if fn is not None and not _may_name(source, fn, ("pallas_call", "partial")) and is_wrapper_call(source, node):
            pass  # a wrapper forwarding to pallas_call (analysis/wrappers.py): read like one
        elif fn is None or not _may_name(source, fn, ("pallas_call", "partial")):
            continue
        elif not is_pallas_name(source.qualname(fn), "pallas_call") and is_wrapper_call(source, node):
            pass  # ``block.pallas_call(...)``: a project's own pallas_call
        elif not is_pallas_name(source.qualname(fn), "pallas_call"):
            if not is_partial(source, node):
                continue
            arguments = node.child_by_field_name("arguments")
            first = arguments.named_children[0] if arguments is not None and arguments.named_children else None
            if first is None or not is_pallas_name(source.qualname(first), "pallas_call"):
                continue
            fn = first  # functools.partial(pl.pallas_call, ...), usually a decorator on the kernel
        try:
            sites.append(_read_or_reuse(source, node, memo))
        except Exception as err:  # noqa: BLE001 - an unreadable call is recorded bare, never raised
            warnings.warn(f"pallasite could not read the pallas_call at line {node.start_point[0] + 1} "
                          f"({type(err).__name__}: {err}); recorded without details", RuntimeWarning, stacklevel=2)
            sites.append(KernelSite(kernel_name=None, span=source.span(node), call_span=source.span(fn),
                                    backend=file_backend(source)))
    return tuple(sites)


def _read_or_reuse(source: Source, call: Node, memo: "site_memo.SiteMemo | None") -> KernelSite:
    """The site of ``call``: kept from an earlier analysis when nothing it read changed, else read."""
    if memo is None:
        return read_site(source, call)
    kept = memo.get(call)
    if kept is not None:
        return kept
    source.lookups = set()
    try:
        site = read_site(source, call)
        memo.put(call, site, source.lookups)
    finally:
        source.lookups = None
    return site


def _candidates(source: Source) -> list[Node]:
    """The calls (in source order) whose text holds a name that can call pallas_call below: the
    words ``pallas_call`` (``x.pallas_call``, ``my_pallas_call``) and ``partial``, this file's
    forwarding wrappers, and the names pallas_call and partial were imported as. Every call the loop
    above takes is among them: its callee's last name lies within its bytes. Found with a search of
    the text in C and a bisect per call (testing each of splash attention's 463 calls in Python
    was half of reading its sites)."""
    words = {"pallas_call", "partial", *forwarding_wrappers(source)}
    words.update(alias for alias, full in source.imports.items()
                 if full.rsplit(".", 1)[-1] in ("pallas_call", "partial"))
    return calls_holding(source, words)


def _may_name(source: Source, fn: Node, tails: tuple[str, ...]) -> bool:
    """A cheap first test before resolving ``fn`` through the imports: ``x.y.pallas_call`` can
    only name pallas_call if its last attribute is spelled so; a bare name only if it was
    imported as one of ``tails`` (under any alias)."""
    if fn.type == "attribute":
        attr = fn.child_by_field_name("attribute")
        return attr is not None and source.node_text(attr) in tails
    if fn.type == "identifier":
        imported = source.imports.get(source.node_text(fn))
        return imported is not None and imported.rsplit(".", 1)[-1] in tails
    return False


def read_site(source: Source, call: Node) -> KernelSite:
    """The KernelSite of ``pallas_call(kernel, ...)`` or of ``functools.partial(pallas_call, ...)``
    (as a decorator on the kernel, or with the kernel as its next argument)."""
    scope = scope_for(source, call)
    fn = call.child_by_field_name("function")
    positional, keywords, keyword_nodes, _ = call_arguments(source, call)
    partial_form = is_partial(source, call)
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
    if node is not None and node.type == "call" and is_partial(source, node):
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
            names.append("*" + source.node_text(param_name(param)))
            break
        if splat_kind(param) == "**" or param.type == "positional_separator":
            continue
        name_node = param_name(param)
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
    """The leaves of in_specs/out_specs (nested lists/tuples flattened, helper functions of this
    file followed into their ``return``), or None if not literal."""
    if node is None:
        return None
    leaves: list[tuple[Node, Scope, Node | None]] = []  # (spec node, its scope, helper call or None)

    def expand(n: Node, sc: Scope, via: Node | None, top: bool, depth: int) -> bool:
        """Add the leaves ``n`` stands for. False only for a top-level list whose items are not
        certain (a nested one becomes a single leaf that ``block_spec`` marks uncertain)."""
        resolved = sc.resolve(n)
        if resolved is not None and resolved.type == "call" and depth < MAX_DEPTH and \
                not is_pallas_name(callee(source, resolved), "BlockSpec"):
            helper = helper_scope(source, sc, resolved)
            if helper is not None:
                mark = len(leaves)
                if expand(helper[1], helper[0], via or resolved, True, depth + 1):
                    return True
                del leaves[mark:]
        if resolved is not None and resolved.type in ("list", "tuple", "expression_list", "binary_operator") \
                and depth < MAX_DEPTH:
            items = elements(source, sc, resolved)
            if items is not None:
                for item in items:
                    expand(item, sc, via, False, depth + 1)
                return True
            if top:
                return False
        leaves.append((n, sc, via))
        return True

    try:
        if not expand(node, scope, None, True, 0):
            return None
    finally:
        del expand  # the recursive closure holds itself through its cell: break that cycle
    specs = []
    for position, (leaf, leaf_scope, via) in enumerate(leaves):
        spec = block_spec(source, leaf_scope, leaf, role, position)
        if via is not None:
            spec = dataclasses.replace(spec, via_span=source.span(via))
        specs.append(spec)
    return tuple(specs)


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
            shapes.append(tuple(dim(source, scope, d) for d in shape_items))
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
                shape = tuple(dim(source, scope, d) for d in shape_items)
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
