"""`pallasite check --keep-warm SECONDS` (engine/workers/warm_pool.py, engine/workers/warm_keeper.py): a run's check
workers kept warm by a keeper process for the next run (issue 58: `check --jobs 2` was 1.2x `--jobs
1` on 24 files, each run paying its workers' start-up). A second run must use the first run's
workers (none started again), say the same as a run without a keeper, and a keeper must leave when
its time is up; its socket lives only in a folder of this user's that no one else can open.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from pallasite.engine.workers.backend import Reply
from pallasite.engine.checker import CheckOptions
from pallasite.engine.workers.client import WorkerConfig
from pallasite.engine.engine import Engine
from pallasite.engine.workers.pool import PoolBackend
from pallasite.engine.workers.warm_pool import WarmBackend, decode_reply, encode_reply, pool_key, runtime_folder, warm_factory
from pallasite.wire.messages import ErrorInfo, PingParams, PingResult

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.pipeline  # a real component end to end (sshd, a Ray cluster, Neovim, keepers, whole evals): .ci/run's pipeline step
KERNEL = ROOT / "tests" / "data" / "lsp" / "add_ok.py"


@pytest.fixture
def runtime(monkeypatch):
    """A short XDG_RUNTIME_DIR of this test's own (a socket's path holds 107 bytes); keepers left are ended."""
    base = tempfile.mkdtemp(prefix="pw", dir="/tmp")
    monkeypatch.setenv("XDG_RUNTIME_DIR", base)
    keepers: list[int] = []
    yield base, keepers
    for pid in keepers:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    shutil.rmtree(base, ignore_errors=True)


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs: a zombie has ended (where an earlier test left this test process a child
    subreaper, an ended keeper is reparented here and waits to be reaped; it is reaped here)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    if state == "Z":
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        return False
    return True


def test_a_second_run_uses_the_first_runs_warm_workers(runtime, tmp_path):
    base, keepers = runtime
    kernel = tmp_path / "add_ok.py"
    shutil.copy(KERNEL, kernel)
    options = CheckOptions(target="v5e", tiers=(0, 1, 2))

    async def one_run() -> tuple[dict, object]:
        engine = Engine(checks=1, use_store=False, backend_factory=warm_factory(60))
        try:
            report = await engine.check(str(kernel), options)
            backend = engine.backend(options)
            assert isinstance(backend, WarmBackend)
            return dict(backend.keeper), report
        finally:
            await engine.close()

    first, report1 = asyncio.run(one_run())
    keepers.append(first["pid"])
    second, report2 = asyncio.run(one_run())
    assert second["pid"] == first["pid"] and _alive(first["pid"])  # the same keeper, still there between runs
    assert second["started"] == first["started"] == 1  # its one worker was started once, for the first run
    assert report1 == report2 and [dict(k.tiers) for k in report2.kernels] == [{0: "ok", 1: "ok", 2: "ok", 3: "not run"}]


def test_the_report_is_the_one_a_run_without_a_keeper_gives(runtime, tmp_path):
    base, keepers = runtime
    folder = tmp_path / "kernels"
    folder.mkdir()
    for path in sorted((ROOT / "examples").glob("*.py")):
        shutil.copy(path, folder)
    argv = [sys.executable, "-m", "pallasite.server.cli", "check", str(folder), "--target", "v5e", "--tiers", "0,1,2",
            "--no-store", "--jobs", "2", "--format", "json"]
    plain = subprocess.run(argv, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    warm = [subprocess.run([*argv, "--keep-warm", "60"], capture_output=True, text=True, timeout=600, cwd=tmp_path)
            for _ in range(2)]  # the keeper's first run, then one on its warm workers
    keepers.extend(_keeper_pids(base))

    def document(done) -> dict:
        assert done.returncode == 1, done.stderr[-2000:]  # examples/ holds kernels with errors
        data = json.loads(done.stdout)
        data["summary"].pop("wall_s", None)
        return data

    assert document(warm[0]) == document(plain) == document(warm[1])


def _keeper_pids(base: str) -> list[int]:
    out = []
    for sock in Path(base).rglob("pool-*.sock"):
        client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        client.connect(str(sock))
        client.sendall(b'{"kind": "hello", "checks": 1}\n')
        out.append(json.loads(client.makefile().readline())["keeper"]["pid"])
        client.close()
    return out


def test_a_keeper_leaves_when_its_time_is_up_and_a_dead_ones_socket_is_replaced(runtime):
    base, keepers = runtime
    folder, _ = runtime_folder()
    config = WorkerConfig()
    stale = folder / f"pool-{pool_key(config)}.sock"
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(stale))  # a keeper that died without removing its socket: nothing listens there
    dead.close()

    async def ping() -> tuple[Reply, dict]:
        backend = WarmBackend(config, 1, 1.5, folder)
        try:
            return await backend.request(PingParams()), dict(backend.keeper)
        finally:
            await backend.close()

    reply, keeper = asyncio.run(ping())
    keepers.append(keeper["pid"])
    assert reply.ok and isinstance(reply.result, PingResult) and reply.result.pong
    deadline = time.monotonic() + 60
    while (stale.exists() or _alive(keeper["pid"])) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not stale.exists() and not _alive(keeper["pid"])  # 1.5 s after the run left: gone, with its socket


def test_a_folder_others_can_open_is_refused_and_the_run_starts_its_own_workers(runtime, capsys):
    base, _ = runtime
    folder = Path(base) / f"pallasite-{os.getuid()}"
    folder.mkdir(mode=0o700)
    os.chmod(folder, 0o777)
    found, why = runtime_folder()
    assert found is None and "open to other users (mode 0777)" in why
    backend = warm_factory(60)(WorkerConfig(), 2)
    assert isinstance(backend, PoolBackend) and backend.lanes["check"].size == 2
    err = capsys.readouterr().err
    assert "--keep-warm" in err and "open to other users" in err and "this run starts its own workers" in err


def test_each_setting_and_folder_has_its_own_keeper(tmp_path):
    config = WorkerConfig()
    assert pool_key(config, cwd="/a") == pool_key(WorkerConfig(), cwd="/a")
    assert pool_key(config, cwd="/a") != pool_key(config, cwd="/b")
    assert pool_key(config, cwd="/a") != pool_key(WorkerConfig(memory_mb=2048), cwd="/a")
    assert pool_key(config, cwd="/a") != pool_key(WorkerConfig(env={"X": "1"}), cwd="/a")


def test_a_reply_travels_whole():
    crashed = Reply("crashed", message="the worker was killed by SIGKILL (9)", elapsed_s=1.5, exit_code=-9,
                    stderr_tail="last line", launcher=("ssh", "host"))
    assert decode_reply("ping", json.loads(json.dumps(encode_reply(crashed)))) == crashed
    ok = Reply("ok", result=PingResult(pong=True, pid=7), elapsed_s=0.1)
    assert decode_reply("ping", json.loads(json.dumps(encode_reply(ok)))) == ok
    failed = Reply("error", error=ErrorInfo("ValueError", "bad", "Traceback..."), message="ValueError: bad")
    assert decode_reply("ping", json.loads(json.dumps(encode_reply(failed)))) == failed


SLEEPER = '''"""A kernel file whose import takes long: the check's request is running when its keeper dies."""
import time

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

