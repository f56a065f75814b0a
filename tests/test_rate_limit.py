"""Model calls at scale (agents/llm/rate_limit.py, agents/llm/model_client.py): the run-wide limiter's window
on a fake clock, and rate-limit retries against a fake endpoint (a real HTTP server on loopback,
tests/fake_llm.py) that answers 429 with Retry-After: the wait is what the endpoint asked, it is
shown, a retried 429 is not recorded as the call's outcome, and the token budget still holds."""

from __future__ import annotations

import asyncio

import pytest

from fake_llm import Answer, FakeEndpoint, openai_reply
from pallasite.agents.llm.model_client import BudgetSpent, ModelClient, TokenBudget
from pallasite.agents.llm.providers import ModelRequest, ProviderConfig, ProviderError, make_provider
from pallasite.agents.llm.rate_limit import RateLimiter, RetryPolicy, shared_limiter

pytest.importorskip("openai")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_requests_per_minute_wait_for_the_oldest_to_leave_the_window():
    clock = Clock()
    limiter = RateLimiter(requests_per_minute=2, clock=clock, sleep=clock.sleep)

    async def go():
        waits = []
        for gap in (0, 10, 5, 0):
            clock.now += gap
            waits.append((await limiter.acquire())[1])
        return waits

    assert asyncio.run(go()) == [0, 0, pytest.approx(45.0), pytest.approx(10.0)]  # 60 s after the 1st, then the 2nd


def test_tokens_per_minute_count_the_replies_real_tokens():
    clock = Clock()
    limiter = RateLimiter(tokens_per_minute=1000, clock=clock, sleep=clock.sleep)

    async def go():
        first, _ = await limiter.acquire(100)
        limiter.settle(first, 900)  # the reply spent more than estimated
        clock.now += 20
        _, waited = await limiter.acquire(200)  # 900 + 200 > 1000: waits until the first leaves the window
        return waited

    assert asyncio.run(go()) == pytest.approx(40.0)


def test_a_limit_from_the_provider_config_is_shared_by_every_client_of_the_endpoint():
    config = ProviderConfig(name="openai", model="m", base_url="http://127.0.0.1:1/v1", requests_per_minute=30)

    class P:
        def __init__(self):
            self.config = config

    class Wrapper:  # eval's Metered: a provider around the provider
        def __init__(self, inner):
            self.provider = inner

    a, b = ModelClient(P()), ModelClient(Wrapper(P()))
    assert a.limiter is b.limiter and a.limiter.rpm == 30
    outer = ModelClient(a)  # a client around a client: the inner one limits and retries, once
    assert outer.limiter is None and outer.retry.retries == 0
    assert shared_limiter(ProviderConfig(name="openai")) is None and ModelClient(object()).limiter is None


def request() -> ModelRequest:
    return ModelRequest(system="You write Pallas kernels.", prompt="Make it faster.", timeout_s=10.0)


class Recorder:
    def __init__(self) -> None:
        self.calls = []

    def call(self, run_id, step, provider, request, response, error, usage, seconds):
        self.calls.append((response, error))


@pytest.fixture
def endpoint(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake-openai-key-for-tests-0123456789")
    with FakeEndpoint() as server:
        yield server


def client_for(endpoint, clock, shown, **kw):
    provider = make_provider(ProviderConfig(name="openai", model="fake-model", base_url=endpoint.url + "/v1",
                                            retries=0))  # the SDK's own retries off: the client's are tested
    return ModelClient(provider, run_id="r", recorder=kw.pop("recorder", None),
                       retry=RetryPolicy(retries=3, on_wait=shown.append, sleep=clock.sleep), **kw)


def test_a_429_waits_what_retry_after_asks_says_so_and_then_succeeds(endpoint):
    endpoint.queue += [Answer(429, {"error": {"message": "slow down"}}, headers={"retry-after": "7"}),
                       Answer(429, {"error": {"message": "slow down"}}, headers={"retry-after": "3"}),
                       Answer(200, openai_reply("ok", 10, 5))]
    clock, shown, recorder = Clock(), [], Recorder()
    client = client_for(endpoint, clock, shown, recorder=recorder)

    async def go():
        try:
            return await client.complete(request())
        finally:
            await client.close()

    reply = asyncio.run(go())
    assert reply.text == "ok" and len(endpoint.requests) == 3
    assert clock.slept == [7.0, 3.0] and client.rate_waits_s == 10.0
    assert "rate limited (HTTP 429, retry after 7 s): waiting 7 s (as Retry-After asks), retry 1 of 3" == shown[0]
    assert recorder.calls == [("ok", None)]  # the retried 429s are not the call's recorded outcome


def test_rate_limited_past_the_retries_is_an_error_and_a_budget_spent_stops_retrying(endpoint):
    endpoint.default = Answer(429, {"error": {"message": "quota"}}, headers={"retry-after": "1"})
    clock, shown = Clock(), []
    client = client_for(endpoint, clock, shown)

    async def go():
        with pytest.raises(ProviderError) as err:
            await client.complete(request())
        return err.value

    err = asyncio.run(go())
    assert err.kind == "rate_limit" and len(endpoint.requests) == 4 and len(shown) == 3

    budget = TokenBudget(limit=100)
    endpoint.requests.clear()

    class SpendWhileWaiting:
        async def sleep(self, seconds):
            budget.used = 100  # another client of the run spent the rest meanwhile

    client = ModelClient(client.provider, budget=budget,
                         retry=RetryPolicy(retries=3, on_wait=shown.append, sleep=SpendWhileWaiting().sleep))
    with pytest.raises(BudgetSpent):
        asyncio.run(client.complete(request()))
    assert len(endpoint.requests) == 1  # no retry once the budget is spent
