"""Tier 3's findings as raw records (the ``runner/errors.py`` format plus ``code``/``tier``/``origin``).

Each record names the place itself, as 1-based ``mentions`` in the user's file, so the client-side
locator (``engine/findings/locate.py``) only has to turn lines into spans: the racing access the interpreter
names, the kernel's async copy or the in_specs entry behind an out-of-bounds read, the
``dimension_semantics`` or ``scratch_shapes`` keyword behind wrong numbers (found with ``ast`` in
the checked text), or the pallas_call when nothing finer is known.
"""

from __future__ import annotations

import ast
import inspect
import math
import os
import re
from typing import Any

from ...analysis.types import NAN_COMPUTED
from .. import errors as errors_mod
from . import interpret_places as places
from . import missing_places
from .interpret_compare import blocks_hit
from ..intercept import RecordedCall, block_shapes, dimension_semantics

ORIGIN = "TPU interpreter"


class CallSites:
    """Lines of a pallas_call's keyword arguments, read from the user's source with ``ast``."""

    def __init__(self, source: str, path: str):
        self.path = path
        self.traced: frozenset[int] | None = None  # the lines the kernels were traced from, once known
        try:
            self.tree = ast.parse(source)
        except SyntaxError:
            self.tree = None

    def keyword_line(self, call_line: int | None, *names: str) -> tuple[int, int] | None:
        """(line, column) 1-based/0-based of keyword ``names[0]`` (then nested ``names[1:]``)."""
        if self.tree is None or call_line is None:
            return None
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Call) and node.lineno <= call_line <= (node.end_lineno or node.lineno):
                func = node.func
                callee = func.func if isinstance(func, ast.Call) else func
                if not (isinstance(callee, (ast.Attribute, ast.Name)) and _name_of(callee) == "pallas_call"):
                    continue
                call = func if isinstance(func, ast.Call) else node
                found = _find_keyword(call, names)
                if found is not None:
                    return found
        return None


    def element_line(self, call_line: int | None, keyword: str, index: int) -> tuple[int, int] | None:
        """(line, column) of element ``index`` of a list/tuple keyword argument (e.g. in_specs[1])."""
        if self.tree is None or call_line is None or index < 0:
            return None
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Call) and node.lineno <= call_line <= (node.end_lineno or node.lineno):
                callee = node.func.func if isinstance(node.func, ast.Call) else node.func
                if not (isinstance(callee, (ast.Attribute, ast.Name)) and _name_of(callee) == "pallas_call"):
                    continue
                call = node.func if isinstance(node.func, ast.Call) else node
                for kw in call.keywords:
                    if kw.arg == keyword and isinstance(kw.value, (ast.List, ast.Tuple)) and index < len(kw.value.elts):
                        element = kw.value.elts[index]
                        return element.lineno, element.col_offset
        return None


    def semantics_entry(self, call_line: int | None, axis: int) -> tuple[int, int] | None:
        """(line, column) of entry ``axis`` of the call's ``dimension_semantics``, following a name
        bound once in the function or module (``compiler_params=params``, ``dimension_semantics=sem``)
        to the tuple; None when the entry is not written out."""
        call = self._pallas_call(call_line)
        if call is None or axis < 0:
            return None
        scope = self._scope_of(call)
        value = _keyword_value(call, "compiler_params")
        value = _bound(value, scope, self.tree)
        if value is None:
            return None
        sem = None
        for sub in ast.walk(value):
            if isinstance(sub, ast.keyword) and sub.arg == "dimension_semantics":
                sem = sub.value
                break
            if isinstance(sub, ast.Dict):
                for key, item in zip(sub.keys, sub.values):
                    if isinstance(key, ast.Constant) and key.value == "dimension_semantics":
                        sem = item
        return _entry_at(_bound(sem, scope, self.tree), axis)

    def grid_entry(self, call_line: int | None, axis: int) -> tuple[int, int] | None:
        """(line, column) of entry ``axis`` of the call's ``grid`` (its own keyword, or its grid spec's),
        following a name bound once in the function or module; None when not written out."""
        call = self._pallas_call(call_line)
        if call is None or axis < 0:
            return None
        scope = self._scope_of(call)
        grid = _keyword_value(call, "grid")
        if grid is None:
            spec = _bound(_keyword_value(call, "grid_spec"), scope, self.tree)
            grid = _keyword_value(spec, "grid") if isinstance(spec, ast.Call) else None
        return _entry_at(_bound(grid, scope, self.tree), axis)

    def _pallas_call(self, call_line: int | None) -> ast.Call | None:
        if self.tree is None or call_line is None:
            return None
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Call) and node.lineno <= call_line <= (node.end_lineno or node.lineno):
                callee = node.func.func if isinstance(node.func, ast.Call) else node.func
                if isinstance(callee, (ast.Attribute, ast.Name)) and _name_of(callee) == "pallas_call":
                    return node.func if isinstance(node.func, ast.Call) else node
        return None

    def _scope_of(self, node: ast.AST) -> ast.AST | None:
        """The innermost function holding ``node`` (by lines), else the module."""
        best = self.tree
        for fn in ast.walk(self.tree) if self.tree is not None else ():
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                    fn.lineno <= node.lineno <= (fn.end_lineno or fn.lineno):
                if best is self.tree or fn.lineno >= best.lineno:
                    best = fn
        return best


