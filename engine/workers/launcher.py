"""Starting a worker through a launcher (ssh, gcloud, ...) and judging the worker that answers.

- ``launch_argv(command, worker)``: the launcher's command line with the worker's own command in
  it. A ``{worker}`` placeholder anywhere in an argument is replaced by the worker command as one
  shell-quoted string (``gcloud compute tpus tpu-vm ssh NAME --zone Z --command "{worker}"``);
  without one, the worker's words are appended (``ssh HOST`` + ``pallasite worker ...``; ssh joins
  them into the remote shell's command line).
- ``parse_command(text)``: a command line from settings or a flag (shell words, ``~`` expanded in
  the launcher's own path only).
- ``version_warnings(handshake, local)``: what differs between this machine's pallasite/jax/jaxlib/
  libtpu and the worker's. The protocol version itself is checked by ``protocol.check_handshake``
  (a mismatch refuses the worker); other differences are warnings recorded with every result,
  since verdicts and timings are valid for the worker's versions, not the laptop's.
- ``describe(handshake, where)``: one line saying what answered (host, devices, versions).
- ``launcher_host(command)``: the host a launcher command line reaches (``ssh -p 2222 me@vm`` ->
  ``me@vm``, ``gcloud ... tpu-vm ssh NAME ...`` -> ``NAME``), to name the worker by.
- ``launch_failure(command, code, said)``: why a launcher ended before its worker answered, in words,
  with the command to try by hand (ssh's 255: the host or port could not be reached, or the login failed).

Client side: no JAX (this machine's versions come from ``analysis.types.installed_versions``).
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

PLACEHOLDER = "{worker}"
DISTRIBUTIONS = ("pallasite", "jax", "jaxlib", "libtpu")


def parse_command(text: str | Sequence[str]) -> tuple[str, ...]:
    """Shell words of a launcher command line (a list is taken as already split)."""
    words = list(text) if not isinstance(text, str) else shlex.split(text)
    if not words:
        raise ValueError("the launcher command line is empty; e.g. 'ssh my-tpu-vm'")
    words[0] = os.path.expanduser(words[0])
    return tuple(words)


def launch_argv(command: Sequence[str], worker: Sequence[str]) -> list[str]:
    """The launcher's argv with the worker command placed in it (see the module docstring)."""
    joined = " ".join(_quote(word) for word in worker)
    if any(PLACEHOLDER in word for word in command):
        return [word.replace(PLACEHOLDER, joined) for word in command]
    return [*command, *worker]


# ssh's options that take a value (``man ssh``): the word after them is not the destination
_SSH_VALUE_OPTIONS = set("BbcDEeFIiJLlmOoPpQRSWw")


def launcher_host(command: Sequence[str]) -> str | None:
    """The host a launcher reaches: ssh's destination, or the word after gcloud's ``ssh``; None when the
    command line says no such thing (a script of the user's)."""
    words = list(command)
    if not words:
        return None
    if os.path.basename(words[0]) == "ssh":
        i = 1
        while i < len(words):
            word = words[i]
            if word == "--":
                return words[i + 1] if i + 1 < len(words) else None
            if word.startswith("-") and len(word) > 1:
                i += 2 if word[-1] in _SSH_VALUE_OPTIONS and len(word) == 2 else 1
                continue
            return None if PLACEHOLDER in word else word
        return None
    if "ssh" in words[1:]:  # gcloud compute tpus tpu-vm ssh NAME ...
        rest = [w for w in words[words.index("ssh", 1) + 1:] if not w.startswith("-") and PLACEHOLDER not in w]
        return rest[0] if rest else None
    return None


def launch_failure(command: Sequence[str], code: int | None, said: str) -> str:
    """Why the launcher ended before its worker sent a handshake, and what to try: its own last words
    (``said``, its stderr), and for ssh's exit 255 that the host could not be reached or refused the
    login, with the same ssh command line to run by hand."""
    words = list(command)
    last = [line.strip() for line in said.splitlines() if line.strip() and not line.startswith("[pallasite")][-3:]
    text = f" ({'; '.join(last)})" if last else ""
    uses_ssh = bool(words) and (os.path.basename(words[0]) == "ssh" or "ssh" in words[1:])
    if code == 255 and uses_ssh:
        host = launcher_host(words) or "the host"
        trial = " ".join(shlex.quote(w) for w in launch_argv(words, ["true"]))
        return (f"ssh could not reach {host} or log in (exit 255){text}; check the host, the port and the key, "
                f"and test the connection alone: {trial}")
    return f"the launcher said: {'; '.join(last)}" if last else ""


def _quote(word: str) -> str:
    """Shell-quoted, except a leading ``~/``, which the remote shell must still expand."""
    if word.startswith("~/"):
        return "~/" + shlex.quote(word[2:])
    return shlex.quote(word)


def local_versions() -> dict[str, str | None]:
    from ...analysis.types import installed_versions  # the one reader of package versions

    return {dist: installed_versions().get(dist) for dist in DISTRIBUTIONS}


def version_warnings(handshake: Any, local: Mapping[str, str | None] | None = None) -> list[str]:
    """Differences between this machine's versions and the worker's, as sentences."""
    local = local_versions() if local is None else local
    warnings = []
    for dist in DISTRIBUTIONS:
        here, there = local.get(dist), getattr(handshake, dist, None)
        if dist == "libtpu" and there and not here:
            continue  # a TPU host has libtpu and a laptop often does not: expected
        if here != there and (here or there):
            warnings.append(f"{dist} differs: {here or 'not installed'} here, {there or 'not installed'} on the worker "
                            f"(results are valid for the worker's {dist})")
    if getattr(handshake, "error", None):
        warnings.append(f"the worker's jax is not usable: {handshake.error}")
    return warnings


def describe(handshake: Any, where: str) -> str:
    """One line: what answered, where, with what."""
    devices = list(getattr(handshake, "devices", ()) or ())
    kinds = sorted(set(devices))
    device_text = ", ".join(f"{devices.count(k)}x {k}" for k in kinds) or "no devices"
    parts = [f"jax {handshake.jax}" if handshake.jax else "no jax"]
    if getattr(handshake, "libtpu", None):
        parts.append(f"libtpu {handshake.libtpu}")
    return (f"worker on {where}: pid {handshake.pid}, {getattr(handshake, 'platform', None) or '?'} "
            f"({device_text}), {', '.join(parts)}, pallasite {handshake.pallasite}, protocol {handshake.protocol}")
