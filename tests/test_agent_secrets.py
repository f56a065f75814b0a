"""API keys never reach logs, the results store, prompts or error messages.

`pallasite fix` runs the real google-genai SDK against a fake Gemini endpoint that echoes the key
back (in a reply's explanation and in an error), on a kernel file that itself holds the key in a
comment. The key may only travel in the request header that authenticates the call.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fake_llm import Answer, FakeEndpoint, gemini_reply
from pallasite.agents.llm import keys

pytest.importorskip("google.genai")

KEY = "AIzaSyFAKE-secret-key-that-must-not-leak-42"
OPENAI_KEY = "sk-also-secret-openai-key-0123456789abcdef"
AGENTS = Path(__file__).parent / "data" / "agents"


def workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "ws"
    (folder / ".pallasite").mkdir(parents=True)  # this test's own results store (not one in a parent folder)
    (folder / "pyproject.toml").write_text("[tool.pallasite]\ntiers = [0]\n")
    text = (AGENTS / "add_bad_tiling.py").read_text() + f"\n# pasted by mistake: GEMINI_API_KEY={KEY}\n"
    (folder / "kernel.py").write_text(text)
    return folder


def store_bytes(folder: Path) -> bytes:
    """The store's files, which must hold the run (so an empty or misplaced store fails the test)."""
    store = folder / ".pallasite"
    data = b"".join(p.read_bytes() for p in store.glob("results.sqlite*"))
    assert b"You fix JAX Pallas kernels" in data, "the calls were not recorded in this workspace's store"
    return data


def test_keys_stay_out_of_prompts_store_output_and_errors(tmp_path):
    folder = workspace(tmp_path)
    echo = json.dumps({"explanation": f"your key is {KEY}", "edits": [{"search": "nope", "replace": KEY}]})
    with FakeEndpoint() as server:
        server.queue += [Answer(200, gemini_reply(echo)),
                         Answer(200, gemini_reply(f"I saw {KEY} and {OPENAI_KEY}")),
                         Answer(400, {"error": {"code": 400, "message": f"API key {KEY} rejected"}})]
        env = {**os.environ, "GEMINI_API_KEY": KEY, "OPENAI_API_KEY": OPENAI_KEY}
        done = subprocess.run(
            [sys.executable, "-m", "pallasite.server.cli", "fix", str(folder / "kernel.py"), "--provider", "gemini",
             "--base-url", server.url, "--format", "json"],
            capture_output=True, text=True, env=env, cwd=folder, timeout=120)
    assert done.returncode == 1, done.stderr  # no verified fix
    result = json.loads(done.stdout)
    # round 2 is not the JSON asked for: the fix parser cannot read it (and the model is told so next round)
    assert [a["verdict"] for a in result["attempts"]] == ["not applicable", "unreadable", "model error"]
    assert "could not be read" in server.requests[2].json["contents"][0]["parts"][0]["text"]
    for secret in (KEY, OPENAI_KEY):
        assert secret not in done.stdout and secret not in done.stderr
        assert secret.encode() not in store_bytes(folder)
    assert "[REDACTED]" in result["attempts"][2]["detail"]  # the endpoint's error, redacted
    assert "[REDACTED]" in result["attempts"][0]["explanation"]
    assert len(server.requests) == 3
    for request in server.requests:
        assert request.headers["x-goog-api-key"] == KEY  # the one place the key belongs
        assert KEY.encode() not in request.body  # the prompt held the file's pasted key: redacted
    assert b"[REDACTED]" in server.requests[0].body


async def test_keys_stay_out_of_python_logs(tmp_path, monkeypatch, caplog):
    from pallasite.agents.fix_action import FixJob, fix_file
    from pallasite.agents.fixer import Budgets
    from pallasite.agents.llm.providers import ProviderConfig
    from pallasite.engine.checker import CheckOptions, Checker
    from pallasite.engine.judge import Judge, Trusted

    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    folder = workspace(tmp_path)
    text = (folder / "kernel.py").read_text()
    caplog.set_level(logging.DEBUG)
    with FakeEndpoint() as server:
        server.queue += [Answer(500, {"error": {"code": 500, "message": f"boom {KEY}"}}),
                         Answer(200, gemini_reply(json.dumps({"explanation": "x", "edits": []})))]
        checker = Checker(CheckOptions(tiers=(0,)), untrusted=True)
        report = await checker.check(str(folder / "kernel.py"), text, tiers=(0,))
        outcome = await fix_file(FixJob(str(folder / "kernel.py"), text, report, "v6e", (0,), docs_passages=0),
                                 ProviderConfig(name="gemini", base_url=server.url, retries=0),
                                 Budgets(max_rounds=2),
                                 Judge(None, checker.options, Trusted(str(folder / "kernel.py"), text), checker=checker),
                                 workspace=folder)
        await checker.close()
    assert not outcome.ok and [a.verdict for a in outcome.attempts] == ["model error", "not applicable"]
    assert KEY not in caplog.text and KEY not in outcome.message
    assert KEY.encode() not in store_bytes(folder)


def test_redact_scrubs_environment_secrets_and_key_shapes(monkeypatch):
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok-1234567890")
    assert keys.redact("a tok-1234567890 b") == "a [REDACTED] b"
    assert keys.redact("key=AIzaSyABCDEFGHIJKLMNOPQRSTUVWXYZ0123456") == "key=[REDACTED]"
    assert keys.redact("plain text") == "plain text"
