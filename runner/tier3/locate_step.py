"""The locate step: after tier 3 found wrong, NaN or unwritten outputs, or a run that fails with an error
(an out-of-bounds read or DMA, a deadlocked wait), the statement that makes it so, with an edit verified to
fix it (worker side: imports jax). The ``locate`` op (``wire/messages.LocateParams``).

For each entry asked for, in this (warm) worker:

1. **The failure again, at tier 3's reduced size.** The task's inputs at the shapes tier 3 runs
   (``interpret.tier3_shapes``: its CONFIG reduced, or its arrays shrunk), one interpret-mode run as the
   target runs it (one core with the grid in order on v5e/v6e; two simulated TensorCores and shuffled
   "parallel" steps on v4/v5p), and the reference's outputs. ``interpret_compare.compare`` says which
   elements are wrong; a run that raises is a failure of its own (every element counted wrong; an entry
   without a reference is located too, a fix then being a run that succeeds with every output written,
   ``compared`` False); right at these shapes, the run again with the inputs the reference never reads
   poisoned (``interpret_poison``), and right there too: "skipped".
2. **What can touch the wrong elements.** The traced run's kernel lines (``traced_lines``: the lines its
   equations came from), the output the wrong elements belong to and the kernel statements its stores
   depend on (``locate_edits.output_slice``), and whether the outputs are NaN, a few elements or most of
   them, or the error and the line tier 3 said it at (``locate_edits.Signals``) rank the candidate edits
   (``locate_edits.candidate_edits``).
3. **Each edit, run.** The file's text with the edit made is loaded as the module, its task found by
   name, and its entry run once at the same inputs (the same CONFIG held), compared with the unedited
   file's reference. Until ``budget_s`` is spent (default 60 s). An edit whose run succeeds and whose
   outputs match is run again
   on ``fresh_sets`` fresh input sets (other random floats; the task's integer tables kept), each against
   the reference: only an edit that matches on all of them is "fixed".
4. **Where none works**: the most suspicious statement - the edit that left the fewest elements wrong,
   else the best ranked - and the edits tried.

Runs are CPU interpret mode: correctness only, never TPU time. The step never changes the user's file.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import jax
import jax.numpy as jnp
import numpy as np

from ...wire import messages

from . import locate_edits
from ..tasks import tasks_runtime
from ..tasks.tasks_backward import named
from .interpret import describe_shapes, probe_calls, reduce_config, target_cores, tier3_shapes, too_large, _concrete_inputs
from .drawn_inputs import fresh_inputs as drawn_like
from .interpret_compare import compare, tolerance_for
from .interpret_config import Reduced, config_dicts, config_set
from .interpret_poison import Poison, poison_for
from .interpret_records import first_user_call, OUT_OF_BOUNDS
from .interpret_run import Run, all_arbitrary, interpret_once, namespaces, no_semantics, shuffling_seed
from .interpret_verdicts import VMAPPED_SEMANTICS
from ..grid_order import call_grid
from ..memory_guard import MemoryStop, stop_near_limit

TRIED_SHOWN = 12  # edits listed in the result when none works
CLEAR_EVERY = 8  # jax's caches are cleared every so many trials (each edit is a new module: new programs)
EDGE_SHARE = 0.01  # a fresh set this share of the elements off (one at least), each within twice the tolerance,
#   is a hair's miss, not a failure
TRIAL_SLOWER, TRIAL_SLACK_S = 4.0, 15.0  # an edit's run (traced anew) may take 4x the baseline's and 15 s more


@dataclass
class Baseline:
    """What every trial of one entry shares: the inputs, the reference's outputs, how runs run."""

    task: tasks_runtime.RuntimeTask
    inputs: tuple[Any, ...]
    shapes: str
    expected: Any
    tolerance: Any
    run_kw: dict[str, Any]
    reduced: Reduced | None
    problems: list[dict[str, Any]]
    run: Run
    failure: str = ""  # the run's error in words, when it raised (then ``problems`` is empty, every element counts)
    failure_kind: str = ""  # ``Signals.failure``'s kind of it: "deadlock", "block", "bounds" or "error"
    poison: Poison | None = None  # the outputs are wrong only with the inputs the reference never reads poisoned


