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

Where the judge has nothing trusted to load (no reference file in the request) or the work runs on
an accelerator (one process owns the chip), the candidate process runs the whole op as before and
the result says it was judged there (``judged_by``). Worker side: imports jax.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import statistics
import struct
import time
from typing import Any, Callable

ACTIVE = False  # set in a sandboxed child of a confined worker (runner/worker.py)
MAX_FRAME = 1 << 30  # one frame from the candidate; a larger one ends the judging
_PR_SET_DUMPABLE = 4


class CandidateGone(Exception):
    """The candidate process ended or broke the framing (the message says how)."""


# --------------------------------------------------------------------------- frames


def send_frame(sock: socket.socket, header: dict[str, Any], arrays: list[Any] = ()) -> None:
    import numpy as np

    blobs = [np.ascontiguousarray(np.asarray(a)) for a in arrays]
    header = {**header, "arrays": [{"shape": list(b.shape), "dtype": b.dtype.name, "nbytes": b.nbytes} for b in blobs]}
    data = json.dumps(header, allow_nan=False, default=str).encode()
    sock.sendall(struct.pack(">Q", len(data)) + data)
    for blob in blobs:
        sock.sendall(memoryview(blob.view(np.uint8).reshape(-1)) if blob.size else b"")


def _exactly(sock: socket.socket, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise CandidateGone("the other process closed the channel")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def recv_frame(sock: socket.socket) -> tuple[dict[str, Any], list[Any]]:
    import jax.numpy as jnp
    import numpy as np

    (size,) = struct.unpack(">Q", _exactly(sock, 8))
    if size > MAX_FRAME:
        raise CandidateGone(f"a frame of {size} bytes is over the limit")
    try:
        header = json.loads(_exactly(sock, size))
        metas = header.pop("arrays", [])
        if not isinstance(header, dict) or not isinstance(metas, list):
            raise ValueError("not an object")
    except ValueError as exc:
        raise CandidateGone(f"a frame that is not JSON ({exc})") from exc
    arrays, total = [], 0
    for meta in metas:
        dtype, shape, nbytes = jnp.dtype(str(meta["dtype"])), tuple(int(d) for d in meta["shape"]), int(meta["nbytes"])
        total += nbytes
        if total > MAX_FRAME or nbytes != int(np.prod(shape, dtype=np.int64)) * dtype.itemsize:
            raise CandidateGone("array bytes that do not match their shape, or too many")
        arrays.append(np.frombuffer(_exactly(sock, nbytes), dtype=dtype).reshape(shape).copy())
    return header, arrays


def _receive(sock: socket.socket) -> tuple[dict[str, Any], list[Any]]:
    """A frame from the candidate; the interpret-mode calls it saw are recorded here, so the worker
    refuses them as if this process had seen them (runner/interpret_guard.py)."""
    from . import interpret_guard

    header, arrays = recv_frame(sock)
    interpret_guard.add_recorded(header.pop("interpret", None))
    return header, arrays


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


def _serve(sock: socket.socket, prep: Any, treedefs: dict[str, Any], scaled: Any) -> None:
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
                args = jax.tree.unflatten(treedefs[header["which"]], [jax.numpy.asarray(a) for a in arrays])
                scaling = inputs_mod.config_scaled((prep.task.entry,), scaled if header["which"] == "extra" else None)
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
    return _fork(lambda sock: _candidate_main(sock, params))


def judged_time(params: dict[str, Any], progress: Callable[..., Any] | None = None) -> dict[str, Any]:
    """The ``time`` op with the candidate in a process of its own (see the module docstring)."""
    from . import timing

    say = timing._say(progress)
    on_cpu = os.environ.get("JAX_PLATFORMS", "").split(",")[0] == "cpu"
    sock, pid = start_candidate(params)
    try:
        with contextlib.ExitStack() as stack:
            why = None if on_cpu else "it runs on an accelerator (one process holds the chip)"
            trusted = None
            if why is None:
                try:
                    trusted = _trusted(params, stack)  # before the candidate side runs anything
                except Exception as exc:  # noqa: BLE001 - nothing trusted to judge against
                    why = str(exc)
            if trusted is None:
                send_frame(sock, {"op": "whole"})
                header, _ = _receive(sock)
                result = header.get("result") or timing._failed(params, "the candidate process gave no result")
                result.setdefault("notes", []).append(f"judged in the candidate's own process: {why}")
                result["judged_by"] = "the candidate's own process"
                return result
            return _judge(sock, params, say, *trusted)
    except CandidateGone as exc:
        return timing._failed(params, f"the candidate process failed: {exc}")
    finally:
        _end(sock, pid)


def _trusted(params: dict[str, Any], stack: contextlib.ExitStack) -> tuple[Any, Callable[..., Any]]:
    """(the task of the trusted file, its reference), loaded before the candidate side runs: the
    request's ``trusted`` file (the user's own), else its ``reference`` file (JAXBench's baseline.py)."""
    from . import tasks_runtime, timing
    from .loader import user_module

    kind = "trusted" if params.get("trusted_path") else "reference"
    if not params.get(f"{kind}_path"):
        raise timing.TimingError("the request carries no file of the user's to judge against")
    path, text = os.path.abspath(params[f"{kind}_path"]), params.get(f"{kind}_text")
    module = stack.enter_context(user_module(path, text, params.get(f"{kind}_modules") or ()))
    reference = timing._reference_in(module, params.get("reference_entry"))
    tasks = tasks_runtime.discover(module, path, text)
    want = params.get("entry")
    chosen = [t for t in tasks if want is None or t.name == want] or tasks
    if kind == "trusted" and chosen and chosen[0].reference is not None:
        reference = chosen[0].reference
    if reference is None or len(chosen) != 1:
        raise timing.TimingError(f"{os.path.basename(path)} states no single task with a reference to judge against")
    return chosen[0], reference


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
    from . import timing_guards as guards
    from . import timing_inputs as inputs_mod
    from .interpret_compare import tolerance_for
    from .tiers import versions

    seed = timing._seed(params)
    send_frame(sock, {"op": "go"})
    say("the candidate traces its program in a process of its own")
    jax.devices()  # this process's backend starts while the candidate traces
    ready, _ = _receive(sock)
    if ready.get("op") != "ready":
        return timing._failed(params, str(ready.get("error") or "the candidate process did not get ready"))
    own = task.abstract_args()
    shapes = _checked_shapes(ready.get("shapes"), own, grow=False)
    template = inputs_mod.concrete_template(task.inputs) if ready.get("reduced") is None else None
    checks: dict[str, Any] = {"seed": seed, "inputs": inputs_mod.signature(shapes), "extra_shape": None,
                              **(ready.get("counted") or {})}
    if ready.get("reduced"):
        checks.update(full_inputs=inputs_mod.signature(own), reduced=ready["reduced"])
    notes = [str(n) for n in ready.get("notes") or ()] + ([ready["reduced"]] if ready.get("reduced") else [])
    rejections = list(ready.get("rejections") or ())

    def one_set(set_shapes: Any, set_seed: int, which: str, scaled: Any = None) -> dict[str, Any]:
        args = inputs_mod.fresh_inputs(set_shapes, set_seed, template if which == "main" else None)
        try:
            with inputs_mod.config_scaled((reference,), scaled):
                expected = jax.block_until_ready(jax.jit(reference)(*args))
        except Exception as exc:  # noqa: BLE001
            return {"reference_failed": f"{type(exc).__name__}: {exc}",
                    "rejection": guards.reject("reference_failed", f"the reference failed: {type(exc).__name__}: {exc}")}
        tolerance = tolerance_for(task, expected) or (0.0, 0.0)
        bad = guards.degenerate(expected, tolerance)
        if bad:
            return {"rejection": bad, "tolerance": tolerance}
        send_frame(sock, {"op": "run", "which": which}, jax.tree.leaves(args))
        header, outputs = _receive(sock)
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
            rejections.append(rejection)
        else:
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
    from pallasite.analysis.types import Measurement, Provenance, to_json

    from .tiers import versions

    vers = versions()
    return to_json(Measurement(
        status=status, provenance=Provenance.HOST if reference else Provenance.INTERPRET,
        device_kind=result["device"]["device_kind"], method=method, samples_ns=tuple(samples or ()),
        median_ns=statistics.median(samples) if samples else None,
        config=tuple(sorted((result.get("config") or {}).items())), jax_version=vers.get("jax"),
        libtpu_version=vers.get("libtpu"), error=error))


# --------------------------------------------------------------------------- the check op


def judged_check(params: Any, progress: Callable[..., Any] | None = None) -> Any:
    """The ``check`` op with tier 2 out of the candidate's reach: the candidate process imports the
    file and runs tiers 0, 1 and 3 (each entry's lowered module kept, serialized); the judge
    compiles those modules with libtpu itself, so a candidate that patches the compiler call, its
    verdict or the reply in its own process cannot make a block that does not compile "compile"."""
    import dataclasses

    import numpy as np

    from . import checks, tiers as tiers_mod
    from pallasite.wire.messages import Stage

    asked = sorted({int(t) for t in params.tiers or (1, 2)})
    if params.script or 2 not in asked:
        return checks.handle_check(params, progress)
    sock, pid = _fork(lambda s: _check_candidate(s, dataclasses.replace(params, tiers=tuple(
        sorted(set(asked) - {2} | {1}))), progress is not None))
    target = str(params.target or "v6e")
    unavailable = tiers_mod.tier2_unavailable(target) if target in tiers_mod.CHIPS else f"unknown target {target!r}"
    try:
        while True:
            header, arrays = _receive(sock)
            if header.get("op") == "progress" and progress is not None:
                with contextlib.suppress(Exception):
                    fields = {k: header[k] for k in ("tier", "entry", "line") if isinstance(header.get(k), (int, str))}
                    progress(str(header.get("message", ""))[:500], stage=Stage(header.get("stage") or "starting"),
                             **fields)
            elif header.get("op") != "progress":
                break
        if header.get("op") != "result" or not isinstance(header.get("result"), dict):
            raise CandidateGone(str(header.get("error") or "the candidate process gave no check result"))
        result: dict[str, Any] = header["result"]
        lowered = {str(name): bytes(np.asarray(a, dtype=np.uint8).tobytes())
                   for name, a in zip(header.get("lowered") or (), arrays)}
    except CandidateGone as exc:
        result = {"target": params.target, "tiers": asked, "tasks_found": 0, "entries": [], "unavailable": {},
                  "versions": tiers_mod.versions(),
                  "errors": [tiers_mod._plain_error("task", f"the candidate process failed: {exc}")]}
        lowered = {}
    finally:
        _end(sock, pid)
    _tier2_here(result, lowered, params, asked, unavailable, tiers_mod._say(progress))
    result["tiers"] = asked
    return checks.typed_result(result, asked)


def _tier2_here(result: dict[str, Any], lowered: dict[str, bytes], params: Any, asked: list[int],
                unavailable: str | None, say: Callable[..., None]) -> None:
    """Tier 2 of each entry, compiled in this process from the module the candidate lowered
    (``unavailable``: why tier 2 cannot run here, found while the candidate ran)."""
    import time as time_mod

    from . import tiers as tiers_mod
    from pallasite.wire.messages import Stage

    target = str(params.target or "v6e")
    if unavailable:
        result.setdefault("unavailable", {})["2"] = unavailable
    known = {str(k): str(v) for k, v in (params.tier2_known or {}).items()}
    for entry in result.get("entries") or ():
        if not isinstance(entry, dict) or not isinstance(entry.get("tiers"), dict):
            continue
        name = str(entry.get("name"))
        states = entry["tiers"]
        if 1 not in asked:
            states.pop("1", None)
        if name in known:
            states["2"] = known[name]
        elif unavailable:
            states["2"] = "skipped: " + unavailable.split(";")[0]
        elif states.get("1") != "ok" or name not in lowered:
            states["2"] = "skipped: tier 1 failed"
        else:
            say(f"tier 2: {name} (libtpu compile for {target}, in a process that never ran the file)",
                stage=Stage.TIER, tier=2, entry=name)
            started = time_mod.perf_counter()
            try:
                entry["memory"] = tiers_mod.compile_exported(lowered[name], target)
                states["2"] = "ok"
            except Exception as exc:  # noqa: BLE001 - the compiler's verdict
                states["2"] = "error"
                entry.setdefault("errors", []).append(tiers_mod._tier_record(exc, str(params.source.path), 2))
            entry.setdefault("timings_s", {})["2"] = round(time_mod.perf_counter() - started, 4)


def _check_candidate(sock: socket.socket, params: Any, with_progress: bool) -> None:
    """The candidate process of a judged check: tiers 0, 1 and 3 here; the lowered modules go back."""
    import numpy as np

    from . import checks, interpret_guard
    from . import tiers as tiers_mod

    tiers_mod.LOWERED = {}

    def progress(message: str, **fields: Any) -> None:
        send_frame(sock, {"op": "progress", "message": str(message), "stage": str(getattr(fields.get("stage"), "value",
                                                                                            fields.get("stage") or "")),
                          **{k: fields[k] for k in ("tier", "entry", "line") if k in fields}})

    plain = {"path": params.source.path, "text": params.source.text, "target": params.target,
             "tiers": list(params.tiers), "time_limit_s": params.time_limit_s,
             "entries": list(params.entries) if params.entries is not None else None,
             "tier2_known": dict(params.tier2_known),
             "inferred": _plain_inferred(params)}
    result = checks._handle_check(plain, params.source, progress if with_progress else None)
    names = list(tiers_mod.LOWERED)
    send_frame(sock, {"op": "result", "result": result, "lowered": names, "interpret": interpret_guard.recorded()},
               [np.frombuffer(tiers_mod.LOWERED[n], dtype=np.uint8) for n in names])


def _plain_inferred(params: Any) -> list[Any]:
    from pallasite.analysis.types import to_json

    return [to_json(call) for call in params.inferred]


def _end(sock: socket.socket, pid: int) -> None:
    """Close the channel and end the candidate process (whatever it is doing)."""
    with contextlib.suppress(OSError):
        sock.close()
    with contextlib.suppress(OSError):
        os.kill(pid, 9)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


def _fork(body: Callable[[socket.socket], None]) -> tuple[socket.socket, int]:
    """A candidate process running ``body(its end of the channel)`` (before any backend starts here)."""
    judge_end, candidate_end = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        judge_end.close()
        code = 0
        try:
            body(candidate_end)
        except BaseException:  # noqa: BLE001 - the judge sees the channel close
            import traceback

            traceback.print_exc()
            code = 1
        finally:
            os._exit(code)
    candidate_end.close()
    import ctypes

    ctypes.CDLL(None).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)  # the candidate may not read or write our memory
    return judge_end, pid


