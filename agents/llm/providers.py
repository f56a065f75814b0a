"""LLM providers behind one small interface, chosen by a short name.

    provider = make_provider(ProviderConfig(name="gemini", model="gemini-2.5-pro"))
    reply = await provider.complete(ModelRequest(system="...", prompt="...", schema={...}))
    reply.text, reply.usage.input_tokens, reply.usage.cost_usd
    await provider.close()

Names: ``gemini`` (google-genai SDK: Gemini API key or Vertex AI), ``openai`` (the openai SDK, for
any OpenAI-compatible endpoint: OpenAI, vLLM, Ollama, llama.cpp's server, Gemini's own
OpenAI-compatible endpoint), ``scripted`` (queued responses from a JSON file or a list: tests and
demos) and ``replay:<run-id>`` (the responses recorded in the results store for that fix run).
Each implementation lives in its own module, imported only when chosen, so the SDKs are optional
(pallasite's ``agents`` extra: ``pip install -e '.[agents]'`` in the checkout).

Failures are ``ProviderError`` with a ``kind`` a caller can act on (config, auth, rate_limit,
server, timeout, malformed, network, refused, too_large), the HTTP status and ``Retry-After`` when
the endpoint sent them, and a message that never contains an API key (see keys.py); ``describe()``
says it in words ("rate limited (HTTP 429, retry after 30 s)"). Retries use each SDK's own
mechanism, set explicitly (``ProviderConfig.retries``); one call's time limit is
``ModelRequest.timeout_s``; cancelling the awaiting task cancels the HTTP request.

Every reply leaves a provider through ``reply()``, the one boundary: a reply over ``MAX_REPLY_CHARS``
(1 MB) is refused there (``too_large``), before any agent parses it or runs tier 0 on it, and the
text is redacted there (keys.redact), so no key a model echoes reaches the terminal, a written file,
a report, the store or the editor. A structured request's reply is returned as the model wrote it,
a JSON object in a fenced ```json block unwrapped (``structured``): the agents' parsers decide what
they accept and feed a format error back to the model as a round.
"""

from __future__ import annotations

import asyncio
import importlib
import re
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from . import keys

# short name -> (module, class); "replay:<run-id>" is matched by its prefix.
PROVIDERS: dict[str, tuple[str, str]] = {
    "gemini": ("pallasite.agents.llm.providers_gemini", "GeminiProvider"),
    "openai": ("pallasite.agents.llm.providers_openai", "OpenAIProvider"),
    "scripted": ("pallasite.agents.llm.providers_scripted", "ScriptedProvider"),
    "replay": ("pallasite.agents.llm.providers_scripted", "ReplayProvider"),
}
DEFAULT_MODELS = {"gemini": "gemini-2.5-pro", "openai": "gpt-4.1"}
# The HTTP statuses worth retrying (set explicitly for both SDKs rather than trusting defaults).
RETRY_STATUSES = (408, 429, 500, 502, 503, 504)

ERROR_KINDS = ("config", "auth", "rate_limit", "server", "timeout", "malformed", "network", "refused", "too_large")
# How each kind reads in a message (text output and JSON carry the kind as well).
KIND_WORDS = {"config": "not configured", "auth": "unauthorized", "rate_limit": "rate limited", "server": "server error",
              "timeout": "timed out", "malformed": "malformed reply", "network": "endpoint unreachable",
              "refused": "refused", "too_large": "reply too large"}
# A reply above this many characters is refused at the provider boundary (a kernel file is far smaller).
MAX_REPLY_CHARS = 1_000_000

HOW_TO_CONFIGURE = (
    "Set the 'agent.provider' setting in your editor's pallasite settings to 'gemini' (with "
    "GEMINI_API_KEY or GOOGLE_API_KEY in the environment, or agent.vertexProject for Vertex AI) or "
    "'openai' (with agent.baseUrl for a local or compatible endpoint and OPENAI_API_KEY when it needs "
    "one); on the command line, `pallasite fix --provider NAME`. A project's pyproject.toml cannot "
    "choose the provider."
)


