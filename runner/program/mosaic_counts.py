"""What a Mosaic kernel body does at each grid step, read from the kernel's Mosaic MLIR (worker side).

Its results (``BodyCounts``, runner/program/body_counts.py; ``StepCounts``, runner/program/step_counts.py) are what
runner/program/kernel_cost.py hands the roofline:

- **work**: ``tpu.matmul`` / ``vector.contract`` 2 x output elements x contracted elements (the
  MXU share, with the fill efficiency of body_counts: contracted and output-column dims over the
  MXU, rows over sublanes of 8); element-wise ``arith``/``math`` arithmetic one per result element
  (scalars count one); transcendentals (``math.exp``/``log``/``tanh``/...) one per element;
  reductions (``vector.multi_reduction``) one per input element; casts, compares, selects, loads,
  stores, broadcasts and shape casts nothing;
- **the kernel's own DMAs**: every ``tpu.enqueue_dma`` with a source or target in HBM/ANY and no
  remote device, its bytes the target's (sliced) memref type;
- **control flow**: ``scf.for`` with constant bounds (a static ``fori_loop``) x its trip count;
  ``scf.for`` with bounds the known values give, and ``scf.while``, simulated trip by trip; an
  ``scf.if`` the known values decide takes its branch, else its largest branch (an upper bound,
  noted); a loop whose trip count the known values do not give is bounded by what its body reaches
  (runner/program/loop_bounds.py: an upper bound, noted), counted once when it only does scalar work (noted),
  else the kernel is not estimated and the reason says so (issue 56: never counted once silently).

Known values at a grid step are the program ids (the body's leading arguments), the
scalar-prefetch refs the judge knows (``memref.load`` from them, stores into them followed) and the
scalar arithmetic on those (runner/program/mosaic_ir.scalar_op). ``count_kernel`` walks the body once with
nothing known; if nothing there depends on values it prices every step alike, else it walks each
grid step (sampled and scaled over MAX_STEPS steps, runner/program/step_counts.grid_sample).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .body_counts import BodyCounts, add_dot
from .roofline import NoEstimate
from .loop_bounds import counter, difference, trip_bound
from .step_counts import MAX_TRIPS, StepCounts, counted_once, grid_sample, largest_branch, scaled
from .mlir_tree import Block, Op, Type, int_list
from .mosaic_ir import Kernel, constant_of, scalar_op

TRANSCENDENTAL = frozenset({
    "math.exp", "math.exp2", "math.log", "math.log2", "math.log10", "math.log1p", "math.expm1", "math.tanh",
    "math.sin", "math.cos", "math.tan", "math.rsqrt", "math.sqrt", "math.cbrt", "math.powf", "math.fpowi",
    "math.erf", "math.erfc", "math.atan", "math.atan2", "math.asin", "math.acos", "math.sinh", "math.cosh",
    "math.asinh", "math.acosh", "math.atanh",
})
ARITHMETIC = frozenset({
    "arith.addf", "arith.subf", "arith.mulf", "arith.divf", "arith.remf", "arith.maximumf", "arith.minimumf",
    "arith.maxnumf", "arith.minnumf", "arith.negf", "arith.addi", "arith.subi", "arith.muli", "arith.divsi",
    "arith.divui", "arith.remsi", "arith.remui", "arith.floordivsi", "arith.ceildivsi", "arith.ceildivui",
    "arith.maxsi", "arith.minsi", "arith.maxui", "arith.minui", "math.absf", "math.absi", "math.floor",
    "math.ceil", "math.round", "math.roundeven", "math.copysign", "math.ipowi", "tpu.reciprocal",
})
REDUCTIONS = frozenset({"vector.multi_reduction", "vector.reduction", "tpu.all_reduce"})
MATMULS = frozenset({"tpu.matmul", "vector.contract"})
_HBM = ("any", "hbm")
_SKIP = frozenset({"func.return", "scf.yield", "scf.condition"})


def _dims(text: str, key: str) -> list[int]:
    """One list of ``#tpu.dot_dimension_numbers<[lc], [rc], [lnc], [rnc], [order], [lb], [rb]>``."""
    groups = text.split("<", 1)[1].rsplit(">", 1)[0].split("]")
    order = ("lc", "rc", "lnc", "rnc", "order", "lb", "rb")
    i = order.index(key)
    return int_list(groups[i].lstrip(", [")) if i < len(groups) and groups[i].strip(", [") else []


