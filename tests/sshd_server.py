"""A real OpenSSH server on a loopback port, started by the tests that need one.

Keys are generated per run in a temporary folder (host key and client keys, ed25519, no
passphrase); password and keyboard-interactive logins are off; the server listens on 127.0.0.1
only, runs in the foreground under its own config (``-D -f``) and is stopped by its pid. The
"banner" client key has a forced command that prints what a chatty login shell prints (motd, a
welcome line) before running the requested command, so tests can show a banner does not break
the worker's handshake.

``start(tmp)`` returns a ``SshServer`` or raises ``Unavailable`` with the reason (no sshd binary,
not root): tests skip with that reason. Install with ``apt-get install openssh-server``.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

SSHD = "/usr/sbin/sshd"
BANNER = ("Welcome to tpu-vm-1 (GNU/Linux 6.1.0 x86_64)", "Last login: Thu Dec  3 07:00:00 2026 from 10.0.0.2",
          '{"not": "a protocol message"}')


class Unavailable(RuntimeError):
    pass


@dataclass
class SshServer:
    port: int
    user: str
    key: Path
    banner_key: Path
    process: subprocess.Popen

    def launcher(self, banner: bool = False) -> tuple[str, ...]:
        """An ssh command line reaching this server (append the remote command, or use {worker})."""
        return ("ssh", "-F", "/dev/null", "-i", str(self.banner_key if banner else self.key), "-p", str(self.port),
                "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                "-o", "LogLevel=ERROR", "-o", "IdentitiesOnly=yes", f"{self.user}@127.0.0.1")

    def session_pids(self) -> list[int]:
        """The per-connection sshd processes (children of the listener)."""
        import psutil

        try:
            return [c.pid for c in psutil.Process(self.process.pid).children(recursive=False)]
        except psutil.Error:
            return []

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def remote_worker() -> tuple[str, ...]:
    """`pallasite worker` as the remote shell should run it here: this checkout, this venv."""
    pythonpath = os.environ.get("PYTHONPATH", "")
    pallasite = Path(sys.executable).parent / "pallasite"
    program = (str(pallasite),) if pallasite.exists() else (sys.executable, "-m", "pallasite.server.cli")
    return ("env", f"PYTHONPATH={pythonpath}", *program, "worker")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(tmp: Path) -> SshServer:
    if not os.path.exists(SSHD) or shutil.which("ssh") is None or shutil.which("ssh-keygen") is None:
        raise Unavailable("no OpenSSH server here (apt-get install openssh-server; .ci/run installs it)")
    if os.geteuid() != 0:
        raise Unavailable("sshd needs root to switch to the logged-in user here; run the tests as root (CI does)")
    tmp.mkdir(parents=True, exist_ok=True)
    keys = {}
    for name in ("host_key", "client_key", "banner_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp / name)], check=True)
        keys[name] = tmp / name
    chatty = tmp / "login_banner.sh"  # what a login shell's profile prints, then the command
    chatty.write_text("#!/bin/sh\n" + "".join(f"echo '{line}'\n" for line in BANNER)
                      + 'exec sh -c "$SSH_ORIGINAL_COMMAND"\n')
    chatty.chmod(0o755)
    authorized = tmp / "authorized_keys"
    authorized.write_text((tmp / "client_key.pub").read_text()
                          + f'command="{chatty}" ' + (tmp / "banner_key.pub").read_text())
    authorized.chmod(0o600)
    port = _free_port()
    user = os.environ.get("USER") or "root"
    if user != "root":
        user = "root"
    config = tmp / "sshd_config"
    config.write_text("\n".join([
        f"Port {port}", "ListenAddress 127.0.0.1", f"HostKey {keys['host_key']}",
        f"AuthorizedKeysFile {authorized}", "PasswordAuthentication no", "KbdInteractiveAuthentication no",
        "PubkeyAuthentication yes", "UsePAM no", "StrictModes no", f"PidFile {tmp / 'sshd.pid'}",
        "PermitRootLogin prohibit-password", f"AllowUsers {user}", "LogLevel ERROR", "PrintMotd no", ""]))
    os.makedirs("/run/sshd", exist_ok=True)
    process = subprocess.Popen([SSHD, "-D", "-f", str(config), "-E", str(tmp / "sshd.log")])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise Unavailable(f"sshd exited with {process.returncode}: {(tmp / 'sshd.log').read_text()[-500:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                break
        except OSError:
            time.sleep(0.1)
    else:
        process.kill()
        raise Unavailable("sshd did not listen within 10 s")
    return SshServer(port=port, user=user, key=keys["client_key"], banner_key=keys["banner_key"], process=process)
