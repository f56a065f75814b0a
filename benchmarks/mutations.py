"""Mutation operators for the generalisation benchmark (``benchmarks/bench_generalisation.py``).

Written down before any mutant was checked: what each operator changes, when a mutant counts as
a real bug (valid), and which lines are its true lines. The benchmark scores a finding as
"located" when its primary position (start line) is within ±1 of one of the true lines.

Every edit keeps the file's line count (a removed statement becomes ``pass`` on its first line
and blank lines after), so lines of the base and of the mutant correspond. Sites are found with
Python's ``ast`` here, never with pallasite's own analysis; whether a value really reaches a
pallas_call is decided by an oracle that runs the task's entry under ``jax.eval_shape`` with
``pallas_call`` recorded (``benchmarks/mutation_oracle.py``: grid, block and array shapes, dtypes,
memory spaces, scratch, compiler params, kernel source lines), for the base and for the mutant.
"Inside a kernel" means inside the source lines of a kernel function the base's oracle run
recorded (so kernels the task never reaches are not mutated).

Operators
---------

``block-misaligned`` — block not a multiple of 8/128.
    Any int literal ``v`` (``v % 8 == 0``, ``16 <= v <= 65536``) outside kernel bodies becomes
    ``v - 4``. Valid when the entry's inputs are unchanged (not a problem size) and either (a) a
    recorded VMEM block's last dim changed to a value that is not a multiple of 128, or its
    second-to-last to one not a multiple of 8, and differs from that array dim; or (b) the base
    traces and the mutant raises while tracing (a check in jax or in the kernel library rejected
    the value). True line: the literal's line.

``vmem-overflow`` — blocks too big for VMEM.
    The same literals become ``v * 2**k`` for the smallest ``k`` in 1..6 such that a recorded call's
    VMEM blocks x 2 buffers (x ``buffer_count`` for ``pl.Buffered``) + VMEM scratch exceed the scoped
    VMEM limit the call runs under (its ``vmem_limit_bytes``, else the chip's default scoped limit
    measured for the target with libtpu), with every changed block dim still dividing its array dim
    and inputs unchanged. At most one vmem mutant per literal. True line: the literal's line.

``index-map-arity`` — index_map takes the wrong number of grid indices.
    The index_map of a BlockSpec (a lambda, or a function of the file named there) loses its last
    positional parameter (or gains a parameter ``_extra`` when it has one). Valid when the mutant
    raises while tracing and the base does not (an index_map taking ``*args`` or defaults may accept
    the change: then it is not a bug). True line: the lambda's line (the ``def`` line of a function).

``index-map-results`` — index_map returns the wrong number of indices.
    The index_map's returned tuple gains a trailing ``0``. Valid when the mutant raises while tracing
    and the base does not. True line: the line of the returned tuple.

``out-shape-dtype`` — wrong ``out_shape`` dtype.
    The dtype argument of a ``jax.ShapeDtypeStruct(...)`` becomes ``jnp.int32``. Valid when the
    inputs are unchanged and either a recorded pallas_call's out_shape dtype changed from a floating
    dtype to int32, or the mutant raises while tracing (a store of the kernel's float value into the
    now-int32 output ref is rejected). True line: the dtype argument's line.

``output-unwritten`` — an output never written (store removed).
    Inside a kernel, the only store statement to an output ref (``o_ref[...] = v``, augmented or
    ``pl.store``/``pltpu.store``) becomes ``pass``. Valid by construction (the output has no other
    store statement in the kernel). True lines: the removed store's line, and the line of the
    kernel parameter naming that output.

``output-guard-never`` — an output written under a condition that is never true.
    Inside a kernel, a ``pl.when(A == B)`` whose body holds every store to an output, with ``B``
    mentioning ``num_programs`` or ending in ``- 1``, becomes ``pl.when(A == B + 1)``. Valid by
    construction (program ids stay below ``num_programs``). True line: the ``pl.when`` line.

``accumulator-not-zeroed`` — an accumulator's init removed.
    Inside a kernel, in a ``pl.when(A == 0)`` body, a store to a ref that the kernel also reads
    elsewhere (an accumulator: scratch or output) becomes ``pass``. Valid by construction (the
    ref is then read before it is written on the first step). True lines: the removed store's
    line, and the ``pl.when`` line(s) heading that body (decorator and ``def``).

``oob-read`` — an out-of-bounds slice.
    Inside a kernel, a ref index ``pl.ds(start, size)`` (or ``pl.dslice``) becomes
    ``pl.ds(start + size, size)``; an int-literal slice ``a:b`` of a ref becomes
    ``a+(b-a):b+(b-a)``. A name bound once in the kernel to ``pl.ds(...)`` and used to index a ref is
    mutated where it is bound. Valid by construction (the window moves by its own size: past the
    ref's end on the last window, or onto data that is not the one meant). True lines: the line of
    the index (for a bound name, its ``pl.ds`` line and the lines of the reads that use it).

``parallel-reduction`` — a reduction axis marked "parallel" on a multi-core chip.
    An ``"arbitrary"`` entry of ``dimension_semantics`` (strings or ``pltpu.ARBITRARY``) becomes
    ``"parallel"`` when the kernel initialises a ref under ``pl.when(pl.program_id(axis) == 0)``
    for that axis (the axis carries an accumulator). Checked for a two-TensorCore target (v5p).
    Valid when the recorded dimension_semantics changed. True line: the changed entry's line.

Per kernel file and operator, at most ``CAP`` valid mutants are kept, chosen by a hash of
(file, operator, line, column) so the choice does not depend on the checker.

Scoring
-------

Each base file and each mutant is checked with ``pallasite check --format json --tiers 0-3``
(target v6e; v5p for ``parallel-reduction``, whose base is checked at v5p too). A mutant is
"caught" when its report has a finding the base's report does not have (same code, line and
message) that is an error, or a warning that is not a "could not check" code (time or memory
limits, tiers skipped, interpreter unable to run: PLS205, PLS306, PLS307, PLS9xx; and PLS305, the
interpreter running other semantics than the ones written, added after the first baseline run
as a stricter rule). It is
"located" when one of those findings starts within ±1 line of a true line.

Corpus and split
----------------

Kernel files the checker was not developed on, grouped into families of near-copies (JAXBench's
flash attention is jax's; its GQA and sparse attention are splash attention): jax's own
``pallas/ops/tpu`` kernels (with a small task appended where the file has none), JAXBench's
hand-tuned ``optimized.py`` files, and tokamax's TPU kernels where their imports are available.
Families whose files this project's own benchmark mutates (jax's ``matmul.py``, JAXBench's GEMM
and paged attention) are in-sample and left out. A family is in the held-out half when the first
byte of sha256(family name) is odd, else in the development half; the held-out half is scored
only at the end.
"""

