"""The ops of a module libtpu compiled for a TPU, read from its text, as the chip runs them.

``hlo_ops(compiled.as_text())`` walks the module after XLA's TPU passes: the entry computation's
instructions in order, into ``while`` bodies (times their known trip count) and ``call``s. Each op
carries what runner/program/cost_model.price_hlo needs to price it:

- **XLA's own cycle estimate** (``estimated_cycles`` of its backend config) where it gives one, and
  the kind of XLA cost model that made it (``COST_MODEL_TYPE_CLASSIC``; ``..._INVALID`` where XLA's
  analytic model did not run, as for a dot it emits on the vector unit);
- **the HBM bytes it moves**: its results and operands outside VMEM (``S(1)`` layouts count 0), except
  that an operand the op only *slices* counts only the slices it reads: a ``gather`` (the rows its
  indices pick: a paged cache is read page by page, not whole), a ``dynamic-slice`` or ``slice`` (the
  window), and an in-place ``dynamic-update-slice`` (the update is written, the buffer is not read) —
  inside a fusion as at the top level;
- **its class** (``klass``): ``mxu`` (a convolution or dot XLA runs on the MXU), ``gather``,
  ``scatter``, ``custom-call`` (a Mosaic kernel or XLA's own fused kernels, e.g. its online softmax),
  ``copy`` (copies and transposes) or ``vector`` (loop and reduction fusions, slices, broadcasts);
- **the rows it gathers** (``slices``: a gather's index tuples), which bound a gather by the rate the
  chip fetches rows at, not only by its bytes;
- **its vector work** (``work``: element operations, each instruction's result elements, a reduction's
  operand elements; broadcasts, bitcasts and reshapes inside a fusion are free), for the ops XLA gives
  no model estimate for (``COST_MODEL_TYPE_INVALID``).

Returns (ops, notes). Worker side, pure text: imports nothing of JAX.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_DTYPE_BYTES = {"pred": 1, "s4": 0.5, "u4": 0.5, "s8": 1, "u8": 1, "f8e4m3fn": 1, "f8e5m2": 1, "f8e4m3b11fnuz": 1,
                "bf16": 2, "f16": 2, "s16": 2, "u16": 2, "f32": 4, "s32": 4, "u32": 4, "f64": 8, "s64": 8, "u64": 8,
                "c64": 8, "c128": 16}
_ARRAY = re.compile(r"\b([a-z]+[0-9]*[a-z0-9]*)\[([0-9,]*)\](\{[^}]*\})?")
_INSTR = re.compile(r"^\s*(?:ROOT\s+)?%([\w.\-]+)\s*=\s*(.*?)\s([a-z][\w\-]*)\((.*)$")
# ops that move nothing of their own in HBM, or whose time is someone else's (async prefetch halves)
_FREE = frozenset({"parameter", "constant", "tuple", "get-tuple-element", "bitcast", "copy-start", "copy-done",
                   "after-all", "partition-id", "replica-id", "opt-barrier", "add-dependency"})
# ops that read only a window of their first operand
_SLICING = frozenset({"gather", "dynamic-slice", "slice"})
# ops through which a fusion parameter is still the same bytes (no data moved)
_ALIASING = frozenset({"bitcast", "reshape"})
# instructions of a fused computation that do no vector work of their own
_NO_WORK = frozenset({"parameter", "constant", "bitcast", "reshape", "broadcast", "tuple", "get-tuple-element",
                      "iota"})


def _work(ins: "_Instr", types: dict[str, str]) -> int:
    """Element operations of one instruction: a reduction's operand elements, else its result's."""
    if ins.opcode in ("reduce", "reduce-window") and ins.operands:
        return _elements(types.get(ins.operands[0], ""))
    return _elements(ins.rtype)


@dataclass
class HloOp:
    """One instruction of a compiled module's computation, as the TPU runs it."""

    name: str
    opcode: str  # "fusion", "custom-call", "copy", "while", ...
    kind: str  # the fusion kind ("kOutput", "kLoop") or the custom-call target
    cycles: int | None  # XLA's own estimate for the chip (backend_config estimated_cycles), when given
    hbm_bytes: int  # what it reads and writes outside VMEM (see the module docstring)
    times: int = 1  # trips of the enclosing while loops (known_trip_count)
    klass: str = "vector"  # mxu, gather, scatter, custom-call, copy or vector
    slices: int = 0  # rows a gather or scatter fetches or writes (its index tuples)
    cost_model: str = ""  # XLA's cost model type for ``cycles`` ("CLASSIC", "INVALID", ...)
    work: int = 0  # element operations on the vector unit (see the module docstring)