def matmul_counts(op: Op, types: dict[int, Type], counts: BodyCounts, mxu: int) -> None:
    """A tpu.matmul / vector.contract: 2 x output elements x contracted elements, with its MXU fill."""
    lhs, rhs = types[op.operands[0]], types[op.operands[1]]
    out = types[op.results[0]]
    if op.name == "tpu.matmul" and "dimension_numbers" in op.attrs:
        text = str(op.attrs["dimension_numbers"])
        lc, rc, lb, rb = _dims(text, "lc"), _dims(text, "rc"), _dims(text, "lb"), _dims(text, "rb")
    elif op.name == "tpu.matmul":  # the older form: (m, k) x (k, n), transpose_rhs flips the rhs
        lc, rc, lb, rb = [len(lhs.shape) - 1], [1 if "transpose_rhs = true" in str(op.attrs) else 0], [], []
    else:
        lc, rc, lb, rb = _contract_dims(op)
    add_dot(counts, lhs.shape, rhs.shape, out.elements, (lc, lb, rc, rb), lhs.dtype, mxu)


def _contract_dims(op: Op) -> tuple[list[int], list[int], list[int], list[int]]:
    """vector.contract's contracted and batch dims from its indexing maps and iterator types."""
    maps = str(op.attrs.get("indexing_maps", ""))
    kinds = [("reduction" in s) for s in str(op.attrs.get("iterator_types", "")).split(",")]
    parts = [p.split("->")[1].strip(" ()]>") for p in maps.split("affine_map<")[1:]]
    dims = [[d.strip() for d in p.split(",") if d.strip()] for p in parts]
    names = [f"d{i}" for i in range(len(kinds))]
    reduce = {n for n, r in zip(names, kinds) if r}
    lhs, rhs = (dims + [[], []])[:2]
    lc = [i for i, d in enumerate(lhs) if d in reduce]
    rc = [i for i, d in enumerate(rhs) if d in reduce]
    batch = set(lhs) & set(rhs) - reduce
    return lc, rc, [i for i, d in enumerate(lhs) if d in batch], [i for i, d in enumerate(rhs) if d in batch]


def count_leaf(op: Op, types: dict[int, Type], counts: BodyCounts, mxu: int) -> bool:
    """Add one op's own work to ``counts`` (body_counts.count_leaf's rules); False if it is no arithmetic."""
    return leaf_work(op, types, counts, mxu, (MATMULS, matmul_counts, TRANSCENDENTAL, ARITHMETIC, REDUCTIONS))


def leaf_work(op: Op, types: dict[int, Type], counts: BodyCounts, mxu: int, kinds: tuple[Any, ...]) -> bool:
    """body_counts.count_leaf's rules over one dialect's op names: ``kinds`` = (matmul names, their
    counter, transcendental, element-wise and reduction names). Shared with runner/program/module_xla.py."""
    matmuls, matmul, transcendental, arithmetic, reductions = kinds
    name = op.name
    if name in matmuls:
        matmul(op, types, counts, mxu)
    elif name in transcendental:
        counts.transcendentals += types[op.results[0]].elements
    elif name in arithmetic:
        counts.flops += types[op.results[0]].elements
    elif name in reductions:
        counts.flops += types[op.operands[0]].elements
    else:
        return False
    return True


# --------------------------------------------------------------------------- the walk


class Known:
    """The values known at one grid step: scalars by value id, scalar-prefetch tables by ref id.
    ``final``: this walk's counts are priced (a grid step's walk), so a loop of unknown trip count is
    bounded or refused there; in the first walk (nothing known) it only marks the body data-dependent."""

    def __init__(self, values: dict[int, Any] | None = None, refs: dict[int, np.ndarray] | None = None,
                 final: bool = False) -> None:
        self.values = values if values is not None else {}
        self.refs = refs if refs is not None else {}
        self.final = final

    def get(self, value: int) -> Any:
        return self.values.get(value)

    def branch(self) -> "Known":
        """A scope for code that may not run: the same values, a private copy of the ref tables."""
        return Known(self.values, dict(self.refs), self.final)

    def scope(self) -> "Known":
        """A scope for one trip of a loop: the same values and ref tables."""
        return Known(self.values, self.refs, self.final)