def command_line_how(command: str) -> str:
    """How to name a model on the command line (``pallasite <command>``): the providers, their keys, and the
    scripted provider that needs neither (the editor's words are ``HOW_TO_CONFIGURE``)."""
    return (f"give `pallasite {command}` a --provider: gemini (GEMINI_API_KEY or GOOGLE_API_KEY in the environment), "
            "openai (--base-url for a local or compatible endpoint; OPENAI_API_KEY when it needs one), or scripted "
            "with --scripted-file FILE, a JSON list of the model's replies that needs no model and no key "
            f"(docs/agents.md shows each agent's reply): `pallasite {command} FILE --provider scripted "
            "--scripted-file replies.json`. A project's pyproject.toml cannot choose the provider.")


@dataclass(frozen=True)
class ModelRequest:
    """One call: a system instruction, a prompt, and (optionally) the JSON Schema of the reply."""

    system: str
    prompt: str
    schema: dict[str, Any] | None = None
    schema_name: str = "reply"
    max_output_tokens: int = 8192
    timeout_s: float = 120.0
    temperature: float | None = None  # None: the model's default (reasoning models reject any other)


@dataclass(frozen=True)
class Usage:
    """Tokens of one call (or a sum); ``cost_usd`` None when no price is configured."""

    input_tokens: int = 0
    output_tokens: int = 0
    thinking_tokens: int = 0
    calls: int = 0
    cost_usd: float | None = None

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens + self.thinking_tokens

    def __add__(self, other: "Usage") -> "Usage":
        cost = None
        if self.cost_usd is not None or other.cost_usd is not None:
            cost = (self.cost_usd or 0.0) + (other.cost_usd or 0.0)
        return Usage(self.input_tokens + other.input_tokens, self.output_tokens + other.output_tokens,
                     self.thinking_tokens + other.thinking_tokens, self.calls + other.calls, cost)

    def describe(self) -> str:
        cost = f"${self.cost_usd:.4f}" if self.cost_usd is not None else "cost unknown (no price configured)"
        return (f"{self.calls} call(s), {self.input_tokens} input + {self.output_tokens} output + "
                f"{self.thinking_tokens} thinking tokens, {cost}")


@dataclass(frozen=True)
class ModelReply:
    text: str
    usage: Usage
    provider: str
    model: str
    seconds: float = 0.0


class ProviderError(Exception):
    """A call (or a provider's set-up) failed; ``kind`` is one of ERROR_KINDS."""

    def __init__(self, kind: str, message: str, *, status: int | None = None,
                 retry_after_s: float | None = None) -> None:
        super().__init__(keys.redact(message))
        self.kind = kind
        self.status = status
        self.retry_after_s = retry_after_s  # the endpoint's Retry-After, when it sent one

    @property
    def message(self) -> str:
        return str(self)

    def describe(self) -> str:
        """The kind in words, with the status and Retry-After: ``rate limited (HTTP 429, retry after 30 s)``."""
        extra = [f"HTTP {self.status}"] if self.status else []
        if self.retry_after_s is not None:
            extra.append(f"retry after {self.retry_after_s:g} s")
        return KIND_WORDS.get(self.kind, self.kind) + (f" ({', '.join(extra)})" if extra else "")

    def as_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "status": self.status, "retry_after_s": self.retry_after_s, "message": self.message}


def retry_after(headers: Any) -> float | None:
    """Seconds from a ``Retry-After`` header (seconds, or an HTTP date), or None."""
    try:
        value = headers.get("retry-after") if headers is not None else None
    except Exception:  # noqa: BLE001 - headers of an unknown shape
        return None
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        from email.utils import parsedate_to_datetime

        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def status_error(code: int | None, text: str, *, headers: Any = None, auth_hint: str = "check the API key") -> ProviderError:
    """The ProviderError for an HTTP status (both SDKs' status errors come here)."""
    wait = retry_after(headers)
    if code in (401, 403):
        return ProviderError("auth", f"{text} ({auth_hint})", status=code)
    if code == 429:
        return ProviderError("rate_limit", text + " (rate limited after the configured retries)", status=code,
                             retry_after_s=wait)
    if code == 408:
        return ProviderError("timeout", text, status=code)
    if isinstance(code, int) and code >= 500:
        return ProviderError("server", text + " (the endpoint failed after the configured retries)", status=code,
                             retry_after_s=wait)
    return ProviderError("refused", text, status=code)