def _entry_at(node: ast.AST | None, axis: int) -> tuple[int, int] | None:
    """(line, column) of entry ``axis`` of a tuple or list written out (no ``*``), else None."""
    if isinstance(node, (ast.Tuple, ast.List)) and axis < len(node.elts) and \
            not any(isinstance(e, ast.Starred) for e in node.elts):
        return node.elts[axis].lineno, node.elts[axis].col_offset
    return None


def _keyword_value(call: ast.Call, name: str) -> ast.expr | None:
    return next((kw.value for kw in call.keywords if kw.arg == name), None)


def _bound(value: ast.expr | None, scope: ast.AST | None, tree: ast.AST | None) -> ast.expr | None:
    """``value``, or what a bare name is assigned once in ``scope`` (then at the module's top level)."""
    if not isinstance(value, ast.Name):
        return value
    for where in (scope, tree):
        if where is None:
            continue
        found = [n.value for n in ast.walk(where) if isinstance(n, ast.Assign) and len(n.targets) == 1
                 and isinstance(n.targets[0], ast.Name) and n.targets[0].id == value.id]
        if len(found) == 1:
            return found[0]
        if found:
            return None
    return None


def _name_of(node: ast.AST) -> str:
    return node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")


def _find_keyword(node: ast.AST, names: tuple[str, ...]) -> tuple[int, int] | None:
    for sub in ast.walk(node):
        if isinstance(sub, ast.keyword) and sub.arg == names[0]:
            if len(names) == 1:
                return sub.lineno, sub.col_offset
            return _find_keyword(sub.value, names[1:]) or (sub.lineno, sub.col_offset)
    return None


def first_user_call(calls: list[RecordedCall], path: str, entry: Any = None) -> RecordedCall | None:
    """The first call made from the checked file; for a backward-pass entry (``entry.forward_kernels``, see
    runner/tasks/tasks_backward.py) the first of another kernel than its forward's, which its own task checks."""
    skip = getattr(entry, "forward_kernels", frozenset()) if entry is not None else frozenset()
    target = os.path.realpath(path)
    own = [c for c in calls if c.kernel_name not in skip] if skip else []
    for group in ((own, calls) if own else (calls,)):
        for call in group:
            if call.file and os.path.realpath(call.file) == target:
                return call
    return calls[0] if calls else None


def _base(code: str, sentence: str, path: str, lines: list[tuple], severity: str = "error") -> dict[str, Any]:
    """A tier-3 record at ``lines``: (line, column) or (line, column, note) places, the first the
    finding's position, the noted ones after it related places."""
    return {
        "stage": "tier 3", "tier": 3, "code": code, "origin": ORIGIN, "severity": severity,
        "type": code, "sentence": sentence, "message": sentence, "detail": None, "frames": [],
        "mentions": _mentions(lines),
        "refs": [], "vmem": None, "mosaic_codes": [], "syntax": None,
    }


def _mentions(places: list[tuple]) -> list[dict[str, Any]]:
    out = []
    for place in places:
        line, col = place[0], place[1]
        if line is None:
            continue
        mention: dict[str, Any] = {"line": line, "column": col}
        if len(place) > 2 and place[2]:
            mention["note"] = place[2]
        out.append(mention)
    return out


