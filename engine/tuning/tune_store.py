"""What a tune run keeps in the results store (knowledge/store.py), keyed by the file's code hash, the entry,
the chip, the versions and the backend: the estimates of its configurations (under the cost model's name),
their compiles for the chip (tier 2), the judge's tests, the device timings keyed by the device kind and
versions the worker reported, and the finished run. A re-run reads them back: an interrupted search resumes
without repeating finished configurations, and an unchanged kernel is answered without a worker.

Every call is a no-op without a store; the first ``StoreError`` (a page found damaged while tuning) switches
the store off and ``problem`` says why. Client side: no JAX.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Mapping

from ...analysis.types import CostEstimate, Measurement, Provenance, from_json
from ...analysis.verdict import CompileResult, TestResult

Config = tuple[tuple[str, int], ...]  # sorted (name, value) pairs (engine/tuning/tune_search.Config)

# the method names stored results are keyed by
COST_MODEL_METHOD = "pallasite cost model (each configuration's exported program, priced by the judge)"
COMPILE_METHOD = "tiers 0-2: compiled for the chip (analysis/verdict.CompileResult)"
TEST_METHOD = "the judge's test: the time op on the configuration's exported program vs the reference"


class _Guarded:
    """The store's calls; the first ``StoreError`` (a page found damaged while tuning) switches it
    off, and ``problem`` says why (the report's notes say it once)."""

    EMPTY: dict[str, Any] = {"measurements": [], "estimates": [], "verdicts": [], "tuning_runs": []}

    def __init__(self, store: Any) -> None:
        self.store, self.problem = store, None

    def __getattr__(self, name: str) -> Any:
        from ...knowledge.store import StoreError

        method = getattr(self.store, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            if self.problem is None:
                try:
                    return method(*args, **kwargs)
                except StoreError as err:
                    self.problem = str(err)
            return list(self.EMPTY[name]) if name in self.EMPTY else None

        return call


class StoreKeys:
    """Result keys for this file + chip + versions + backend, and the store reads/writes (all
    no-ops without a store)."""

    def __init__(self, path: str, text: str, options: Any, store: Any) -> None:
        self.store = _Guarded(store) if store is not None else None
        self.options = options
        self.path = path
        self.entry = options.entry
        self.scoped: int | None = None
        self.reference: dict[str, Any] | None = None  # the reference's estimate (stored with the configurations')
        self.judged_by = ""  # who priced the estimates (EstimateResult.judged_by), stored with them
        self.worker: tuple[str, tuple[tuple[str, str], ...]] | None = None  # (device kind, versions) it reported
        if store is None:
            return
        from ...analysis.local_imports import source_hash
        from ...analysis.types import ResultKey, installed_versions

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
            self.judged_by = self.judged_by or str(payload.get("judged_by") or "")
        return out

    def entry_name(self) -> str:
        return self.entry or ""

    def put_estimates(self, estimates: Mapping[Config, CostEstimate]) -> None:
        if self.store is None:
            return
        from ...analysis.types import to_json

        for config, est in estimates.items():
            self.store.put_estimate(self._key(config), model=COST_MODEL_METHOD,
                                    status="ok" if est.status == "ok" else "compile_error", seconds=est.seconds,
                                    payload={"estimate": to_json(est), "scoped_vmem_limit_bytes": self.scoped,
                                             "entry": self.entry, "reference": self.reference,
                                             "judged_by": self.judged_by}, path=self.path)

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

    def stored_test(self, config: Config) -> TestResult | None:
        if self.store is None:
            return None
        records = self.store.verdicts(self._key(config), method=TEST_METHOD, limit=1)
        return TestResult.from_json(records[0].payload) if records else None

    def put_test(self, config: Config, test: TestResult) -> None:
        if self.store is None or test.outcome == "not verified":  # a run that could not say is tried again
            return
        self.store.put_verdict(self._key(config), method=TEST_METHOD, state=test.outcome, payload=test.to_json(),
                               path=self.path)

    def stored_compile(self, config: Config) -> CompileResult | None:
        if self.store is None:
            return None
        records = self.store.verdicts(self._key(config), method=COMPILE_METHOD, limit=1)
        return CompileResult.from_json(records[0].payload) if records else None

    def put_compile(self, config: Config, result: CompileResult) -> None:
        if self.store is None or not result.checked:  # a limit or a crash stopped it: try again next time
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

    def put_run(self, report: Any) -> None:
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
