"""The planner: the next optimization plan, from the source, its cost, and what earlier iterations did.

``request(state, source, history, instruction)`` builds the model call (planner_prompt.py says what
is sent); ``parse(text)`` splits a reply into (one-line summary, full plan). In step mode the plan
is written to ``.pallasite/plans/<id>.md``; the user's edited file is parsed the same way.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..analysis.types import DEFAULT_CHIP
from .llm import keys
from .prompts.prompt_paths import local
from .prompts.planner_prompt import SYSTEM, TEMPLATE
from .llm.providers import ModelRequest


def _history(history: list[dict]) -> str:
    if not history:
        return "(none: this is the first attempt)\n"
    lines = []
    for h in history:
        time_s = f"{h['time_s']:.3e} s ({h['label']})" if h.get("time_s") else "not measured"
        lines.append(f"- iteration {h['iteration']}: {h['plan']} -> {h['verdict']}, {time_s}")
        if h.get("evidence"):  # the compiler's and the worker's words, machine paths made file names
            lines.append("  evidence: " + local(h["evidence"]).replace("\n", "\n  "))
        if h.get("profile"):
            lines.append("  " + local(h["profile"]).replace("\n", "\n  "))
    return "\n".join(lines) + "\n"


def prompt(state: Any, source: str, history: list[dict], instruction: str = "") -> str:
    ctx = state.context or {}
    baseline = f"{state.baseline_s:.3e} s" if state.baseline_s else "not measured"
    extra = ""
    if ctx.get("baseline_profile"):
        extra += "\n## Where the original's time goes\n" + local(ctx["baseline_profile"]) + "\n"
    if ctx.get("findings"):
        extra += "\n## Checker findings\n" + "\n".join(f"- {local(str(f))}" for f in ctx["findings"]) + "\n"
    if ctx.get("chips"):
        extra += "\n## Chip table\n" + json.dumps(ctx["chips"]) + "\n"
    if ctx.get("docs"):
        extra += "\n## Pallas documentation\n" + "\n\n".join(ctx["docs"]) + "\n"
    text = TEMPLATE.format(path=Path(state.path).name, source=source, chip=ctx.get("chip", DEFAULT_CHIP), baseline=baseline,
                           method=state.method or "?", context=extra, history=_history(history),
                           instruction=f"\n## Instruction from the engineer\n{instruction}\n" if instruction else "")
    return keys.redact(text)


def request(state: Any, source: str, history: list[dict], instruction: str = "", timeout_s: float = 120.0) -> ModelRequest:
    return ModelRequest(system=SYSTEM, prompt=prompt(state, source, history, instruction), timeout_s=timeout_s)


def parse(text: str) -> tuple[str, str]:
    """(summary, plan): the first non-empty line (heading marks dropped) and the whole text."""
    plan = text.strip()
    first = next((line.strip().lstrip("#").strip() for line in plan.splitlines() if line.strip()), "")
    return (first[:200] or "(empty plan)"), plan