def _call_line(call: RecordedCall | None, path: str) -> int | None:
    if call is None or not call.file or os.path.realpath(call.file) != os.path.realpath(path):
        return None
    return call.line


_FRAME = re.compile(r"(?P<kind>read|write) of (?P<buf>\([^)]*\))\[(?P<range>.*?)\] from (?P<who>\d+), (?P<core>\d+),? "
                    r"(?:(?P<where>\S+?):(?P<line>\d+):(?P<col>\d+)(?: \((?P<fn>[^)]*)\))?|pallas_call)")


def race_record(report: str, call: RecordedCall | None, sites: CallSites, path: str) -> dict[str, Any]:
    """PLS301 from one "RACE DETECTED" report: at the core's own access (the other one related).

    Accesses the interpreter attributes to ``pallas_call`` itself are the pipeline's block copies;
    two cores writing one output block that way means the out_specs index_map sends steps of a
    "parallel" axis (split between cores) to the same block: marked at ``out_specs``.
    """
    accesses = []
    for m in _FRAME.finditer(report):
        where = m.group("where")
        in_file = where is not None and os.path.realpath(where) == os.path.realpath(path)
        accesses.append({"kind": m.group("kind"), "dma": int(m.group("who")) >= 100, "core": int(m.group("core")),
                         "line": int(m.group("line")) if in_file else None,
                         "col": int(m.group("col")) if in_file else None,
                         "pipeline": where is None, "buffer": m.group("buf"), "range": m.group("range")})
    accesses.sort(key=lambda a: (a["dma"], a["line"] is None))
    call_line = _call_line(call, path)
    if len(accesses) >= 2 and all(a["pipeline"] for a in accesses[:2]) and accesses[0]["core"] != accesses[1]["core"]:
        a, b = sorted(accesses[:2], key=lambda x: x["core"])
        window = ", ".join(f"{x}:{y}" for x, y in _SLICE.findall(a["range"])) or a["range"]
        sentence = (f"race between TensorCores: core {a['core']} and core {b['core']} both {a['kind']} [{window}] of "
                    f"{_buffer_name(a['buffer'])} — on chips with two TensorCores (v4, v5p; tier 3 simulates two) the steps "
                    "of a \"parallel\" grid axis are split between the cores, "
                    "and the out_specs index_map sends several of them to the same output block; make that axis "
                    "\"arbitrary\" or give each step its own block")
        spot = sites.keyword_line(call_line, "out_specs")
        axis = shared_block_axis(call) if call is not None else None
        entry = sites.semantics_entry(call_line, axis) if axis is not None else None
        if entry is not None:  # the parallel axis whose steps share a block: its entry is what to change
            sentence += f" (grid axis {axis}: the out_specs index_map does not depend on it)"
            places_ = [entry] + ([(spot[0], spot[1], "the out_specs")] if spot else [])
        else:
            places_ = [spot or (call_line, None)]
        rec = _base("PLS301", sentence, path, places_)
        rec["detail"] = report
        return rec
    if len(accesses) >= 2:
        a, b = accesses[0], accesses[1]
        who_b = "an async copy (DMA)" if b["dma"] else f"core {b['core']}"
        line_b = f" at line {b['line']}" if b["line"] else ""
        who_a = "an async copy (DMA)" if a["dma"] else f"core {a['core']}"
        sentence = (f"DMA race: this {a['kind']} of {_buffer_name(a['buffer'])} by {who_a} is not ordered "
                    f"with the {b['kind']} by {who_b}{line_b}")
    else:
        sentence = "DMA race detected by the TPU interpreter"
    lines = [(x["line"], x["col"] - 1 if x["col"] else None) for x in accesses if x["line"]]
    rec = _base("PLS301", sentence, path, lines or [(call_line, None)])
    rec["detail"] = report
    return rec


