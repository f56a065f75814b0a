"""The worker's ``check`` op: tiers 1-3 for every task of one kernel file.

``handle_check`` loads the user's file (``runner/loader.py``), finds its
tasks (``runner/tasks/tasks_runtime.py``) and, for each entry:

- tier 1: ``jax.export.export(jax.jit(entry), platforms=("tpu",))(*shapes)`` — the real Pallas to
  Mosaic lowering on CPU jaxlib — inside an abstract mesh whose device is the target chip, with
  ``jax_pallas_verbose_errors`` on so errors name the user's lines;
- tier 2: the real Mosaic/XLA compiler from libtpu, deviceless: the target topology's first
  device, arguments placed on it, ``jax.jit(entry).trace(...).lower().compile()``; its
  ``memory_analysis()`` figures are returned. Without libtpu, tier 2 is reported unavailable once;
- tier 3: a TPU interpret-mode run on CPU (``runner/tier3/interpret.py``, ``tier3_entry``).

The file runs exactly as written. When an entry failed, a second, locating run of the file with its
literals carrying where they were written (``runner/carried_pass.py``) says where the values of the
failed entry were written (``_Locating``).

Tiers 1 and 2 for one callable (``compiler_tiers``) live in ``runner/tiers.py``, shared with
``check --script``.

``params.script`` hands the whole request to ``runner/script_mode.py`` (`check --script`).

``handle_check(CheckParams, progress) -> CheckResult`` (wire/messages.py; docs/worker-protocol.md
describes both). The tiers build a plain dict step by step (``entry["tiers"]["2"] = "skipped: tier 1
failed"``; interpret.py and script_mode.py write into it too), turned into the typed result once at
the end (``messages.check_result_from_plain``). ``params.inferred`` (tasks the client read from the
file's own calls when it states none) reaches ``runner/tasks/tasks_inferred.py``. The lowered module's text includes its source
locations, so equal hashes mean the same kernel at the same lines: a verdict stored under it (with
its spans) stays valid.

Progress is structured (``Stage.TIER`` with ``tier`` and ``entry``; ``line`` near the time limit) so
a client can say which step ran out of time without reading the words.
Worker side: imports jax, the loader and the task reader; nothing else of pallasite.
"""

from __future__ import annotations

import contextlib
import functools
import linecache
import os
import sys
import time
from typing import Any, Callable, Sequence

from ..analysis.types import to_json

from . import errors as errors_mod
from ..wire import messages
from .tasks import tasks_backward, tasks_runtime
from ..wire.messages import Stage
from .tiers import (CHIPS, _line_watch, _plain_error, _restored_config, _say, _task_error, _tier_record, check_params,
                    compiler_tiers, input_signature, tier2_unavailable, versions)

def handle_check(params: messages.CheckParams, progress: Callable[..., Any] | None = None) -> messages.CheckResult:
    """Run the requested compiler tiers on every task of the sent file (typed in, typed out)."""
    plain = {"path": params.source.path, "text": params.source.text, "chip": params.chip,
             "tiers": list(params.tiers), "time_limit_s": params.time_limit_s,
             "entries": list(params.entries) if params.entries is not None else None,
             "tier2_known": dict(params.tier2_known),
             "inferred": [to_json(call) for call in params.inferred],  # runner/tasks/tasks_inferred.py reads these
             "callers": [to_json(caller) for caller in params.callers]}  # runner/tasks/tasks_callers.py reads these
    if params.script:  # `pallasite check --script`: runner/script_mode.py
        from .script_mode import handle_script_check

        scripted = functools.partial(progress, stage=Stage.SCRIPT) if progress is not None else None
        return typed_result(handle_script_check(plain, scripted), plain["tiers"])
    return typed_result(_handle_check(plain, params.source, progress), plain["tiers"])


