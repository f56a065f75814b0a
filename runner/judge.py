"""The judge of model-written code's ``time`` request: its outputs compared and its time taken by a
process that never ran it.

In a confined worker each request already runs in a fresh sandboxed child (``runner/sandbox.py``).
For a ``time`` request that child is the *judge*: before it starts a jax backend it forks the
*candidate* process, which alone imports the candidate's file. The two speak over a socket pair in
frames of JSON plus raw array bytes (never pickle). The candidate side traces its program (the
pallas_call checks) and chooses the reduced shapes from its own block structure, then runs its entry
on whatever inputs the judge sends and sends the outputs back as data. The judge loads the task's
trusted file (the request's ``reference`` Sources: the user's original file, JAXBench's
baseline.py) before the candidate side may run anything, checks the shapes it is told against the
task's own, draws fresh inputs from its own seed, computes the reference, compares (tolerance,
NaN-filled unwritten elements, degenerate comparisons, cached or precomputed answers, a second
shape) and times the candidate's calls by its own clock around each round trip. A candidate that
patches numpy, the comparison, the estimator or the reply patches its own process only; the judge
sets itself non-dumpable, so the candidate cannot read or write its memory either.

On an accelerator (or a worker that plays one, or when the request asks: ``judge == "export"``) the
judge never talks to a running candidate: ``runner/judge_export.py`` has the candidate's process
export its program and runs that itself. Only on CPU, where the judge has nothing trusted to load
(no reference file in the request), the candidate process runs the whole op as before and the
result says it was judged there (``judged_by``); on a device that request is refused. The channel
is ``runner/judge_channel.py``; the ``check`` and ``estimate`` ops are judged in
``runner/judge_compile.py``. Worker side: imports jax.
"""

from __future__ import annotations

import contextlib
import socket
import statistics
import time
from typing import Any, Callable

from .judge_channel import CandidateGone, end, fork, receive, recv_frame, send_frame
from .judge_trusted import trusted as _trusted

ACTIVE = False  # set in a sandboxed child of a confined worker (runner/worker.py)


# --------------------------------------------------------------------------- the candidate's side


def _candidate_main(sock: socket.socket, params: dict[str, Any]) -> None:
    """The candidate process: load, trace, choose shapes, then run what the judge asks."""
    import jax
    import numpy as np

    from . import interpret_guard, timing, timing_shrink
    from . import timing_guards as guards
    from . import timing_inputs as inputs_mod

    header, _ = recv_frame(sock)
    if header.get("op") == "whole":  # nothing to judge outside: the op as before, here
        result = timing.handle_time(params)
        send_frame(sock, {"op": "result", "result": result, "interpret": interpret_guard.recorded()})
        return
    if header.get("op") != "go":
        return
    try:
        with timing.prepared(params) as prep:
            shapes = prep.task.abstract_args()
            sized, own = timing._config_size(prep, shapes) if not prep.on_device else (None, None)
            if own is not None or (sized is not None and not isinstance(sized, str)):
                _ready_at_config(sock, prep, shapes, sized, own)
                return
            small = timing_shrink.reduced(prep, shapes) if not prep.on_device else None
            notes = []
            if isinstance(small, str):
                too_big = timing_shrink.too_big(shapes)
                if too_big:
                    raise timing.TimingError(f"not checked in interpret mode: {too_big}, and the inputs cannot be "
                                             f"reduced ({small}); check it on a device backend, or give the file "
                                             "smaller example inputs")
                notes.append(f"inputs not reduced: {small}")
                small = None
            used = small.shapes if small is not None else shapes
            rejections, counted = guards.program_checks(prep.probe, used, prep.reference, prep.reference_file, prep.path)
            try:
                extra, how, scaled = ((small.extra, small.extra_how, None) if small is not None
                                      else inputs_mod.extra_shapes(prep.task, prep.module))
            except Exception as exc:  # noqa: BLE001
                extra, how, scaled = None, f"making the second shape failed: {type(exc).__name__}: {exc}", None
            leaves = jax.tree.leaves(used)
            send_frame(sock, {"op": "ready", "rejections": rejections, "counted": counted, "notes": notes,
                              "reduced": small.note if small is not None else None,
                              "shapes": [[list(a.shape), str(np.dtype(a.dtype).name)] for a in leaves],
                              "extra": ([[list(a.shape), str(np.dtype(a.dtype).name)] for a in jax.tree.leaves(extra)]
                                        if extra is not None else None),
                              "extra_how": how, "scaled": scaled, "entry": prep.task.name, "format": prep.task.format,
                              "config": prep.config, "interpret": interpret_guard.recorded()})
            treedefs = {"main": jax.tree.structure(used),
                        "extra": jax.tree.structure(extra) if extra is not None else None}
            _serve(sock, prep, treedefs, scaled)
    except (timing.TimingError, Exception) as exc:  # noqa: BLE001 - the candidate's failure is data
        send_frame(sock, {"op": "failed", "error": f"{type(exc).__name__}: {exc}"[:4000]})