def dma_order_record(problem: dict[str, Any], copies: list[int], starts: list[int], path: str) -> dict[str, Any]:
    """PLS301 when the result depends on when async copies complete (no racing line named).

    Marked: the second ``.start()`` of the kernel (the first copy issued while another may still be
    in flight), else its first async copy.
    """
    how = (f"max abs difference {problem['max_abs']:.3g}" if problem["kind"] == "mismatch"
           else "some blocks come back NaN")
    sentence = ("DMA race: the result depends on when the async copies complete — with each DMA finishing as soon as "
                f"it starts instead of at its wait, output {problem.get('index') or 0} changes ({how}). Two copies "
                f"probably write one buffer, or a buffer is reused before its copy is waited on (async copies at "
                f"lines {', '.join(map(str, copies))}); the interpreter's race detector did not name a line")
    anchor = starts[1] if len(starts) >= 2 else copies[0]
    return _base("PLS301", sentence, path, [(anchor, None)] + [(line, None) for line in copies if line != anchor])


def _buffer_name(buf: str) -> str:
    space = buf.strip("()").split(",")[0].strip(" '\"")
    return {"vmem": "a VMEM buffer", "smem": "an SMEM buffer", "hbm": "an HBM buffer"}.get(space, "a buffer")


OUT_OF_BOUNDS = re.compile(r"Out-of-bounds (?:read|write|swap|block index)[^\n]*")  # jax's interpreter's words


def exception_record(exc: BaseException, call: RecordedCall | None, sites: CallSites, path: str,
                     noise: str = "") -> dict[str, Any]:
    """The record of an exception a tier-3 run raised; ``noise`` is what jax printed meanwhile (its
    callback threads print the user's stack for an out-of-bounds read)."""
    rec = errors_mod.record(exc, path, stage="tier 3")
    full = str(exc) + "\n" + "\n".join(str(getattr(e, "args", "")) for e in (exc.__cause__, exc.__context__) if e)
    m = OUT_OF_BOUNDS.search(full)
    rec.update(tier=3, origin=ORIGIN, severity="error")
    if m:
        rec["code"] = "PLS302"
        what = _oob_sentence(m.group(0))
        rec["sentence"] = f"{what}: on a TPU this reads past the array"
        rec["message"], rec["detail"] = m.group(0), None  # the interpreter's own words; its traceback is noise
        block = _BLOCK_OOB.search(m.group(0))
        if block:
            spec = _spec_line(block.group("name"), call, sites, path)
            window = ", ".join(f"{a}:{b}" for a, b in _SLICE.findall(block.group("window")))
            rec["sentence"] = (f"the index_map of input {block.group('name')} returns block {block.group('block')} at grid "
                               f"step {block.group('step')}: it reads [{window}] of an array of shape "
                               f"{block.group('shape')}, past its end")
            if spec is not None:
                rec["mentions"] = [{"line": spec[0], "column": spec[1]}]
                rec["frames"] = []  # the BlockSpec is the place, not the pallas_call frame
            return rec
        shape = _oob_shape(m.group(0))
        in_core = re.search(r"\b(vmem|smem)\b", m.group(0)) is not None  # HBM/ANY: a DMA's, marked at the copy
        read = places.read_place(noise, path, places.kernel_refs(call, sites.tree, path), shape, sites.tree) \
            if in_core else []
        if read:
            rec["mentions"] = _mentions(read)
            rec["frames"] = []  # the read is the place, not the entry's call
            return rec
        copies = (dma_lines(call, path) or places.reached_copy_lines(call, sites.tree, path)) \
            if re.search(r"\b(hbm|vmem|any)\b", m.group(0)) else []
        if copies:
            rec["mentions"] = [{"line": line, "column": None} for line in copies] + rec["mentions"]
            if len(copies) > 1:
                rec["sentence"] += " (the interpreter does not say which copy: the first of the kernel's DMAs is marked)"
    else:
        rec["code"] = "PLS300"
        hang = _DEADLOCK.search(full)
        if hang:  # runner/tier3/interpret_deadlock.py: the interpreter's words, not its callback's traceback
            rec["sentence"] = rec["message"] = re.sub(r" \(the wait at [^)]*\)", "", hang.group(1)).strip()
            rec["detail"] = None
    return rec


_DEADLOCK = re.compile(r"KernelDeadlock: (deadlock: [^\n]*)")


def _oob_shape(text: str) -> tuple[int, ...] | None:
    m = re.search(r"buffer has shape \(([\d, ]*)\)", text)
    return tuple(int(x) for x in m.group(1).replace(" ", "").split(",") if x) if m else None


