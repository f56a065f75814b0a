"""`pallasite mcp`: the Model Context Protocol server (stdio only; no network listener), on the official SDK.

The tools are data (server/mcp/mcp_schemas.py) and plain functions (server/mcp/mcp_tools.py, server/mcp/mcp_judging.py);
this module only serves them over the SDK's low-level ``Server``:

- ``tools/list``: each tool with its input and output schema;
- ``tools/call``: the arguments checked against the input schema (a clear one-line error otherwise), the
  tool run as a task of its own, its structured result returned with the command line's text first and
  the result as JSON beside it. A refusal (``ToolRefused``) or any other failure becomes the tool's error
  result (``isError``): the server never falls over for a call's sake;
- progress: a call that asked for it (``_meta.progressToken``) gets ``notifications/progress`` with what
  the tool is doing, and a heartbeat every few seconds while it works;
- cancellation: ``notifications/cancelled``, the client going away, and the call's own time limit cancel
  the tool's task once and wait (shielded) for it to end, so its ``finally`` blocks close the engines and
  stop their workers (engine/workers/client.py: told to stop, killed if they do not); a task that does not end in
  ``STOP_GRACE_S`` has every worker of the server killed (engine/workers/spawn.py).

The tools that run code (estimate, judge, tune) run at most ``LONG_AT_ONCE`` at a time; checks share one
warm engine for the folder (the results store as `pallasite check` keeps it). When the client goes away
(end of input), the server closes that engine and ends with its workers (server/lifetime.py).
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable

import anyio
import mcp_types as types

from .mcp_folder import Folder, ToolRefused
from .mcp_schemas import TOOLS, ToolSpec, arguments_problem

logger = logging.getLogger(__name__)
LONG_AT_ONCE = 2  # estimate / judge / tune calls running at once; more wait (and say so)
STOP_GRACE_S = 20.0  # how long a cancelled tool may take to stop its workers before they are killed
HEARTBEAT_S = 5.0
DEFAULT_LIMIT_S = {"check": 900.0, "estimate": 900.0, "judge": 1800.0, "tune": 1800.0}
INSTRUCTIONS = (
    "pallasite: the TPU compiler's verdict on JAX/Pallas kernels without a TPU. `check` a kernel file (or your "
    "draft's text) before running it: findings at the line with fixes as text edits; `explain` a code; "
    "`docs_search` the Pallas docs; `estimate` a kernel's time for a chip (cost model, labelled estimate); `judge` "
    "a rewritten kernel against the user's original exactly as `pallasite optimize` would; `tune` block sizes. "
    "Paths are inside the folder the server started in; code runs only in a folder the user trusts.")


@dataclass
class McpState:
    """What the tools share: the folder, one warm engine for checks, the slots of the long tools."""

    folder: Folder
    engine: Any
    long_slots: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(LONG_AT_ONCE))

    async def close(self) -> None:
        await self.engine.close()


def tool_functions() -> dict[str, Callable[[McpState, dict, Any], Awaitable[dict]]]:
    from . import mcp_judging, mcp_tools

    return {"check": mcp_tools.check, "explain": mcp_tools.explain, "chips": mcp_tools.chips,
            "docs_search": mcp_tools.docs_search, "estimate": mcp_judging.estimate, "judge": mcp_judging.judge,
            "tune": mcp_judging.tune}


def listed_tools() -> list[types.Tool]:
    hints = types.ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False)
    return [types.Tool(name=t.name, title=t.title, description=t.description, input_schema=t.input,
                       output_schema=t.output, annotations=hints) for t in TOOLS.values()]


# ---------------------------------------------------------------------------- progress


class Progress:
    """What a tool says while it works, sent as ``notifications/progress`` in order (a counter that only
    grows), with a heartbeat while it is quiet. ``say`` is a plain callback: the engine's code calls it."""

    def __init__(self, send: Callable[[float, float | None, str], Awaitable[None]] | None) -> None:
        self._send, self._queue = send, asyncio.Queue()
        self._sender: asyncio.Task | None = None
        self._count, self._started = 0, time.monotonic()

    def say(self, message: str, fraction: float | None = None) -> None:
        if self._send is not None:
            shown = f"{message} ({fraction:.0%})" if isinstance(fraction, (int, float)) else message
            self._queue.put_nowait(" ".join(str(shown).split())[:300])

    async def __aenter__(self) -> "Progress":
        if self._send is not None:
            self._sender = asyncio.ensure_future(self._drain())
        return self

    async def __aexit__(self, kind: Any, *exc: Any) -> None:
        if self._sender is not None:
            if kind is None:  # the tool finished: what it said is sent first (briefly)
                with anyio.move_on_after(1.0):
                    await self._queue.join()
            self._sender.cancel()
            await asyncio.gather(self._sender, return_exceptions=True)

    async def _drain(self) -> None:
        while True:
            try:
                message, queued = await asyncio.wait_for(self._queue.get(), HEARTBEAT_S), True
            except asyncio.TimeoutError:
                message, queued = f"still working ({time.monotonic() - self._started:.0f} s)", False
            self._count += 1
            try:
                await self._send(float(self._count), None, message)
            except Exception:  # noqa: BLE001 - a client that left cannot stop the tool's own cleanup
                return
            finally:
                if queued:
                    self._queue.task_done()