def _ready_at_config(sock: socket.socket, prep: Any, full: tuple[Any, ...], sized: Any, own: Any) -> None:
    """The candidate's side at a reduced CONFIG size (runner/timing_ladder.py): its traces and runs
    read CONFIG there; the judge is told the size and makes the inputs and the reference itself."""
    import jax

    from . import interpret_guard, timing, timing_ladder
    from . import timing_guards as guards
    from . import timing_inputs as inputs_mod

    if isinstance(sized, str):
        raise timing.TimingError(f"not checked in interpret mode: the reference takes other arguments than the "
                                 f"candidate, so both run on their own inputs, and the task could not be reduced: {sized}")
    if sized is None:
        sized = timing_ladder.ConfigSize({}, {}, full, 0, 0)
    scaled = sized.scaled
    timing.scale_probes(prep, scaled)
    spaces = timing_ladder.spaces_of(prep)
    extra = None
    with inputs_mod.config_scaled(spaces, scaled or None):
        rejections, counted = guards.program_checks(prep.probe, sized.shapes, prep.reference, prep.reference_file,
                                                    prep.path)
    if sized.second and own is None:
        with inputs_mod.config_scaled(spaces, sized.second):
            extra = inputs_mod.shapes_of(timing_ladder.make_inputs(prep, sized.second))

    send_frame(sock, {"op": "ready", "rejections": rejections, "counted": counted, "notes": [],
                      "reduced": sized.note if scaled else None, "verified_at": sized.verified_at if scaled else None,
                      "config_scaled": dict(scaled) or None, "own": own is not None, "shapes": inputs_mod.signature(sized.shapes),
                      "output_dims": sized.output_dims,
                      "extra": inputs_mod.signature(extra) if extra is not None else None,
                      "extra_how": (f"CONFIG at {sized.second_at}"
                                    if extra is not None else "no second reduced CONFIG size fits the check's memory"),
                      "scaled": sized.second if extra is not None else None, "entry": prep.task.name,
                      "format": prep.task.format, "config": prep.config, "interpret": interpret_guard.recorded()})
    treedefs = {"main": jax.tree.structure(sized.shapes), "extra": jax.tree.structure(extra) if extra is not None else None}
    _serve(sock, prep, treedefs, sized.second if extra is not None else None, base=scaled or None, own=own is not None)


