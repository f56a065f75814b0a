"""Editor tier-0 latency while an optimize runs in the same server (target: p95 < 30 ms, as when idle).

    python benchmarks/bench_lsp_busy.py [--places 40] [--iterations 6] [--rounds 1]

A real LSP client over stdio against `pallasite serve` (the backend "local", timings the cost model's
estimates on this CPU, the scripted provider answering with tests/data/optimize/candidates/*). The
document edited is the document optimized: tests/data/optimize/add.py with jax's splash attention
kernel appended (~2,700 lines), so each candidate the optimize checks is analysed under the very
path being typed in (before one tier-0 state per document, the candidates' analyses replaced that
path's trees, kept sites and results). The edits are bench_lsp.py's: at ``--places`` places inside
functions of the splash part, a statement inserted then removed; edit sent -> publishDiagnostics
received (check.debounceMs = 0), client side. First idle, then while `pallasite.optimize` (auto
mode, ``--iterations``) runs: its start is awaited, the edits are made while it is running (a run
that ends early is started again), and the figures say how many edits landed during a run. Prints
the load average with the figures; exit 0 whatever the figures (this is not a timed test).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from lsprotocol import types as lsp
from pygls.uris import from_fs_path
from pytest_lsp import ClientServerConfig, client_capabilities

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_lsp import Recorder, function_statements, splash_path, summary  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "optimize"


def replies(count: int) -> list[str]:
    names = sorted(p.stem for p in (DATA / "candidates").glob("*.py"))
    out = []
    for i in range(count):
        name = names[i % len(names)]
        out += [f"Try {name}\nbecause.", "```python\n" + (DATA / "candidates" / f"{name}.py").read_text() + "```"]
    return out


async def edits(client, recorder: Recorder, uri: str, text: str, version: int, places: int,
                running=None) -> tuple[list[float], int, list[bool]]:
    """The in-function insert/remove edits; (latencies, the last version, for each edit whether an
    optimize was running from its send to its diagnostics)."""
    latencies, during = [], []
    for line, indent in function_statements(text, places):
        for change in (lsp.TextDocumentContentChangePartial(
                range=lsp.Range(lsp.Position(line, 0), lsp.Position(line, 0)), text=f"{indent}_probe = {line}\n"),
                lsp.TextDocumentContentChangePartial(
                    range=lsp.Range(lsp.Position(line, 0), lsp.Position(line + 1, 0)), text="")):
            if running is not None:
                await running()
            version += 1
            after = len(recorder.events)
            busy = running is not None and running.now()
            sent = time.perf_counter()
            client.text_document_did_change(lsp.DidChangeTextDocumentParams(
                lsp.VersionedTextDocumentIdentifier(uri=uri, version=version), [change]))
            latencies.append(await recorder.wait(uri, version, after) - sent)
            during.append(bool(busy and running.now()))
    return latencies, version, during


class Optimizing:
    """Keeps an optimize of ``uri`` running: awaiting it returns once one is running."""

    def __init__(self, client, uri: str, iterations: int) -> None:
        self.client, self.uri, self.iterations = client, uri, iterations
        self.task: asyncio.Task | None = None
        self.runs, self.results = 0, []

    def now(self) -> bool:
        return self.task is not None and not self.task.done()

    async def __call__(self) -> None:
        if self.now():
            return
        if self.task is not None:
            self.results.append(self.task.result())
        self.runs += 1
        self.task = asyncio.ensure_future(self.client.workspace_execute_command_async(lsp.ExecuteCommandParams(
            command="pallasite.optimize", arguments=[{"uri": self.uri, "mode": "auto", "iterations": self.iterations}])))
        while not await self._started():
            await asyncio.sleep(0.05)

    async def _started(self) -> bool:
        if self.task.done():
            return True
        stats = await self.client.protocol.send_request_async("pallasite/serverStats", None)
        return any(getattr(j, "kind", None) == "optimize" and getattr(j, "state", None) == "running"
                   for j in stats.jobs or ())


async def server_side(client, count: int) -> list[float]:
    stats = await client.protocol.send_request_async("pallasite/serverStats", None)
    return list(stats.tier0Seconds)[-count:]


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


async def run(args: argparse.Namespace) -> None:
    work = Path(tempfile.mkdtemp(prefix="pallasite-bench-busy-"))
    try:
        folder = work / "ws"
        (folder / ".pallasite").mkdir(parents=True)
        path = folder / "add.py"
        text = (DATA / "add.py").read_text() + "\n\n# jax's splash attention kernel, appended\n" + splash_path().read_text()
        path.write_text(text)
        script = work / "replies.json"
        script.write_text(json.dumps(replies(args.iterations * (args.rounds + 4) * 2)))
        env = dict(os.environ, XDG_CONFIG_HOME=str(work / "config"))
        recorder = Recorder()
        config = ClientServerConfig(server_command=[sys.executable, "-m", "pallasite.server.cli", "serve"],
                                    server_env=env, client_factory=recorder.client)
        client = await config.start()
        await client.initialize_session(lsp.InitializeParams(
            capabilities=client_capabilities("visual-studio-code"), root_uri=from_fs_path(str(folder)),
            workspace_folders=[lsp.WorkspaceFolder(from_fs_path(str(folder)), "bench")],
            initialization_options={"pallasite": {
                "target": "v6e", "tiers": [0, 1], "trust": {"mode": "always"}, "backend": {"kind": "local"},
                "check": {"debounceMs": 0, "onOpen": False},
                "agent": {"provider": "scripted", "scriptedFile": str(script)}}}))
        print(f"host: {os.cpu_count()} CPUs, python {sys.version.split()[0]}; load average {load()}")
        uri = from_fs_path(str(path))
        client.text_document_did_open(lsp.DidOpenTextDocumentParams(
            lsp.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)))
        await recorder.wait(uri, 1, 0)
        idle, version, _ = await edits(client, recorder, uri, text, 1, args.places)
        print(f"idle (load average {load()}):")
        print(summary(f"  tier-0 diagnostics after edits inside functions ({args.places} places, "
                      f"{len(text.splitlines())} lines; client side)", idle, 30))
        print(summary("  the same, server side (debounce end -> published)", await server_side(client, len(idle)), 30))
        optimizing = Optimizing(client, uri, args.iterations)
        busy, during = [], []
        for _ in range(args.rounds):
            found, version, landed = await edits(client, recorder, uri, text, version, args.places, optimizing)
            busy += found
            during += landed
        print(f"while optimize runs on the same document (load average {load()}; {optimizing.runs} run(s) started, "
              f"{sum(during)} of {len(busy)} edits sent and answered while one ran):")
        print(summary("  tier-0 diagnostics after edits inside functions (client side)", busy, 30))
        print(summary("  the same, server side (debounce end -> published)", await server_side(client, len(busy)), 30))
        if any(during):
            print(summary("  only those sent and answered while a run was in progress",
                          [t for t, d in zip(busy, during) if d], 30))
        if optimizing.task is not None:
            try:
                result = await asyncio.wait_for(optimizing.task, 300)
                print(f"last optimize: {str(result)[:300]}")
            except Exception as exc:  # noqa: BLE001 - the figures above stand
                print(f"last optimize did not finish cleanly: {type(exc).__name__}: {exc}")
        await client.shutdown_session()
        await client.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--places", type=int, default=40, help="places inside functions edited (2 edits each)")
    parser.add_argument("--iterations", type=int, default=6, help="optimize iterations per run")
    parser.add_argument("--rounds", type=int, default=1, help="rounds of the edits while optimize runs")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
