"""The folder `pallasite mcp` serves: where its paths may point, whether its code may run, its settings.

The server starts in one folder (the agent host's working folder, or ``pallasite mcp FOLDER``). Every path
a tool is given is read relative to it and must stay inside it (symbolic links followed): a path outside
is refused before anything is read. Its code runs only when the user trusts the folder, in the same trust
store the language server keeps (server/trust.py; ``pallasite mcp --trust`` or the editor's
``pallasite.trustFolder`` add to it): an untrusted folder gets tier 0 (source rules; nothing executed) and
every tool that would run code answers why not and how to trust it. The store is read at each call, so
trusting the folder while the server runs takes effect at the next call. Settings are the project's
``[tool.pallasite]`` (the nearest pyproject.toml), read as the command line reads them.

Text an agent sends (a source to check, a candidate to judge) and the files it names are bounded by
``MAX_TEXT_BYTES``: tier 0 reads them in the server process, in a time that grows with the text.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..trust import inside, read_trusted, trust_store_path

MAX_TEXT_BYTES = 1 << 20  # a kernel file is a few KB; the language server's largest kept analysis is 1 MiB too
MAX_PATH_CHARS = 4096


class ToolRefused(ValueError):
    """A tool's clear refusal: what happened, where, what to do (shown to the agent as the tool's error)."""


@dataclass(frozen=True)
class Folder:
    root: Path  # resolved

    @classmethod
    def at(cls, path: str | Path) -> "Folder":
        return cls(Path(path).resolve())

    # ------------------------------------------------------------------ trust

    def trusted(self) -> bool:
        """Whether the user trusts this folder (or one above it) to run its code in a pallasite worker."""
        return any(inside(str(self.root), folder) for folder in read_trusted())

    def untrusted_why(self, what: str) -> str:
        """Why ``what`` did not run in an untrusted folder, and how to trust it (the editor's words)."""
        return (f"{self.root} is not trusted: pallasite runs no code of an untrusted folder, so {what} did not run; "
                "only tier 0 runs there (source rules, nothing executed). To trust it, run `pallasite mcp --trust "
                f"{self.root}` in a terminal, or the pallasite.trustFolder command in your editor; it is remembered "
                f"in {trust_store_path()}.")

    def require_trust(self, what: str) -> None:
        if not self.trusted():
            raise ToolRefused(self.untrusted_why(what))

    # ------------------------------------------------------------------ paths

    def path(self, given: Any, argument: str = "path") -> Path:
        """``given`` (relative to the folder, or absolute) resolved; ToolRefused when it is not a usable path
        inside the folder. The path need not exist."""
        if not isinstance(given, str) or not given.strip():
            raise ToolRefused(f"{argument}: give a path inside {self.root} (got {given!r:.80})")
        if "\x00" in given or len(given) > MAX_PATH_CHARS:
            raise ToolRefused(f"{argument}: not a path (a NUL byte, or over {MAX_PATH_CHARS} characters)")
        resolved = (self.root / os.path.expanduser(given)).resolve()
        if not inside(str(resolved), str(self.root)):
            raise ToolRefused(f"{argument} {given!r:.300}: outside the folder this server serves ({self.root}); "
                              "pallasite mcp reads and runs only files inside it")
        return resolved

    def file(self, given: Any, argument: str = "path") -> Path:
        """An existing file inside the folder (see ``path``)."""
        resolved = self.path(given, argument)
        if resolved.is_dir():
            raise ToolRefused(f"{argument} {given!r:.300}: a folder, not a file; give a kernel file (.py)")
        if not resolved.is_file():
            raise ToolRefused(f"{argument} {given!r:.300}: no such file in {self.root}")
        size = resolved.stat().st_size
        if size > MAX_TEXT_BYTES:  # tier 0 reads it in the server: its time grows with the text
            raise ToolRefused(f"{argument} {given!r:.300}: {size:,} bytes; pallasite mcp reads files of at most "
                              f"{MAX_TEXT_BYTES:,} (1 MiB) - a kernel file is a few KB (`pallasite check` takes any)")
        return resolved

    def subfolder(self, given: Any, argument: str) -> Path:
        """An existing folder inside the folder (see ``path``)."""
        resolved = self.path(given, argument)
        if not resolved.is_dir():
            raise ToolRefused(f"{argument} {given!r:.300}: no such folder in {self.root}")
        return resolved

    # ------------------------------------------------------------------ settings

    def settings(self, near: Path | None = None) -> tuple[Any, list[str]]:
        """The project's settings for ``near`` (a file or folder; default the folder) and their warnings."""
        from ..settings import load_project_settings

        start = near or self.root
        return load_project_settings(start if start.is_dir() else start.parent)


def text_argument(args: dict[str, Any], name: str) -> str:
    """A source text the agent sent, bounded by ``MAX_TEXT_BYTES``."""
    text = args[name]
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError as err:  # a lone surrogate ("\ud800") in the JSON string
        raise ToolRefused(f"{name}: not valid Unicode text at character {err.start}; send the file's text as it is") \
            from None
    if size > MAX_TEXT_BYTES:
        raise ToolRefused(f"{name}: {size:,} bytes of text; pallasite mcp takes at most {MAX_TEXT_BYTES:,} (1 MiB) "
                          "- a kernel file is a few KB")
    if "\x00" in text:
        raise ToolRefused(f"{name}: the text holds a NUL byte; it is not Python source")
    return text
