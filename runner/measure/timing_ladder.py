"""A task made smaller through its own ``CONFIG``, for correctness checks that fit on a laptop.

JAXBench (and MaxKernel) tasks state their sizes in a ``CONFIG`` dict that ``create_inputs`` and
``workload`` read when called. Interpret mode on CPU cannot run them at full size (the worker meets
its memory limit, or runs for hours), and cutting the inputs' dims behind the task's back breaks a
task that reshapes its inputs first (RMSNorm's rows) or builds a mask or page table from CONFIG.
So the task is shrunk where it says its size: ``config_ladder(prep, shapes)`` halves the int
CONFIG values that are sizes of the inputs, the largest byte share first (a value tried at 1/8,
1/4, then 1/2 of itself: a ladder), and keeps a step only when, with CONFIG at that size in the
candidate's and the reference's modules:

- the inputs function makes the inputs (``jax.eval_shape``, nothing runs) and the reference traces;
- the candidate traces and makes the same pallas_calls with the same block and scratch shapes,
  every block still tiling its operand (divisibility kept), and every grid axis that had two or
  more steps still has two or more (the mask/page structure of a reduced grid is still walked);

It stops once the interpreter's peak memory (``peak_bytes``: the inputs and outputs held by
interpret mode several times over, plus the reference's largest intermediate) fits ``budget`` and
the grid is small enough to interpret in seconds. The result names the size it stands at
("seq_len 512 of 4096, batch 1 of 4"): a verdict there is a verdict at that size, said as such.

Worker side: imports jax.
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass
from typing import Any, Callable

import jax

from . import timing_inputs as inputs_mod
from ..tasks import tasks_runtime
from ..tier3.interpret_shrink import input_bytes

MAX_TRIES = 60  # traces of the candidate spent at most
MAX_STEPS = 512  # grid steps of all calls together that interpret mode runs in seconds
PEAK_FACTOR = 12  # interpret mode holds the inputs and outputs this many times over (copies, NaN fill, f32
# upcasts, compare): 8p GEMM measured 4.1 GiB resident (jax included) where 6x estimated 1.7 GiB
TARGET_BYTES = 256 << 20  # the ladder goes on down while the estimate is above this (smaller runs faster)
DEFAULT_BUDGET = 1 << 30  # without a worker memory limit


@dataclass(frozen=True)
class ConfigSize:
    """The task at a reduced CONFIG: what ran, and how it is said."""

    scaled: dict[str, int]  # the CONFIG values changed (name -> reduced value)
    full: dict[str, int]  # their values as the task states them
    shapes: tuple[Any, ...]  # abstract inputs at that size
    peak_bytes: int  # the interpreter's estimated peak at that size
    steps: int  # grid steps of all the candidate's calls at that size
    second: dict[str, int] | None = None  # a second, larger reduced size that also fits (the shape check)

    @property
    def verified_at(self) -> str:
        return ", ".join(f"{k} {v} of {self.full[k]}" for k, v in self.scaled.items())

    @property
    def second_at(self) -> str:
        """The second size, said as ``verified_at`` is."""
        return ", ".join(f"{k} {v} of {self.full[k]}" for k, v in (self.second or {}).items())

    @property
    def note(self) -> str:
        return (f"checked in TPU interpret mode at a reduced size through the task's CONFIG ({self.verified_at}; "
                f"inputs {describe(self.shapes)}, " + (f"{self.steps} grid steps, " if self.steps else "") + f"an estimated interpreter peak of "
                f"{self.peak_bytes / 2**20:.0f} MiB): block shapes, tiling and two or more steps per blocked grid "
                "axis kept")


def describe(shapes: Any) -> str:
    return ", ".join(f"{jax.numpy.dtype(a.dtype).name}{list(a.shape)}" for a in jax.tree.leaves(shapes)
                     if hasattr(a, "shape"))


BUDGET_SHARE = 3  # a check may take 1/BUDGET_SHARE of the worker's memory limit (the judge sends its own)


def budget_bytes() -> int:
    """What one check may take: a third of the worker's memory limit (it holds jax and the task too); a
    process the worker started (the judge's candidate) reads the worker's limit (memory_guard.limit_mb)
    and the share the judge sends (runner/judging/sizes.ladder_knobs)."""
    from ..memory_guard import limit_mb

    limit = limit_mb()
    return (limit << 20) // max(BUDGET_SHARE, 1) if limit else DEFAULT_BUDGET


def grid_of(call: Any) -> tuple[int, ...]:
    spec = call.kwargs.get("grid_spec")
    grid = getattr(spec, "grid", None) if spec is not None else call.kwargs.get("grid")
    if grid is None:
        return ()
    grid = grid if isinstance(grid, (tuple, list)) else (grid,)
    return tuple(int(g) if isinstance(g, int) else 0 for g in grid)


def peak_bytes(reference: Callable[..., Any], shapes: tuple[Any, ...]) -> int:
    """The interpreter's estimated peak for one check at these shapes (see the module doc)."""
    held = input_bytes(shapes)
    try:
        out = jax.eval_shape(reference, *shapes)
        held += input_bytes(out)
        largest = _largest_intermediate(reference, shapes)
    except Exception:  # noqa: BLE001 - a reference that does not trace is reported by the caller
        largest = 0
    return PEAK_FACTOR * held + 3 * largest


def _largest_intermediate(fn: Callable[..., Any], shapes: tuple[Any, ...]) -> int:
    jaxpr = jax.make_jaxpr(fn)(*shapes)
    largest = 0
    try:
        from jax.extend.core import jaxprs_in_params as subs
    except ImportError:  # an older jax: the top level only
        def subs(_: Any) -> tuple:
            return ()

    def walk(jx: Any) -> None:
        nonlocal largest
        for eqn in jx.eqns:
            for var in eqn.outvars:
                aval = getattr(var, "aval", None)
                if hasattr(aval, "shape") and hasattr(aval, "dtype"):
                    largest = max(largest, math.prod(aval.shape) * aval.dtype.itemsize)
            for sub in subs(eqn.params):
                walk(sub)

    walk(jaxpr.jaxpr)
    return largest


def _create_inputs(prep: Any) -> Callable[..., Any] | None:
    """The task's inputs function: the candidate file's ``create_inputs``, else (a stand-alone kernel
    scored against a task) the reference file's."""
    create = vars(prep.module).get("create_inputs") if prep.module is not None else None
    if not callable(create) and prep.reference is not None:
        space = getattr(inspect.unwrap(prep.reference), "__globals__", None)
        create = space.get("create_inputs") if isinstance(space, dict) else None
    return create if callable(create) else None


def spaces_of(prep: Any) -> tuple[Callable[..., Any], ...]:
    """The functions whose modules' CONFIG a reduced size is written into: the candidate's entry and
    inputs function, the reference."""
    create = _create_inputs(prep)
    return tuple(f for f in (prep.task.entry, prep.reference, create) if callable(f))


def make_inputs(prep: Any, scaled: dict[str, int] | None) -> Callable[[], Any]:
    """The task's inputs function at a CONFIG size (called inside ``config_scaled``: a create_inputs
    that reads the global CONFIG; one that names CONFIG keys gets them as arguments)."""
    create = _create_inputs(prep)
    if not callable(create) or not scaled:
        return prep.task.inputs
    config = {**(prep.task.config or {}), **scaled}
    return lambda: tasks_runtime._call_with_config(create, config)


def scaled_probe(prep: Any, scaled: dict[str, int] | None) -> Callable[..., Any]:
    """A fresh instance's entry (``Prepared.probe``) whose module reads CONFIG at the reduced size."""
    fn = prep.probe()
    if scaled:
        inner = fn.func if hasattr(fn, "func") else fn
        space = getattr(getattr(inner, "__wrapped__", inner), "__globals__", None)
        if isinstance(space, dict) and isinstance(space.get("CONFIG"), dict):
            space["CONFIG"] = {**space["CONFIG"], **scaled}  # a throwaway instance: kept patched
    return fn


def task_prefix(prep: Any) -> tuple[Any, tuple[Any, ...]] | None:
    """``prep`` with the task as its reference's own file makes it (JAXBench's baseline.py ``create_inputs``) and the
    candidate's entry given the first k of those inputs - the judge's mapping where the two files differ only so
    (megablox: the baseline also passes a static size the kernel derives) - with the task's abstract inputs;
    None when no prefix of them traces the candidate (another layout: not verified)."""
    import dataclasses
    import functools
    import types

    own = tasks_runtime.own_task(prep.reference)
    if own is None:
        return None
    _, make = own
    try:
        full = inputs_mod.shapes_of(make)
    except Exception:  # noqa: BLE001 - the reference's file makes no inputs here
        return None
    leaves = jax.tree.leaves(full)
    k = next((k for k in range(len(leaves) - 1, 0, -1) if _traces(prep.task.entry, leaves[:k])), None)
    if k is None:
        return None

    def prefix(entry: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(entry)  # (its module's CONFIG is still the one a reduced size scales)
        def first(*args: Any) -> Any:
            return entry(*jax.tree.leaves(args)[:k])
        return first

    loader = prep.probe_loader or (lambda: prep.task.entry)
    task = dataclasses.replace(prep.task, entry=prefix(prep.task.entry), inputs=make)
    module = types.SimpleNamespace(create_inputs=inspect.unwrap(prep.reference).__globals__["create_inputs"])
    return dataclasses.replace(prep, task=task, module=module, probe_loader=lambda: prefix(loader()),
                               reference=inputs_mod.with_static_inputs(prep.reference, make)), full


def _traces(fn: Callable[..., Any], args: list[Any]) -> bool:
    try:
        jax.eval_shape(fn, *args)
        return True
    except Exception:  # noqa: BLE001 - not at these inputs
        return False


def takes_candidate_inputs(prep: Any, shapes: tuple[Any, ...]) -> str | None:
    """None when the reference traces on the candidate's inputs, else why not."""
    try:
        jax.eval_shape(prep.reference, *shapes)
        return None
    except Exception as exc:  # noqa: BLE001 - another signature or layout
        return f"{type(exc).__name__}: {str(exc)[:160]}"


def config_ladder(prep: Any, shapes: tuple[Any, ...], calls: list[Any],
                  budget: int | None = None) -> ConfigSize | str | None:
    """The task at a CONFIG size that fits (see the module doc); None when it fits as it is; a
    string (why not) when no CONFIG value could be reduced far enough. ``calls``: the candidate's
    pallas_calls at the full size."""
    ladder = _Ladder(prep, shapes, calls, budget or budget_bytes())
    ok, peak = ladder.fits(shapes, calls)
    if ok:
        return None
    keys = _ladder_keys(ladder.config, shapes)
    if not keys:
        return "no int CONFIG value is a size of the inputs"
    ladder.state = {"scaled": {}, "shapes": shapes, "calls": calls, "tries": 0, "peak": peak}
    refused = ladder.climb(keys)
    return ladder.result(refused)


def _steps_of(calls: list[Any]) -> int:
    """The grid steps of all ``calls`` together."""
    return sum(math.prod(g) for g in (grid_of(c) for c in calls) if g)


def _ladder_keys(config: dict[str, Any], shapes: tuple[Any, ...]) -> list[str]:
    """The CONFIG names the ladder may reduce, the sizes of the inputs first."""
    sizes = {d for leaf in jax.tree.leaves(shapes) for d in getattr(leaf, "shape", ())}
    # every int size: one that no input has (attention heads of a fused projection) may still
    # shrink the reference's intermediates; a step is kept only when the estimated peak drops
    keys = [k for k, v in config.items() if _is_int(v) and v > 1]
    keys.sort(key=lambda k: not (config[k] in sizes or _shapes_follow(k)))  # sizes of the inputs first
    return keys


class _Ladder:
    """``config_ladder``'s climb down: the task, the full size's blocks, grids and sharing that every
    kept step must keep, and ``state`` (the size it stands at: scaled values, input shapes, the
    candidate's calls there, traces spent, the estimated peak)."""

    def __init__(self, prep: Any, shapes: tuple[Any, ...], calls: list[Any], budget: int) -> None:
        self.prep, self.shapes, self.budget = prep, shapes, budget
        self.config = dict(prep.task.config or {})
        self.spaces = spaces_of(prep)
        self.reference = prep.reference
        self.want, self.shared = block_structure(calls), sharing(calls)
        self.grids = [grid_of(c) for c in calls]
        self.state: dict[str, Any] = {}
        self.last_why = ""

    def probe(self, s: tuple[Any, ...], scaled: dict[str, int]) -> list[Any]:
        from ..tier3.interpret import _namespaces, probe_calls

        fn = scaled_probe(self.prep, scaled)
        return probe_calls(fn, s, _namespaces(fn))

    def fits(self, s: tuple[Any, ...], cs: list[Any]) -> tuple[bool, int]:
        peak = peak_bytes(self.reference, s)
        return peak <= min(self.budget, TARGET_BYTES) and _steps_of(cs) <= MAX_STEPS, peak

    def settled(self) -> bool:  # the current size's peak was estimated when it was kept (attempt)
        return self.state["peak"] <= min(self.budget, TARGET_BYTES) and _steps_of(self.state["calls"]) <= MAX_STEPS

    def climb(self, keys: list[str]) -> dict[str, str]:
        """Steps down, the key sizing the most input bytes first, until the size settles, every key is at
        its floor or the traces are spent; returns key -> why its last step was refused."""
        state, floor = self.state, set()
        refused: dict[str, str] = {}  # said when nothing fits
        while state["tries"] < MAX_TRIES:
            if self.settled():
                break
            order = [k for k in _by_bytes(keys, state, self.config) if k not in floor]
            if not order:
                break
            key = order[0]
            if not self.attempt(key):
                floor.add(key)
                refused[key] = self.last_why
        return refused

    def attempt(self, key: str) -> bool:
        """One step down the ladder for ``key``: kept (True) at the first
        smaller value the task takes with the kernel's blocks, grid and sharing kept and a lower peak."""
        state, config, spaces = self.state, self.config, self.spaces
        value = state["scaled"].get(key, config[key])
        for new in _smaller(value, config[key]):
            if state["tries"] >= MAX_TRIES:
                return False
            state["tries"] += 1
            trial = {**state["scaled"], key: new}
            try:
                with inputs_mod.config_scaled(spaces, trial):
                    new_shapes = inputs_mod.shapes_of(make_inputs(self.prep, trial))
                    if _lane_cut(self.shapes, new_shapes):
                        self.last_why = f"{key}={new}: an input's last (lane) dim would drop below 128"
                        continue
                    traced = self.probe(new_shapes, trial)
                    jax.eval_shape(self.reference, *new_shapes)
            except Exception as exc:  # noqa: BLE001 - the task does not take this size: a smaller step next
                self.last_why = f"{key}={new}: {type(exc).__name__}: {str(exc)[:160]}"
                continue
            why = _kept(self.want, self.grids, traced, self.shared)
            if why:
                self.last_why = f"{key}={new}: {why}"
                continue
            with inputs_mod.config_scaled(spaces, trial):
                lower = peak_bytes(self.reference, new_shapes)
            if lower >= state["peak"] and new_shapes == state["shapes"]:
                self.last_why = f"{key} sizes neither the inputs nor the reference's intermediates"
                return False
            state.update(scaled=trial, shapes=new_shapes, calls=traced, peak=lower)
            return True
        return False

    def result(self, refused: dict[str, str]) -> ConfigSize | str:
        """The size the climb stands at (with a second size one step up, when it fits), or why not."""
        state, config, budget = self.state, self.config, self.budget
        peak = state["peak"]
        if not state["scaled"]:
            return f"no CONFIG value could be reduced with the kernel's blocks kept ({self.last_why or 'nothing tried'})"
        result = ConfigSize({k: v for k, v in state["scaled"].items()}, {k: config[k] for k in state["scaled"]},
                            state["shapes"], peak, _steps_of(state["calls"]))
        if peak <= budget:
            result = _with_second(result, config, self.spaces, self.prep, self.probe, self.want, self.grids, budget,
                                  self.fits, self.shared)
        if peak > budget:
            return (f"at the smallest size the kernel takes ({result.verified_at}) the interpreter would still need "
                    f"about {peak / 2**20:.0f} MiB (the check's budget is {budget / 2**20:.0f} MiB; {state['tries']} "
                    f"sizes tried; refused: {'; '.join(refused.values()) or 'none'})")
        return result


def _with_second(result: ConfigSize, config: dict[str, Any], spaces: tuple, prep: Any,
                 probe: Callable[..., list[Any]], want: list[tuple], grids: list, budget: int,
                 fits: Callable[..., tuple[bool, int]], shared: list[tuple] | None = None) -> ConfigSize:
    """``result`` with a second size one step up the ladder (one value doubled back) when it fits."""
    import dataclasses

    for key in sorted(result.scaled, key=lambda k: result.scaled[k]):
        up = result.scaled[key] * 2
        if up > config[key]:
            continue
        trial = {**result.scaled, key: up}
        try:
            with inputs_mod.config_scaled(spaces, trial):
                s = inputs_mod.shapes_of(make_inputs(prep, trial))
                traced = probe(s, trial)
                if _kept(want, grids, traced, shared) is None and fits(s, traced)[1] <= budget:
                    return dataclasses.replace(result, second=trial)
        except Exception:  # noqa: BLE001 - no second size there: the next value
            continue
    return result


def _lane_cut(before: Any, after: Any) -> bool:
    """Whether some input's last dim, the TPU's lane dim, went from 128 or more to less (a whole-dim
    block there would lose its (8, 128) tiling)."""
    pairs = zip(jax.tree.leaves(before), jax.tree.leaves(after))
    return any(len(getattr(a, "shape", ())) >= 2 and len(getattr(b, "shape", ())) >= 2 and not _index_table(a)
               and a.shape[-1] >= 128 > b.shape[-1] for a, b in pairs)  # 1-D: counts, sizes, scalars


def _index_table(array: Any) -> bool:
    """An int32 table (a page table, a block mask: scalar-prefetched to SMEM, no lane tiling); JAXBench
    6p's (batch, pages_per_seq) page table kept pages_per_seq at 128 or more."""
    return str(getattr(array, "dtype", "")) in ("int32", "uint32")


def _shapes_follow(key: str) -> bool:
    """CONFIG names that size an input without being one of its dims (pages per sequence, tokens)."""
    return any(word in key for word in ("pages", "seq", "tokens", "len"))


def _by_bytes(keys: list[str], state: dict[str, Any], config: dict[str, Any]) -> list[str]:
    """The keys whose current value sizes the most input bytes first."""
    share: dict[str, int] = {}
    for key in keys:
        value = state["scaled"].get(key, config[key])
        share[key] = sum(input_bytes(a) for a in jax.tree.leaves(state["shapes"])
                         if hasattr(a, "shape") and value in a.shape)
    return sorted(keys, key=lambda k: (-share[k], -int(state["scaled"].get(k, config[k]))))


def block_structure(calls: list[Any]) -> list[tuple]:
    """Each call's blocks as ``interpret_shrink.blocks_of`` states them, with a block dim that spans
    its whole operand dim written "whole" (it may follow the dim down: a whole-sequence block)."""
    from ..tier3.interpret_shrink import blocks_of

    out = []
    for call, (ins, outs, scratch, tiles) in zip(calls, blocks_of(calls)):
        grid_spec = call.kwargs.get("grid_spec")
        prefetch = int(getattr(grid_spec, "num_scalar_prefetch", 0) or 0) if grid_spec is not None else 0
        operands = [o for o in jax.tree.leaves(tuple(call.operands or ())[prefetch:]) if hasattr(o, "shape")]
        results = [o for o in jax.tree.leaves(call.out_shape) if hasattr(o, "shape")]
        blocks = list(ins) + list(outs)

        def whole(block: Any, array: Any) -> Any:
            if block is None or len(block) != len(array.shape):
                return block
            return tuple("whole" if b is not None and b == d else b for b, d in zip(block, array.shape))

        named = tuple(whole(b, a) for b, a in zip(blocks, operands + results))
        out.append((named, len(scratch), tiles))
    return out


SHARING_STEPS = 256  # grid steps along one axis whose blocks are compared (the rest is not walked)


def sharing(calls: list[Any]) -> list[tuple]:
    """How each input's blocks are shared along each multi-step grid axis, per call: "fixed" (every
    step reads the same block), "own" (every step its own), "shared" (some steps share one: a
    grouped-query kernel's K/V index map sends a group of query heads to one kv head). A size where
    a group of query heads has fallen to one head reads "own" or "fixed" there: the grouping, and a
    bug in it, would not be checked. The scalar-prefetched tables an index map reads (a splash
    kernel's mask tables) are all zeros here, at every size alike; an index map that does not answer
    ints is left out (None)."""
    import numpy as np

    out = []
    for call in calls:
        grid_spec = call.kwargs.get("grid_spec")
        prefetch = int(getattr(grid_spec, "num_scalar_prefetch", 0) or 0) if grid_spec is not None else 0
        tables = tuple(np.zeros(o.shape, o.dtype) for o in tuple(call.operands or ())[:prefetch] if hasattr(o, "shape"))
        ins = getattr(grid_spec, "in_specs", None) if grid_spec is not None else call.kwargs.get("in_specs")
        grid = grid_of(call)
        out.append(tuple(_shared_along(getattr(spec, "index_map", None), grid, tables)
                         for spec in jax.tree.leaves(ins or (), is_leaf=lambda x: hasattr(x, "index_map"))))
    return out


def _shared_along(index_map: Any, grid: tuple[int, ...], tables: tuple[Any, ...] = ()) -> tuple[str, ...] | None:
    if not callable(index_map):
        return None
    kinds = []
    try:
        for axis, n in enumerate(grid):
            if n < 2:
                continue
            seen = set()
            steps = min(n, SHARING_STEPS)
            for i in range(steps):
                point = [0] * len(grid)
                point[axis] = i
                block = index_map(*point, *tables)
                seen.add(tuple(int(b) for b in (block if isinstance(block, (tuple, list)) else (block,))))
            kinds.append("fixed" if len(seen) == 1 else "own" if len(seen) == steps else "shared")
    except Exception:  # noqa: BLE001 - an index map that needs traced values: not compared
        return None
    return tuple(kinds)


def _kept(want: list[tuple], grids: list[tuple[int, ...]], traced: list[Any],
          shared: list[tuple] | None = None) -> str | None:
    """None when the reduced trace keeps every call's blocks, tiling, multi-step grid axes and (with
    ``shared``, the full size's ``sharing``) the blocks its index maps share."""
    if len(traced) != len(want):
        return f"the candidate makes {len(traced)} pallas_call(s), not {len(want)}"
    if block_structure(traced) != want:
        return "a block shape changed, or a block no longer tiles its operand"
    if shared is not None and sharing(traced) != shared:
        return "an input's blocks would no longer be shared by the grid steps that share them (a group of one)"
    for before, call in zip(grids, traced):
        after = grid_of(call)
        if len(after) != len(before):
            return "the grid's rank changed"
        for axis, (b, a) in enumerate(zip(before, after)):
            if b >= 2 and a < 2:
                return f"grid axis {axis} would have {a} step(s) (it had {b})"
    return None


def _smaller(value: int, full: int | None = None) -> list[int]:
    """The ladder's rungs below ``value``: 1/8, 1/4, 1/2 (``_lane_cut`` keeps the inputs' lane dims,
    so a model width does not fall to 1; a count of 16 or more, experts or heads, stays at 2 or
    more, so the grouping is still walked)."""
    out = []
    least = 2 if (full or value) >= 16 else 1
    for new in (value // 8, value // 4, value // 2):
        if least <= new < value and value % new == 0 and new not in out:
            out.append(new)
    return out


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def concrete_at(prep: Any, scaled: dict[str, int]) -> tuple[Any, ...] | None:
    """The task's own inputs made at the reduced size (its masks, page tables and lengths, small);
    call inside ``config_scaled``."""
    return inputs_mod.concrete_template(make_inputs(prep, scaled))
