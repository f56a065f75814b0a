"""Keeping every view in step with a result when it arrives: the status bar (the ``pallasite/status``
notification, with each open kernel document's last verdict: file_verdicts.py) and what the client
pulls (code lenses, inlay hints), which the server asks it to pull again
(``workspace/codeLens/refresh``, ``workspace/inlayHint/refresh``) when the client says it can.

Called when a check starts and ends (on open, save, after "Trust", after a settings change, from the
command), after autotune, optimize, a timing run; plain functions of the session.
"""

from __future__ import annotations

import asyncio
from typing import Any

_CAPABILITY = {"codeLens": "code_lens", "inlayHint": "inlay_hint"}


def refresh(session: Any, what: str = "codeLens") -> None:
    """Ask the client to pull code lenses (or inlay hints: ``"inlayHint"``) again, when it says it can:
    a result that changes what they show reaches them now, not at the user's next edit."""
    capabilities = session.client.client_capabilities
    workspace = getattr(capabilities, "workspace", None)
    capability = getattr(workspace, _CAPABILITY[what], None)
    if capability is not None and getattr(capability, "refresh_support", False):
        asyncio.ensure_future(_send_refresh(session, what))


async def _send_refresh(session: Any, what: str) -> None:
    try:
        if what == "codeLens":
            await session.client.workspace_code_lens_refresh_async(None)
        else:
            await session.client.workspace_inlay_hint_refresh_async(None)
    except Exception as exc:  # noqa: BLE001 - a client that claims support but fails: refreshed on the next edit
        session.log(f"workspace/{what}/refresh failed: {exc}")


def verdict_changed(session: Any) -> None:
    """A document's verdict changed (a check started or ended, trust, settings, a tune, a timing): the
    status bar's entry and the lenses follow at once."""
    session.notify_status()
    refresh(session, "codeLens")