_BLOCK_OOB = re.compile(r'Out-of-bounds block index (?P<block>\(.*?\)) for input "(?P<name>[^"]+)" in iteration '
                        r'(?P<step>\(.*?\)).*?reading \[(?P<window>.*)\] but input has shape (?P<shape>\(.*?\))')


def _spec_line(name: str, call: RecordedCall | None, sites: "CallSites", path: str) -> tuple[int, int] | None:
    """Where the in_specs entry of the kernel parameter ``name`` is written (line 1-based, column)."""
    if call is None:
        return None
    try:
        params = list(inspect.signature(call.kernel).parameters)
    except (TypeError, ValueError):
        return None
    if name not in params:
        return None
    grid_spec = call.kwargs.get("grid_spec")
    prefetch = int(getattr(grid_spec, "num_scalar_prefetch", 0) or 0)
    index = params.index(name) - prefetch
    return sites.element_line(_call_line(call, path), "in_specs", index) or _index_map_place(call, index, path)


def _index_map_place(call: RecordedCall, index: int, path: str) -> tuple[int, int | None] | None:
    """Where the index map of in_specs[``index``] is written, read off the function itself (a grid spec's
    BlockSpecs are not the pallas_call's own keywords): its first line, when it is in the checked file."""
    specs = _in_specs_of(call)
    specs = list(specs) if isinstance(specs, (list, tuple)) else [specs] if specs is not None else []
    if not 0 <= index < len(specs):
        return None
    index_map = getattr(specs[index], "index_map", None)
    index_map = getattr(index_map, "index_map", index_map)  # jax wraps it (``_IndexMapFunc``)
    code = getattr(index_map, "__code__", None)
    if code is None or os.path.realpath(code.co_filename) != os.path.realpath(path):
        return None
    return code.co_firstlineno, None


def _in_specs_of(call: RecordedCall) -> Any:
    grid_spec = call.kwargs.get("grid_spec")
    return getattr(grid_spec, "in_specs", None) if grid_spec is not None else call.kwargs.get("in_specs")


_SLICE = re.compile(r"slice\((-?\d+), (-?\d+), (?:1|None)\)")
_INDEX = re.compile(r"slice\((-?\d+), (-?\d+), (?:1|None)\)|(?<![\w.])(-?\d+)(?![\w.])")  # a slice, or one index


def _oob_sentence(text: str) -> str:
    """'Out-of-bounds read of (0 0 hbm 100): reading [(slice(32, 40, 1), ...)] but buffer has shape
    (32, 128).' -> 'Out-of-bounds read: [32:40, 0:128] of an HBM buffer of shape (32, 128)'; a single index
    stays itself (``[1, 0:8, 0:128]``: slot 1 of a buffer of one slot)."""
    m = re.match(r"Out-of-bounds (read|write|swap) of \(\d+ \d+ (\w+) \d+\): \w+ \[(.*)\] but buffer has shape (\(.*?\))", text)
    if not m:
        return text.rstrip(".")
    window = ", ".join(f"{a}:{b}" if a else i for a, b, i in _INDEX.findall(m.group(3))) or m.group(3)
    kind = "DMA read" if m.group(1) == "read" and m.group(2) in ("hbm", "any") else m.group(1)
    return f"Out-of-bounds {kind}: [{window}] of {_buffer_name('(' + m.group(2) + ')')} of shape {m.group(4)}"


_COPY = re.compile(r"\b(?:" + "|".join(places.COPIES) + r")\s*\(")
START = re.compile(r"\.start\(\s*\)")


def dma_lines(call: RecordedCall | None, path: str) -> list[int]:
    """Lines of the kernel (in the user's file) that make an async copy, in order."""
    return kernel_lines(call, path, _COPY)


def kernel_lines(call: RecordedCall | None, path: str, pattern: re.Pattern[str]) -> list[int]:
    """1-based lines of the call's kernel function (in the user's file) matching ``pattern``."""
    if call is None or not call.kernel_file or os.path.realpath(call.kernel_file) != os.path.realpath(path):
        return []
    try:
        lines, first = inspect.getsourcelines(call.kernel)
    except (OSError, TypeError):
        return []
    return [first + i for i, line in enumerate(lines) if pattern.search(line)]