def _serve(sock: socket.socket, prep: Any, treedefs: dict[str, Any], scaled: Any, base: Any = None,
           own: bool = False) -> None:
    import jax
    import numpy as np

    from . import interpret_guard, timing
    from . import timing_guards as guards
    from . import timing_inputs as inputs_mod

    stored: tuple[Any, ...] | None = None
    timed = None
    while True:
        header, arrays = recv_frame(sock)
        op = header.get("op")
        if op == "done":
            return
        try:
            if op == "run":
                from .timing_ladder import concrete_at, spaces_of

                which = header["which"]
                spaces = spaces_of(prep) if base else (prep.task.entry,)
                scaling = inputs_mod.config_scaled(spaces, {**(base or {}), **(scaled or {})} if which == "extra" else base)
                with inputs_mod.config_scaled(spaces, base):
                    args = (concrete_at(prep, base or {}) if which == "own" and own else
                            jax.tree.unflatten(treedefs[which], [jax.numpy.asarray(a) for a in arrays]))
                saved = guards.snapshot(args)
                with scaling, timing._execution(prep, True):
                    outputs = jax.block_until_ready(prep.candidate(*args))
                leaves = [np.asarray(x) for x in jax.tree.leaves(outputs)]
                send_frame(sock, {"op": "outputs", "interpret": interpret_guard.recorded(),
                                  "changed": guards.inputs_changed(args, saved)}, leaves)
            elif op == "store":  # the timing's inputs, kept here; each call runs on fresh copies of them
                stored = jax.tree.unflatten(treedefs["main"], [jax.numpy.asarray(a) for a in arrays])
                timed = timing._named(prep.candidate, timing.CANDIDATE)
                with timing._execution(prep, False):
                    for _ in range(max(1, int(header.get("warmup", 1)))):
                        jax.block_until_ready(timed(*inputs_mod.copies(stored)))
                send_frame(sock, {"op": "stored"})
            elif op == "call" and stored is not None:
                args = inputs_mod.copies(stored)
                send_frame(sock, {"op": "armed"})
                recv_frame(sock)  # "go": the judge's clock starts when it sends this
                with timing._execution(prep, False):
                    jax.block_until_ready(timed(*args))
                send_frame(sock, {"op": "called"})
            else:
                send_frame(sock, {"op": "error", "error": f"unknown or early request {op!r}"})
        except Exception as exc:  # noqa: BLE001 - the candidate's failure is data for the judge
            send_frame(sock, {"op": "error", "error": f"{type(exc).__name__}: {str(exc)[:2000]}"})


# --------------------------------------------------------------------------- the judge's side


def start_candidate(params: dict[str, Any]) -> tuple[socket.socket, int]:
    """Fork the candidate process of a ``time`` request (call before this process starts a jax backend)."""
    return fork(lambda sock: _candidate_main(sock, params))


def judged_time(params: dict[str, Any], progress: Callable[..., Any] | None = None) -> dict[str, Any]:
    """The ``time`` op with the candidate in a process of its own (see the module docstring)."""
    from . import judge_export, timing

    if judge_export.wanted(params):  # on a device (or asked): the judge runs the exported program
        return judge_export.judged_time(params, progress)
    say = timing._say(progress)
    sock, pid = start_candidate(params)
    try:
        with contextlib.ExitStack() as stack:
            why, trusted = None, None
            try:
                trusted = _trusted(params, stack)  # before the candidate side runs anything
            except Exception as exc:  # noqa: BLE001 - nothing trusted to judge against (on CPU only)
                why = str(exc)
            if trusted is None:
                send_frame(sock, {"op": "whole"})
                header, _ = receive(sock)
                result = header.get("result") or timing._failed(params, "the candidate process gave no result")
                result.setdefault("notes", []).append(f"judged in the candidate's own process: {why}")
                result["judged_by"] = "the candidate's own process"
                return result
            return _judge(sock, params, say, *trusted)
    except CandidateGone as exc:
        return timing._failed(params, f"the candidate process failed: {exc}")
    finally:
        end(sock, pid)


def _checked_shapes(told: list[Any], own: tuple[Any, ...], *, grow: bool) -> tuple[Any, ...]:
    """The candidate's shapes in the trusted task's structure, once they agree with it (count, ranks,
    dtypes, and no dim larger unless ``grow``)."""
    import jax
    import jax.numpy as jnp

    leaves, treedef = jax.tree.flatten(own)
    if not isinstance(told, list) or len(told) != len(leaves):
        raise CandidateGone(f"the candidate reported {len(told) if isinstance(told, list) else '?'} inputs; the task has {len(leaves)}")
    out = []
    for (shape, dtype), leaf in zip(told, leaves):
        shape = tuple(int(d) for d in shape)
        if len(shape) != len(leaf.shape) or jnp.dtype(dtype) != jnp.dtype(leaf.dtype) or \
                (not grow and any(d > f or d < 1 for d, f in zip(shape, leaf.shape))):
            raise CandidateGone(f"the candidate reported an input {dtype}{list(shape)} that does not fit the task's "
                                f"{jnp.dtype(leaf.dtype).name}{list(leaf.shape)}")
        out.append(jax.ShapeDtypeStruct(shape, leaf.dtype))
    return jax.tree.unflatten(treedef, out)


