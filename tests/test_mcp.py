"""`pallasite mcp` driven by the official MCP SDK's own client over stdio, as an agent host drives it.

Each test starts the real server (``python -m pallasite.server.cli mcp``) in a folder of its own, with a
user trust store of its own (``XDG_CONFIG_HOME``), and calls its tools: the schemas it lists (every result
is validated against them by the client), ``check`` at the line with its fix, the trust gate (a kernel whose
import writes a marker file), ``judge`` against `pallasite optimize --provider scripted` on the same
candidates, a cancelled ``tune`` whose workers end (by pid), the client leaving mid-tool, and what a
careless or hostile agent sends.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import anyio
import psutil
import pytest

pytest.importorskip("mcp", reason="the mcp extra (pip install -e '.[mcp]') is not installed")

from mcp import Client, StdioServerParameters  # noqa: E402

from pallasite.analysis.verdict import JudgedBy  # noqa: E402
from pallasite.engine.workers import spawn  # noqa: E402

DATA = Path(__file__).parent / "data"
ROOT = Path(__file__).resolve().parent.parent
SECRET = "AIzaSyFAKE-conf53-mcp-secret-0123456789abcdef"
needs_namespaces = pytest.mark.skipif(spawn.confinement_problem(sys.executable) is not None,
                                      reason=f"no confined worker here: {spawn.confinement_problem(sys.executable)}")


def server_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "config"), "GEMINI_API_KEY": SECRET, **extra}


@contextlib.asynccontextmanager
async def mcp_server(folder: Path, tmp_path: Path, mode: str = "legacy"):
    """The server over stdio; ``mode``: "legacy" (the initialize handshake hosts use) or "auto" (the SDK's
    default: the 2026 per-request protocol when the server speaks it)."""
    params = StdioServerParameters(command=sys.executable, args=["-m", "pallasite.server.cli", "mcp"],
                                   cwd=str(folder), env=server_env(tmp_path))
    async with Client(params, mode=mode) as client:
        yield client


def trust(folder: Path, tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "pallasite.server.cli", "mcp", "--trust", str(folder)],
                          capture_output=True, text=True, env=server_env(tmp_path), timeout=60)
    assert done.returncode == 0 and f"trusted {folder.resolve()}" in done.stdout, done.stdout + done.stderr


def project(tmp_path: Path, files: dict[str, Path | str], settings: str = 'target = "v5e"\n') -> Path:
    folder = tmp_path / "ws"
    folder.mkdir()
    (folder / "pyproject.toml").write_text(f"[tool.pallasite]\n{settings}")
    for name, source in files.items():
        (folder / name).write_text(source.read_text() if isinstance(source, Path) else source)
    return folder


def server_pid(folder: Path) -> int:
    """The `pallasite mcp` process this test's client started in ``folder`` (a child of the test process;
    an earlier test's server, ended but not yet reaped, is not it)."""
    found = []
    for proc in psutil.Process().children():
        with contextlib.suppress(psutil.Error):
            if proc.status() != psutil.STATUS_ZOMBIE and "mcp" in proc.cmdline() and Path(proc.cwd()) == folder.resolve():
                found.append(proc.pid)
    assert len(found) == 1, found
    return found[0]


def descendants(pid: int) -> list[int]:
    try:
        return [p.pid for p in psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def running(pids: list[int]) -> list[int]:
    alive = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
        except psutil.NoSuchProcess:
            pass
    return alive


async def until(condition, timeout_s: float, step_s: float = 0.2) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        await anyio.sleep(step_s)
    return condition()


# ---------------------------------------------------------------------------- the tools and their schemas


async def test_the_tools_are_listed_with_their_schemas(tmp_path):
    from jsonschema import Draft202012Validator

    async with mcp_server(project(tmp_path, {}), tmp_path, mode="auto") as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) == {"check", "explain", "estimate", "judge", "tune", "chips", "docs_search"}
        for tool in tools.values():
            for schema in (tool.input_schema, tool.output_schema):
                Draft202012Validator.check_schema(schema)
                assert schema["type"] == "object" and schema["properties"]
            assert "text" in tool.output_schema["required"], tool.name
            assert tool.annotations.read_only_hint and not tool.annotations.destructive_hint
        assert tools["judge"].input_schema["required"] == ["candidate"]
        explained = await client.call_tool("explain", {"code": "1"})  # validated against its output schema
        assert not explained.is_error and explained.structured_content["code"] == "PLS001"
        assert explained.content[0].text.startswith("PLS001: Block shape breaks the TPU (8, 128) tiling rule")


