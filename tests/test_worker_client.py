"""The worker process end to end: a real `pallasite worker` driven by WorkerClient.

One warm worker serves the well-behaved requests; the crash, hang and memory tests use their own
small-limit clients, since those kill workers on purpose.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import shutil
import signal

import pytest
import pytest_asyncio

from pallasite.engine.workers.client import Reply, WorkerClient, WorkerConfig, run_requests_sync
from pallasite.engine.workers.pool import local_backend
from pallasite.engine.sources import sources_for
from pallasite.wire.messages import (
    CheckParams,
    ChipsParams,
    FunctionInfo,
    ImportParams,
    PingParams,
    Stage,
)

DATA = os.path.join(os.path.dirname(__file__), "data", "worker")
pytestmark = pytest.mark.asyncio(loop_scope="module")


def fixture(name: str) -> str:
    return os.path.join(DATA, name)


def imp(path: str, text: str | None = None) -> ImportParams:
    """Import the file: its text and its local modules travel in the request."""
    return ImportParams(source=sources_for(path, text))


@dataclasses.dataclass(frozen=True)
class LaunchRockets:
    OP = "launch_rockets"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def warm():
    client = WorkerClient(WorkerConfig(timeout_s=30, memory_mb=2048))
    await client.start()
    yield client
    await client.close()


def worker_pid(client: WorkerClient) -> int:
    """The pid the worker sees for itself: in the sandbox (engine/workers/spawn.py) it is process 2 of its
    own PID namespace (under the namespace's shell), else the pid the client started."""
    from pallasite.engine.workers import spawn

    return 2 if client.config.sandbox != "off" and spawn.sandbox_available() is None else client.pid


async def test_handshake_reports_versions_and_cpu_platform(warm):
    from importlib import metadata

    hello = warm.handshake
    assert hello.protocol == 2 and hello.pid == worker_pid(warm)
    assert hello.jax == metadata.version("jax") and hello.jaxlib == metadata.version("jaxlib")
    assert hello.platform == "cpu" and hello.devices and hello.error is None
    assert {"ping", "versions", "chips", "import", "check"} <= set(hello.ops)


async def test_ping_and_unknown_op(warm):
    reply = await warm.request(PingParams())
    assert reply.status == "ok" and reply.result.pid == worker_pid(warm)
    unknown = await warm.request(LaunchRockets())
    assert unknown.status == "error" and unknown.error.type == "UnknownOp" and "ping" in unknown.message


async def test_prints_at_import_and_from_a_kernel_do_not_corrupt_the_protocol(warm):
    reply = await warm.request(imp(fixture("prints_everywhere.py")))
    assert reply.status == "ok", reply.message
    assert reply.result.constants["RESULT_SUM"] == 2.0 * 8 * 128
    assert FunctionInfo("double", 20) in reply.result.functions
    await asyncio.sleep(0.2)  # let the stderr drain catch up
    tail = warm.stderr_tail(50)
    assert "hello from the user's module" in tail and "raw bytes on fd 1" in tail
    assert "kernel sees 1.0" in tail  # pl.debug_print from inside the kernel
    assert (await warm.request(PingParams())).status == "ok"


async def test_environment_is_the_allowlist(warm, monkeypatch):
    # the variables exist in the client's environment; the worker must not see the secret ones
    monkeypatch.setenv("GEMINI_API_KEY", "secret-1")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret-2")
    monkeypatch.setenv("GITHUB_TOKEN", "secret-3")
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_enable_fast_math=false")
    client = WorkerClient(WorkerConfig(timeout_s=30))
    try:
        reply = await client.request(imp(fixture("reports_environment.py")))
    finally:
        await client.close()
    assert reply.status == "ok", reply.message
    seen = reply.result.constants["ENVIRONMENT"]
    assert not {"GEMINI_API_KEY", "AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN"} & set(seen)
    assert "secret" not in " ".join(seen.values())
    # the user's flags are kept; the virtual CPU device count (engine/workers/devices.py) is added
    assert seen["XLA_FLAGS"].split() == ["--xla_cpu_enable_fast_math=false", "--xla_force_host_platform_device_count=8"]
    assert seen["JAX_PLATFORMS"] == "cpu" and seen["TPU_SKIP_MDS_QUERY"] == "1"


async def test_x64_set_by_one_file_does_not_leak_into_the_next_request(warm):
    first = await warm.request(imp(fixture("enables_x64.py")))
    assert first.status == "ok" and first.result.constants["DEFAULT_FLOAT"] == "float64"
    second = await warm.request(imp(fixture("default_dtype.py")))
    assert second.status == "ok" and second.result.constants["DEFAULT_FLOAT"] == "float32"


async def test_an_import_error_names_the_users_file_and_line(warm):
    reply = await warm.request(imp(fixture("raises_at_import.py")))
    assert reply.status == "error" and reply.error.type == "ValueError"
    assert "block (8, 128) is not allowed here" in reply.message
    assert f'File "{fixture("raises_at_import.py")}", line 7' in reply.error.traceback


async def test_unsaved_text_and_sibling_edits_are_seen(warm, tmp_path):
    shutil.copy(fixture("uses_helper.py"), tmp_path / "uses_helper.py")
    (tmp_path / "helper_blocks.py").write_text("BLOCK_ROWS = 256\n")
    first = await warm.request(imp(str(tmp_path / "uses_helper.py")))
    assert first.status == "ok" and first.result.constants["ROWS"] == 256
    (tmp_path / "helper_blocks.py").write_text("BLOCK_ROWS = 512\n")
    second = await warm.request(imp(str(tmp_path / "uses_helper.py")))
    assert second.status == "ok" and second.result.constants["ROWS"] == 512
    buffer = (tmp_path / "uses_helper.py").read_text().replace("ROWS = BLOCK_ROWS", "ROWS = BLOCK_ROWS * 3")
    third = await warm.request(imp(str(tmp_path / "uses_helper.py"), buffer))
    assert third.status == "ok" and third.result.constants["ROWS"] == 1536


async def test_concurrent_callers_are_served_one_at_a_time(warm):
    replies = await asyncio.gather(*(warm.request(PingParams()) for _ in range(5)))
    assert [r.status for r in replies] == ["ok"] * 5


async def test_progress_reaches_the_callback(warm):
    seen: list[str] = []
    reply = await warm.request(ChipsParams(probe=False), on_progress=lambda p: seen.append(p.message))
    assert reply.status == "ok" and {c.name for c in reply.result.chips} >= {"v4", "v5e", "v5p", "v6e"}
    assert seen and "chip table" in seen[0]


# --------------------------------------------------------------------------- workers that die


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def fragile():
    """One client the tests below crash, hang and overfill in turn (each death costs one restart)."""
    # 60 s: on a loaded shared host, filling 1 GiB page by page can take longer than 20 s
    client = WorkerClient(WorkerConfig(timeout_s=60, memory_mb=1024, cancel_grace_s=0.5))
    await client.start()
    yield client
    await client.close()


async def test_hang_at_import_times_out_and_the_worker_keeps_serving(fragile):
    pid = fragile.pid
    reply = await fragile.request(imp(fixture("hangs_at_import.py")), timeout_s=3)
    assert reply.status == "timed_out" and "3 s" in reply.message
    after = await fragile.request(PingParams())
    assert after.status == "ok" and fragile.pid == pid  # interrupted, not killed


async def test_native_hang_is_killed_and_the_worker_replaced(fragile):
    pid, restarts = fragile.pid, fragile.restarts
    reply = await fragile.request(imp(fixture("stuck_in_native_code.py")), timeout_s=3)
    assert reply.status == "timed_out" and "killed" in reply.message
    assert reply.exit_code == -signal.SIGKILL
    after = await fragile.request(PingParams())
    assert after.status == "ok" and fragile.pid != pid and fragile.restarts == restarts + 1


@pytest.mark.parametrize(
    "name, code, words",
    [("exits_at_import.py", 3, "exited with code 3"), ("kills_itself.py", -signal.SIGKILL, "killed by SIGKILL")],
)
async def test_crash_is_reported_with_how_it_ended_and_the_next_request_works(fragile, name, code, words):
    restarts = fragile.restarts
    reply = await fragile.request(imp(fixture(name)))
    assert reply.status == "crashed" and reply.exit_code == code and words in reply.message
    assert (await fragile.request(PingParams())).status == "ok" and fragile.restarts == restarts + 1


@pytest.mark.pipeline
async def test_memory_over_the_limit_is_killed_and_reported(fragile):
    reply = await fragile.request(imp(fixture("allocates_memory.py")))
    assert reply.status == "memory" and "1024 MiB" in reply.message
    assert (await fragile.request(PingParams())).status == "ok"


async def test_cancelling_the_caller_cancels_the_request_and_the_worker_survives(fragile):
    await fragile.start()
    pid = fragile.pid
    task = asyncio.create_task(fragile.request(imp(fixture("hangs_at_import.py"))))
    await asyncio.sleep(1.0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert (await fragile.request(PingParams())).status == "ok" and fragile.pid == pid


def small(**kwargs) -> WorkerConfig:
    base = dict(timeout_s=20, memory_mb=1536, cancel_grace_s=0.5)
    base.update(kwargs)
    return WorkerConfig(**base)


@pytest.mark.slow  # two more worker starts; the pool's scheduling is tested with fakes in test_backends.py
async def test_pool_runs_requests_on_separate_workers():
    # outside the PID namespace, so the pid a ping reports is the one the client started (inside it,
    # every worker is pid 2)
    pool = local_backend(small(sandbox="off"), checks=2)
    try:
        replies = await asyncio.gather(pool.request(PingParams()), pool.request(PingParams()))
        assert {r.result.pid for r in replies} == {c.pid for c in pool.workers("check")}
        assert len({r.result.pid for r in replies}) == 2
    finally:
        await pool.close()


@pytest.mark.slow  # test_chips exercises the same helper through `pallasite chips`
async def test_sync_helper_for_the_cli():
    requests = [PingParams(), imp(fixture("default_dtype.py"))]
    replies = await asyncio.to_thread(run_requests_sync, small(), requests)
    assert [r.status for r in replies] == ["ok", "ok"] and isinstance(replies[0], Reply)
    assert replies[1].result.constants["DEFAULT_FLOAT"] == "float32"


async def test_a_worker_that_cannot_start_is_a_not_started_reply():
    client = WorkerClient(small(python="/nonexistent/python3"))
    reply = await client.request(PingParams())
    assert reply.status == "not_started" and reply.start_problem == "not_found"
    assert "could not start the worker" in reply.message


# --------------------------------------------------------------------------- ssh-style workers


def launcher_config(**kwargs) -> WorkerConfig:
    """A worker started through a command prefix, as `ssh host pallasite worker` would be; here the
    prefix is `env PATH=<venv bin>:...`, so the same code path runs without an ssh server."""
    import sys

    bin_dir = os.path.dirname(sys.executable)
    return small(command=("env", f"PATH={bin_dir}:{os.environ.get('PATH', '')}"), **kwargs)


async def test_launched_worker_filters_its_own_environment(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "secret-4")
    monkeypatch.setenv("JAX_DEBUG_NANS", "0")
    config = launcher_config()
    assert config.environment()["OPENAI_API_KEY"] == "secret-4"  # the launcher keeps it (ssh needs its env)
    async with WorkerClient(config) as client:
        reply = await client.request(imp(fixture("reports_environment.py")))
    assert reply.status == "ok", reply.message
    seen = reply.result.constants["ENVIRONMENT"]
    assert "OPENAI_API_KEY" not in seen and seen["JAX_DEBUG_NANS"] == "0" and seen["JAX_PLATFORMS"] == "cpu"


@pytest.mark.pipeline
async def test_launched_worker_enforces_its_own_memory_limit():
    async with WorkerClient(launcher_config(memory_mb=1024, timeout_s=60)) as client:
        reply = await client.request(imp(fixture("allocates_memory.py")))
        assert reply.status == "memory" and reply.exit_code == 86
        assert "above the limit of 1024 MiB" in reply.stderr_tail


# --------------------------------------------------------------------------- the check op


async def test_check_op_runs_in_the_worker_with_progress(warm):
    seen: list = []
    params = CheckParams(source=sources_for(fixture("three_kernels.py")), chip="v5e", tiers=(1,))
    reply = await warm.request(params, on_progress=seen.append)
    assert reply.status == "ok", reply.message
    entries = {e.name: e.states() for e in reply.result.entries}
    assert entries == {"add": {"1": "ok"}, "row_softmax": {"1": "ok"}, "matmul": {"1": "ok"}}
    assert any((p.stage, p.tier, p.entry) == (Stage.TIER, 1, "matmul") for p in seen)  # structured, not words
    assert seen[0].stage == Stage.IMPORT


async def test_a_file_reading_stdin_gets_end_of_file_not_protocol_bytes(warm):
    reply = await warm.request(imp(fixture("reads_stdin.py")))
    assert reply.status == "error" and reply.error.type == "EOFError"
    assert (await warm.request(PingParams())).status == "ok"


# --------------------------------------------------------------------------- the wire itself


async def test_raw_protocol_cancel_of_running_and_queued_requests():
    """Speak the documented JSON lines to `python -m pallasite.runner.worker` directly."""
    import json
    import sys

    from pallasite.wire import env

    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "pallasite.runner.worker", "--platforms", "cpu",
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
        env=env.worker_environment(os.environ))

    async def receive() -> dict:
        return json.loads(await asyncio.wait_for(proc.stdout.readline(), 60))

    def send(msg: dict) -> None:
        proc.stdin.write((json.dumps(msg) + "\n").encode())

    try:
        hello = await receive()
        assert hello["kind"] == "handshake" and hello["protocol"] == 2
        with open(fixture("hangs_at_import.py"), encoding="utf-8") as f:
            source = {"file": {"path": fixture("hangs_at_import.py"), "text": f.read()}}
        send({"kind": "request", "id": "a", "op": "import", "params": {"source": source}})
        send({"kind": "request", "id": "b", "op": "ping", "params": {}})
        send({"kind": "cancel", "id": "b"})
        await asyncio.sleep(0.5)
        send({"kind": "cancel", "id": "a"})
        send({"kind": "request", "id": "c", "op": "ping", "params": {}, "deadline_s": 5})
        replies: dict = {}
        while len(replies) < 3:  # progress messages may come first
            message = await receive()
            if message["kind"] == "result":
                replies[message["id"]] = message
            else:
                assert message["kind"] == "progress" and message["stage"] in ("import", "starting")
        assert replies["a"]["error"]["type"] == "Cancelled" and "while running" in replies["a"]["error"]["message"]
        assert replies["b"]["error"]["type"] == "Cancelled" and "before it started" in replies["b"]["error"]["message"]
        assert replies["c"]["ok"] and replies["c"]["result"]["pong"]
        send({"kind": "shutdown"})
        assert await asyncio.wait_for(proc.wait(), 10) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_files_in_the_working_folder_do_not_shadow_the_workers_modules(tmp_path):
    (tmp_path / "json.py").write_text("raise ImportError('the user json.py shadowed the stdlib')\n")
    async with WorkerClient(small(cwd=str(tmp_path))) as client:
        assert (await client.request(PingParams())).status == "ok"


# --------------------------------------------------------------------------- files that are not on the worker's machine


async def test_a_file_whose_folder_is_not_on_the_workers_machine_is_checked_from_what_the_request_carries(warm):
    """What a remote worker sees: the laptop's paths do not exist there; the request carries the
    file and its local module, and tracebacks still name the laptop's paths."""
    from pallasite.wire.messages import SourceFile, Sources

    with open(fixture("uses_helper.py"), encoding="utf-8") as f:
        text = f.read()
    laptop = "/nonexistent/laptop/kernels"
    assert not os.path.exists(laptop)

    def sent(helper: str) -> Sources:
        return Sources(SourceFile(f"{laptop}/uses_helper.py", text),
                       modules=(SourceFile(f"{laptop}/helper_blocks.py", helper, module="helper_blocks"),), root=laptop)

    check = await warm.request(CheckParams(source=sent("BLOCK_ROWS = 64\n"), chip="v5e", tiers=(1,)))
    assert check.status == "ok", check.message
    [entry] = check.result.entries
    assert entry.states() == {"1": "ok"} and entry.mosaic_calls == 1
    broken = await warm.request(ImportParams(source=sent("BLOCK_ROWS = 64\nraise ValueError('bad helper')\n")))
    assert broken.status == "error" and broken.error.type == "ValueError"
    assert f'File "{laptop}/helper_blocks.py", line 2' in broken.error.traceback
