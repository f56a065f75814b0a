"""API keys: read through one function, and scrubbed from every text pallasite keeps or shows.

    api_key("gemini")             # GEMINI_API_KEY, else GOOGLE_API_KEY, else None
    api_key("openai", "MY_KEY")   # the named variable
    redact("... AIza... ...")      # every known secret replaced by "[REDACTED]"

Keys come only from the environment pallasite started with, read when a provider is made (never
from settings files, never stored): through ``engine.secrets``, which holds them in memory once
``pallasite serve``/``check`` re-executed itself without them (so kernel code cannot read them). ``redact`` is applied to prompts before they are sent, to responses and
prompts before they are recorded, and to every error message, so a key echoed back by an
endpoint or pasted into a kernel file does not reach logs, the results store or the editor.
"""

from __future__ import annotations

import os
import re

from ...engine.workers import secrets as held

KEY_VARIABLES: dict[str, tuple[str, ...]] = {
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
    "openai": ("OPENAI_API_KEY",),
}
REDACTED = "[REDACTED]"
_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL)", re.IGNORECASE)
# Shapes of keys worth scrubbing even when the value is not in this environment.
_KEY_SHAPES = re.compile(r"\b(AIza[0-9A-Za-z_\-]{30,}|sk-[A-Za-z0-9_\-]{20,})\b")
_extra: set[str] = set()


def api_key(provider: str, variable: str = "") -> str | None:
    """The key for ``provider`` from the environment (``variable`` when given), or None."""
    names = (variable,) if variable else KEY_VARIABLES.get(provider, ())
    for name in names:
        value = (held.get(name) or "").strip()
        if value:
            _extra.add(value)
            return value
    return None


def key_variables(provider: str, variable: str = "") -> tuple[str, ...]:
    """The environment variables ``api_key`` reads for ``provider`` (for messages)."""
    return (variable,) if variable else KEY_VARIABLES.get(provider, ())


def secrets() -> list[str]:
    """Every value to scrub: secret-looking environment variables and keys handed out here."""
    found = set(_extra)
    for name, value in os.environ.items():
        if _SECRET_NAME.search(name) and len(value.strip()) >= 8:
            found.add(value.strip())
    for name in held.names():  # the secrets held in memory after the re-execution
        value = (held.get(name) or "").strip()
        if len(value) >= 8:
            found.add(value)
    return sorted(found, key=len, reverse=True)


def redact(text: str) -> str:
    """``text`` with every known secret (and anything shaped like an API key) replaced."""
    if not text:
        return text
    for secret in secrets():
        if secret in text:
            text = text.replace(secret, REDACTED)
    return _KEY_SHAPES.sub(REDACTED, text)