from __future__ import annotations

import ast
import hashlib
import re
from dataclasses import dataclass, field
from typing import Any, Iterator

CAP = 3
OPERATORS = (
    "block-misaligned",
    "vmem-overflow",
    "index-map-arity",
    "index-map-results",
    "out-shape-dtype",
    "output-unwritten",
    "output-guard-never",
    "accumulator-not-zeroed",
    "oob-read",
    "parallel-reduction",
)
LITERAL_RANGE = (16, 65536)
VMEM_STEPS = range(1, 7)


@dataclass(frozen=True)
class Edit:
    """Replace the text from (line, col) to (end_line, end_col) (1-based lines, 0-based columns)."""

    line: int
    col: int
    end_line: int
    end_col: int
    new: str


@dataclass
class Candidate:
    """One possible mutant, before the oracle has said whether it is a real bug."""

    operator: str
    edits: tuple[Edit, ...]
    true_lines: tuple[int, ...]
    what: str
    site: tuple[int, int]
    literal: int | None = None  # block-misaligned / vmem-overflow: the literal's value
    factor: int | None = None  # vmem-overflow: the multiplier tried
    axis: int | None = None  # parallel-reduction: the changed entry
    text: str = ""


@dataclass(frozen=True)
class Mutant:
    kernel: str
    operator: str
    text: str
    true_lines: tuple[int, ...]
    what: str
    site: tuple[int, int]
    target: str = "v6e"


def apply(text: str, edits: tuple[Edit, ...]) -> str:
    """The text with non-overlapping edits applied; its line count never changes."""
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    out = text
    for e in sorted(edits, key=lambda e: (e.line, e.col), reverse=True):
        a = starts[e.line - 1] + _byte_col(lines[e.line - 1], e.col)
        b = starts[e.end_line - 1] + _byte_col(lines[e.end_line - 1], e.end_col)
        out = out[:a] + e.new + out[b:]
    assert out.count("\n") == text.count("\n"), "an edit changed the line count"
    return out


