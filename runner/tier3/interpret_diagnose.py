"""What a tier-3 run says about the kernel: records, and the reruns that explain them (worker side).

``diagnose(run, task, inputs, ...)`` reads one interpret-mode run (``runner/tier3/interpret_run.py``) and
returns its records (``runner/tier3/interpret_records.py``). It reruns the entry to explain what it saw:
without ``dimension_semantics`` (jax's interpreter cannot run them under vmap), with the parallel
axes as a prefix (an order the interpreter refuses and the compiler accepts), with DMAs completing
at once (two copies racing on one buffer), every axis "arbitrary" (a reduction axis marked
parallel), zero-filled memory (memory never written against NaN computed from it), output blocks
refilled with NaN before each step (a store skipped on some path), and the parallel axes run
backward (``runner/grid_order.py``): where the first run could not show a reduction axis marked
parallel (semantics dropped under vmap) or had no reference to compare with, a run that reverses
them and gives other outputs says the axis carries state, at its ``dimension_semantics`` entry.
Without a reference the entry also runs at another tiling (``interpret_tilings``): its block sizes
moved, outputs that differ from its own say one of the two tilings is wrong.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import numpy as np

from .interpret_compare import compare, tolerance_for
from .interpret_poison import poison_for
from .interpret_records import START, CallSites, dma_lines, dma_order_record, exception_record, first_user_call, kernel_lines, order_record, race_record, result_record, semantics_disagreement, tiling_record
from .interpret_run import Run, all_arbitrary, interpret_once, namespaces, no_semantics
from .interpret_tilings import TILING_SKIP_AFTER_S, moved_runs, tunable_moves
from .interpret_verdicts import VMAPPED_SEMANTICS, reference_failure, reference_mismatch, semantics_dropped, upstream_failure, upstream_record
from ..grid_order import call_grid, parallel_axes
from ..intercept import RecordedCall, dimension_semantics
from ..memory_guard import MemoryStop, stop_near_limit
from .traced_lines import kernel_lines as traced_kernel_lines


def pipeline_place(rec: dict[str, Any], task: Any, inputs: tuple[Any, ...], path: str, call: RecordedCall | None) -> None:
    """An out-of-bounds copy that no place of the kernel explains (the record still at the pallas_call) moved
    to the index map of an ``emit_pipeline`` BlockSpec that names a block past its ref (runner/pipeline_reach.py),
    the call related. Only kernels that build a pipeline are traced for it."""
    from ..pipeline_reach import pipeline_past_end

    kernel = getattr(call, "kernel", None) if call is not None else None
    try:
        import inspect

        source = inspect.getsource(inspect.unwrap(getattr(kernel, "func", kernel))) if kernel is not None else ""
    except (OSError, TypeError):
        source = ""
    if "emit_pipeline" not in source:
        return
    found = pipeline_past_end(task.entry, inputs, path, namespaces(task.entry))
    if not found:
        return
    line, what = found[0]
    rec["sentence"] = f"{rec['sentence']}: {what}"
    rec["message"] = rec["sentence"]
    rec["mentions"] = [{"line": line, "column": None}] + [dict(m, note=m.get("note") or "the copy the pipeline made")
                                                          for m in rec.get("mentions") or ()][:1]
    rec["frames"] = []


def diagnose(run: Run, task: Any, inputs: tuple[Any, ...], path: str, source: str, say: Callable[[str], None],
             seed: int, one_core: bool = False, calls: list[RecordedCall] | None = None) -> dict[str, Any]:
    """Records for one run; reruns variants (see the module doc) to explain.

    ``one_core``: the run was one TensorCore with every axis "arbitrary" (a v5e/v6e chip); its
    reruns keep that, and "parallel" semantics cannot be the cause there. ``calls``: the calls an
    earlier run of the same entry recorded (a run served from jax's trace cache records none, and
    its findings would lose the kernel's places).
    """
    return Diagnosis(task, inputs, path, source, say, seed, one_core).read(run, calls)


class Diagnosis:
    """One diagnosis: the task, the reruns made so far and the records found."""

    def __init__(self, task: Any, inputs: tuple[Any, ...], path: str, source: str, say: Callable[[str], None],
                 seed: int, one_core: bool) -> None:
        self.task, self.inputs, self.path, self.say, self.seed, self.one_core = task, inputs, path, say, seed, one_core
        self.sites, self.source = CallSites(source, path), source
        self.errors: list[dict[str, Any]] = []
        self.reruns: list[float] = []
        self.dropped = False  # dimension_semantics left out of every run (the interpreter cannot run them under vmap)
        self.prefixed = False  # every run with the parallel axes as a prefix (the interpreter rejected the order)
        self.call: RecordedCall | None = None
        self.compared = False  # the outputs were compared with a reference's (else only NaN and failures count)

    def again(self, inputs: tuple[Any, ...] | None = None, **kw: Any) -> Run:
        kw.setdefault("seed", self.seed)
        if self.prefixed:
            kw.setdefault("semantics", _parallel_prefix)
        if self.one_core or self.dropped:
            kw.setdefault("cores", 1)
            kw.setdefault("semantics", no_semantics if self.dropped else all_arbitrary)
        rerun = interpret_once(self.task.entry, self.inputs if inputs is None else inputs, user_files=(self.path,),
                               modules=namespaces(self.task.entry), **kw)
        self.reruns.append(rerun.seconds)
        return rerun

    def done(self) -> dict[str, Any]:
        return {"errors": self.errors, "_reruns": self.reruns, "_compared": self.compared}

    def read(self, run: Run, calls: list[RecordedCall] | None) -> dict[str, Any]:
        run = self._runnable(run, run.calls or calls or [])
        if self._failed(run):
            return self.done()
        expected = self._expected()
        self.compared = expected is not None
        tolerance = tolerance_for(self.task, run.outputs)
        first = compare(run.outputs, expected, tolerance)
        self.errors.extend(result_record(p, self.call, self.sites, self.path, None, None) for p in first if p.get("width"))
        problems = [p for p in first if not p.get("width")]  # a float of another width is said once, not rerun
        if not problems:
            if not self.one_core and (self.dropped or expected is None):
                self._order_dependence(run, tolerance)
            if expected is None:  # the one-core rerun too: a wrong tiling is wrong on every chip
                self._tiling_dependence(run)
            if expected is not None:
                self._poisoned(expected, tolerance)
            return self.done()
        if any(p["kind"] == "dtype" for p in problems):  # a declared dtype the results do not have: no rerun explains it
            self.errors.extend(result_record(p, self.call, self.sites, self.path, None, None)
                               for p in problems if p["kind"] == "dtype")
            return self.done()
        self._explain(problems, expected)
        return self.done()

    def _poisoned(self, expected: Any, tolerance: Any) -> None:
        """The outputs matched: again with the inputs the reference never reads poisoned
        (``interpret_poison``); a kernel whose outputs move reads what it should not."""
        poison = poison_for(self.task.reference, self.inputs, expected)
        if poison is None:
            return
        self.say(f"tier 3: {self.task.name} again with {poison.said}")
        rerun = self.again(poison.apply(self.inputs))
        if rerun.error is not None or rerun.races:
            return  # the plain run succeeded: a failure here is the poison's (a value too large for a dtype)
        problems = [p for p in compare(rerun.outputs, expected, tolerance) if not p.get("width")]
        self.call = first_user_call(rerun.calls, self.path, self.task.entry) or self.call
        self.errors.extend(result_record(p, self.call, self.sites, self.path, ("poisoned", poison.said), None)
                           for p in problems if p["kind"] in ("mismatch", "nan"))

    def _runnable(self, run: Run, traced: list[RecordedCall]) -> Run:
        """The run to read: again without semantics under vmap, or with the parallel axes as a prefix."""
        name = self.task.name
        if run.error is not None and VMAPPED_SEMANTICS.search(str(run.error)):
            self.say(f"tier 3: {name} again without dimension_semantics (jax's interpreter cannot run them under vmap)")
            retry = self.again(semantics=no_semantics, cores=1)
            if retry.error is None or not VMAPPED_SEMANTICS.search(str(retry.error)):
                self.errors.append(semantics_dropped(run.error, self.path))
                run, self.dropped = retry, True
        self.call = first_user_call(run.calls, self.path, self.task.entry) or first_user_call(traced, self.path, self.task.entry)
        if run.error is not None and _semantics_rejected(run.error):
            self.errors.append(semantics_disagreement(run.error, self.call, self.sites, self.path))
            self.say(f"tier 3: {name} again with the grid's parallel axes as a prefix")
            run = self.again(semantics=_parallel_prefix)
            self.prefixed = True  # the reruns that explain this run (zero-filled memory) run the same order
            self.call = first_user_call(run.calls, self.path, self.task.entry) or self.call
        return run

    def _failed(self, run: Run) -> bool:
        """Records for a run that raised, raced, or whose result depends on when DMAs complete; True
        when nothing more is to be read."""
        call, sites, path = self.call, self.sites, self.path
        self.errors.extend(race_record(report, call, sites, path) for report in run.races)
        if run.error is not None:
            rec = exception_record(run.error, call, sites, path, run.noise)
            if rec.get("code") == "PLS302":  # a block an emit_pipeline index map names past its ref: at that map
                pipeline_place(rec, self.task, self.inputs, path, call)
            why = upstream_failure(run.error, rec) if rec.get("code") == "PLS300" else None
            self.errors.append(upstream_record(rec, why) if why else rec)
            return True
        if run.races:  # the race explains any wrong numbers; comparing would only repeat it
            return True
        copies = dma_lines(call, path)
        if not copies:
            return False
        # the race detector misses two DMAs writing one buffer: vary when DMAs complete
        self.say(f"tier 3: {self.task.name} again with DMAs completing as soon as they start")
        eager = self.again(dma="eager")
        if eager.races:  # the detector saw it with this timing
            self.errors.extend(race_record(report, call, sites, path) for report in eager.races)
            return True
        moved = compare(eager.outputs, run.outputs, tolerance_for(self.task, run.outputs)) if eager.error is None else []
        if moved:
            self.errors.append(dma_order_record(moved[0], copies, kernel_lines(call, path, START), path))
        return bool(moved)

    def _expected(self) -> Any:
        """The reference's outputs, or None (a note says why when it has none to give)."""
        reference = getattr(self.task, "reference", None)
        mismatch = reference_mismatch(reference, self.inputs, self.path) if reference is not None else None
        if mismatch is not None:  # a note: the outputs are still checked for what needs no reference
            self.errors.append(mismatch)
            return None
        if reference is None:
            return None
        try:  # a reference that loops in Python over a task's sequences can outgrow the worker (JAXBench 7p)
            with stop_near_limit():
                return jax.tree.map(np.asarray, reference(*self.inputs))
        except (Exception, MemoryStop) as exc:  # noqa: BLE001 - the reference failed: a note, not the kernel's error
            self.errors.append(reference_failure(exc, self.path))
            return None

    def _explain(self, problems: list[dict[str, Any]], expected: Any) -> None:
        """Rerun to find the cause of wrong or NaN outputs, and record each problem with it."""
        task, name = self.task, self.task.name

        def problems_of(r: Run) -> list[dict[str, Any]]:
            return [p for p in compare(r.outputs, expected, tolerance_for(task, r.outputs)) if not p.get("width")]

        cause = None
        sem = dimension_semantics(self.call.kwargs.get("compiler_params")) if self.call else None
        if sem and "parallel" in sem and not self.one_core:
            self.say(f"tier 3: {name} again with every grid axis \"arbitrary\"")
            rerun = self.again(semantics=lambda s: ("arbitrary",) * len(s), cores=1)
            if rerun.error is None and not rerun.races and not problems_of(rerun):
                cause = ("semantics", _guilty_axes(sem, self.again, problems_of), expected is not None)
        if cause is None and any(p["kind"] == "nan" for p in problems):
            self.say(f"tier 3: {name} again with fresh memory zero-filled")
            rerun = self.again(uninitialized="zero")
            if rerun.error is None:
                cause = ("unwritten", None) if _still_fill(problems, rerun.outputs) else ("uninitialized", None)
        if cause is None and any(p["kind"] == "mismatch" for p in problems):
            # a step that writes nothing to its output block leaves there what an earlier step wrote (the
            # buffer is reused): refill the output blocks with NaN before each step to see it
            self.say(f"tier 3: {name} again with the output blocks refilled with NaN before each step")
            rerun = self.again(refill_outputs=True)
            refilled = [p for p in problems_of(rerun) if p["kind"] == "nan"] if rerun.error is None else []
            if refilled and _only_where_wrong(refilled, problems):
                problems, cause = refilled, ("skipped", None)
        if cause and cause[0] == "semantics":  # one finding: the wrong numbers have one cause
            problems = [p for p in problems if p["kind"] == "mismatch"] or problems[:1]
        if cause and cause[0] in ("unwritten", "skipped", "uninitialized"):  # which of the kernel's code ran
            self.sites.traced = traced_kernel_lines(task.entry, self.inputs, self.path)
        for problem in problems:
            self.errors.append(result_record(problem, self.call, self.sites, self.path, cause, sem))

    def _tiling_dependence(self, run: Run) -> None:
        """No reference: the outputs at another tiling (``interpret_tilings``) against this run's."""
        moves = tunable_moves(self.task)
        if not moves or run.outputs is None:
            return
        if run.seconds > TILING_SKIP_AFTER_S:  # the moved runs would take the worker's time from the rest
            self.say(f"tier 3: {self.task.name} not run at another tiling: its run took {run.seconds:.0f} s")
            return
        said = ", ".join(f"{n} = {new}" for n, (_k, _old, new) in moves.items())
        self.say(f"tier 3: {self.task.name} again at another tiling ({said}): no reference, so against itself")

        def run_with(entry: Callable[..., Any]) -> Run:
            kw: dict[str, Any] = {}
            if self.one_core or self.dropped:
                kw = {"cores": 1, "semantics": no_semantics if self.dropped else all_arbitrary}
            rerun = interpret_once(entry, self.inputs, seed=self.seed, user_files=(self.path,),
                                   modules=namespaces(self.task.entry), time_limit_s=max(15.0, 4 * run.seconds), **kw)
            self.reruns.append(rerun.seconds)
            return rerun

        found = moved_runs(run_with, run.outputs, moves, self.task)
        if found is not None:
            self.errors.append(tiling_record(found[0], found[1], self.call, self.path, self.source))

    def _order_dependence(self, run: Run, tolerance: Any) -> None:
        """A reduction axis marked "parallel" that the first run could not show (its semantics dropped
        under vmap, or no reference to compare with): the parallel axes run backward give other
        outputs; the innermost axis that does so alone is named, at its dimension_semantics entry."""
        call = self.call
        sem = dimension_semantics(call.kwargs.get("compiler_params")) if call else None
        grid = call_grid(call.kwargs) if call else None
        axes = parallel_axes(sem, grid) if grid else ()
        if not axes:
            return
        self.say(f"tier 3: {self.task.name} again with its parallel grid axes run backward")
        rerun = self.again(reverse=parallel_axes)
        moved = compare(rerun.outputs, run.outputs, tolerance) if rerun.error is None and not rerun.races else []
        if not moved:
            return
        guilty = None
        for axis in reversed(axes):
            alone = self.again(reverse=lambda s, g, axis=axis: (axis,) if axis in parallel_axes(s, g) else ())
            if alone.error is None and compare(alone.outputs, run.outputs, tolerance):
                guilty = axis
                break
        self.errors.append(order_record(moved[0], call, self.sites, self.path, guilty, sem))


def _only_where_wrong(refilled: list[dict[str, Any]], problems: list[dict[str, Any]]) -> bool:
    """Whether the NaN the refilled run shows lies only where the first run was wrong, and not
    everywhere (an output the kernel accumulates into across steps comes back NaN in every block
    when refilled: that is not a skipped store)."""
    wrong = {p["index"]: p["mask"] for p in problems if p["kind"] == "mismatch" and p.get("mask") is not None}
    for p in refilled:
        bad = wrong.get(p["index"])
        mask = np.asarray(p["mask"])
        if bad is None or mask.all() or np.any(mask & ~np.asarray(bad)):
            return False
    return True


def _guilty_axes(sem: tuple[str, ...], again: Callable[..., Run], problems_of: Callable[[Run], list]) -> list[int]:
    """The innermost parallel axis that, made "arbitrary" with every axis after it, fixes the result."""
    for axis in reversed([i for i, s in enumerate(sem) if s == "parallel"]):
        def flip(s: tuple[str, ...], axis: int = axis) -> tuple[str, ...]:
            return tuple("arbitrary" if i >= axis else v for i, v in enumerate(s))

        run = again(semantics=flip)
        if run.error is None and not run.races and not problems_of(run):
            return [axis]
    return []


def _still_fill(problems: list[dict[str, Any]], outputs: Any) -> bool:
    """Whether the NaN regions read exactly 0 with zero-filled memory: never written, not computed."""
    leaves = jax.tree.leaves(outputs)
    for p in problems:
        if p["kind"] != "nan" or p["index"] is None or p["index"] >= len(leaves):
            continue
        values = np.asarray(leaves[p["index"]]).astype(np.float64)[p["mask"]]
        if values.size and not np.all(values == 0):
            return False
    return True


def _parallel_prefix(sem: tuple[str, ...]) -> tuple[str, ...]:
    out, seen_other = [], False
    for s in sem:
        if s != "parallel":
            seen_other = True
        out.append("arbitrary" if seen_other and s == "parallel" else s)
    return tuple(out)


def _semantics_rejected(exc: BaseException) -> bool:
    return "parallel semantics must form a prefix" in str(exc)
