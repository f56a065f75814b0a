"""The sandbox model-written code runs in (runner/isolation/sandbox.py), attacked directly: each test runs hostile
code in a sandboxed child the way a confined worker does (forked by a fork server: runner/isolation/sandbox_server.py),
and checks what it could reach.

Before this sandbox, confined code saw the whole filesystem read-only: it reached a tmux server's
socket of the user (and ran commands outside every namespace), read ~/.ssh and the project's .env,
wrote block devices as root, wrote onto the user's terminal, held memory in memfds outside the RSS
limit and filled the disk from its scratch.
"""

from __future__ import annotations

import functools
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import sandbox_bodies
from pallasite.engine.workers import spawn
from pallasite.runner.isolation import sandbox
from pallasite.runner.isolation.sandbox_server import ForkServer

HERE = Path(__file__).parent
PYTHON = sys.executable  # (a test below points sys.executable elsewhere)

PROBLEM = spawn.confinement_problem(sys.executable)
pytestmark = pytest.mark.skipif(PROBLEM is not None, reason=f"no sandbox here: {PROBLEM}")


def fork_server(limits: sandbox.Limits | None = None) -> ForkServer:
    """A fork server for this test's children (a fresh interpreter: this process may run jax's threads), binding
    and linking what this process would (a test's monkeypatches hold)."""
    config = ForkServer.config(limits or sandbox.Limits(memory_mb=1024, scratch_mb=64), preload=("sandbox_bodies",),
                               binds=sandbox.readable_paths() + sandbox.package_paths(), links=sandbox.interpreter_links())
    path = os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH", "")) if p)
    return ForkServer.spawned(config, env={**os.environ, "PYTHONPATH": path}, python=PYTHON)


def run_hostile(code: str, limits: sandbox.Limits | None = None, timeout: float = 60) -> tuple[dict, sandbox.Outcome]:
    """``code`` run in a sandboxed child; it reports by assigning ``report`` (a dict)."""
    server = fork_server(limits)
    try:
        child = server.start(functools.partial(sandbox_bodies.run_code, code=code))
        seen = [m for m in child.messages(time.monotonic() + timeout) if isinstance(m, dict)]
        outcome = child.outcome()
        assert server.threads == 1 and child.threads == 1, (server.threads, child.threads)  # forked from one thread
    finally:
        server.close()
        os.rmdir(server.mountpoint)
    return (seen[0] if seen else {}), outcome


