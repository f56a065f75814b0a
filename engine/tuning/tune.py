"""Autotuning a kernel file: tunables -> estimates -> feasibility -> search -> the walk -> one verdict per
configuration (engine side, never imports JAX). Used by `pallasite tune`, the language server's Autotune
command, the MCP server's tune tool and optimize's autotune phase, each with the run's one judge
(engine/judge.py) behind its seams.

1. ``analysis.tunables`` reads the tunables and their candidate values from the source.
2. The ``Estimator`` prices the configurations the exploration picks (engine/tuning/tune_space.py: the whole space
   when it fits ``estimates``, else seeded random + local moves; the space is never built in memory): the
   judge's estimate of each configuration's exported program (runner/judging/configs.py), never a figure
   from the process that ran the file. The report says how much of the space was estimated.
3. ``analysis.feasibility`` rejects, before any compile, what cannot run (tiling, scoped VMEM) and what would
   do no work (a grid axis of 0 steps, a block past its array's end); such a configuration is never ranked,
   walked to or tested, and the count per reason is reported. Configurations that export the same program (same ``program_hash``) are judged once.
4. With a ``DeviceTimer`` (the judge's ``time`` request of each configuration on a device), the search
   (engine/tuning/tune_search.py) spends device evaluations where they can change the answer. Without one, the
   ranking is the estimate's, labelled "estimate (<chip>)": CPU timings never rank, apply, or produce a
   speedup.
5. The ranking is walked (engine/tuning/tune_walk.py) through the ``Compiler`` (tier 2 for the chip) until a
   configuration compiles and, without a device, passes the ``Tester`` (the judge's test: the ``time`` op on
   the configuration's exported program against the reference; ``TuneOptions.verify`` tries at most).
6. Each configuration's outcome is one ``Verdict`` (analysis/verdict.py: compiled for the chip, the judge's
   test or why not verified, its timing by the run's method), and the report lists them in the one ranking
   (``analysis.verdict.rank``) against the current configuration.

Every result is stored (engine/tuning/tune_store.py) as it arrives: a re-run reads them back, an interrupted
search resumes without repeating finished configurations, and re-tuning an unchanged kernel (same code
hash, chip, versions, backend, candidates, seed) starts no worker.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ...analysis import feasibility
from ...analysis.source import Source, apply_edits
from ...analysis.tunables import apply_config, find_tunables, kinds
from ...analysis.timed import Timed
from ...analysis.types import DEFAULT_CHIP, CostEstimate, Measurement, Provenance, TextEdit, Tunable
from ...analysis.verdict import COST_MODEL, CompileResult, JudgedBy, Speedup, TestResult, Timing, Verdict, rank, try_speedup

from ...wire.messages import EstimateResult

from ..estimates import PairedEstimate, pair
from .tune_search import Config, SearchResult, search
from .tune_space import DEFAULT_ESTIMATES, INERT_AFTER, Exploration, Scored, Space, explore, same_cost
from .tune_store import COMPILE_METHOD, COST_MODEL_METHOD, TEST_METHOD, StoreKeys
from .tune_walk import SKIPPED, Walk, walk

__all__ = ["COMPILE_METHOD", "COST_MODEL_METHOD", "TEST_METHOD", "Compiler", "DeviceTimer", "Estimator",
           "Outcome", "Tester", "Timed", "TuneError", "TuneOptions", "TuneReport", "tune"]

# (configs, kinds) -> the judge's estimate of each configuration (wire/messages.EstimateResult, in order)
Estimator = Callable[[Sequence[dict[str, int]], dict[str, str]], Awaitable[EstimateResult]]
# the file's text under one configuration -> the compile phase for the chip (tiers 0-2)
Compiler = Callable[[str], Awaitable[CompileResult]]
# the file's text under one configuration -> the judge's test (the time op against the reference)
Tester = Callable[[str], Awaitable[TestResult]]
Progress = Callable[[str, "float | None"], None]


# configs -> one timing per config (provenance DEVICE, or a failure status); a plain Measurement stands for
# Timed.of(measurement)
DeviceTimer = Callable[[Sequence[dict[str, int]]], Awaitable[Sequence["Measurement | Timed"]]]


class TuneError(Exception):
    """Tuning cannot start (no tunables, no task, a failed worker); the message says what to do."""


@dataclass(frozen=True)
class TuneOptions:
    chip: str = DEFAULT_CHIP
    entry: str | None = None
    budget: int | None = None
    declared: Mapping[str, Sequence[int]] | None = None  # the `tunables` setting (wins over the file)
    backend: str = "estimate"  # "estimate" (no device) or the device backend's name
    batch: int = 4
    verify: int = 3  # without a device: the judge's tests of the configurations walked, at most this many
    estimates: int | None = None  # configurations traced and estimated at most (None: DEFAULT_ESTIMATES)
    seed: int = 0  # the exploration's random sample (engine/tuning/tune_space.py)
    compiles: int = 16  # tier-2 compiles at most while walking the ranking for one that passes (engine/tuning/tune_walk.py)
    audit: int = 0  # also compile this many the pre-check rejected for VMEM (nearest the limit first): do they agree?


@dataclass(frozen=True)
class Outcome:
    """What became of one configuration: its ``verdict`` (compiled for the chip, the judge's test, its figure by
    the run's method: the device median with a device, else the estimate), the cost model's ``estimate`` that
    ranked or seeded it (the judge's, from the configuration's exported program), and, for a configuration
    that exported the same program as another, ``duplicate_of``: judged once, as that one."""

    config: Config
    verdict: Verdict
    estimate: Timing | None = None
    bound: str | None = None
    duplicate_of: Config | None = None
    reused: bool = False  # its device timing read back from the store instead of measured this run

    @property
    def estimate_s(self) -> float | None:
        return self.estimate.seconds if self.estimate is not None else None

    @property
    def measured_s(self) -> float | None:
        """Its device median, from a device backend only."""
        t = self.verdict.timing
        return t.seconds if t is not None and t.provenance == "device" else None


@dataclass(frozen=True)
class TuneReport:
    path: str
    entry: str
    chip: str
    backend: str
    tunables: tuple[Tunable, ...]
    current: Config
    outcomes: tuple[Outcome, ...]  # in the one ranking (analysis/verdict.rank) against the current configuration
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
    walk: Walk | None = None  # the walk down the ranking through tier 2 (engine/tuning/tune_walk.py); None: no compiler
    compiled_fresh: int = 0  # tier-2 compiles run this run
    compiled_stored: int = 0  # tier-2 verdicts read back from the store instead
    # configurations the pre-check rejected for VMEM, compiled all the same (TuneOptions.audit): (config, the
    # pre-check's count, the compiler's verdict)
    audited: tuple[tuple[Config, int, CompileResult], ...] = ()

    @property
    def label(self) -> str:
        return f"estimate ({self.chip})"

    def timing(self, o: Outcome | None) -> Timing | None:
        """An outcome's figure by the run's one method (its verdict's timing)."""
        return o.verdict.timing if o is not None else None

    def verdict(self, config: Config | None) -> Verdict | None:
        """A configuration's Verdict, in the one vocabulary every command uses; None for one tune never saw."""
        o = self.outcome(config) if config is not None else None
        return o.verdict if o is not None else None

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
        """(speedup, provenance) of the best over the current configuration, by the run's one method; none
        over a current configuration that does not compile for the chip or that the judge's test found wrong."""
        best, cur = self.outcome(self.best) if self.best is not None else None, self.outcome(self.current)
        if best is None or cur is None or cur.verdict.compile.ok is False or cur.verdict.test.outcome == "wrong":
            return None
        s = self.speedup_between(cur, best)
        if s is None:
            return None
        return s.value, ("device" if self.backend != "estimate" else self.label)


# --------------------------------------------------------------------------- the loop


async def tune(path: str, text: str, options: TuneOptions, estimator: Estimator, *,
               timer: DeviceTimer | None = None, tester: Tester | None = None, store: Any = None,
               progress: Progress | None = None, compiler: Compiler | None = None) -> TuneReport:
    """Tune the file's entry (see the module docstring). ``compiler``: the run's ``Judge.compile`` (tiers 0-2
    for the chip) on the file written with a configuration: what tune calls best or applies compiled for the
    chip, and the starting configuration is compiled too. ``tester``: the run's ``Judge.test``."""
    run = _Run.start(path, text, options, estimator, store, progress, compiler)
    explored = await _estimate_space(run, device=timer is not None)
    feasible = _prechecked(run, explored)
    await _file_values_back(run, explored, feasible)
    await _compile_current(run, feasible, explored)
    if timer is not None:
        searched = await _search_on_device(run, feasible, timer)
        ranked = sorted((c for c, t in searched.results.items() if t is not None), key=lambda c: searched.results[c])
        accept = None
    else:
        searched = SearchResult(strategy="ranked by the estimate", stopped="no device backend: nothing timed")
        ranked = sorted(feasible, key=lambda c: (feasible[c], _changed(c, run.current), c))  # ties: fewest edits
        accept = _judge_s_test(run, tester)
    best = await _pick(run, ranked, accept, explored)
    audited = await _audit_precheck(run)
    report = _report(run, [*explored.seen, *feasible], explored, searched, best, audited)
    if not run.incomplete:  # a run with evaluations that did not finish is never stored as finished
        run.keys.put_run(report)
    if run.keys.store is not None and run.keys.store.problem:
        report = replace(report, notes=report.notes + (f"results are not recorded: {run.keys.store.problem}",))
    return report


@dataclass
class _Run:
    """One tune run: its inputs, and the facts its steps find (each configuration's estimate, pre-check,
    compile, test and device timing), turned into verdicts once at the end (``_outcomes``)."""

    path: str
    text: str
    options: TuneOptions
    estimator: Estimator
    tunables: tuple[Tunable, ...]
    current: Config
    keys: StoreKeys
    say: Progress
    compiler: Compiler | None
    notes: list[str] = field(default_factory=list)
    estimates: dict[Config, CostEstimate] = field(default_factory=dict)
    judged_by: JudgedBy = JudgedBy.UNKNOWN  # who priced the estimates (the estimator's replies say)
    precheck: dict[Config, tuple[feasibility.Rejection, ...]] = field(default_factory=dict)
    duplicate_of: dict[Config, Config] = field(default_factory=dict)
    compiles: dict[Config, CompileResult] = field(default_factory=dict)
    skipped: dict[Config, Config] = field(default_factory=dict)  # walked past without compiling: like this one
    tests: dict[Config, TestResult] = field(default_factory=dict)
    timed: dict[Config, Timed] = field(default_factory=dict)  # device timings (this run's and the store's)
    reused: set[Config] = field(default_factory=set)
    reference: dict[str, Any] | None = None
    entry: str = ""
    asked: dict[str, int] = field(default_factory=lambda: {"worker": 0, "store": 0, "compiled": 0, "compile_store": 0})
    incomplete: str = ""  # why this run is not a finished one (device evaluations that did not finish)
    walked: Walk | None = None
    best_provenance: str | None = None

    @classmethod
    def start(cls, path: str, text: str, options: TuneOptions, estimator: Estimator, store: Any,
              progress: Progress | None, compiler: Compiler | None) -> "_Run":
        from ...analysis.sites import find_sites

        source = Source(text)
        sites = find_sites(source)
        if sites and all(site.backend == "gpu" for site in sites):
            raise TuneError(f"{path}: its pallas_calls are GPU (Triton/Mosaic GPU) kernels; the cost model and "
                            "the feasibility rules are for TPUs. Time GPU configurations on a GPU backend instead")
        tunables = tuple(find_tunables(source, path, options.entry, options.declared))
        run = cls(path, text, options, estimator, tunables, tuple(sorted((t.name, t.default) for t in tunables)),
                  StoreKeys(path, text, options, store), progress or (lambda message, fraction=None: None), compiler,
                  entry=options.entry or "")
        if not tunables:  # nothing to tune: the current configuration's estimate (and compile), said so
            run.notes.append("nothing to tune: no tunables found (give the entry keyword-only int parameters "
                             "`def f(x, *, block_rows: int = 256)`, a TUNED_PARAMS dict, or module constants used in "
                             "BlockSpec shapes; see docs/tune.md); the current configuration's estimate is shown")
        return run

    def configured(self, config: Config) -> str:
        """The file's text with ``config``'s values written in (the text itself for the current one)."""
        return apply_edits(self.text, apply_config(self.tunables, dict(config))) if config != self.current else self.text

    def estimate_timing(self, config: Config) -> Timing | None:
        """The cost model's figure for the chip (with its interval), or None where it made none."""
        est = self.estimates.get(config)
        if est is None or est.status != "ok" or not est.seconds:
            return None
        interval = tuple(est.interval) if est.interval else None
        how = "priced by the judge from the configuration's exported program" if self.judged_by is JudgedBy.JUDGE \
            else "traced in the process that ran the file"
        return Timing(est.seconds, "estimate", self.options.chip, est.model or COST_MODEL, f"{est.label}; {how}",
                      interval=interval)

    async def score(self, configs: Sequence[Config]) -> list[Scored]:
        """Estimates of ``configs``: from the store when there (an unchanged kernel costs nothing), else the
        estimator's (the judge's); each as the exploration reads it (engine/tuning/tune_space.Scored)."""
        keys = self.keys
        found = keys.stored_estimates(configs)
        self.asked["store"] += len(found)
        self.reference = self.reference or keys.reference  # a rerun answers what the first run answered
        missing = [c for c in configs if c not in found]
        self.judged_by = JudgedBy.known(self.judged_by, keys.judged_by)
        if missing:
            reply = await self.estimator([dict(c) for c in missing], kinds(self.tunables))
            self.asked["worker"] += len(missing)
            self.entry = reply.entry or self.entry
            self.judged_by = JudgedBy.known(reply.judged_by, self.judged_by)
            self.reference = self.reference or reply.reference
            keys.scoped, keys.entry, keys.judged_by = reply.spec.scoped_vmem_limit_bytes, self.entry, reply.judged_by
            keys.reference = keys.reference or reply.reference
            fresh = {tuple(sorted((str(k), v) for k, v in e.config)): e for e in reply.estimates}
            keys.put_estimates(fresh)
            found.update(fresh)
        self.estimates.update(found)
        return [Scored(None if c not in found or feasibility.rejections(found[c], keys.scoped)
                       else found[c].seconds or 0.0, found[c].program_hash if c in found else None) for c in configs]

    async def compiled(self, config: Config) -> CompileResult:
        """The file written with ``config``, compiled for the chip (tier 2), once per configuration."""
        if config not in self.compiles:
            stored = self.keys.stored_compile(config)  # a rerun answers from the store what the first run found
            self.asked["compile_store"] += stored is not None
            if stored is None:
                self.say(f"compiling {_changes_text(config, self.current)} for {self.options.chip} (tier 2)", None)
                stored = await self.compiler(self.configured(config))
                self.asked["compiled"] += 1
                self.keys.put_compile(config, stored)
            self.compiles[config] = stored
        return self.compiles[config]


# --------------------------------------------------------------------------- the steps


async def _estimate_space(run: _Run, device: bool) -> Exploration:
    """Step 1: the exploration of the space by the judge's estimates (engine/tuning/tune_space.py)."""
    options, budget = run.options, run.options.estimates or DEFAULT_ESTIMATES
    share = 0.1 if device else 0.9
    explored = await explore(Space.of(run.tunables), run.score, budget=budget, seed=options.seed, current=run.current,
                             on_progress=lambda ex: run.say(f"estimating for {options.chip}: {len(ex.seen):,} of at most "
                                                            f"{min(budget, ex.size + 1):,} ({ex.strategy})",
                                                            share * min(1.0, len(ex.seen) / min(budget, ex.size + 1))))
    if run.asked["worker"] == 0:
        run.notes.append(f"estimates reused from the results store ({run.asked['store']} configurations)")
        run.entry = run.entry or run.keys.entry_name()
    elif run.keys.scoped is None:
        run.notes.append(f"the scoped-VMEM limit of {options.chip} is not measured here (no libtpu): "
                         "VMEM feasibility uses vmem_limit_bytes only where a call sets it")
    if explored.inert:
        run.notes.append(f"not moved after {INERT_AFTER} moves that never changed the traced program or its estimate: "
                         f"{', '.join(explored.inert)} (their values cannot change the estimate)")
    return explored


def _prechecked(run: _Run, explored: Exploration) -> dict[Config, float]:
    """Step 2: the pre-check (analysis/feasibility.py) and the duplicates: per exported program one
    configuration ranks, the one changing the fewest values of the current configuration. Returns the
    feasible representatives with their estimates."""
    by_program: dict[str, Config] = {}
    for config in explored.seen:
        why = feasibility.rejections(run.estimates[config], run.keys.scoped)
        if why:
            run.precheck[config] = why
            continue
        program = run.estimates[config].program_hash or repr(config)
        held = by_program.get(program)
        if held is None or _changed(config, run.current) < _changed(held, run.current):
            by_program[program] = config
    for config in explored.seen:
        first = by_program.get(run.estimates[config].program_hash or repr(config), config)
        if config not in run.precheck and first != config:
            run.duplicate_of[config] = first
    return {c: run.estimates[c].seconds or 0.0 for c in by_program.values()}


async def _file_values_back(run: _Run, explored: Exploration, feasible: dict[Config, float]) -> None:
    """The configurations the walk may reach keep the file's values of the tunables that never changed the
    traced program (``explored.inert``): each is estimated again with those put back, and replaced when that
    exports the same program and stays feasible, so an applied edit changes only values that matter."""
    if not explored.inert or not feasible:
        return
    inert, now = set(explored.inert), dict(run.current)
    # skips cost no compile: the walk may reach past its compile budget, so a few times that many
    top = sorted(feasible, key=lambda c: (feasible[c], _changed(c, run.current), c))[:4 * max(1, run.options.compiles)]
    back = {c: tuple((n, now[n] if n in inert else v) for n, v in c) for c in top}
    back = {c: p for c, p in back.items() if p != c}
    missing = sorted({p for p in back.values() if p not in run.estimates})
    if missing:
        await run.score(missing)
    for config, plain in back.items():
        est, was = run.estimates.get(plain), run.estimates[config]
        if est is None or plain in feasible or feasibility.rejections(est, run.keys.scoped) \
                or not same_cost(est.program_hash, est.seconds, was.program_hash, was.seconds):
            continue
        feasible[plain] = feasible.pop(config)
        run.duplicate_of.pop(plain, None)
        run.duplicate_of[config] = plain


async def _compile_current(run: _Run, feasible: dict[Config, float], explored: Exploration) -> None:
    """The current configuration is always a candidate: compiled for the chip whatever the pre-check said
    (where the two disagree, the compiler is the authority and the report says so)."""
    current = run.current
    if run.compiler is not None:
        result = await run.compiled(current)
        rejected = run.precheck.get(current)
        if rejected and any(r.reason in feasibility.WORK for r in rejected):
            run.notes.append(f"the current configuration does no work or works on padding ({rejected[0].message}); "
                             f"it compiles for {run.options.chip} but is not ranked")
        elif rejected and run.estimates[current].status == "ok" and result.ok is True:
            run.notes.append(f"the pre-check rejected the current configuration ({rejected[0].message}), the compiler "
                             f"for {run.options.chip} accepts it: ranked with the others (the compiler is the authority)")
            del run.precheck[current]
            feasible[current] = run.estimates[current].seconds or 0.0
    if not feasible and run.compiler is None:
        first = next(iter(run.precheck.values()))
        raise TuneError(f"{run.path}: every one of {len(explored.seen)} configurations estimated was rejected before "
                        f"compiling ({feasibility.summarize(run.precheck.values())}); first reason: {first[0].message}")
    run.say(f"{len(feasible)} feasible, {len(run.precheck)} rejected before compiling", 0.1)


async def _search_on_device(run: _Run, feasible: dict[Config, float], timer: DeviceTimer) -> SearchResult:
    """Step 3 with a device: the cost-model-seeded search (engine/tuning/tune_search.py) over the judge's ``time``
    requests, or a finished run of this unchanged kernel read back from the store."""
    keys, options = run.keys, run.options
    stored = keys.stored_timings(list(feasible))
    run.reused.update(stored)
    run.timed.update({c: Timed.of(m) for c, m in stored.items()})
    known = {c: run.timed[c].device_s for c in stored}
    crashed: list[str] = []  # evaluations the backend did not finish (a crash, a lost worker, no Ray)
    done = {"n": 0}

    async def evaluate(configs: Sequence[Config]) -> list[float | None]:
        timed = await timer([dict(c) for c in configs])
        for config, t in zip(configs, (t if isinstance(t, Timed) else Timed.of(t) for t in timed)):
            t = _device_only(t)
            if t.measured is None or t.measured.status == "crash":  # the worker or the backend failed, not the
                crashed.append(t.why or "crash")  # configuration: tried again next run, never stored
            else:
                keys.put_timing(config, t.measured)
            run.timed[config] = t
        done["n"] += len(configs)
        run.say(f"measured {done['n']} configurations", 0.1 + 0.9 * min(1.0, done["n"] / max(1, len(feasible))))
        return [run.timed[c].device_s for c in configs]

    if any(t is not None for t in known.values()) and keys.finished_run():  # a run that timed something
        run.notes.append("reused a finished tuning run (same code, chip, versions, backend)")
        searched = SearchResult(results=known, strategy="reused",
                                stopped="a finished tuning run of this unchanged kernel is in the store: nothing timed")
    else:
        searched = await search(list(feasible), feasible, evaluate, budget=options.budget, known=known,
                                batch=options.batch, current=run.current if run.current in feasible else None)
    if crashed:
        if not any(t is not None for t in searched.results.values()):
            raise TuneError(f"every device evaluation failed on the {options.backend} backend ({len(crashed)} of "
                            f"{len(searched.order)}): {crashed[0][:300]}. Nothing is stored; fix the backend and "
                            "run again")
        run.incomplete = f"{len(crashed)} device evaluations did not finish ({crashed[0][:160]})"
        run.notes.append(f"{run.incomplete}: this run is not stored as finished; the next run times them again")
    run.best_provenance = "device"
    return searched


def _device_only(t: Timed) -> Timed:
    """A timing that is not a device timing (CPU, interpret) never ranks: said as its failure."""
    m = t.measured
    if m is None or m.provenance is Provenance.DEVICE:
        return t
    why = f"not a device timing ({m.provenance.value}): not used for ranking"
    return replace(t, candidate=None, why=why, test=TestResult.not_verified(why),
                   measured=replace(m, status="runtime_error", median_ns=None, error=why))


def _judge_s_test(run: _Run, tester: Tester | None) -> Callable[[Config], Awaitable[bool | None]]:
    """Without a device: the judge's test of a configuration that compiled (the ``time`` op against the
    reference, ``verify`` at most; a result read back from the store costs none). True: the pick (ok, or not
    verified: it says why); False: wrong, walk past it; None: stop, every test allowed found it wrong."""
    left = {"n": run.options.verify if tester is not None else 0, "wrong": 0}
    run.best_provenance = f"estimate ({run.options.chip})"

    async def accept(config: Config) -> bool | None:
        if left["n"] <= 0:
            return None if left["wrong"] else True
        left["n"] -= 1
        run.say(f"testing {_changes_text(config, run.current)} against the reference (the judge's test)", None)
        test = run.keys.stored_test(config)
        if test is None:
            test = await tester(run.configured(config))
            run.keys.put_test(config, test)
        run.tests[config] = test
        if test.outcome == "wrong":
            left["wrong"] += 1
            return None if left["n"] <= 0 else False
        return True

    return accept


async def _pick(run: _Run, ranked: list[Config], accept: Any, explored: Exploration) -> Config | None:
    """Step 5: what tune calls best: the first of the ranking that compiles for the chip (the walk through
    tier 2) and passes ``accept``; without a compiler, the first ``accept`` takes."""
    if run.compiler is None and accept is None:  # device timings, nothing compiled here: the fastest
        return ranked[0] if ranked else None
    if run.compiler is None:
        for config in ranked:
            taken = await accept(config)
            if taken:
                return config
            if taken is None:
                break
        run.notes.append(f"the {run.options.verify} best-ranked configurations failed the judge's test; nothing to apply")
        return None
    current = run.compiles.get(run.current)
    oom = current is not None and current.ok is False and feasibility.out_of_vmem(current.why, current.evidence)
    run.walked = await walk(ranked, run.compiled, run.estimates, budget=max(0, run.options.compiles), accept=accept,
                            out_of_vmem=[run.current] if oom and run.current in run.estimates else [],
                            ignore=frozenset(explored.inert))
    for step in run.walked.steps:
        if step.state == SKIPPED:
            run.skipped[step.config] = step.like
    if run.walked.picked is not None:
        return run.walked.picked
    chip = run.options.chip
    tested = run.tests.get(run.current)
    if current is not None and current.ok is True and (tested is None or tested.outcome != "wrong"):
        run.best_provenance = "the current configuration (compiles for the chip)"
        run.notes.append(f"no configuration walked passed tier 2 ({run.walked.stopped}); the current configuration "
                         f"compiles for {chip} and stays: nothing to apply")
        return run.current
    run.notes.append(f"no configuration passed tier 2 for {chip} ({run.walked.stopped}), nor the current one "
                     f"({current.text() if current else 'not compiled'}); nothing to apply")
    return None


async def _audit_precheck(run: _Run) -> list[tuple[Config, int, CompileResult]]:
    """``TuneOptions.audit``: compile the configurations the pre-check rejected for VMEM alone, nearest the limit
    first: does the compiler agree?"""
    if run.compiler is None or run.options.audit <= 0:
        return []
    vmem_only = [c for c, why in run.precheck.items() if c != run.current and all(r.reason == "vmem" for r in why)]
    audited = []
    for config in sorted(vmem_only, key=lambda c: (feasibility.counted_vmem(run.estimates[c]) or 0, c))[:run.options.audit]:
        audited.append((config, feasibility.counted_vmem(run.estimates[config]) or 0, await run.compiled(config)))
    agreed = sum(r.ok is False and feasibility.out_of_vmem(r.why, r.evidence) for _, _, r in audited)
    if agreed < len(audited):
        run.notes.append(f"the pre-check rejected for VMEM {len(audited) - agreed} of {len(audited)} configurations "
                         "the compiler did not reject for VMEM (see the audit)")
    return audited


# --------------------------------------------------------------------------- verdicts and the report


def _outcomes(run: _Run, seen: Sequence[Config], device: bool) -> tuple[Outcome, ...]:
    """Every configuration's Verdict, once, from what the steps found; in the one ranking (``rank``) against
    the current configuration's figure, given best figure first (fewest changes on ties)."""
    out = {}
    for config in dict.fromkeys(seen):
        est = run.estimates[config]
        held = run.duplicate_of.get(config)
        verdict = _verdict(run, held if held is not None else config, device)
        out[config] = Outcome(config, verdict, run.estimate_timing(config), est.bound, duplicate_of=held,
                              reused=config in run.reused)
    cur = out.get(run.current)
    given = sorted(out.values(), key=lambda o: (o.verdict.timing is None, o.verdict.timing.seconds if o.verdict.timing
                                                else 0.0, o.duplicate_of is not None, _changed(o.config, run.current),
                                                o.config))
    order = rank(cur.verdict.timing if cur else None, [(o.config, o.verdict) for o in given],
                 baseline_name="the current configuration").order
    return tuple(out[c] for c in order)


def _verdict(run: _Run, config: Config, device: bool) -> Verdict:
    """One configuration's Verdict: its compile for the chip (the walk's, or why not compiled), the judge's
    test (or why not verified), and its figure by the run's one method where it ranks."""
    if config in run.precheck:
        return Verdict(_compile_part(run, config), TestResult.not_verified("not tested: rejected before compiling"),
                       judged_by=run.judged_by)
    if device:
        timed = run.timed.get(config)
        timing = timed.candidate if timed is not None and timed.device_s else None
        return Verdict(_compile_part(run, config), _device_test(run, config, timed, timing), timing,
                       judged_by=timed.judged_by if timed is not None else JudgedBy.UNKNOWN)
    test = run.tests.get(config) or TestResult.not_verified(
        "not tested (--verify 0)" if run.options.verify <= 0 else
        "not tested: the judge's test runs on the configurations tune walks to, best first (--verify N)")
    return Verdict(_compile_part(run, config), test, run.estimate_timing(config), judged_by=run.judged_by)


def _device_test(run: _Run, config: Config, timed: Timed | None, timing: Timing | None) -> TestResult:
    """The test a device timing's ``time`` request ran, or why there is none."""
    if timed is None:
        return TestResult.not_verified("not timed: the device search spent its evaluations on others "
                                       "(--max-evaluations)")
    if timed.test is not None:
        return timed.test
    if timing is None:
        return TestResult.not_verified(f"not timed: {timed.why}")
    if config in run.reused:
        return TestResult.not_verified("its device timing was read back from the results store, without its test")
    return TestResult.not_verified("the device timer ran no test")


def _compile_part(run: _Run, config: Config) -> CompileResult:
    chip = run.options.chip
    if config in run.compiles:
        return run.compiles[config]
    if config in run.skipped:
        return CompileResult.failed(f"skipped without compiling: at least as large as "
                                    f"{_changes_text(run.skipped[config], run.current)}, which ran out of VMEM on {chip}",
                                    chip=chip)
    rejected = run.precheck.get(config)
    if rejected:
        first = rejected[0]
        why = first.message if first.reason == "trace" else f"rejected before compiling ({first.reason}): {first.message}"
        return CompileResult.failed(why, "\n".join(r.message for r in rejected), chip=chip)
    if run.compiler is None:
        return CompileResult.not_checked("this tune run compiles nothing (it was given no compiler)", chip=chip)
    return CompileResult.not_checked("the walk through tier 2 stopped before it (best first, --max-compiles)",
                                     chip=chip)


def _report(run: _Run, judged: Sequence[Config], explored: Exploration, searched: SearchResult, best: Config | None,
            audited: list[tuple[Config, int, CompileResult]]) -> TuneReport:
    device = searched.strategy != "ranked by the estimate"
    reference_s = sorted(t.reference.seconds for t in run.timed.values()
                         if t.reference is not None and t.reference.provenance == "device")
    chip, worker = run.options.chip, run.keys.worker
    return TuneReport(
        current_vs_reference=pair(run.estimates.get(run.current), run.reference, chip) if run.current in run.estimates
        else None,
        best_vs_reference=pair(run.estimates.get(best), run.reference, chip) if best in run.estimates else None,
        path=run.path, entry=run.entry, chip=chip, backend=run.options.backend, tunables=run.tunables,
        current=run.current, outcomes=_outcomes(run, judged, device), best=best,
        best_provenance=run.best_provenance if best is not None else None,
        rejected=feasibility.summarize(run.precheck.values()), evaluations=len(searched.order), reused=len(run.reused),
        strategy=searched.strategy, stopped=searched.stopped, reference=run.reference, notes=tuple(run.notes),
        space_size=explored.size, explored=explored.summary(),
        reference_s=reference_s[len(reference_s) // 2] if reference_s else None,
        edits=apply_config(run.tunables, dict(best)) if best is not None else (),
        device_kind=worker[0] if worker else "", versions=worker[1] if worker else (),
        current_compile=run.compiles.get(run.current), best_compile=run.compiles.get(best) if best is not None else None,
        walk=run.walked, compiled_fresh=run.asked["compiled"], compiled_stored=run.asked["compile_store"],
        audited=tuple(audited))


def _changes_text(config: Config | None, current: Config) -> str:
    """The values of ``config`` that differ from the current configuration, or "the current configuration"."""
    now = dict(current or ())
    return ", ".join(f"{k}={v}" for k, v in config or () if now.get(k) != v) or "the current configuration"


def _changed(config: Config, current: Config) -> int:
    return sum(a != b for a, b in zip(config, current))
