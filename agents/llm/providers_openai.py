"""The ``openai`` provider: the openai SDK, for any OpenAI-compatible chat-completions endpoint.

``agent.baseUrl`` names the endpoint (vLLM ``http://127.0.0.1:8000/v1``, Ollama
``http://127.0.0.1:11434/v1``, llama.cpp's server, Gemini's
``https://generativelanguage.googleapis.com/v1beta/openai/``); empty means OpenAI itself. The key
comes from ``OPENAI_API_KEY`` (or the variable named by ``agent.apiKeyEnv``); a local endpoint
without one gets a placeholder, since the SDK insists on some key.

Structured output: ``response_format={"type": "json_schema", ...}``; a reply in a ```json fence, or
not JSON at all, is returned for the agent's parser to judge (providers.structured). Retries: the client's
``max_retries`` set explicitly. Usage: prompt and completion tokens, reasoning tokens reported
apart when the endpoint gives them.
"""

from __future__ import annotations

import time

import openai

from . import keys
from .providers import DEFAULT_MODELS, ModelReply, ModelRequest, ProviderConfig, ProviderError, Usage, reply, status_error, structured, with_time_limit

LOCAL_PLACEHOLDER_KEY = "not-needed"


class OpenAIProvider:
    name = "openai"

    def __init__(self, config: ProviderConfig) -> None:
        self.config = config
        self.model = config.model or DEFAULT_MODELS["openai"]
        key = keys.api_key("openai", config.api_key_env)
        if key is None and not config.base_url:
            names = " or ".join(keys.key_variables("openai", config.api_key_env))
            raise ProviderError("config", f"the openai provider needs {names} in the environment, or "
                                          "agent.baseUrl naming an OpenAI-compatible endpoint that needs no key")
        self.endpoint = config.base_url or "https://api.openai.com/v1"
        self._client = openai.AsyncOpenAI(api_key=key or LOCAL_PLACEHOLDER_KEY,
                                          base_url=config.base_url or None,
                                          max_retries=max(0, config.retries), timeout=config.timeout_s)

    async def complete(self, request: ModelRequest) -> ModelReply:
        started = time.monotonic()
        kwargs: dict = {}
        if request.temperature is not None:
            kwargs["temperature"] = request.temperature
        if request.schema is not None:
            kwargs["response_format"] = {"type": "json_schema", "json_schema": {
                "name": request.schema_name, "schema": request.schema, "strict": False}}
        call = self._client.chat.completions.create(
            model=self.model,
            messages=[{"role": "system", "content": request.system}, {"role": "user", "content": request.prompt}],
            max_completion_tokens=request.max_output_tokens,
            timeout=request.timeout_s,
            **kwargs,
        )
        where = f"openai ({self.model} at {self.endpoint})"
        try:
            completion = await with_time_limit(call, request.timeout_s, where)
        except ProviderError:
            raise
        except openai.APITimeoutError:
            raise ProviderError("timeout", f"{where}: the request timed out after the configured retries") from None
        except openai.APIConnectionError as err:
            raise ProviderError("network", f"{where}: cannot reach the endpoint ({err})") from None
        except openai.APIStatusError as err:
            raise _status_error(err, where) from None
        except (openai.OpenAIError, ValueError, TypeError, KeyError) as err:  # JSONDecodeError is a ValueError
            raise ProviderError("malformed", f"{where}: could not read the reply ({type(err).__name__}: {err})") from None
        try:
            choice = completion.choices[0]
            text = choice.message.content
        except (AttributeError, IndexError, TypeError):
            text = None
        if not isinstance(text, str) or not text:
            raise ProviderError("malformed", f"{where}: the reply has no message content")
        text = structured(text, request)  # JSON as asked, or what the model wrote: the agent's parser judges it
        usage = completion.usage
        prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
        completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
        details = getattr(usage, "completion_tokens_details", None)
        reasoning = int(getattr(details, "reasoning_tokens", 0) or 0)
        out = max(0, completion_tokens - reasoning)
        return reply(text, Usage(prompt_tokens, out, reasoning, 1, self.config.cost(prompt_tokens, completion_tokens)),
                     self.name, self.model, started)

    async def close(self) -> None:
        try:
            await self._client.close()
        except Exception:  # closing is best effort
            pass


def _status_error(err: "openai.APIStatusError", where: str) -> ProviderError:
    code = err.status_code
    try:
        detail = err.body.get("error", {}).get("message") if isinstance(err.body, dict) else None
    except AttributeError:
        detail = None
    return status_error(code, f"{where}: HTTP {code}: {str(detail or err.message)[:500]}",
                        headers=getattr(getattr(err, "response", None), "headers", None))