@dataclass
class _Instr:
    name: str
    rtype: str
    opcode: str
    operands: list[str]
    rest: str
    root: bool = False


@dataclass
class _Fused:
    """What one fused computation does with its parameters."""

    param_bytes: dict[int, int] = field(default_factory=dict)  # parameter index -> bytes read, where sliced
    result_bytes: int | None = None  # bytes written, where the root updates a parameter in place
    slices: int = 0
    work: int = 0
    opcodes: set[str] = field(default_factory=set)


def type_bytes(text: str, vmem_too: bool = False) -> int:
    """Bytes of an HLO type (an array or a tuple of them); arrays placed in VMEM (``S(1)``) count 0
    unless ``vmem_too``."""
    total = 0.0
    for dtype, dims, layout in _ARRAY.findall(text):
        if dtype not in _DTYPE_BYTES or ("S(1)" in (layout or "") and not vmem_too):
            continue
        n = 1
        for d in (x for x in dims.split(",") if x):
            n *= int(d)
        total += n * _DTYPE_BYTES[dtype]
    return int(total)


def _elements(text: str) -> int:
    m = _ARRAY.search(text)
    if not m:
        return 0
    n = 1
    for d in (x for x in m.group(2).split(",") if x):
        n *= int(d)
    return n


def _computations(text: str) -> tuple[dict[str, list[str]], str | None]:
    comps: dict[str, list[str]] = {}
    entry, current = None, None
    for line in text.splitlines():
        head = re.match(r"^(ENTRY\s+)?%([\w.\-]+)\s.*\{\s*$", line)
        if head:
            current = head.group(2)
            comps[current] = []
            if head.group(1):
                entry = current
            continue
        if line.startswith("}"):
            current = None
            continue
        if current is not None:
            comps[current].append(line)
    return comps, entry


def _instr(line: str) -> _Instr | None:
    m = _INSTR.match(line)
    if not m:
        return None
    name, rtype, opcode, rest = m.groups()
    operands = rest.split("), kind=", 1)[0] if opcode == "fusion" else rest.split(")", 1)[0]
    return _Instr(name, rtype, opcode, re.findall(r"%([\w.\-]+)", operands), rest,
                  root=line.lstrip().startswith("ROOT"))


def _gather_slices(ins: _Instr) -> int:
    """Index tuples of a gather: its result's elements over the elements of one slice."""
    sizes = re.search(r"slice_sizes=\{([0-9,]*)\}", ins.rest)
    per = 1
    for d in (x for x in (sizes.group(1) if sizes else "").split(",") if x):
        per *= int(d)
    return _elements(ins.rtype) // max(per, 1)


def _fused(lines: list[str]) -> _Fused:
    """How a fused computation reads its parameters (see the module docstring)."""
    out = _Fused()
    instrs = [i for i in (_instr(line) for line in lines) if i is not None]
    types = {i.name: i.rtype for i in instrs}
    param_of: dict[str, int] = {}  # value name -> the parameter index it is (bitcasts followed)
    for ins in instrs:
        out.opcodes.add(ins.opcode)
        if ins.opcode == "parameter":
            idx = re.match(r"\s*(\d+)", ins.rest)
            if idx:
                param_of[ins.name] = int(idx.group(1))
        elif ins.opcode in _ALIASING and ins.operands and ins.operands[0] in param_of:
            param_of[ins.name] = param_of[ins.operands[0]]
    reads: dict[int, int] = {}
    whole: set[int] = set()
    for ins in instrs:
        if ins.opcode not in _NO_WORK:
            out.work += _work(ins, types)
        if ins.opcode == "parameter" or (ins.opcode in _ALIASING and ins.name in param_of):
            continue
        if ins.opcode == "gather":
            out.slices += _gather_slices(ins)
        for pos, operand in enumerate(ins.operands):
            p = param_of.get(operand)
            if p is None:
                continue
            if pos == 0 and ins.opcode in _SLICING:
                reads[p] = reads.get(p, 0) + type_bytes(ins.rtype, vmem_too=True)
            elif pos == 0 and ins.opcode == "dynamic-update-slice" and ins.root:
                reads[p] = reads.get(p, 0)  # updated in place: the buffer is not read
                update = types.get(ins.operands[1], "") if len(ins.operands) > 1 else ""
                out.result_bytes = type_bytes(update, vmem_too=True)
            else:
                whole.add(p)
    out.param_bytes = {p: b for p, b in reads.items() if p not in whole}
    return out


