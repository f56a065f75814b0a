"""Autotuning a kernel file: tunables -> estimates -> feasibility -> search -> report (engine side,
never imports JAX). Used by `pallasite tune` and the language server's Autotune command.

1. ``analysis.tunables`` reads the tunables and their candidate values from the source.
2. ``estimate`` requests (worker op, runner/tune_ops.py) trace the entry under the configurations
   the exploration picks (engine/tune_space.py: the whole space when it fits ``estimates``, else
   seeded random + local moves; the space is never built in memory) and return the cost model's
   counts and roofline for the chip. The report says how much of the space was estimated.
3. ``analysis.feasibility`` rejects, before any compile, what cannot run (tiling,
   scoped VMEM); the count per reason is reported. Configurations whose traced programs are
   identical (same ``program_hash``) are evaluated once.
4. With a device timer (``DeviceTimer``: a backend that measures on a real accelerator), the
   search (engine/tune_search.py) spends device evaluations where they can change the answer.
   Without one, the ranking is the estimate's, labelled "estimate (<chip>)": CPU timings never
   rank, apply, or produce a speedup. The best-ranked configuration is then run in TPU interpret
   mode at reduced shapes against the reference (``Verifier``, tier 3); one that fails is marked
   failed and the next is tried (``TuneOptions.verify`` tries at most).
5. Every configuration's outcome is stored (knowledge/store.py) as it arrives: estimates with
   provenance "estimate", timings with provenance "device". A re-run reads them back: an
   interrupted search resumes without repeating finished configurations, and re-tuning an
   unchanged kernel (same code hash, chip, versions, backend, candidates, seed) starts no worker.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..analysis import feasibility
from ..analysis.source import Source, apply_edits
from ..analysis.tunables import apply_config, find_tunables, kinds
from ..analysis.types import CostEstimate, Measurement, Provenance, TextEdit, Tunable, from_json, to_json

from ..wire.messages import EstimateParams, EstimateResult

from ..analysis.verdict import NOT_TESTED, COST_MODEL, CompileResult, Speedup, TestResult, Timing, Verdict, try_speedup

from .estimates import PairedEstimate, pair
from .sources import sources_for, trusted_sources
from .tune_search import Config, SearchResult, search
from .tune_space import DEFAULT_ESTIMATES, INERT_AFTER, Scored, Space, explore, same_cost
from .tune_walk import REJECTED, SKIPPED, UNCHECKED, Walk, walk

# (configs, kinds) -> the worker's estimate result (runner/messages.EstimateResult)
Estimator = Callable[[Sequence[dict[str, int]], dict[str, str]], Awaitable[EstimateResult]]


@dataclass(frozen=True)
class Timed:
    """One device timing of a configuration, with the reference timed beside it when there is one."""

    candidate: Measurement
    reference: Measurement | None = None


# the file's text under one configuration -> the compile phase for the chip (tiers 0-2)
Compiler = Callable[[str], Awaitable[CompileResult]]
# configs -> one timing per config (provenance DEVICE, or a failure status); a plain Measurement
# stands for Timed(measurement)
DeviceTimer = Callable[[Sequence[dict[str, int]]], Awaitable[Sequence["Measurement | Timed"]]]
Progress = Callable[[str, "float | None"], None]
# (config, kinds) -> tier 3 (interpret mode, reduced shapes) vs the reference, as
# {"state": "ok" | "error" | "skipped: why", "problems": [...], "note": ...} (VerifyResult as JSON)
Verifier = Callable[[dict[str, int], dict[str, str]], Awaitable[dict[str, Any]]]

COST_MODEL_METHOD = "pallasite cost model (roofline over traced counts)"
COMPILE_METHOD = "tiers 0-2: compiled for the chip (analysis/verdict.CompileResult)"
VERIFY_METHOD = "tier 3: TPU interpret mode on CPU vs the reference (correctness only, no timing)"


class TuneError(Exception):
    """Tuning cannot start (no tunables, no task, a failed worker); the message says what to do."""


@dataclass(frozen=True)
class TuneOptions:
    chip: str = "v6e"
    entry: str | None = None
    budget: int | None = None
    declared: Mapping[str, Sequence[int]] | None = None  # the `tunables` setting (wins over the file)
    backend: str = "estimate"  # "estimate" (no device) or the device backend's name
    batch: int = 4
    verify: int = 3  # without a device: interpret-mode checks of the best-ranked, at most this many
    estimates: int | None = None  # configurations traced and estimated at most (None: DEFAULT_ESTIMATES)
    seed: int = 0  # the exploration's random sample (engine/tune_space.py)
    compiles: int = 16  # tier-2 compiles at most while walking the ranking for one that passes (engine/tune_walk.py)
    audit: int = 0  # also compile this many the pre-check rejected for VMEM (nearest the limit first): do they agree?


@dataclass(frozen=True)
class Outcome:
    """What became of one configuration."""

    config: Config
    status: str  # "measured", "failed", "estimated", "rejected", "duplicate", "not evaluated", "trace error"
    estimate_s: float | None = None
    bound: str | None = None
    measured_s: float | None = None  # device time (median), only from a device backend
    reasons: tuple[str, ...] = ()
    duplicate_of: Config | None = None
    reused: bool = False  # read back from the store instead of evaluated this run
    test: TestResult | None = None  # its interpret-mode check (interpret_checked), as data; None: not checked


@dataclass(frozen=True)
class TuneReport:
    path: str
    entry: str
    chip: str
    backend: str
    tunables: tuple[Tunable, ...]
    current: Config
    outcomes: tuple[Outcome, ...]
    best: Config | None
    best_provenance: str | None  # "device" or "estimate (<chip>)"
    rejected: dict[str, int] = field(default_factory=dict)
    evaluations: int = 0  # device evaluations spent this run
    reused: int = 0  # results read back from the store
    strategy: str = ""
    stopped: str = ""
    reference: dict[str, Any] | None = None  # the reference by the same cost model (XLA's figures under "xla")
    reference_s: float | None = None  # the reference's device time (median over this run's timings)
    notes: tuple[str, ...] = ()
    edits: tuple[TextEdit, ...] = ()  # the edit writing ``best`` back (empty if best == current)
    space_size: int = 0  # configurations in the whole space
    explored: str = ""  # how much of the space was estimated, and how (tune_space.Exploration.summary)
    # the current and the best configuration beside the reference, by one model (engine/estimates.py)
    current_vs_reference: PairedEstimate | None = None
    best_vs_reference: PairedEstimate | None = None
    # the device the timings ran on, as the worker reported it (kind, (("jax", v), ("libtpu", v)))
    device_kind: str = ""
    versions: tuple[tuple[str, str], ...] = ()
    current_compile: CompileResult | None = None  # the starting configuration compiled for the chip (tier 2)?
    best_compile: CompileResult | None = None  # the best, which is what gets applied
    walk: Walk | None = None  # the walk down the ranking through tier 2 (engine/tune_walk.py); None: no compiler
    compiled_fresh: int = 0  # tier-2 compiles run this run
    compiled_stored: int = 0  # tier-2 verdicts read back from the store instead
    # configurations the pre-check rejected for VMEM, compiled all the same (TuneOptions.audit): (config, the
    # pre-check's count, the compiler's verdict)
    audited: tuple[tuple[Config, int, CompileResult], ...] = ()

    @property
    def label(self) -> str:
        return f"estimate ({self.chip})"

    def timing(self, o: Outcome | None) -> Timing | None:
        """An outcome's figure by the run's one method: its device median (keyed by the device the worker
        reported) on a device backend, else the cost model's estimate for the chip."""
        if o is None:
            return None
        if self.backend != "estimate":
            return Timing(o.measured_s, "device", self.device_kind or self.chip, method=f"autotune on {self.backend}",
                          versions=self.versions) if o.measured_s else None
        return Timing(o.estimate_s, "estimate", self.chip, COST_MODEL) if o.estimate_s else None

    def verdict(self, config: Config | None) -> Verdict | None:
        """The best's or the current configuration's Verdict, in the one vocabulary every command uses: its
        compile for the chip (tier 2), its interpret-mode check (tier 3: "not verified" when tune did not run
        it or it was skipped), and its timing by the run's method. None for a configuration tune did not judge."""
        if config is None:
            return None
        compiled = self.best_compile if config == self.best else self.current_compile if config == self.current else None
        if compiled is None:
            return None
        o = self.outcome(config)
        test = NOT_TESTED if o is None else o.test or TestResult.not_verified("not checked in interpret mode by tune")
        return Verdict(compiled, test, self.timing(o))

    def speedup_between(self, base: Outcome | None, other: Outcome | None) -> Speedup | None:
        """base / other by analysis/verdict.speedup (None when either has no figure by the run's method)."""
        s, _ = try_speedup(self.timing(base), self.timing(other), baseline_name=f"{dict(base.config)}" if base else "")
        return s

    def outcome(self, config: Config) -> Outcome | None:
        return next((o for o in self.outcomes if o.config == config), None)

    def speedup_vs_reference(self) -> tuple[float, str] | None:
        """(speedup, baseline) of the best over the plain-JAX reference: device times only."""
        best = self.outcome(self.best) if self.best is not None else None
        if best is None or not best.measured_s or not self.reference_s:
            return None
        where = self.device_kind or self.chip
        ref = Timing(self.reference_s, "device", where, method=f"autotune on {self.backend}", versions=self.versions)
        s, _ = try_speedup(ref, self.timing(best), baseline_name="the XLA reference")
        return (s.value, f"the XLA reference on the same device ({where}, backend {self.backend})") if s else None

    def speedup_vs_current(self) -> tuple[float, str] | None:
        """(speedup, provenance) of the best over the current config; device times only, else
        the estimate's ratio labelled as such."""
        best, cur = self.outcome(self.best) if self.best is not None else None, self.outcome(self.current)
        if best is None or cur is None or cur.status in ("rejected", "trace error", "failed"):
            return None  # no speedup over a configuration that cannot run
        if self.current_compile is not None and self.current_compile.ok is False:
            return None  # nor over one that does not compile for the chip
        s = self.speedup_between(cur, best)
        if s is None:
            return None
        return s.value, ("device" if self.backend != "estimate" else self.label)


