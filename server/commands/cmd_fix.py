"""`pallasite fix FILE`: an LLM proposes a minimal edit; it is printed only once the checker verified it.

    pallasite fix kernel.py --provider gemini              # the verified diff, or "no verified fix"
    pallasite fix kernel.py --line 19 --apply              # fix line 19's errors, write the file
    pallasite fix kernel.py --provider openai --base-url http://127.0.0.1:11434/v1 --model qwen2.5-coder
    pallasite fix kernel.py --provider replay:3f2a9c01d4e5  # re-run a recorded fix without the model
    pallasite fix kernel.py --format json                  # versioned JSON: edit, rounds, tokens, verdicts

JSON (version 1; new keys may be added within it): ``{"version": 1, "tool": "pallasite fix", "target",
"applied", "ok", "path", "message", "label", "explanation", "diff", "edits": [{"line", "end_line",
"new_text"}], "rounds", "attempts": [{"round", "verdict", "detail", "explanation", "diff"}], "usage":
{"calls", "input_tokens", "output_tokens", "thinking_tokens", "cost_usd"}, "seconds", "run_id",
"provider", "tiers", "verdicts": {kernel: {tier: status}}, "fixed_text", "written", "not_applied_why"}`` (lines
1-based, ``end_line`` exclusive; ``fixed_text`` null unless verified). ``--apply`` writes over FILE only if it is
byte-identical to what the run started from; otherwise the fix goes to ``<stem>.fixed.py`` (``written``) and
``not_applied_why`` says why.

Budgets (agent.maxRounds, maxTokens, maxSeconds, ...) come from ``[tool.pallasite]``; which model
receives the code (provider, model, base URL, key variable) only from the command line or the
editor's settings. Exit status: 0 a verified fix (or nothing to fix), 1 no verified fix, 2 usage or
configuration error.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from .console import progress_stream

JSON_VERSION = 1
_DETAIL_LINES = 12  # a rejected round's detail shown in the text output (the JSON has all of it)


def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    from . import flags

    parser.add_argument("path", metavar="FILE", help="the kernel file to fix")
    parser.add_argument("--line", type=int, metavar="N", help="fix the errors on line N (1-based); default: all errors")
    flags.add_model(parser, command)
    flags.add(parser, "--max-rounds", command, dest="rounds")
    flags.add(parser, "--target", command)
    flags.add(parser, "--tiers", command)
    flags.add(parser, "--apply", command)
    flags.add(parser, "--format", command)
    flags.add(parser, "--allow-unconfined", command)


def run(args: argparse.Namespace) -> int:
    """Check the inputs, run the fix job, write and render its outcome."""
    from ...agents.llm.providers import ProviderError

    from .flags import UsageError

    try:
        setup = _setup(args)
    except UsageError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except Exception as err:  # noqa: BLE001 - unreadable file
        print(f"error: {args.path}: cannot read it ({err})", file=sys.stderr)
        return 2
    try:
        outcome = asyncio.run(_fix(args, setup))
    except ProviderError as err:
        outcome = str(err)
    if isinstance(outcome, str):
        print(f"error: {outcome}", file=sys.stderr)
        return 2
    written = None
    if outcome.ok and args.apply:
        from .apply_file import apply_result

        written = apply_result(args.path, setup.started, outcome.fixed_text, beside=".fixed.py")
    print(_render(args, setup.run.chip, outcome, written))
    nothing = not outcome.attempts and outcome.message.startswith("nothing to fix")
    return 0 if outcome.ok or nothing else 1


@dataclasses.dataclass(frozen=True)
class _Setup:
    """What a fix run starts from: the file's bytes and text, and the run's setup (agents/run_setup.py)."""

    started: bytes
    text: str
    run: Any


def _setup(args: argparse.Namespace) -> _Setup:
    """The run's inputs from the arguments and the project's settings; UsageError says what is wrong."""
    from ...agents.run_setup import prepare
    from ...engine.checker import read_source

    from .flags import UsageError, parse_tiers
    from ..run_request import run_request

    path = args.path
    if not Path(path).is_file():
        raise UsageError(f"{path}: no such file")
    if args.rounds is not None and args.rounds < 1:
        raise UsageError(f"--max-rounds {args.rounds}: give at least 1")
    if args.line is not None and args.line < 1:
        raise UsageError(f"--line {args.line}: lines count from 1")
    tiers = parse_tiers(args.tiers) if args.tiers else None
    try:  # fix verifies with the tiers asked for; proposals run in the compiler tiers, so 1+ needs confinement
        request = run_request(args, path, tiers=tiers, judge=False)
        run = prepare(dataclasses.replace(request, runs_model_code=any(t > 0 for t in tiers or request.settings.tiers)))
    except ValueError as err:
        raise UsageError(str(err)) from None
    started = Path(path).read_bytes()  # --apply writes over the file only if it is still these bytes
    return _Setup(started, read_source(path), run)


async def _fix(args: argparse.Namespace, setup: _Setup):
    """The fix job on the engine `pallasite check` uses: the outcome, or why it could not start."""
    from ...agents.fix_action import FixJob, fix_file
    from ...engine.judge import Trusted
    from ..run_request import command_line_provider
    from ...engine.engine import Engine

    path, run = args.path, setup.run
    model = command_line_provider(run.provider_config(), "fix")  # a configuration problem is told before anything runs
    engine = Engine(workspace=run.workspace)  # the same engine `pallasite check` uses: workers, results store
    try:
        report = await engine.checker(path, run.options).check(path, setup.text, tiers=run.tiers)
        job = FixJob(path=path, text=setup.text, report=report, chip=run.chip, tiers=run.tiers,
                     line=args.line - 1 if args.line else None, docs_passages=run.agent.docsPassages,
                     **_vmem(run.chip))
        shown = progress_stream() if args.format == "text" else None  # on a terminal only (server/commands/console.py)
        progress = (lambda m: print(f"pallasite fix: {m}", file=shown, flush=True)) if shown is not None else None
        judge = run.judge(engine, Trusted(path, setup.text), device=None, confined=True)  # judges every proposal
        return await fix_file(job, run.provider_config(), run.agent.budgets(), judge, workspace=run.workspace,
                              on_progress=progress, provider=model)
    finally:
        await model.close()
        await engine.close()


def _render(args: argparse.Namespace, chip: str, outcome, written) -> str:
    if args.format != "json":
        return _text(outcome, written=written)
    from ...agents.fixer import outcome_json

    return json.dumps({"version": JSON_VERSION, "tool": "pallasite fix", "target": chip,
                       "applied": bool(written and written.applied), **outcome_json(outcome),
                       "written": written.path if written else None,
                       "not_applied_why": written.why if written else ""}, indent=2)


def _text(outcome, *, written=None) -> str:
    lines = []
    if outcome.ok:
        lines += [outcome.diff.rstrip("\n"), "", f"{outcome.path}: {outcome.message}"]
        if outcome.explanation:
            lines.append(f"  why: {outcome.explanation}")
        lines.append(f"  {written.describe()}" if written else "  not applied (use --apply to write it)")
    else:
        lines.append(f"{outcome.path}: {outcome.message}")
        for attempt in outcome.attempts:
            detail = attempt.detail.splitlines() or [""]
            lines.append(f"  round {attempt.round}: {attempt.verdict}: {detail[0]}")
            lines += [f"    {line}" for line in detail[1:_DETAIL_LINES] if line.strip()]  # the findings it names
    if outcome.attempts:
        lines.append(f"  {len(outcome.attempts)} round(s) with {outcome.provider}, {outcome.usage.describe()}, "
                     f"{outcome.seconds:.1f} s; run id {outcome.run_id} (replay: --provider replay:{outcome.run_id})")
    return "\n".join(lines)


def _vmem(chip: str) -> dict:
    """The chip's scoped-VMEM limit from the chip-table cache `pallasite chips` writes, when there is one."""
    try:
        from ...engine import chip_table

        table = chip_table.cached() or []
    except Exception:  # noqa: BLE001 - the model is told the limit only when it is known
        return {}
    for spec in table:
        if spec.name == chip and spec.scoped_vmem_limit_bytes:
            return {"vmem_limit_bytes": spec.scoped_vmem_limit_bytes, "vmem_source": spec.scoped_vmem_source}
    return {}
