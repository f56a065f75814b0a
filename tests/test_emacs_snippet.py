"""The eglot snippet of editor_clients/README.md, run as written in Emacs batch mode against a real
`pallasite serve`: diagnostics at the right line, the status notification handler, the commands.
Skipped where Emacs or eglot is missing (Debian: apt-get install emacs-nox elpa-eglot).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "clients"
EMACS = shutil.which("emacs")


def _has_eglot() -> bool:
    if EMACS is None:
        return False
    proc = subprocess.run([EMACS, "--batch", "--eval", "(require 'eglot)"], capture_output=True, timeout=60)
    return proc.returncode == 0


pytestmark = pytest.mark.skipif(not _has_eglot(), reason="needs Emacs with eglot (emacs-nox + elpa-eglot)")


def test_readme_eglot_snippet_works(tmp_path: Path) -> None:
    readme = (ROOT / "editor_clients" / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```elisp\n(.*?)```", readme, re.S)
    assert len(blocks) == 1
    snippet = tmp_path / "snippet.el"
    snippet.write_text(blocks[0], encoding="utf-8")
    project = shutil.copytree(DATA / "project", tmp_path / "project")
    env = {k: v for k, v in os.environ.items() if not k.startswith("XDG_")}
    env.update(HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path / "config"), PALLASITE_TEST_PYTHON=sys.executable)
    proc = subprocess.run([EMACS, "--batch", "-l", str(snippet), "-l", str(DATA / "emacs_check.el"), "add_bad_tiling.py"],
                          cwd=project, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output
    result = json.loads(output.split("RESULT ", 1)[1].splitlines()[0])
    assert result["diagnostic_line"] == 13 and "[PLS001]" in result["diagnostic_text"]
    assert result["status_before"] == "v6e" and result["status_after"] == "v5e"
    assert result["select_result"] == {"ok": True, "target": "v5e"}
    assert result["mode_line"] == " pallasite v5e local idle untrusted"
    assert result["bad_chip"]["ok"] is False and "unknown chip 'v9x'" in result["bad_chip"]["message"]
    assert "pallasite: pallasite.selectTarget: unknown chip 'v9x'" in output
    assert result["check"]["ok"] is False and "not trusted" in result["check"]["message"]
    # Check as script goes to the same command (refused the same way in this untrusted folder).
    assert result["check_script"]["ok"] is False and "not trusted" in result["check_script"]["message"]
    # Explain: the code of the diagnostic at point, the markdown in *pallasite explain*, a typed code.
    assert result["code_at_point"] == "PLS001" and result["explain"] == "PLS001"
    assert result["explain_buffer"].startswith("### PLS001: ")
    assert result["explain_typed"] == "PLS201"
    assert result["explain_unknown"]["ok"] is False and "PLS999" in result["explain_unknown"]["message"]