def _byte_col(line: str, col: int) -> int:
    """ast's columns are UTF-8 byte offsets; str indices are code points."""
    return len(line.encode("utf-8")[:col].decode("utf-8", errors="ignore"))


def _segment(text_lines: list[str], node: ast.AST) -> str:
    return ast.get_source_segment("".join(text_lines), node) or ""


def _replace(node: ast.AST, new: str) -> Edit:
    return Edit(node.lineno, node.col_offset, node.end_lineno, node.end_col_offset, new)


def _statement_to_pass(stmt: ast.stmt) -> Edit:
    """The statement becomes ``pass`` on its first line (blank lines after keep the count)."""
    return Edit(stmt.lineno, stmt.col_offset, stmt.end_lineno, stmt.end_col_offset,
                "pass" + "\n" * (stmt.end_lineno - stmt.lineno))


# --------------------------------------------------------------------------- facts from the base


@dataclass
class Facts:
    """What the oracle saw for the base, read against the base's syntax tree."""

    tree: ast.Module
    text: str
    calls: list[dict[str, Any]]
    executed: set[int]
    kernel_fns: list[ast.FunctionDef] = field(default_factory=list)
    roles: dict[str, str] = field(default_factory=dict)  # ref name -> "prefetch"|"in"|"out"|"scratch"
    kernel_lines: set[int] = field(default_factory=set)


def facts_for(text: str, answer: dict[str, Any]) -> Facts:
    tree = ast.parse(text)
    _link_parents(tree)
    facts = Facts(tree, text, answer.get("calls") or [], set(answer.get("executed") or ()))
    defs = {n.lineno: n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    by_name: dict[str, list[ast.FunctionDef]] = {}
    for fn in defs.values():
        by_name.setdefault(fn.name, []).append(fn)
    for call in facts.calls:
        line = int(call["src"].rpartition(":")[2] or 0) if call.get("src") else 0
        fn = defs.get(line)
        if fn is None:
            continue
        names = call.get("arg_names") or []
        counts = (call["num_index_operands"], call["num_inputs"], call["num_outputs"])
        for i, name in enumerate(names):
            role = ("prefetch" if i < counts[0] else "in" if i < counts[0] + counts[1]
                    else "out" if i < sum(counts) else "scratch")
            facts.roles[_resolve_name(fn, name, by_name)] = role
        for f in [fn, *_delegates(fn, by_name)]:
            if f not in facts.kernel_fns:
                facts.kernel_fns.append(f)
    for fn in facts.kernel_fns:
        facts.kernel_lines.update(range(fn.lineno, fn.end_lineno + 1))
        for dec in fn.decorator_list:
            facts.kernel_lines.update(range(dec.lineno, dec.end_lineno + 1))
    return facts


def _link_parents(tree: ast.AST) -> None:
    for parent in ast.walk(tree):
        for child in ast.iter_child_nodes(parent):
            child._parent = parent  # type: ignore[attr-defined]


def _delegates(fn: ast.FunctionDef, by_name: dict[str, list[ast.FunctionDef]]) -> list[ast.FunctionDef]:
    """Functions of the file the kernel forwards its ``*args`` to (flash attention's kernel does)."""
    out = []
    vararg = fn.args.vararg.arg if fn.args.vararg else None
    if vararg is None:
        return out
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in by_name and any(
                isinstance(a, ast.Starred) and isinstance(a.value, ast.Name) and a.value.id == vararg for a in node.args):
            out.extend(by_name[node.func.id])
    return out


def _resolve_name(fn: ast.FunctionDef, name: str, by_name: dict[str, list[ast.FunctionDef]]) -> str:
    """A flat kernel argument name (``args[5]``, ``group_metadata[0]``) as the name code uses."""
    m = re.fullmatch(r"(\w+)\[(\d+)\]", name)
    if not m:
        return name
    base, index = m.group(1), int(m.group(2))
    if fn.args.vararg is None or fn.args.vararg.arg != base:
        return base
    for node in ast.walk(fn):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in by_name):
            continue
        for pos, a in enumerate(node.args):
            if isinstance(a, ast.Starred) and isinstance(a.value, ast.Name) and a.value.id == base:
                callee = by_name[node.func.id][0]
                params = [p.arg for p in callee.args.posonlyargs + callee.args.args]
                if pos + index < len(params):
                    return params[pos + index]
    return name