def _dma(op: Op, types: dict[int, Type]) -> tuple[int, bool]:
    sizes = int_list(op.attrs["operandSegmentSizes"]) if "operandSegmentSizes" in op.attrs else [1, 0, 1, 1, 0, 0, 0]
    starts = np.cumsum([0] + sizes)
    src = types[op.operands[starts[0]]]
    dst = types[op.operands[starts[2]]] if sizes[2] else src
    if len(sizes) > 4 and sizes[4]:  # a device_id: a remote copy, not this chip's HBM traffic
        return 0, False
    if src.space not in _HBM and dst.space not in _HBM:
        return 0, False
    return dst.nbytes or src.nbytes, True


SKIP, CONSTANT, SCALAR, LEAF, DMA, FOR, WHILE, IF, LOAD, STORE, REGION, OTHER = range(12)
_CODES = {"scf.for": FOR, "scf.while": WHILE, "scf.if": IF, "memref.load": LOAD, "memref.store": STORE}


def _code(op: Op, k: Kernel, mxu: int) -> int:
    """What the walk does with ``op``, decided once per op (with what it can compute once)."""
    types = k.tree.types
    scalar = len(op.results) == 1 and types[op.results[0]].kind == "scalar"
    counts = BodyCounts()
    if op.name in _SKIP:
        code = SKIP
    elif op.name == "arith.constant":
        value = constant_of(k, op.results[0]) if scalar else None
        code, op.cache = (CONSTANT, np.asarray(value).item()) if value is not None else (SKIP, None)
    elif op.name == "tpu.enqueue_dma":
        code, op.cache = DMA, _dma(op, types)
    elif count_leaf(op, types, counts, mxu):
        code, op.cache = LEAF, (mxu, counts, scalar)
    elif op.name in _CODES:
        code = _CODES[op.name]
    elif op.regions:
        code = REGION
    else:
        code = SCALAR if scalar else OTHER
        if op.name == "arith.cmpi":
            op.cache = _PREDICATES.get(int(str(op.attrs["predicate"]).split(":")[0]))
    op.code = code
    return code


def _plan(block: Block, k: Kernel, mxu: int) -> tuple[int, BodyCounts, int, int, list[Op]]:
    """What every execution of ``block`` does whatever the values (its vector work and its own DMAs,
    summed once) and the ops a walk must still visit in order (scalars, loads, control flow)."""
    if block.plan is not None and block.plan[0] == mxu:
        return block.plan
    work, copies, moved, visit = BodyCounts(), 0, 0, []
    for op in block.ops:
        code = _code(op, k, mxu)
        if code == LEAF:
            work.add(op.cache[1])
        elif code == DMA and op.cache[1]:
            copies, moved = copies + 1, moved + op.cache[0]
        if code in (CONSTANT, SCALAR, FOR, WHILE, IF, LOAD, STORE, REGION) or (code == LEAF and op.cache[2]):
            visit.append(op)
    block.plan = (mxu, work, copies, moved, visit)
    return block.plan


def count_block(block: Block, known: Known, k: Kernel, mxu: int) -> StepCounts:
    """The HBM copies and the work of one execution of ``block`` under what ``known`` knows."""
    _, work, copies, moved, visit = _plan(block, k, mxu)
    out = StepCounts(copies=copies, bytes=moved)
    out.compute.add(work)
    values = known.values
    for op in visit:
        code = op.code
        if code == CONSTANT:
            values[op.results[0]] = op.cache
        elif code in (SCALAR, LEAF):
            _evaluate(op, known, k)
        elif code == FOR:
            out.add(_for(op, known, k, mxu))
        elif code == WHILE:
            out.add(_while(op, known, k, mxu))
        elif code == IF:
            out.add(_if(op, known, k, mxu))
        elif code == LOAD:
            _load(op, known)
        elif code == STORE:
            _store(op, known)
        elif code == REGION:  # a scoped region (run_scoped): once, in the same scope
            for region in op.regions:
                for inner in region:
                    out.add(count_block(inner, known, k, mxu))
    return out