async def test_check_returns_the_finding_at_its_line_with_its_fix(tmp_path):
    """examples/bad_tiling.py: PLS001 at the literal 200 (line 11), the BlockSpec that uses it as a related
    place, and a fix whose edit, applied to the text, leaves no error."""
    folder = project(tmp_path, {"bad_tiling.py": ROOT / "examples" / "bad_tiling.py"})
    async with mcp_server(folder, tmp_path) as client:
        result = await client.call_tool("check", {"path": "bad_tiling.py", "tiers": [0]})
        assert not result.is_error, result.content
        out = result.structured_content
        (finding,) = [f for f in out["findings"] if f["code"] == "PLS001"]
        assert finding["file"] == str(folder / "bad_tiling.py")
        assert (finding["line"], finding["column"], finding["end_column"]) == (11, 14, 17)
        assert finding["severity"] == "error" and "not a multiple of 128" in finding["message"]
        assert [(r["line"], r["column"]) for r in finding["related"]] == [(19, 38)]
        (edit,) = finding["fix"]["edits"]
        assert edit["new_text"] == "256" and out["summary"]["errors"] == 1
        assert f"{folder / 'bad_tiling.py'}:11:14: error[PLS001]:" in result.content[0].text  # the CLI's words
        assert json.loads(result.content[1].text)["findings"][0]["code"] == "PLS001"
        lines = (folder / "bad_tiling.py").read_text().splitlines(keepends=True)
        line = lines[edit["line"] - 1]
        lines[edit["line"] - 1] = line[:edit["column"] - 1] + edit["new_text"] + line[edit["end_column"] - 1:]
        fixed = await client.call_tool("check", {"source": "".join(lines), "path": "bad_tiling.py", "tiers": [0]})
        assert not fixed.is_error and fixed.structured_content["summary"]["errors"] == 0, fixed.content[0].text


@pytest.mark.pipeline
async def test_check_locates_a_tier3_failure_at_its_statement_with_a_verified_fix(tmp_path):
    """Issue 57: a kernel whose grid drops its partial block (``//`` where ``pl.cdiv`` was meant): tier 3 finds
    its last rows never written, and the check's finding lands at the grid's ``//`` with the verified edit."""
    folder = project(tmp_path, {"rows.py": DATA / "locate" / "grid_no_cdiv.py"}, 'target = "v6e"\n')
    trust(folder, tmp_path)
    async with mcp_server(folder, tmp_path) as client:
        result = await client.call_tool("check", {"path": "rows.py", "tiers": [0, 3]})
        assert not result.is_error, result.content
        (finding,) = [f for f in result.structured_content["findings"] if f["code"] == "PLS303"]
        assert (finding["line"], finding["column"]) == (23, 15), finding
        assert finding["fix"]["title"].startswith("verified: with this change the kernel matches the reference")
        assert finding["fix"]["edits"][0]["new_text"] == "pl.cdiv(n, ROWS)"
        unlocated = await client.call_tool("check", {"path": "rows.py", "tiers": [0, 3], "locate": False})
        (plain,) = [f for f in unlocated.structured_content["findings"] if f["code"] == "PLS303"]
        assert plain["line"] != 23 and plain["fix"] is None


async def test_an_untrusted_folder_runs_no_kernel_code(tmp_path):
    """Nothing imports the kernel while the folder is untrusted (tier 0 only; the tools that run code say why
    and how to trust it); once the user trusts it, tier 1 imports it and the marker appears."""
    folder = project(tmp_path, {"kernel.py": DATA / "mcp" / "writes_marker.py"})
    marker = folder / "imported.marker"
    source = (folder / "kernel.py").read_text()
    async with mcp_server(folder, tmp_path) as client:
        checked = await client.call_tool("check", {"path": "kernel.py", "tiers": [0, 1, 2]})
        assert not checked.is_error and checked.structured_content["trusted"] is False
        assert checked.structured_content["tiers"] == [0] and "is not trusted" in checked.structured_content["not_run"]
        drafted = await client.call_tool("check", {"source": source, "path": "draft.py", "tiers": [1]})
        assert drafted.structured_content["tiers"] == [0]
        for name, args in (("estimate", {"path": "kernel.py"}), ("tune", {"path": "kernel.py"}),
                           ("judge", {"candidate": source, "file": "kernel.py"})):
            refused = await client.call_tool(name, args)
            assert refused.is_error, name
            said = refused.content[0].text
            assert "is not trusted" in said and f"pallasite mcp --trust {folder}" in said, said
        assert not marker.exists()
        trust(folder, tmp_path)  # the store is read at each call: no restart
        ran = await client.call_tool("check", {"path": "kernel.py", "tiers": [0, 1]})
        assert ran.structured_content["trusted"] is True and ran.structured_content["tiers_ran"] == [0, 1]
    assert marker.exists()