def test_the_probe_finds_the_sandbox_holds():
    """(run as the engine runs it: a fresh interpreter, which forks with one thread)"""
    done = subprocess.run([sys.executable, "-m", "pallasite.runner.isolation.sandbox"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "the sandbox holds", done.stdout + done.stderr


def test_nothing_of_the_users_is_visible(tmp_path):
    home = Path(os.path.expanduser("~"))
    project = tmp_path / "project"
    project.mkdir()
    (project / ".env").write_text("GEMINI_API_KEY=secret-from-dotenv\n")
    report, outcome = run_hostile(f"""
import os
report["uid"] = os.getuid()
report["root"] = sorted(os.listdir("/"))
report["dev"] = sorted(os.listdir("/dev"))
report["procs"] = sorted(p for p in os.listdir("/proc") if p.isdigit())
found = {{}}
for path in [{str(project / '.env')!r}, {str(home / '.ssh')!r}, {str(home / '.config/gcloud')!r}, "/run",
             "/var/run", "/etc/shadow", "/etc/ssh", {str(tmp_path)!r}, "/dev/pts", "/dev/tty", "/dev/vda",
             "/dev/sda", "/dev/loop0", "/sys/block"]:
    found[path] = os.path.exists(path)
report["found"] = found
package = __import__("pallasite.runner.isolation.sandbox").runner.isolation.sandbox.package_root()
report["package"] = sorted(os.listdir(package))
""")
    assert outcome.code == 0, outcome
    assert report["uid"] == sandbox.INSIDE_ID
    assert not any(report["found"].values()), report["found"]
    assert set(report["dev"]) <= {"null", "zero", "full", "random", "urandom", "shm", "fd", "stdin", "stdout",
                                  "stderr", "accel0", "accel1", "accel2", "accel3", "vfio"}
    assert report["procs"] == ["1"]  # its own PID namespace: no pallasite, editor or shell to read
    assert "tests" not in report["package"] and ".env" not in report["package"]


def test_it_runs_as_nobody_outside_when_pallasite_is_root():
    if os.geteuid() != 0:
        pytest.skip("pallasite is not root here: the sandbox's uid is the user's own")
    report, outcome = run_hostile("""
import os, time
report["status"] = open("/proc/self/status").read()
""")
    uid_line = next(line for line in report["status"].splitlines() if line.startswith("Uid:"))
    assert uid_line.split()[1:] == [str(sandbox.INSIDE_ID)] * 4
    cap_eff = next(line for line in report["status"].splitlines() if line.startswith("CapEff:"))
    assert int(cap_eff.split()[1], 16) == 0
    no_new_privs = next(line for line in report["status"].splitlines() if line.startswith("NoNewPrivs:"))
    assert no_new_privs.split()[1] == "1"


def test_unix_sockets_of_the_user_cannot_be_reached(tmp_path):
    """A filesystem socket (tmux's, an ssh-agent's, docker's) and an abstract one stay out of reach."""
    path = str(tmp_path / "agent.sock")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(path)
    listener.listen()
    abstract = socket.socket(socket.AF_UNIX)
    abstract.bind(f"\0pallasite-test-{os.getpid()}")
    abstract.listen()
    try:
        report, outcome = run_hostile(f"""
import socket
for name, address in (("file", {path!r}), ("abstract", "\\0pallasite-test-{os.getpid()}")):
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(address)
        report[name] = "connected"
    except OSError as exc:
        report[name] = str(exc)
""")
    finally:
        listener.close()
        abstract.close()
    assert report["file"] != "connected" and report["abstract"] != "connected", report


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_a_tmux_server_of_the_user_runs_no_command_for_the_sandbox(tmp_path):
    """The escape that was: `tmux new-window` through the user's tmux socket ran a command outside every
    namespace with the user's rights (it deleted a project file); `show-environment` read the key."""
    sock = str(tmp_path / "tmux.sock")
    victim = tmp_path / "project_file.py"
    victim.write_text("x = 1\n")
    subprocess.run(["tmux", "-S", sock, "new-session", "-d", "-s", "user"], check=True,
                   env={**os.environ, "GEMINI_API_KEY": "tmux-secret"})
    try:
        report, outcome = run_hostile(f"""
import subprocess
done = subprocess.run(["tmux", "-S", {sock!r}, "new-window", "rm -f {victim}"], capture_output=True, text=True)
report["new-window"] = (done.returncode, done.stderr)
done = subprocess.run(["tmux", "-S", {sock!r}, "show-environment", "-g"], capture_output=True, text=True)
report["environment"] = done.stdout
""")
        time.sleep(0.5)
    finally:
        subprocess.run(["tmux", "-S", sock, "kill-server"], capture_output=True)
    assert victim.exists()
    assert "tmux-secret" not in report.get("environment", ""), report
    assert report["new-window"][0] != 0


def test_the_scratch_is_capped_and_the_disk_stays_untouched():
    report, outcome = run_hostile("""
import os
written = 0
try:
    with open("/tmp/fill", "wb") as out:
        for _ in range(200):
            out.write(b"x" * (1 << 20))
            written += 1
except OSError as exc:
    report["error"] = str(exc)
report["written_mb"] = written
for path in ("/", "/usr", "/scratch/.."):
    try:
        open(os.path.join(path, "pwned"), "w").close()
        report.setdefault("writable", []).append(path)
    except OSError:
        pass
""", limits=sandbox.Limits(memory_mb=1024, scratch_mb=32))
    assert report["written_mb"] <= 32 and "error" in report, report
    assert "writable" not in report


def test_memory_held_in_memfds_counts_against_the_limit():
    """memfd pages are outside the RSS the old watchdog read; the cgroup (or the file size limit) counts them."""
    report, outcome = run_hostile("""
import os
held = []
for _ in range(64):
    fd = os.memfd_create("hold")
    os.write(fd, b"y" * (32 << 20))
    held.append(fd)
report["held_mb"] = 32 * len(held)
""", limits=sandbox.Limits(memory_mb=256, scratch_mb=16))
    assert report.get("held_mb", 0) < 2048, report
    assert outcome.memory_exceeded or outcome.code != 0 or "raised" in report, (report, outcome)


def test_no_terminal_and_no_inherited_descriptors():
    """Before: the candidate wrote forged verdict lines onto the user's terminal through /dev/pts/N."""
    read_end, write_end = os.pipe()  # a descriptor of the worker's that must not reach the child
    try:
        report, outcome = run_hostile(f"""
import os
report["tty"] = [os.isatty(fd) for fd in (0, 1, 2)]
report["sid_is_pid"] = os.getsid(0) == os.getpid()
try:
    os.write({write_end}, b"forged")
    report["wrote"] = True
except OSError:
    report["wrote"] = False
try:
    open("/dev/tty", "w")
    report["dev_tty"] = True
except OSError:
    report["dev_tty"] = False
""")
    finally:
        os.close(write_end)
    os.set_blocking(read_end, False)
    try:
        leaked = os.read(read_end, 100)
    except BlockingIOError:
        leaked = b""
    os.close(read_end)
    assert leaked == b"" and report["wrote"] is False
    assert report["tty"] == [False, False, False] and report["dev_tty"] is False


def test_a_venv_anywhere_is_bound_and_only_it(monkeypatch, tmp_path):
    """A venv under /tmp (or in the project) is visible in the sandbox; the folder around it is not."""
    venv = tmp_path / "project" / ".venv"
    venv.mkdir(parents=True)
    monkeypatch.setattr(sys, "prefix", str(venv))
    paths = sandbox.readable_paths()
    assert str(venv) in paths
    assert str(tmp_path / "project") not in paths and str(tmp_path) not in paths


def test_a_killed_request_leaves_no_process_behind():
    """The sandboxed process is process 1 of its PID namespace: the parent-death signal does not end
    it, so killing its parent alone left a hanging candidate running for good."""
    server = fork_server(sandbox.Limits(memory_mb=512, scratch_mb=16))
    try:
        child = server.start(functools.partial(sandbox_bodies.sleeper))
        assert child.inner is not None and child.inner != child.pid
        messages = child.messages(time.monotonic() + 2)
        assert next(messages) == {"started": True}
        child.kill("cancelled")
        list(messages)
        outcome = child.outcome()
    finally:
        server.close()
        os.rmdir(server.mountpoint)
    assert outcome.killed_for == "cancelled"
    for _ in range(100):
        if not os.path.exists(f"/proc/{child.inner}"):
            break
        time.sleep(0.05)
    assert not os.path.exists(f"/proc/{child.inner}"), open(f"/proc/{child.inner}/status").read()[:200]


def test_no_sandboxed_child_is_a_fork_of_a_process_running_jaxs_threads():
    """Issue 59 item 8: the test run printed 186 "os.fork() was called ... JAX is multithreaded, so this will
    likely lead to a deadlock" from runner/isolation/sandbox.py: its children were forked from the process that asked
    for them, here this test's, with jax's backend running. They are forked by a fork server with one thread."""
    import warnings

    import jax

    jax.devices("cpu")  # this process now runs a backend's threads (and jax warns at any fork of it)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report, outcome = run_hostile("report['pid'] = __import__('os').getpid()")
    forks = [str(w.message) for w in caught if "fork" in str(w.message)]
    assert report == {"pid": 1} and outcome.code == 0, (report, outcome)
    assert not forks, forks


def test_an_interpreter_under_tmp_is_bound_over_the_private_tmp(tmp_path, monkeypatch):
    """A venv or checkout under /tmp (CI clones there; pytest's tmp_path is there): the sandbox could not
    be built at all (its private /tmp collided with the bound folder), so every agent command was refused."""
    assert str(tmp_path).startswith("/tmp/")
    venv = tmp_path / "clone" / ".venv"
    venv.mkdir(parents=True)
    (venv / "marker.txt").write_text("the venv")
    real = sandbox.readable_paths
    monkeypatch.setattr(sandbox, "readable_paths", lambda: [*real(), str(venv)])
    report, outcome = run_hostile(f"""
report["marker"] = open({str(venv / 'marker.txt')!r}).read()
open("/tmp/mine", "w").write("private")
report["tmp"] = sorted(__import__("os").listdir("/tmp"))
try:
    open({str(venv / 'new.txt')!r}, "w")
    report["venv_writable"] = True
except OSError:
    report["venv_writable"] = False
""")
    assert outcome.code == 0 and outcome.setup_error is None, outcome
    assert report["marker"] == "the venv" and report["venv_writable"] is False
    assert "mine" in report["tmp"] and not (venv.parent.parent / "mine").exists()


def test_an_interpreter_reached_through_a_link_in_an_unbound_folder_runs(tmp_path, monkeypatch):
    """A venv made by a ``python3`` that is a link in a folder of its own (a shim folder on PATH; the README's
    newcomer test has one) names that link: the sandbox bound the venv's bin and the real interpreter, not the
    link between, so exec'ing the interpreter failed with FileNotFoundError and `pallasite fix` could verify
    nothing. The links are made again in the sandbox; nothing else of their folder is shown."""
    shims, venv = tmp_path / "shims", tmp_path / "venv" / "bin"
    shims.mkdir()
    venv.mkdir(parents=True)
    (shims / "python3").symlink_to(os.path.realpath(sys.executable))
    (shims / "secret.txt").write_text("not for the sandbox\n")
    (venv / "python3").symlink_to(shims / "python3")
    monkeypatch.setattr(sys, "executable", str(venv / "python3"))
    assert sandbox.interpreter_links() == [str(venv / "python3"), str(shims / "python3")]
    report, _ = run_hostile(f"""
import os, subprocess
report["ran"] = subprocess.run([{str(venv / 'python3')!r}, "-S", "-c", "print(6 * 7)"], capture_output=True,
                               text=True).stdout
report["listed"] = sorted(os.listdir({str(shims)!r}))
""")
    assert report.get("ran", "").strip() == "42", report
    assert report["listed"] == ["python3"]