def handle_locate(params: messages.LocateParams, progress: Callable[..., Any] | None = None) -> messages.LocateResult:
    """The ``locate`` op: one ``LocatedEntry`` per entry asked for (every task of the file when none is named)."""
    from ..loader import sent_modules
    from ..target_chip import target_chip
    from ..tiers import _restored_config

    say = (lambda m: progress(m, stage=messages.Stage.TIER, tier=3)) if progress else (lambda m: None)
    path = os.path.abspath(params.source.path)
    modules = sent_modules(params.source)
    out: list[messages.LocatedEntry] = []
    with contextlib.ExitStack() as stack:
        stack.enter_context(_restored_config())
        stack.enter_context(target_chip(params.chip))
        try:
            module = stack.enter_context(_loaded(path, params.source.text, modules, params.source.package))
            tasks = tasks_runtime.checked_tasks(module, path, params.source.text)
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - the file does not load: nothing to locate
            why = f"the file did not load ({type(exc).__name__}: {str(exc)[:200]})"
            return messages.LocateResult(tuple(messages.LocatedEntry(name, "skipped", why)
                                               for name in params.entries or ()))
        wanted = list(params.entries) if params.entries is not None else [t.name for t in tasks]
        for name in wanted:
            task = next((t for t in tasks if t.name == name), None)
            if task is None:
                out.append(messages.LocatedEntry(name, "skipped", "the locate step reads tasks the file states "
                                                 "(example_inputs(), a JAXBench or KernelBench form): this entry's "
                                                 "shapes came from elsewhere"))
                continue
            Step(task, path, params, modules, say).into(out)
    return messages.LocateResult(tuple(out))


@contextlib.contextmanager
def _loaded(path: str, text: str, modules: Any, package: str | None) -> Iterator[Any]:
    """The file (``text``) as a module, its top-level pallas_calls recorded and not run (as check imports it)."""
    from ..loader import user_module
    from ..recording import recording

    with contextlib.ExitStack() as stack:
        with recording(path):
            module = stack.enter_context(user_module(path, text, modules, package))
        yield module


