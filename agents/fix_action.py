"""One fix action end to end, shared by `pallasite fix` and the editor's "Fix with agent".

    outcome = await fix_file(FixJob(path, text, report, line=17, chip="v6e", tiers=(0, 1, 2)),
                             provider_config, budgets, judge, workspace=folder)

It picks the findings to fix (the errors at ``line``, else every error), gathers what the model is
told (catalog entries, offline docs passages), makes the provider, records every call in the
workspace's results store, and judges each proposal by the run's ``Judge`` (engine/judge.py ``check``: the
run setup's check options, confined workers, no results cache).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from ..analysis.tier0 import analyze
from ..analysis.types import FileReport, Finding

from .prompts.fix_prompt import FixContext
from .fixer import Budgets, FixOutcome, Fixer
from .llm.providers import ProviderConfig, ProviderError, make_provider
from .llm.recording import StoreRecorder


@dataclass(frozen=True)
class FixJob:
    path: str
    text: str
    report: FileReport  # the checker's report on ``text`` (the findings to fix come from it)
    chip: str
    tiers: tuple[int, ...] = (0, 1, 2)
    line: int | None = None  # 0-based: fix the errors on this line only
    vmem_limit_bytes: int | None = None
    vmem_source: str = ""
    docs_passages: int = 3


def targets(findings: Sequence[Finding], line: int | None) -> tuple[Finding, ...]:
    """The errors a fix is asked for: those whose span covers ``line`` (0-based), else all."""
    errors = [f for f in findings if f.severity == "error"]
    if line is None:
        return tuple(errors)
    return tuple(f for f in errors if f.span.line <= line <= f.span.end_line)


def catalog_texts(findings: Sequence[Finding]) -> tuple[str, ...]:
    from ..knowledge import catalog

    out = []
    for code in dict.fromkeys(f.code for f in findings):
        try:
            out.append(catalog.explain(code))
        except (KeyError, ValueError):
            continue
    return tuple(out)


def docs_texts(findings: Sequence[Finding], k: int) -> tuple[str, ...]:
    """Offline docs passages for the findings' messages (none when the index cannot be loaded)."""
    if k <= 0 or not findings:
        return ()
    try:
        from ..knowledge import docs

        query = " ".join(f"{f.code} {f.message}" for f in findings)[:2000]
        hits = docs.search(query, k=3 * k)
    except Exception:  # noqa: BLE001 - docs help the model; a fix works without them
        return ()
    # the catalog's entries are in the prompt already (catalog_texts): take the API docs and guides
    others = [h for h in hits if not h.passage.id.startswith("catalog/")][:k]
    return tuple(f"[{h.passage.id}] {h.passage.title}\n{h.passage.text[:1500]}" for h in others)


def has_reference(text: str, path: str, chip: str) -> bool:
    return any(t.reference for t in analyze(text, path, target=chip).tasks)


async def fix_file(job: FixJob, config: ProviderConfig, budgets: Budgets, judge: Any, *,
                   workspace: str | Path | None = None, on_progress: Callable[[str], Any] | None = None,
                   provider: Any = None) -> FixOutcome:
    """Run one fix action, each proposal judged by the run's ``judge`` (engine/judge.py: its ``check``);
    ProviderError("config") when the provider cannot be made."""
    found = targets(job.report.findings, job.line)
    if not found:
        where = f" on line {job.line + 1}" if job.line is not None else ""
        return FixOutcome(ok=False, path=job.path, message=f"nothing to fix: no error{where} in {job.path}")
    # loading the docs index can take a second: off the event loop (the language server keeps serving)
    docs = await asyncio.to_thread(docs_texts, found, job.docs_passages) if job.docs_passages else ()
    context = FixContext(path=job.path, text=job.text, findings=found, chip=job.chip,
                         vmem_limit_bytes=job.vmem_limit_bytes, vmem_source=job.vmem_source,
                         catalog=catalog_texts(found), docs=docs,
                         has_reference=has_reference(job.text, job.path, job.chip))
    own = provider is None
    provider = provider or make_provider(config)
    recorder = StoreRecorder(workspace) if workspace is not None else None
    try:
        fixer = Fixer(provider, judge.check, budgets=budgets, recorder=recorder,
                      on_progress=on_progress)
        return await fixer.fix(context, job.tiers, original_report=job.report)
    finally:
        if own:
            await provider.close()
        if recorder is not None:
            recorder.close()


__all__ = ["FixJob", "fix_file", "targets", "ProviderError"]
