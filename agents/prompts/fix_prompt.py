"""What the fixer sends a model: the system instruction and the prompt of each round.

The prompt holds the kernel file, the findings (their lines, codes and the compiler's words), the
catalog entries behind them, retrieved docs passages, the target chip and its VMEM limit, and, from
round 2, each earlier proposal with the reason it was rejected. Nothing else from the machine is
sent (no other files, no environment); ``keys.redact`` is applied to the whole text before sending.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from ...analysis.types import Finding

from .prompt_paths import local

SYSTEM = """\
You fix JAX Pallas kernels for Google TPUs. You are given a kernel file and the errors pallasite's \
checker (source rules, the Pallas TPU lowering, the TPU compiler, interpret mode) reports in it.
Propose the smallest edit that makes the reported errors go away without changing what the kernel \
computes. Rules:
- Answer with JSON only: {"explanation": "<one or two sentences>", "edits": [{"search": "<exact, \
unique excerpt of the ORIGINAL file>", "replace": "<its replacement>"}]}.
- Search texts are copied exactly from the original file shown (whole lines are safest) and must occur \
once; every edit applies to the original file, not to an earlier proposal.
- Keep every pallas_call, the kernel functions, example_inputs() and reference(): do not delete, \
rename or stub them out, and do not silence the error (no try/except, no interpret=True).
- Change as few lines as possible; do not reformat or rename anything else."""


@dataclass(frozen=True)
class FixContext:
    """Everything the model is told about the problem (built by the caller, fed to ``prompt``)."""

    path: str
    text: str
    findings: tuple[Finding, ...]  # the findings to fix
    chip: str
    vmem_limit_bytes: int | None = None
    vmem_source: str = ""
    catalog: tuple[str, ...] = ()  # catalog explanations of the findings' codes
    docs: tuple[str, ...] = ()  # retrieved docs passages
    has_reference: bool = False


def describe_finding(finding: Finding, lines: Sequence[str]) -> str:
    line = finding.span.line
    source = lines[line].rstrip() if 0 <= line < len(lines) else ""
    where = f"line {line + 1}" + (f" (`{source.strip()}`)" if source.strip() else "")
    origin = f", {finding.origin}" if finding.origin else ""
    tier = f"tier {finding.tier}{origin}"
    text = f"- {where}: {finding.code} [{tier}]: {local(finding.message.strip())}"
    if finding.detail:  # machine paths (the user's folders, jax's files) become file names first
        text += "\n  compiler output (excerpt): " + " ".join(local(finding.detail).split())[:600]
    return text


def prompt(context: FixContext, history: Sequence[str] = ()) -> str:
    lines = context.text.splitlines()
    parts = [f"File `{Path(context.path).name}` (target chip: TPU {context.chip}"
             + (f", scoped VMEM limit {context.vmem_limit_bytes / 2**20:g} MiB ({context.vmem_source})"
                if context.vmem_limit_bytes else "") + "):",
             "```python", context.text.rstrip("\n"), "```", "",
             "Errors to fix:", *(describe_finding(f, lines) for f in context.findings)]
    if context.catalog:
        parts += ["", "What these errors mean (pallasite's error catalog):", *context.catalog]
    if context.docs:
        parts += ["", "Relevant documentation excerpts:", *(f"---\n{d}" for d in context.docs)]
    parts += ["", "The fix is verified by re-running the checker"
              + (" and comparing with reference() in TPU interpret mode" if context.has_reference else "")
              + " before anyone sees it."]
    if history:
        parts += ["", "Earlier proposals were rejected:", *(local(h) for h in history),
                  "", "Propose a different edit to the ORIGINAL file that avoids these problems."]
    return "\n".join(parts)
