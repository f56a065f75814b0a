"""The server's settings layers and folder trust (the part of ``Session`` that decides what may run).

Settings come in layers, lowest first: the project's ``[tool.pallasite]`` (without the keys only
the user may set), ``initializationOptions``, the client's ``workspace/configuration``, and
commands (``pallasite.selectTarget``); each layer's problems are reported by its source. Trust
comes only from the user: the settings' ``trust.mode`` / ``trust.folders``, the remembered
trusted folders (trust.py), or the answer to a question asked once per folder per session.
Documents opened before the client's settings arrive wait (briefly) for them before trust is
decided. Plain functions of the session's state (its ``settings``, ``layers``, ``folder_layers``,
``folders``, ``project``, ``session_trusted``, ``settings_ready``); the question asking for trust
is checks.py's (it starts the checks a yes allows).
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from .settings import (
    SECTION, Settings, find_pyproject, parse_settings, read_tool_section, settings_to_json, unflatten,
    without_user_only,
)
from .trust import inside, read_trusted, remember_trusted

# How long a document opened before the client's settings arrive waits for them before deciding
# about trust with what it has (pyproject and initializationOptions).
SETTINGS_WAIT_S = 3.0


def merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    """``top`` over ``base``, tables merged key by key."""
    out = dict(base)
    for key, value in top.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


# --------------------------------------------------------------------------- settings


def read_project_settings(session: Any, folder: str) -> list[str]:
    """``[tool.pallasite]`` of the folder's nearest pyproject.toml as the lowest settings layer,
    without the keys only the user may set (trust); the problems found, to show the user."""
    path = find_pyproject(Path(folder))
    if path is None:
        return []
    table, problems = read_tool_section(path)
    if table is None:
        return problems
    source = f"{path} [tool.{SECTION}]"
    session.project = (source, str(path.parent.resolve()))
    table, dropped = without_user_only(table, source)
    return problems + dropped + set_layer(session, source, table)


def settings_arrived(session: Any) -> None:
    """The client's settings are known (or will not come): decisions waiting for them go on."""
    session.settings_ready.set()


async def wait_for_settings(session: Any) -> None:
    """Wait (briefly) for the client's first settings, so trust is decided with them."""
    if session.settings_ready.is_set():
        return
    try:
        await asyncio.wait_for(session.settings_ready.wait(), SETTINGS_WAIT_S)
    except asyncio.TimeoutError:
        session.log(f"pallasite: no workspace/configuration answer within {SETTINGS_WAIT_S:.0f} s; "
                    "deciding with the initialization options.")
        session.settings_ready.set()


def _unwrapped(data: Any) -> Any:
    if isinstance(data, dict) and isinstance(data.get("pallasite"), dict):
        data = data["pallasite"]
    if isinstance(data, dict) and any("." in str(key) for key in data):
        data = unflatten(data)  # dotted keys ("check.debounceMs") as some editors send them
    return data


def set_layer(session: Any, source: str, data: Any) -> list[str]:
    """Replace one settings source (pyproject, initializationOptions, workspace/configuration)."""
    data = _unwrapped(data)
    if not isinstance(data, dict):
        session.layers.pop(source, None)
        return [] if data is None else [f"{source}: settings must be an object, got {data!r}; ignored."]
    session.layers[source] = data
    warnings = parse_settings(data, source)[1]  # each layer's problems, named by its source
    merged: dict[str, Any] = {}
    for layer in session.layers.values():
        merged = merge(merged, layer)
    settings = parse_settings(merged)[0]
    if settings.checker_key() != session.settings.checker_key():
        session.worker_warm = False  # stop the workers; the next check starts fresh ones for new settings
        session.engine.drop_backend()
    session.settings = settings
    return warnings


def set_folder_layer(session: Any, folder: str, data: Any) -> list[str]:
    """A workspace folder's own settings (``workspace/configuration`` scoped to the folder), over
    every other layer for that folder's documents; None or the same as the global ones: none."""
    data = _unwrapped(data)
    source = f"workspace/configuration for {folder}"
    if not isinstance(data, dict) or data == session.layers.get("workspace/configuration"):
        session.folder_layers.pop(folder, None)
        return [] if data is None or isinstance(data, dict) else [f"{source}: settings must be an object; ignored."]
    session.folder_layers[folder] = data
    return parse_settings(data, source)[1]


def settings_for(session: Any, path: str | None) -> Settings:
    """The settings for a document: the global layers, then its workspace folder's own ones.
    Trust stays the user's global decision (a folder cannot trust itself)."""
    if path is None or not session.folder_layers:
        return session.settings
    layer = session.folder_layers.get(folder_of(session, path))
    if not layer:
        return session.settings
    merged: dict[str, Any] = {}
    for each in session.layers.values():
        merged = merge(merged, each)
    settings = parse_settings(merge(merged, layer))[0]
    return replace(settings, trust=session.settings.trust)


def set_target(session: Any, chip: str) -> list[str]:
    return set_layer(session, "command", merge(session.layers.get("command", {}), {"target": chip}))


def interpreter_allowed(session: Any) -> bool:
    """Whether the worker interpreter may be used: always when the user named it (editor
    settings); when only the project's pyproject.toml names it, once that project is trusted
    (with several workspace folders, a trusted one must not start another's interpreter)."""
    named = [source for source, layer in session.layers.items()
             if isinstance(layer.get("worker"), dict) and layer["worker"].get("interpreter")]
    if not named or session.project is None or named[-1] != session.project[0]:
        return True
    return is_trusted(session, session.project[1])


def check_options(session: Any, path: str | None = None) -> Any:
    """The runner's options for a check now (of ``path``'s workspace folder); a project
    interpreter not yet allowed is replaced by the Python running pallasite (and the user told once)."""
    options = settings_for(session, path).check_options()
    if path is not None and any(inside(path, f) for f in session.folders):
        options = replace(options, workspace=folder_of(session, path))  # callers are searched in its folder
    if interpreter_allowed(session):
        return options
    interpreter = session.settings.interpreter()
    if interpreter not in session.refused_interpreters:
        session.refused_interpreters.add(interpreter)
        session.show(f"pallasite: the worker interpreter {interpreter} named in {session.project[0]} is used only "
                     f"once {session.project[1]} is trusted; checking with {sys.executable} meanwhile.")
    return replace(options, interpreter=sys.executable)


def settings_json(session: Any) -> dict[str, Any]:
    return settings_to_json(session.settings)


# --------------------------------------------------------------------------- trust


def folder_of(session: Any, path: str) -> str:
    matches = [f for f in session.folders if inside(path, f)]
    return max(matches, key=len) if matches else str(Path(path).resolve().parent)


def is_trusted(session: Any, folder: str) -> bool:
    mode = session.settings.trust.mode
    if mode == "always":
        return True
    if mode == "never":
        return False
    trusted = [*session.settings.trust.folders, *read_trusted(), *session.session_trusted]
    return any(inside(folder, t) for t in trusted)


def trust(session: Any, folder: str, remember: bool = True) -> bool:
    """Trust a folder at the user's request; refused (False, nothing recorded) when the
    settings say ``trust.mode = "never"``: never means never, whoever asks."""
    if session.settings.trust.mode == "never":
        return False
    session.session_trusted.add(folder)
    if remember:
        remember_trusted(folder)
    return True
