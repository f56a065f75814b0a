"""Tier 3: run a task in TPU interpret mode and report what went wrong (worker side: imports jax).

``run_tier3(task, path, text, target=...)`` runs the task's entry on CPU with
``pltpu.InterpretParams(detect_races=True, uninitialized_memory="nan", out_of_bounds_reads="raise",
num_cores_or_threads=2, random_seed=...)`` (one core, steps in order, to recheck a finding for a
one-core target) forced onto every ``pallas_call`` (jax's
``force_tpu_interpret_mode``; the user's file is not edited), and answers with plain records in the
``runner/errors.py`` format plus ``code``/``tier``/``origin``:

- PLS301 a DMA race, at the kernel line the interpreter names (the other access is related);
- PLS302 an out-of-bounds read or DMA (the interpreter raises instead of clamping);
- PLS303 output blocks left NaN (fresh memory is NaN-filled), naming the block indices;
- PLS304 a result outside the tolerance of the reference, with the max abs/rel error; when
  re-running with the reduction axes "arbitrary" fixes it, at ``dimension_semantics``;
- PLS305 the interpreter rejected something the compiler accepts (semantics order), a warning;
- PLS300 any other exception raised while interpreting.

Shapes: the example inputs are used as they are when small; larger ones are shrunk along dims
that map onto BlockSpec dims, to a couple of blocks each (still multiples of the block shape, so the
tiling rules hold), and when they are still large, by a search over smaller sizes that keeps every
call's blocks (``runner/tier3/interpret_shrink.py``); the shapes actually used are returned. Two simulated TensorCores and a
shuffled order of "parallel" grid steps expose a reduction axis wrongly marked parallel (a
pallas_call under ``jax.vmap``, whose semantics jax's interpreter cannot run, runs again without
them, and its parallel axes are then run backward by remapping its grid indices, as they are when
there is no reference to compare with: ``runner/grid_order.py``); on a one-core target (v5e, v6e)
such findings are rechecked as that chip runs the kernel (one core, steps in order) and, when only
two cores get it wrong, reported as warnings. Times are CPU interpret-mode wall clock: they say
nothing about TPU time. One run is ``runner/tier3/interpret_run.py``; reading it, and the reruns that
explain it, ``runner/tier3/interpret_diagnose.py``.
"""

from __future__ import annotations

import contextlib
import linecache
import math
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental.pallas import tpu as pltpu

from ...wire import messages
from .. import errors as errors_mod
from ..intercept import RecordedCall, block_shapes
from .interpret_config import Reduced, config_dicts, config_set, reduce_config
from .interpret_diagnose import diagnose
from .interpret_distinct import add_tails, shrink_plan, split_square
from .interpret_run import SIMULATED_CORES, all_arbitrary, interpret_once, shuffling_seed
from .interpret_run import namespaces as _namespaces  # the timing modules import it from here
from .interpret_shrink import BUDGET_BYTES, input_bytes, shrink_further
from .interpret_verdicts import state_of

MAX_ELEMENTS = 1 << 20  # inputs larger than this (per array) are shrunk when the blocks allow
TWO_CORE_CHIPS = "two-core chips such as v4/v5p"


# --------------------------------------------------------------------------- shapes and inputs


def probe_calls(fn: Callable[..., Any], args: tuple[Any, ...], modules: tuple[Any, ...] = ()) -> list[RecordedCall]:
    """The pallas_calls ``fn`` makes for these abstract args (traced with eval_shape, nothing runs)."""
    from ..reach import traced_calls

    return traced_calls(fn, args, modules)


