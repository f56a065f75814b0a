"""``pallasite check`` run as a user runs it, for tests that read its JSON report."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def check_files(paths: list[Path], tiers: str, timeout: float = 600) -> dict[str, dict]:
    """``pallasite check --format json --no-store`` on ``paths`` in one run: file name -> its report."""
    proc = subprocess.run([sys.executable, "-m", "pallasite.server.cli", "check", *map(str, paths), "--tiers", tiers,
                           "--no-store", "--format", "json"], capture_output=True, text=True, timeout=timeout)
    return {Path(f["path"]).name: f for f in json.loads(proc.stdout)["files"]}


def variants(folder: Path, changes: list[tuple[Path, str, str, str]]) -> list[Path]:
    """Copies of fixtures with one text replaced each: (fixture, new file name, old text, new text)."""
    out = []
    for fixture, name, old, new in changes:
        text = fixture.read_text()
        assert old in text, (fixture, old)
        (folder / name).write_text(text.replace(old, new))
        out.append(folder / name)
    return out
