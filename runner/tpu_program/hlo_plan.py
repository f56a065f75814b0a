"""The TPU program of a refined module, planned once into Python steps that call ``jax.lax`` (worker side).

``Planner`` walks the module that runner/program/module_read.py read (refined to concrete shapes, parsed into
plain ``Op``/``Block`` trees) from its ``main``: every op becomes a ``Step`` built by the op table
(runner/tpu_program/hlo_ops.py, hlo_regions.py), a block becomes a ``Compiled`` list of steps, a
region a ``Compiled`` the op's step calls. Only the TPU program is planned: a ``stablehlo.case`` on
the platform index (runner/program/module_read.py's platform cases) is resolved at plan time to its TPU branch,
whose steps alone are planned; the other branches are never read. Every op planned is recorded with
where it comes from (``OpUse``); every op, attribute or type the table does not cover is recorded as an
``Unsupported`` and planning goes on, so one pass lists them all before anything runs.

A ``Compiled`` block runs over an environment (value id -> array) that sees the enclosing block's
values (StableHLO regions capture them); a step that fails while jax traces it, or whose results are not
the shapes and element types the module declares for them, is reported as that op, with its location
(so a translation never runs on with values of other types than the TPU's).
"""

from __future__ import annotations

from collections import ChainMap
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..program.mlir_tree import Block, Op, Type
from ..program.module_read import Module, scalar_value, target
from .hlo_attrs import AttrError, dtype_of, where_of

TERMINATORS = frozenset({"stablehlo.return", "func.return", "sdy.return"})
# Attributes that say nothing about the values an op computes on one device.
IGNORED_ATTRS = frozenset({"mhlo.frontend_attributes", "mhlo.sharding", "sdy.sharding", "jax.result_info"})


@dataclass(frozen=True)
class OpUse:
    """One op of the TPU program: its name ("stablehlo.custom_call @tpu_custom_call" for a custom call)
    and where it comes from (``file:line`` from its MLIR location, else the location's name)."""

    op: str
    where: str


class Unsupported(Exception):
    """An op (or an attribute or type of it) the executor has no translation for: the TPU program is not run."""

    def __init__(self, op: str, where: str, why: str = ""):
        super().__init__(f"{op} ({where})" + (f": {why}" if why else ""))
        self.op, self.where, self.why = op, where, why


class Refuse(Exception):
    """Raised by a translator: this op cannot be translated (the message says why)."""


@dataclass(frozen=True)
class Entry:
    """One row of the op table: the attributes its translation reads, and the builder of its step
    function ``fn(env, *operand values) -> result values``."""

    attrs: frozenset[str]
    build: Callable[[Op, "Planner"], Callable[..., Any]]


@dataclass(eq=False)
class Step:
    fn: Callable[..., Any]
    operands: tuple[int, ...]
    results: tuple[int, ...]
    label: str
    where: str
    types: tuple[Any, ...] = ()  # per result (shape, dtype) as the module declares it; None: not a tensor


@dataclass(eq=False)
class Compiled:
    """A block planned into steps: ``self(outer_env, *args)`` runs it and returns its terminator's operands."""

    args: tuple[int, ...]
    steps: list[Step] = field(default_factory=list)
    returns: tuple[int, ...] = ()

    def __call__(self, outer: Any, *args: Any) -> list[Any]:
        env: Any = ChainMap(dict(zip(self.args, args)), outer) if outer is not None else dict(zip(self.args, args))
        for step in self.steps:
            try:
                outs = step.fn(env, *[env[v] for v in step.operands])
            except Unsupported:
                raise
            except KeyError as exc:
                raise Unsupported(step.label, step.where, f"reads a value it cannot see ({exc})") from None
            except Exception as exc:  # noqa: BLE001 - jax refused the translation: name the op that failed
                raise Unsupported(step.label, step.where, f"its translation failed: {type(exc).__name__}: "
                                                          f"{str(exc)[:300]}") from exc
            if len(outs) != len(step.results):
                raise Unsupported(step.label, step.where, f"its translation gave {len(outs)} results, the module "
                                                          f"declares {len(step.results)}")
            for r, o, want in zip(step.results, outs, step.types):
                if want is not None and (tuple(np.shape(o)), np.dtype(o.dtype)) != want:
                    raise Unsupported(step.label, step.where, f"its translation gives {np.dtype(o.dtype).name}"
                                      f"{list(np.shape(o))} where the module declares {want[1].name}{list(want[0])}")
                env[r] = o
        return [env[v] for v in self.returns]