def shrink_shapes(args: tuple[Any, ...], calls: list[RecordedCall], max_elements: int = MAX_ELEMENTS,
                  blocks_per_dim: int = 2, distinct: bool = False) -> tuple[tuple[Any, ...], bool]:
    """Smaller abstract args that keep every dim a multiple of the blocks it is cut into.

    Nothing is touched unless an array is above ``max_elements``; a dim shrinks only when it is the dim of a
    pallas_call operand with the same shape, cut by a block dim smaller than it, to
    ``blocks_per_dim`` blocks (one when the size is not a multiple of that many). Sizes shared by
    several dims (matmul's K) shrink to the same value. Returns (args, whether anything changed).
    ``distinct`` (tier 3's own runs): each size value gets its own block count, and a size that is not a
    multiple of its block keeps its partial last block (``runner/tier3/interpret_distinct.py``).
    """
    plan = shrink_plan_of(args, calls, max_elements, blocks_per_dim, distinct)
    if not plan:
        return args, False
    new_size = {size: new for size, (new, _unit) in plan.items()}
    leaves, treedef = jax.tree.flatten(args)
    out = []
    for a in leaves:  # every array, small ones too: a size shared with a large one (matmul's K) must
        shape = getattr(a, "shape", None)  # shrink in both, or the reference cannot take them
        small_given = math.prod(shape or ()) <= max_elements and not isinstance(a, jax.ShapeDtypeStruct)
        if shape is None or small_given or not any(d in new_size for d in shape):  # given values stay
            out.append(a)
            continue
        out.append(jax.ShapeDtypeStruct(tuple(new_size.get(d, d) for d in shape), a.dtype))
    new_args = jax.tree.unflatten(treedef, out)
    return new_args, new_args != args


def shrink_plan_of(args: tuple[Any, ...], calls: list[RecordedCall], max_elements: int = MAX_ELEMENTS,
                   blocks_per_dim: int = 2, distinct: bool = False) -> dict[int, tuple[int, int]]:
    """{original size: (new size, block unit)} ``shrink_shapes`` applies (empty: nothing shrinks)."""
    leaves = jax.tree.leaves(args)
    if all(math.prod(getattr(a, "shape", ())) <= max_elements for a in leaves):
        return {}
    tiled: dict[int, set[int]] = {}  # original size -> block dims that cut it evenly
    uneven: dict[int, set[int]] = {}  # ... that leave a partial last block
    whole: set[int] = set()  # sizes some operand takes whole (block == size or no block)
    for call in calls:
        specs = block_shapes(_in_specs(call))
        for operand, spec in zip(call.operands or (), specs):
            if not isinstance(operand, jax.ShapeDtypeStruct):
                continue
            for i, size in enumerate(operand.shape):
                b = spec.block_shape[i] if spec.block_shape and i < len(spec.block_shape) else None
                if b is None or b >= size or (size % b and not distinct):
                    whole.add(size)
                else:
                    (uneven if size % b else tiled).setdefault(size, set()).add(b)
    return shrink_plan(tiled, uneven, whole, blocks_per_dim, distinct)


def _in_specs(call: RecordedCall) -> Any:
    """The call's input BlockSpecs, given directly or inside a ``grid_spec`` (PrefetchScalarGridSpec)."""
    specs = call.kwargs.get("in_specs")
    grid_spec = call.kwargs.get("grid_spec")
    if specs is None and grid_spec is not None:
        specs = getattr(grid_spec, "in_specs", None)
        prefetch = getattr(grid_spec, "num_scalar_prefetch", 0) or 0
        if prefetch and call.operands:  # scalar-prefetch operands come first and have no BlockSpec
            specs = [None] * prefetch + list(specs if isinstance(specs, (list, tuple)) else [specs])
    return specs