def _judge(sock: socket.socket, params: dict[str, Any], say: Callable[[str], None], task: Any,
           reference: Callable[..., Any]) -> dict[str, Any]:
    import jax

    from . import timing
    from . import timing_inputs as inputs_mod

    seed = timing._seed(params)
    send_frame(sock, {"op": "go"})
    say("the candidate traces its program in a process of its own")
    jax.devices()  # this process's backend starts while the candidate traces
    ready, _ = receive(sock)
    if ready.get("op") != "ready":
        return timing._failed(params, str(ready.get("error") or "the candidate process did not get ready"))
    own = task.abstract_args()
    base = ready.get("config_scaled") or None
    stack = contextlib.ExitStack()
    if base or ready.get("own"):  # a reduced CONFIG size: the judge makes the inputs there from its own file
        try:
            full, own, template, own_reference = _trusted_at_config(task, reference, base, bool(ready.get("own")))
        except Exception as exc:  # noqa: BLE001 - the trusted file does not take that size
            return timing._failed(params, f"not verified: the reference's task does not take the reduced size "
                                  f"{ready.get('verified_at')}: {type(exc).__name__}: {str(exc)[:300]}")
        stack.enter_context(inputs_mod.config_scaled((reference,), base))
    else:
        full, own_reference = own, None
        template = inputs_mod.concrete_template(task.inputs) if ready.get("reduced") is None else None
    if own_reference is not None:
        shapes = own  # each side on its own inputs: the candidate's layout is its own
    else:
        shapes = _checked_shapes(ready.get("shapes"), own, grow=False)
        if base and inputs_mod.signature(shapes) != inputs_mod.signature(own):
            return timing._failed(params, "the candidate reported other inputs at the reduced size than the task makes")
    checks: dict[str, Any] = {"seed": seed, "inputs": inputs_mod.signature(shapes), "extra_shape": None,
                              **(ready.get("counted") or {})}
    if ready.get("reduced"):
        checks.update(full_inputs=inputs_mod.signature(full), reduced=ready["reduced"])
    if ready.get("verified_at"):
        checks["verified_at"] = ready["verified_at"]
    if own_reference is not None:
        checks["own_inputs"] = ("the reference takes other arguments than the candidate: each ran on its own task "
                                "inputs (workload(*create_inputs()), the same seeded draws), not on fresh random ones")
    with stack:
        return _judged(sock, params, say, task, reference, ready, seed, shapes, own, template, checks, own_reference)


def _trusted_at_config(task: Any, reference: Callable[..., Any], scaled: dict[str, int] | None,
                       own: bool = False) -> tuple[Any, ...]:
    """(full shapes, shapes at ``scaled``, the task's own arrays there, the reference through its own
    workload or None) from the trusted file, its CONFIG read at ``scaled`` (names it must state)."""
    import inspect


    from . import timing_inputs as inputs_mod
    from .tasks_runtime import _call_with_config
    from .timing_ladder import _is_int

    config = dict(task.config or {})
    stated = {key: value for key, value in (scaled or {}).items() if key in config}
    if scaled and not stated:
        raise ValueError(f"the reference's file states none of the CONFIG names {sorted(scaled)}")
    for key, value in stated.items():  # a name it does not state is the candidate's spelling: never read here
        if not _is_int(config[key]) or not _is_int(value) or not 1 <= value <= config[key]:
            raise ValueError(f"CONFIG[{key!r}] = {value!r}: the reference's file states no such size to reduce")
    space = inspect.unwrap(reference).__globals__
    create = space.get("create_inputs") if callable(space.get("create_inputs")) else None
    full = task.abstract_args()

    def make() -> Any:
        return _call_with_config(create, {**config, **(scaled or {})}) if create is not None else task.inputs()

    with inputs_mod.config_scaled((reference,), scaled):
        shapes, own_reference = inputs_mod.shapes_of(make), None
        if own:  # the reference takes other arguments than the candidate: through its own workload
            task_own = inputs_mod.own_task(reference)  # reads CONFIG when called: inside config_scaled
            if task_own is None:
                raise ValueError("the reference takes other arguments and its file makes no inputs of its own")
            workload, made = task_own

            def own_reference() -> Any:
                return workload(*made())
            shapes = ()
        template = inputs_mod.concrete_template(make) if own_reference is None else None
    return full, shapes, template, own_reference