async def test_a_careless_or_hostile_agent_gets_clear_errors_and_the_server_keeps_serving(tmp_path):
    folder = project(tmp_path, {"kernel.py": DATA / "optimize" / "add.py"})
    (tmp_path / "outside.py").write_text("import os\n")
    (folder / "link.py").symlink_to(tmp_path / "outside.py")
    (folder / "huge.py").write_text("x = 1\n" * (200 << 10))
    trust(folder, tmp_path)  # so every tool gets as far as its arguments
    calls = [
        ("check", {}, "give `path`"),
        ("check", {"path": 7}, "expected string, got int"),
        ("check", {"path": "kernel.py", "tiers": [9]}, "argument tiers.0"),
        ("check", {"path": "kernel.py", "target": "v99"}, "is not one of v4, v5e"),
        ("check", {"path": "kernel.py", "rm": "-rf"}, "unknown argument(s) 'rm'"),
        ("check", {"path": "../outside.py"}, "outside the folder this server serves"),
        ("check", {"path": "link.py"}, "outside the folder this server serves"),
        ("check", {"path": "/etc/passwd"}, "outside the folder this server serves"),
        ("check", {"path": "kernel.py\x00.txt"}, "not a path"),
        ("check", {"path": "missing.py"}, "no such file"),
        ("check", {"path": "."}, "a folder, not a file"),
        ("check", {"source": "x = 1\n" * (2 << 20)}, "pallasite mcp takes at most 1,048,576"),
        ("check", {"path": "huge.py"}, "pallasite mcp reads files of at most 1,048,576"),
        ("judge", {"candidate": "x", "file": "kernel.py", "task": "."}, "exactly one of `file`"),
        ("judge", {"candidate": "x" * (10 << 20), "file": "kernel.py"}, "10,485,760 bytes of text"),
        ("judge", {"candidate": "x", "task": "."}, "no task folders found"),
        ("judge", {"candidate": "x", "file": "pyproject.toml"}, "not a Pallas kernel"),
        ("check", {"source": "x = 1\n", "path": "."}, "a folder; `source` is checked as if it were a file"),
        ("tune", {"path": "kernel.py", "max_estimates": 0}, "argument max_estimates"),
        ("explain", {"code": "PLS2O1"}, "Did you mean PLS201"),
        ("no_such_tool", {}, "no tool 'no_such_tool'"),
    ]
    async with mcp_server(folder, tmp_path) as client:
        for name, args, said in calls:
            result = await client.call_tool(name, args)
            text = result.content[0].text
            assert result.is_error and said in text, (name, args.keys(), text[:300])
            assert len(text) < 2000, "the error echoes the value back"
        ok = await client.call_tool("check", {"path": "kernel.py", "tiers": [0]})
        assert not ok.is_error and ok.structured_content["summary"]["errors"] == 0


@pytest.mark.slow
async def test_estimate_and_tune_give_the_cost_model_s_figures_and_a_configuration_tier_2_accepts(tmp_path):
    """A row-blocked add whose row block is a keyword tunable (8 by default): the estimate is labelled an
    estimate, says what bounds it and divides two figures of one model; tune's best configuration compiled
    for the chip (tier 2) and comes with the edit that writes it."""
    folder = project(tmp_path, {"kernel.py": DATA / "optimize" / "candidates" / "tunable_rows.py"})
    trust(folder, tmp_path)
    async with mcp_server(folder, tmp_path) as client:
        estimated = await client.call_tool("estimate", {"path": "kernel.py"})
        tuned = await client.call_tool("tune", {"path": "kernel.py", "max_estimates": 16, "max_compiles": 4,
                                                "verify": 1})
    assert not estimated.is_error, estimated.content[0].text
    est = estimated.structured_content
    from pallasite.runner.program.cost_model import MODEL  # the model's name as it is now (v3 was hard-coded here)

    assert est["label"] == f"estimate ({MODEL}, v5e)"
    assert est["kernel_bound"] in ("compute", "memory", "overhead")
    assert est["speedup"] == pytest.approx(est["reference_s"] / est["kernel_s"])
    assert est["estimate"]["seconds"] == est["kernel_s"] and "nothing ran on a device" in est["text"]
    assert not tuned.is_error, tuned.content[0].text
    out = tuned.structured_content
    assert out["current"] == {"block_rows": 8} and out["best"] and out["best"] != out["current"]
    assert out["compile"]["ok"] is True and out["compile"]["chip"] == "v5e" and 2 in out["compile"]["tiers_run"]
    assert out["verdict"]["compile"]["ok"] is True
    (edit,) = out["edits"]
    assert edit["new_text"] == str(out["best"]["block_rows"]) and out["speedup_vs_current"]["value"] > 1