# ---------------------------------------------------------------------------- one call


async def run_stoppable(work: Awaitable[dict], limit_s: float, name: str) -> dict:
    """``work`` as a task of its own, within ``limit_s``. Cancelled (by the client, or its leaving) or out of
    time, the task is cancelled once and awaited shielded, so its cleanup stops its workers."""
    task = asyncio.ensure_future(work)
    try:
        return await asyncio.wait_for(asyncio.shield(task), limit_s)
    except asyncio.TimeoutError:
        await _stop(task)
        raise ToolRefused(f"{name}: ran past its time limit of {limit_s:g} s (time_limit_s); stopped, with its "
                          "workers") from None
    except BaseException:
        await _stop(task)
        raise


async def _stop(task: asyncio.Task) -> None:
    from ...engine.workers import spawn

    task.cancel()
    with anyio.CancelScope(shield=True):
        done, _ = await asyncio.wait({task}, timeout=STOP_GRACE_S)
    if not done:  # its cleanup hangs: no worker of this server survives it (the next check starts fresh ones)
        logger.warning("pallasite mcp: a cancelled tool did not stop within %.0f s; killed workers %s",
                       STOP_GRACE_S, spawn.kill_all())
    elif not task.cancelled() and task.exception() is not None:
        logger.info("pallasite mcp: a cancelled tool ended with %r", task.exception())


async def call(state: McpState, spec: ToolSpec, arguments: dict, progress: Progress) -> dict:
    """One tool call: its slot (the long tools), its time limit, the tool's function."""
    tool = tool_functions()[spec.name]
    limit = float(arguments.get("time_limit_s") or DEFAULT_LIMIT_S.get(spec.name, 300.0))
    if not spec.runs_code:
        return await run_stoppable(tool(state, arguments, progress), limit, spec.name)
    if state.long_slots.locked():
        progress.say(f"waiting: {LONG_AT_ONCE} estimate/judge/tune calls are running; this one starts after one ends")
    async with state.long_slots:
        return await run_stoppable(tool(state, arguments, progress), limit, spec.name)


def result_of(result: dict) -> types.CallToolResult:
    from .mcp_tools import as_json_text

    return types.CallToolResult(content=[types.TextContent(type="text", text=result["text"]),
                                         types.TextContent(type="text", text=as_json_text(result))],
                                structured_content=result)


def error_of(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=f"error: {message}")], is_error=True)


def _progress_token(meta: Any) -> Any:
    """The call's ``_meta.progressToken`` (None: it asked for no progress)."""
    if isinstance(meta, dict):
        return meta.get("progress_token", meta.get("progressToken"))
    return getattr(meta, "progress_token", None)


def handlers(state: McpState) -> dict[str, Any]:
    """The SDK's ``on_list_tools`` and ``on_call_tool`` over ``state``."""

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed_tools())

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        spec = TOOLS.get(params.name)
        if spec is None:
            return error_of(f"no tool {params.name[:80]!r}; the tools are {', '.join(TOOLS)}")
        arguments = params.arguments if params.arguments is not None else {}
        problem = arguments_problem(spec, arguments)
        if problem:
            return error_of(problem)
        wants = _progress_token(ctx.meta) is not None
        try:
            async with Progress(ctx.session.report_progress if wants else None) as progress:
                return result_of(await call(state, spec, arguments, progress))
        except ToolRefused as err:
            return error_of(str(err))
        except Exception as err:  # noqa: BLE001 - one call's failure is its result, never the server's end
            traceback.print_exc(file=sys.stderr)
            return error_of(f"internal error in pallasite mcp {spec.name}: {type(err).__name__}: {str(err)[:500]} "
                            "(the server keeps serving; the traceback is in its log: please report it)")

    return {"on_list_tools": list_tools, "on_call_tool": call_tool}


# ---------------------------------------------------------------------------- the server


async def _serve(root: Path) -> None:
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server

    from ... import __version__
    from ...engine.engine import Engine

    state = McpState(Folder.at(root), Engine(checks=1, workspace=root))
    server = Server("pallasite", version=__version__, title="pallasite", instructions=INSTRUCTIONS,
                    **handlers(state))
    try:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())
    finally:
        with anyio.CancelScope(shield=True):
            await state.close()


def serve(root: Path) -> int:
    """Serve the folder over stdin/stdout until the client leaves; 0 then."""
    anyio.run(_serve, root)
    return 0
