"""`optimize` and `search` on a file that is not a Pallas kernel refuse up front, before any model call
(they asked the model, then exited 1)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from pallasite.server.run_request import refuse_non_kernel

PLAIN = "import jax.numpy as jnp\n\n\ndef f(x):\n    return jnp.sin(x)\n"


def test_the_check_says_what_the_file_is(tmp_path):
    (tmp_path / "plain.py").write_text(PLAIN)
    (tmp_path / "notes.md").write_text("# notes\nsome *text*\n")
    (tmp_path / "blob.bin").write_bytes(b"\xff\xfe\x00binary")
    (tmp_path / "k.py").write_text("from jax.experimental import pallas as pl\n")
    with pytest.raises(ValueError, match="not a Pallas kernel"):
        refuse_non_kernel(tmp_path / "plain.py", "optimize")
    with pytest.raises(ValueError, match="not Python"):
        refuse_non_kernel(tmp_path / "notes.md", "search")
    with pytest.raises(ValueError, match="not a text file"):
        refuse_non_kernel(tmp_path / "blob.bin", "search")
    refuse_non_kernel(tmp_path / "k.py", "optimize")  # a kernel passes


@pytest.mark.parametrize("command", ["optimize", "search"])
def test_no_model_call_on_a_file_that_is_not_a_kernel(tmp_path, command):
    (tmp_path / "plain.py").write_text(PLAIN)
    (tmp_path / ".pallasite").mkdir()
    replies = tmp_path / "r.json"
    replies.write_text(json.dumps([]))  # any model call would fail with "no more responses"
    done = subprocess.run([sys.executable, "-m", "pallasite.server.cli", command, "plain.py", "--provider", "scripted",
                           "--scripted-file", str(replies)], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "plain.py: not a Pallas kernel" in done.stderr and "no more responses" not in done.stderr, done.stderr