def _klass(opcode: str, opcodes: set[str]) -> str:
    inner = opcodes | {opcode}
    if inner & {"convolution", "dot"}:
        return "mxu"
    if "scatter" in inner:
        return "scatter"
    if "gather" in inner:
        return "gather"
    if opcode == "custom-call":
        return "custom-call"
    if opcode in ("copy", "transpose"):
        return "copy"
    return "vector"


def _op_bytes(ins: _Instr, types: dict[str, str], fused: _Fused | None) -> int:
    """HBM bytes of one op: its result and its operands, sliced operands counted by their slices."""
    result = type_bytes(ins.rtype)
    if fused is not None and fused.result_bytes is not None and "S(1)" not in ins.rtype:
        result = fused.result_bytes
    seen: dict[str, int] = {}
    for pos, operand in enumerate(ins.operands):
        full = type_bytes(types.get(operand, ""))
        if fused is not None and pos in fused.param_bytes:
            got = min(full, fused.param_bytes[pos])
        elif fused is None and pos == 0 and ins.opcode in _SLICING:
            got = min(full, type_bytes(ins.rtype, vmem_too=True))
        elif fused is None and pos == 0 and ins.opcode == "dynamic-update-slice":
            got = 0
            update = types.get(ins.operands[1], "") if len(ins.operands) > 1 else ""
            result = type_bytes(update, vmem_too=True) if "S(1)" not in ins.rtype else 0
        else:
            got = full
        seen[operand] = max(seen.get(operand, 0), got)
    return result + sum(seen.values())


def hlo_ops(text: str) -> tuple[list[HloOp], set[str]]:
    """The ops of a compiled module (``compiled.as_text()``) the TPU runs one after another: see the
    module docstring. Returns (ops, notes)."""
    comps, entry = _computations(text)
    notes: set[str] = set()
    out: list[HloOp] = []
    if entry is None:
        return out, {"no ENTRY computation in the compiled module's text"}
    fused_cache: dict[str, _Fused] = {}

    def fused_of(ins: _Instr) -> _Fused | None:
        called = re.search(r"calls=%([\w.\-]+)", ins.rest)
        if ins.opcode != "fusion" or not called or called.group(1) not in comps:
            return None
        name = called.group(1)
        if name not in fused_cache:
            fused_cache[name] = _fused(comps[name])
        return fused_cache[name]

    def walk(name: str, times: int, depth: int) -> None:
        types: dict[str, str] = {}
        for line in comps.get(name, ()):
            ins = _instr(line)
            if ins is None:
                continue
            types[ins.name] = ins.rtype
            if ins.opcode in _FREE:
                continue
            if ins.opcode == "while":
                body = re.search(r"body=%([\w.\-]+)", ins.rest)
                trips = re.search(r'"known_trip_count":\{"n":"(\d+)"', ins.rest)
                n = int(trips.group(1)) if trips else 1
                if not trips:
                    notes.add("a while loop without a known trip count is priced for one trip")
                if body and depth < 8:
                    walk(body.group(1), times * n, depth + 1)
                continue
            if ins.opcode in ("call", "conditional", "async-start") and depth < 8:
                called = re.findall(r"(?:to_apply|calls|branch_computations=\{)[=]?%([\w.\-]+)", ins.rest)
                if ins.opcode == "conditional":
                    notes.add("a conditional is priced as its first branch")
                for c in called[:1]:
                    walk(c, times, depth + 1)
                continue
            out.append(_op(ins, types, fused_of(ins), times))

    walk(entry, 1, 0)
    return out, notes


def _op(ins: _Instr, types: dict[str, str], fused: _Fused | None, times: int) -> HloOp:
    cycles = re.search(r'"estimated_cycles":"(\d+)"', ins.rest)
    kind = re.search(r"kind=(k\w+)", ins.rest) or re.search(r'custom_call_target="([^"]+)"', ins.rest)
    model = re.search(r'"cost_model_type":"COST_MODEL_TYPE_(\w+)"', ins.rest)
    slices = fused.slices if fused is not None else (_gather_slices(ins) if ins.opcode == "gather" else 0)
    klass = _klass(ins.opcode, fused.opcodes if fused is not None else set())
    if klass == "scatter" and not slices:
        slices = _elements(types.get(ins.operands[1], "")) if len(ins.operands) > 1 else 0
    work = fused.work if fused is not None else _work(ins, types)
    return HloOp(ins.name, ins.opcode, kind.group(1) if kind else "", int(cycles.group(1)) if cycles else None,
                 _op_bytes(ins, types, fused), times, klass, slices, model.group(1) if model else "", work)