def _trunc_div(a: int, b: int) -> int:
    if b == 0:
        return 0
    q = abs(a) // abs(b)
    return -q if (a < 0) != (b < 0) else q


# the common scalar ops on Python numbers (numpy's per-op cost is most of a walk otherwise)
_FAST = {"arith.addi": lambda a, b: a + b, "arith.subi": lambda a, b: a - b, "arith.muli": lambda a, b: a * b,
         "arith.maxsi": max, "arith.minsi": min, "arith.divsi": _trunc_div,
         "arith.floordivsi": lambda a, b: a // b if b else 0,
         "arith.remsi": lambda a, b: a - _trunc_div(a, b) * b if b else 0,
         "arith.andi": lambda a, b: a & b, "arith.ori": lambda a, b: a | b, "arith.xori": lambda a, b: a ^ b}
_SAME = frozenset({"arith.index_cast", "arith.index_castui", "arith.extsi", "arith.extui", "arith.sitofp"})
_PREDICATES = {0: lambda a, b: a == b, 1: lambda a, b: a != b, 2: lambda a, b: a < b, 3: lambda a, b: a <= b,
               4: lambda a, b: a > b, 5: lambda a, b: a >= b, 6: lambda a, b: a < b, 7: lambda a, b: a <= b,
               8: lambda a, b: a > b, 9: lambda a, b: a >= b}


def _evaluate(op: Op, known: Known, k: Kernel) -> None:
    """A scalar op whose operands are known: its value (Python numbers for the common integer ops)."""
    values = known.values
    args = [values.get(v) for v in op.operands]
    if None in args:
        return
    name = op.name
    try:
        if name in _FAST and all(isinstance(a, int) for a in args):
            got: Any = _FAST[name](args[0], args[1])
        elif name in _SAME:
            got = args[0]
        elif name == "arith.cmpi" and op.cache is not None:
            got = int(op.cache(args[0], args[1]))
        elif name == "arith.select":
            got = args[1] if args[0] else args[2]
        else:
            got = scalar_op(op, args, k.tree.types)
            got = None if got is None else np.asarray(got).item()
    except (TypeError, ValueError, KeyError, OverflowError):
        return
    if got is not None:
        values[op.results[0]] = got


def _load(op: Op, known: Known) -> None:
    table = known.refs.get(op.operands[0])
    idx = [known.get(v) for v in op.operands[1:]]
    if table is None or any(i is None for i in idx):
        return
    try:
        known.values[op.results[0]] = table[tuple(int(i) for i in idx)].item()
    except (IndexError, TypeError):
        return


def _store(op: Op, known: Known) -> None:
    ref = op.operands[1]
    if ref not in known.refs:
        return
    value, idx = known.get(op.operands[0]), [known.get(v) for v in op.operands[2:]]
    if value is None or any(i is None for i in idx):
        del known.refs[ref]
        return
    table = np.array(known.refs[ref], copy=True)
    try:
        table[tuple(int(i) for i in idx)] = value
    except (IndexError, TypeError):
        del known.refs[ref]
        return
    known.refs[ref] = table


