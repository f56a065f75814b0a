"""The one comparison of a candidate's program with the trusted reference, run by the judge.

``correct(programs, prep, sizes, seed, checks, say)`` returns the rejections the candidate earns:
two sets of fresh inputs at the checked size (runner/measure/timing_inputs.fresh_inputs: floats drawn at the
task's scale, integers permuted from the task's own), the example's own answer returned on fresh inputs
(``precomputed_result``), the first set's answer returned on the second (``cached_result``), an input
returned unchanged, a degenerate comparison, and a second size (``shape_specialised``). The comparison
itself is runner/measure/timing_guards.compare_outputs, with the task's tolerance. ``programs`` maps "main" and
"extra" to the candidate's exported programs (or rejections). Every input is the judge's: the candidate's
process never says which inputs or arguments are used.

Worker side: imports jax.
"""

from __future__ import annotations

from typing import Any, Callable

import jax


class NotVerified(Exception):
    """No verdict either way at the size the judge could check (the message says why)."""


def _template(prep: Any, config: dict[str, int] | None, shapes: Any) -> Any:
    """The trusted side's own inputs at this size (its integers: masks, page tables, lengths), or None."""
    from ..measure import timing_inputs as inputs_mod
    from ..measure import timing_ladder

    if config:
        with inputs_mod.config_scaled(timing_ladder.spaces_of(prep), config):
            return timing_ladder.concrete_at(prep, config)
    template = prep.template()
    return template if template is not None and inputs_mod.signature(template) == inputs_mod.signature(shapes) else None


def _one_set(program: Any, prep: Any, args: Any, config: dict[str, int] | None,
             reference: Callable[[], Any]) -> dict[str, Any]:
    from ..measure import timing
    from ..measure import timing_guards as guards
    from ..measure import timing_inputs as inputs_mod
    from ..measure import timing_ladder
    from ..tier3.interpret_compare import tolerance_for

    try:
        with inputs_mod.config_scaled(timing_ladder.spaces_of(prep), config):
            expected = [jax.numpy.asarray(x) for x in jax.tree.leaves(jax.block_until_ready(reference()))]
    except Exception as exc:  # noqa: BLE001 - the trusted side's failure, said as such
        why = f"{type(exc).__name__}: {str(exc)[:500]}"
        return {"reference_failed": why,
                "rejection": guards.reject("reference_failed", f"the reference failed on the task's inputs: {why}")}
    tolerance = tolerance_for(prep.task, expected) or (0.0, 0.0)
    bad = guards.degenerate(expected, tolerance)
    if bad:  # the task's own comparison cannot tell a right kernel from zeros: no verdict, whatever it returns
        raise NotVerified(f"not verified ({bad['trick']}): {bad['message']}")
    saved = guards.snapshot(args)
    from ..tpu_program.faults import KernelFault
    from .program import NotRunnable

    try:
        outputs = [jax.numpy.asarray(x) for x in jax.tree.leaves(jax.block_until_ready(program(*args)))]
    except NotRunnable as exc:  # the judge's interpreter cannot run it: no verdict either way
        raise NotVerified(f"not verified: {exc}") from None
    except KernelFault as exc:  # what a TPU would fault or hang on
        return {"rejection": guards.reject("kernel_fault", f"the TPU program would fault on a TPU: {str(exc)[:800]}"),
                "tolerance": tolerance}
    except Exception as exc:  # noqa: BLE001
        return {"rejection": guards.reject("candidate_failed", f"the candidate's program raised {type(exc).__name__}: "
                                           f"{str(exc)[:500]}"), "tolerance": tolerance}
    bad = guards.compare_outputs(outputs, expected, tolerance)
    if bad and bad["trick"] == "wrong_result":
        returned = timing._returned_input(outputs, saved)
        if returned is not None:
            bad = guards.reject("work_outside_timed_region", f"the candidate returns its input {returned} unchanged")
    return {"rejection": bad, "outputs": outputs, "expected": expected, "tolerance": tolerance}


def _drawn(program: Any, prep: Any, shapes: Any, config: dict[str, int] | None, seed: int,
           template: Any) -> tuple[dict[str, Any], Any]:
    from ..measure import timing_inputs as inputs_mod

    args = inputs_mod.fresh_inputs(shapes, seed, template)
    return _one_set(program, prep, args, config, lambda: jax.jit(prep.reference)(*args)), template