async def tune(path: str, text: str, options: TuneOptions, estimator: Estimator, *,
               timer: DeviceTimer | None = None, verifier: Verifier | None = None, store: Any = None,
               progress: Progress | None = None, compiler: Compiler | None = None) -> TuneReport:
    """Tune the file's entry; see the module docstring for the steps. ``compiler``: the checker's tiers
    0-2 for the chip on the file written with a configuration (the run's ``Judge.compile``,
    engine/judge.py): what tune calls
    best or applies must have compiled for the chip, and the starting configuration is checked too."""
    say = progress or (lambda message, fraction=None: None)
    source = Source(text)
    from ..analysis.sites import find_sites

    sites = find_sites(source)
    if sites and all(site.backend == "gpu" for site in sites):
        raise TuneError(f"{path}: its pallas_calls are GPU (Triton/Mosaic GPU) kernels; the cost model and "
                        "the feasibility rules are for TPUs. Time GPU configurations on a GPU backend instead")
    tunables = find_tunables(source, path, options.entry, options.declared)
    current: Config = tuple(sorted((t.name, t.default) for t in tunables))
    space = Space.of(tunables)
    keys = _Keys(path, text, options, store)
    notes: list[str] = []
    if not tunables:  # nothing to tune: the current configuration's estimate (and compile), said so
        notes.append("nothing to tune: no tunables found (give the entry keyword-only int parameters "
                     "`def f(x, *, block_rows: int = 256)`, a TUNED_PARAMS dict, or module constants used in "
                     "BlockSpec shapes; see docs/tune.md); the current configuration's estimate is shown")
    tunable_kinds = kinds(tunables)
    estimates: dict[Config, CostEstimate] = {}
    asked = {"worker": 0, "store": 0, "compiled": 0, "compile_store": 0}
    reference: dict[str, Any] | None = None
    entry = options.entry or ""
    compiles: dict[Config, CompileResult] = {}

    async def compiled(config: Config) -> CompileResult:
        """The file written with ``config``, compiled for the chip (tier 2), once per configuration."""
        if config not in compiles:
            stored = keys.stored_compile(config)  # a rerun answers from the store what the first run found
            asked["compile_store"] += stored is not None
            if stored is None:
                say(f"compiling {_changes_text(config, current)} for {options.chip} (tier 2)", None)
                configured = apply_edits(text, apply_config(tunables, dict(config))) if config != current else text
                stored = await compiler(configured)
                asked["compiled"] += 1
                keys.put_compile(config, stored)
            compiles[config] = stored
        return compiles[config]

    # 1. estimates of the configurations the exploration picks (engine/tune_space.py): from the
    #    store when there (an unchanged kernel costs nothing), else traced by the worker
    async def score(configs: Sequence[Config]) -> list[Scored]:
        nonlocal reference, entry
        found = keys.stored_estimates(configs)
        asked["store"] += len(found)
        reference = reference or keys.reference  # a rerun from the store answers what the first run answered
        missing = [c for c in configs if c not in found]
        if missing:
            reply = await estimator([dict(c) for c in missing], tunable_kinds)
            asked["worker"] += len(missing)
            entry = reply.entry or entry
            reference = reference or reply.reference
            keys.scoped, keys.entry = reply.chip.scoped_vmem_limit_bytes, entry
            keys.reference = keys.reference or reply.reference
            fresh = {tuple(sorted((str(k), v) for k, v in e.config)): e for e in reply.estimates}
            keys.put_estimates(fresh)
            found.update(fresh)
        estimates.update(found)
        return [Scored(None if c not in found or feasibility.rejections(found[c], keys.scoped)
                       else found[c].seconds or 0.0, found[c].program_hash if c in found else None) for c in configs]

    budget = options.estimates or DEFAULT_ESTIMATES
    share = 0.9 if timer is None else 0.1
    explored = await explore(space, score, budget=budget, seed=options.seed, current=current,
                             on_progress=lambda ex: say(f"estimating for {options.chip}: {len(ex.seen):,} of at most "
                                                        f"{min(budget, ex.size + 1):,} ({ex.strategy})",
                                                        share * min(1.0, len(ex.seen) / min(budget, ex.size + 1))))
    if asked["worker"] == 0:
        notes.append(f"estimates reused from the results store ({asked['store']} configurations)")
        entry = entry or keys.entry_name()
    elif keys.scoped is None:
        notes.append(f"the scoped-VMEM limit of {options.chip} is not measured here (no libtpu): "
                     "VMEM feasibility uses vmem_limit_bytes only where a call sets it")
    if explored.inert:
        notes.append(f"not moved after {INERT_AFTER} moves that never changed the traced program or its estimate: "
                     f"{', '.join(explored.inert)} (their values cannot change the estimate)")
    # 2. feasibility, duplicates: per traced program one configuration is evaluated, the one
    #    changing the fewest values of the current configuration
    outcomes: dict[Config, Outcome] = {}
    by_program: dict[str, Config] = {}
    rejected = []
    _rejected_current: dict[str, Any] = {}
    for config in explored.seen:
        est = estimates[config]
        why = feasibility.rejections(est, keys.scoped)
        if why:
            rejected.append(why)
            if config == current:
                _rejected_current["why"] = why
            status = "trace error" if why[0].reason == "trace" else "rejected"
            outcomes[config] = Outcome(config, status, est.seconds, est.bound, reasons=tuple(r.message for r in why))
            continue
        program = est.program_hash or repr(config)
        held = by_program.get(program)
        if held is None or _changed(config, current) < _changed(held, current):
            by_program[program] = config
    feasible = {c: estimates[c].seconds or 0.0 for c in by_program.values()}
    for config in explored.seen:
        est = estimates[config]
        first = by_program.get(est.program_hash or repr(config), config)
        if config not in outcomes and first != config:
            outcomes[config] = Outcome(config, "duplicate", est.seconds, est.bound, duplicate_of=first)
    # the configurations the walk may reach keep the file's values of the tunables that never changed the traced
    # program (explored.inert): each is estimated again with those put back, and replaced when that traces to
    # the same program and stays feasible, so an applied edit changes only values that matter
    if explored.inert and feasible:
        inert, now = set(explored.inert), dict(current)
        # skips cost no compile: the walk may reach past its compile budget, so a few times that many
        top = sorted(feasible, key=lambda c: (feasible[c], _changed(c, current), c))[:4 * max(1, options.compiles)]
        back = {c: tuple((n, now[n] if n in inert else v) for n, v in c) for c in top}
        back = {c: p for c, p in back.items() if p != c}
        missing = sorted({p for p in back.values() if p not in estimates})
        if missing:
            await score(missing)
        for config, plain in back.items():
            est, was = estimates.get(plain), estimates[config]
            if est is None or plain in feasible or feasibility.rejections(est, keys.scoped) \
                    or not same_cost(est.program_hash, est.seconds, was.program_hash, was.seconds):
                continue
            feasible[plain] = feasible.pop(config)
            outcomes.pop(plain, None)
            outcomes[config] = Outcome(config, "duplicate", estimates[config].seconds, estimates[config].bound,
                                       duplicate_of=plain)
    # the current configuration is always a candidate: compiled for the chip whatever the pre-check said
    # (where the two disagree, the compiler is the authority and the report says so)
    current_compile = None
    if compiler is not None:
        current_compile = await compiled(current)
        cur = outcomes.get(current)
        if cur is not None and cur.status == "rejected" and current_compile.ok is True:
            notes.append(f"the pre-check rejected the current configuration ({cur.reasons[0]}), the compiler for "
                         f"{options.chip} accepts it: ranked with the others (the compiler is the authority)")
            del outcomes[current]
            rejected = [r for r in rejected if r is not _rejected_current.get("why")]
            feasible[current] = estimates[current].seconds or 0.0
    if not feasible and compiler is None:
        raise TuneError(f"{path}: every one of {len(explored.seen)} configurations estimated was rejected before "
                        f"compiling ({feasibility.summarize(rejected)}); first reason: {rejected[0][0].message}")
    say(f"{len(feasible)} feasible, {len(rejected)} rejected before compiling", 0.1)

    # 3. the search on a device, or the estimate's ranking
    result = SearchResult(strategy="ranked by the estimate", stopped="no device backend: nothing timed")
    incomplete = ""  # why this run is not a finished one (device evaluations that did not finish)
    reused = 0
    reference_ns = []
    if timer is not None:
        known = keys.stored_timings(list(feasible))
        reused = len(known)
        reference_ns: list[float] = []
        done = {"n": 0}
        crashed: list[str] = []  # evaluations the backend did not finish (a crash, a lost worker, no Ray)

        async def evaluate(configs: Sequence[Config]) -> list[float | None]:
            timed = [t if isinstance(t, Timed) else Timed(t) for t in await timer([dict(c) for c in configs])]
            out = []
            for t in timed:
                ref = t.reference
                if ref is not None and ref.provenance is Provenance.DEVICE and ref.status == "ok" and ref.median_ns:
                    reference_ns.append(ref.median_ns)
            for c, m in zip(configs, (t.candidate for t in timed)):
                if m.provenance is not Provenance.DEVICE:  # CPU or interpret timings never rank
                    m = replace(m, status="runtime_error", median_ns=None,
                                error=f"not a device timing ({m.provenance.value}): not used for ranking")
                if m.status == "crash":  # the worker or the backend failed, not the configuration: tried again
                    crashed.append(m.error or m.status)  # next run, never stored as this configuration's result
                else:
                    keys.put_timing(c, m)
                out.append(m.median_ns / 1e9 if m.status == "ok" and m.median_ns else None)
            done["n"] += len(configs)
            say(f"measured {done['n']} configurations", 0.1 + 0.9 * min(1.0, done["n"] / max(1, len(feasible))))
            return out

        known_s = {c: (m.median_ns / 1e9 if m.status == "ok" and m.median_ns else None) for c, m in known.items()}
        if any(t is not None for t in known_s.values()) and keys.finished_run():  # a run that timed something
            result = SearchResult(results=known_s, strategy="reused",
                                  stopped="a finished tuning run of this unchanged kernel is in the store: nothing timed")
            notes.append("reused a finished tuning run (same code, chip, versions, backend)")
        else:
            result = await search(list(feasible), feasible, evaluate, budget=options.budget, known=known_s,
                                  batch=options.batch, current=current if current in feasible else None)
        if crashed:
            if not any(t is not None for t in result.results.values()):
                raise TuneError(f"every device evaluation failed on the {options.backend} backend ({len(crashed)} of "
                                f"{len(result.order)}): {crashed[0][:300]}. Nothing is stored; fix the backend and "
                                "run again")
            incomplete = f"{len(crashed)} device evaluations did not finish ({crashed[0][:160]})"
            notes.append(f"{incomplete}: this run is not stored as finished; the next run times them again")
        for config in feasible:
            t = result.results.get(config, "missing")
            if t == "missing":
                outcomes[config] = Outcome(config, "not evaluated", feasible[config], estimates[config].bound)
            else:
                status = "measured" if t is not None else "failed"
                reason = (keys.failure(config),) if t is None else ()
                outcomes[config] = Outcome(config, status, feasible[config], estimates[config].bound,
                                           measured_s=t, reasons=tuple(r for r in reason if r),
                                           reused=config in known)
        ranked = sorted((c for c, t in result.results.items() if t is not None), key=lambda c: result.results[c])
        best = ranked[0] if ranked else None
        best_provenance = "device" if best is not None else None
        accept = None
    else:
        for config, seconds in feasible.items():
            outcomes[config] = Outcome(config, "estimated", seconds, estimates[config].bound)
        ranked = sorted(feasible, key=lambda c: (feasible[c], _changed(c, current), c))  # ties: fewest edits
        best_provenance = f"estimate ({options.chip})"
        checks = {"left": options.verify if verifier is not None else 0, "failed": 0}

        async def accept(config: Config) -> bool | None:
            """Tier 3 on a configuration that compiled: interpret mode vs the reference, ``verify`` at most.
            None (stop the walk) once every check allowed has found a problem."""
            if checks["left"] <= 0:
                return None if checks["failed"] else True
            checks["left"] -= 1
            say(f"checking {dict(config)} in interpret mode (correctness only)", None)
            verdict = keys.stored_verdict(config)
            if verdict is None:
                verdict = await verifier(dict(config), kinds(tunables))
                keys.put_verdict(config, verdict)
            outcomes[config] = interpret_checked(outcomes[config], verdict)
            if outcomes[config].status == "failed":
                checks["failed"] += 1
                return None if checks["left"] <= 0 else False
            return True  # ok, or skipped (not verified): the pick

        if compiler is None:  # nothing compiles here: the estimate's ranking, checked in interpret mode
            best = None
            for config in ranked:
                verdict = await accept(config)
                if verdict:
                    best = config
                    break
                if verdict is None:
                    break
            if best is None:
                notes.append(f"the {options.verify} best-ranked configurations failed in interpret mode; nothing to apply")
                best_provenance = None
    tried = None
    if compiler is not None:  # what tune calls best compiles for the chip: walk the ranking until one does
        tried = await walk(ranked, compiled, estimates, budget=max(0, options.compiles), accept=accept,
                           out_of_vmem=[current] if current_compile is not None and current_compile.ok is False
                           and feasibility.out_of_vmem(current_compile.why, current_compile.evidence)
                           and current in estimates else [], ignore=frozenset(explored.inert))
        for step in tried.steps:
            o = outcomes.get(step.config) or Outcome(step.config, "estimated", estimates[step.config].seconds,
                                                     estimates[step.config].bound)
            if step.state in (REJECTED, UNCHECKED):
                outcomes[step.config] = replace(o, status="failed", reasons=(step.compile.text(),))
            elif step.state == SKIPPED:
                outcomes[step.config] = replace(o, status="skipped", reasons=(
                    f"not compiled: at least as large as {_changes_text(step.like, current)}, which ran out of VMEM "
                    f"on {options.chip}",))
        best = tried.picked
        if best is None and current_compile is not None and current_compile.ok is True and \
                not (outcomes.get(current) and outcomes[current].status == "failed"):
            best = current  # none walked passed: the current configuration compiles, and stays
            best_provenance = "the current configuration (compiles for the chip)"
            notes.append(f"no configuration walked passed tier 2 ({tried.stopped}); the current configuration "
                         f"compiles for {options.chip} and stays: nothing to apply")
        elif best is None:
            best_provenance = None
            notes.append(f"no configuration passed tier 2 for {options.chip} ({tried.stopped}), nor the current "
                         f"one ({current_compile.text() if current_compile else 'not compiled'}); nothing to apply")
    audited = []
    if compiler is not None and options.audit > 0:  # the pre-check against the compiler on what it rejected
        vmem_only = [c for c, o in outcomes.items() if o.status == "rejected" and c != current
                     and all(r.reason == "vmem" for r in feasibility.rejections(estimates[c], keys.scoped))]
        for config in sorted(vmem_only, key=lambda c: (feasibility.counted_vmem(estimates[c]) or 0, c))[:options.audit]:
            audited.append((config, feasibility.counted_vmem(estimates[config]) or 0, await compiled(config)))
        agreed = sum(r.ok is False and feasibility.out_of_vmem(r.why, r.evidence) for _, _, r in audited)
        if agreed < len(audited):
            notes.append(f"the pre-check rejected for VMEM {len(audited) - agreed} of {len(audited)} configurations "
                         "the compiler did not reject for VMEM (see the audit)")
    for config, o in list(outcomes.items()):  # duplicates share their representative's timing
        if o.status == "duplicate" and o.duplicate_of in outcomes:
            outcomes[config] = replace(o, measured_s=outcomes[o.duplicate_of].measured_s)
    report = TuneReport(
        current_vs_reference=pair(estimates.get(current), reference, options.chip) if current in estimates else None,
        best_vs_reference=pair(estimates.get(best), reference, options.chip) if best in estimates else None,
        path=path, entry=entry, chip=options.chip, backend=options.backend, tunables=tuple(tunables),
        current=current, outcomes=tuple(sorted(outcomes.values(), key=_order)), best=best,
        best_provenance=best_provenance, rejected=feasibility.summarize(rejected),
        evaluations=len(result.order), reused=reused, strategy=result.strategy, stopped=result.stopped,
        reference=reference, notes=tuple(notes), space_size=explored.size, explored=explored.summary(),
        reference_s=sorted(reference_ns)[len(reference_ns) // 2] / 1e9 if reference_ns else None,
        edits=apply_config(tunables, dict(best)) if best is not None else (),
        device_kind=keys.worker[0] if keys.worker else "", versions=keys.worker[1] if keys.worker else (),
        current_compile=current_compile, best_compile=compiles.get(best) if best is not None else None,
        walk=tried, compiled_fresh=asked["compiled"], compiled_stored=asked["compile_store"], audited=tuple(audited))
    if not incomplete:  # a run with evaluations that did not finish is never stored as finished
        keys.put_run(report)
    if keys.store is not None and keys.store.problem:
        report = replace(report, notes=report.notes + (f"results are not recorded: {keys.store.problem}",))
    return report


def _changes_text(config: Config | None, current: Config) -> str:
    """The values of ``config`` that differ from the current configuration, or "the current configuration"."""
    now = dict(current or ())
    return ", ".join(f"{k}={v}" for k, v in config or () if now.get(k) != v) or "the current configuration"


def _changed(config: Config, current: Config) -> int:
    return sum(a != b for a, b in zip(config, current))


def _order(o: Outcome) -> tuple:
    rank = {"measured": 0, "estimated": 0, "estimated, interpret ok": 0, "not evaluated": 1, "duplicate": 2, "failed": 3, "skipped": 3, "rejected": 4, "trace error": 5}
    return (rank.get(o.status, 9), o.measured_s if o.measured_s is not None else float("inf"),
            o.estimate_s if o.estimate_s is not None else float("inf"), o.config)


# --------------------------------------------------------------------------- the results store


class _Guarded:
    """The store's calls; the first ``StoreError`` (a page found damaged while tuning) switches it
    off, and ``problem`` says why (the report's notes say it once)."""

    EMPTY: dict[str, Any] = {"measurements": [], "estimates": [], "verdicts": [], "tuning_runs": []}

    def __init__(self, store: Any) -> None:
        self.store, self.problem = store, None

    def __getattr__(self, name: str) -> Any:
        from ..knowledge.store import StoreError

        method = getattr(self.store, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            if self.problem is None:
                try:
                    return method(*args, **kwargs)
                except StoreError as err:
                    self.problem = str(err)
            return list(self.EMPTY[name]) if name in self.EMPTY else None

        return call


class _Keys:
    """Result keys for this file + chip + versions + backend, and the store reads/writes (all
    no-ops without a store)."""

    def __init__(self, path: str, text: str, options: TuneOptions, store: Any) -> None:
        self.store = _Guarded(store) if store is not None else None
        self.options = options
        self.path = path
        self.entry = options.entry
        self.scoped: int | None = None
        self.reference: dict[str, Any] | None = None  # the reference's estimate (stored with the configurations')
        self.worker: tuple[str, tuple[tuple[str, str], ...]] | None = None  # (device kind, versions) it reported
        if store is None:
            return
        from ..analysis.local_imports import source_hash
        from ..analysis.types import ResultKey, installed_versions

        v = installed_versions()  # the worker's too unless the settings name another interpreter
        self.base = ResultKey(code_hash=source_hash(path, text), kernel=options.entry, chip=options.chip,
                              jax_version=v["jax"], libtpu_version=v["libtpu"], backend="cost-model")
        self.device_base = replace(self.base, backend=options.backend)

    def _key(self, config: Config, device: bool = False) -> Any:
        return replace(self.device_base if device else self.base, config=config)

    def stored_estimates(self, configs: Sequence[Config]) -> dict[Config, CostEstimate]:
        """The stored estimates among ``configs`` (with the scoped-VMEM limit and entry they were made with)."""
        if self.store is None:
            return {}
        out = {}
        for config in configs:  # the estimates table (knowledge/store.py v4): an estimate is not a measurement
            records = [r for r in self.store.estimates(self._key(config), model=COST_MODEL_METHOD, limit=5)
                       if "estimate" in r.payload]
            if not records:
                continue
            payload = records[0].payload
            out[config] = from_json(CostEstimate, payload["estimate"])
            self.scoped = payload.get("scoped_vmem_limit_bytes")
            self.entry = self.entry or payload.get("entry")
            self.reference = self.reference or payload.get("reference")
        return out

    def entry_name(self) -> str:
        return self.entry or ""

    def put_estimates(self, estimates: Mapping[Config, CostEstimate]) -> None:
        if self.store is None:
            return
        for config, est in estimates.items():
            self.store.put_estimate(self._key(config), model=COST_MODEL_METHOD,
                                    status="ok" if est.status == "ok" else "compile_error", seconds=est.seconds,
                                    payload={"estimate": to_json(est), "scoped_vmem_limit_bytes": self.scoped,
                                             "entry": self.entry, "reference": self.reference}, path=self.path)

    def _worker_key(self, config: Config, m: Measurement) -> Any:
        """A device timing's key: the device kind and versions the WORKER reported (as tokamax keys its
        tuning cache by device kind), never the target chip or this client's versions."""
        return replace(self._key(config, device=True), chip=m.device_kind or self.options.chip,
                       jax_version=m.jax_version or None, libtpu_version=m.libtpu_version or None)

    def _device_records(self, config: Config, limit: int = 1) -> list[Any]:
        """This configuration's stored device timings on this backend, whatever device kind and versions
        the worker reported (newest first); once this run has timed one, only that worker's kind."""
        want = self._key(config, device=True)
        out = []
        chip = self.worker[0] if self.worker is not None else None
        for r in self.store.measurements(path=self.path, kernel=want.kernel, chip=chip, limit=5000):  # SQL narrows
            k = r.key
            if (k.code_hash, k.kernel, k.backend, tuple(sorted(k.config))) != \
                    (want.code_hash, want.kernel, want.backend, tuple(sorted(want.config))):
                continue
            if self.worker is not None and k.chip != self.worker[0]:
                continue
            out.append(r)
            if len(out) >= limit:
                break
        return out

    def stored_timings(self, configs: Sequence[Config]) -> dict[Config, Measurement]:
        if self.store is None:
            return {}
        out = {}
        for config in configs:
            records = [r for r in self._device_records(config, limit=5) if r.measurement.provenance is Provenance.DEVICE]
            if records:
                out[config] = records[0].measurement
                self.learn(records[0].measurement)
        return out

    def learn(self, m: Measurement) -> None:
        """The worker's device kind and versions, from a device timing it reported."""
        if self.worker is None and m.provenance is Provenance.DEVICE and m.device_kind:
            self.worker = (m.device_kind, tuple((k, str(v)) for k, v in (("jax", m.jax_version),
                                                                          ("libtpu", m.libtpu_version)) if v))

    def stored_verdict(self, config: Config) -> dict[str, Any] | None:
        if self.store is None:
            return None
        records = self.store.verdicts(self._key(config), method=VERIFY_METHOD, limit=1)
        return records[0].payload if records else None

    def put_verdict(self, config: Config, verdict: dict[str, Any]) -> None:
        if self.store is None or verdict.get("transient"):  # a run stopped by a limit is tried again next time
            return
        self.store.put_verdict(self._key(config), method=VERIFY_METHOD, state=str(verdict.get("state") or "error"),
                               payload=verdict, path=self.path)

    def stored_compile(self, config: Config) -> CompileResult | None:
        if self.store is None:
            return None
        records = self.store.verdicts(self._key(config), method=COMPILE_METHOD, limit=1)
        return CompileResult.from_json(records[0].payload) if records else None

    def put_compile(self, config: Config, result: CompileResult) -> None:
        if self.store is None or (result.ok is None and "not checked" in result.why):  # a limit: try again next time
            return
        self.store.put_verdict(self._key(config), method=COMPILE_METHOD, state=result.text()[:200],
                               payload=result.to_json(), path=self.path)

    def finished_run(self) -> bool:
        return self.store is not None and bool(self.store.tuning_runs(self.device_base))

    def put_timing(self, config: Config, m: Measurement) -> None:
        self.learn(m)
        if self.store is not None:
            self.store.put_measurement(self._worker_key(config, m), replace(m, config=config), path=self.path)

    def failure(self, config: Config) -> str | None:
        if self.store is None:
            return None
        records = self._device_records(config)
        return (records[0].measurement.error or records[0].measurement.status) if records else None

    def put_run(self, report: TuneReport) -> None:
        if self.store is None:
            return
        # the run's device results, keyed by the worker that timed them; estimates are stored once, by
        # put_estimates under the cost model's name, never again here under another
        results = []
        kind, versions = self.worker or (report.device_kind or report.chip, report.versions)
        v = dict(versions)
        for o in report.outcomes:
            if o.measured_s is not None and report.backend != "estimate":
                m = Measurement(status="ok", provenance=Provenance.DEVICE, device_kind=kind,
                                method=f"autotune on {report.backend}", median_ns=o.measured_s * 1e9, config=o.config,
                                jax_version=v.get("jax"), libtpu_version=v.get("libtpu"))
                results.append((self._worker_key(o.config, m), m))
        self.store.put_tuning(self.base if report.backend == "estimate" else self.device_base, results, path=self.path,
                              best=report.best)

# --------------------------------------------------------------------------- the worker seam


def _progress(on_progress: Any) -> Any:
    """The backend's typed Progress to a (message, fraction) callback."""
    if on_progress is None:
        return None
    return lambda p: on_progress(p.message, p.fraction)


PER_REQUEST = 16  # configurations in one estimate request, at most


def worker_estimator(backend: Any, path: str, text: str | None, options: TuneOptions,
                     timeout_s: float = 300.0, on_progress: Any = None, parallel: int = 1,
                     trusted: tuple[str, str] | None = None) -> Estimator:
    """An ``Estimator`` over a backend (engine/backend.py) or one ``WorkerClient``: each call's
    configurations split into ``parallel`` ``estimate`` requests on the job workers (more, queued for them,
    when each would carry over ``PER_REQUEST``). The first call's first request, alone with one configuration,
    also costs the reference and probes the chip (then a pool's idle job workers are replaced); every reply
    carries what it found."""
    source = sources_for(path, text)
    judged_against = trusted_sources(*trusted) if trusted is not None else None  # model-written text: runner/judge.py

    from . import chip_table

    known = next((s for s in chip_table.cached() or () if s.name == options.chip and s.scoped_vmem_limit_bytes), None)

    async def one(chunk: list[dict[str, int]], tunable_kinds: dict[str, str], reference: bool) -> EstimateResult:
        # the scoped-VMEM limit: from the chip-table cache when measured, else the first worker probes it
        params = EstimateParams(source=source, chip=options.chip, entry=options.entry, configs=tuple(chunk),
                                kinds=dict(tunable_kinds), reference=reference, probe=reference and known is None,
                                trusted=judged_against)
        reply = await backend.request(params, purpose="job", timeout_s=timeout_s, on_progress=_progress(on_progress))
        if not reply.ok:
            raise TuneError(f"the worker could not estimate {path}: {reply.why}")
        return reply.result

    first: list[EstimateResult] = []  # the first reply: the reference's cost and the probed chip

    async def estimate(configs: Sequence[dict[str, int]], tunable_kinds: dict[str, str]) -> EstimateResult:
        configs = [dict(c) for c in configs]
        replies = []
        if not first:
            # the reference's cost and the chip probe alone, with one configuration: they load libtpu (~1 GiB that
            # worker keeps), so a pool then replaces its idle job workers (engine/pool.py replace_idle)
            head = await one(configs[:1], tunable_kinds, True)
            chip = head.chip
            if known is not None:
                chip = replace(chip, scoped_vmem_limit_bytes=known.scoped_vmem_limit_bytes,
                               scoped_vmem_source=known.scoped_vmem_source)
            first.append(replace(head, chip=chip))
            replies.append(head)
            configs = configs[1:]
            fresh = getattr(backend, "replace_idle", None)
            if configs and fresh is not None:
                await fresh("job")
        if configs:
            # at most PER_REQUEST configurations a request, queued for the ``parallel`` workers: one left holding
            # more than the client's REPLACE_AFTER_MB after one is replaced before the next (the estimates do not
            # depend on which worker traced them, nor on what it traced before)
            n = max(1, min(parallel, len(configs)), -(-len(configs) // PER_REQUEST))
            chunks = [configs[i::n] for i in range(n)]
            replies += await asyncio.gather(*(one(c, tunable_kinds, False) for c in chunks))
        return replace(first[0], estimates=tuple(e for r in replies for e in r.estimates))

    return estimate


def interpret_checked(o: Outcome, verdict: dict[str, Any]) -> Outcome:
    """The outcome after its interpret-mode check (a ``Verifier``'s answer): "estimated, interpret ok"; a check
    that was skipped or could not finish keeps its status with the reason (not verified, never failed); a
    check that found a problem fails it."""
    state = str(verdict.get("state", ""))
    if state == "ok":
        return replace(o, status="estimated, interpret ok", test=TestResult.ok("in TPU interpret mode (CPU)"))
    if state.startswith("skipped"):
        why = f"interpret check {state}"
        return replace(o, reasons=(why,), test=TestResult.not_verified(why))
    problem = f"interpret mode: {(verdict.get('problems') or [state])[0]}"
    # a run that raised (``ran`` False: the judge's op failed) says nothing about the numbers: not verified
    test = TestResult.not_verified(problem) if verdict.get("ran") is False else TestResult.wrong(problem)
    return replace(o, status="failed", reasons=(problem,), test=test)


def worker_timer(backend: Any, path: str, text: str | None, options: TuneOptions,
                 timeout_s: float = 600.0, on_progress: Any = None) -> DeviceTimer:
    """A ``DeviceTimer`` over the backend's device worker and its ``time`` op (issue 16: correctness
    guards, the reference timed beside the candidate). Only keyword tunables reach that op's
    ``config``. A worker without a device answers interpret-mode timings, which never rank."""
    from ..wire import messages

    params_type = messages.PARAMS.get("time")
    if params_type is None:
        raise TuneError("this pallasite has no `time` op (device timing, issue 16) yet: tune with --backend estimate")
    source = sources_for(path, text)
    fields = {f.name for f in dataclasses.fields(params_type)}

    def measurement(value: Any) -> Measurement | None:
        if value is None or isinstance(value, Measurement):
            return value
        return from_json(Measurement, value)

    async def time_one(config: dict[str, int]) -> Timed:
        wanted = {"source": source, "entry": options.entry, "config": dict(config), "target": options.chip}
        params = params_type(**{k: v for k, v in wanted.items() if k in fields})
        reply = await backend.request(params, purpose="device", timeout_s=timeout_s,
                                      on_progress=_progress(on_progress))
        if not reply.ok:
            return Timed(Measurement(status="crash" if reply.status != "error" else "runtime_error",
                                     provenance=Provenance.DEVICE, device_kind=options.chip,
                                     method="time op", error=reply.why[:500]))
        result = reply.result
        get = result.get if isinstance(result, dict) else (lambda k, d=None: getattr(result, k, d))
        cand = measurement(get("candidate"))
        if cand is None:
            return Timed(Measurement(status="runtime_error", provenance=Provenance.DEVICE,
                                     device_kind=options.chip, method="time op",
                                     error=str(get("error") or get("verdict"))[:500]))
        return Timed(cand, measurement(get("reference")))

    async def time_configs(configs: Sequence[dict[str, int]]) -> list[Timed]:
        # a batch's configurations at once: a device pool (engine/device_pool.py) times them on its N
        # workers, one device worker queues them; the results keep the batch's order either way
        return list(await asyncio.gather(*(time_one(config) for config in configs)))

    return time_configs


async def device_platform(backend: Any, timeout_s: float = 120.0) -> str | None:
    """The jax platform of the backend's device worker ("tpu", "gpu", "cpu"), None if it did not start."""
    from ..wire.messages import VersionsParams

    reply = await backend.request(VersionsParams(), purpose="device", timeout_s=timeout_s)
    return reply.result.platform if reply.ok else None


def job_progress(report: Callable[[Any], None]) -> Callable[[str, "float | None"], None]:
    """A (message, fraction) progress callback that reports a job's structured Progress."""
    from ..wire.messages import Progress, Stage

    return lambda message, fraction=None: report(Progress(stage=Stage.TUNE, message=message, fraction=fraction))