def _for(op: Op, known: Known, k: Kernel, mxu: int) -> StepCounts:
    """scf.for: constant bounds x the body once (like a scan: the loop index unknown inside); bounds
    known at this step: trip by trip (over MAX_TRIPS: the body once x the trips); unknown: bounded by
    what the body reaches (``_unknown_trips``)."""
    body = op.regions[0][0]
    lb, ub, step = (constant_of(k, v) for v in op.operands[:3])
    if lb is not None and ub is not None and step is not None:
        return _repeated(op, body, known, k, mxu, max(0, -(-(int(ub) - int(lb)) // max(int(step), 1))))
    bounds = [known.get(v) for v in op.operands[:3]]
    carry = [known.get(v) for v in op.operands[3:]]
    out = StepCounts()
    span = difference(k, op.operands[1], op.operands[0])
    if span is not None and bounds[2] is not None and (bounds[0] is None or bounds[1] is None):
        bounds = [np.asarray(0), np.asarray(span), bounds[2]]  # unknown bounds a known distance apart
        if span <= 0:  # the remainder loop Mosaic adds after a fori_loop's main loop (unroll 1): no trips
            return StepCounts()
    if all(b is not None for b in bounds):
        lo, hi, st = (int(np.asarray(b).reshape(-1)[0]) for b in bounds)
        trips = max(0, -(-(hi - lo) // max(st, 1)))
        if trips > MAX_TRIPS:
            return _repeated(op, body, known, k, mxu, trips)
        for i in range(trips):
            scope = known.scope()
            _bind(scope, body.args, [lo + i * st] + carry)
            out.add(count_block(body, scope, k, mxu))
            carry = [scope.get(v) for v in body.ops[-1].operands] if body.ops else carry
        _bind(known, op.results, carry)
        return out
    step_value = constant_of(k, op.operands[2])
    step_value = step_value if step_value is not None else bounds[2]
    index = {body.args[0]} if body.args else set()
    return _unknown_trips(op, [body], known, k, mxu, index,
                          int(np.asarray(step_value).reshape(-1)[0]) if step_value is not None else 0)


def _repeated(op: Op, body: Block, known: Known, k: Kernel, mxu: int, trips: int) -> StepCounts:
    """The loop's body counted once with its index and carries unknown, x ``trips``; what it stores to
    the tables and what it returns are unknown after it."""
    scope = known.branch()
    _bind(scope, body.args, [None] * len(body.args))
    inner = count_block(body, scope, k, mxu)
    for ref in list(known.refs):  # what the loop stores is unknown after it
        if scope.refs.get(ref) is not known.refs[ref]:
            del known.refs[ref]
    _bind(known, op.results, [None] * len(op.results))
    counted = StepCounts()
    counted.add(inner, trips)
    return counted


def _unknown_trips(op: Op, blocks: list[Block], known: Known, k: Kernel, mxu: int, index: set[int],
                   step: int) -> StepCounts:
    """A loop whose trip count the known values do not give: in the first walk, its body once (the body
    is then walked at every grid step); in a priced walk, bounded by what its body reaches
    (runner/program/loop_bounds.trip_bound: an upper bound, said so), once when it does no vector work and moves
    no data (said so), else NoEstimate saying why."""
    if not known.final:
        out = StepCounts()
        for block in blocks:
            out.add(_once(block, known, k, mxu))
        return out
    if op.cache is None:  # what bounds it does not depend on the values: found once per loop
        op.cache = [f for f in (trip_bound(k, block, index, step) for block in blocks) if f is not None]
    found = op.cache
    if not found:
        if not any(_works(block, k, mxu) for block in blocks):
            out = StepCounts()
            for block in blocks:
                out.add(_repeated(op, block, known, k, mxu, 1))
            out.notes.add("a loop of scalar work only (it moves no data and uses no vector unit) whose trip count "
                          "the known values do not give: counted once")
            return out
        raise NoEstimate(f"kernel {k.name}: a loop ({op.name}) runs a number of trips the known values do not give "
                         "(its bound comes from values the pricer was not given: pass the inputs' values - index "
                         "tables, lengths - to price it), and no ref its body reads, writes or copies moves with "
                         "the loop's index to bound it")
    trips, why = min(found)
    out = StepCounts()
    for block in blocks:
        out.add(_repeated(op, block, known, k, mxu, trips))
    if out.copies:
        out.upper_bound = True
    if out.compute.flops or out.compute.transcendentals:
        out.compute_upper = True
    out.notes.add(f"a loop whose trip count the known values do not give: bounded at {trips} trips by {why} "
                  "(Mosaic checks every dynamic index against its ref's bounds), an upper bound")
    return out


def _works(block: Block, k: Kernel, mxu: int) -> bool:
    """Whether ``block`` (nested blocks included) does vector or MXU work or moves HBM data."""
    for op in block.ops:
        code = op.code if op.code >= 0 else _code(op, k, mxu)
        if code == LEAF and not op.cache[2] or code == DMA and op.cache[1]:
            return True
        if any(_works(inner, k, mxu) for region in op.regions for inner in region):
            return True
    return False


def _while(op: Op, known: Known, k: Kernel, mxu: int) -> StepCounts:
    """scf.while: simulated trip by trip while its condition is known (up to MAX_TRIPS); the rest bounded
    by what its body reaches when it carries a counter (``_unknown_trips``)."""
    before, after = op.regions[0][0], op.regions[1][0]
    carry = [known.get(v) for v in op.operands]
    out = StepCounts()
    for _ in range(MAX_TRIPS):
        scope = known.scope()
        _bind(scope, before.args, carry)
        out.add(count_block(before, scope, k, mxu))
        cond_op = before.ops[-1]
        go = scope.get(cond_op.operands[0])
        forwarded = [scope.get(v) for v in cond_op.operands[1:]]
        if go is None:
            break
        if not bool(np.asarray(go).reshape(-1)[0]):
            _bind(known, op.results, forwarded)
            return out
        _bind(scope, after.args, forwarded)
        out.add(count_block(after, scope, k, mxu))
        carry = [scope.get(v) for v in after.ops[-1].operands]
    index, step = counter(k, op) or (set(), 0)
    out.add(_unknown_trips(op, [before, after], known, k, mxu, index, step))
    return out


def _once(body: Block, known: Known, k: Kernel, mxu: int) -> StepCounts:
    """The first walk's count of a loop of unknown trips: its body once, marked a lower bound where it
    moves data or works (which makes the kernel's body walked at every grid step, where it is bounded)."""
    scope = known.branch()
    _bind(scope, body.args, [None] * len(body.args))
    once = count_block(body, scope, k, mxu)
    for ref in list(known.refs):  # the loop may run any number of times: what it stores is unknown
        if scope.refs.get(ref) is not known.refs[ref]:
            del known.refs[ref]
    return counted_once(once)


def _if(op: Op, known: Known, k: Kernel, mxu: int) -> StepCounts:
    """scf.if: the branch the known condition selects; else both on private ref tables, the largest
    taken (DMA bytes and work bounded separately)."""
    cond = known.get(op.operands[0])
    branches = [region[0] for region in op.regions if region]
    if cond is not None:
        taken = 0 if bool(np.asarray(cond).reshape(-1)[0]) else 1
        if taken >= len(branches):
            return StepCounts()
        counted = count_block(branches[taken], known, k, mxu)
        yields = branches[taken].ops[-1].operands if branches[taken].ops else ()
        _bind(known, op.results, [known.get(v) for v in yields])
        return counted
    scopes = [known.branch() for _ in branches]
    counted = [count_block(b, s, k, mxu) for b, s in zip(branches, scopes)]
    if len(counted) < 2:
        counted.append(StepCounts())
    for ref in list(known.refs):
        if any(s.refs.get(ref) is not known.refs[ref] for s in scopes):
            del known.refs[ref]
    _bind(known, op.results, [None] * len(op.results))
    return largest_branch(counted)


def _bind(known: Known, ids: Any, values: Any) -> None:
    for v, x in zip(ids, values):
        if x is None:
            known.values.pop(v, None)
        else:
            known.values[v] = x


# --------------------------------------------------------------------------- over the grid


def count_kernel(k: Kernel, grid: tuple[int, ...], prefetch: list[np.ndarray | None],
                 mxu: int = 128) -> tuple[StepCounts, StepCounts | None, str | None]:
    """(the body walked once with nothing known, the walk over the grid or None when nothing depends
    on values, a note when the grid was sampled)."""
    body = k.body.regions[0][0]
    first = count_block(body, Known(), k, mxu)
    if not first.data_dependent:
        return first, None, None
    steps = int(np.prod(grid, dtype=np.int64)) if grid else 1
    refs_at = body.args[len(grid):len(grid) + k.n_prefetch]
    refs = {r: np.asarray(v) for r, v in zip(refs_at, prefetch) if v is not None}
    picks = grid_sample(tuple(grid))
    total = StepCounts()
    for flat in picks:  # the SMEM tables carry what one step stores to the next, in grid order
        point = np.unravel_index(int(flat), grid) if grid else ()
        values = {a: int(p) for a, p in zip(body.args, point)}
        total.add(count_block(body, Known(values, refs, final=True), k, mxu))
    return first, total, scaled(total, steps, len(picks))
