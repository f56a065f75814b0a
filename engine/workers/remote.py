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
- ``ray``: ``engine/workers/ray_backend.py`` (each Ray task's actor runs ``pallasite worker`` as a
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
PLACEMENTS = ("spread", "strict_spread", "pack", "strict_pack")
HOST_PLACEHOLDER = "{host}"  # in --ssh-command: each pool host in turn
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
    # the device pool (engine/workers/device.py): several ssh hosts (``host`` is the first), N Ray actors each
    # holding ``ray_resources``, spread by a placement group, and which chip kind a mixed pool's jobs use
    hosts: tuple[str, ...] = ()
    devices: int = 1  # ray: device workers (actors); ssh: one per host
    ray_placement: str | None = None  # None: Ray places each actor; "spread"/"strict_spread"/"pack": a placement group
    device_kind: str | None = None  # e.g. "TPU v6 lite"; None: the kind most workers have

    def validate(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown backend {self.kind!r}; backends: {', '.join(KINDS)}")
        if self.kind == "ssh" and not (self.host or self.hosts or self.command):
            raise ValueError("the ssh backend needs a host (--host my-tpu-vm) or a command line "
                             "(--ssh-command 'gcloud compute tpus tpu-vm ssh NAME --zone Z --command \"{worker}\"')")
        if self.devices < 1:
            raise ValueError(f"--devices {self.devices}: a pool needs at least one device worker")
        if self.kind == "local" and self.devices > 1:
            raise ValueError("--devices N needs --backend ray (N actors) or several --host (one worker per host); "
                             "a local backend has one device worker")
        if self.ray_placement not in (None, *PLACEMENTS):
            raise ValueError(f"--ray-placement {self.ray_placement!r}: one of {', '.join(PLACEMENTS)}")
        if self.kind == "ray" and not ray_installed():
            raise ValueError("the ray backend needs Ray, which this environment does not have: "
                             "pip install 'ray>=2.40', pallasite's ray extra (or use --backend ssh / local)")

    @property
    def all_hosts(self) -> tuple[str, ...]:
        """ssh: every host of the pool (``host`` first, then ``hosts``, each once)."""
        seen = [h for h in (self.host, *self.hosts) if h]
        return tuple(dict.fromkeys(seen))

    def for_host(self, host: str) -> "BackendSettings":
        """These settings for one host of the pool (a ``{host}`` in the command line is that host)."""
        command = self.command.replace(HOST_PLACEHOLDER, host) if self.command else None
        return dataclasses.replace(self, host=host, hosts=(), command=command)


def ray_installed() -> bool:
    """Whether ``import ray`` can work here (found on the path; a None in sys.modules is an import blocked)."""
    import importlib.util
    import sys

    if "ray" in sys.modules:
        return sys.modules["ray"] is not None
    try:
        return importlib.util.find_spec("ray") is not None
    except (ImportError, ValueError):
        return False


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


def read_hosts_file(path: str) -> tuple[str, ...]:
    """A hosts file: one host (user@host) a line; blank lines and ``#`` comments are skipped."""
    try:
        with open(path, encoding="utf-8") as f:
            hosts = tuple(line.split("#", 1)[0].strip() for line in f)
    except OSError as exc:
        raise ValueError(f"--hosts-file {path}: {exc.strerror or exc}") from None
    if not any(hosts):
        raise ValueError(f"--hosts-file {path}: no host in it (one host a line)")
    return tuple(h for h in hosts if h)


def where(settings: BackendSettings) -> str:
    """The backend's name in results and run ids (the pool's size is not part of it: a run resumed
    with more workers is the same run)."""
    if settings.kind == "ssh":
        hosts = settings.all_hosts
        if len(hosts) > 1:
            return "ssh:" + "+".join(hosts)
        if settings.host or hosts:
            return f"ssh:{settings.host or hosts[0]}"
        return f"ssh:{launcher.launcher_host(ssh_launcher(settings)) or ssh_launcher(settings)[0]}"
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