def random_inputs(args: tuple[Any, ...], seed: int = 0) -> tuple[Any, ...]:
    """Concrete arrays for abstract args: floats ~ N(0, 1); integers and bools are 0 (often indices)."""
    rng = np.random.default_rng(seed)

    def make(a: Any) -> Any:
        if not hasattr(a, "shape") or not hasattr(a, "dtype"):
            return a
        dtype = jnp.dtype(a.dtype)
        if jnp.issubdtype(dtype, jnp.floating):
            return jnp.asarray(rng.standard_normal(a.shape, dtype=np.float32)).astype(dtype)
        if jnp.issubdtype(dtype, jnp.complexfloating):
            return jnp.asarray(rng.standard_normal(a.shape) + 1j * rng.standard_normal(a.shape)).astype(dtype)
        return jnp.zeros(a.shape, dtype)

    return jax.tree.map(make, args, is_leaf=lambda a: hasattr(a, "shape") and hasattr(a, "dtype"))


def describe_shapes(args: Any) -> str:
    leaves = jax.tree.leaves(args, is_leaf=lambda a: hasattr(a, "shape") and hasattr(a, "dtype"))
    return ", ".join(f"{jnp.dtype(a.dtype).name}{list(a.shape)}" for a in leaves if hasattr(a, "shape"))


# --------------------------------------------------------------------------- the tier


def run_tier3(task: Any, path: str, text: str | None = None, say: Callable[[str], None] | None = None,
              target: str | None = None) -> dict[str, Any]:
    """Tier 3 for one task (a ``tasks_runtime.RuntimeTask``-like object); a plain JSON dict.

    The first run simulates two TensorCores (a megacore chip). For a one-core ``target`` (v5e, v6e)
    whatever that run finds is checked again as the target runs it (one core, grid steps in order):
    what is wrong only with two cores becomes a warning that says so (``one_core_verdict``).

    ``{"state": "ok"|"error", "errors": [record...], "seconds": float, "shapes": str,
    "shrunk": bool, "note": "tier 3: ..."}`` — every record has ``tier`` 3 and a ``code``.
    """
    say = say or (lambda _m: None)
    source = text if text is not None else _read(path)
    result: dict[str, Any] = {"state": "ok", "errors": [], "seconds": 0.0, "shapes": "", "shrunk": False}
    try:
        abstract = task.abstract_args()
    except Exception:  # noqa: BLE001 - the task's inputs failed; tier 1 reports the details
        result["state"] = "skipped: the example inputs failed"
        return result
    namespaces = _namespaces(task.entry)
    reduced = None
    try:
        calls = probe_calls(task.entry, abstract, namespaces)
        if too_large(abstract):  # first the task's own CONFIG at a smaller size: its tables stay its own
            reduced = reduce_config(task, abstract, calls, lambda args: probe_calls(task.entry, args, namespaces))
    except Exception:  # noqa: BLE001 - tracing failed: the shrink below says so
        calls = []
    held = contextlib.ExitStack()
    if reduced is not None:
        held.enter_context(config_set(config_dicts(task), dict(reduced.values)))
    with held:
        return _run_tier3_at(task, path, source, say, target, result, abstract, reduced, calls)


def too_large(args: Any) -> bool:
    leaves = [a for a in jax.tree.leaves(args) if hasattr(a, "shape")]
    return input_bytes(args) > BUDGET_BYTES or any(math.prod(a.shape) > MAX_ELEMENTS for a in leaves)