# --------------------------------------------------------------------------- the estimate op


def judged_estimate(params: Any, progress: Callable[..., Any] | None = None) -> Any:
    """The ``estimate`` op with the numbers that make a speedup out of the candidate's reach: the
    candidate process traces it and runs the cost model on its own program; the judge, from the
    user's own file (``params.trusted``), estimates the reference by the same model itself and
    refuses every candidate estimate below the physical floor (writing the task's outputs once at
    the chip's HBM bandwidth): a candidate that patches the cost model in its process can no longer
    claim "8x". Without a trusted file the candidate process answers alone (as before)."""
    import dataclasses

    from . import tune_ops

    if params.trusted is None:
        return tune_ops.handle_estimate(params, progress)
    sock, pid = _fork(lambda s: _estimate_candidate(s, dataclasses.replace(params, reference=False)))
    try:
        with contextlib.ExitStack() as stack:
            floor_s, reference, chip = _trusted_estimate(params, stack)  # while the candidate side runs
            header, _ = _receive(sock)
    except CandidateGone as exc:
        raise RuntimeError(f"the candidate process failed: {exc}") from None
    finally:
        _end(sock, pid)
    from pallasite.wire import messages

    if header.get("op") != "result":
        raise RuntimeError(str(header.get("error") or "the candidate process gave no estimate"))
    result = messages.decode_as(messages.EstimateResult, header.get("result"), "estimate result")
    estimates = tuple(
        dataclasses.replace(e, status="implausible", seconds=None, error=(
            f"estimated {e.seconds:.3g} s, below the physical floor of {floor_s:.3g} s (writing the task's outputs "
            f"once at {chip.name}'s HBM bandwidth): the estimate is not believed"))
        if e.status == "ok" and e.seconds is not None and e.seconds < floor_s else e
        for e in result.estimates)
    return dataclasses.replace(result, chip=chip, estimates=estimates,
                               reference=reference if params.reference else result.reference)