def correct(programs: dict[str, Any], prep: Any, sizes: Any, seed: int, checks: dict[str, Any],
            say: Callable[[str], None]) -> list[dict[str, Any]]:
    """The rejections (see the module docstring); ``checks`` records what was checked."""
    from ..measure import timing_guards as guards
    from .program import Program

    main = programs["main"]
    say("comparing the candidate's program with the reference on fresh random inputs (in the judge)")
    full_ints: list[Any] = []  # the task's integers at its full size, read once if a reduced size needs them
    made = _template(prep, sizes.main_config, sizes.main)  # the task's own inputs at this size, made once
    why = _not_an_instance(prep, sizes.full, sizes.main, sizes.main_config, made, full_ints)
    if why:
        raise NotVerified(f"not verified at the reduced size {sizes.verified_at}: {why}; check it on a device backend")
    first, template = _drawn(main, prep, sizes.main, sizes.main_config, seed, made)
    if first.get("rejection"):
        rejection = first["rejection"]
        if template is not None and rejection["trick"] == "wrong_result" and first.get("outputs") is not None:
            example = [jax.numpy.asarray(x) for x in jax.tree.leaves(_expected_at(prep, template, sizes.main_config))]
            if guards.matches(first["outputs"], example, first["tolerance"]):
                rejection = guards.reject("precomputed_result", "on fresh random inputs the candidate's program "
                                          "returned the reference's answer for the task's own example inputs")
        return [rejection]
    checks["outputs"] = [[list(x.shape), str(x.dtype)] for x in first["expected"]]
    tolerance = first["tolerance"]  # what a pass was compared at, and where that came from
    checks["tolerance"] = {"atol": tolerance[0], "rtol": tolerance[1], "source": getattr(tolerance, "source", "")}
    second, _ = _drawn(main, prep, sizes.main, sizes.main_config, seed + 1, made)
    if second.get("rejection"):
        rejection = second["rejection"]
        if second.get("outputs") is not None and guards.matches(second["outputs"], first["expected"], first["tolerance"]):
            rejection = guards.reject("cached_result", "on a second set of fresh inputs the candidate's program "
                                      "returned the reference's answer for the first set")
        return [rejection]
    extra = programs.get("extra")
    if sizes.extra is None:
        checks["extra_shape"] = {"checked": False, "why": sizes.extra_how}
        return []
    if not isinstance(extra, Program):  # a program that will not export at the judge's second size
        return [guards.reject("shape_specialised", f"right at the checked size but not at {sizes.extra_how}: "
                              f"{extra['message']}")]
    made = _template(prep, sizes.extra_config, sizes.extra)
    why = _not_an_instance(prep, sizes.full, sizes.extra, sizes.extra_config, made, full_ints)
    if why:
        checks["extra_shape"] = {"checked": False, "why": f"{sizes.extra_how} is not an instance of the task: {why}"}
        return []
    say(f"checking a second shape ({sizes.extra_how})")
    third, _ = _drawn(extra, prep, sizes.extra, sizes.extra_config, seed + 2, made)
    from ..measure import timing_inputs as inputs_mod

    checks["extra_shape"] = {"checked": True, "how": sizes.extra_how, "inputs": inputs_mod.signature(sizes.extra)}
    if third.get("reference_failed"):
        checks["extra_shape"] = {"checked": False, "why": f"the reference fails at {sizes.extra_how}: "
                                                          f"{third['reference_failed']}"}
    elif third.get("rejection"):
        return [guards.reject("shape_specialised", f"right at the checked size but not at {sizes.extra_how}: "
                              f"{third['rejection']['message']}", at=inputs_mod.signature(sizes.extra))]
    return at_task_size(programs, prep, sizes, seed, checks, say)


TASK_SIZE_STEPS = 4096  # grid steps of all kernels at the task's size the judge's interpreter runs in seconds


def at_task_size(programs: dict[str, Any], prep: Any, sizes: Any, seed: int, checks: dict[str, Any],
                 say: Callable[[str], None]) -> list[dict[str, Any]]:
    """Size honesty: checks that ran at reduced sizes say nothing of a program whose kernels read their size at
    run time (``pl.num_programs`` in a module exported with symbolic sizes), nor of a module the judge priced
    at the task's size without running it (a program exported per size). Such a program is run once more at
    the task's own size where that fits the check's memory and time; else the verdict says it was verified at
    the reduced sizes only, and why (``checks["size_dependent"]``)."""
    from ..measure import timing_guards as guards
    from ..measure import timing_inputs as inputs_mod
    from ..measure import timing_ladder
    from .program import Program

    main, full = programs["main"], programs.get("full")
    if not sizes.reduced:
        return []
    reads = list(main.facts.get("size_reads") or [])
    tested = {p.digest for p in (main, programs.get("extra")) if isinstance(p, Program)}
    unrun = isinstance(full, Program) and full.digest not in tested
    if not reads and not unrun:
        return []
    why = (f"its kernels read their size at run time ({'; '.join(reads)})" if reads else
           "the module priced at the task's size is not one the checks ran")
    steps = full.facts.get("grid_steps") if isinstance(full, Program) else None
    fits = isinstance(full, Program) and steps is not None and steps <= TASK_SIZE_STEPS and \
        timing_ladder.peak_bytes(prep.reference, sizes.full) <= timing_ladder.budget_bytes()
    if not fits:
        checks["size_dependent"] = f"{why}; the task's own size does not fit the check's memory or time"
        return []
    say(f"checking at the task's own size: {why}")
    run, _ = _drawn(full, prep, sizes.full, None, seed + 4, _template(prep, None, sizes.full))
    checks["task_size"] = {"checked": "reference_failed" not in run, "why": why,
                           "inputs": inputs_mod.signature(sizes.full)}
    if run.get("rejection") and "reference_failed" not in run:
        return [guards.reject("size_specialised", f"right at the reduced size but not at the task's own size ({why}): "
                              f"{run['rejection']['message']}", at=inputs_mod.signature(sizes.full))]
    return []


def _not_an_instance(prep: Any, full: Any, shapes: Any, config: dict[str, int] | None, template: Any,
                     full_ints: list[Any]) -> str | None:
    """Why the task's inputs made at the reduced ``config`` break a relation its full size holds
    (runner/judging/instance.py), or None; ``full_ints`` caches the full size's integers."""
    from .instance import broken_relation, integer_leaves, integers_of

    if not config or template is None:
        return None
    if not full_ints:
        full_ints.append(integers_of(prep.task.inputs))
    return broken_relation(full, shapes, full_ints[0], integer_leaves(template))


def _expected_at(prep: Any, args: Any, config: dict[str, int] | None) -> Any:
    from ..measure import timing_inputs as inputs_mod
    from ..measure import timing_ladder

    with inputs_mod.config_scaled(timing_ladder.spaces_of(prep), config):
        return jax.jit(prep.reference)(*args)