def semantics_disagreement(exc: BaseException, call, sites: CallSites, path: str) -> dict[str, Any]:
    line = sites.keyword_line(_call_line(call, path), "compiler_params", "dimension_semantics")
    sem = dimension_semantics(call.kwargs.get("compiler_params")) if call else None
    sentence = (f"the TPU interpreter rejects dimension_semantics {sem!r}: it needs the \"parallel\" axes to come "
                "first, while the TPU compiler accepts this order. Tier 3 ran with the later parallel axes as "
                "\"arbitrary\"; the compiler tiers decide what compiles")
    rec = _base("PLS305", sentence, path, [line or (_call_line(call, path), None)], severity="warning")
    rec["detail"] = str(exc)
    return rec


def shared_block_axis(call: RecordedCall) -> int | None:
    """The innermost "parallel" grid axis (of two or more steps) on which no output's index_map
    depends: its steps, split between TensorCores, write the same output block. None when an
    index_map cannot be evaluated with plain ints (it reads scalar-prefetch refs) or none is found."""
    sem = dimension_semantics(call.kwargs.get("compiler_params"))
    grid_spec = call.kwargs.get("grid_spec")
    grid = getattr(grid_spec, "grid", None) if grid_spec is not None else call.kwargs.get("grid")
    grid = (grid,) if isinstance(grid, int) else tuple(grid or ())
    if not sem or len(sem) != len(grid) or getattr(grid_spec, "num_scalar_prefetch", 0):
        return None
    specs = [s for s in _leaves(_out_specs(call)) if callable(getattr(s, "index_map", None))]
    if not specs:
        return None
    for axis in reversed(range(len(grid))):
        if sem[axis] != "parallel" or not isinstance(grid[axis], int) or grid[axis] < 2:
            continue
        base = [0] * len(grid)
        moved = [1 if i == axis else 0 for i in range(len(grid))]
        try:
            same = all(_ints(s.index_map(*base)) == _ints(s.index_map(*moved)) for s in specs)
        except Exception:  # noqa: BLE001 - an index_map that needs more than ints
            return None
        if same:
            return axis
    return None


def _leaves(specs: Any) -> list[Any]:
    if specs is None:
        return []
    if isinstance(specs, (list, tuple)):
        return [leaf for s in specs for leaf in _leaves(s)]
    if isinstance(specs, dict):
        return [leaf for s in specs.values() for leaf in _leaves(s)]
    return [specs]


def _ints(index: Any) -> tuple[int, ...]:
    items = index if isinstance(index, (list, tuple)) else (index,)
    return tuple(int(i) for i in items)


def _out_specs(call: RecordedCall) -> Any:
    grid_spec = call.kwargs.get("grid_spec")
    return getattr(grid_spec, "out_specs", None) if grid_spec is not None else call.kwargs.get("out_specs")


def _call_output(call: RecordedCall | None, problem: dict[str, Any]) -> int:
    """Which output of the call an entry's output ``problem["index"]`` is: the one output of that
    shape when there is one, else the one of that dtype (an entry may transpose or vmap it), else
    the same index."""
    index = problem.get("index") or 0
    if call is None:
        return index
    import jax
    import numpy as np

    outs = [o for o in jax.tree.leaves(call.out_shape) if hasattr(o, "shape")]
    same = [i for i, o in enumerate(outs) if tuple(o.shape) == tuple(problem.get("shape") or ())]
    if len(same) != 1 and problem.get("dtype"):
        same = [i for i, o in enumerate(outs) if np.dtype(o.dtype).name == problem["dtype"]]
    return same[0] if len(same) == 1 else index


def order_record(problem: dict[str, Any], call: RecordedCall | None, sites: CallSites, path: str, axis: int | None,
                 sem: tuple[str, ...] | None) -> dict[str, Any]:
    """PLS304 when running the parallel grid axes backward changes the outputs (runner/grid_order.py):
    at the ``dimension_semantics`` entry of the axis that does so alone."""
    call_line = _call_line(call, path)
    line = sites.keyword_line(call_line, "compiler_params", "dimension_semantics")
    entry = sites.semantics_entry(call_line, axis) if axis is not None else None
    where = ([(entry[0], entry[1], f"grid axis {axis}'s entry")] + ([line] if line else [])) if entry else \
        [line] if line else [(call_line, None)]
    how = (f"max abs difference {problem['max_abs']:.3g}" if problem["kind"] == "mismatch"
           else "some blocks come back NaN")
    which = f"grid axis {axis}" if axis is not None else "a grid axis marked \"parallel\""
    sentence = (f"output {problem.get('index') or 0} changes when the grid's \"parallel\" axes run in the other order "
                f"({how}): {which} carries state from step to step (a reduction) but is marked \"parallel\" in "
                f"{sem!r}; on chips with two TensorCores its steps are split between the cores and may run in any "
                "order. Mark it \"arbitrary\"")
    return _base("PLS304", sentence, path, where)


