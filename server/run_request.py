"""The command line's side of the run setup (agents/run_setup.py decides; this converts): the
project's settings for a path, the agent flags and ``--backend`` as a ``RunRequest``; and a search's
outputs (its graph as JSON and the HTML report), written for the CLI and the editor alike."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..agents.run_setup import RunRequest


def device_settings(args: argparse.Namespace):
    """The engine's BackendSettings for ``--backend`` (None for ``estimate``); ValueError says what is wrong."""
    from ..engine.workers.remote import BackendSettings, parse_resources, read_hosts_file

    if args.backend == "estimate":
        return None
    hosts = tuple(args.host or ()) + (read_hosts_file(args.hosts_file) if getattr(args, "hosts_file", None) else ())
    settings = BackendSettings(kind=args.backend, host=hosts[0] if hosts else None, hosts=hosts[1:],
                               command=args.ssh_command, remote_worker=args.remote_worker, ray_address=args.ray_address,
                               ray_resources=parse_resources(args.ray_resources), devices=getattr(args, "devices", 1),
                               ray_placement=getattr(args, "ray_placement", None),
                               device_kind=getattr(args, "device_kind", None))
    settings.validate()
    return settings


def refuse_non_kernel(path: str | Path, command: str, does: str = "improves a kernel, and no model was asked") -> None:
    """Before any model is asked or any worker starts: ``path`` must be a Python file that uses Pallas
    (itself or through its local modules), what optimize, search, tune and time work on; ValueError says
    what it is instead, and what the command ``does``."""
    from ..analysis.pallas_use import uses_pallas

    try:
        text = Path(path).read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not a text file; pallasite {command} {does} (a Pallas kernel file, .py)") from None
    try:
        compile(text, str(path), "exec", dont_inherit=True)
    except SyntaxError as err:
        raise ValueError(f"{path}:{err.lineno}: not Python ({err.msg}); pallasite {command} {does}: "
                         f"`pallasite check {path}` shows the error") from None
    except ValueError as err:  # e.g. a NUL byte
        raise ValueError(f"{path}: not Python ({err}); pallasite {command} {does}") from None
    if not uses_pallas(str(path), text):
        raise ValueError(f"{path}: not a Pallas kernel (neither the file nor its local modules import "
                         f"jax.experimental.pallas): pallasite {command} {does}")


def project_settings(path: str | Path) -> Any:
    """The settings of the project holding ``path`` (a file or a folder), its notes on stderr; a bad
    ``[tool.pallasite]`` (not TOML, an unknown key, a bad value) raises SettingsError (a ValueError: the
    command says it and exits 2; the editor instead shows it and uses the default)."""
    from .settings import read_project, settings_error

    start = Path(path).resolve()
    read = read_project(start if start.is_dir() else start.parent)
    for note in read.notes:
        print(f"warning: settings: {note}", file=sys.stderr)
    if read.problems:
        raise settings_error(read)
    return read.settings


def run_request(args: argparse.Namespace, path: str, **fields: Any) -> RunRequest:
    """The command's flags as a RunRequest: the project's settings for ``path``, ``--target``,
    ``--provider`` and the model flags over them, the device of ``--backend`` (where the command has one)."""
    agent = {"model": getattr(args, "model", None), "baseUrl": getattr(args, "base_url", None),
             "apiKeyEnv": getattr(args, "api_key_env", None), "scriptedFile": getattr(args, "scripted_file", None),
             "maxRounds": getattr(args, "rounds", None),
             "priceInputPerMTok": getattr(args, "price_input", None) or None,
             "priceOutputPerMTok": getattr(args, "price_output", None) or None,
             "allowUnconfined": True if getattr(args, "allow_unconfined", False) else None}
    if "device" not in fields:
        fields["device"] = device_settings(args) if hasattr(args, "backend") else None
    fields.setdefault("target", getattr(args, "target", None))
    fields.setdefault("provider", getattr(args, "provider", None))
    fields.setdefault("memory_mb", getattr(args, "memory_mb", None))  # one source of limits: the run setup's
    fields.setdefault("time_limit_s", getattr(args, "timeout", None))  # --request-time-limit where a command has it
    return request_for(path, project_settings(path), agent=agent, **fields)


def request_for(path: str, settings: Any, **fields: Any) -> RunRequest:
    """A ``RunRequest`` for ``path`` under ``settings`` (the project's, or the editor's merged ones), with the
    settings' check options converted here, in the front end that read them."""
    return RunRequest(path=path, settings=settings, options=settings.check_options(), **fields)


def provider_config(args: argparse.Namespace, run: Any) -> Any:
    """The run's model configuration with the command's run-wide rate limits."""
    import dataclasses

    return dataclasses.replace(run.provider_config(), requests_per_minute=args.requests_per_minute,
                               tokens_per_minute=args.tokens_per_minute)


def command_line_provider(config: Any, command: str) -> Any:
    """The model for ``pallasite <command>`` (agents/llm/providers.make_provider), or ProviderError("config"); with no
    provider named, what to give on the command line (the editor's settings are not this user's)."""
    from ..agents.llm.providers import ProviderError, command_line_how, make_provider

    if not config.name:
        raise ProviderError("config", "no LLM provider is configured: " + command_line_how(command))
    return make_provider(config)


def write_outputs(graph: Any, rid: str, out_dir: Path, title: str, report: Path | None = None) -> Path:
    """The graph as JSON and the HTML report; returns the report's path."""
    from ..knowledge.store import STORE_DIR, pallasite_folder

    from .reports.report_html import search_html

    if out_dir.parent.name == STORE_DIR:  # .pallasite/search: .pallasite ignores itself in git
        pallasite_folder(out_dir.parent.parent)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{rid}.json").write_text(graph.dumps())
    report = report or out_dir / f"{rid}.html"
    report.write_text(search_html(graph.to_json(), title=title))
    return report
