"""Autotune in the editor: the "Autotune for <chip>" code lens, the ``pallasite.autotune`` command
(a job with progress and cancel), the hover on a tunable, and the code action that applies the
best configuration as a versioned edit (never applied without the user choosing it).

The work is engine/tuning/tune.py's; this module keeps the last report per document (with the version
it was computed for) and converts it to LSP. No JAX here: estimates come from the warm worker.
"""

from __future__ import annotations


from pathlib import Path
from typing import Any, Sequence

from lsprotocol import types as lsp

from ...analysis.source import Source
from ...analysis.tunables import find_tunables
from ...analysis.types import KernelSite, Span
from ...engine.judge import Trusted
from ...engine.tuning.judge_tune import config_estimator
from ...engine.tuning.tune import TuneOptions, TuneReport, tune
from ...engine.tuning.tune_workers import job_progress

from .lenses import Lens
from ..lsp_convert import span_to_range
from ..progress import WorkProgress
from ..features import Tuned  # noqa: F401  (the records this feature keeps)

AUTOTUNE_COMMAND = "pallasite.autotune"


def reports(ls: Any) -> dict[str, Tuned]:
    """uri -> the last autotune report of this server (the session's feature state)."""
    return ls.session.features.tune_reports


def autotune_lenses(sites: Sequence[KernelSite], text: str, path: str, uri: str, chip: str) -> list[Lens]:
    """One "Autotune for <chip>" lens on the first TPU pallas_call of a file with tunables."""
    tpu = [s for s in sites if s.backend != "gpu"]
    if not tpu:
        return []
    try:
        if not find_tunables(Source(text), path):
            return []
    except Exception:  # noqa: BLE001 - a lens is never worth a failed request
        return []
    return [Lens(tpu[0].call_span, f"Autotune for {chip}", AUTOTUNE_COMMAND, ({"uri": uri},))]


def _config(config: Any) -> str:
    return ", ".join(f"{k}={v}" for k, v in config) if config else "-"


def summary(report: TuneReport) -> str:
    speed = report.speedup_vs_current()
    text = f"best {_config(report.best)} by {report.best_provenance}"
    if speed:
        text += f", {speed[0]:.2f}x vs the current configuration ({speed[1]})"
    rejected = sum(report.rejected.values())
    return text + (f"; {rejected} configurations rejected before compiling" if rejected else "")


async def run(cmd: Any, verify: int = 3) -> dict[str, Any]:
    """Tune the command's document (its current text) for ``chip`` as an engine job (kind "tune") on
    the engine's job workers, so saves never wait behind it; LSP progress follows the job, cancelling
    the command cancels the job. The report is kept for the hover and the apply action."""
    session, doc = cmd.session, cmd.doc
    version, text = doc.version, doc.text
    # the run setup the CLI's tune makes (agents/run_setup.py); the user's own kernel runs, no model code
    setup = cmd.run_setup("Autotune", device=None, judge=False, runs_model_code=False)
    chip = setup.chip
    options = TuneOptions(chip=chip, verify=verify, declared=dict(setup.settings.tunables) or None)
    progress = await cmd.progress(f"pallasite: autotuning {Path(doc.path).name} for {chip}")
    progress.begin()
    progress.report("estimating configurations")
    job = await cmd.run_job("tune", doc.path, job_body(session, setup, text, options, progress), progress)
    if job.state != "done":
        progress.end(job.state)
        return {"ok": False, "message": (job.error or job.state).removeprefix("TuneError: "), "job": job.id}
    report = job.result
    progress.end(summary(report))
    reports(cmd.ls)[doc.uri] = Tuned(version, report)
    return {"ok": True, "best": dict(report.best or ()), "provenance": report.best_provenance,
            "rejected": report.rejected, "message": summary(report), "job": job.id}


def job_body(session: Any, setup: Any, text: str, options: TuneOptions, progress: WorkProgress) -> Any:
    """The tune job's work: engine/tuning/tune.py's ``tune`` on the engine's backend, progress to both the
    job and the editor, results remembered in the workspace's results store when it opens."""
    path = str(setup.path)
    backend = session.engine.backend(setup.options)

    async def body(report: Any) -> TuneReport:
        to_job = job_progress(report)

        def say(message: str, fraction: float | None = None) -> None:
            progress.report(message)
            to_job(message, fraction)

        store = setup.open_store(lambda why: session.log(f"pallasite: autotune: {why}"))
        try:
            # every configuration judged like any other candidate, against the document as it is (the original)
            judge = setup.judge(session.engine, Trusted.of_file(path, text), device=None)
            return await tune(path, text, options, config_estimator(judge, text, options, backend=backend,
                                                                          on_progress=say),
                              tester=judge.test, store=store, progress=say, compiler=judge.compile)
        finally:
            if store is not None:
                store.close()

    return body


def apply_action(tuned: Tuned | None, uri: str, version: int, lines: Sequence[str], encoding: str) -> list[lsp.CodeAction]:
    """"Apply autotuned ..." as a versioned edit, offered only while the document is the version
    that was tuned and the best configuration differs from the file's."""
    if tuned is None or tuned.version != version or not tuned.report.edits:
        return []
    report = tuned.report
    edit = lsp.TextDocumentEdit(
        text_document=lsp.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version),
        edits=[lsp.TextEdit(span_to_range(e.span, lines, encoding), e.new_text) for e in report.edits])
    title = f"Apply autotuned {_config(report.best)} ({report.best_provenance})"
    return [lsp.CodeAction(title=title, kind=lsp.CodeActionKind.Source,
                           edit=lsp.WorkspaceEdit(document_changes=[edit]))]


def hover(tuned: Tuned | None, line: int, column: int) -> tuple[str, Span] | None:
    """Markdown for a tunable under the cursor: the best value, its provenance, the estimate."""
    if tuned is None:
        return None
    report = tuned.report
    for t in report.tunables:
        span = t.span or t.value_span
        if span is None or not span.contains(line, column):
            continue
        best = dict(report.best or ())
        o = report.outcome(report.best) if report.best is not None else None
        lines = [f"**{t.name}** = {t.default} (tunable, {t.kind}); candidates {', '.join(map(str, t.candidates))}"]
        if o is not None:
            lines.append(f"autotune for {report.chip}: best {t.name} = {best.get(t.name)} in {_config(report.best)}, "
                         f"by {report.best_provenance}")
            lines.append(f"verdict: {o.verdict.text()}")
            if o.measured_s is not None:
                lines.append(f"measured on the device: {o.measured_s * 1e6:.1f} us")
            if o.estimate_s is not None:
                lines.append(f"{report.label}: {o.estimate_s * 1e6:.1f} us ({o.bound}-bound)")
            speed = report.speedup_vs_current()
            if speed:
                lines.append(f"{speed[0]:.2f}x vs the current configuration ({speed[1]})")
        return "\n\n".join(lines), span
    return None