def _run_tier3_at(task: Any, path: str, source: str, say: Callable[[str], None], target: str | None,
                  result: dict[str, Any], abstract: tuple[Any, ...], reduced: Reduced | None,
                  calls: list[RecordedCall]) -> dict[str, Any]:
    """Tier 3 at the shapes found here (``calls``: the entry's at the full shapes), or at ``reduced``
    (the task's CONFIG, held by the caller)."""
    shapes, shrunk, calls = tier3_shapes(task, abstract, reduced, calls)
    result["shapes"] = describe_shapes(shapes)
    result["shrunk"] = shrunk
    result["full_shapes"] = describe_shapes(abstract) if shrunk else None
    # at a reduced CONFIG the task's own inputs function makes the arrays (its tables included)
    inputs, made_up = _concrete_inputs(task, shapes, shrunk and reduced is None)
    seed = shuffling_seed(calls)
    say(f"tier 3: {task.name} (TPU interpret mode on CPU, {result['shapes']})")
    run = interpret_once(task.entry, inputs, seed=seed, user_files=(path,), modules=_namespaces(task.entry))
    total = run.seconds
    records = diagnose(run, task, inputs, path, source, say, seed)
    total += sum(records.pop("_reruns", []))
    cores = target_cores(target)
    if cores == 1 and state_of(records["errors"]) == "error":
        # Wrong with two simulated TensorCores: is it wrong on this one-core chip too? Its single core
        # runs every grid axis in order, as if all were "arbitrary".
        say(f"tier 3: {task.name} again as on {target} (1 TensorCore, grid steps in order)")
        own_run = interpret_once(task.entry, inputs, cores=1, semantics=all_arbitrary, user_files=(path,),
                                 modules=_namespaces(task.entry))
        own = diagnose(own_run, task, inputs, path, source, say, seed, one_core=True, calls=run.calls)
        total += own_run.seconds + sum(own.pop("_reruns", []))
        records["errors"] = one_core_verdict(own["errors"], records["errors"], target, own.pop("_compared", False))
    if made_up and _has_integers(shapes):
        _soften_result_records(records["errors"])
    result["errors"] = records["errors"]
    result["ran_lines"] = _ran_lines(task, shapes, path)
    result["seconds"] = round(total, 3)
    result["state"] = state_of(result["errors"])
    result["note"] = (
        f"tier 3: {task.name} ran in {total:.1f} s in CPU interpret mode (not TPU time): "
        + shrink_note(result["shapes"], result["full_shapes"], reduced.describe() if reduced else None)
    )
    return result


def _ran_lines(task: Any, shapes: tuple[Any, ...], path: str) -> list[int] | None:
    """The lines of ``path`` the task's kernels ran at these shapes (``traced_lines``; engine/findings/never_ran.py
    says the kernel code no check ran), None when the entry does not trace."""
    from .traced_lines import kernel_lines

    lines = kernel_lines(task.entry, shapes, path)
    return sorted(lines) if lines is not None else None


def tier3_shapes(task: Any, abstract: tuple[Any, ...], reduced: Reduced | None,
                 calls: list[RecordedCall]) -> tuple[tuple[Any, ...], bool, list[RecordedCall]]:
    """(shapes, shrunk, the calls at those shapes) tier 3 runs the task at: ``reduced``'s (its CONFIG, held
    by the caller), else the inputs shrunk (``shrink_shapes``, then ``shrink_further``), else as given.
    The locate step (``runner/tier3/locate_step.py``) runs its edits at the same shapes."""
    try:
        if reduced is not None:
            shapes, shrunk = reduced.shapes, True
            calls = probe_calls(task.entry, shapes, _namespaces(task.entry))
        else:
            if not calls:
                raise ValueError("the entry did not trace at the full shapes")
            shapes, shrunk, calls = _shrunk(task, abstract, calls)
            if input_bytes(shapes) > BUDGET_BYTES:  # still large: search smaller sizes that keep every block
                shapes, more = shrink_further(task.entry, shapes, calls,
                                              lambda args: probe_calls(task.entry, args, _namespaces(task.entry)))
                if more:
                    shrunk, calls = True, probe_calls(task.entry, shapes, _namespaces(task.entry))
    except Exception:  # noqa: BLE001 - tracing failed: run the given shapes and let the run report
        shapes, shrunk, calls = abstract, False, []
    return shapes, shrunk, calls


