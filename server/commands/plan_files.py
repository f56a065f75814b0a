"""Step mode's review files (`.pallasite/plans/<run>-<iteration>.md`, `<run>-tests.py`): what the
model proposed, written for the user to edit, and never written over once the user has edited it.

``propose(path, text)`` writes a proposal unless the file holds an edit of the user's: a file whose
text differs from what pallasite last wrote there (recorded by its sha256 in ``.written.json`` beside
it). Then the edit stays and is the proposal's revision; this is what a resumed run meets when the
user edited the plan of the iteration that was cut off. ``edited(path)`` is the file's text when the
user changed it since it was written (None otherwise): the answer *approve* then takes the edit too,
so the text the user wrote is the text the run uses."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

RECORD = ".written.json"  # file name -> sha256 of the text pallasite wrote there


@dataclass(frozen=True)
class Proposal:
    """What the user reviews: the file's ``text`` and whether it is the user's own edit (``kept``)."""

    text: str
    kept: bool


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _record(folder: Path) -> dict[str, str]:
    try:
        data = json.loads((folder / RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def edited(path: Path) -> str | None:
    """The file's text if the user changed it since pallasite wrote it (or it exists and pallasite has
    no record of writing it); None when it is as written, or absent."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return None
    return None if _record(path.parent).get(path.name) == _sha(text) else text


def propose(path: Path, text: str) -> Proposal:
    """Write ``text`` to ``path`` for review, unless the file holds the user's edit: that is kept."""
    kept = edited(path)
    if kept is not None and kept.strip() and kept != text:
        return Proposal(kept, kept=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    record = _record(path.parent)
    record[path.name] = _sha(text)
    (path.parent / RECORD).write_text(json.dumps(record, indent=1), encoding="utf-8")
    return Proposal(text, kept=False)