def _estimate_candidate(sock: socket.socket, params: Any) -> None:
    """The candidate process of a judged estimate: the cost model on its own traced program."""
    from pallasite.analysis.types import to_json

    from . import interpret_guard, tune_ops

    try:
        send_frame(sock, {"op": "result", "result": to_json(tune_ops.handle_estimate(params, None)),
                          "interpret": interpret_guard.recorded()})
    except Exception as exc:  # noqa: BLE001 - the candidate's failure is data
        send_frame(sock, {"op": "failed", "error": f"{type(exc).__name__}: {exc}"[:4000]})


def _trusted_estimate(params: Any, stack: contextlib.ExitStack) -> tuple[float, Any, Any]:
    """(the floor in seconds, the reference's estimate, the chip) from the user's own file."""
    import jax
    import numpy as np

    from . import tune_ops
    from .cost_model import estimate_reference
    from .loader import sent_modules, user_module

    trusted = params.trusted
    module = stack.enter_context(user_module(os.path.abspath(trusted.path), trusted.text, sent_modules(trusted),
                                             trusted.package))
    task = tune_ops._task(module, trusted, params.entry)
    chip = tune_ops.chip_spec(params.chip, probe=params.probe)
    args = tune_ops._inputs(task)
    reference = None
    out_bytes = 0
    if task.reference is not None:
        outputs = jax.eval_shape(task.reference, *args)
        out_bytes = sum(int(np.prod(o.shape)) * np.dtype(o.dtype).itemsize for o in jax.tree.leaves(outputs))
        if params.reference:
            reference = estimate_reference(task.reference, args, chip, tune_ops._topology_device(chip.name))
    return out_bytes / float(chip.hbm_bytes_per_s), reference, chip