def tiling_record(problem: dict[str, Any], moved: dict[str, tuple[str, int, int]], call: RecordedCall | None,
                  path: str, source: str) -> dict[str, Any]:
    """PLS303 when the entry's outputs at another tiling differ from its own (runner/tier3/interpret_tilings.py): at
    the call, each moved block size's default a related place."""
    from .interpret_tilings import tunable_line, written_out

    values = ", ".join(f"{name} = {new} (the file's {old})" for name, (_k, old, new) in moved.items())
    if problem["kind"] == "mismatch":
        how = (f"{problem['count']:,} of {problem['size']:,} values differ from the run at the file's own block sizes "
               f"(max abs difference {problem['max_abs']:.3g}; the tolerance, {problem.get('source') or 'relative'})")
    else:
        how = "some blocks come back NaN that the run at the file's own block sizes wrote"
    sentence = (f"output {problem.get('index') or 0} depends on the tiling: with {values}, {how}. Both are block "
                "sizes the entry accepts and there is no reference, so unless this size is meant to change the numbers "
                "(a quantization block), at most one of the two results is right: look for a size written as a number "
                "where the block size was meant (a grid, an offset, a mask) and for a step that exists at one tiling "
                "only (an init, a flush)")
    call_line = _call_line(call, path)
    places: list[tuple] = [(call_line, None)]
    literal = written_out(source, call_line, moved)
    if literal is not None:
        line, column, name = literal
        sentence += (f". The number {moved[name][1]} at line {line} is {name}'s default written out: where {name} was "
                     f"meant, it holds only at the file's own tiling")
        places = [(line, column, None), (call_line, None, "the pallas_call")]
    for name in moved:
        line = tunable_line(source, name)
        if line is not None:
            places.append((line, None, f"{name}'s default"))
    if places[0][0] is None:
        places = places[1:] or places
    return _base("PLS303", sentence, path, places, severity="warning")  # a quantization block may differ by design


def _explained(cause: Any, sites: CallSites, call_line: int | None, refs: Any, out_index: int,
               where: list[tuple]) -> tuple[list[tuple], str]:
    """Where a wrong-result record lands and what its sentence adds, for what the reruns found (``cause``)."""
    if cause and cause[0] == "semantics":
        axes = cause[1]
        line = sites.keyword_line(call_line, "compiler_params", "dimension_semantics")
        entry = sites.semantics_entry(call_line, axes[0]) if axes else None  # the "parallel" to change
        where = [(entry[0], entry[1], f"grid axis {axes[0]}'s entry")] + ([line] if line else []) if entry else \
            [line] if line else where
        axis_text = f"grid axis {axes[0]}" if axes else "a grid axis marked \"parallel\""
        outcome = ("the result matches the reference" if cause[2] else
                   "every output comes back written (there is no reference, so the values were not compared)")
        explain = (f"; {axis_text} carries state from step to step (a reduction) but is marked \"parallel\": with it "
                   f"\"arbitrary\" {outcome}. Parallel steps may run in any order and be split between TensorCores")
    elif cause and cause[0] == "uninitialized":
        line = sites.keyword_line(call_line, "scratch_shapes")
        found = missing_places.uninitialized_places(refs, line[0] if line else None)
        where = found or ([line] if line else where)
        explain = (f"; {NAN_COMPUTED}: the kernel reads memory it never wrote, such as an "
                   "accumulator or scratch buffer not reset on the first step of the reduction"
                   + (f" ({found[0][2]})" if found else " (the scratch buffers are marked)" if line else ""))
    elif cause and cause[0] == "unwritten":
        line = sites.keyword_line(call_line, "out_specs")
        found = missing_places.unwritten_places(refs, out_index)
        where = found + ([(line[0], line[1], "the out_specs")] if found and line else []) or ([line] if line else where)
        explain = ("; no grid step writes these blocks: "
                   + (f"{found[0][2]}" if found else "check the out_specs index_map and the kernel's pl.when conditions"))
    elif cause and cause[0] == "poisoned":
        explain = (f"; this is with {cause[1]}: with random inputs the outputs matched, so the kernel reads elements "
                   "its result must not depend on (a mask, bound or length off by one lets one more in)")
    elif cause and cause[0] == "skipped":
        line = sites.keyword_line(call_line, "out_specs")
        found = missing_places.unwritten_places(refs, out_index)
        where = found + ([(line[0], line[1], "the out_specs")] if found and line else []) or ([line] if line else where)
        explain = ("; the grid steps that own these blocks write nothing to the output, so each keeps what an earlier "
                   "step left in the buffer (a store skipped on some path, e.g. one branch of lax.cond or a pl.when)"
                   + (f": {found[0][2]}" if found else ""))
    else:
        explain = ""
    return where, explain


