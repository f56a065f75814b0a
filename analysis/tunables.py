"""Tunables: the values in a kernel file autotuning may change, found by reading the source, and
the edit that writes a chosen configuration back.

Found, in this order (a name found twice is kept once, the first way):
1. keyword-only ``int`` parameters of the task's entry (``def matmul(x, y, *, bm: int = 256)``);
2. entries of a module-level ``TUNED_PARAMS = {"block_rows": 64, ...}`` dict (JAXBench style); an
   entry holding a list or tuple of ints (``"block_shape": [1024, 2048]``) is one tunable per
   element, named ``block_shape[0]``, ``block_shape[1]`` (the worker puts each back in its place);
3. module-level int constants used in a block shape: inside the first argument of a
   ``BlockSpec(...)`` or the shape of a ``VMEM(...)`` scratch (``BLOCK_ROWS = 16``), except those
   named for the chip's fixed geometry or a bound (``NUM_LANES``, ``NUM_SUBLANES``, ``MXU_SIZE``,
   ``MIN_BLOCK_SIZE``, ``MAX_...``: ``hardware_constant``): changing them changes no choice, only
   breaks the kernel's own assumptions. Declared in the search space (``TUNABLES``), they are kept.
4. block sizes the file passes to a library it imports, as int literals of keyword arguments named like
   block sizes (``block*``, ``tile*``, ``tiling``, ``num_*_per_block``, ``bq``/``bkv``/``tm``...):
   ``BlockSizes(block_q=512, block_k=512)`` for jax's flash attention, ``gmm(..., tiling=(128, 128, 128))``
   (one tunable per element). Named by the keyword, or ``Callee.keyword`` where two callees take the same
   one; the worker applies them by calling the library's callable with that keyword changed (``kind``
   "call"), so a keyword written in two calls of one callee is no tunable (both would move together).
Candidate values come from the declared search space (``TUNABLES`` / ``NAME_tunables`` in the
file, see docs/task-convention.md, or the ``tunables`` setting, which wins); a tunable without
declared candidates gets powers of two around its default (``default_candidates``).

``apply_config`` returns the minimal edit: one ``TextEdit`` per changed value, replacing only the
default's literal. Never imports JAX.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace

from tree_sitter import Node

from .resolve import call_arguments, callee_tail
from .source import Source, string_keyed_pairs, walk
from .tasks import _candidates, _module_assignments, find_tasks
from .types import BLOCK_SIZE_NAME, KernelTask, TextEdit, Tunable

TUNED_PARAMS = "TUNED_PARAMS"
_SHAPE_CALLS = ("BlockSpec", "VMEM")
_GEOMETRY_WORDS = ("LANE", "LANES", "SUBLANE", "SUBLANES", "MXU")
_BOUND_WORDS = ("MIN", "MAX")


def hardware_constant(name: str) -> bool:
    """Whether a constant's name says it is the chip's geometry or a bound, not a choice: a word of it
    (split at ``_``, any case) is LANE(S), SUBLANE(S) or MXU, or it starts with MIN or MAX."""
    words = [w for w in name.upper().split("_") if w]
    return bool(words) and (words[0] in _BOUND_WORDS or any(w in _GEOMETRY_WORDS for w in words))


def find_tunables(source: Source, path: str = "", entry: str | None = None,
                  declared: Mapping[str, Sequence[int]] | None = None) -> tuple[Tunable, ...]:
    """Every tunable of the file (or of the task whose entry is ``entry``), with candidates."""
    tasks = find_tasks(source, path)
    task: KernelTask | None = next((t for t in tasks if entry is None or t.entry == entry), None)
    assignments = _module_assignments(source)
    space: dict[str, tuple[int, ...]] = {}
    space.update(_candidates(source, assignments.get("TUNABLES")))
    if task is not None:
        space.update(_candidates(source, assignments.get(f"{task.entry}_tunables")))
    space.update({k: tuple(int(v) for v in values) for k, values in (declared or {}).items()})
    found: dict[str, Tunable] = {}
    for t in task.tunables if task is not None else ():
        found.setdefault(t.name, t)
    for t in _tuned_params(source, assignments.get(TUNED_PARAMS)):
        found.setdefault(t.name, t)
    for t in _block_constants(source):
        if t.name in space or not hardware_constant(t.name):
            found.setdefault(t.name, t)
    for t in _call_keywords(source):
        found.setdefault(t.name, t)
    return tuple(_with_candidates(t, space.get(t.name)) for t in found.values())


def _with_candidates(t: Tunable, declared: Sequence[int] | None) -> Tunable:
    candidates = tuple(declared) if declared else (t.candidates or default_candidates(t.default))
    return Tunable(t.name, t.default, candidates, t.span, t.kind, t.value_span, t.callee)


def default_candidates(default: int, spread: int = 2) -> tuple[int, ...]:
    """Powers of two times the default, from default / 2**spread to default * 2**spread."""
    values = {default}
    for e in range(1, spread + 1):
        values.add(default * 2 ** e)
        if default % 2 ** e == 0:
            values.add(default // 2 ** e)
    return tuple(sorted(v for v in values if v >= 1))


def _tuned_params(source: Source, node: Node | None) -> list[Tunable]:
    out = []
    for name, value in string_keyed_pairs(source, node):
        if value.type in ("list", "tuple"):  # one tunable per int literal, named by its index
            items = [v for v in value.named_children if v.type != "comment"]
            literals = [(f"{name}[{i}]", v) for i, v in enumerate(items) if v.type == "integer"]
        else:
            literals = [(name, value)] if value.type == "integer" else []
        for tunable_name, literal in literals:
            number = source.int_value(literal)
            if number is not None:
                out.append(Tunable(tunable_name, number, (), source.span(value.parent), "tuned_params", source.span(literal)))
    return out


def _block_constants(source: Source) -> list[Tunable]:
    """Module-level int constants (literal values) named inside a block or scratch shape."""
    used: list[str] = []
    for call in source.calls:
        if callee_tail(source, call) not in _SHAPE_CALLS:
            continue
        positional, keywords, _, _ = call_arguments(source, call)
        shape = positional[0] if positional else keywords.get("block_shape") or keywords.get("shape")
        for node in walk(shape) if shape is not None else ():
            if node.type == "identifier" and source.node_text(node) not in used:
                used.append(source.node_text(node))
    out = []
    assignments = _module_assignments(source)
    for name in used:
        constant = source.constants.get(name)
        value = assignments.get(name)
        if constant is None or value is None or value.type != "integer" or name in source.rebound_anywhere:
            continue
        out.append(Tunable(name, constant.value, (), source.span(value.parent), "constant", source.span(value)))
    return out


_NOT_LIBRARY = ("jax.numpy", "jax.lax", "jax.random", "numpy", "jax.nn")  # and Pallas itself, but its ops/


def _call_keywords(source: Source) -> list[Tunable]:
    """Int literals of block-size keywords in calls of a name imported from a library (see the module
    docstring, item 4): ``BlockSizes(block_q=512)``, ``tiling=(128, 128, 128)``."""
    found: list[Tunable] = []
    for call in source.calls:
        fn = call.child_by_field_name("function")
        if fn is None or fn.type != "identifier":
            continue  # ``fa.BlockSizes(...)``: the worker would have to patch the library itself
        callee = source.node_text(fn)
        imported = source.imports.get(callee)
        if imported is None or imported.startswith(_NOT_LIBRARY) or (
                imported.startswith("jax.experimental.pallas") and ".ops." not in imported):
            continue
        _, keywords, nodes, _ = call_arguments(source, call)
        for keyword, value in keywords.items():
            if not BLOCK_SIZE_NAME.search(keyword):
                continue
            items = [v for v in value.named_children if v.type != "comment"] if value.type == "tuple" else [value]
            for i, item in enumerate(items):
                number = source.int_value(item) if item.type == "integer" else None
                if number is None or number < 1:
                    continue
                name = f"{keyword}[{i}]" if value.type == "tuple" else keyword
                found.append(Tunable(name, number, (), source.span(nodes[keyword]), "call", source.span(item), callee))
    # the worker changes the keyword in every call of the callee: one written in two calls cannot move alone
    per_call = Counter((t.callee, t.name) for t in found)
    found = [t for t in found if per_call[(t.callee, t.name)] == 1]
    counts = Counter(t.name for t in found)
    return [replace(t, name=f"{t.callee}.{t.name}") if counts[t.name] > 1 else t for t in found]


def apply_config(tunables: Sequence[Tunable], config: Mapping[str, int]) -> tuple[TextEdit, ...]:
    """The minimal edit writing ``config`` into the file: each changed default's literal replaced.

    ValueError names a config key that is not a tunable or has no literal to replace."""
    by_name = {t.name: t for t in tunables}
    edits = []
    for name, value in sorted(config.items()):
        t = by_name.get(name)
        if t is None:
            raise ValueError(f"{name!r} is not a tunable of this file (known: {', '.join(by_name) or 'none'})")
        if int(value) == t.default:
            continue
        if t.value_span is None:
            raise ValueError(f"tunable {name!r} has no literal default to replace")
        edits.append(TextEdit(t.value_span, str(int(value))))
    return tuple(edits)


def kinds(tunables: Sequence[Tunable]) -> dict[str, str]:
    """name -> how the worker applies it ("keyword", "constant", "tuned_params", "call:<callee>")."""
    return {t.name: f"call:{t.callee}" if t.kind == "call" else t.kind for t in tunables}