def _in_kernel(facts: Facts, node: ast.AST) -> bool:
    return node.lineno in facts.kernel_lines and node.lineno in facts.executed


def _kernel_nodes(facts: Facts) -> Iterator[ast.AST]:
    seen = set()
    for fn in facts.kernel_fns:
        for node in ast.walk(fn):
            if id(node) not in seen:
                seen.add(id(node))
                yield node


# --------------------------------------------------------------------------- candidates


def candidates(text: str, facts: Facts) -> list[Candidate]:
    """Every mutant the operators could make of ``text`` (the oracle decides which are real bugs)."""
    lines = text.splitlines(keepends=True)
    out: list[Candidate] = []
    out += _literal_candidates(facts)
    out += _index_map_candidates(facts, lines)
    out += _dtype_candidates(facts, lines)
    out += _store_candidates(facts, lines)
    out += _oob_candidates(facts, lines)
    out += _semantics_candidates(facts, lines)
    for c in out:
        c.text = apply(text, c.edits)
    return out


def _literal_candidates(facts: Facts) -> list[Candidate]:
    out = []
    lo, hi = LITERAL_RANGE
    for node in ast.walk(facts.tree):
        if not (isinstance(node, ast.Constant) and type(node.value) is int and lo <= node.value <= hi
                and node.value % 8 == 0) or node.lineno in facts.kernel_lines:
            continue
        parent = getattr(node, "_parent", None)
        if isinstance(parent, ast.UnaryOp):
            continue  # a negative number is not a size
        v = node.value
        site = (node.lineno, node.col_offset)
        out.append(Candidate("block-misaligned", (_replace(node, str(v - 4)),), (node.lineno,),
                             f"line {node.lineno}: {v} -> {v - 4}", site, literal=v))
        for k in VMEM_STEPS:
            out.append(Candidate("vmem-overflow", (_replace(node, str(v * 2 ** k)),), (node.lineno,),
                                 f"line {node.lineno}: {v} -> {v * 2 ** k}", site, literal=v, factor=2 ** k))
    return out


def _is_call_to(node: ast.AST, *names: str) -> bool:
    if not isinstance(node, ast.Call):
        return False
    f = node.func
    return (isinstance(f, ast.Attribute) and f.attr in names) or (isinstance(f, ast.Name) and f.id in names)


def _index_map_candidates(facts: Facts, lines: list[str]) -> list[Candidate]:
    out = []
    defs = {n.name: n for n in ast.walk(facts.tree) if isinstance(n, ast.FunctionDef)}
    seen: set[int] = set()
    for node in ast.walk(facts.tree):
        if not _is_call_to(node, "BlockSpec") or node.lineno not in facts.executed:
            continue
        index_map = node.args[1] if len(node.args) > 1 else next(
            (k.value for k in node.keywords if k.arg == "index_map"), None)
        fn: ast.AST | None = index_map if isinstance(index_map, ast.Lambda) else (
            defs.get(index_map.id) if isinstance(index_map, ast.Name) else None)
        if fn is None or id(fn) in seen:
            continue
        seen.add(id(fn))
        args = fn.args
        if args.kwonlyargs or args.posonlyargs:
            continue
        params = args.args
        where = fn.lineno
        if len(params) >= 2:
            prev, last = params[-2], params[-1]
            end = args.defaults[-1] if args.defaults else last  # ``last=None``: its default goes too
            if len(args.defaults) >= 2:
                prev = args.defaults[-2]
            edit = Edit(prev.end_lineno, prev.end_col_offset, end.end_lineno, end.end_col_offset,
                        "\n" * (end.end_lineno - prev.end_lineno))
            what = f"line {where}: index_map loses parameter {last.arg}"
        elif len(params) == 1:
            p = params[0]
            edit = Edit(p.end_lineno, p.end_col_offset, p.end_lineno, p.end_col_offset, ", _extra")
            what = f"line {where}: index_map gains a parameter"
        else:
            continue
        out.append(Candidate("index-map-arity", (edit,), (where,), what, (where, fn.col_offset)))
        result = fn.body if isinstance(fn, ast.Lambda) else next(
            (s.value for s in reversed(list(ast.walk(fn))) if isinstance(s, ast.Return) and s.value is not None), None)
        if isinstance(result, ast.Tuple) and result.elts:
            seg = _segment(lines, result)
            if seg.endswith(")"):
                inner = seg[:-1].rstrip()
                new = inner + (" 0)" if inner.endswith(",") else ", 0)")
            else:
                new = seg + ", 0"
            out.append(Candidate("index-map-results", (_replace(result, new),), (result.lineno,),
                                 f"line {result.lineno}: index_map returns one more index", (result.lineno, result.col_offset)))
    return out


