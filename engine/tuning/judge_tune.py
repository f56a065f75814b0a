"""What a run does with its judge besides judging (issue 61: engine/judge.py only judges): optimize's autotune
phase over the judge's workers, tune's estimator and timer for a file's configurations (each configuration judged
like any candidate: its exported program priced by the judge, or timed by the judge's ``time`` request on a
device), and the device profile optimize's profile phase reads. Plain functions of a ``Judge``; tune imports
nothing of this module, so judge, tune and this module form no circle.

Client side: no JAX.
"""

from __future__ import annotations

from typing import Any

from ...analysis.types import to_json
from ..judge_phase import json_short


async def device_profile(judge: Any, text: str) -> str:
    """The ``profile`` op on the device, summarised (kernels by device time, the roofline)."""
    from ..timing import time_request

    params = time_request(judge.trusted.files(), "profile", runs=5, text=judge.trusted.text(text), chip=judge.chip)
    async with judge.device_slot:
        reply = await judge.device_backend().request(params, purpose="device", timeout_s=judge.timeout_s)
    if not reply.ok or reply.result is None:
        return f"device profile not taken: {reply.message or reply.status}"
    prof = to_json(reply.result).get("profile") or {}
    kernels = "; ".join(f"{k['name']} {k['device_ns_per_run'] / 1e3:.1f} us" for k in (prof.get("kernels") or [])[:5])
    return (f"device profile ({prof.get('chip')}, {prof.get('time_source')}): kernels {kernels or '-'}; "
            f"roofline {json_short(prof.get('roofline') or {})}")


async def autotune(judge: Any, text: str) -> Any:
    """The candidate's tunables searched (engine/tuning/tune.py; optimize's autotune phase) on the judge's own
    workers, every configuration judged like any candidate: priced by the judge from its exported program
    without a device, timed by the judge's ``time`` requests with one (the same open device backend as the
    test). Returns the ``TuneReport``; ``TuneError`` says why not."""
    from .tune import TuneOptions, tune

    options = TuneOptions(chip=judge.chip, backend=judge.device_name, verify=0)
    timer = config_timer(judge, text, options) if judge.device is not None else None
    return await tune(judge.trusted.path, judge.trusted.text(text), options, config_estimator(judge, text, options),
                      timer=timer, tester=judge.test)


def config_estimator(judge: Any, text: str | None, options: Any, *, backend: Any = None, parallel: int = 1,
                     on_progress: Any = None) -> Any:
    """Tune's ``Estimator`` for ``text``'s configurations on ``backend`` (default the run's job workers):
    judged ``estimate`` requests, each configuration's exported program priced by the judge for the chip,
    against the trusted side's own file (runner/judging/configs.py)."""
    from .tune_workers import worker_estimator

    return worker_estimator(backend or judge.backend(), judge.trusted.path,
                            None if text is None else judge.trusted.text(text), options.chip, options.entry,
                            timeout_s=judge.timeout_s, on_progress=on_progress, parallel=parallel,
                            trusted=judge.trusted.own)


def config_timer(judge: Any, text: str, options: Any, *, backend: Any = None, on_progress: Any = None) -> Any:
    """Tune's ``DeviceTimer`` for ``text``'s configurations on ``backend`` (default the run's device): for
    each, the judge's ``time`` request of the file written with it (every kind of tunable), with the trusted
    file beside it, like any candidate's: its figures, the reference's and the test, by the worker's judge."""
    from ...analysis.source import Source, apply_edits
    from ...analysis.tunables import apply_config, find_tunables

    from ..timing import time_request
    from .tune_workers import worker_timer

    tunables = find_tunables(Source(text), judge.trusted.path, options.entry, options.declared)

    def request_for(config: dict[str, int]) -> Any:
        configured = apply_edits(text, apply_config(tunables, config))
        return time_request(judge.trusted.files(), "time", runs=judge.runs, warmup=2, extra_shape=True,
                            text=judge.trusted.text(configured), trusted=judge.trusted.own, entry=options.entry)

    return worker_timer(backend or judge.device_backend(), request_for, options.chip, timeout_s=judge.timeout_s,
                        on_progress=on_progress)