def _shrunk(task: Any, abstract: tuple[Any, ...], calls: list[RecordedCall]) -> tuple[tuple[Any, ...], bool, list[RecordedCall]]:
    """The inputs shrunk so bugs can show (``runner/tier3/interpret_distinct.py``: distinct extents, partial last
    blocks kept, square dims split where the task allows), else as before (two blocks per tiled dim)."""
    spaces = _namespaces(task.entry)
    probe = lambda args: probe_calls(task.entry, args, spaces)  # noqa: E731
    plan = shrink_plan_of(abstract, calls, distinct=True)
    if plan:
        shapes, shrunk = shrink_shapes(abstract, calls, distinct=True)
        try:
            traced = probe(shapes)
        except Exception:  # noqa: BLE001 - the kernel does not take these sizes: the plain shrink below
            traced = []
        if traced and len(traced) == len(calls):
            units = {new: unit for new, unit in plan.values()}
            originals = {new: size for size, (new, _unit) in plan.items()}
            split, moved = split_square(shapes, units, probe, task.entry, task.reference, originals)
            tailed, more = add_tails(split, units, probe, task.entry, task.reference)
            return (tailed, True, probe(tailed)) if moved or more else (shapes, shrunk, traced)
    shapes, shrunk = shrink_shapes(abstract, calls)
    if shrunk:
        calls = probe(shapes)  # the smaller shapes must still trace
    return shapes, shrunk, calls


def shrink_note(shapes: str, full_shapes: str | None, config: str | None = None) -> str:
    """Where the interpret run ran: the example inputs' shapes, or the shrunk ones and what they came from."""
    if not full_shapes:
        return f"interpret run at {shapes}"
    if config:
        return (f"interpret run at {shapes}, shrunk from {full_shapes} (the task's own inputs at CONFIG "
                f"{config}: its tables and indices as it draws them, block shapes kept)")
    return (f"interpret run at {shapes}, shrunk from {full_shapes} (block shapes kept, the grid shrunk to a "
            "few blocks per tiled dim: a different count per size, equal extents on different axes made "
            "different where the task allows it, a partial last block kept)")


def tier3_entry(entry: dict[str, Any], task: Any, path: str, say: Callable[[str], None] | None = None,
                target: str | None = None) -> None:
    """Fill one ``check`` result entry (runner/checks.py) with tier 3: state, records, time note."""
    failed = [t for t in ("1", "2")
              if entry["tiers"].get(t) == "error" and not (t == "2" and messages.tier2_only_vmem(entry["errors"]))
              and not messages.lowering_only(entry["errors"], int(t))]
    if failed:
        entry["tiers"]["3"] = f"skipped: tier {failed[0]} failed"
        return
    source = "".join(linecache.getlines(path)) or None  # the editor's buffer when one was sent
    try:
        out = run_tier3(task, path, source, say, target)
    except Exception as exc:  # noqa: BLE001 - a bug of ours must not lose tiers 1-2
        rec = errors_mod.record(exc, path, stage="tier 3")
        rec.update(tier=3, code="PLS300", origin="pallasite runner")
        out = {"state": "error", "errors": [rec], "note": None}
    entry["tiers"]["3"] = out["state"]
    entry["errors"].extend(out["errors"])
    if out.get("note"):
        entry.setdefault("notes", []).append(out["note"])
    entry["tier3"] = {k: out.get(k) for k in ("seconds", "shapes", "shrunk")}
    if out.get("ran_lines") is not None:
        entry["ran_lines"] = out["ran_lines"]


def target_cores(target: str | None) -> int:
    """TensorCores that share one kernel's "parallel" grid axes on ``target`` (megacore: 2, else 1).

    jax's own chip table decides (``ChipVersion.supports_megacore``); an unknown or missing target
    is simulated with two cores, the stricter case.
    """
    if not target:
        return SIMULATED_CORES
    from ...analysis.types import chip_target

    try:
        version = pltpu.ChipVersion(chip_target(target).chip_version)
    except ValueError:
        return SIMULATED_CORES
    return SIMULATED_CORES if version.supports_megacore else 1


