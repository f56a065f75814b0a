"""Model calls at scale: a run-wide limiter (requests and tokens per minute) and rate-limit retries.

- ``RateLimiter(requests_per_minute, tokens_per_minute)``: a sliding 60-second window shared by
  every model client of the process that calls the same endpoint (``shared_limiter(config)``: one
  per provider, model and base URL whose ``ProviderConfig`` sets a limit; an eval's thousands of
  calls over many tasks and methods all pass through it). ``acquire(tokens)`` waits until one more
  request of about ``tokens`` fits both limits and returns the seconds it waited; ``settle`` puts the
  reply's real token count in place of the estimate.
- ``RetryPolicy``: what a model client does with a ``rate_limit`` error (HTTP 429 after the SDK's own
  retries): wait what the endpoint's ``Retry-After`` asks (else a doubling back-off), at most
  ``max_wait_s``, and try again up to ``retries`` times; every wait is told to ``on_wait`` in words
  (``rate limited (HTTP 429, retry after 2 s): waiting 2 s, retry 1 of 3``), and the token budget is
  checked again before each retry (agents/llm/model_client.py), so budgets still hold.

``clock``/``sleep`` are injectable so tests need not wait a minute.
"""

from __future__ import annotations

import asyncio
import collections
import sys
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

WINDOW_S = 60.0


class RateLimiter:
    """Requests and tokens per minute over a sliding window (0: no limit of that kind)."""

    def __init__(self, requests_per_minute: float = 0.0, tokens_per_minute: float = 0.0, *,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep) -> None:
        self.rpm, self.tpm = float(requests_per_minute or 0), float(tokens_per_minute or 0)
        self.clock, self.sleep = clock, sleep
        self._sent: collections.deque[list[float]] = collections.deque()  # [time, tokens] per request
        self._lock: asyncio.Lock | None = None
        self.waited_s = 0.0
        self.requests = 0

    def _trim(self, now: float) -> None:
        while self._sent and self._sent[0][0] <= now - WINDOW_S:
            self._sent.popleft()

    def _wait_for(self, now: float, tokens: float) -> float:
        """Seconds until one more request of ``tokens`` fits (0: now)."""
        self._trim(now)
        waits = [0.0]
        if self.rpm and len(self._sent) >= self.rpm:
            waits.append(self._sent[len(self._sent) - int(self.rpm)][0] + WINDOW_S - now)
        if self.tpm:
            used = sum(t for _, t in self._sent)
            tokens = min(tokens, self.tpm)  # a request bigger than the whole limit waits for an empty window
            if used + tokens > self.tpm:
                freed = used
                for sent_at, sent_tokens in self._sent:  # the oldest go first
                    freed -= sent_tokens
                    if freed + tokens <= self.tpm:
                        waits.append(sent_at + WINDOW_S - now)
                        break
        return max(waits)

    async def acquire(self, tokens: float = 0.0) -> tuple[list[float], float]:
        """Wait until a request of about ``tokens`` fits; returns (its entry for ``settle``, seconds waited)."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        waited = 0.0
        async with self._lock:  # first come, first served
            while True:
                now = self.clock()
                wait = self._wait_for(now, tokens)
                if wait <= 0:
                    entry = [now, float(tokens)]
                    self._sent.append(entry)
                    self.requests += 1
                    self.waited_s += waited
                    return entry, waited
                await self.sleep(wait)
                waited += wait

    @staticmethod
    def settle(entry: list[float], tokens: float) -> None:
        """The request's real token count (its reply's usage) in place of the estimate."""
        entry[1] = float(tokens)


_SHARED: dict[tuple, RateLimiter] = {}


def shared_limiter(config: Any) -> RateLimiter | None:
    """The process's limiter for this provider config's endpoint, or None when it sets no limit."""
    rpm = float(getattr(config, "requests_per_minute", 0) or 0)
    tpm = float(getattr(config, "tokens_per_minute", 0) or 0)
    if not (rpm or tpm):
        return None
    key = (getattr(config, "kind", ""), getattr(config, "model", ""), getattr(config, "base_url", ""), rpm, tpm)
    found = _SHARED.get(key)
    if found is None:
        found = _SHARED[key] = RateLimiter(rpm, tpm)
    return found


def config_of(provider: Any) -> Any:
    """The ``ProviderConfig`` under a provider and its wrappers (``.provider`` chains, e.g. eval's
    ``Metered``); None under a model client, which limits its own calls (no limit is applied twice)."""
    layer = provider
    for _ in range(6):
        if layer is None or hasattr(layer, "limiter"):
            return None
        if getattr(layer, "config", None) is not None:
            return layer.config
        layer = getattr(layer, "provider", None)
    return None


def estimate_tokens(request: Any) -> int:
    """About how many tokens a request spends: 4 characters a token in, and up to 1000 out (the
    reply's real count replaces the estimate: ``settle``)."""
    chars = len(getattr(request, "system", "") or "") + len(getattr(request, "prompt", "") or "")
    return chars // 4 + min(int(getattr(request, "max_output_tokens", 0) or 0), 1000)


def _stderr(line: str) -> None:
    print(f"pallasite: {line}", file=sys.stderr, flush=True)


@dataclass
class RetryPolicy:
    """Retries of rate-limited calls (see the module docstring)."""

    retries: int = 3
    first_wait_s: float = 2.0
    max_wait_s: float = 120.0
    on_wait: Callable[[str], Any] = _stderr
    sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep

    def wait_for(self, error: Any, attempt: int) -> float:
        """Seconds to wait before retry ``attempt`` (1-based): Retry-After when sent, else doubling."""
        asked = getattr(error, "retry_after_s", None)
        wait = float(asked) if asked is not None else self.first_wait_s * 2 ** (attempt - 1)
        return max(0.0, min(wait, self.max_wait_s))

    async def wait(self, error: Any, attempt: int) -> float:
        seconds = self.wait_for(error, attempt)
        why = error.describe() if hasattr(error, "describe") else str(error)
        source = "as Retry-After asks" if getattr(error, "retry_after_s", None) is not None else "backing off"
        try:
            self.on_wait(f"{why}: waiting {seconds:g} s ({source}), retry {attempt} of {self.retries}")
        except Exception:  # noqa: BLE001 - a broken progress sink never breaks a call
            pass
        await self.sleep(seconds)
        return seconds
