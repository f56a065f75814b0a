"""The real google-genai and openai SDKs against fake endpoints on loopback (real HTTP servers)."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from fake_llm import Answer, FakeEndpoint, gemini_reply, openai_reply
from pallasite.agents.edits import PROPOSAL_SCHEMA
from pallasite.agents.llm.providers import ModelRequest, ProviderConfig, ProviderError, make_provider

pytest.importorskip("google.genai")
pytest.importorskip("openai")

GEMINI_KEY = "AIzaSyFAKE-gemini-key-for-tests-0123456789"
OPENAI_KEY = "sk-fake-openai-key-for-tests-0123456789"
PROPOSAL = json.dumps({"explanation": "use 128 lanes", "edits": [{"search": "100", "replace": "128"}]})


def request(**kw) -> ModelRequest:
    base = dict(system="You fix Pallas kernels.", prompt="Fix this kernel.", schema=PROPOSAL_SCHEMA,
                schema_name="kernel_fix", timeout_s=10.0)
    base.update(kw)
    return ModelRequest(**base)


@pytest.fixture
def endpoint():
    with FakeEndpoint() as server:
        yield server


@pytest.fixture
def keys_env(monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", GEMINI_KEY)
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)


def gemini(endpoint, **kw):
    return make_provider(ProviderConfig(name="gemini", model="gemini-test", base_url=endpoint.url, **kw))


def openai_provider(endpoint, **kw):
    return make_provider(ProviderConfig(name="openai", model="fake-model", base_url=endpoint.url + "/v1", **kw))


# --------------------------------------------------------------------------- gemini


async def test_gemini_request_shape_structured_output_and_usage(endpoint, keys_env):
    endpoint.queue.append(Answer(200, gemini_reply(PROPOSAL, prompt_tokens=120, output_tokens=30, thoughts=7)))
    provider = gemini(endpoint, price_input_per_mtok=1.0, price_output_per_mtok=10.0)
    reply = await provider.complete(request())
    await provider.close()
    assert json.loads(reply.text)["edits"][0]["replace"] == "128"
    (seen,) = endpoint.requests
    assert seen.path.endswith("/models/gemini-test:generateContent")
    assert seen.headers["x-goog-api-key"] == GEMINI_KEY
    body = seen.json
    assert body["contents"][0]["parts"][0]["text"] == "Fix this kernel."
    assert body["systemInstruction"]["parts"][0]["text"] == "You fix Pallas kernels."
    config = body["generationConfig"]
    assert config["responseMimeType"] == "application/json"
    assert config["responseJsonSchema"]["required"] == ["explanation", "edits"]
    assert (reply.usage.input_tokens, reply.usage.output_tokens, reply.usage.thinking_tokens) == (120, 30, 7)
    assert reply.usage.cost_usd == pytest.approx((120 * 1.0 + 37 * 10.0) / 1e6)


async def test_gemini_retries_a_429_then_succeeds(endpoint, keys_env):
    endpoint.queue += [Answer(429, {"error": {"code": 429, "message": "quota", "status": "RESOURCE_EXHAUSTED"}}),
                       Answer(200, gemini_reply(PROPOSAL))]
    provider = gemini(endpoint, retries=2)
    reply = await provider.complete(request())
    assert len(endpoint.requests) == 2 and json.loads(reply.text)["explanation"] == "use 128 lanes"


async def test_gemini_500_after_the_configured_retries_is_a_server_error(endpoint, keys_env):
    endpoint.default = Answer(500, {"error": {"code": 500, "message": "backend exploded", "status": "INTERNAL"}})
    provider = gemini(endpoint, retries=1)
    with pytest.raises(ProviderError) as err:
        await provider.complete(request())
    assert err.value.kind == "server" and err.value.status == 500 and "backend exploded" in str(err.value)
    assert len(endpoint.requests) == 2  # one attempt + one retry, as configured


async def test_gemini_no_retry_when_told_none(endpoint, keys_env):
    endpoint.default = Answer(503, {"error": {"code": 503, "message": "busy"}})
    with pytest.raises(ProviderError, match="HTTP 503"):
        await gemini(endpoint, retries=0).complete(request())
    assert len(endpoint.requests) == 1


@pytest.mark.parametrize("body", ["this is not json", {"candidates": []}])
async def test_gemini_malformed_reply(endpoint, keys_env, body):
    endpoint.queue.append(Answer(200, body))
    with pytest.raises(ProviderError) as err:
        await gemini(endpoint, retries=0).complete(request())
    assert err.value.kind == "malformed"


async def test_gemini_time_limit(endpoint, keys_env):
    endpoint.queue.append(Answer(200, gemini_reply(PROPOSAL), delay_s=5))
    started = time.monotonic()
    with pytest.raises(ProviderError) as err:
        await gemini(endpoint, retries=0).complete(request(timeout_s=0.5))
    assert err.value.kind == "timeout" and time.monotonic() - started < 3


async def test_gemini_cancellation_stops_the_call(endpoint, keys_env):
    endpoint.queue.append(Answer(200, gemini_reply(PROPOSAL), delay_s=5))
    task = asyncio.ensure_future(gemini(endpoint, retries=0).complete(request()))
    await asyncio.sleep(0.3)
    task.cancel()
    started = time.monotonic()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert time.monotonic() - started < 1


async def test_gemini_without_a_key_says_how_to_configure(endpoint, monkeypatch):
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    with pytest.raises(ProviderError, match="GEMINI_API_KEY or GOOGLE_API_KEY") as err:
        gemini(endpoint)
    assert err.value.kind == "config"


async def test_gemini_auth_error_does_not_echo_the_key(endpoint, keys_env):
    endpoint.default = Answer(403, {"error": {"code": 403, "message": f"API key {GEMINI_KEY} is not valid"}})
    with pytest.raises(ProviderError) as err:
        await gemini(endpoint, retries=0).complete(request())
    assert err.value.kind == "auth" and GEMINI_KEY not in str(err.value) and "[REDACTED]" in str(err.value)


# --------------------------------------------------------------------------- openai-compatible


async def test_openai_request_shape_structured_output_and_usage(endpoint, keys_env):
    endpoint.queue.append(Answer(200, openai_reply(PROPOSAL, prompt_tokens=100, completion_tokens=50, reasoning=20)))
    provider = openai_provider(endpoint, price_input_per_mtok=2.0, price_output_per_mtok=8.0)
    reply = await provider.complete(request())
    await provider.close()
    (seen,) = endpoint.requests
    assert seen.path == "/v1/chat/completions"
    assert seen.headers["authorization"] == f"Bearer {OPENAI_KEY}"
    body = seen.json
    assert body["model"] == "fake-model"
    assert body["messages"] == [{"role": "system", "content": "You fix Pallas kernels."},
                                {"role": "user", "content": "Fix this kernel."}]
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["name"] == "kernel_fix"
    assert body["response_format"]["json_schema"]["schema"]["required"] == ["explanation", "edits"]
    assert "temperature" not in body  # the model's default: reasoning models reject any other value
    assert (reply.usage.input_tokens, reply.usage.output_tokens, reply.usage.thinking_tokens) == (100, 30, 20)
    assert reply.usage.cost_usd == pytest.approx((100 * 2.0 + 50 * 8.0) / 1e6)


async def test_openai_local_endpoint_needs_no_key(endpoint, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    endpoint.queue.append(Answer(200, openai_reply(PROPOSAL)))
    reply = await openai_provider(endpoint).complete(request())
    assert reply.text == PROPOSAL and endpoint.requests[0].headers["authorization"] == "Bearer not-needed"


async def test_openai_retries_a_429_then_succeeds(endpoint, keys_env):
    endpoint.queue += [Answer(429, {"error": {"message": "slow down"}}, headers={"retry-after-ms": "10"}),
                       Answer(200, openai_reply(PROPOSAL))]
    reply = await openai_provider(endpoint, retries=2).complete(request())
    assert len(endpoint.requests) == 2 and reply.text == PROPOSAL


async def test_openai_500_after_the_configured_retries_is_a_server_error(endpoint, keys_env):
    endpoint.default = Answer(500, {"error": {"message": "backend exploded"}}, headers={"retry-after-ms": "10"})
    with pytest.raises(ProviderError) as err:
        await openai_provider(endpoint, retries=1).complete(request())
    assert err.value.kind == "server" and "backend exploded" in str(err.value)
    assert len(endpoint.requests) == 2


@pytest.mark.parametrize("body", ["this is not json", {"choices": []}])
async def test_openai_malformed_reply(endpoint, keys_env, body):
    endpoint.queue.append(Answer(200, body))
    with pytest.raises(ProviderError) as err:
        await openai_provider(endpoint, retries=0).complete(request())
    assert err.value.kind == "malformed"


async def test_openai_time_limit(endpoint, keys_env):
    endpoint.queue.append(Answer(200, openai_reply(PROPOSAL), delay_s=5))
    started = time.monotonic()
    with pytest.raises(ProviderError) as err:
        await openai_provider(endpoint, retries=0).complete(request(timeout_s=0.5))
    assert err.value.kind == "timeout" and time.monotonic() - started < 3


def test_unknown_or_missing_provider_names_are_config_errors():
    with pytest.raises(ProviderError, match="no LLM provider is configured.*agent.provider"):
        make_provider(ProviderConfig())
    with pytest.raises(ProviderError, match="unknown provider 'claude'"):
        make_provider(ProviderConfig(name="claude"))
