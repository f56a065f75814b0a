"""The sizes a candidate is tested, priced and timed at: the judge's choice, never the candidate's.

``Sizes`` holds the task's full example inputs (what is priced, and timed on a device), the size the
correctness checks run at (the full one on a device; on the CPU, where every run is jax's HLO
interpreter, a reduced one when the task is large), and a second size (the shape check). They come
from the trusted side (``judge_sizes``): the user's original kernel's block structure
(runner/measure/timing_shrink.py: two blocks per tiled dim) or the task's CONFIG ladder (runner/measure/timing_ladder.py),
traced in the judge's process, which may run the user's own file. A trusted side with no kernel of its
own (JAXBench's baseline.py, a MaxKernel reference) has no block structure to read: then the candidate's
process proposes a reduced CONFIG size by the same rules on its own program, and the judge takes only
the CONFIG values from it, checked (``from_proposal``): each an int the trusted CONFIG states, no
larger than its value there; the shapes are made by the trusted side at those values, and the second
size is the judge's (the proposal's own second size is never read). Only the judge's inputs are ever
used: a candidate whose arguments differ from the task's (another signature, CONFIG names the task's
file does not state) is "not verified", never compared on inputs of its own.

``symbolic(sizes)``: one signature that covers every size the judge will run, dims that differ between
them written as ``k*s<i>`` (``k`` their greatest common divisor): a program exported at it is one module
for all of them, and cannot tell which will run.

Worker side: imports jax.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import jax

from ..measure import timing_inputs as inputs_mod


@dataclass(frozen=True)
class Sizes:
    full: tuple[Any, ...]
    main: tuple[Any, ...]
    main_config: dict[str, int] | None = None
    extra: tuple[Any, ...] | None = None
    extra_config: dict[str, int] | None = None
    extra_how: str = ""
    note: str | None = None  # how the main size was reduced, in words
    verified_at: str | None = None  # a reduced CONFIG size, as "seq_len 512 of 4096"
    notes: tuple[str, ...] = field(default_factory=tuple)
    takes: int | None = None  # the candidate's entry takes the task's first ``takes`` inputs (the judge's mapping)

    @property
    def reduced(self) -> bool:
        return self.main_config is not None or inputs_mod.signature(self.main) != inputs_mod.signature(self.full)


def has_kernel(prep: Any, shapes: tuple[Any, ...]) -> bool:
    """Whether the trusted side's own entry launches a pallas_call (a block structure to read)."""
    from ..tier3.interpret import _namespaces, probe_calls

    try:
        fn = prep.probe()
        return bool(probe_calls(fn, shapes, _namespaces(fn)))
    except Exception:  # noqa: BLE001 - no structure to read
        return False


def _extra(prep: Any) -> tuple[Any, str, dict[str, int] | None]:
    try:
        return inputs_mod.extra_shapes(prep.task, prep.module)
    except Exception as exc:  # noqa: BLE001 - the task's own function failed at the other size
        return None, f"making the second shape failed: {type(exc).__name__}: {exc}", None


def judge_sizes(prep: Any, reduce: bool) -> Sizes | str | None:
    """Sizes from the trusted side (``prep``: its task, reference and entry); ``reduce``: the checks run
    in the CPU's interpreter. None: the trusted side has no kernel and the task is too large to run
    whole (ask the candidate's process for a proposal); a string: it cannot be checked here, and why."""
    from ..measure import timing, timing_shrink

    full = prep.task.abstract_args()
    extra, how, scaled = _extra(prep)
    plain = Sizes(full, full, extra=extra, extra_how=how, extra_config=scaled)
    if not reduce:
        return plain
    if prep.task.format in ("jaxbench", "maxkernel") and not has_kernel(prep, full) and \
            any(isinstance(v, int) and not isinstance(v, bool) for v in (prep.task.config or {}).values()):
        return None  # the ladder reads the kernel's blocks: the candidate's process proposes, the judge checks
    sized, own = timing._config_size(prep, full)
    if own is not None:
        return not_same_arguments("the task's reference does not take the inputs its own task makes")
    if sized is not None and not isinstance(sized, str):
        return _at_config(prep, full, sized)
    small = timing_shrink.reduced(prep, full)
    if small is None:
        return plain
    if not isinstance(small, str):
        return Sizes(full, small.shapes, extra=small.extra, extra_how=small.extra_how, note=small.note)
    too_big = timing_shrink.too_big(full)
    if not too_big:
        return replace(plain, notes=(f"inputs not reduced: {small}",))
    if not has_kernel(prep, full):
        return None
    return (f"not checked in interpret mode: {too_big}, and the inputs cannot be reduced ({small}); check it on a "
            "device backend, or give the file smaller example inputs")


