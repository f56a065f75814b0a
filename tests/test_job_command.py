"""The one job-command helper (server/editor/job_command.py) without a server: a not-open document, a refusal,
a missing provider, a cancelled request (the engine job is cancelled too and the progress ended),
a failure mapped to a reply, and a job that finishes. The commands end to end over stdio are
tests/test_lsp_*.py's."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from pallasite.engine.jobs import JobRegistry
from pallasite.server.editor.job_command import Command, job_command


class Progress:
    """The client's side of work-done progress: what was begun, reported and ended, per token."""

    def __init__(self):
        self.tokens: dict[str, asyncio.Future] = {}
        self.seen: list[tuple[str, str]] = []

    async def create_async(self, token):
        self.tokens[token] = asyncio.get_running_loop().create_future()

    def begin(self, token, value):
        self.seen.append(("begin", value.title))

    def report(self, token, value):
        self.seen.append(("report", value.message))

    def end(self, token, value):
        self.seen.append(("end", value.message))


def fake_ls(provider: str = "gemini"):
    shown = []
    session = SimpleNamespace(
        documents={"file:///w/k.py": SimpleNamespace(uri="file:///w/k.py", path="/w/k.py")},
        settings=SimpleNamespace(agent=SimpleNamespace(provider=provider)),
        engine=SimpleNamespace(jobs=JobRegistry()),
        show=lambda message, kind=None: shown.append(message), log=lambda message: None,
        folder_of=lambda path: "/w", is_trusted=lambda folder: True)
    ls = SimpleNamespace(session=session, work_done_progress=Progress(),
                         client_capabilities=SimpleNamespace(window=SimpleNamespace(work_done_progress=True)))
    return ls, shown


def run(coro):
    return asyncio.run(coro)


def test_a_command_on_a_document_that_is_not_open_is_refused():
    ls, _ = fake_ls()

    async def handler(cmd: Command):
        raise AssertionError("not reached")

    reply = run(job_command(ls, "pallasite.x", ("file:///w/other.py",), handler))
    assert reply == {"ok": False, "message": "pallasite.x: 'file:///w/other.py' is not an open document."}


def test_checks_refuse_with_the_commands_name_and_what_to_do():
    ls, shown = fake_ls(provider="")

    async def counted(cmd: Command):
        cmd.count("iterations", 3)
        raise AssertionError("not reached")

    reply = run(job_command(ls, "pallasite.x", ({"uri": "file:///w/k.py", "iterations": True},), counted))
    assert reply == {"ok": False, "message": "pallasite.x: iterations must be a positive count, got True."}

    async def needs_model(cmd: Command):
        cmd.need_provider("Do it")

    reply = run(job_command(ls, "pallasite.x", ({"uri": "file:///w/k.py"},), needs_model))
    assert not reply["ok"] and reply["message"].startswith("pallasite: Do it needs an LLM provider.")
    assert shown == [reply["message"]]  # said to the user too

    async def device(cmd: Command):
        cmd.device()

    reply = run(job_command(ls, "pallasite.x", ({"uri": "file:///w/k.py", "timing": "fast"},), device))
    assert reply["message"].startswith("pallasite.x: timing 'fast': choose estimate")


def test_a_cancelled_command_cancels_its_job_and_ends_its_progress():
    ls, _ = fake_ls()
    started = asyncio.Event()
    job_seen = []

    async def work(report):
        started.set()
        await asyncio.sleep(60)

    async def handler(cmd: Command):
        progress = await cmd.progress("Working")
        progress.begin()
        job = await cmd.run_job("test", cmd.doc.path, work, progress)
        job_seen.append(job)
        return {"ok": True}

    async def go():
        request = asyncio.ensure_future(job_command(ls, "pallasite.x", ("file:///w/k.py",), handler,
                                                    cancelled={"ok": False, "message": "cancelled; kept"}))
        await started.wait()
        token_future = next(iter(ls.work_done_progress.tokens.values()))
        token_future.cancel()  # the client's cancel button on the progress
        return await asyncio.wait_for(request, 10), ls.session.engine.jobs.list()

    reply, jobs = run(go())
    assert reply == {"ok": False, "message": "cancelled; kept"} and job_seen == []
    assert [(j.kind, j.state) for j in jobs] == [("test", "cancelled")]
    assert ls.work_done_progress.seen == [("begin", "Working"), ("end", "cancelled")]


def test_a_failure_is_a_reply_and_a_finished_job_is_returned():
    ls, _ = fake_ls()

    async def broken(cmd: Command):
        await cmd.progress("Working")
        raise RuntimeError("boom")

    reply = run(job_command(ls, "pallasite.x", ("file:///w/k.py",), broken,
                            failed=lambda cmd, exc: {"ok": False, "message": f"{cmd.name}: {exc}"}))
    assert reply == {"ok": False, "message": "pallasite.x: boom"}

    async def finishes(cmd: Command):
        job = await cmd.run_job("test", cmd.doc.path, lambda report: asyncio.sleep(0, result=42))
        return {"ok": job.state == "done", "value": job.result}

    assert run(job_command(ls, "pallasite.x", ("file:///w/k.py",), finishes)) == {"ok": True, "value": 42}
