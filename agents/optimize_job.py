"""`pallasite optimize` as a service: what the CLI and the editor both run.

``OptimizeJob`` holds what a run works on (the file, its text, the tests text of a reviewed
``<stem>.tests.py``, the budgets, the state); ``run_optimize(job, setup, judge, model, recorder, ...)``
takes the run setup and its one judge (engine/judge.py, ``setup.judge(engine, job.trusted())``: the
check options, chip and device of the setup; its device phases on the engine's one open device pool),
builds the loop's evaluator over it (agents/optimize_eval.JudgeEvaluator),
gives the fixer a model client recording under the run (so a replay reproduces fix rounds),
validates the reviewed tests against the original, and runs the loop (agents/optimize.optimize).
It returns the final ``RunState``, or a string saying why the run could not start. The front ends
only parse their arguments and render the table (server/commands/cmd_optimize.py, server/editor/optimize_lsp.py):
the same tests file, the same device backend choice and the same budgets in both.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .llm.model_client import ModelClient
from .optimize import Budgets, Gate, OnPhase, RunState, new_run, optimize

MAX_TOKENS = 500_000  # the run's token budget unless the user sets one (CLI --max-tokens, editor agent.optimizeMaxTokens)
MAX_SECONDS = 1800.0


def tests_path(path: str) -> Path:
    """Where the reviewed tests live: ``<stem>.tests.py`` beside the kernel file."""
    return Path(path).with_suffix(".tests.py")


def reviewed_tests(path: str) -> str | None:
    found = tests_path(path)
    return found.read_text(encoding="utf-8") if found.is_file() else None


@dataclass
class OptimizeJob:
    """What the run works on and within (how its candidates are judged is the run's ``Judge``, nothing here)."""

    path: str
    text: str  # the original as the run starts from it
    budgets: Budgets
    tests: str | None = None  # the reviewed tests (``reviewed_tests``), or None: the file's own / the writer
    tests_name: str = ""  # where they came from, for the table's footer
    state: RunState | None = None  # the run's state (a new one when None)
    resumed: bool = False  # a resumed run: its recorded tests hash decides (other tests are refused)

    def trusted(self) -> Any:
        """The judge's trusted side: the original (a resumed run's own) with its frozen tests."""
        from ..engine.judge import Trusted

        return Trusted.of_file(self.path, self.state.original if self.state else self.text, self.tests)


def budgets(iterations: int, *, max_tokens: int = MAX_TOKENS, max_seconds: float = MAX_SECONDS, fix_rounds: int = 0,
            request_timeout_s: float = 120.0, test_rounds: int = 3) -> Budgets:
    """The run's budgets, the same defaults from every front end."""
    return Budgets(iterations=iterations, max_tokens=max_tokens, max_seconds=max_seconds, fix_rounds=fix_rounds,
                   request_timeout_s=request_timeout_s, test_rounds=test_rounds)


def make_evaluator(job: OptimizeJob, judge: Any, model: Any, recorder: Any, state: RunState) -> Any:
    """The loop's evaluator over the run's judge; the fixer asks the model through a client recording
    under this run."""
    from .optimize_eval import JudgeEvaluator

    fixer = ModelClient(model, run_id=state.run_id, recorder=recorder) if job.budgets.fix_rounds else None
    return JudgeEvaluator(judge, fixer=fixer)


async def run_optimize(job: OptimizeJob, setup: Any, judge: Any, model: Any, recorder: Any = None, *,
                       gate: Gate | None = None, on_phase: OnPhase | None = None, on_start: Any = None) -> RunState | str:
    """The run (see the module docstring) of ``job`` from its run setup (agents/run_setup.RunSetup), every
    candidate judged by ``judge`` (``setup.judge(engine, job.trusted())``); ``on_start(state, evaluator)``
    is called before the loop."""
    state = job.state or new_run(job.path, job.text)
    state.context.setdefault("chip", setup.chip)
    evaluator = make_evaluator(job, judge, model, recorder, state)
    if job.tests is not None and not job.resumed:
        from .test_writer import validate_with

        check = await validate_with(evaluator, state.original, job.tests)
        if not check.ok:
            return f"{job.tests_name or 'the tests'}: the original kernel does not pass these tests: " \
                   f"{check.evidence or check.summary}"
        state.context["tests"] = job.tests
        state.context["tests_summary"] = f"from {job.tests_name or 'the reviewed tests'}, validated ({check.summary})"
    if on_start is not None:
        on_start(state, evaluator)
    return await optimize(state, model, evaluator, job.budgets, recorder=recorder, gate=gate, on_phase=on_phase)
