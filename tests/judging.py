"""A test's evaluator over a judge of one file: what optimize builds from its run setup
(agents/optimize_job.make_evaluator over ``RunSetup.judge``), made here without a run setup so the loop's
tests can hand it a fake engine. Production code has no such shortcut (issue 49: the run setup is the only
source of limits and workers)."""

from __future__ import annotations

from typing import Any


def file_evaluator(engine: Any, path: str, original: str, options: Any, *, chip: str | None = None, device: Any = None,
                   where: str = "", fixer: Any = None, tests: str | None = None, timeout_s: float = 300.0,
                   tune: bool = True) -> Any:
    """A ``JudgeEvaluator`` over a ``Judge`` of the user's file (the original with its frozen tests as the
    trusted side)."""
    from pallasite.agents.optimize_eval import JudgeEvaluator
    from pallasite.engine.judge import Judge, Trusted

    if device is not None and not where and hasattr(device, "validate"):
        from pallasite.agents.run_setup import device_where

        where = device_where(device)
    judge = Judge(engine, options, Trusted.of_file(path, original, tests), chip=chip, device=device, where=where,
                  timeout_s=timeout_s)
    return JudgeEvaluator(judge, fixer=fixer, tune=tune)
