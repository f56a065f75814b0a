"""Recording an agent run in the results store: every model call (redacted) and the run's summary.

    recorder = StoreRecorder(workspace)      # .pallasite/results.sqlite of that folder
    Fixer(provider, verify, recorder=recorder)
    ...
    recorder.close()

Calls go to the ``llm_calls`` table (what ``--provider replay:<run-id>`` replays), the outcome to
``agent_steps`` (kind "fix"). The fixer has redacted each text already; this module redacts once
more at the door, since the store must never hold a key whatever its caller did. A store that
cannot be written is reported once (``problems``) and the run carries on unrecorded.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Protocol

from . import keys


@dataclass(frozen=True)
class CallRecord:
    """One model call, redacted, as the results store keeps it (replayable)."""

    run_id: str
    step: int
    provider: str
    model: str
    system: str
    prompt: str
    response: str | None
    error: str | None
    usage: dict
    seconds: float


class Recorder(Protocol):
    def call(self, record: CallRecord) -> None: ...

    def summary(self, run_id: str, payload: dict) -> None: ...


class StoreRecorder:
    def __init__(self, workspace: str | Path) -> None:
        from ...knowledge.store import ResultsStore, StoreError

        self.problems: list[str] = []
        self._store = None
        try:
            self._store = ResultsStore.open(workspace)
        except StoreError as err:
            self.problems.append(f"agent calls are not recorded: {err}")

    def call(self, record: CallRecord) -> None:
        if self._store is None:
            return
        data = asdict(record)
        for name in ("system", "prompt", "response", "error"):
            if data[name] is not None:
                data[name] = keys.redact(data[name])
        try:
            self._store.put_llm_call(data["run_id"], data["step"], provider=data["provider"], model=data["model"],
                                     system=data["system"], prompt=data["prompt"], response=data["response"],
                                     error=data["error"], usage=data["usage"], seconds=data["seconds"])
        except Exception as err:  # noqa: BLE001 - recording must never break the action
            self._fail(err)

    def summary(self, run_id: str, payload: dict) -> None:
        if self._store is None:
            return
        try:
            import json

            clean = json.loads(keys.redact(json.dumps(payload)))
            self._store.put_agent_step(run_id, 0, "fix", clean)
        except Exception as err:  # noqa: BLE001
            self._fail(err)

    def _fail(self, err: Exception) -> None:
        message = f"agent calls are not recorded: {keys.redact(str(err))}"
        if message not in self.problems:
            self.problems.append(message)

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None
