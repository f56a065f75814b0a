"""Recording an optimize run in the results store, resuming it, exporting and replaying it.

Every model call goes to ``llm_calls`` (redacted; ``--provider replay:<run-id>`` replays them);
after the baseline (step 0, kind "optimize-start") and after each iteration (step = iteration,
kind "optimize-iteration") the whole run state is written to ``agent_steps``, so a crashed or
cancelled run resumes from its last snapshot (``load``: the newest snapshot, with an iteration
that was cut off mid-way dropped). ``export`` is the run as JSON; ``replay_table`` rebuilds the
final table from such an export without running anything.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .llm import keys
from .optimize import Iteration, RunState, state_from_json, state_json
from .llm.providers import ModelRequest, Usage


class OptimizeRecorder:
    def __init__(self, workspace: str | Path) -> None:
        from ..knowledge.store import ResultsStore, StoreError

        self.problems: list[str] = []
        self.store = None
        try:
            self.store = ResultsStore.open(workspace)
        except StoreError as err:
            self.problems.append(f"the optimize run is not recorded: {err}")

    def _do(self, action: Any) -> None:
        if self.store is None:
            return
        try:
            action(self.store)
        except Exception as err:  # noqa: BLE001 - recording never breaks the run
            message = f"the optimize run is not recorded: {keys.redact(str(err))}"
            if message not in self.problems:
                self.problems.append(message)

    def call(self, run_id: str, step: int, provider: Any, request: ModelRequest, response: str | None,
             error: str | None, usage: Usage, seconds: float) -> None:
        self._do(lambda s: s.put_llm_call(
            run_id, step, provider=getattr(provider, "name", "?"), model=getattr(provider, "model", None),
            system=keys.redact(request.system), prompt=keys.redact(request.prompt),
            response=keys.redact(response) if response is not None else None,
            error=keys.redact(error) if error else None,
            usage={"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens,
                   "thinking_tokens": usage.thinking_tokens}, seconds=seconds))

    def _put(self, state: RunState, step: int, kind: str) -> None:
        payload = json.loads(keys.redact(json.dumps(state_json(state), default=str)))
        self._do(lambda s: s.put_agent_step(state.run_id, step, kind, payload))

    def header(self, state: RunState) -> None:
        self._put(state, 0, "optimize-start")

    def snapshot(self, state: RunState, it: Iteration) -> None:
        self._put(state, it.index, "optimize-iteration")

    def finish(self, state: RunState) -> None:
        self._put(state, len(state.iterations), "optimize-end")

    def close(self) -> None:
        if self.store is not None:
            self.store.close()
            self.store = None


def load(store: Any, run_id: str) -> RunState | None:
    """The run's state from its newest snapshot; an iteration cut off mid-way is dropped (it re-runs)."""
    steps = [s for s in store.agent_steps(run_id) if s.kind.startswith("optimize")]
    if not steps:
        return None
    newest = max(steps, key=lambda s: (s.step, s.id))
    state = state_from_json(newest.payload)
    state.iterations = [it for it in state.iterations if it.verdict not in ("not run", "stopped")]
    state.stopped = ""
    return state


def export(store: Any, run_id: str) -> dict:
    """The run as JSON: its final state (with the table) and its model calls."""
    steps = [s for s in store.agent_steps(run_id) if s.kind.startswith("optimize")]
    if not steps:
        raise KeyError(f"no optimize run {run_id!r} in the results store")
    newest = max(steps, key=lambda s: (s.step, s.id)).payload
    calls = [{"step": c.step, "provider": c.provider, "model": c.model, "prompt": c.prompt,
              "response": c.response, "error": c.error, "usage": c.usage} for c in store.llm_calls(run_id)]
    return {"run_id": run_id, "state": newest, "calls": calls}


def replay_table(exported: dict) -> list[dict]:
    """The final table of an exported run, recomputed from its recorded iterations."""
    return state_from_json(exported["state"]).table()
