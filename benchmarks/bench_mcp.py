"""Tool latency of `pallasite mcp`: the `check` tool on a small kernel, as an agent host sees it.

Starts the real server (stdio) with the official SDK's client in a temporary folder holding
examples/add.py, trusted in a temporary user trust store, and times ``call_tool("check", ...)`` end to
end (request out, result in, the result validated against the tool's output schema by the client):

- the server's start and handshake;
- ``check`` at tier 0 (source rules, in the server process) and at tiers 0-2 (a warm worker lowers the
  kernel and libtpu compiles it deviceless for the chip), each first (cold) and then warm (server running,
  worker started): the median, p90 and max of --runs calls;
- for a file, tier 2's verdict of an unchanged kernel comes back from the results store (as with
  `pallasite check`); a ``source`` text is model-written code, checked in a confined worker without the
  store, so its tiers 1-2 run at every call.

Wall clock on this host's CPU (time.perf_counter); no accelerator is involved. Prints figures, asserts
nothing.

    python benchmarks/bench_mcp.py [--runs 10] [--target v5e]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parent.parent


def _row(name: str, first_ms: float, warm: list[float]) -> str:
    warm = sorted(warm)
    p90 = warm[min(len(warm) - 1, int(0.9 * len(warm)))]
    return (f"{name:<44} first {first_ms:8.0f}   warm median {statistics.median(warm):7.0f}  p90 {p90:7.0f}  "
            f"max {max(warm):7.0f}")


async def _timed(client, args: dict) -> float:
    t0 = time.perf_counter()
    result = await client.call_tool("check", args)
    elapsed = (time.perf_counter() - t0) * 1000
    if result.is_error:
        raise SystemExit(f"check {args.get('tiers')} failed: {result.content[0].text}")
    return elapsed


async def measure(folder: Path, env: dict[str, str], runs: int, target: str) -> None:
    from mcp import Client, StdioServerParameters

    source = (folder / "add.py").read_text()
    cases = [("check add.py, tier 0", {"path": "add.py", "tiers": [0]}),
             ("check add.py, tiers 0-2 (tier 2 from the store)", {"path": "add.py", "tiers": [0, 1, 2]}),
             ("check source, tier 0", {"source": source, "path": "draft.py", "tiers": [0]}),
             ("check source, tiers 0-2 (confined, no store)", {"source": source, "path": "draft.py",
                                                                "tiers": [0, 1, 2]})]
    params = StdioServerParameters(command=sys.executable, args=["-m", "pallasite.server.cli", "mcp"],
                                   cwd=str(folder), env=env)
    t0 = time.perf_counter()
    async with Client(params, mode="legacy") as client:
        print(f"{'server start + initialize handshake':<44} {(time.perf_counter() - t0) * 1000:8.0f} ms")
        for name, args in cases:
            args = {**args, "target": target}
            first = await _timed(client, args)
            warm = [await _timed(client, args) for _ in range(runs)]
            print(_row(name, first, warm))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--target", default="v5e")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-mcp-") as tmp:
        folder = Path(tmp) / "ws"
        folder.mkdir()
        shutil.copy(ROOT / "examples" / "add.py", folder / "add.py")
        env = {**os.environ, "XDG_CONFIG_HOME": str(Path(tmp) / "config")}
        subprocess.run([sys.executable, "-m", "pallasite.server.cli", "mcp", "--trust", str(folder)], env=env,
                       check=True, capture_output=True)
        load = os.getloadavg()[0]
        print(f"host: {platform.machine()}, {os.cpu_count()} CPUs, python {platform.python_version()}, load "
              f"{load:.1f}; target {args.target}; ms per call_tool, client side, {args.runs} warm calls each")
        anyio.run(measure, folder, env, args.runs, args.target)
        print(f"load average at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