def one_core_verdict(own: list[dict[str, Any]], two_core: list[dict[str, Any]], target: str,
                     compared: bool = True) -> list[dict[str, Any]]:
    """The records for a one-core ``target``: its own run's findings stay as they are; an error only
    the two-core run found becomes a warning saying the kernel is right (or not wrong in that way) on
    ``target`` but wrong on megacore chips. ``compared``: the one-core run's outputs were compared
    with a reference; without one it is not called correct, only found with every output written."""
    if any(r.get("severity", "error") == "error" for r in own):
        lead = f"also wrong on {TWO_CORE_CHIPS}: "
    elif compared:
        lead = f"correct on {target} (1 TensorCore) but wrong on {TWO_CORE_CHIPS}: "
    else:
        lead = (f"on {target} (1 TensorCore) every output comes back written (there is no reference, so its values "
                f"were not compared), but wrong on {TWO_CORE_CHIPS}: ")
    own_codes = {r.get("code") for r in own}
    out = list(own)
    for rec in two_core:
        if rec.get("code") in own_codes:
            continue  # the one-core run found it too: its record says it
        if rec.get("severity", "error") == "error":
            rec = dict(rec, severity="warning", sentence=lead + rec["sentence"])
            rec["message"] = rec["sentence"]
        out.append(rec)
    return out


ZEROED_INTS = ("integer inputs were filled with 0 because example_inputs() gives only their shapes; if they are "
               "indices or sizes, return concrete arrays from example_inputs() for a faithful tier-3 run")


def _has_integers(args: Any) -> bool:
    leaves = jax.tree.leaves(args, is_leaf=lambda a: hasattr(a, "shape") and hasattr(a, "dtype"))
    return any(not jnp.issubdtype(jnp.dtype(a.dtype), jnp.inexact) for a in leaves if hasattr(a, "dtype"))


def _soften_result_records(records: list[dict[str, Any]]) -> None:
    """Wrong or unwritten outputs computed from made-up integer inputs are a warning, with the reason."""
    for rec in records:
        if rec.get("code") in ("PLS303", "PLS304"):
            rec["severity"] = "warning"
            rec["sentence"] += f" ({ZEROED_INTS})"
            rec["message"] = rec["sentence"]


def _concrete_inputs(task: Any, shapes: tuple[Any, ...], shrunk: bool) -> tuple[tuple[Any, ...], bool]:
    """(arguments, made up): the task's own arrays when its inputs function makes them at the shapes
    used; else random ones (``random_inputs``)."""
    if not shrunk and getattr(task, "inputs", None) is not None:
        try:
            made = task.inputs()
        except Exception:  # noqa: BLE001 - fall back to random inputs
            made = None
        if made is not None:
            made = tuple(made) if isinstance(made, (list, tuple)) else (made,)
            leaves = jax.tree.leaves(made, is_leaf=lambda a: hasattr(a, "shape"))
            if leaves and not any(isinstance(a, jax.ShapeDtypeStruct) for a in leaves):
                return made, False
            if any(not isinstance(a, jax.ShapeDtypeStruct) for a in leaves):
                # some given, some only shaped (a page table next to the pages' shape): keep the arrays
                # given (indices mean something), make up the others; made up only if an integer was
                mixed = _given_or_made(made, random_inputs(made))
                if mixed is not None:
                    return mixed, any(isinstance(a, jax.ShapeDtypeStruct) and not jnp.issubdtype(jnp.dtype(a.dtype), jnp.inexact)
                                      for a in leaves)
    return random_inputs(shapes), True


def _given_or_made(given: Any, made: Any) -> Any:
    """``given``'s concrete arrays, ``made``'s where ``given`` holds only a ShapeDtypeStruct (None when
    the two trees do not match)."""
    try:
        return jax.tree.map(lambda g, m: m if isinstance(g, jax.ShapeDtypeStruct) else g, given, made,
                            is_leaf=lambda a: hasattr(a, "shape") and hasattr(a, "dtype"))
    except (ValueError, TypeError):
        return None


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError:
        return ""
