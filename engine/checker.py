"""The check orchestrator (client side): one file in, one ``FileReport`` out.

Tier 0 (source rules) runs in this process through ``pallasite.analysis.tier0``; tiers 1-3 go to
a warm worker process as one ``check`` request (``runner/checks.py`` answers it), whose raw error
records ``engine/findings/locate.py`` turns into findings at spans of the user's file (``engine/findings/reply_failures.py``
when the request as a whole failed: limits, crashes, a worker that could not start). Suppression comments
and severity overrides are applied to every tier's findings alike; then a compiler finding that
repeats a tier-0 one is folded into it (``engine/findings/agreement.py``: one mistake, one finding).

This module never imports jax: the CLI, the language server and the agents all use it.

    checker = Checker(CheckOptions(target="v5e"))       # its own worker; the engine passes its pool
    report = await checker.check("kernel.py")          # FileReport
    await checker.close()

    reports = engine.check_paths(["a.py", "b.py"], CheckOptions())   # sync, without a results store

With a ``ResultCache`` (``Checker(options, cache=...)``; the adapter over the results store is
``engine/store_cache.py``, which the engine keeps open per workspace), every compiler-tier verdict is recorded, and
tier 2 is reused instead of recompiled when the same lowered kernel was compiled before for the
same inputs, chip, jax/libtpu versions and backend: the worker is asked for tier 1 first, which
returns each entry's lowered-module hash, then (only when needed) for tier 2 of the entries the cache
lacks and tier 3.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import re
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from ..analysis.codes import CODES
from ..analysis.pallas_use import NO_PALLAS, uses_pallas
from ..analysis.suppress import apply_suppressions
from ..analysis.tier0 import SourceAnalysis, analyze
from ..analysis.verdict import TIER0_NO_SITE
from ..analysis.types import (
    CHIP_TARGETS,
    DEFAULT_CHIP,
    DEFAULT_TIERS,
    TIERS,
    FileReport,
    Finding,
    KernelVerdict,
    ResultKey,
    Span,
)

from ..wire.messages import CheckEntry, CheckParams, CheckResult, Progress, Sources, TierOutcome, TierState

from . import chip_table, tier2_route, tier3_request, zero_config
from .workers import devices
from .findings import locate, locate_step, never_ran, reach, reply_failures
from .workers.devices import DEFAULT_CPU_DEVICES
from .workers.backend import Purpose, Reply
from .findings.agreement import merge_agreeing
from .workers.client import WorkerClient, WorkerConfig
from .result_cache import CachedVerdict, GuardedCache, ResultCache, reuse_note
from .sources import sources_for

# The chips a check can target: every generation pallasite names (analysis/types.py holds the one
# list, with why 7x is on it: its tier-1 lowering and tier-2 deviceless compile both work).
TARGETS: tuple[str, ...] = tuple(t.name for t in CHIP_TARGETS)
COMPILER_TIERS: tuple[int, ...] = (1, 2, 3)
GPU_NOTE = ("tiers 1-3 skipped: tiers 1-3 check TPU kernels; this file's pallas_calls target GPU "
            "(Triton / Mosaic GPU compiler params or scratch), so only tier 0's backend-neutral rules ran")
SEVERITY_VALUES: tuple[str, ...] = ("error", "warning", "information", "hint", "off")

ProgressFn = Callable[[str], Any]


@dataclass(frozen=True)
class CheckOptions:
    """What to check and within which limits. ``severity`` maps a code to a severity or "off"."""

    target: str = DEFAULT_CHIP
    tiers: tuple[int, ...] = DEFAULT_TIERS
    severity: Mapping[str, str] = field(default_factory=dict)
    time_limit_s: float = 300.0  # per request (server/settings.py check.timeLimitS, the one time limit)
    memory_mb: int = 4096
    interpreter: str | None = None  # the user's project python; None = sys.executable
    worker_command: tuple[str, ...] = ()  # e.g. ("ssh", "tpu-host"): run the worker there (WorkerConfig.command)
    script: bool = False  # run the file's __main__ and check every pallas_call it makes (script mode)
    cpu_devices: int = DEFAULT_CPU_DEVICES  # virtual CPU devices a worker starts with (engine/workers/devices.py)
    sandbox: str = "auto"  # local workers in a PID/mount namespace: auto | on | off (engine/workers/spawn.py)
    allow_unconfined: bool = False  # model-written code may run without a confined worker (engine/workers/confinement.py)
    callers: bool = True  # a file with no task: check it through a call found in the workspace (analysis/callers.py)
    workspace: str | None = None  # where callers are searched (None: the project folder above the file)
    # model-written code: the module the judge tested and priced (TimeResult.module as JSON text): tier 2
    # compiles these bytes, so what compiled is what was tested (engine/judge.py sets it per candidate)
    judged_module: str | None = None
    locate: bool = False  # after a tier-3 failure, the locate step (engine/findings/locate_step.py): `check --locate`
    locate_budget_s: float = 60.0  # the locate step's time for one file's edits, on the worker

    def __post_init__(self) -> None:
        # Frozen and hashable: keep the overrides as sorted pairs whatever the caller passed.
        pairs = tuple(sorted(dict(self.severity).items()))
        object.__setattr__(self, "severity", _FrozenMap(pairs))
        object.__setattr__(self, "tiers", tuple(sorted(set(int(t) for t in self.tiers))))
        object.__setattr__(self, "worker_command", tuple(self.worker_command))

    def problems(self) -> list[str]:
        """Human-readable reasons these options cannot be used (empty when they are fine)."""
        out = []
        if self.target not in TARGETS:
            out.append(f"unknown target {self.target!r}: choose one of {', '.join(TARGETS)}")
        bad = [t for t in self.tiers if t not in TIERS]
        if bad:
            out.append(f"unknown tier(s) {bad}: tiers are {', '.join(map(str, TIERS))}")
        for code, sev in self.severity.items():
            if code not in CODES:
                out.append(f"severity override for unknown code {code!r} (see `pallasite explain`)")
            if sev not in SEVERITY_VALUES:
                out.append(f"severity {sev!r} for {code}: use one of {', '.join(SEVERITY_VALUES)}")
        if self.time_limit_s <= 0:
            out.append(f"time limit must be positive, got {self.time_limit_s}")
        if not 1 <= self.cpu_devices <= 4096:
            out.append(f"cpu devices must be between 1 and 4096, got {self.cpu_devices}")
        if self.memory_mb <= 0:
            out.append(f"memory limit must be positive, got {self.memory_mb}")
        if self.locate_budget_s <= 0:
            out.append(f"the locate step's budget must be positive, got {self.locate_budget_s}")
        return out


class _FrozenMap(Mapping[str, str]):
    """A hashable read-only mapping (so CheckOptions stays a frozen, hashable value)."""

    def __init__(self, pairs: tuple[tuple[str, str], ...]):
        self._pairs = pairs
        self._dict = dict(pairs)

    def __getitem__(self, key: str) -> str:
        return self._dict[key]

    def __iter__(self):
        return iter(self._dict)

    def __len__(self) -> int:
        return len(self._dict)

    def __hash__(self) -> int:
        return hash(self._pairs)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mapping) and dict(self) == dict(other)

    def __repr__(self) -> str:
        return repr(self._dict)


# --------------------------------------------------------------------------- the orchestrator


class Checker:
    """Checks files against one set of options, keeping one warm worker across files."""

    def __init__(self, options: CheckOptions, client: Any = None, *, cache: ResultCache | None = None,
                 purpose: Purpose = "check", untrusted: bool = False):
        """``client``: a ``Backend`` (engine/workers/backend.py; the engine passes its pool) or a ``WorkerClient``;
        None: this checker starts and owns one worker. ``purpose``: what its requests are for.
        ``untrusted``: it checks model-written text: the workers it starts itself are confined too."""
        self.options = options
        self.untrusted = untrusted
        self._client = client
        self._own_client = client is None
        self.cache = cache
        self.purpose = purpose
        self._by_devices: dict[int, WorkerClient] = {}  # workers for files that set their own device count

    async def check(
        self,
        path: str,
        text: str | None = None,
        *,
        tiers: Sequence[int] | None = None,
        on_progress: ProgressFn | None = None,
        analysis: SourceAnalysis | None = None,
    ) -> FileReport:
        """The report for ``path`` (its current ``text`` when given, else read from disk).
        ``analysis``: tier 0's analysis of this very ``text`` for this checker's target, when the
        caller has one (the language server's snapshot): taken as it is, not computed again."""
        tiers = tuple(sorted(set(tiers))) if tiers is not None else self.options.tiers
        if text is None:
            try:
                text = read_source(path)
            except OSError as exc:
                return FileReport(path=path, notes=(f"{path}: cannot read the file ({exc}); nothing was checked",))
            except SourceDecodeError as exc:
                return FileReport(path=path, findings=(exc.finding,))

        findings: list[Finding] = []
        notes: list[str] = []
        learned: list[Any] = []  # what the run learned per pallas_call (TracedCall, engine/findings/reach.py)
        wrong = locate_step.WrongOutputs()  # entries whose tier-3 outputs were wrong, or whose run failed at a line
        # (engine/findings/locate_step.py)
        if analysis is None:
            analysis = analyze(text, path, target=self.options.target, scoped_vmem=scoped_vmem(self.options.target))
        if analysis.syntax_ok and not analysis.uses_pallas and not uses_pallas(path, text):  # plain JAX: nothing applies
            return FileReport(path=path, skipped=NO_PALLAS)
        if not analysis.syntax_ok and not analysis.uses_pallas:  # not Python at all: no tier can read it, said so
            return FileReport(path=path, findings=tuple(_syntax_findings(text, path)))
        if 0 in tiers:
            findings.extend(analysis.findings)
        verdicts = _initial_verdicts(analysis, text, tiers)

        compiler_tiers = tuple(t for t in tiers if t in COMPILER_TIERS)
        if compiler_tiers:
            if not analysis.syntax_ok:
                _mark(verdicts, compiler_tiers, "skipped: the file does not parse")
                if self.options.script and not any(f.code == "PLS000" for f in findings):
                    findings.extend(_syntax_findings(text, path))  # --script was asked: say why it did not run
            elif analysis.sites and all(site.backend == "gpu" for site in analysis.sites):
                _mark(verdicts, compiler_tiers, "skipped: GPU kernel")
                notes.append(GPU_NOTE)
            elif not self.options.script and not _has_task(analysis, text) and not _in_maxkernel_dir(path):
                # no task stated: the worker checks the calls the file's import (or its __main__) makes,
                # else the shapes read from its source (runner/tasks/tasks_recorded.py)
                inference = zero_config.inference_for(text, path)
                await self._run_compiler_tiers(
                    path, text, analysis, compiler_tiers, findings, notes, verdicts, on_progress,
                    inference=inference, callers=await self._callers(path, analysis, inference), learned=learned,
                    wrong=wrong)
            else:
                await self._run_compiler_tiers(
                    path, text, analysis, compiler_tiers, findings, notes, verdicts, on_progress, learned=learned,
                    wrong=wrong)

        findings = list(apply_suppressions(findings, text, dict(self.options.severity)))
        findings = merge_agreeing(findings, analysis.sites, self.options.severity)  # one mistake, one finding
        findings.sort(key=lambda f: (f.span.line, f.span.column, f.tier, f.code))
        report = FileReport(
            path=path,
            findings=tuple(_dedupe(findings)),
            kernels=tuple(v.freeze() for v in verdicts),
            notes=tuple(dict.fromkeys(notes)),
            calls=tuple(learned),
        )
        report = wrong.into(report)
        if self.options.locate and not self.untrusted and report.wrong_outputs:
            report = await self.locate(report, text, on_progress=on_progress, analysis=analysis)
        return report

    async def _callers(self, path: str, analysis: SourceAnalysis, inference: Any) -> Any:
        """The workspace's callers of a file with no task whose own code shows no shapes (None: not searched:
        the file has shapes of its own, launches no kernel, or the options say not to)."""
        launches = bool(analysis.sites) or any(f.code == "PLS014" for f in analysis.findings)
        if not self.options.callers or self.untrusted or inference.tasks or not launches:
            return None
        import asyncio

        return await asyncio.to_thread(zero_config.callers_for, path, self.options.workspace)

    def with_tier0(self, report: FileReport, text: str, analysis: SourceAnalysis | None = None) -> FileReport:
        """``report`` (a check of ``text`` by the compiler tiers only, as the language server runs one on save:
        it runs tier 0 on every edit) as a check of tier 0 too makes it: each site's tier-0 state and tier 0's
        findings, suppressed and folded the same way, so the editor says the file's compile verdict in
        `pallasite check`'s words. ``analysis``: tier 0's analysis of this very ``text``, when the caller has it."""
        if report.skipped:
            return report
        if analysis is None:
            analysis = analyze(text, report.path, target=self.options.target, scoped_vmem=scoped_vmem(self.options.target))
        kernels = list(report.kernels)
        for i, site in enumerate(_initial_verdicts(analysis, text, (0,))[:len(kernels)]):
            states = dict(kernels[i].tiers)  # the report's first kernels are the sites', in order
            if kernels[i].name == site.name and states.get(0) == "not run":
                kernels[i] = dataclasses.replace(kernels[i], tiers=tuple(sorted({**states, 0: site.tiers[0]}.items())))
        findings = list(apply_suppressions([*analysis.findings, *report.findings], text, dict(self.options.severity)))
        findings = merge_agreeing(findings, analysis.sites)
        findings.sort(key=lambda f: (f.span.line, f.span.column, f.tier, f.code))
        return dataclasses.replace(report, findings=tuple(_dedupe(findings)), kernels=tuple(kernels))

    async def locate(self, report: FileReport, text: str, *, on_progress: ProgressFn | None = None,
                     analysis: SourceAnalysis | None = None) -> FileReport:
        """The locate step for ``report``'s tier-3 failures (engine/findings/locate_step.py): each wrong-output finding
        at the statement that makes it, with the edit verified by the worker as its fix. The report as it is
        when it has none, or for model-written text (its code runs only in confined workers)."""
        if not report.wrong_outputs or self.untrusted:
            return report
        if analysis is None:
            analysis = analyze(text, report.path, target=self.options.target,
                               scoped_vmem=scoped_vmem(self.options.target))
        client = self._worker_for(text, [])
        site_lines = frozenset(s.span.line for s in analysis.sites)

        def progress(message: Progress) -> None:
            if on_progress is not None and message.message:
                on_progress(message.message)

        async def request(params: Any, timeout_s: float) -> Reply:
            return await client.request(params, purpose=self.purpose, timeout_s=timeout_s, on_progress=progress)

        return await locate_step.locate_report(request, report, text, self.options.target,
                                               self.options.locate_budget_s, site_lines)

    async def close(self) -> None:
        """Stop the worker this checker started (a client passed in is left to its owner)."""
        client, self._client = self._client, None
        if client is not None and self._own_client:
            await client.close()
        extra, self._by_devices = self._by_devices, {}
        for other in extra.values():
            await other.close()

    # ------------------------------------------------------------------ tiers 1-3

    async def _run_compiler_tiers(self, path, text, analysis, tiers, findings, notes, verdicts, on_progress,
                                  inference=None, callers=None, learned=None, wrong=None):
        """``inference``: the file states no task (engine/zero_config.py); its inferred shapes go along, and
        ``callers`` (analysis/callers.py's search, or None), the workspace's calls of it. ``learned`` gets
        what the run learned about each pallas_call (``TracedCall``s); ``wrong`` the entries whose tier-3 outputs
        were wrong or whose run failed, and where (engine/findings/locate_step.py)."""
        inferred = zero_config.inferred_calls(inference) if inference is not None else ()
        callers_sent = zero_config.caller_refs(callers)
        client = self._worker_for(text, notes)
        cache = GuardedCache(self.cache, notes) if self.cache is not None else None
        reuse = cache is not None and 1 in tiers and 2 in tiers and not self.options.script and not callers_sent \
            and tier2_route.tier1_first(path, text)  # code changed since the path's last check: one request
        # (with the workspace's callers to run, one request: a second would run their tests again)
        last_stage: dict[str, Any] = {}
        source = sources_for(path, text)

        def progress(report: Progress) -> None:
            last_stage.clear()
            last_stage.update(reply_failures.stage_of(report))
            if on_progress is not None and report.message:
                on_progress(report.message)

        split3 = 3 in tiers and len(tiers) > 1  # tier 3 on its own: a limit it reaches loses only tier 3
        before3 = tuple(t for t in tiers if t != 3) if split3 else tiers
        first = (1,) if reuse else before3  # with the cache: tier 1 first, then tier 2 as needed
        reply = await self._request(client, source, first, progress, inferred=inferred, callers=callers_sent)
        if reply.status != "ok":
            finding, state = self._failure(reply, path, text, analysis, last_stage, tiers)
            if finding is not None:
                findings.append(finding)
            _mark(verdicts, tiers, state)
            return
        result: CheckResult = reply.result
        reused: dict[str, CachedVerdict] = {}
        if reuse:
            result, reused = await self._tier2_from_cache_or_worker(
                client, cache, source, text, analysis, result, before3, findings, progress, last_stage, inferred,
                callers_sent)
        if split3:  # engine/tier3_request.py
            result = await tier3_request.run_tier3(
                lambda ask, names: self._request(client, source, ask, progress, entries=names, inferred=inferred,
                                                 callers=callers_sent),
                result, findings,
                lambda failed, ask: self._failure(failed, path, text, analysis, last_stage, ask),
                lambda failed: tier3_request.resource_stop(failed, text, analysis, last_stage, self.options.target,
                                                           {"time_limit_s": self.options.time_limit_s,
                                                            "memory_mb": self.options.memory_mb}, path))
        if not result.entries and not result.errors:  # the worker found no task, and the file's code made no call
            reasons = zero_config.fallback_reasons(inference) if inference else ""
            entries = zero_config.public_entries(text, [s.enclosing_function for s in analysis.sites
                                                        if s.enclosing_function])
            findings.append(_no_task_finding(text, reasons + zero_config.one_line_hint(callers, entries),
                                             result.notes))
            _mark(verdicts, tiers, "skipped: no example inputs (PLS900)")
            return
        if inference is not None and any(e.format == "inferred" for e in result.entries):
            notes.extend(zero_config.inferred_note(task) for task in inference.tasks)
        if learned is not None:
            learned.extend(reach.traced_calls(result.entries))
        located = locate.locate_result(result, text, analysis, self.options.target, path=path)
        findings.extend(never_ran.never_ran_findings(text, analysis.sites, never_ran.ran_lines(result.entries),
                                                     never_ran.kernel_def_lines(result.entries)))
        if wrong is not None:
            wrong.add(located.by_entry)
        findings.extend(located.findings)
        notes.extend(located.notes)
        notes.extend(_memory_note(name, figures, self.options.target) for name, figures in located.memory.items())
        for name, hit in reused.items():
            findings.extend(hit.findings)
            notes.append(reuse_note(name, hit, self.options.target, _versions(result)))
        _merge_worker_verdicts(verdicts, located.verdicts, text, tuple(located.findings)
                               + tuple(f for hit in reused.values() for f in hit.findings),
                               library=not analysis.sites and any(f.code == "PLS014" for f in analysis.findings))
        if cache is not None:
            self._record(cache, path, text, result, located, reused)

    def _failure(self, reply, path, text, analysis, last_stage, tiers) -> tuple[Finding | None, str]:
        """The finding for a request that did not come back "ok", and the state of the tiers it asked for."""
        status = reply.status
        if reply_failures.is_startup_failure(reply):  # the worker's environment, not the kernel
            finding = reply_failures.startup_failure(reply, self.options.interpreter or sys.executable,
                                                     tiers, self.options.target)
            return finding, "skipped: the check worker could not start (PLS906)"
        finding = reply_failures.reply_failure(status, _reply_message(reply), text, analysis, last_stage,
                                               self.options.target, stderr=reply.stderr_tail,
                                               path=path, time_limit_s=self.options.time_limit_s)
        return finding, "error" if status in ("timed_out", "memory", "crashed") else f"skipped: {status.replace('_', ' ')}"

    async def _request(self, client, source: Sources, tiers, progress, entries=None, tier2_known=None,
                       inferred=(), callers=()) -> Reply:
        params = CheckParams(source=source, chip=self.options.target, tiers=tuple(tiers),
                             time_limit_s=self.options.time_limit_s, script=self.options.script,
                             entries=tuple(entries) if entries is not None else None,
                             tier2_known=dict(tier2_known or {}), inferred=tuple(inferred), callers=tuple(callers),
                             judged_module=self.options.judged_module)
        return await client.request(params, purpose=self.purpose, timeout_s=self.options.time_limit_s,
                                    on_progress=progress)

    # ------------------------------------------------------------------ the results cache

    def _key(self, entry: CheckEntry, code_hash: str | None, versions: Mapping[str, Any]) -> ResultKey | None:
        if not code_hash:
            return None
        inputs = tuple((tuple(int(d) for d in sig.shape), str(sig.dtype)) for sig in entry.inputs)
        command = self.options.worker_command
        return ResultKey(code_hash=code_hash, kernel=entry.name, inputs=inputs, chip=self.options.target,
                         jax_version=versions.get("jax"), libtpu_version=versions.get("libtpu"),
                         backend="command:" + " ".join(command) if command else "local")

    async def _tier2_from_cache_or_worker(self, client, cache, source, text, analysis, result: CheckResult, tiers,
                                          findings, progress, last_stage, inferred=(), callers=()
                                          ) -> tuple[CheckResult, dict[str, CachedVerdict]]:
        """After tier 1: each entry's tier 2 from the cache by its lowered hash, else from the worker.

        One more request covers the cache's misses (tier 2) and, when asked for, tier 3 of every
        entry whose lowering passed; the reused verdicts go with it (``tier2_known``) so tier 3
        skips an entry whose tier 2 failed, as in a single request. Returns the result with the
        second request's states, records, notes, memory and timings merged in, and the reused
        verdicts by entry name.
        """
        versions = _versions(result)
        later_tiers = (2, 3) if 3 in tiers else (2,)
        states: dict[str, dict[int, TierOutcome]] = {}
        reused: dict[str, CachedVerdict] = {}
        missing: list[str] = []
        lowered: list[str] = []
        for entry in result.entries:
            own = states[entry.name] = {o.tier: o for o in entry.tiers}
            first = own.get(1)
            if first is None or first.state != TierState.OK:
                for later in later_tiers:
                    if later not in own:
                        own[later] = (TierOutcome(later, TierState.SKIPPED, "tier 1 failed")
                                      if first is not None and first.state == TierState.ERROR
                                      else TierOutcome(later, TierState.NOT_RUN))
                continue
            lowered.append(entry.name)
            key = self._key(entry, entry.lowered_hash, versions)
            hit = cache.get(key, 2) if key is not None else None
            if hit is not None:
                own[2] = TierOutcome.of(2, hit.status)
                reused[entry.name] = hit
            else:
                missing.append(entry.name)
        ask = ((2,) if missing else ()) + ((3,) if 3 in tiers and lowered else ())
        if not ask:
            return _with_states(result, states, {}), reused
        known = {name: hit.status for name, hit in reused.items()}
        reply = await self._request(client, source, ask, progress, entries=lowered, tier2_known=known,
                                    inferred=inferred, callers=callers)
        if reply.status != "ok":
            finding, state = self._failure(reply, source.path, text, analysis, last_stage, ask)
            if finding is not None:
                findings.append(finding)
            for name in lowered:
                for tier in ask:
                    if tier == 3 or name in missing:
                        states[name][tier] = TierOutcome.of(tier, state)
            return _with_states(result, states, {}), reused
        second: CheckResult = reply.result
        done = {e.name: e for e in second.entries if e.name in lowered}
        for name, entry in done.items():
            ran = {3} | ({2} if name in missing else set())
            for outcome in entry.tiers:
                if outcome.tier in ran:
                    states[name][outcome.tier] = outcome
        merged = _with_states(result, states, {name: (e, {3} | ({2} if name in missing else set()))
                                               for name, e in done.items()})
        merged = dataclasses.replace(merged, unavailable={**result.unavailable, **second.unavailable},
                                     tiers=tuple(sorted(set(result.tiers) | set(ask))))
        return merged, reused

    def _record(self, cache, path, text, result: CheckResult, located, reused) -> None:
        """Store every compiler-tier verdict this check produced (reused ones are already stored)."""
        versions = _versions(result)
        source = None
        for entry in result.entries:
            for outcome in entry.tiers:
                tier = outcome.tier
                if outcome.state not in (TierState.OK, TierState.ERROR) or (tier == 2 and entry.name in reused):
                    continue
                if tier == 2:
                    key = self._key(entry, entry.lowered_hash, versions)
                else:
                    source = source or cache.source_hash(path, text)
                    key = self._key(entry, source, versions)
                if key is None:
                    continue
                mine = tuple(f for f in located.by_entry.get(entry.name, ()) if f.tier == tier)
                cache.put(key, tier, outcome.state.value, mine, path=path)

    def _worker_for(self, text: str, notes: list[str]) -> Any:
        """The warm worker, or one started with the device count the file sets for itself."""
        count = devices.file_device_count(text)
        if count is None or count == self.options.cpu_devices or self.options.worker_command:
            return self.worker()
        if count not in self._by_devices:
            self._by_devices[count] = WorkerClient(self._config(count))
        notes.append(f"checked in a worker started with {count} CPU device(s), as this file's XLA_FLAGS asks")
        return self._by_devices[count]

    def _config(self, cpu_devices: int) -> WorkerConfig:
        return WorkerConfig(
            python=self.options.interpreter or sys.executable,
            memory_mb=self.options.memory_mb,
            timeout_s=self.options.time_limit_s,
            command=self.options.worker_command,
            cpu_devices=cpu_devices,
            sandbox=self.options.sandbox,
            confine=self.untrusted,
            allow_unconfined=self.options.allow_unconfined,
        )

    def worker(self) -> Any:
        """The backend (or single worker client) this checker uses, started lazily when it owns one."""
        if self._client is not None:
            return self._client
        self._client = WorkerClient(self._config(self.options.cpu_devices))
        return self._client


class SourceDecodeError(ValueError):
    """The file's bytes are not text in its encoding; ``finding`` is the PLS000 that says where."""

    def __init__(self, finding: Finding):
        super().__init__(finding.message)
        self.finding = finding


def read_source(path: str) -> str:
    """The file's text, decoded as Python does: UTF-8 unless a BOM or a coding line says otherwise.

    Raises OSError when the file cannot be read, and SourceDecodeError (carrying a PLS000 finding
    at line 1 that names the first bad byte's line and column) when its bytes do not decode.
    """
    import tokenize

    with open(path, "rb") as f:
        data = f.read()
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:  # an unknown encoding on the coding line, or a BOM that contradicts it
        raise SourceDecodeError(_decode_finding(path, f"its encoding declaration is unusable ({exc.msg})")) from None
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        kind = ("it is not UTF-8 and declares no other encoding" if encoding in ("utf-8", "utf-8-sig")
                else f"it is not valid {encoding}, the encoding its coding line declares")
        what = (f"{kind}: the first bad byte, 0x{data[exc.start]:02X}, is at line {line}, column {column} "
                f"(byte offset {exc.start})")
        raise SourceDecodeError(_decode_finding(path, what)) from None


def _decode_finding(path: str, what: str) -> Finding:
    import os

    message = (f"{os.path.basename(path)} cannot be read as Python source: {what}. Save the file as UTF-8, "
               "or declare its encoding on its first or second line (`# -*- coding: latin-1 -*-`); "
               "nothing else was checked.")
    return Finding(code="PLS000", message=message, span=Span.point(0), severity=CODES["PLS000"].severity,
                   tier=0, origin="pallasite rules")


def _versions(result: CheckResult) -> dict[str, Any]:
    return {"jax": result.versions.jax, "libtpu": result.versions.libtpu}


def _with_states(result: CheckResult, states: Mapping[str, Mapping[int, TierOutcome]],
                 second: Mapping[str, tuple[CheckEntry, set[int]]]) -> CheckResult:
    """``result`` with each entry's tier states replaced, and, for entries a second request ran
    (tiers ``ran``), its records, notes, memory (tier 2) and timings of those tiers added."""
    entries = []
    for entry in result.entries:
        changes: dict[str, Any] = {"tiers": tuple(sorted(states.get(entry.name, {}).values(), key=lambda o: o.tier))
                                   or entry.tiers}
        if entry.name in second:
            done, ran = second[entry.name]
            changes["errors"] = entry.errors + tuple(r for r in done.errors if r.tier in ran)
            changes["notes"] = entry.notes + done.notes
            changes["timings_s"] = {**entry.timings_s, **{k: v for k, v in done.timings_s.items() if int(k) in ran}}
            changes["measurements"] = entry.measurements + done.measurements
            changes["tier3"] = done.tier3 or entry.tier3
            changes["ran_lines"] = done.ran_lines if done.ran_lines is not None else entry.ran_lines
            if 2 in ran:
                changes["memory"] = done.memory
        entries.append(dataclasses.replace(entry, **changes))
    return dataclasses.replace(result, entries=tuple(entries))


def _reply_message(reply: Any) -> str:
    """What a failed reply says: its message, else the op's error, with the worker's last stderr
    lines said once (not a traceback dump: the finding's detail keeps the whole tail)."""
    message = reply.message
    error = reply.error
    if not message and error is not None:
        message = f"{error.type}: {error.message}"
    stderr = reply.stderr_tail
    tail = [line for line in stderr.splitlines() if line.strip()][-3:]
    if tail and reply.status == "crashed" and "(most recent call first)" not in stderr:
        message += " (last worker output: " + " | ".join(line.strip()[:200] for line in tail) + ")"
    return message


def _memory_note(entry: str, figures: Mapping[str, int], target: str) -> str:
    """Tier 2's HBM figures for one entry, saying where they come from."""
    mib = lambda n: f"{n / 2**20:.1f} MiB"  # noqa: E731
    parts = [f"{label} {mib(figures[key])}" for key, label in (
        ("argument_size_in_bytes", "arguments"), ("output_size_in_bytes", "outputs"),
        ("temp_size_in_bytes", "temporaries"), ("peak_memory_in_bytes", "peak")) if key in figures]
    vmem = figures.get("vmem_scoped_bytes")
    said = (f"; VMEM {mib(vmem)} scoped, the largest of its {figures.get('vmem_kernels', 1)} kernel(s) "
            "(libtpu's VMEM report)" if vmem else "")
    return (f"tier 2 memory for {entry} on {target}: HBM " + ", ".join(parts)
            + " (libtpu compiler's memory_analysis, deviceless compile" + (")" + said if said else
                                                                           "; VMEM use is not included)"))


# --------------------------------------------------------------------------- helpers


@dataclass
class _Verdict:
    name: str
    span: Span
    entry: str | None
    tiers: dict[int, str]
    site: Any = None  # the KernelSite (None: a verdict for an entry with no site of its own)

    def freeze(self) -> KernelVerdict:
        return KernelVerdict(name=self.name, span=self.span, tiers=tuple(sorted(self.tiers.items())))


def scoped_vmem(target: str) -> int | None:
    """The target's default scoped-VMEM limit from the cached chip table (None when not measured:
    tier 0's VMEM rule then stays quiet; ``pallasite chips`` measures it)."""
    return _scoped_vmem_table().get(target)


@functools.lru_cache(maxsize=1)
def _scoped_vmem_table() -> dict[str, int]:
    try:
        specs = chip_table.cached() or []
    except Exception:  # noqa: BLE001 - an unreadable cache only silences one rule
        return {}
    return {s.name: s.scoped_vmem_limit_bytes for s in specs if s.scoped_vmem_limit_bytes}


def _initial_verdicts(analysis: SourceAnalysis, text: str, tiers: Sequence[int]) -> list[_Verdict]:
    """One verdict per pallas_call site (tier 0 filled in, other tiers "not run")."""
    verdicts: list[_Verdict] = []
    findings = [f for f in analysis.findings if f.severity == "error"]
    for site in analysis.sites:
        name = site.kernel_name or site.enclosing_function or "pallas_call"
        states = {t: "not run" for t in TIERS}
        if 0 in tiers:
            spans = _site_spans(site)
            hit = any(_inside(f.span, s) for f in findings for s in spans)
            if len(analysis.sites) == 1 and findings:
                hit = True  # one pallas_call: every tier-0 error of the file is about it
            states[0] = "error" if hit else "ok"
        verdicts.append(_Verdict(name=name, span=site.span, entry=site.enclosing_function, tiers=states, site=site))
    return verdicts


def _site_spans(site: Any) -> list[Span]:
    """Where a pallas_call's parts are written: the call, the kernel, its specs and scratch."""
    spans = [site.span, site.kernel_def_span, site.grid_span, site.dimension_semantics_span]
    for spec in tuple(site.in_specs or ()) + tuple(site.out_specs or ()):
        spans += [spec.span, spec.index_map_span]
    spans += [s.span for s in site.scratch_shapes or ()]
    return [s for s in spans if s is not None]


def _inside(inner: Span, outer: Span) -> bool:
    return (outer.line, outer.column) <= (inner.line, inner.column) <= (outer.end_line, outer.end_column)


def _mark(verdicts: list[_Verdict], tiers: Sequence[int], state: str) -> None:
    for v in verdicts:
        for t in tiers:
            v.tiers[t] = state


def _merge_worker_verdicts(verdicts: list[_Verdict], entries: Sequence[Any], text: str,
                           findings: Sequence[Finding] = (), *, library: bool = False) -> None:
    """Attach each worker entry's tier states to the sites it covers, or add a verdict for it.
    ``library``: the file writes no pallas_call and calls a kernel library's (tier 0's PLS014): an entry
    whose calls are not known (its trace failed first) is a library kernel too, for tier 0.

    When an entry reaches several pallas_calls and a tier failed, only the kernel the error was
    located in is marked "error"; the entry's other kernels are "skipped" for that tier (the
    lowering and the compiler stop at the first failure).
    """
    by_reach = reach.reach_known(entries)  # the worker said which pallas_calls each entry made
    updated: set[int] = set()  # verdicts an entry already set (a later entry's "ok" keeps an "error")
    sites = [v for v in verdicts if v.site is not None]
    functions = reach.function_lines(text) if by_reach else {}
    reached = {id(e): reach.reached_sites([v.site for v in sites], e.reached, functions) for e in entries}
    for entry in entries:
        if by_reach:
            covered = [v for v in sites if any(v.site is s for s in reached[id(entry)])]
        else:
            covered = [v for v in verdicts if v.entry == entry.name]
        if not covered and len(entries) == 1 and not by_reach:
            covered = list(verdicts)  # one entry: it reaches every pallas_call of the file
        made_none = by_reach and not entry.reached and "error" not in entry.tiers.values()
        if not covered and made_none and entry.mosaic_calls == 0:
            continue  # no Pallas kernel at all: nothing to mark (the compile verdict says "no pallas_call")
        if not covered:
            span = _def_span(text, entry.name)
            v = _Verdict(name=entry.name, span=span, entry=entry.name, tiers={t: "not run" for t in TIERS})
            if made_none and entry.mosaic_calls:  # a kernel made without a pallas_call (pl.kernel / core_map on
                v.tiers[0] = TIER0_NO_SITE      # a SparseCore mesh): tier 0, which reads pallas_call sites, has none
            elif reach.library_site(entry.reached):  # a library's kernel the file calls: its site is not the file's
                v.tiers[0] = reach.library_site(entry.reached)
            elif library and not reach.reach_known([entry]):
                v.tiers[0] = reach.LIBRARY_UNKNOWN
            verdicts.append(v)
            covered = [v]
        for v in covered:
            for tier, state in entry.tiers.items():
                if not (id(v) in updated and v.tiers.get(tier) == "error" and state != "error"):
                    v.tiers[tier] = state
            updated.add(id(v))
        if len(covered) < 2:
            continue
        for tier, state in entry.tiers.items():
            if state != "error":
                continue
            culprits = {f.kernel for f in findings if f.tier == tier and f.severity == "error" and f.kernel}
            if culprits & {v.name for v in covered}:
                for v in covered:
                    if v.name not in culprits:
                        v.tiers[tier] = f"skipped: kernel {', '.join(sorted(culprits))} failed first"
    if by_reach:  # sites no entry reached: their compiler tiers never ran on them
        ran = {t for e in entries for t in e.tiers}
        for v in sites:
            if not any(v.site is s for e in entries for s in reached[id(e)]):
                for t in ran:
                    v.tiers[t] = reach.NOT_REACHED


_DEF = "^(?:async\\s+)?def\\s+{name}\\b"


def _def_span(text: str, name: str) -> Span:
    m = re.search(_DEF.format(name=re.escape(name)), text, re.M)
    if not m:
        return Span.point(0)
    line = text.count("\n", 0, m.start())
    return Span.whole_line(line, text)


_TASK_HINT = re.compile(r"^(?:def\s+(?:example_inputs|create_inputs)\s*\(|PALLASITE_ENTRY\s*=)", re.M)
_LONG_FORM = re.compile(r"^def\s+(\w+)_inputs\s*\(", re.M)


def _has_task(analysis: SourceAnalysis, text: str) -> bool:
    """Whether the file states a task (tier 0 found one, or it defines an inputs function: ``example_inputs``,
    ``create_inputs``, or ``NAME_inputs`` beside a function ``NAME``, the long form; a helper such as jax's
    ``static_validate_inputs`` is not one)."""
    if analysis.tasks or _TASK_HINT.search(text):
        return True
    return any(re.search(rf"^(?:async\s+)?def\s+{re.escape(m.group(1))}\s*\(", text, re.M)
               for m in _LONG_FORM.finditer(text))


def _in_maxkernel_dir(path: str) -> bool:
    """A MaxKernel task folder states the task in kernel_task.yaml (runner/tasks/maxkernel.py reads it)."""
    import os

    return os.path.isfile(os.path.join(os.path.dirname(os.path.abspath(path)), "kernel_task.yaml"))


_MAIN_BLOCK = re.compile(r"^if\s+__name__\s*==\s*['\"]__main__['\"]\s*:", re.M)


def _no_task_finding(text: str, reasons: str = "", tried: Sequence[str] = ()) -> Finding:
    """PLS900; ``reasons`` ends with how to give the shapes (engine/zero_config.one_line_hint), ``tried``:
    what the worker tried (the workspace's callers it ran)."""
    entry = CODES["PLS900"]
    ran = "importing the file" + (" and running its __main__ block" if _MAIN_BLOCK.search(text) else "")
    said = f" ({'; '.join(tried)})" if tried else ""
    message = (f"No task: the compiler tiers need the shapes this file's kernels are called with, and {ran} made no "
               f"pallas_call{said}." + (reasons or " Add example_inputs() (docs/task-convention.md) to give them."))
    return Finding(
        code="PLS900",
        message=message,
        span=Span.point(0),
        severity=entry.severity,
        tier=0,
        origin="pallasite rules",
    )


def _syntax_findings(text: str, path: str) -> list[Finding]:
    """PLS000 for a file Python cannot parse (tier 0 says so only for files that use Pallas)."""
    from ..analysis.tier0 import syntax_error

    found = syntax_error(text, path)
    return [found] if found is not None else []


def _dedupe(findings: list[Finding]) -> list[Finding]:
    """Drop a finding equal in code, line and message to one already kept."""
    seen = set()
    out = []
    for f in findings:
        key = (f.code, f.span.line, f.message)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out
