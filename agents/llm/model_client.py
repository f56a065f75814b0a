"""The one way an agent calls a model: provider + recorder + token budget + redaction.

    client = ModelClient(provider, run_id=state.run_id, recorder=recorder, budget=budget)
    with at_step(it.index):
        reply = await client.complete(request)

Every call goes through ``complete``: the budget is checked first (``BudgetSpent`` when spent), the
provider is asked, and the call (request, reply or error, usage, seconds; the recorder redacts) is
recorded under the run id at the *current step* (``at_step``: a context variable the loops set, so
a fixer round inside an optimize iteration records at that iteration, and a search node at its
own). The replay provider (``replay:<run-id>``) reads the calls back in (step, order): a run whose
every call went through a client replays to the same table. Calls wait for the run-wide rate
limiter and retry rate-limited replies as ``Retry-After`` asks, saying so (agents/llm/rate_limit.py).
The client is itself a provider
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
from .rate_limit import RateLimiter, RetryPolicy, config_of, estimate_tokens, shared_limiter

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
                 budget: TokenBudget | None = None, limiter: RateLimiter | None = None,
                 retry: RetryPolicy | None = None) -> None:
        """``limiter``: the run-wide requests/tokens-per-minute limiter (default: the process's one for
        the provider's endpoint when its config sets a limit, agents/llm/rate_limit.shared_limiter);
        ``retry``: what a rate-limited call does (wait Retry-After and retry, the wait shown)."""
        self.provider, self.run_id, self.recorder, self.budget = provider, run_id, recorder, budget
        self.limiter = limiter if limiter is not None else shared_limiter(config_of(provider))
        # a client around another client leaves the retries to the inner one (none are multiplied); else
        # as many as the provider's settings allow (agent.retries: 0 means a rate limit is final)
        configured = getattr(config_of(provider), "retries", None)
        self.retry = retry or RetryPolicy(retries=0 if hasattr(provider, "limiter")
                                          else 3 if configured is None else max(0, int(configured)))
        self.usage = Usage()
        self.calls = 0
        self.rate_waits_s = 0.0  # seconds spent waiting for the limiter and for rate-limit retries

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
        step = current_step()
        attempt = 0
        while True:
            if self.budget is not None and self.budget.spent():  # checked before every try, retries too
                raise BudgetSpent(self.budget.used, self.budget.limit)
            entry = None
            if self.limiter is not None:
                entry, waited = await self.limiter.acquire(estimate_tokens(request))
                self.rate_waits_s += waited
            started = time.monotonic()
            try:
                reply = await self.provider.complete(request)
            except ProviderError as err:
                if entry is not None:
                    RateLimiter.settle(entry, 0)
                if err.kind != "rate_limit" or attempt >= self.retry.retries:
                    self._record(step, request, None, str(err), Usage(), time.monotonic() - started)
                    raise
                attempt += 1  # a retried rate limit is not recorded: a replay sees the call's outcome only
                self.rate_waits_s += await self.retry.wait(err, attempt)
                continue
            if entry is not None:
                RateLimiter.settle(entry, reply.usage.total_tokens)
            break
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