class Step:
    """The locate step for one entry (the module doc's four parts)."""

    def __init__(self, task: tasks_runtime.RuntimeTask, path: str, params: messages.LocateParams, modules: Any,
                 say: Callable[[str], None]) -> None:
        self.task, self.path, self.params, self.modules, self.say = task, path, params, modules, say
        self.text = params.source.text
        self.started = time.monotonic()
        self.deadline = self.started + max(1.0, float(params.budget_s))
        self.trials = 0
        self.kernel = ""

    def into(self, out: list[messages.LocatedEntry]) -> None:
        try:
            out.append(self.run())
        except MemoryStop:
            out.append(self._entry("skipped", "the runs came near the worker's memory limit"))
        except Exception as exc:  # noqa: BLE001 - a failure of the step is a result, never a lost check
            out.append(self._entry("skipped", f"the locate step failed: {type(exc).__name__}: {str(exc)[:200]}"))

    def _entry(self, state: str, reason: str = "", **kw: Any) -> messages.LocatedEntry:
        return messages.LocatedEntry(self.task.name, state, reason, kernel=self.kernel,
                                     seconds=round(time.monotonic() - self.started, 2), **kw)

    def run(self) -> messages.LocatedEntry:
        with stop_near_limit():
            base = baseline(self.task, self.path, self.params.chip)
        if isinstance(base, str):
            return self._entry("skipped", base)
        with config_set(config_dicts(self.task), dict(base.reduced.values) if base.reduced else None):
            edits = self._edits(base)
        problem = base.failure or describe_problems(base.problems)
        common = {"shapes": base.shapes, "problem": problem}
        if not edits:
            return self._entry("not_found", "no mechanical edit applies to the statements that reach the outputs",
                               **common)
        self.say(f"locate: {self.task.name}: {len(edits)} edits to try within {self.params.budget_s:.0f} s")
        best: tuple[int, locate_edits.Edit] | None = None  # (elements still wrong, edit): the most suspicious
        start = base_wrong(base)
        tried: list[locate_edits.Edit] = []
        for edit in edits:
            if time.monotonic() > self.deadline:
                break
            tried.append(edit)
            verdict, wrong = self._trial(base, edit)
            if verdict is not None:
                return self._entry("fixed", fix=self._source_edit(edit), verified_sets=verdict[0], edge_sets=verdict[1],
                                   tried=(), tried_count=len(tried), compared=base.expected is not None, **common)
            if wrong is not None and wrong < start and (best is None or wrong < best[0]):
                best = (wrong, edit)
        suspect = best[1] if best is not None else edits[0]
        why = (f"no edit among the {len(tried)} tried makes the outputs match"
               + (f" ({len(edits) - len(tried)} more left when the {self.params.budget_s:.0f} s budget ran out)"
                  if len(tried) < len(edits) else ""))
        return self._entry("not_found", why, suspect=self._source_edit(suspect),
                           tried=tuple(self._source_edit(e) for e in tried[:TRIED_SHOWN]), tried_count=len(tried),
                           **common)

    def _edits(self, base: Baseline) -> list[locate_edits.Edit]:
        from .traced_lines import kernel_lines

        said = dict(self.params.failed_at).get(self.task.name)
        call = first_user_call(base.run.calls, self.path, self.task.entry)
        held = _call_holding(base.run.calls, self.path, self.text, said)
        if held is not None and (call is None or held.line != call.line):  # another call than the task's first
            call = held
        self.kernel = call.kernel_name if call is not None else ""
        if call is None or call.line is None or not call.file \
                or os.path.realpath(call.file) != os.path.realpath(self.path):
            return []
        grid = call_grid(call.kwargs) or ()
        traced = kernel_lines(self.task.entry, base.inputs, self.path)
        kernel_file = getattr(call, "kernel_file", None)
        kernel_line = call.kernel_line if kernel_file and os.path.realpath(kernel_file) == os.path.realpath(self.path) \
            else None
        return locate_edits.candidate_edits(self.text, call.line, kernel_line, len(grid), traced,
                                            signals(base.problems, base.failure_kind, said, base.poison is not None,
                                                    self.task.name in self.params.uninitialized),
                                            call.kernel_name,
                                            _inputs_count(call))

    def _trial(self, base: Baseline, edit: locate_edits.Edit) -> tuple[tuple[int, int] | None, int | None]:
        """((fresh input sets verified, of them within twice the tolerance), None) when the edit fixes the entry;
        else (None, elements still wrong at the tier-3 inputs, or None when the edited file did not run)."""
        self.trials += 1
        if self.trials % CLEAR_EVERY == 0:
            jax.clear_caches()
        text = locate_edits.apply(self.text, edit)
        try:
            with _loaded(self.path, text, self.modules, self.params.source.package) as module, stop_near_limit():
                task = named(tasks_runtime.discover(module, self.path, text), self.task)
                if task is None:
                    return None, None
                with config_set(config_dicts(task), dict(base.reduced.values) if base.reduced else None):
                    wrong = self._wrong(task, base, base.inputs, base.expected)
                    if wrong != 0:
                        return None, wrong
                    self.say(f"locate: {self.task.name}: line {edit.line} {edit.what} matches; verifying")
                    return self._verified(task, base), None
        except MemoryStop:
            raise
        except (Exception, SystemExit):  # noqa: BLE001 - an edit that breaks the file is one that does not fix it
            return None, None

    def _wrong(self, task: tasks_runtime.RuntimeTask, base: Baseline, inputs: Any, expected: Any) -> int | None:
        """Elements wrong when the edited entry runs on ``inputs`` (None: it failed, raced or ran no kernel)."""
        return self._outcome(task, base, inputs, expected)[0]

    def _outcome(self, task: tasks_runtime.RuntimeTask, base: Baseline, inputs: Any, expected: Any,
                 traced: bool = True) -> tuple[int | None, bool]:
        """(``_wrong``'s count, whether the wrong elements are a hair's miss: at most ``EDGE_SHARE`` of the
        outputs, all mismatches, and every one within twice the tolerance). ``traced``: the entry is traced
        anew, so a run that records no pallas_call ran none; a fresh set of the same shapes reuses jax's trace
        of a jitted entry and records none (jax's flash attention's right edit never verified)."""
        run = interpret_once(task.entry, inputs, user_files=(self.path,), modules=namespaces(task.entry),
                             time_limit_s=self._trial_limit(base), **base.run_kw)
        if run.error is not None or run.races or (traced and first_user_call(run.calls, self.path, task.entry) is None):
            return None, False
        found = [p for p in compare(run.outputs, expected, base.tolerance) if not p.get("width")]
        if any(p["kind"] in ("structure", "dtype") for p in found):
            return None, False
        return _wrong_count(found), hair_miss(found, run.outputs, expected, base.tolerance, output_size(base))

    def _trial_limit(self, base: Baseline) -> float:
        """One run of an edit may take a few times the baseline's run and some slack (an edited loop bound can make
        a loop that never ends); the verifying runs after the budget ran out get what is left of that, at least
        the slack."""
        allowed = TRIAL_SLOWER * base.run.seconds + TRIAL_SLACK_S
        return max(TRIAL_SLACK_S, min(allowed, self.deadline - time.monotonic() + allowed))

    def _verified(self, task: tasks_runtime.RuntimeTask, base: Baseline) -> tuple[int, int] | None:
        """(fresh input sets the edited entry matches the reference on, how many of them only within twice the
        tolerance), or None when a set misses by more. A kernel at its tolerance's edge misses a few elements
        on some draws (the unedited jax paged attention: 1 and 5 of 1,024 on two of three sets, each within
        twice the tolerance): such a set counts, and is said as such; one set at least must match exactly."""
        wanted = max(1, self.params.fresh_sets)
        matched, edges = 0, 0
        for seed in range(1, 2 * wanted + 1):
            fresh = fresh_inputs(base.inputs, seed)
            fresh = base.poison.apply(fresh) if base.poison is not None else fresh
            expected = reference_outputs(self.task, fresh)
            unchecked = base.expected is None  # no reference: a run that succeeds and writes every output
            if expected is None and not unchecked:
                return None
            wrong, hair = self._outcome(task, base, fresh, expected, traced=False)
            if wrong is None or (wrong and not hair):
                return None
            matched += 1
            edges += bool(wrong)
            if matched >= wanted and edges < matched:  # one exact match at least
                return matched, edges
        return None

    def _source_edit(self, edit: locate_edits.Edit) -> messages.SourceEdit:
        start, end = locate_edits.char_columns(self.text, edit)
        return messages.SourceEdit(edit.line, start, edit.end_line, end, edit.new, edit.old, edit.what, edit.kind)