def _judged(sock: socket.socket, params: dict[str, Any], say: Callable[[str], None], task: Any,
            reference: Callable[..., Any], ready: dict[str, Any], seed: int, shapes: Any, own: Any, template: Any,
            checks: dict[str, Any], own_reference: Callable[[], Any] | None) -> dict[str, Any]:
    import jax

    from . import timing
    from . import timing_guards as guards
    from . import timing_inputs as inputs_mod
    from .interpret_compare import tolerance_for
    from .tiers import versions

    notes = [str(n) for n in ready.get("notes") or ()] + ([ready["reduced"]] if ready.get("reduced") else [])
    if checks.get("own_inputs"):
        notes.append(checks["own_inputs"])
    rejections = list(ready.get("rejections") or ())
    extra_template = None

    def one_set(set_shapes: Any, set_seed: int, which: str, scaled: Any = None) -> dict[str, Any]:
        if own_reference is not None:  # each side on its own inputs (the same seeded draws)
            which, args = "own", ()
        else:
            args = inputs_mod.fresh_inputs(set_shapes, set_seed, template if which == "main" else extra_template)
        try:
            with inputs_mod.config_scaled((reference,), scaled):
                expected = jax.block_until_ready(jax.jit(own_reference)() if own_reference is not None
                                                 else jax.jit(reference)(*args))
        except Exception as exc:  # noqa: BLE001
            return {"reference_failed": f"{type(exc).__name__}: {exc}",
                    "rejection": guards.reject("reference_failed", f"the reference failed: {type(exc).__name__}: {exc}")}
        tolerance = tolerance_for(task, expected) or (0.0, 0.0)
        if own_reference is not None:  # the task's own inputs cannot be redrawn at a larger scale
            tolerance, note = guards.at_output_scale(expected, tolerance)
            if note and note not in notes:
                notes.append(note)
        bad = guards.degenerate(expected, tolerance)
        if bad:
            return {"rejection": bad, "tolerance": tolerance}
        send_frame(sock, {"op": "run", "which": which}, jax.tree.leaves(args))
        header, outputs = receive(sock)
        if header.get("op") != "outputs":
            return {"rejection": guards.reject("candidate_failed", f"the candidate raised {header.get('error')}"),
                    "tolerance": tolerance}
        if isinstance(header.get("changed"), dict):  # (the candidate's own report: its inputs live there)
            changed = header["changed"]
            return {"rejection": guards.reject("input_mutation", str(changed.get("message"))), "tolerance": tolerance}
        expected_leaves = [jax.numpy.asarray(x) for x in jax.tree.leaves(expected)]
        bad = guards.compare_outputs(outputs, expected_leaves, tolerance)
        if bad and bad["trick"] == "wrong_result":
            returned = timing._returned_input(outputs, guards.snapshot(args))
            if returned is not None:
                bad = guards.reject("work_outside_timed_region", f"the candidate returns its input {returned} "
                                    "unchanged: the answer was computed before the call (by the inputs function), "
                                    "outside the timed region")
        return {"rejection": bad, "outputs": outputs, "expected": expected_leaves, "tolerance": tolerance}

    if not rejections:
        say("comparing with the reference on fresh random inputs (judged outside the candidate's process)")
        first = one_set(shapes, seed, "main")
        if first.get("rejection"):
            rejection = first["rejection"]
            if template is not None and rejection["trick"] == "wrong_result" and first.get("outputs") is not None:
                example = [jax.numpy.asarray(x) for x in jax.tree.leaves(reference(*template))]
                if guards.matches(first["outputs"], example, first["tolerance"]):
                    rejection = guards.reject("precomputed_result", "on fresh random inputs the candidate returned "
                                              "the reference's answer for the task's own example inputs: a result "
                                              "precomputed ahead of the call, not computed from its inputs")
            if ready.get("config_scaled") and rejection["trick"] == "candidate_failed":
                return timing._failed(params, "not verified: the candidate raised at the reduced size " +
                                      str(ready.get("verified_at")) + " (it may not take a size it was not written "
                                      "for, or TPU interpret mode cannot run it; check it at full size on a device): " + str(rejection["message"])[:600])
            if (own_reference is not None and ready.get("config_scaled") and not ready.get("output_dims")
                    and rejection["trick"] == "wrong_result"):
                return timing._failed(params, "not verified: at the reduced size " + str(ready.get("verified_at")) +
                                      " the candidate differs from the reference run on its own inputs, and the two "
                                      "files' CONFIGs are paired by name only (a size one derives from another may "
                                      "not follow): " + str(rejection["message"])[:600])
            rejections.append(rejection)
        elif own_reference is None:
            second = one_set(shapes, seed + 1, "main")
            if second.get("rejection"):
                rejection = second["rejection"]
                if second.get("outputs") is not None and guards.matches(second["outputs"], first["expected"],
                                                                         first["tolerance"]):
                    rejection = guards.reject("cached_result", "on a second set of fresh inputs the candidate "
                                              "returned the reference's answer for the first set: a cached result "
                                              "from an earlier call")
                rejections.append(rejection)
            elif params.get("extra_shape", True) and ready.get("extra") is not None:
                extra = _checked_shapes(ready["extra"], own, grow=True)
                if ready.get("config_scaled") and ready.get("scaled"):  # the judge's own inputs at the second size
                    try:
                        _, made, extra_template, _ = _trusted_at_config(task, reference, {**ready["config_scaled"],
                                                                                          **ready["scaled"]})
                        extra = made if inputs_mod.signature(made) == inputs_mod.signature(extra) else extra
                    except Exception:  # noqa: BLE001 - random values for its integers instead
                        extra_template = None
                how = str(ready.get("extra_how"))
                say(f"checking a second shape ({how})")
                third = one_set(extra, seed + 2, "extra", ready.get("scaled"))
                checks["extra_shape"] = {"checked": True, "how": how, "inputs": inputs_mod.signature(extra)}
                if third.get("reference_failed"):
                    checks["extra_shape"] = {"checked": False, "why": f"the reference fails at {how}: "
                                             f"{third['reference_failed']}"}
                elif third.get("rejection"):
                    r = third["rejection"]
                    rejections.append(guards.reject(
                        "shape_specialised", f"right at the example shape but not at {how}: {r['message']} "
                        "(the candidate specialises to the example shape)", at=inputs_mod.signature(extra)))
            elif ready.get("extra") is None:
                checks["extra_shape"] = {"checked": False, "why": str(ready.get("extra_how"))}
    result = {"entry": ready.get("entry"), "path": params.get("path"), "format": ready.get("format"),
              "config": ready.get("config") or {}, "verdict": "rejected" if rejections else "ok",
              "rejections": rejections, "flags": [], "checks": checks,
              "device": {"platform": "cpu", "device_kind": jax.devices()[0].device_kind},
              "provenance": "interpret", "versions": versions(), "candidate": None, "reference": None,
              "speedup": None, "spread": None, "trace": None, "notes": notes,
              "judged_by": "a process that never ran the candidate"}
    if rejections:
        why = "; ".join(r["message"] for r in rejections)
        result["candidate"] = _measurement(result, None, "not timed: rejected", "wrong_result", why)
        return result
    if params.get("shrink"):
        result["notes"] = notes + ["not timed: shrink asks for the correctness checks only (interpret mode on CPU; "
                                   "its wall clock says nothing about a TPU)"]
        return result
    return _timed(sock, params, result, reference, shapes, template, seed, say)