def _handle_check(params: dict[str, Any], source: messages.Sources | None, progress: Callable[..., Any] | None) -> dict[str, Any]:
    import jax

    started = time.monotonic()
    say = _say(progress)
    path, text, target, tiers = check_params(params)
    result: dict[str, Any] = {"chip": target, "tiers": tiers, "tasks_found": 0, "errors": [], "unavailable": {},
                              "entries": [], "versions": versions()}
    only = {str(n) for n in params["entries"]} if isinstance(params.get("entries"), (list, tuple)) else None
    known = {str(k): str(v) for k, v in (params.get("tier2_known") or {}).items()}
    if target not in CHIPS:
        result["errors"].append(_plain_error("task", f"unknown target {target!r}; use one of {', '.join(CHIPS)}"))
        return result

    jax.config.update("jax_pallas_verbose_errors", True)
    why = tier2_unavailable(target) if 2 in tiers else None
    if why:
        result["unavailable"]["2"] = why

    from .import_failures import blame_import, import_failure_records, unbound_names
    from .intercept import keeping_written_shapes
    from .loader import StopLoading, sent_modules, user_module
    from .memory_guard import stop_near_limit
    from .recording import recording
    from .script_mode import script_budget, statement_deadlines
    from .target_chip import target_chip

    say(f"importing {os.path.basename(path)} (its pallas_calls recorded, not run)", stage=Stage.IMPORT)
    modules = sent_modules(source)
    package = source.package if source is not None else None
    notes: list[str] = []
    try:
        with contextlib.ExitStack() as stack:
            stack.enter_context(_line_watch(path, params.get("time_limit_s"), say))  # a hang the deadline cannot stop
            stack.enter_context(_restored_config())
            stack.enter_context(target_chip(target))  # the file's questions about its chip answer as the target's
            limit = params.get("time_limit_s")
            stack.enter_context(keeping_written_shapes())  # scratch dims keep where they were written
            loaded_before = set(sys.modules)
            with recording(path) as run, stop_near_limit():
                guard = statement_deadlines(script_budget(limit, time.monotonic() - started))
                # the file runs as written; where a failed entry's values were written is read from a
                # second run with carried literals (runner/carried_pass.py)
                module = stack.enter_context(user_module(path, text, modules, package, failures=run.failures,
                                                         guard=guard))
            locating = _Locating(stack, path, text, modules, package, loaded_before, bool(run.failures),
                                 _half_time_left(started, limit))
            records, said = import_failure_records(run, path, limit)
            unbound = unbound_names(text if text is not None else "".join(linecache.getlines(path)), run)
            result["errors"].extend(records)
            notes.extend(said)
            try:
                tasks = tasks_runtime.checked_tasks(module, path, text)
                if not tasks:  # the zero-configuration path: the shapes the file's own code (or its callers) uses
                    zero = _zero_config(module, path, text, run, params, target, started)
                    tasks = zero.tasks
                    result["errors"].extend(zero.errors)
                    notes = ([zero.note] if zero.note else []) + notes + zero.notes
            except tasks_runtime.TaskError as exc:
                result["errors"].append(_task_error(exc, path))
                return result
            result["tasks_found"] = len(tasks)
            for task in tasks:
                if only is not None and task.name not in only:
                    continue
                checked = _check_task(task, path, target, tiers, result["unavailable"], say, known.get(task.name),
                                      locating)
                blame_import(checked, unbound)
                result["entries"].append(checked)
    except tasks_runtime.TaskError as exc:
        result["errors"].append(_task_error(exc, path))
    except (Exception, SystemExit, StopLoading) as exc:  # noqa: BLE001 - the user's module failed to import
        result["errors"].append(errors_mod.record(exc, path, stage="import"))
    if notes:  # on the first entry; with none, what was tried, for the client's "no task"
        target_notes = result["entries"][0] if result["entries"] else result
        target_notes["notes"] = notes + list(target_notes.get("notes") or ())
    return result


def _zero_config(module: Any, path: str, text: str | None, run: Any, params: dict[str, Any], target: str,
                 started: float) -> Any:
    """The tasks of a file that states none: from its own code (``runner/tasks/tasks_recorded.py``), else from the
    workspace's calls of it (``runner/tasks/tasks_callers.py``)."""
    from .tasks.tasks_callers import with_callers
    from .tasks.tasks_recorded import zero_config_tasks

    limit = params.get("time_limit_s")
    zero = zero_config_tasks(module, path, text, run, params.get("inferred"), target, limit,
                             time.monotonic() - started)
    return with_callers(zero, module, path, text, params.get("callers"), limit, time.monotonic() - started)


class _Locating:
    """The checked file's second, locating run (runner/carried_pass.py), loaded the first time an
    entry fails and kept for the others of the request."""

    def __init__(self, stack: contextlib.ExitStack, path: str, text: str | None, modules: Any, package: str | None,
                 loaded_before: set[str], by_statement: bool, time_left: Callable[[], bool]) -> None:
        self.stack, self.path, self.text, self.modules, self.package = stack, path, text, modules, package
        self.loaded_before, self.by_statement, self.time_left = loaded_before, by_statement, time_left
        self.module: Any = None
        self.failed = False

    def locate(self, entry: dict[str, Any], task: Any, args: tuple[Any, ...]) -> None:
        from .carried_pass import carried_copy, locate_entry

        if not self.time_left():
            return  # a second run of the file could take what the request has left: the verdicts go first
        if self.module is None and not self.failed:
            try:
                self.module = self.stack.enter_context(carried_copy(self.path, self.text, self.modules, self.package,
                                                                    self.loaded_before, self.by_statement))
            except (Exception, SystemExit) as exc:  # noqa: BLE001 - locating is optional: the verdicts stand
                self.failed = True
                del exc
        if self.module is not None:
            try:
                locate_entry(entry, task.name, args, self.path, self.module, self.text)
            except Exception:  # noqa: BLE001 - locating is optional: the verdicts stand as they are
                pass


def _half_time_left(started: float, limit: Any) -> Callable[[], bool]:
    """Whether less than half of the request's time limit is spent (always, without a limit)."""
    if not isinstance(limit, (int, float)) or limit <= 0:
        return lambda: True
    return lambda: time.monotonic() - started < limit / 2