def test_text_and_paths_an_agent_sends_are_bounded_in_the_server(tmp_path):
    """What the wire may carry but no kernel is: a lone surrogate, a NUL byte; paths that leave the folder."""
    from pallasite.server.mcp.mcp_folder import Folder, ToolRefused, text_argument

    for text, said in (("x = '\ud800'\n", "not valid Unicode text at character 5"), ("x = 1\x00", "NUL byte")):
        with pytest.raises(ToolRefused, match=said):
            text_argument({"source": text}, "source")
    assert text_argument({"source": "x = 1\n"}, "source") == "x = 1\n"
    folder = Folder.at(tmp_path)
    (tmp_path / "k.py").write_text("x = 1\n")
    assert folder.file("k.py") == folder.file(str(tmp_path / "k.py")) == (tmp_path / "k.py").resolve()
    for given in ("../k.py", "~/k.py", "/", "", None, ["k.py"]):
        with pytest.raises(ToolRefused):
            folder.file(given)


# ---------------------------------------------------------------------------- cancellation, the client leaving


def _work(cleaned: list) -> object:
    async def work() -> dict:
        try:
            await anyio.sleep(60)
        finally:  # what a tool's cleanup does: awaits (closing its engine, its workers)
            await anyio.sleep(0.2)
            await anyio.sleep(0.2)
            cleaned.append("closed")
        return {}
    return work()


async def test_a_tool_out_of_time_or_cancelled_is_stopped_and_its_cleanup_runs_to_its_end():
    """The SDK cancels a call with anyio's cancel scope, which cancels every await inside it again and
    again: a tool awaited directly would have its cleanup cut at its first await (its workers left)."""
    from pallasite.server.mcp.mcp_folder import ToolRefused
    from pallasite.server.mcp.mcp_server import run_stoppable

    cleaned: list = []
    with pytest.raises(ToolRefused, match="ran past its time limit of 0.5 s"):
        await run_stoppable(_work(cleaned), 0.5, "tune")
    assert cleaned == ["closed"]
    with anyio.move_on_after(0.5) as scope:
        await run_stoppable(_work(cleaned), 60, "tune")
    assert scope.cancelled_caught and cleaned == ["closed", "closed"]


@pytest.mark.pipeline
async def test_a_cancelled_tune_stops_its_workers(tmp_path):
    """The client cancels a tune (notifications/cancelled) once its workers run: every worker process of the
    server ends (by pid), none is left a zombie child of the server (issue 59 item 7: the sandbox's shell of a
    worker being started when the tune was cancelled was), and the server answers the next call. Cancelled three
    times, at different points of the tune."""
    folder = project(tmp_path, {"matmul.py": DATA / "tune" / "matmul.py"})
    trust(folder, tmp_path)
    async with mcp_server(folder, tmp_path) as client:
        pid = server_pid(folder)
        for wait_s in (0.0, 1.0, 2.5):
            said = []
            working = anyio.Event()

            async def progress(value, total, message):
                said.append(message)
                if descendants(pid):
                    working.set()

            with anyio.move_on_after(120) as scope:
                async with anyio.create_task_group() as group:
                    group.start_soon(client.call_tool, "tune", {"path": "matmul.py", "max_estimates": 512}, None,
                                     progress)
                    await working.wait()
                    await anyio.sleep(wait_s)
                    workers = descendants(pid)
                    group.cancel_scope.cancel()
            assert not scope.cancelled_caught, f"the tune never reached its workers: {said}"
            assert workers, said
            assert await until(lambda: not running(workers), 30), f"still running after the cancel: {running(workers)}"
            assert await until(lambda: not running(descendants(pid)), 30), running(descendants(pid))  # nor any other
            assert await until(lambda: not zombies(pid), 5), zombies(pid)
        assert not (await client.call_tool("explain", {"code": "PLS201"})).is_error


