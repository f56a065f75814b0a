"""What every tier-0 rule is given and builds its findings with: the ``RuleContext`` (source, call
sites, tasks, target chip), ``finding`` / ``replace``, and which call sites the TPU compiler's rules
apply to (``tpu_sites``). The rule modules of this package and ``analysis/rules/apis.py`` import only this
module, so the package's ``__init__`` (which collects them) closes no import circle."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Callable, Iterable

from .. import ast_units
from ..codes import CODES
from ..source import Source
from ..types import Finding, Fix, KernelSite, KernelTask, Span, TextEdit


@dataclass(frozen=True)
class RuleContext:
    source: Source
    sites: tuple[KernelSite, ...]
    tasks: tuple[KernelTask, ...]
    target: str  # chip name, e.g. "v6e"
    scoped_vmem: int | None = None  # the target's default scoped-VMEM limit in bytes, when measured


Rule = Callable[[RuleContext], Iterable[Finding]]


def python_tree(source: Source) -> ast.Module | None:
    """The source's text as Python's ``ast`` (None: Python cannot parse it), built once per source:
    from the units of the same file's previous analysis where unchanged (``ast_units``; tier 0's
    ``analyze`` hands them back when it is done)."""
    memo = source.cache.setdefault("python_ast", {})
    if "module" not in memo:
        if source.state is None:  # no earlier analysis to take units from: one parse of the whole text
            memo["module"] = ast_units.whole(source.text)
        else:
            starts = ast_units.units(source.root, source.data)
            memo["module"] = ast_units.module_for(source.text, source.data, starts, source.state)
    return memo["module"]


def finding(code: str, message: str, span: Span, *, fix: Fix | None = None, kernel: str | None = None,
            related: tuple = ()) -> Finding:
    """A tier-0 finding with the registry's severity for ``code``."""
    return Finding(code=code, message=message, span=span, severity=CODES[code].severity, tier=0,
                   fix=fix, kernel=kernel, related=related, origin="pallasite rules")


def replace(title: str, span: Span, new_text: str) -> Fix:
    return Fix(title=title, edits=(TextEdit(span=span, new_text=new_text),))


def tpu_sites(ctx: RuleContext) -> list[KernelSite]:
    """Call sites the TPU compiler's rules apply to: not known to target a GPU, and certainly not
    run in interpret mode (which does not lower through Mosaic, so tiling etc. do not apply).
    Read once per analysis (six rules ask), kept with the sites it was read from."""
    memo = ctx.source.cache.setdefault("rules", {})
    kept = memo.get("tpu_sites")
    if kept is None or kept[0] is not ctx.sites:
        kept = memo["tpu_sites"] = (ctx.sites, [site for site in ctx.sites
                                                if site.backend != "gpu" and compiled_for_tpu(ctx.source, site)])
    return list(kept[1])


def compiled_for_tpu(source: Source, site: KernelSite) -> bool:
    """False unless ``interpret=`` is absent, False/None, or a parameter whose default is False/None."""
    span = site.keyword_span("interpret")
    if span is None:
        return True
    node = source.node_at(span, "keyword_argument")
    value = node.child_by_field_name("value") if node is not None else None
    if value is None:
        return False
    if value.type in ("false", "none"):
        return True
    if value.type != "identifier":
        return False
    name = source.node_text(value)
    fn = node.parent
    while fn is not None and fn.type != "function_definition":
        fn = fn.parent
    params = fn.child_by_field_name("parameters") if fn is not None else None
    for param in params.named_children if params is not None else ():
        if param.type in ("default_parameter", "typed_default_parameter") and \
                source.node_text(param.child_by_field_name("name")) == name:
            default = param.child_by_field_name("value")
            return default is not None and default.type in ("false", "none")
    return False
