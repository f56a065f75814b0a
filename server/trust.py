"""The user's trust store: folders whose code may run in a check worker (tiers 1-3).

Answers to the server's "Trust this folder...?" question are remembered in
``$XDG_CONFIG_HOME/pallasite/trusted-folders.json`` (default ``~/.config/pallasite/``) as
``{"trusted": [absolute folder paths]}``; a folder trusts everything below it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path


def trust_store_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "pallasite" / "trusted-folders.json"


def read_trusted() -> list[str]:
    try:
        data = json.loads(trust_store_path().read_text(encoding="utf-8"))
        return [str(p) for p in data.get("trusted", [])]
    except (OSError, ValueError, AttributeError):
        return []


def remember_trusted(folder: str) -> None:
    path = trust_store_path()
    folders = read_trusted()
    if folder not in folders:
        folders.append(folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"trusted": folders}, indent=1), encoding="utf-8")
    os.replace(tmp, path)


def inside(path: str, folder: str) -> bool:
    """Whether ``path`` is ``folder`` or below it."""
    try:
        Path(path).resolve().relative_to(Path(folder).resolve())
        return True
    except ValueError:
        return False