def _check_task(task, path, target, tiers, unavailable, say, tier2_known=None, locating=None) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": task.name,
        "line": task.line,
        "format": task.format,
        "has_reference": task.reference is not None,
        "tolerance": task.tolerance,
        "tunables": task.tunables,
        "tiers": {},
        "errors": [],
        "memory": None,
        "mosaic_calls": None,  # tier 1: Mosaic kernels in the exported module
        "lowered_hash": None,  # tier 1: hash of the exported module's text (results-cache key)
        "inputs": [],
        "timings_s": {},
    }
    try:
        args = task.abstract_args()
    except tasks_runtime.TaskError as exc:
        entry["errors"].append(_task_error(exc, path))
        for t in tiers:
            entry["tiers"][str(t)] = "skipped: the example inputs failed"
        return entry
    entry["inputs"] = input_signature(args)
    record = lambda exc, tier: _tier_record(exc, path, tier)  # noqa: E731
    if task.call is not None:  # a recorded call (runner/tasks/tasks_recorded.py): it says what it reached
        from .recording import call_record, reach_record

        entry["reached"] = [reach_record(task.call, path)]
        if task.called_from is not None:  # a call found in the workspace (runner/tasks/tasks_callers.py)
            entry["called_from"] = list(task.called_from)
        record = lambda exc, tier: call_record(exc, path, tier, task.call)  # noqa: E731
    elif any(t in tiers for t in (1, 2, 3)):  # which of the file's pallas_calls this entry reaches (runner/reach.py)
        from .reach import entry_namespaces, reached_calls

        entry["reached"] = reached_calls(task.entry, args, path, entry_namespaces(task.entry))
    from .reach import chip_vmem_bytes, vmem_detail, vmem_excess

    # said with tier 2's progress: a compile that then runs past its time limit is explained by it
    capacity = chip_vmem_bytes(target) if 2 in tiers else None
    excess = vmem_excess(entry.get("reached"), capacity)
    compiler_tiers(entry, task.entry, args, target, tiers, unavailable, say, task.name, record, tier2_known=tier2_known,
                   detail=vmem_detail(entry.get("reached"), capacity),
                   vmem=messages.VmemExcess(**excess) if excess else None)
    if 1 in tiers:
        _blocks_past_end(entry, path)
    skipped = None
    if task.call is not None:
        from .recording import outside_its_axes

        skipped = outside_its_axes(entry, task.call)
    if 3 in tiers and skipped:
        entry["tiers"]["3"] = skipped
    elif 3 in tiers:  # TPU interpret-mode run: runner/tier3/interpret.py
        from .tier3.interpret import tier3_entry

        say(f"tier 3: {task.name}", stage=Stage.TIER, tier=3, entry=task.name)
        tier3_entry(entry, task, path, say, target)
    if entry["errors"] and task.call is None and locating is not None:
        locating.locate(entry, task, args)  # where the failed entry's values were written
    if task.name.endswith(tasks_backward.SUFFIX):
        tasks_backward.in_backward(entry["errors"], task.name)
    return entry


def _blocks_past_end(entry: dict[str, Any], path: str) -> None:
    """Tier 1's errors for blocks an index_map names past their array's end (runner/block_reach.py),
    at the BlockSpec of the call the entry made."""
    from .block_reach import grid_axis_past, past_end_record
    from .tier3.interpret_records import CallSites

    found = [(call, item) for call in entry.get("reached") or () for item in call.get("past_end") or ()]
    if not found:
        return
    sites = CallSites("".join(linecache.getlines(path)), path)
    said: set[tuple[Any, int]] = set()
    for call, item in found:
        call_line = (call.get("lines") or [None])[0]
        axis = grid_axis_past(item, call.get("grid"))  # the grid has more steps than the array has blocks
        if axis is not None and (call_line, axis) in said:
            continue  # one grid entry, one finding (every block it moves past the end is the same mistake)
        said.add((call_line, axis if axis is not None else -1 - len(said)))
        place = (sites.grid_entry(call_line, axis) if axis is not None else None) or _map_line(item, path) \
            or sites.element_line(call_line, item["role"], item["index"]) or sites.keyword_line(call_line, item["role"])
        entry["errors"].append(past_end_record(item, place and (place[0], place[1]), call_line, axis))
    if entry["tiers"].get("1") == "ok":
        entry["tiers"]["1"] = "error"


def _map_line(item: dict[str, Any], path: str) -> tuple[int, None] | None:
    """The index map's own line, when its results look exchanged (``block_reach._reordered``) and it is in ``path``."""
    at = item.get("map_at")
    if not item.get("reordered") or not at or os.path.realpath(str(at[0])) != os.path.realpath(path):
        return None
    return int(at[1]), None


def typed_result(result: dict[str, Any], tiers: Sequence[int]) -> messages.CheckResult:
    """The check's plain dict (built step by step by the tiers) as the protocol's ``CheckResult``."""
    result.setdefault("versions", versions())
    return messages.check_result_from_plain(result, tiers)