# --------------------------------------------------------------------------- the baseline


def baseline(task: tasks_runtime.RuntimeTask, path: str, target: str) -> Baseline | str:
    """The entry's tier-3 failure again at tier 3's shapes (a ``Baseline``), or why there is none to locate."""
    try:
        abstract = task.abstract_args()
    except Exception as exc:  # noqa: BLE001 - the task's inputs failed
        return f"the example inputs failed ({type(exc).__name__})"
    spaces = namespaces(task.entry)
    reduced = None
    try:
        calls = probe_calls(task.entry, abstract, spaces)
        if too_large(abstract):
            reduced = reduce_config(task, abstract, calls, lambda args: probe_calls(task.entry, args, spaces))
    except Exception:  # noqa: BLE001 - tracing failed: tier3_shapes runs the given shapes
        calls = []
    with config_set(config_dicts(task), dict(reduced.values) if reduced else None):
        shapes, shrunk, calls = tier3_shapes(task, abstract, reduced, calls)
        inputs, _made_up = _concrete_inputs(task, shapes, shrunk and reduced is None)
        run_kw = _run_kwargs(calls, target)
        run = interpret_once(task.entry, inputs, user_files=(path,), modules=spaces, **run_kw)
        if run.error is not None and VMAPPED_SEMANTICS.search(str(run.error)):
            run_kw = dict(run_kw, semantics=no_semantics, cores=1)
            run = interpret_once(task.entry, inputs, user_files=(path,), modules=spaces, **run_kw)
        if run.races:
            return (f"the tier-3 run raced at {describe_shapes(shapes)}: the locate step reads wrong or NaN outputs "
                    "and runs that raise")
        expected = reference_outputs(task, inputs)
        if run.error is not None:  # without a reference an edit must make the run succeed with every output written
            tolerance = tolerance_for(task, expected) if expected is not None else None
            kind, said = failure_of(run.error)
            return Baseline(task, inputs, describe_shapes(shapes), expected, tolerance, run_kw, reduced, [], run,
                            failure=said, failure_kind=kind)
        tolerance = tolerance_for(task, run.outputs)
        problems = [p for p in compare(run.outputs, expected, tolerance) if not p.get("width")]
        poison = None
        if not problems and expected is not None:
            poison, run, problems = _poisoned_run(task, inputs, expected, tolerance, path, spaces, run_kw, run)
    if not problems:
        return f"tier 3 finds the outputs right at {describe_shapes(shapes)} as the target runs the kernel"
    inputs = poison.apply(inputs) if poison is not None else inputs
    return Baseline(task, inputs, describe_shapes(shapes), expected, tolerance, run_kw, reduced, problems, run,
                    poison=poison)