def _timed(sock: socket.socket, params: dict[str, Any], result: dict[str, Any], reference: Callable[..., Any],
           shapes: Any, template: Any, seed: int, say: Callable[[str], None]) -> dict[str, Any]:
    """Interleaved rounds: the reference here, the candidate's call there, both by this clock."""
    import jax

    from . import timing
    from . import timing_inputs as inputs_mod

    runs, warmup = max(1, int(params.get("runs", 20))), max(1, int(params.get("warmup", 2)))
    base = inputs_mod.fresh_inputs(shapes, seed + 3, template)
    ref = timing._named(reference, timing.REFERENCE)
    for _ in range(warmup):
        jax.block_until_ready(ref(*base))
    send_frame(sock, {"op": "store", "warmup": warmup}, jax.tree.leaves(base))
    if recv_frame(sock)[0].get("op") != "stored":
        result.update(verdict="error", error="the candidate could not be run for timing")
        return result
    samples: dict[str, list[float]] = {timing.CANDIDATE: [], timing.REFERENCE: []}
    for i in range(runs):
        for name in ((timing.CANDIDATE, timing.REFERENCE) if i % 2 == 0 else (timing.REFERENCE, timing.CANDIDATE)):
            if name == timing.CANDIDATE:
                send_frame(sock, {"op": "call"})
                if recv_frame(sock)[0].get("op") != "armed":
                    result.update(verdict="error", error="the candidate failed while being timed")
                    return result
                start = time.perf_counter_ns()
                send_frame(sock, {"op": "go"})
                if recv_frame(sock)[0].get("op") != "called":
                    result.update(verdict="error", error="the candidate failed while being timed")
                    return result
            else:
                args = inputs_mod.copies(base)
                start = time.perf_counter_ns()
                jax.block_until_ready(ref(*args))
            samples[name].append(float(time.perf_counter_ns() - start))
        if i % max(1, runs // 5) == 0:
            say(f"timing: round {i + 1} of {runs}")
    send_frame(sock, {"op": "done"})
    method = ("wall clock taken by the judge around each call (the candidate's: a round trip to its process, TPU "
              "interpret mode on CPU); interleaved, fresh input copies")
    cand, ref_samples = samples[timing.CANDIDATE], samples[timing.REFERENCE]
    result["candidate"] = _measurement(result, cand, method)
    result["reference"] = _measurement(result, ref_samples, method.replace("TPU interpret mode on CPU", "XLA on the "
                                                                           "host CPU for the reference"), reference=True)
    result["spread"] = {"candidate": timing.spread(cand), "reference": timing.spread(ref_samples)}
    result["speedup"] = {"value": statistics.median(ref_samples) / statistics.median(cand),
                         "baseline": "the reference compiled by XLA on the same device (cpu); the candidate ran in TPU "
                                     "interpret mode on CPU, so this ratio says nothing about a TPU",
                         "provenance": "interpret", "inputs": result["checks"]["inputs"]}
    if "reduced" in result["checks"]:
        result["notes"].append("timed at the reduced shapes in TPU interpret mode on CPU (this time says nothing "
                               "about a TPU)")
    return result


def _measurement(result: dict[str, Any], samples: list[float] | None, method: str, status: str = "ok",
                 error: str | None = None, reference: bool = False) -> dict[str, Any]:
    from ..analysis.types import Measurement, Provenance, to_json

    from .tiers import versions

    vers = versions()
    return to_json(Measurement(
        status=status, provenance=Provenance.HOST if reference else Provenance.INTERPRET,
        device_kind=result["device"]["device_kind"], method=method, samples_ns=tuple(samples or ()),
        median_ns=statistics.median(samples) if samples else None,
        config=tuple(sorted((result.get("config") or {}).items())), jax_version=vers.get("jax"),
        libtpu_version=vers.get("libtpu"), error=error))