def mapped(sizes: Sizes, takes: Any, prep: Any) -> Sizes | str:
    """The judge's mapping of the task's inputs onto a candidate whose entry takes ``takes`` of them (its word,
    read from the exported module's inputs when it arrives: the verifier refuses a module at any other
    signature): all of them as they are; a prefix (JAXBench 11p: the baseline also passes a static size the
    kernel derives itself) as the first ``takes``; more than the task has: not verified."""
    have = len(jax.tree.leaves(prep.task.abstract_args()))
    if not isinstance(takes, int) or isinstance(takes, bool) or takes == have:
        return sizes
    if not 0 < takes < have:
        return not_same_arguments(f"its entry takes {takes} inputs; the task makes {have}")
    note = f"the candidate's entry takes the task's first {takes} of its {have} inputs: the judge gives it those"
    return replace(sizes, takes=takes, notes=(*sizes.notes, note))


def not_same_arguments(what: str) -> str:
    """The judge's words for a candidate it cannot give the task's own inputs: no verdict either way."""
    return (f"not verified: its arguments differ from the task's ({what}); the judge compares a candidate only on "
            "inputs it makes itself from the task's own file, so give the candidate the task's signature")


def _at_config(prep: Any, full: tuple[Any, ...], sized: Any) -> Sizes:
    from ..measure import timing_ladder

    second = sized.second
    extra = None
    if second:
        with inputs_mod.config_scaled(timing_ladder.spaces_of(prep), {**sized.scaled, **second}):
            extra = inputs_mod.shapes_of(timing_ladder.make_inputs(prep, {**sized.scaled, **second}))
    return Sizes(full, sized.shapes, dict(sized.scaled) or None, extra, {**sized.scaled, **second} if extra else None,
                 f"CONFIG at {sized.second_at}" if extra is not None else "no second reduced CONFIG size fits the "
                 "check's memory", sized.note if sized.scaled else None, sized.verified_at if sized.scaled else None)


# The judge runs a proposed size's program with half the worker's memory to itself: the candidate's process is
# gone by then (a third assumes jax, the task and the run share one process's limit). At a third, JAXBench 2p, 4p
# and 8p (smallest sizes 1.6-1.8 GiB by the interpreter's estimate) got no size at the default 4096 MiB; at half
# all three were judged correct within it (peak resident 2.2-2.4 GiB in the judge).
JUDGED_SHARE = 2


def ladder_knobs() -> dict[str, int]:
    """The judge's budget for a reduced size (runner/measure/timing_ladder.py), sent with its request for a proposal:
    the candidate's process sizes by the judge's numbers, not its own."""
    from .. import memory_guard
    from ..measure import timing_ladder

    return {"TARGET_BYTES": timing_ladder.TARGET_BYTES, "MAX_STEPS": timing_ladder.MAX_STEPS,
            "DEFAULT_BUDGET": timing_ladder.DEFAULT_BUDGET, "LIMIT_MB": memory_guard.LIMIT_MB,
            "BUDGET_SHARE": JUDGED_SHARE}


def from_proposal(prep: Any, proposal: dict[str, Any]) -> Sizes | str:
    """The candidate's proposed reduced CONFIG values, checked against the trusted CONFIG; the shapes and
    the second size are the judge's own. A proposal that names a CONFIG size the task's file does not
    state is a candidate whose arguments differ from the task's: not verified (its word can only withhold
    its own verdict). Which of the task's inputs the candidate takes is the judge's mapping (``mapped``)."""
    config = dict(prep.task.config or {})
    scaled = proposal.get("config") if isinstance(proposal.get("config"), dict) else None
    if not scaled and isinstance(proposal.get("why_not"), str):  # too big whole, and no reduced size fits
        return ("not checked in interpret mode: the task is too big to run whole in the check's memory and no reduced "
                f"CONFIG size fits it ({proposal['why_not'][:400]}); give the worker more memory (--memory-mb, the "
                "check.memoryMb setting) or check it on a device backend")
    full = prep.task.abstract_args()
    if not scaled:  # the program fits the judge's budget whole: the task's own size (the worker's limits hold)
        extra, how, at = _extra(prep)
        return Sizes(full, full, extra=extra, extra_how=how, extra_config=at)
    for key, value in scaled.items():
        if key not in config:
            return not_same_arguments(f"its CONFIG names {key!r}, which the task's file does not state")
        if not (isinstance(config[key], int) and isinstance(value, int) and 1 <= value <= config[key]):
            return f"a proposed reduced size {key}={value!r} is not a CONFIG size of the task's own file to reduce"
    from ..measure import timing_ladder

    spaces = timing_ladder.spaces_of(prep)
    with inputs_mod.config_scaled(spaces, scaled):
        main = inputs_mod.shapes_of(timing_ladder.make_inputs(prep, scaled))
    second, extra = _second_size(prep, scaled, config, spaces)
    at = ", ".join(f"{k} {v} of {config[k]}" for k, v in scaled.items())
    return Sizes(full, main, dict(scaled), extra, {**scaled, **second} if extra is not None else None,
                 f"CONFIG at {', '.join(f'{k} {v}' for k, v in second.items())}" if extra is not None else
                 "no second reduced size", f"checked at a reduced size through the task's CONFIG: {at} (the "
                 "candidate's process proposed the CONFIG values; the judge checked them against the task's file "
                 "and made the inputs)", at)