time.sleep(60)


def copy_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...]


def copy(x):
    return pl.pallas_call(copy_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


def example_inputs():
    return (jnp.ones((8, 128), jnp.float32),)
'''


def test_a_keeper_gone_mid_request_is_a_crashed_reply_and_the_next_request_starts_a_new_one(runtime, tmp_path):
    base, keepers = runtime
    folder, _ = runtime_folder()
    kernel = tmp_path / "sleeper.py"
    kernel.write_text(SLEEPER)

    async def go() -> tuple[Reply, Reply, dict, dict]:
        from pallasite.engine.sources import sources_for
        from pallasite.wire.messages import CheckParams

        backend = WarmBackend(WorkerConfig(), 1, 60, folder)
        try:
            assert (await backend.request(PingParams())).ok
            first = dict(backend.keeper)
            keepers.append(first["pid"])
            running = asyncio.create_task(backend.request(CheckParams(source=sources_for(str(kernel)), chip="v5e")))
            await asyncio.sleep(3)  # the worker is in the file's import
            os.kill(first["pid"], signal.SIGKILL)
            crashed = await asyncio.wait_for(running, 60)
            again = await backend.request(PingParams())
            keepers.append(backend.keeper["pid"])
            return crashed, again, first, dict(backend.keeper)
        finally:
            await backend.close()

    crashed, again, first, second = asyncio.run(go())
    assert crashed.status == "crashed" and "keeper of warm workers went away" in crashed.message
    assert again.ok and second["pid"] != first["pid"]
