"""The scripted provider as the docs show it: docs/agents.md's reply examples read as the agent's text,
and the README's scripted `pallasite fix` example run as written (in a copy of examples/)."""

from __future__ import annotations

import pytest

import asyncio
import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from pallasite.agents.llm.providers import ModelRequest, ProviderConfig
from pallasite.agents.llm.providers_scripted import ScriptedProvider

ROOT = Path(__file__).resolve().parent.parent


def _fixer_example() -> dict:
    """The fixer row's example reply in docs/agents.md's table of scripted replies."""
    text = (ROOT / "docs" / "agents.md").read_text(encoding="utf-8")
    row = next(line for line in text.splitlines() if line.startswith("| fixer"))
    return json.loads(row.rstrip(" |").rsplit("| `", 1)[1].rstrip("`"))


def _answer(items: list) -> str:
    provider = ScriptedProvider(ProviderConfig(name="scripted"), items)
    return asyncio.run(provider.complete(ModelRequest(system="s", prompt="p"))).text


def test_the_fixer_reply_docs_agents_shows_is_the_reply_text():
    example = _fixer_example()
    assert set(example) == {"explanation", "edits"}
    assert json.loads(_answer([example])) == example  # it was read as empty text


def test_reply_objects_with_text_or_error_still_describe_the_reply():
    assert _answer([{"text": "plan", "output_tokens": 3}]) == "plan"
    assert _answer(["plain text"]) == "plain text"


@pytest.mark.pipeline
def test_the_readme_scripted_fix_runs_as_written(tmp_path):
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    line = next(line for line in readme.splitlines()  # the README calls it through the venv (issue 52)
                if line.startswith((".venv/bin/pallasite fix", "pallasite fix")) and "--provider scripted" in line)
    argv = shlex.split(line)
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    (tmp_path / ".pallasite").mkdir()  # this test's own results store
    done = subprocess.run([sys.executable, "-m", "pallasite.server.cli", *argv[1:]], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"^-BLOCK_COLS = 200\n\+BLOCK_COLS = 256$", done.stdout, re.M), done.stdout
    assert "verified fix" in done.stdout and "not applied (use --apply" in done.stdout