def zombies(pid: int) -> list[tuple[int, str]]:
    """The server's children that ended and were never reaped."""
    found = []
    with contextlib.suppress(psutil.NoSuchProcess):
        for child in psutil.Process(pid).children():
            with contextlib.suppress(psutil.Error):
                if child.status() == psutil.STATUS_ZOMBIE:
                    found.append((child.pid, child.name()))
    return found


@pytest.mark.slow
async def test_a_check_cancelled_mid_run_leaves_the_next_one_working(tmp_path):
    folder = project(tmp_path, {"kernel.py": DATA / "optimize" / "add.py"})
    trust(folder, tmp_path)
    async with mcp_server(folder, tmp_path) as client:
        started = anyio.Event()

        async def progress(value, total, message):
            if "tier" in message:
                started.set()

        async with anyio.create_task_group() as group:
            group.start_soon(client.call_tool, "check", {"path": "kernel.py", "tiers": [0, 1, 2, 3]}, None, progress)
            with anyio.fail_after(120):
                await started.wait()
            group.cancel_scope.cancel()
        again = await client.call_tool("check", {"path": "kernel.py", "tiers": [0, 1]})
        assert not again.is_error and again.structured_content["tiers_ran"] == [0, 1], again.content[0].text


@pytest.mark.slow
def test_the_client_leaving_mid_tool_ends_the_server_and_its_workers(tmp_path):
    """A raw client (no SDK, which would kill the process tree itself) starts a tune and closes its end of
    the pipe: the server ends, and so does every worker it started."""
    folder = project(tmp_path, {"matmul.py": DATA / "tune" / "matmul.py"})
    trust(folder, tmp_path)
    proc = subprocess.Popen([sys.executable, "-m", "pallasite.server.cli", "mcp"], cwd=folder, env=server_env(tmp_path),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        def send(message: dict) -> None:
            proc.stdin.write((json.dumps({"jsonrpc": "2.0", **message}) + "\n").encode())
            proc.stdin.flush()

        send({"id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                                                          "clientInfo": {"name": "raw", "version": "0"}}})
        assert json.loads(proc.stdout.readline())["id"] == 1
        send({"method": "notifications/initialized"})
        send({"id": 2, "method": "tools/call", "params": {"name": "tune", "arguments": {"path": "matmul.py"}}})
        deadline = time.monotonic() + 120
        while not descendants(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(1.0)
        workers = descendants(proc.pid)
        assert workers, "the tune started no worker"
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0
        deadline = time.monotonic() + 15
        while running(workers) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not running(workers), running(workers)
    finally:
        proc.kill()


# ---------------------------------------------------------------------------- judge = optimize's verdict


TAMPER = (DATA / "untrusted" / "tampering_preamble.py").read_text()
RIGHT = (DATA / "optimize" / "candidates" / "big_blocks.py").read_text()
WRONG = RIGHT.replace("o_ref[...] = x_ref[...] + y_ref[...]", "o_ref[...] = x_ref[...] + y_ref[...] + 1.0")
TAMPERING = WRONG.replace("\n\nimport jax\n", "\n\n" + TAMPER + "import jax\n", 1)
REDEFINES_REFERENCE = RIGHT.replace("def reference(x, y):\n    return x + y", "def reference(x, y):\n    return x + y + 1.0")


@pytest.mark.slow
@needs_namespaces
async def test_judge_gives_the_verdict_optimize_gives_the_same_candidates(tmp_path):
    """A wrong kernel that patches numpy, pallasite's comparisons and its cost model in its own module, and
    one that rewrites the frozen reference: `pallasite optimize --provider scripted` judges them (the table's
    verdicts), the `judge` tool judges the same texts; the same Verdict, words and judged_by."""
    folder = project(tmp_path, {"kernel.py": DATA / "optimize" / "add.py"}, "tiers = [0, 1]\n")
    trust(folder, tmp_path)
    replies = tmp_path / "replies.json"
    replies.write_text(json.dumps(["Use 128-row blocks.", "```python\n" + TAMPERING + "```",
                                   "A new reference.", "```python\n" + REDEFINES_REFERENCE + "```"]))
    done = subprocess.run([sys.executable, "-m", "pallasite.server.cli", "optimize", "kernel.py", "--provider",
                           "scripted", "--scripted-file", str(replies), "--max-iterations", "2", "--format", "json"],
                          capture_output=True, text=True, cwd=folder, env=server_env(tmp_path), timeout=600)
    rows = json.loads(done.stdout)["table"]
    assert [r["status"] for r in rows] == ["compiled, wrong", "not compiled"], rows
    async with mcp_server(folder, tmp_path) as client:
        judged = [(await client.call_tool("judge", {"candidate": text, "file": "kernel.py"}))
                  for text in (TAMPERING, REDEFINES_REFERENCE)]
    for row, result in zip(rows, judged):
        assert not result.is_error, result.content[0].text
        out = result.structured_content
        assert out["status"] == row["status"] and out["verdict"]["text"] == row["verdict_text"]
        assert out["judged_by"] == row["judged_by"] and out["verdict"]["compile"] == row["verdict"]["compile"]
        assert out["verdict"]["evidence"] == row["verdict"]["evidence"] and out["speedup"] is None
        assert row["verdict_text"] in result.content[0].text
    assert judged[0].structured_content["verdict"] == rows[0]["verdict"]  # tested: the whole Verdict, as it is
    assert "wrong_result" in judged[0].structured_content["verdict"]["evidence"]
    assert "changes the frozen tests" in judged[1].structured_content["verdict"]["text"]
    assert SECRET not in json.dumps([r.structured_content for r in judged])


@pytest.mark.slow
@needs_namespaces
async def test_judge_on_a_task_gives_the_verdict_and_speedup_eval_gives(tmp_path):
    """A JAXBench task folder (baseline.py + optimized.py): `pallasite eval --method files` and the `judge`
    tool on the same text give the same Verdict and the same estimated speedup over the task's reference."""
    folder = project(tmp_path, {})
    shutil.copytree(DATA / "eval" / "add_tuned", folder / "tasks" / "add_tuned")
    trust(folder, tmp_path)
    done = subprocess.run([sys.executable, "-m", "pallasite.server.cli", "eval", "tasks/add_tuned", "--method",
                           "files", "--format", "json"], capture_output=True, text=True, cwd=folder,
                          env=server_env(tmp_path), timeout=600)
    (row,) = json.loads(done.stdout)["methods"][0]["per_task"]
    async with mcp_server(folder, tmp_path) as client:
        result = await client.call_tool("judge", {"task": "tasks/add_tuned",
                                                  "candidate": (DATA / "eval" / "add_tuned" / "optimized.py").read_text()})
    assert not result.is_error, result.content[0].text
    out = result.structured_content
    assert out["against"] == "task" and out["status"] == row["status"] == "compiled, correct"
    assert out["verdict"] == row["verdict"]
    if row["speedup"] is None:  # no estimate pair (the judge said why): no speedup on either side
        assert out["speedup"] is None and out["speedup_refused"], out
    else:
        assert out["speedup"]["value"] == pytest.approx(row["speedup"]) and "task's reference" in out["speedup"]["text"]


@pytest.mark.slow
@needs_namespaces
async def test_a_candidate_that_forks_and_reads_proc_leaves_nothing_behind(tmp_path):
    """The candidate starts a detached sleeper in each process that imports it and looks for the key in
    every /proc it can see: it finds nothing (a right kernel is judged correct, faster by the estimate),
    and no sleeper outlives the call."""
    folder = project(tmp_path, {"kernel.py": DATA / "optimize" / "add.py"}, "tiers = [0, 1]\n")
    trust(folder, tmp_path)
    candidate = RIGHT.replace("\n\nimport jax\n", "\n\n" + (DATA / "mcp" / "forking_preamble.py").read_text()
                              + "import jax\n", 1)
    async with mcp_server(folder, tmp_path) as client:
        result = await client.call_tool("judge", {"candidate": candidate, "file": "kernel.py"})
        assert not result.is_error, result.content[0].text
        out = result.structured_content
        assert out["status"] == "compiled, correct" and out["judged_by"] == JudgedBy.JUDGE.value, out["verdict"]
        assert not running(descendants(server_pid(folder)))  # the judge's engine closed with the call

        def sleepers() -> list[int]:
            return [p.pid for p in psutil.process_iter(["cmdline"]) if p.info["cmdline"] == ["sleep", "617.25"]]

        assert await until(lambda: not sleepers(), 10), sleepers()


def test_the_mcp_extra_is_in_the_dev_extra_ci_installs():
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert extras["mcp"] == ["mcp>=2.3,<3"] and "mcp>=2.3,<3" in extras["dev"]