def _dtype_candidates(facts: Facts, lines: list[str]) -> list[Candidate]:
    if not re.search(r"^\s*import jax\.numpy as jnp|^\s*from jax import numpy as jnp", facts.text, re.M):
        return []
    out = []
    for node in ast.walk(facts.tree):
        if not _is_call_to(node, "ShapeDtypeStruct") or node.lineno not in facts.executed:
            continue
        dtype = node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "dtype"), None)
        if dtype is None or _segment(lines, dtype) == "jnp.int32":
            continue
        out.append(Candidate("out-shape-dtype", (_replace(dtype, "jnp.int32"),), (dtype.lineno,),
                             f"line {dtype.lineno}: dtype {_segment(lines, dtype)} -> jnp.int32", (dtype.lineno, dtype.col_offset)))
    return out


def _stored_ref(stmt: ast.AST) -> str | None:
    """The ref a statement stores to (``r[...] = v``, ``r[...] += v``, ``pl.store(r, ...)``)."""
    target = None
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        target = stmt.targets[0]
    elif isinstance(stmt, ast.AugAssign):
        target = stmt.target
    elif isinstance(stmt, ast.Expr) and _is_call_to(stmt.value, "store") and stmt.value.args:
        first = stmt.value.args[0]
        return first.id if isinstance(first, ast.Name) else None
    if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
        return target.value.id
    return None


def _when_cond(fn: ast.AST) -> ast.expr | None:
    """The condition of ``@pl.when(cond)`` on a function."""
    for dec in getattr(fn, "decorator_list", ()):
        if _is_call_to(dec, "when") and dec.args:
            return dec.args[0]
    return None


def _enclosing_when(node: ast.AST) -> ast.FunctionDef | None:
    cur = getattr(node, "_parent", None)
    while cur is not None:
        if isinstance(cur, ast.FunctionDef) and _when_cond(cur) is not None:
            return cur
        cur = getattr(cur, "_parent", None)
    return None


def _is_zero_compare(cond: ast.expr) -> bool:
    return (isinstance(cond, ast.Compare) and len(cond.ops) == 1 and isinstance(cond.ops[0], ast.Eq)
            and any(isinstance(x, ast.Constant) and x.value == 0 for x in (cond.left, cond.comparators[0])))


def _is_last_compare(cond: ast.expr, lines: list[str]) -> ast.expr | None:
    """``A == B`` with B the last step (mentions num_programs, or ends in ``- 1``): B."""
    if not (isinstance(cond, ast.Compare) and len(cond.ops) == 1 and isinstance(cond.ops[0], ast.Eq)):
        return None
    right = cond.comparators[0]
    if "num_programs" in _segment(lines, right) or (
            isinstance(right, ast.BinOp) and isinstance(right.op, ast.Sub)
            and isinstance(right.right, ast.Constant) and right.right.value == 1):
        return right
    return None


