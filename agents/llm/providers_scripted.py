"""Deterministic providers: ``scripted`` (queued responses) and ``replay:<run-id>`` (a recorded run).

The scripted provider answers each call with the next queued response, so tests and demos run the
whole fix loop without a model. Responses come from ``ProviderConfig.scripted`` or from a JSON file
(``agent.scriptedFile``) holding a list whose items are the reply text, an object describing the reply
(with ``text`` or ``error``), or any other object, which is the reply itself sent as JSON text::

    ["{\\"explanation\\": ...}", {"text": "...", "input_tokens": 10, "output_tokens": 5},
     {"error": "rate_limit", "message": "..."}, {"text": "...", "delay_s": 2},
     {"explanation": "rows in multiples of 8", "edits": [{"search": "...", "replace": "..."}]}]

It keeps every request it was sent (``requests``) for tests to inspect. ``replay:<run-id>`` answers
with the responses the results store recorded for that run, in order (``pallasite fix --provider
replay:<run-id>`` re-runs a fix without calling the model).
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

from .providers import ERROR_KINDS, ModelReply, ModelRequest, ProviderConfig, ProviderError, Usage, reply


# An object item with one of these keys describes a reply (its text, usage, delay or error); any other
# object is the reply itself, e.g. the fixer's {"explanation": ..., "edits": [...]}, sent as its JSON text.
_WRAPPER_KEYS = frozenset({"text", "error"})


class ScriptedProvider:
    name = "scripted"

    def __init__(self, config: ProviderConfig, responses: list[Any] | None = None) -> None:
        self.config = config
        self.model = config.model or "scripted"
        if responses is None:
            responses = list(config.scripted) or _read_file(config.scripted_file)
        self.queue: list[Any] = list(responses)
        self.requests: list[ModelRequest] = []

    async def complete(self, request: ModelRequest) -> ModelReply:
        started = time.monotonic()
        self.requests.append(request)
        if not self.queue:
            raise ProviderError("refused", f"the {self.name} provider has no more responses "
                                           f"({_were_used(len(self.requests) - 1)})")
        item = self.queue.pop(0)
        if isinstance(item, str):
            item = {"text": item}
        elif isinstance(item, dict) and not _WRAPPER_KEYS & item.keys():
            item = {"text": json.dumps(item)}  # the reply itself as a JSON object (the fixer's edits)
        if not isinstance(item, dict):
            raise ProviderError("config", f"scripted response {len(self.requests)} must be a string or an "
                                          f"object, got {type(item).__name__}")
        if item.get("delay_s"):
            await asyncio.sleep(float(item["delay_s"]))  # cancellable, like a real request
        if item.get("error"):
            kind = item["error"] if item["error"] in ERROR_KINDS else "server"
            raise ProviderError(kind, str(item.get("message") or f"scripted {kind} error"))
        text = str(item.get("text", ""))
        usage_in = int(item.get("input_tokens", len(request.system + request.prompt) // 4))
        usage_out = int(item.get("output_tokens", len(text) // 4))
        usage = Usage(usage_in, usage_out, int(item.get("thinking_tokens", 0)), 1,
                      self.config.cost(usage_in, usage_out))
        return reply(text, usage, self.name, self.model, started)

    async def close(self) -> None:
        return None


class ReplayProvider(ScriptedProvider):
    """The responses recorded for one run, from the workspace's results store."""

    def __init__(self, config: ProviderConfig) -> None:
        from ...knowledge.store import ResultsStore, StoreError, find_workspace, store_path

        run_id = config.name.split(":", 1)[1].strip()
        path = Path(config.store_path) if config.store_path else store_path(find_workspace())
        if not path.exists():
            raise ProviderError("config", f"replay:{run_id}: no results store at {path} (run from the workspace "
                                          "that recorded the run)")
        try:
            with ResultsStore(path) as store:
                calls = store.llm_calls(run_id)
        except StoreError as err:
            raise ProviderError("config", f"replay:{run_id}: {err}") from None
        if not calls:
            raise ProviderError("config", f"replay:{run_id}: the results store at {path} has no calls for this "
                                          "run id (`pallasite fix --format json` prints a run's id)")
        responses: list[Any] = [
            {"text": c.response, "input_tokens": c.usage.get("input_tokens", 0),
             "output_tokens": c.usage.get("output_tokens", 0)} if c.response is not None
            else {"error": "refused", "message": f"(recorded failure) {c.error}"}
            for c in calls
        ]
        super().__init__(config, responses)
        self.name = config.name
        self.model = calls[0].model or "replay"


def _read_file(path: str) -> list[Any]:
    if not path:
        raise ProviderError("config", "the scripted provider needs responses: set agent.scriptedFile to a JSON "
                                      "file holding a list of replies")
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise ProviderError("config", f"agent.scriptedFile {path}: cannot read a JSON list of replies ({err})") from None
    if not isinstance(data, list):
        raise ProviderError("config", f"agent.scriptedFile {path}: expected a JSON list of replies, "
                                      f"got {type(data).__name__}")
    return data


def _were_used(n: int) -> str:
    return f"{n} {'was' if n == 1 else 'were'} used"