def result_record(problem, call, sites, path, cause, sem) -> dict[str, Any]:
    call_line = _call_line(call, path)
    refs = places.kernel_refs(call, sites.tree, path, sites.traced)
    out_blocks = block_shapes(_out_specs(call)) if call else []
    index = problem.get("index") or 0
    out_index = _call_output(call, problem)
    block = out_blocks[out_index].block_shape if out_index < len(out_blocks) else None
    where = [(call_line, None)]
    if problem["kind"] == "dtype":
        spot = sites.element_line(call_line, "out_shape", out_index) or sites.keyword_line(call_line, "out_shape")
        sentence = (f"output {index} is {problem['dtype']} but the reference returns {problem['expected']}: the "
                    f"pallas_call's out_shape declares {problem['dtype']} for it")
        if problem.get("width"):  # floats both: the values may still pass the tolerance, the dtype is not the same
            sentence += (f", a float of another width than the reference's (callers get {problem['dtype']} where "
                         f"they expect {problem['expected']})")
        rec = _base("PLS304", sentence, path, [spot or (call_line, None)],
                    severity="warning" if problem.get("width") else "error")
        rec["refs"] = [{"kind": "out_dtype", "index": out_index}]  # the client moves it to the dtype's origin
        return rec
    where, explain = _explained(cause, sites, call_line, refs, out_index, where)
    if problem["kind"] == "nan" and cause and cause[0] == "skipped":
        hit = blocks_hit(problem["mask"], block)
        total = math.prod(-(-n // (b or 1)) for n, b in zip(problem["shape"], block or problem["shape"]))
        shown = ", ".join(str(b) for b in hit[:8]) + (" ..." if len(hit) > 8 else "")
        sentence = (f"output {index}: {len(hit)} of {total} blocks (block shape {tuple(block) if block else problem['shape']}) "
                    f"are never written by the step that owns them (refilled with NaN before each step, they come "
                    f"back NaN): blocks {shown}" + explain)
        code = "PLS303"
    elif problem["kind"] == "nan":
        hit = blocks_hit(problem["mask"], block)
        total = math.prod(-(-n // (b or 1)) for n, b in zip(problem["shape"], block or problem["shape"]))
        shown = ", ".join(str(b) for b in hit[:8]) + (" ..." if len(hit) > 8 else "")
        sentence = (f"output {index}: {len(hit)} of {total} blocks (block shape {tuple(block) if block else problem['shape']}) "
                    f"come back NaN, the interpreter's fill for memory never written: blocks {shown}" + explain)
        code = "PLS303"
    elif problem["kind"] == "mismatch":
        sentence = (f"output {index} differs from the reference in {problem['count']} of {problem['size']} elements: "
                    f"max abs error {problem['max_abs']:.3g}, max rel error {problem['max_rel']:.3g} "
                    f"(atol {problem['atol']:.3g}, rtol {problem['rtol']:.3g}"
                    + (f"; {problem['source']}" if problem.get("source") else "") + ")" + explain)
        code = "PLS304"
    else:
        sentence = problem["message"]
        code = "PLS304"
    if cause and cause[0] == "semantics" and code == "PLS303":
        code = "PLS304"  # the cause is the wrong semantics, not an unwritten block
    return _base(code, sentence, path, where)
