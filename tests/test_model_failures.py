"""Say why a model call failed, and what a model may send: a fake OpenAI-compatible endpoint on 127.0.0.1.

Through `pallasite fix` and `pallasite optimize`, in text and JSON: a 429 with Retry-After, a 401, a
timeout, a malformed body each reported with its kind; a proposal in a ```json fence accepted like
the fix parser accepts it, and an unreadable one fed back to the model as a round; a 10 MB reply
refused at the provider boundary within seconds while the process stays under 1 GB; a key the model
echoes appears nowhere the user sees.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fake_llm import Answer, FakeEndpoint, openai_reply

pytest.importorskip("openai")

DATA = Path(__file__).parent / "data"
KEY = "sk-fake-conf22-failures-0123456789abcdefgh"
RIGHT = json.dumps({"explanation": "128 lanes", "edits": [{"search": "BLOCK_COLS = 100\n", "replace": "BLOCK_COLS = 128\n"}]})


def fix_project(tmp_path: Path, rounds: int = 1) -> Path:
    (tmp_path / ".pallasite").mkdir()
    (tmp_path / "pyproject.toml").write_text(
        f"[tool.pallasite]\ntiers = [0]\nagent = {{ maxRounds = {rounds}, docsPassages = 0, retries = 0, "
        "requestTimeoutS = 2 }\n")
    kernel = tmp_path / "kernel.py"
    kernel.write_text((DATA / "agents" / "add_bad_tiling.py").read_text())
    return kernel


def cli(command: str, *args: str, cwd: Path, url: str, in_process: bool = False) -> subprocess.CompletedProcess:
    argv = [command, *args, "--provider", "openai", "--base-url", url + "/v1", "--model", "fake-model"]
    env = {**os.environ, "OPENAI_API_KEY": KEY}
    if in_process:  # the command runs in this one process, which reports its own peak memory at the end
        code = ("import resource, sys\nfrom pallasite.server.cli import main\nrc = main(sys.argv[1:])\n"
                "print('MAXRSS_KB', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\n"
                "sys.exit(rc)\n")
        return subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, cwd=cwd, env=env,
                              timeout=240)
    return subprocess.run([sys.executable, "-m", "pallasite.server.cli", *argv], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=240)


@pytest.mark.parametrize("answer, kind, words", [
    (Answer(429, {"error": {"message": "slow down"}}, headers={"retry-after": "7"}), "rate_limit",
     "rate limited (HTTP 429, retry after 7 s)"),
    (Answer(401, {"error": {"message": "bad key"}}), "auth", "unauthorized (HTTP 401)"),
    (Answer(200, openai_reply(RIGHT), delay_s=4), "timeout", "timed out"),
    (Answer(200, "this is not a JSON body"), "malformed", "malformed reply"),
])
def test_fix_says_why_the_model_call_failed(tmp_path, answer, kind, words):
    kernel = fix_project(tmp_path)
    with FakeEndpoint() as server:
        server.queue.append(answer)
        as_json = cli("fix", str(kernel), "--format", "json", cwd=tmp_path, url=server.url)
        server.queue.append(answer)
        as_text = cli("fix", str(kernel), cwd=tmp_path, url=server.url)
    assert as_json.returncode == 1, as_json.stderr
    (attempt,) = json.loads(as_json.stdout)["attempts"]
    assert attempt["verdict"] == "model error" and attempt["error"]["kind"] == kind
    assert attempt["detail"].startswith(words)
    if kind == "rate_limit":
        assert attempt["error"]["retry_after_s"] == 7 and attempt["error"]["status"] == 429
    assert f"round 1: model error: {words}" in as_text.stdout


def test_fenced_json_is_accepted_and_an_unreadable_reply_is_fed_back(tmp_path):
    kernel = fix_project(tmp_path, rounds=2)
    with FakeEndpoint() as server:
        server.queue += [Answer(200, openai_reply("I think the lanes are wrong.")),
                         Answer(200, openai_reply("Here is the fix:\n```json\n" + RIGHT + "\n```"))]
        done = cli("fix", str(kernel), "--format", "json", cwd=tmp_path, url=server.url)
        second_prompt = server.requests[1].json["messages"][1]["content"]
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(done.stdout)
    assert [a["verdict"] for a in result["attempts"]] == ["unreadable", "verified"]
    assert "Round 1: your reply could not be read" in second_prompt


@pytest.mark.pipeline
def test_optimize_says_why_in_its_table(tmp_path):
    shutil.copy(DATA / "optimize" / "add.py", tmp_path / "add.py")
    (tmp_path / "pyproject.toml").write_text("[tool.pallasite]\ntiers = [0, 1]\nagent = { retries = 0 }\n")
    with FakeEndpoint() as server:
        server.queue.append(Answer(429, {"error": {"message": "slow down"}}, headers={"retry-after": "30"}))
        as_json = cli("optimize", "add.py", "--iterations", "1", "--format", "json", cwd=tmp_path, url=server.url)
        server.queue.append(Answer(401, {"error": {"message": "bad key"}}))
        as_text = cli("optimize", "add.py", "--iterations", "1", cwd=tmp_path, url=server.url)
    (row,) = json.loads(as_json.stdout)["table"]
    assert row["loop_word"] == "model error" and row["why"].startswith("rate limited (HTTP 429, retry after 30 s)")
    assert "iteration 1: unauthorized (HTTP 401)" in as_text.stdout


@pytest.mark.pipeline
def test_a_10_mb_reply_is_refused_within_seconds_in_bounded_memory(tmp_path):
    shutil.copy(DATA / "optimize" / "add.py", tmp_path / "add.py")
    (tmp_path / "pyproject.toml").write_text("[tool.pallasite]\ntiers = [0, 1]\nagent = { retries = 0 }\n")
    huge = "```python\n" + (DATA / "optimize" / "add.py").read_text() + "\n# " + "x" * (10 * 2**20) + "\n```"
    with FakeEndpoint() as server:
        server.queue += [Answer(200, openai_reply("Bigger blocks\nfewer steps.")), Answer(200, openai_reply(huge))]
        started = time.monotonic()
        done = cli("optimize", "add.py", "--iterations", "1", "--format", "json", cwd=tmp_path, url=server.url,
                   in_process=True)
        seconds = time.monotonic() - started
    (row,) = json.loads(done.stdout)["table"]
    assert row["loop_word"] == "model error" and row["why"].startswith("reply too large")
    assert seconds < 60, seconds  # the baseline estimate included; the refusal itself is at once
    peak_kb = int(done.stderr.rsplit("MAXRSS_KB", 1)[1].split()[0])
    assert peak_kb < 1024 * 1024, f"the optimize process peaked at {peak_kb / 1024:.0f} MiB"
    assert not (tmp_path / "add.optimized.py").exists()


@pytest.mark.pipeline
def test_an_echoed_key_appears_nowhere_the_user_sees(tmp_path):
    """The model echoes the key in its plan and in its code: the table, the written winner, stdout and
    stderr, the store and the plans never hold it (one redaction point: the provider boundary)."""
    shutil.copy(DATA / "optimize" / "add.py", tmp_path / "add.py")
    (tmp_path / ".pallasite").mkdir()
    (tmp_path / "pyproject.toml").write_text("[tool.pallasite]\ntiers = [0, 1]\nagent = { retries = 0 }\n")
    candidate = (DATA / "optimize" / "candidates" / "big_blocks.py").read_text() + f'\n# the key is "{KEY}"\n'
    with FakeEndpoint() as server:
        server.queue += [Answer(200, openai_reply(f"Use 128-row blocks with key {KEY}\nbecause {KEY}.")),
                         Answer(200, openai_reply("```python\n" + candidate + "```"))]
        done = cli("optimize", "add.py", "--iterations", "1", "--mode", "auto", cwd=tmp_path, url=server.url)
    assert done.returncode == 0, done.stderr
    written = (tmp_path / "add.optimized.py").read_text()
    assert "[REDACTED]" in written and "Use 128-row blocks" in done.stdout
    seen = done.stdout + done.stderr + written + "".join(
        p.read_bytes().decode("utf-8", "replace") for p in (tmp_path / ".pallasite").rglob("*") if p.is_file())
    assert KEY not in seen


async def test_the_provider_refuses_a_10_mb_reply_within_seconds(monkeypatch):
    from pallasite.agents.llm.providers import ModelRequest, ProviderConfig, ProviderError, make_provider

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with FakeEndpoint() as server:
        server.queue.append(Answer(200, openai_reply("x" * (10 * 2**20))))
        provider = make_provider(ProviderConfig(name="openai", model="fake-model", base_url=server.url + "/v1",
                                                retries=0))
        started = time.monotonic()
        with pytest.raises(ProviderError) as err:
            await provider.complete(ModelRequest(system="s", prompt="p", timeout_s=30))
        seconds = time.monotonic() - started
        await provider.close()
    assert err.value.kind == "too_large" and "refused unread" in str(err.value)
    assert err.value.describe() == "reply too large"
    assert seconds < 5, seconds