def _poisoned_run(task: tasks_runtime.RuntimeTask, inputs: tuple[Any, ...], expected: Any, tolerance: Any, path: str,
                  spaces: Any, run_kw: dict[str, Any], run: Run) -> tuple[Poison | None, Run, list[dict[str, Any]]]:
    """Right at the plain inputs: the run again with the inputs the reference never reads poisoned
    (``interpret_poison``, as tier 3 does); (the poison, its run, its problems), or (None, ``run``, [])."""
    poison = poison_for(task.reference, inputs, expected)
    if poison is None:
        return None, run, []
    again = interpret_once(task.entry, poison.apply(inputs), user_files=(path,), modules=spaces, **run_kw)
    if again.error is not None or again.races:
        return None, run, []
    problems = [p for p in compare(again.outputs, expected, tolerance) if not p.get("width")]
    return (poison, again, problems) if problems else (None, run, [])


def failure_of(error: BaseException) -> tuple[str, str]:
    """The baseline run's error: its kind (what ``Signals.failure`` ranks by) and a few words the finding quotes."""
    from .interpret_deadlock import KernelDeadlock

    full = " ".join(f"{error} {error.__cause__ or ''} {error.__context__ or ''}".split())
    oob = OUT_OF_BOUNDS.search(full)
    if isinstance(error, KernelDeadlock) or "deadlock" in full.lower():
        return "deadlock", "the run deadlocks (a DMA wait that nothing signals)"
    if oob:
        kind = "block" if oob.group(0).startswith("Out-of-bounds block index") else "bounds"
        return kind, f"the run reads or copies out of bounds ({oob.group(0)[:160]})"
    return "error", f"the run raised {type(error).__name__} ({full[:160]})"


def output_size(base: Baseline) -> int:
    """Elements of the reference's outputs."""
    return sum(int(np.asarray(a).size) for a in jax.tree.leaves(base.expected))


def base_wrong(base: Baseline) -> int:
    """Elements wrong at the baseline: every output element when its run raised."""
    if not base.failure:
        return _wrong_count(base.problems)
    return output_size(base) or 1


def _run_kwargs(calls: list[Any], target: str) -> dict[str, Any]:
    """How every run of the step runs: as the target does (one core, grid in order; or two shuffled cores)."""
    if target_cores(target) == 1:
        return {"cores": 1, "semantics": all_arbitrary}
    return {"seed": shuffling_seed(calls)}


def reference_outputs(task: tasks_runtime.RuntimeTask, inputs: tuple[Any, ...]) -> Any:
    """The reference's outputs on ``inputs`` (None without a reference, or when it fails)."""
    if task.reference is None:
        return None
    try:
        with stop_near_limit():
            return jax.tree.map(np.asarray, task.reference(*inputs))
    except (Exception, MemoryStop):  # noqa: BLE001 - no reference: only NaN can be compared
        return None


def fresh_inputs(inputs: tuple[Any, ...], seed: int) -> tuple[Any, ...]:
    """``inputs`` with every float array drawn again (``seed``) at the mean and spread of its own values, as
    the judge draws them (``runner/measure/timing_inputs.fresh_inputs``); integer arrays (tables, lengths)
    kept. Not N(0, 1): a gate that must be negative (simple GLA's log decay, drawn in [-0.1, -0.01]) grew
    its recurrent state past float32 on N(0, 1) draws, and no edit, not even the file as it was, verified."""
    leaves, tree = jax.tree.flatten(inputs, is_leaf=lambda a: hasattr(a, "shape") and hasattr(a, "dtype"))
    floats = [i for i, leaf in enumerate(leaves) if _floating(leaf)]
    own = tuple(leaves[i] for i in floats)
    drawn = drawn_like(tuple(jax.ShapeDtypeStruct(a.shape, a.dtype) for a in own), seed, template=own)
    for i, value, mine in zip(floats, drawn, own):
        leaves[i] = _same_sign(value, mine)
    return jax.tree.unflatten(tree, leaves)


def _same_sign(value: Any, own: Any) -> Any:
    """``value`` with the one sign all of ``own``'s values have, if they have one (a log decay stays negative)."""
    mine = np.asarray(jnp.asarray(own).astype(jnp.float32))
    if mine.size and np.all(mine <= 0) and np.any(mine < 0):
        return -jnp.abs(value)
    if mine.size and np.all(mine >= 0) and np.any(mine > 0):
        return jnp.abs(value)
    return value


