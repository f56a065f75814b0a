"""Where workers run: ``local``, ``ssh`` (any launcher command line) or ``ray``, from settings.

``BackendSettings`` is what the CLI flags (``--backend``, ``--host``, ``--ssh-command``,
``--remote-worker``, ``--ray-address``, ``--ray-resources``) and the editor settings say;
``open_remote(settings, base)`` returns something to run requests on:

- ``local``: a ``WorkerClient`` on this machine;
- ``ssh``: a ``WorkerClient`` whose process is the launcher, by default
  ``ssh -o BatchMode=yes -o ServerAliveInterval=15 HOST pallasite worker`` (never prompts;
  notices a dead connection within a minute); any command line works, with ``{worker}`` where
  the worker command goes (``gcloud compute tpus tpu-vm ssh NAME --zone Z --command "{worker}"``).
  Lines a login shell prints before the handshake (banners, motd) are skipped by the client,
  which reads only protocol lines; a dead connection is a "crashed" reply and the next request
  reconnects;
- ``ray``: ``engine/ray_backend.py`` (each Ray task's actor runs ``pallasite worker`` as a
  subprocess through the same ``WorkerClient``, so limits and isolation are the same).

``where(settings)`` names the backend for results and the store (``local``, ``ssh:HOST``,
``ray:ADDRESS``). Client side: no JAX.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
from dataclasses import dataclass, field
from typing import Any, Literal

from . import launcher
from .client import WorkerClient, WorkerConfig

Kind = Literal["local", "ssh", "ray"]
KINDS: tuple[str, ...] = ("local", "ssh", "ray")
SSH_OPTIONS = ("-o", "BatchMode=yes", "-o", "ServerAliveInterval=15", "-o", "ServerAliveCountMax=3")


@dataclass(frozen=True)
class BackendSettings:
    kind: Kind = "local"
    host: str | None = None  # ssh: the host (user@host); used when no command is given
    command: str | None = None  # ssh: the launcher's command line, with {worker} or not
    remote_worker: str = "pallasite worker"  # the worker command on the remote side
    ray_address: str | None = None  # None: a running cluster from RAY_ADDRESS, else a local one
    ray_resources: dict[str, float] = field(default_factory=dict)  # e.g. {"TPU": 4}
    platforms: str | None = None  # JAX_PLATFORMS for the remote worker; None: its accelerator

    def validate(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown backend {self.kind!r}; backends: {', '.join(KINDS)}")
        if self.kind == "ssh" and not (self.host or self.command):
            raise ValueError("the ssh backend needs a host (--host my-tpu-vm) or a command line "
                             "(--ssh-command 'gcloud compute tpus tpu-vm ssh NAME --zone Z --command \"{worker}\"')")


def parse_resources(text: str | None) -> dict[str, float]:
    """``TPU=4,CPU=1`` or a JSON object, as Ray resources."""
    if not text:
        return {}
    text = text.strip()
    if text.startswith("{"):
        data = json.loads(text)
    else:
        data = {}
        for part in text.split(","):
            name, sep, value = part.partition("=")
            if not sep:
                raise ValueError(f"Ray resources are NAME=NUMBER pairs, e.g. TPU=4; got {part!r}")
            data[name.strip()] = value.strip()
    try:
        return {str(k): float(v) for k, v in data.items()}
    except (TypeError, ValueError):
        raise ValueError(f"Ray resources must be numbers: {text!r}") from None


def ssh_launcher(settings: BackendSettings) -> tuple[str, ...]:
    if settings.command:
        return launcher.parse_command(settings.command)
    return ("ssh", *SSH_OPTIONS, str(settings.host))


def worker_config(settings: BackendSettings, base: WorkerConfig | None = None) -> WorkerConfig:
    """The WorkerConfig that starts this backend's worker (local and ssh)."""
    settings.validate()
    base = base or WorkerConfig()
    if settings.kind == "ssh":
        return dataclasses.replace(base, command=ssh_launcher(settings),
                                   remote_worker=tuple(shlex.split(settings.remote_worker)),
                                   platforms=settings.platforms)
    if settings.platforms is not None:
        return dataclasses.replace(base, platforms=settings.platforms)
    return base


def where(settings: BackendSettings) -> str:
    if settings.kind == "ssh":
        return f"ssh:{settings.host or ssh_launcher(settings)[0]}"
    if settings.kind == "ray":
        return f"ray:{settings.ray_address or 'local'}"
    return "local"


def open_remote(settings: BackendSettings, base: WorkerConfig | None = None) -> Any:
    """A client for the backend: ``await x.request(op, params, ...) -> Reply``, ``x.handshake``,
    ``await x.start()``, ``await x.close()``."""
    settings.validate()
    if settings.kind == "ray":
        from .ray_backend import RayBackend

        return RayBackend(worker_config(dataclasses.replace(settings, kind="local"), base),
                          address=settings.ray_address, resources=settings.ray_resources)
    return WorkerClient(worker_config(settings, base))