def _second_size(prep: Any, trusted: dict[str, int], config: dict[str, Any],
                 spaces: tuple[Any, ...]) -> tuple[dict[str, int], tuple[Any, ...] | None]:
    """The judge's second size, as the ladder picks one (runner/measure/timing_ladder.py ``_with_second``): one
    reduced value doubled back, the smallest first, where the trusted reference's interpreter peak at
    those shapes fits the check's budget (doubling every value at once gave JAXBench 8p's GEMM a second
    size of bfloat16[4096, 28672] and the worker went over 4096 MiB). ({}, None) when none fits."""
    from ..measure import timing_ladder

    budget = timing_ladder.budget_bytes()
    for key in sorted(trusted, key=lambda k: trusted[k]):
        if 2 * trusted[key] > config[key]:
            continue
        trial = {**trusted, key: 2 * trusted[key]}
        try:
            with inputs_mod.config_scaled(spaces, trial):
                shapes = inputs_mod.shapes_of(timing_ladder.make_inputs(prep, trial))
            if timing_ladder.peak_bytes(prep.reference, shapes) <= budget:
                return {key: trial[key]}, shapes
        except Exception:  # noqa: BLE001 - no second size there: the next value
            continue
    return {}, None


def symbolic(sizes: Sizes, *, full: bool) -> list[tuple[list[list[Any]], Sizes]]:
    """Signatures that cover the main, second (and, with ``full``, the full) sizes with symbolic dims, each
    with the sizes it covers: first every dim that differs between them symbolic; then each such group of
    dims alone, the others kept at the main size (the second size then moves that group only: a program
    whose blocks span one of the dims exports along the others). Empty when the sizes differ in rank,
    dtype or CONFIG (a CONFIG size is read as a Python int: it cannot be symbolic)."""
    if sizes.main_config or sizes.extra_config or sizes.extra is None:
        return []
    sets = [inputs_mod.signature(s) for s in (sizes.main, sizes.extra, sizes.full if full else None) if s is not None]
    if any(len(s) != len(sets[0]) for s in sets):
        return []
    groups: dict[tuple[int, ...], list[tuple[int, int]]] = {}  # (gcd, ratios...) -> the dims that move together
    for i, leaves in enumerate(zip(*sets)):
        dims_sets = [tuple(shape) for shape, _ in leaves]
        if len({dtype for _, dtype in leaves}) != 1 or len({len(d) for d in dims_sets}) != 1:
            return []
        for d, values in enumerate(zip(*dims_sets)):
            if len(set(values)) > 1:
                step = math.gcd(*values)
                groups.setdefault((step, *(v // step for v in values)), []).append((i, d))
    if not groups:
        return []
    out = [(_signature(sets, groups), sizes)]
    if len(groups) > 1:
        for ratio, places in groups.items():
            out.append((_signature(sets, {ratio: places}), _moving(sizes, places, full)))
    return out


def _signature(sets: list[list[Any]], groups: dict[tuple[int, ...], list[tuple[int, int]]]) -> list[list[Any]]:
    names = {place: f"s{n}" for n, places in enumerate(groups.values()) for place in places}
    out = []
    for i, (shape, dtype) in enumerate(sets[0]):
        dims: list[Any] = []
        for d, value in enumerate(shape):
            if (i, d) in names:
                step = math.gcd(*(s[i][0][d] for s in sets))
                dims.append(f"{step}*{names[(i, d)]}" if step != 1 else names[(i, d)])
            else:
                dims.append(value)
        out.append([dims, dtype])
    return out


def _moving(sizes: Sizes, places: list[tuple[int, int]], full: bool) -> Sizes:
    """``sizes`` with only the dims at ``places`` taking their second (and full) values."""
    def moved(target: tuple[Any, ...]) -> tuple[Any, ...]:
        leaves, tree = jax.tree.flatten(sizes.main)
        want = jax.tree.leaves(target)
        out = []
        for i, leaf in enumerate(leaves):
            shape = [want[i].shape[d] if (i, d) in places else n for d, n in enumerate(leaf.shape)]
            out.append(jax.ShapeDtypeStruct(tuple(shape), leaf.dtype))
        return jax.tree.unflatten(tree, out)

    from ..tier3.interpret import describe_shapes

    extra = moved(sizes.extra)
    how = (f"{describe_shapes(extra)} (the task's second shape, {sizes.extra_how}, with only the dims the program "
           "takes symbolically moved: one module for both sizes)")
    return replace(sizes, extra=extra, extra_how=how, full=sizes.full if not full else sizes.full)


def abstract_of(signature: list[list[Any]]) -> tuple[Any, ...]:
    return tuple(jax.ShapeDtypeStruct(tuple(int(d) for d in dims), jax.numpy.dtype(dtype)) for dims, dtype in signature)
