"""The ``gemini`` provider: Google's google-genai SDK (Gemini API key, or Vertex AI).

Key: ``GEMINI_API_KEY`` or ``GOOGLE_API_KEY`` (or the variable named by ``agent.apiKeyEnv``);
with ``agent.vertexProject`` set it uses Vertex AI and the machine's application default
credentials instead. ``agent.baseUrl`` overrides the endpoint (tests point it at a loopback server).

Structured output: ``response_json_schema`` with ``response_mime_type="application/json"``; a reply in
a ```json fence, or not JSON at all, is returned for the agent's parser to judge (providers.structured).
Retries: ``HttpOptions(retry_options=HttpRetryOptions(...))`` set explicitly (the SDK's default has
changed between releases), on 408/429/5xx. Usage: prompt, candidates and thoughts token counts.
"""

from __future__ import annotations

import time
from typing import Any

from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from . import keys
from .providers import DEFAULT_MODELS, RETRY_STATUSES, ModelReply, ModelRequest, ProviderConfig, ProviderError, Usage, reply, status_error, structured, with_time_limit


class GeminiProvider:
    name = "gemini"

    def __init__(self, config: ProviderConfig) -> None:
        self.config = config
        self.model = config.model or DEFAULT_MODELS["gemini"]
        retry = types.HttpRetryOptions(attempts=1 + max(0, config.retries), initial_delay=0.5, max_delay=8.0,
                                       exp_base=2.0, http_status_codes=list(RETRY_STATUSES))
        http = types.HttpOptions(retry_options=retry, timeout=int(config.timeout_s * 1000),
                                 **({"base_url": config.base_url} if config.base_url else {}))
        if config.vertex_project:
            self._client = genai.Client(vertexai=True, project=config.vertex_project,
                                        location=config.vertex_location, http_options=http)
        else:
            key = keys.api_key("gemini", config.api_key_env)
            if key is None:
                names = " or ".join(keys.key_variables("gemini", config.api_key_env))
                raise ProviderError("config", f"the gemini provider needs an API key: set {names} in the "
                                              "environment pallasite runs in, or agent.vertexProject for Vertex AI")
            self._client = genai.Client(api_key=key, http_options=http)

    async def complete(self, request: ModelRequest) -> ModelReply:
        started = time.monotonic()
        config: dict[str, Any] = {
            "system_instruction": request.system,
            "max_output_tokens": request.max_output_tokens,
        }
        if request.temperature is not None:
            config["temperature"] = request.temperature
        if request.schema is not None:
            config.update(response_mime_type="application/json", response_json_schema=request.schema)
        call = self._client.aio.models.generate_content(
            model=self.model, contents=request.prompt, config=types.GenerateContentConfig(**config))
        try:
            response = await with_time_limit(call, request.timeout_s, f"gemini ({self.model})")
        except ProviderError:
            raise
        except genai_errors.APIError as err:
            raise _api_error(err, self.model) from None
        except Exception as err:  # transport and parse failures of the SDK
            raise _other_error(err, self.model) from None
        text = _text(response)
        if text is None:
            finish = _finish_reason(response)
            raise ProviderError("malformed", f"gemini ({self.model}) returned no text"
                                             + (f" (finish reason {finish})" if finish else ""))
        text = structured(text, request)  # JSON as asked, or what the model wrote: the agent's parser judges it
        meta = response.usage_metadata
        usage_in = int(getattr(meta, "prompt_token_count", 0) or 0)
        usage_out = int(getattr(meta, "candidates_token_count", 0) or 0)
        thinking = int(getattr(meta, "thoughts_token_count", 0) or 0)
        usage = Usage(usage_in, usage_out, thinking, 1, self.config.cost(usage_in, usage_out + thinking))
        return reply(text, usage, self.name, self.model, started)

    async def close(self) -> None:
        try:
            await self._client.aio.aclose()
        except Exception:  # closing is best effort
            pass


def _text(response: Any) -> str | None:
    try:
        candidates = response.candidates or []
        parts = candidates[0].content.parts if candidates and candidates[0].content else None
    except (AttributeError, IndexError):
        return None
    if not parts:
        return None
    texts = [p.text for p in parts if getattr(p, "text", None) and not getattr(p, "thought", False)]
    return "".join(texts) if texts else None


def _finish_reason(response: Any) -> str | None:
    try:
        reason = response.candidates[0].finish_reason
    except (AttributeError, IndexError, TypeError):
        return None
    return getattr(reason, "value", None) or (str(reason) if reason else None)


def _api_error(err: Any, model: str) -> ProviderError:
    code = getattr(err, "code", None)
    detail = getattr(err, "message", None) or str(err)
    return status_error(code, f"gemini ({model}): HTTP {code}: {str(detail)[:500]}",
                        headers=getattr(getattr(err, "response", None), "headers", None),
                        auth_hint="check the API key or the Vertex AI credentials")


def _other_error(err: Exception, model: str) -> ProviderError:
    name = type(err).__name__
    if "Timeout" in name:
        return ProviderError("timeout", f"gemini ({model}): the request timed out ({name})")
    if "Connect" in name or "Network" in name or isinstance(err, OSError):
        return ProviderError("network", f"gemini ({model}): cannot reach the endpoint ({name}: {err})")
    return ProviderError("malformed", f"gemini ({model}): could not read the reply ({name}: {err})")