@dataclass(frozen=True)
class ProviderConfig:
    """How to reach a provider (from the ``agent`` settings or the command line)."""

    name: str = ""  # "", gemini, openai, scripted, replay:<run-id>
    model: str = ""  # empty: the provider's default (DEFAULT_MODELS)
    base_url: str = ""  # an OpenAI-compatible endpoint, or a Gemini API endpoint override
    api_key_env: str = ""  # the environment variable holding the key (empty: the provider's usual ones)
    vertex_project: str = ""  # gemini via Vertex AI (application default credentials)
    vertex_location: str = "us-central1"
    retries: int = 2  # retries after the first attempt, for 408/429/5xx and connection errors
    requests_per_minute: float = 0.0  # the run-wide limiter's limits (agents/llm/rate_limit.py); 0: none
    tokens_per_minute: float = 0.0
    timeout_s: float = 120.0
    price_input_per_mtok: float = 0.0  # USD per million input tokens; 0: unknown
    price_output_per_mtok: float = 0.0  # USD per million output (and thinking) tokens; 0: unknown
    scripted: tuple[str, ...] = ()  # the scripted provider's queued responses
    scripted_file: str = ""  # ... or a JSON file holding a list of them
    store_path: str = ""  # replay: the results store to read the run from
    extra: tuple[tuple[str, Any], ...] = field(default=())

    @property
    def kind(self) -> str:
        return self.name.split(":", 1)[0]

    def label(self) -> str:
        """What the editor shows: ``gemini``, ``openai: llama3 @ http://127.0.0.1:8080/v1``."""
        if self.kind in ("scripted", "replay"):
            return self.name
        return f"{self.name}: {self.model or DEFAULT_MODELS.get(self.kind, '?')}"

    def cost(self, input_tokens: int, output_tokens: int) -> float | None:
        if not (self.price_input_per_mtok or self.price_output_per_mtok):
            return None
        return (input_tokens * self.price_input_per_mtok + output_tokens * self.price_output_per_mtok) / 1e6


class Provider(Protocol):
    """What the agents need from a model."""

    name: str
    model: str

    async def complete(self, request: ModelRequest) -> ModelReply: ...

    async def close(self) -> None: ...


def make_provider(config: ProviderConfig) -> Provider:
    """The provider named by ``config.name`` (its module imported now), or ProviderError("config")."""
    if not config.name:
        raise ProviderError("config", "no LLM provider is configured. " + HOW_TO_CONFIGURE)
    kind = config.kind
    if kind not in PROVIDERS or (kind == "replay") != (":" in config.name):
        names = ", ".join(n for n in PROVIDERS if n != "replay")
        raise ProviderError("config", f"unknown provider {config.name!r}: choose one of {names}, "
                                      "or replay:<run-id> to replay a recorded fix run")
    module_name, class_name = PROVIDERS[kind]
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise ProviderError("config", f"the {kind} provider needs its SDK ({err.name or err}): "
                                      "pip install 'google-genai>=3.6,<4' 'openai>=3.57,<4' (pallasite's "
                                      "agents extra)") from None
    return getattr(module, class_name)(config)


async def with_time_limit(coro: Any, timeout_s: float, what: str) -> Any:
    """Await ``coro`` for at most ``timeout_s`` seconds (cancelling it after), as ProviderError("timeout")."""
    try:
        return await asyncio.wait_for(coro, timeout_s)
    except asyncio.TimeoutError:
        raise ProviderError("timeout", f"{what}: no reply within {timeout_s:g} s (agent.requestTimeoutS)") from None


def reply(text: str, usage: Usage, provider: str, model: str, started: float) -> ModelReply:
    """The one boundary every reply crosses (see the module docstring): refused above MAX_REPLY_CHARS,
    redacted, timed."""
    if len(text) > MAX_REPLY_CHARS:
        raise ProviderError("too_large", f"{provider} ({model}): the reply has {len(text):,} characters, more than "
                                         f"the {MAX_REPLY_CHARS:,} accepted; it was refused unread")
    return ModelReply(text=keys.redact(text), usage=usage, provider=provider, model=model,
                      seconds=time.monotonic() - started)


_FENCED = re.compile(r"^\s*```(?:json|JSON)?[ \t]*\n(?P<body>.*?)\n?```\s*$", re.S)


def structured(text: str, request: ModelRequest) -> str:
    """A structured request's reply: a JSON object in a lone ```json fence unwrapped; anything else as
    the model wrote it (the agent's parser accepts or refuses it and tells the model why)."""
    if request.schema is None:
        return text
    m = _FENCED.match(text)
    return m.group("body") if m else text
