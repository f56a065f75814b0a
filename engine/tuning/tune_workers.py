"""Tune's seam to the workers: its configurations' estimates and device timings as requests, each one
judged like any candidate (engine/tuning/judge_tune.py builds them for a run: ``config_estimator``,
``config_timer``, over the run's judge).

- ``worker_estimator``: the configurations in ``estimate`` requests with ``judged`` set: in each, the file's
  process exports one module per configuration and the judge prices every one of them from its bytes
  (runner/judging/configs.py), against the user's own file (``trusted``) where the text is model-written.
- ``worker_timer``: one ``time`` request per configuration on the device (the judge's own request, made by
  ``judge_tune.config_timer``: the file written with the configuration, the trusted file beside it), read into
  the candidate's and the reference's measurements and the test the time op ran.

Client side: no JAX.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Any

from ...analysis.timed import Timed
from ...analysis.types import Measurement, Provenance, from_json
from ...analysis.verdict import TestResult

from ...wire.messages import EstimateParams, EstimateResult

from ..sources import sources_for, trusted_sources
from .tune import TuneError

# configurations in one estimate request, at most: the file's process that traced them ends with the request,
# so a larger batch spends less on starting that process and the judge's verifier (one per request), while one
# request of a large kernel's configurations stays well inside the time limit of a request
PER_REQUEST = 32


def progress_of(on_progress: Any) -> Any:
    """The backend's typed Progress to a (message, fraction) callback."""
    if on_progress is None:
        return None
    return lambda p: on_progress(p.message, p.fraction)


def worker_estimator(backend: Any, path: str, text: str | None, chip: str, entry: str | None, *,
                     timeout_s: float, on_progress: Any = None, parallel: int = 1,
                     trusted: tuple[str, str] | None = None) -> Callable[..., Awaitable[EstimateResult]]:
    """An ``Estimator`` (engine/tuning/tune.py) over a backend (engine/workers/backend.py) or one ``WorkerClient``: each
    call's configurations split into ``parallel`` judged ``estimate`` requests on the job workers (more, queued
    for them, when each would carry over ``PER_REQUEST``). The first call's first request, alone with one
    configuration, also costs the reference and probes the chip (then a pool's idle job workers are replaced:
    libtpu stays in the worker that loaded it); every reply carries what it found."""
    from .. import chip_table

    source = sources_for(path, text)
    judged_against = trusted_sources(*trusted) if trusted is not None else None
    known = next((s for s in chip_table.cached() or () if s.name == chip and s.scoped_vmem_limit_bytes), None)

    async def one(chunk: list[dict[str, int]], kinds: dict[str, str], reference: bool) -> EstimateResult:
        # the scoped-VMEM limit: from the chip-table cache when measured, else the first worker probes it
        params = EstimateParams(source=source, chip=chip, entry=entry, configs=tuple(chunk), kinds=dict(kinds),
                                reference=reference, probe=reference and known is None, trusted=judged_against,
                                judged=True)
        reply = await backend.request(params, purpose="job", timeout_s=timeout_s, on_progress=progress_of(on_progress))
        if not reply.ok:
            # the judge's copy of the file is named for it (engine/sources.trusted_sources): say the user's name
            raise TuneError(f"the worker could not estimate {path}: {str(reply.why).replace('.pallasite-trusted', '')}")
        return reply.result

    first: list[EstimateResult] = []  # the first reply: the reference's cost and the probed chip

    async def estimate(configs: Sequence[dict[str, int]], kinds: dict[str, str]) -> EstimateResult:
        configs = [dict(c) for c in configs]
        replies = []
        if not first:
            head = await one(configs[:1], kinds, True)
            chip_spec = head.spec
            if known is not None:
                chip_spec = replace(chip_spec, scoped_vmem_limit_bytes=known.scoped_vmem_limit_bytes,
                                    scoped_vmem_source=known.scoped_vmem_source)
            first.append(replace(head, spec=chip_spec))
            replies.append(head)
            configs = configs[1:]
            fresh = getattr(backend, "replace_idle", None)
            if configs and fresh is not None:
                await fresh("job")
        if configs:
            # at most PER_REQUEST configurations a request, queued for the ``parallel`` workers (the estimates
            # do not depend on which worker priced them, nor on what it priced before)
            n = max(1, min(parallel, len(configs)), -(-len(configs) // PER_REQUEST))
            replies += await asyncio.gather(*(one(configs[i::n], kinds, False) for i in range(n)))
        return replace(first[0], estimates=tuple(e for r in replies for e in r.estimates))

    return estimate


def worker_timer(backend: Any, request_for: Callable[[dict[str, int]], Any], chip: str, *, timeout_s: float,
                 on_progress: Any = None) -> Callable[..., Awaitable[list[Any]]]:
    """A ``DeviceTimer`` (engine/tuning/tune.py) over the backend's device worker: ``request_for(config)`` is the
    judge's ``time`` request of the file written with that configuration (trusted file beside it). A batch's
    configurations go out at once: a device pool (engine/workers/device_pool.py) times them on its N workers, one device
    worker queues them; the results keep the batch's order either way. A worker without a device answers
    interpret-mode timings, which never rank."""
    from ..judge_phase import judged_by, test_result

    def failed(why: str, status: str) -> Timed:
        return Timed.of(Measurement(status=status, provenance=Provenance.DEVICE, device_kind=chip, method="time op",
                                    error=why[:500]), test=TestResult.not_verified(f"not timed: {why}"[:500]))

    async def time_one(config: dict[str, int]) -> Timed:
        reply = await backend.request(request_for(config), purpose="device", timeout_s=timeout_s,
                                      on_progress=progress_of(on_progress))
        if not reply.ok:  # the worker or the backend failed, not the configuration ("crash": tried again next run)
            return failed(str(reply.why), "crash" if reply.status != "error" else "runtime_error")
        result = reply.result
        cand = _measurement(getattr(result, "candidate", None))
        test = test_result(reply, "the time op on the device")
        if cand is None:
            return replace(failed(str(result.error or result.verdict), "runtime_error"), test=test)
        return Timed.of(cand, _measurement(getattr(result, "reference", None)), test=test, judged_by=judged_by(reply))

    async def time_configs(configs: Sequence[dict[str, int]]) -> list[Timed]:
        return list(await asyncio.gather(*(time_one(dict(config)) for config in configs)))

    return time_configs


def _measurement(value: Any) -> Measurement | None:
    if value is None or isinstance(value, Measurement):
        return value
    return from_json(Measurement, value)


async def device_platform(backend: Any, timeout_s: float) -> str | None:
    """The jax platform of the backend's device worker ("tpu", "gpu", "cpu"), None if it did not start."""
    from ...wire.messages import VersionsParams

    reply = await backend.request(VersionsParams(), purpose="device", timeout_s=timeout_s)
    return reply.result.platform if reply.ok else None


def job_progress(report: Callable[[Any], None]) -> Callable[[str, "float | None"], None]:
    """A (message, fraction) progress callback that reports a job's structured Progress."""
    from ...wire.messages import Progress, Stage

    return lambda message, fraction=None: report(Progress(stage=Stage.TUNE, message=message, fraction=fraction))