class Planner:
    """Plans the TPU program of ``module`` with ``table`` (op name -> Entry); ``locs`` the MLIR location
    of every op by its walk index."""

    def __init__(self, module: Module, locs: list[str], table: dict[str, Entry]):
        self.module, self.locs, self.table = module, locs, table
        self.tree = module.tree
        self.uses: list[OpUse] = []
        self.unsupported: list[Unsupported] = []
        self.platform_cases = {op for op, _ in module.cases}
        self.tpu_index = module.platforms.index("tpu") if "tpu" in module.platforms else None
        self.funcs: dict[str, Compiled | None] = {}

    # -- what translators ask
    def where(self, op: Op) -> str:
        return where_of(self.locs[op.index]) if 0 <= op.index < len(self.locs) else "unknown location"

    def type(self, value: int) -> Type:
        return self.tree.type(value)

    def dtype(self, value: int) -> Any:
        return dtype_of(self.type(value).dtype)

    def shape(self, value: int) -> tuple[int, ...]:
        shape = self.type(value).shape
        if any(d is None for d in shape):
            raise Refuse(f"a dynamic shape ({self.type(value).text}) after refinement")
        return tuple(int(d) for d in shape)

    def static(self, value: int) -> Any:
        """The value of a small integer ``value`` fixed by the module (constants, shape arithmetic, the
        platform index at the TPU's), else None."""
        return scalar_value(self.module, value, self.tpu_index)

    def block(self, block: Block) -> Compiled:
        compiled = Compiled(tuple(block.args))
        for op in block.ops:
            if op.name in TERMINATORS:
                self.uses.append(OpUse(op.name, self.where(op)))
                compiled.returns = tuple(op.operands)
                continue
            step = self.step(op)
            if step is not None:
                compiled.steps.append(step)
        return compiled

    def func(self, name: str) -> Compiled | None:
        """A private function of the module, planned once (None while it is being planned: a recursion)."""
        if name in self.funcs:
            return self.funcs[name]
        fn = self.tree.funcs.get(name)
        if fn is None or not fn.regions or not fn.regions[0]:
            raise Refuse(f"calls @{name}, which the module does not define")
        self.funcs[name] = None
        compiled = self.block(fn.regions[0][0])
        self.funcs[name] = compiled
        return compiled

    # -- one op
    def label(self, op: Op) -> str:
        return f"{op.name} @{target(op)}" if op.name == "stablehlo.custom_call" else op.name

    def refuse(self, op: Op, why: str) -> None:
        self.unsupported.append(Unsupported(self.label(op), self.where(op), why))

    def step(self, op: Op) -> Step | None:
        label, where = self.label(op), self.where(op)
        self.uses.append(OpUse(label, where))
        entry = self.table.get(op.name)
        if entry is None:
            self.refuse(op, "the executor has no translation for this op")
            return None
        extra = sorted(set(op.attrs) - entry.attrs - IGNORED_ATTRS)
        if extra:
            self.refuse(op, "attribute " + ", ".join(f"{k} = {str(op.attrs[k])[:80]}" for k in extra))
            return None
        for value in (*op.operands, *op.results):
            t = self.type(value)
            if t.kind == "tensor" and (not t.dtype or any(d is None for d in t.shape)):
                self.refuse(op, f"a value of type {t.text}")
                return None
        try:
            fn = entry.build(op, self)
        except (Refuse, AttrError) as exc:
            self.refuse(op, str(exc))
            return None
        return Step(fn, tuple(op.operands), tuple(op.results), label, where, tuple(self._declared(r) for r in op.results))

    def _declared(self, value: int) -> Any:
        t = self.type(value)
        return (tuple(int(d) for d in t.shape), dtype_of(t.dtype)) if t.kind == "tensor" else None


def captures(block: Block) -> set[int]:
    """The values a block reads that are defined outside it (StableHLO regions may read the enclosing block's)."""
    from ..program.mlir_tree import walk

    defined = set(block.args)
    used: set[int] = set()
    for op in block.ops:
        for inner in walk(op):
            used.update(inner.operands)
            defined.update(inner.results)
            for region in inner.regions:
                for b in region:
                    defined.update(b.args)
    return used - defined


def numpy_value(x: Any) -> bool:
    """Whether ``x`` is known while planning (a numpy constant, not a traced value)."""
    return isinstance(x, (np.ndarray, np.generic))