def _floating(a: Any) -> bool:
    return hasattr(a, "dtype") and jnp.issubdtype(jnp.dtype(a.dtype), jnp.inexact)


# --------------------------------------------------------------------------- reading the problems


def signals(problems: list[dict[str, Any]], failure_kind: str = "", line: int | None = None,
            poisoned: bool = False, uninitialized: bool = False) -> locate_edits.Signals:
    """What the wrong outputs look like, or how the run failed and where tier 3 said so, for ranking the edits
    (``poisoned``: wrong only with the inputs the reference never reads poisoned: a mask or bound;
    ``uninitialized``: tier 3 found the NaN computed from memory never written, not left over)."""
    if poisoned:
        return locate_edits.Signals(failure="poisoned")
    if failure_kind:
        return locate_edits.Signals(failure=failure_kind, failed_line=line)
    nan = any(p["kind"] == "nan" for p in problems)
    mismatch = [p for p in problems if p["kind"] == "mismatch"]
    fraction = max((p["count"] / max(1, p["size"]) for p in mismatch), default=1.0)
    first = next((p for p in problems if p.get("index") is not None), None)
    return locate_edits.Signals(nan=nan, fraction=fraction, dtype=any(p["kind"] == "dtype" for p in problems),
                                output=int(first["index"]) if first else 0, failed_line=line,
                                uninitialized=uninitialized and nan)


def hair_miss(found: list[dict[str, Any]], outputs: Any, expected: Any, tolerance: Any, size: int) -> bool:
    """Whether the problems ``found`` (``compare``'s, of ``outputs`` against ``expected``) are a hair's miss: some
    elements wrong, at most ``EDGE_SHARE`` of the ``size`` outputs (one at least), all mismatches (no NaN), and
    every one within twice the tolerance."""
    wrong = _wrong_count(found)
    if not 0 < wrong <= max(1, EDGE_SHARE * size) or any(p["kind"] != "mismatch" for p in found):
        return False
    atol, rtol = tolerance or (0.0, 0.0)
    return not [p for p in compare(outputs, expected, (2 * atol, 2 * rtol)) if not p.get("width")]


def _wrong_count(problems: list[dict[str, Any]]) -> int:
    total = 0
    for p in problems:
        if p.get("mask") is not None:
            total += int(np.asarray(p["mask"]).sum())
        else:
            total += int(p.get("count") or p.get("size") or 1)
    return total


def describe_problems(problems: list[dict[str, Any]]) -> str:
    parts = []
    for p in problems:
        mask = p.get("mask")
        count = int(np.asarray(mask).sum()) if mask is not None else p.get("count")
        size = int(np.asarray(mask).size) if mask is not None else p.get("size")
        what = {"nan": "NaN (never written, or computed from memory never written)", "mismatch": "off the reference",
                "dtype": f"of dtype {p.get('dtype')} where the reference has {p.get('expected')}"}.get(p["kind"], p["kind"])
        parts.append(f"output {p.get('index')}: {count} of {size} elements {what}" if count is not None
                     else f"output {p.get('index')}: {what}")
    return "; ".join(parts)


def _inputs_count(call: Any) -> int | None:
    """How many kernel parameters come before the outputs (scalar prefetch and inputs)."""
    grid_spec = call.kwargs.get("grid_spec")
    specs = call.kwargs.get("in_specs") if grid_spec is None else getattr(grid_spec, "in_specs", None)
    prefetch = int(getattr(grid_spec, "num_scalar_prefetch", 0) or 0) if grid_spec is not None else 0
    if isinstance(specs, (list, tuple)):
        return prefetch + len(specs)
    if specs is not None:
        return prefetch + 1  # one BlockSpec for the one input
    return len(call.operands) if call.operands is not None else None


def _call_holding(calls: list[Any], path: str, text: str, line: int | None) -> Any:
    """The recorded call of the checked file whose ``pallas_call(...)`` expression holds ``line`` (where tier 3
    placed the failure: a task of several calls, its wrong output declared in the second's ``out_shape``)."""
    import ast

    try:
        node = locate_edits.find_call(ast.parse(text), line) if line is not None else None
    except SyntaxError:
        return None
    if node is None:
        return None
    starts = {node.lineno, getattr(node.func, "lineno", node.lineno)}
    target = os.path.realpath(path)
    return next((c for c in calls if c.file and os.path.realpath(c.file) == target and c.line in starts), None)
