"""Functions that stand for ``pallas_call``: wrappers forwarding to it, read as source (no JAX).

Projects often launch kernels through their own wrapper (``def my_pallas_call(kernel, **kw):
return pl.pallas_call(kernel, **kw)``; tokamax's ``block.pallas_call``;
``custom_buffered_pallas_call``). A call of such a function with pallas_call's keywords is a
pallas_call site for tier 0 (``analysis/sites.py`` reads it like one):

- a function of this file whose body calls ``pallas_call`` forwarding its own parameters (a
  ``**kwargs`` splat, or keywords passed through by the same name: ``grid=grid``);
- an imported (or attribute) callee whose name ends in ``pallas_call``, called with a kernel and
  pallas_call keywords (``out_shape`` and one of ``grid``/``grid_spec``/``in_specs``/``out_specs``).
"""

from __future__ import annotations

from tree_sitter import Node

from .resolve import call_arguments, callee_tail, is_pallas_name
from .source import Source, walk

SITE_KEYWORDS = ("grid", "grid_spec", "in_specs", "out_specs")


def forwarding_wrappers(source: Source) -> frozenset[str]:
    """Names of this file's functions that forward their parameters to ``pallas_call``."""
    cached = source.cache.setdefault("wrappers", {})
    if "names" in cached:
        return cached["names"]
    names = set()
    # a call of pallas_call names it, or an alias imported for it: a function whose text has
    # neither calls no pallas_call (checked first: reading every body took 5 ms on a large file)
    spelled = (b"pallas_call", *(alias.encode() for alias, full in source.imports.items()
                                 if full.rsplit(".", 1)[-1] == "pallas_call"))
    for name, defs in source.functions.items():
        for defn in defs:
            text = source.data[defn.start_byte:defn.end_byte]
            if any(word in text for word in spelled) and _forwards(source, defn):
                names.add(name)
    cached["names"] = frozenset(names)
    return cached["names"]


def _forwards(source: Source, defn: Node) -> bool:
    params = defn.child_by_field_name("parameters")
    if params is None:
        return False
    own = set()
    splat = None
    for p in params.named_children:
        if p.type == "dictionary_splat_pattern":
            ident = next((c for c in p.named_children if c.type == "identifier"), None)
            splat = source.node_text(ident) if ident is not None else None
        elif p.type == "identifier":
            own.add(source.node_text(p))
        else:
            ident = p.child_by_field_name("name") or next((c for c in p.named_children if c.type == "identifier"), None)
            if ident is not None:
                own.add(source.node_text(ident))
    if splat is None and not own.intersection(SITE_KEYWORDS):
        return False  # nothing of its own to forward
    body = defn.child_by_field_name("body")
    for node in walk(body) if body is not None else ():
        if node.type != "call" or not is_pallas_name(source.qualname(node.child_by_field_name("function")), "pallas_call"):
            continue
        args = node.child_by_field_name("arguments")
        for child in args.named_children if args is not None else ():
            if child.type == "dictionary_splat" and splat and source.node_text(child).lstrip("*") == splat:
                return True
        _, keywords, _, _ = call_arguments(source, node)
        passed = [k for k in SITE_KEYWORDS if k in keywords and source.node_text(keywords[k]) == k and k in own]
        if passed:
            return True
    return False


def is_wrapper_call(source: Source, call: Node) -> bool:
    """Whether ``call`` launches a kernel through a pallas_call wrapper (see the module docstring)."""
    tail = callee_tail(source, call)
    if not tail:
        return False
    wrappers = forwarding_wrappers(source)
    if tail not in wrappers and not tail.endswith("pallas_call"):
        return False
    fn = call.child_by_field_name("function")
    if is_pallas_name(source.qualname(fn), "pallas_call"):
        return False  # the real one: sites.py reads it anyway
    positional, keywords, _, _ = call_arguments(source, call)
    has_kernel = bool(positional) or "kernel" in keywords
    if tail in wrappers and fn is not None and fn.type == "identifier":
        return has_kernel and any(k in keywords for k in SITE_KEYWORDS + ("out_shape",))
    if tail.endswith("pallas_call"):
        return has_kernel and "out_shape" in keywords and any(k in keywords for k in SITE_KEYWORDS)
    return False
