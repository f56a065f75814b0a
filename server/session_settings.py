"""The server's settings layers and folder trust (the part of ``Session`` that decides what may run).

Settings come in layers, lowest first: the project's ``[tool.pallasite]`` (without the keys only
the user may set), ``initializationOptions``, the client's ``workspace/configuration``, and
commands (``pallasite.selectTarget``); each layer's problems are reported by its source. Trust
comes only from the user: the settings' ``trust.mode`` / ``trust.folders``, the remembered
trusted folders (trust.py), or the answer to a question asked once per folder per session.
Documents opened before the client's settings arrive wait (briefly) for them before trust is
decided. ``Session`` (session.py) inherits these methods; they use its ``client``, ``show``,
``log``, ``notify_status``, ``drop_checker`` and ``check_others_in``.
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp

from .settings import (
    SECTION, Settings, find_pyproject, parse_settings, read_tool_section, settings_to_json, unflatten,
    without_user_only,
)
from .trust import inside, read_trusted, remember_trusted

TRUST, NOT_NOW = "Trust", "Not now"
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


class SettingsAndTrust:
    """Settings layers and folder trust of one server session (state set up by ``Session``)."""

    settings: Settings
    layers: dict[str, dict[str, Any]]
    folder_layers: dict[str, dict[str, Any]]
    folders: list[str]
    asked: set[str]
    session_trusted: set[str]
    settings_ready: asyncio.Event
    project: tuple[str, str] | None
    refused_interpreters: set[str]

    # ------------------------------------------------------------- settings

    def read_project_settings(self, folder: str) -> list[str]:
        """``[tool.pallasite]`` of the folder's nearest pyproject.toml as the lowest settings layer,
        without the keys only the user may set (trust); the problems found, to show the user."""
        path = find_pyproject(Path(folder))
        if path is None:
            return []
        table, problems = read_tool_section(path)
        if table is None:
            return problems
        source = f"{path} [tool.{SECTION}]"
        self.project = (source, str(path.parent.resolve()))
        table, dropped = without_user_only(table, source)
        return problems + dropped + self.set_layer(source, table)

    def settings_arrived(self) -> None:
        """The client's settings are known (or will not come): decisions waiting for them go on."""
        self.settings_ready.set()

    async def wait_for_settings(self) -> None:
        """Wait (briefly) for the client's first settings, so trust is decided with them."""
        if self.settings_ready.is_set():
            return
        try:
            await asyncio.wait_for(self.settings_ready.wait(), SETTINGS_WAIT_S)
        except asyncio.TimeoutError:
            self.log(f"pallasite: no workspace/configuration answer within {SETTINGS_WAIT_S:.0f} s; "
                     "deciding with the initialization options.")
            self.settings_ready.set()

    def set_layer(self, source: str, data: Any) -> list[str]:
        """Replace one settings source (pyproject, initializationOptions, workspace/configuration)."""
        if isinstance(data, dict) and isinstance(data.get("pallasite"), dict):
            data = data["pallasite"]
        if isinstance(data, dict) and any("." in str(key) for key in data):
            data = unflatten(data)  # dotted keys ("check.debounceMs") as some editors send them
        if not isinstance(data, dict):
            self.layers.pop(source, None)
            return [] if data is None else [f"{source}: settings must be an object, got {data!r}; ignored."]
        self.layers[source] = data
        warnings = parse_settings(data, source)[1]  # each layer's problems, named by its source
        merged: dict[str, Any] = {}
        for layer in self.layers.values():
            merged = merge(merged, layer)
        settings = parse_settings(merged)[0]
        if settings.checker_key() != self.settings.checker_key():
            self.drop_checker()
        self.settings = settings
        return warnings

    def set_folder_layer(self, folder: str, data: Any) -> list[str]:
        """A workspace folder's own settings (``workspace/configuration`` scoped to the folder), over
        every other layer for that folder's documents; None or the same as the global ones: none."""
        if isinstance(data, dict) and isinstance(data.get("pallasite"), dict):
            data = data["pallasite"]
        if isinstance(data, dict) and any("." in str(key) for key in data):
            data = unflatten(data)
        source = f"workspace/configuration for {folder}"
        if not isinstance(data, dict) or data == self.layers.get("workspace/configuration"):
            self.folder_layers.pop(folder, None)
            return [] if data is None or isinstance(data, dict) else [f"{source}: settings must be an object; ignored."]
        self.folder_layers[folder] = data
        return parse_settings(data, source)[1]

    def settings_for(self, path: str | None) -> Settings:
        """The settings for a document: the global layers, then its workspace folder's own ones.
        Trust stays the user's global decision (a folder cannot trust itself)."""
        if path is None or not self.folder_layers:
            return self.settings
        layer = self.folder_layers.get(self.folder_of(path))
        if not layer:
            return self.settings
        merged: dict[str, Any] = {}
        for each in self.layers.values():
            merged = merge(merged, each)
        settings = parse_settings(merge(merged, layer))[0]
        return replace(settings, trust=self.settings.trust)

    def set_target(self, chip: str) -> list[str]:
        return self.set_layer("command", merge(self.layers.get("command", {}), {"target": chip}))

    def interpreter_allowed(self) -> bool:
        """Whether the worker interpreter may be used: always when the user named it (editor
        settings); when only the project's pyproject.toml names it, once that project is trusted
        (with several workspace folders, a trusted one must not start another's interpreter)."""
        named = [source for source, layer in self.layers.items()
                 if isinstance(layer.get("worker"), dict) and layer["worker"].get("interpreter")]
        if not named or self.project is None or named[-1] != self.project[0]:
            return True
        return self.is_trusted(self.project[1])

    def check_options(self, path: str | None = None) -> Any:
        """The runner's options for a check now (of ``path``'s workspace folder); a project
        interpreter not yet allowed is replaced by the Python running pallasite (and the user told once)."""
        options = self.settings_for(path).check_options()
        if self.interpreter_allowed():
            return options
        interpreter = self.settings.interpreter()
        if interpreter not in self.refused_interpreters:
            self.refused_interpreters.add(interpreter)
            self.show(f"pallasite: the worker interpreter {interpreter} named in {self.project[0]} is used only "
                      f"once {self.project[1]} is trusted; checking with {sys.executable} meanwhile.")
        return replace(options, interpreter=sys.executable)

    def settings_json(self) -> dict[str, Any]:
        return settings_to_json(self.settings)

    # ------------------------------------------------------------- trust

    def folder_of(self, path: str) -> str:
        matches = [f for f in self.folders if inside(path, f)]
        return max(matches, key=len) if matches else str(Path(path).resolve().parent)

    def is_trusted(self, folder: str) -> bool:
        mode = self.settings.trust.mode
        if mode == "always":
            return True
        if mode == "never":
            return False
        trusted = [*self.settings.trust.folders, *read_trusted(), *self.session_trusted]
        return any(inside(folder, t) for t in trusted)

    def trust(self, folder: str, remember: bool = True) -> bool:
        """Trust a folder at the user's request; refused (False, nothing recorded) when the
        settings say ``trust.mode = "never"``: never means never, whoever asks."""
        if self.settings.trust.mode == "never":
            return False
        self.session_trusted.add(folder)
        if remember:
            remember_trusted(folder)
        return True

    async def trusted_or_ask(self, folder: str) -> bool:
        """Whether the folder's code may run: decided once the client's settings are known."""
        await self.wait_for_settings()
        return self.is_trusted(folder) or await self.ask_trust(folder)

    async def ask_trust(self, folder: str) -> bool:
        """Ask once per folder (per session) whether its code may run in a worker."""
        if self.settings.trust.mode != "ask" or folder in self.asked:
            return self.is_trusted(folder)
        self.asked.add(folder)
        params = lsp.ShowMessageRequestParams(
            type=lsp.MessageType.Info,
            message=("Trust this folder to run its kernels in a pallasite worker? "
                     f"{folder}\nUntil then only tier 0 (source rules, nothing executed) runs."),
            actions=[lsp.MessageActionItem(title=TRUST), lsp.MessageActionItem(title=NOT_NOW)])
        try:
            answer = await self.client.window_show_message_request_async(params)
        except Exception as exc:  # a client without showMessageRequest: stay untrusted
            self.log(f"pallasite: could not ask about trusting {folder}: {exc}")
            return False
        if answer is None or answer.title != TRUST or not self.trust(folder):
            return False
        self.notify_status()
        self.check_others_in(folder)
        return True