def _store_candidates(facts: Facts, lines: list[str]) -> list[Candidate]:
    out = []
    stores: dict[str, list[ast.stmt]] = {}
    reads: dict[str, int] = {}
    for node in _kernel_nodes(facts):
        ref = _stored_ref(node) if isinstance(node, ast.stmt) else None
        if ref is not None:
            stores.setdefault(ref, []).append(node)
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and isinstance(node.ctx, ast.Load):
            reads[node.value.id] = reads.get(node.value.id, 0) + 1
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Subscript) and isinstance(node.target.value, ast.Name):
            reads[node.target.value.id] = reads.get(node.target.value.id, 0) + 1
    params = {p.arg: p for fn in facts.kernel_fns for p in fn.args.posonlyargs + fn.args.args}
    for ref, stmts in stores.items():
        role = facts.roles.get(ref)
        if role == "out" and len(stmts) == 1 and _in_kernel(facts, stmts[0]):
            stmt = stmts[0]
            true = (stmt.lineno,) + ((params[ref].lineno,) if ref in params else ())
            out.append(Candidate("output-unwritten", (_statement_to_pass(stmt),), true,
                                 f"line {stmt.lineno}: the only store to {ref} removed", (stmt.lineno, stmt.col_offset)))
        if role == "out":
            guards = {id(g): g for g in (_enclosing_when(s) for s in stmts)}
            if len(guards) == 1 and None not in guards.values():
                guard = next(iter(guards.values()))
                last = _is_last_compare(_when_cond(guard), lines)
                if last is not None and _in_kernel(facts, stmts[0]):
                    dec = guard.decorator_list[0]
                    edit = Edit(last.end_lineno, last.end_col_offset, last.end_lineno, last.end_col_offset, " + 1")
                    out.append(Candidate("output-guard-never", (edit,), (dec.lineno,),
                                         f"line {dec.lineno}: pl.when guarding {ref}'s store never true", (dec.lineno, dec.col_offset)))
        if role in ("out", "scratch") and reads.get(ref, 0) > 0:
            for stmt in stmts:
                guard = _enclosing_when(stmt)
                if guard is None or not _is_zero_compare(_when_cond(guard)) or not _in_kernel(facts, stmt) \
                        or isinstance(stmt, ast.AugAssign):
                    continue
                dec = guard.decorator_list[0]
                out.append(Candidate("accumulator-not-zeroed", (_statement_to_pass(stmt),),
                                     (stmt.lineno, dec.lineno, guard.lineno),
                                     f"line {stmt.lineno}: init of {ref} removed", (stmt.lineno, stmt.col_offset)))
    return out


def _oob_candidates(facts: Facts, lines: list[str]) -> list[Candidate]:
    out = []
    named: dict[str, list] = {}  # name bound to pl.ds(...) -> [the call, the reads using it]
    bound: dict[str, int] = {}
    for node in _kernel_nodes(facts):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            bound[node.targets[0].id] = bound.get(node.targets[0].id, 0) + 1
            if _is_call_to(node.value, "ds", "dslice") and len(node.value.args) == 2:
                named[node.targets[0].id] = [node.value, []]
    for node in _kernel_nodes(facts):
        if not isinstance(node, ast.Subscript) or not _in_kernel(facts, node):
            continue
        base = node.value
        is_at = isinstance(base, ast.Attribute) and base.attr == "at" and isinstance(base.value, ast.Name)
        if not ((isinstance(base, ast.Name) and isinstance(node.ctx, ast.Load)) or is_at):
            continue
        ref = base.value.id if is_at else base.id
        if facts.roles.get(ref) not in ("in", "out", "scratch"):
            continue
        parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        for part in parts:
            if isinstance(part, ast.Name) and part.id in named and bound.get(part.id) == 1:
                named[part.id][1].append(node)
            elif _is_call_to(part, "ds", "dslice") and len(part.args) == 2:
                start, size = part.args
                s_txt, z_txt = _segment(lines, start), _segment(lines, size)
                simple = isinstance(start, (ast.Name, ast.Constant, ast.Attribute, ast.Call, ast.Subscript))
                new = f"{s_txt if simple else '(' + s_txt + ')'} + {z_txt}"
                out.append(Candidate("oob-read", (_replace(start, new),), (node.lineno,),
                                     f"line {node.lineno}: {ref} window moved by its size", (part.lineno, part.col_offset)))
            elif isinstance(part, ast.Slice) and all(isinstance(x, ast.Constant) and type(x.value) is int
                                                     for x in (part.lower, part.upper)):
                a, b = part.lower.value, part.upper.value
                if b > a:
                    d = b - a
                    out.append(Candidate("oob-read", (_replace(part.lower, str(a + d)), _replace(part.upper, str(b + d))),
                                         (node.lineno,), f"line {node.lineno}: {ref}[{a}:{b}] -> [{a + d}:{b + d}]",
                                         (part.lineno, part.col_offset)))
    for name, (call, reads) in named.items():
        if not reads or not _in_kernel(facts, call):
            continue
        start, size = call.args
        s_txt, z_txt = _segment(lines, start), _segment(lines, size)
        simple = isinstance(start, (ast.Name, ast.Constant, ast.Attribute, ast.Call, ast.Subscript))
        new = f"{s_txt if simple else '(' + s_txt + ')'} + {z_txt}"
        true = tuple(sorted({call.lineno, *(r.lineno for r in reads)}))
        out.append(Candidate("oob-read", (_replace(start, new),), true,
                             f"line {call.lineno}: window {name} moved by its size", (call.lineno, call.col_offset)))
    return out


