"""Tier-0 rule PLS014: said once when the file launches kernels tier 0 cannot read.

A file that uses Pallas but has no ``pallas_call`` site tier 0 can read (none written here, and no
call of a wrapper it recognises, ``analysis/wrappers.py``) while it imports a kernel from a Pallas
kernel module and calls it, or calls something named like a pallas_call wrapper, gets one
information finding at the first such call: the source rules did not look at those kernels, rather than
silently finding nothing. The compiler tiers still check them through the task's entry.
"""

from __future__ import annotations

from typing import Iterator

from ..resolve import callee_tail
from ..types import Finding
from .context import RuleContext, finding

# Module paths that hold kernels rather than the Pallas API itself.
_KERNEL_MODULES = ("jax.experimental.pallas.ops", "tokamax", "jax._src.pallas.ops")


def unreadable_kernels(ctx: RuleContext) -> Iterator[Finding]:
    if ctx.sites:
        return
    source = ctx.source
    for node in source.calls:
        tail = callee_tail(source, node)
        if tail and tail.endswith("pallas_call"):
            yield finding("PLS014", f"{source.node_text(node.child_by_field_name('function'))}(...) launches a kernel "
                          "through a pallas_call wrapper whose arguments tier 0 cannot read: the source rules did not "
                          "check it (the compiler tiers do, through the task's entry).", source.span(node))
            return
    kernels = {local: dotted for local, dotted in source.imports.items() if dotted.startswith(_KERNEL_MODULES)}
    for node in source.calls:  # the first call of an imported kernel (a re-export alone says nothing)
        fn = node.child_by_field_name("function")
        root = fn
        while root is not None and root.type == "attribute":
            root = root.child_by_field_name("object")
        name = source.node_text(root) if root is not None and root.type == "identifier" else None
        tail = callee_tail(source, node) or ""
        if name in kernels and not tail[:1].isupper():  # a class (BlockSizes(...)) is configuration, not a kernel
            yield finding("PLS014", f"{source.node_text(fn)}(...) runs a kernel from {kernels[name]}: tier 0 reads only "
                          "the pallas_calls written in this file, and this file has none it can read (the compiler "
                          "tiers check the imported kernel through the task's entry).", source.span(node))
            return


RULES = (unreadable_kernels,)
