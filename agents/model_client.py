"""The one way an agent calls a model: provider + recorder + token budget + redaction.

    client = ModelClient(provider, run_id=state.run_id, recorder=recorder, budget=budget)
    with at_step(it.index):
        reply = await client.complete(request)

Every call goes through ``complete``: the budget is checked first (``BudgetSpent`` when spent), the
provider is asked, and the call (request, reply or error, usage, seconds; the recorder redacts) is
recorded under the run id at the *current step* (``at_step``: a context variable the loops set, so
a fixer round inside an optimize iteration records at that iteration, and a search node at its
own). The replay provider (``replay:<run-id>``) reads the calls back in (step, order): a run whose
every call went through a client replays to the same table. The client is itself a provider
(``name``, ``model``, ``complete``, ``close``), so the fixer, the test writer and the loops take it
where they took a provider.
"""

from __future__ import annotations

import contextlib
import time
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Iterator, Protocol

from .providers import ModelReply, ModelRequest, ProviderError, Usage

_STEP: ContextVar[int] = ContextVar("pallasite_model_step", default=0)


class CallRecorder(Protocol):
    def call(self, run_id: str, step: int, provider: Any, request: ModelRequest, response: str | None,
             error: str | None, usage: Usage, seconds: float) -> None: ...


class BudgetSpent(ProviderError):
    """The run's token budget is spent: no further call is made."""

    def __init__(self, used: int, limit: int) -> None:
        super().__init__("refused", f"token budget spent ({used} >= {limit})")
        self.used, self.limit = used, limit


@dataclass
class TokenBudget:
    """Tokens a whole run may spend, shared by every client of the run."""

    limit: int
    used: int = 0

    def spent(self) -> bool:
        return self.used >= self.limit


@contextlib.contextmanager
def at_step(step: int) -> Iterator[None]:
    """Calls made inside (in this task and the tasks it awaits) are recorded at ``step``."""
    token = _STEP.set(step)
    try:
        yield
    finally:
        _STEP.reset(token)


def current_step() -> int:
    return _STEP.get()


class ModelClient:
    """A provider with the run's recorder and budget (see the module docstring)."""

    def __init__(self, provider: Any, *, run_id: str = "", recorder: CallRecorder | None = None,
                 budget: TokenBudget | None = None) -> None:
        self.provider, self.run_id, self.recorder, self.budget = provider, run_id, recorder, budget
        self.usage = Usage()
        self.calls = 0

    @property
    def name(self) -> str:
        return getattr(self.provider, "name", "?")

    @property
    def model(self) -> Any:
        return getattr(self.provider, "model", None)

    @property
    def requests(self) -> list:
        """The requests the underlying provider saw (scripted providers keep them; tests read them)."""
        return getattr(self.provider, "requests", [])

    async def complete(self, request: ModelRequest) -> ModelReply:
        if self.budget is not None and self.budget.spent():
            raise BudgetSpent(self.budget.used, self.budget.limit)
        started = time.monotonic()
        step = current_step()
        try:
            reply = await self.provider.complete(request)
        except ProviderError as err:
            self._record(step, request, None, str(err), Usage(), time.monotonic() - started)
            raise
        self.calls += 1
        self.usage = self.usage + reply.usage
        if self.budget is not None:
            self.budget.used += reply.usage.total_tokens
        self._record(step, request, reply.text, None, reply.usage, reply.seconds)
        return reply

    def _record(self, step: int, request: ModelRequest, response: str | None, error: str | None, usage: Usage,
                seconds: float) -> None:
        if self.recorder is not None and self.run_id:
            self.recorder.call(self.run_id, step, self.provider, request, response, error, usage, seconds)

    async def close(self) -> None:
        await self.provider.close()