def _semantics_value(node: ast.AST, lines: list[str]) -> str | None:
    text = _segment(lines, node)
    low = text.lower()
    if "arbitrary" in low:
        return "arbitrary"
    if "parallel" in low:
        return "parallel"
    return None


def _semantics_candidates(facts: Facts, lines: list[str]) -> list[Candidate]:
    out = []
    for node in ast.walk(facts.tree):
        if not isinstance(node, (ast.Tuple, ast.List)) or not node.elts or node.lineno not in facts.executed:
            continue
        kinds = [_semantics_value(e, lines) for e in node.elts]
        if None in kinds or "arbitrary" not in kinds:
            continue
        for axis, (element, kind) in enumerate(zip(node.elts, kinds)):
            if kind != "arbitrary":
                continue
            seg = _segment(lines, element)
            new = re.sub("arbitrary", "parallel", re.sub("ARBITRARY", "PARALLEL", seg))
            out.append(Candidate("parallel-reduction", (_replace(element, new),), (element.lineno,),
                                 f"line {element.lineno}: dimension_semantics[{axis}] arbitrary -> parallel",
                                 (element.lineno, element.col_offset), axis=axis))
    return out


def inits_on_axis(facts: Facts, axis: int) -> bool:
    """Whether a kernel initialises something under ``pl.when(<program_id(axis)> == 0)``."""
    lines = facts.text.splitlines(keepends=True)
    aliases = {f"pl.program_id({axis})", f"program_id({axis})"}
    pattern = rf"(?:\w+\.)?program_id\(\s*{axis}\s*\)"
    for node in _kernel_nodes(facts):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
            continue
        target, value = node.targets[0], node.value
        pairs = [(target, value)]
        if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and len(target.elts) == len(value.elts):
            pairs = list(zip(target.elts, value.elts))  # h, i, j = pl.program_id(0), pl.program_id(1), ...
        for t, v in pairs:
            if isinstance(t, ast.Name) and re.fullmatch(pattern, _segment(lines, v)):
                aliases.add(t.id)
    for node in _kernel_nodes(facts):
        cond = _when_cond(node)
        if cond is None or not _is_zero_compare(cond):
            continue
        side = cond.left if not (isinstance(cond.left, ast.Constant)) else cond.comparators[0]
        if _segment(lines, side).replace(" ", "") in {a.replace(" ", "") for a in aliases}:
            return True
    return False


# --------------------------------------------------------------------------- the oracle's verdict


_FLOATS = ("float", "bfloat")


def _inputs_same(base: dict[str, Any], answer: dict[str, Any]) -> bool:
    return answer.get("inputs") is not None and answer.get("inputs") == base.get("inputs")


def footprint(call: dict[str, Any]) -> int:
    """VMEM bytes of one call: each VMEM block times its buffers, plus VMEM scratch."""
    total = 0
    for b in call["blocks"]:
        if b["space"] != "vmem":
            continue
        total += b["buffers"] * _nbytes(b["block_shape"], b["dtype"])
    for s in call["scratch"]:
        if s["space"] == "vmem":
            total += _nbytes(s["shape"], s["dtype"])
    return total


def _nbytes(shape: list[int | None], dtype: str) -> int:
    bits = int(re.search(r"(\d+)", dtype).group(1)) if re.search(r"\d+", dtype) else 32
    if dtype == "bool":
        bits = 8
    n = 1
    for d in shape:
        n *= 1 if d is None else d
    return n * bits // 8


def changes_blocks(base: dict[str, Any], answer: dict[str, Any]) -> bool:
    """Whether a mutant traced with the same inputs and some recorded block shape changed."""
    if answer.get("error") or not _inputs_same(base, answer) or len(answer["calls"]) != len(base["calls"]):
        return False
    return any(b0["block_shape"] != b1["block_shape"] for c0, c1 in zip(base["calls"], answer["calls"])
               for b0, b1 in zip(c0["blocks"], c1["blocks"]))


def _misaligned(base: dict[str, Any], answer: dict[str, Any]) -> bool:
    """A recorded VMEM block's last/second-to-last dim changed to a value breaking (8, 128)."""
    if len(answer["calls"]) != len(base["calls"]):
        return False
    for b_call, m_call in zip(base["calls"], answer["calls"]):
        for b0, b1 in zip(b_call["blocks"], m_call["blocks"]):
            if b1["space"] != "vmem" or b0["array_shape"] != b1["array_shape"]:
                continue
            shape, array = b1["block_shape"], b1["array_shape"]
            for i, (old, new) in enumerate(zip(b0["block_shape"], shape)):
                rank = len(shape)
                if old == new or new is None or i < rank - 2 or new == array[i]:
                    continue
                if (i == rank - 1 and new % 128) or (i == rank - 2 and new % 8):
                    return True
    return False


def valid(c: Candidate, facts: Facts, base: dict[str, Any], answer: dict[str, Any], limits: dict[str, int]) -> bool:
    """Whether the oracle's answer for candidate ``c`` makes it a real bug (see the module doc)."""
    if base.get("error"):
        return False
    raised = bool(answer.get("error"))
    if c.operator == "block-misaligned":
        if not _inputs_same(base, answer):
            return False
        return (raised and answer["error"]["stage"] == "trace") or (not raised and _misaligned(base, answer))
    if c.operator == "vmem-overflow":
        if raised or not _inputs_same(base, answer) or len(answer["calls"]) != len(base["calls"]):
            return False
        for b_call, m_call in zip(base["calls"], answer["calls"]):
            changed = False
            for b0, b1 in zip(b_call["blocks"], m_call["blocks"]):
                for old, new, full in zip(b0["block_shape"], b1["block_shape"], b1["array_shape"]):
                    if old != new:
                        changed = True
                        if new is None or new > full or full % new:
                            return False
            limit = m_call.get("vmem_limit_bytes") or limits.get("scoped", 0)
            if changed and limit and footprint(m_call) > limit:
                return True
        return False
    if c.operator in ("index-map-arity", "index-map-results"):
        return raised and answer["error"]["stage"] == "trace"
    if c.operator == "out-shape-dtype":
        if not _inputs_same(base, answer):
            return False
        if raised:
            return answer["error"]["stage"] == "trace"
        if len(answer["calls"]) != len(base["calls"]):
            return False
        return any(old.startswith(_FLOATS) and new == "int32"
                   for b_call, m_call in zip(base["calls"], answer["calls"])
                   for old, new in zip(b_call["out_dtypes"], m_call["out_dtypes"]))
    if c.operator in ("output-unwritten", "output-guard-never", "accumulator-not-zeroed", "oob-read"):
        return True  # valid by construction (the candidates were only made where the rule holds)
    if c.operator == "parallel-reduction":
        if raised or len(answer["calls"]) != len(base["calls"]):
            return False
        changed = [m for b, m in zip(base["calls"], answer["calls"]) if b["dimension_semantics"] != m["dimension_semantics"]]
        return bool(changed) and inits_on_axis(facts, c.axis)
    return False


def choose(kernel: str, found: list[Candidate], cap: int = CAP) -> list[Candidate]:
    """At most ``cap`` valid candidates per operator, by a hash of (file, operator, site), and one
    vmem-overflow per literal (the smallest factor that overflows)."""
    smallest: dict[tuple[int, int], Candidate] = {}
    rest = []
    for c in found:
        if c.operator == "vmem-overflow":
            if c.site not in smallest or c.factor < smallest[c.site].factor:
                smallest[c.site] = c
        else:
            rest.append(c)
    by_op: dict[str, list[Candidate]] = {}
    for c in rest + list(smallest.values()):
        by_op.setdefault(c.operator, []).append(c)
    out = []
    for op, cs in by_op.items():
        cs.sort(key=lambda c: hashlib.sha256(f"{kernel}|{op}|{c.site}|{c.what}".encode()).hexdigest())
        out.extend(cs[:cap])
    return out
