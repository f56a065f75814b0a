"""Where model-written code runs: in a confined worker, or not at all unless the user opted in.

A model's code (fixer proposals, optimize and search candidates, test-writer proposals, what
``eval`` runs) is untrusted: the engine sends it to workers started with ``WorkerConfig.confine``
(``Engine.backend(options, untrusted=True)``). Such a worker

- runs in its own user, PID, mount and network namespaces (``spawn.confined``): it sees only its
  own processes, has no network, and ``runner/confine.py`` makes every mount read-only except a
  fresh scratch folder and drops every capability before the worker starts;
- has that scratch folder as its working folder, HOME and TMPDIR, and gets every request's files
  under scratch paths (the candidate's ``__file__`` is never the user's path); replies name the
  user's files again;
- refuses a pallas_call that asks for interpret mode (``runner/interpret_guard.py``).

Where namespaces are unavailable (no ``unshare``, a system that refuses them, macOS, a worker on
another host through ssh or Ray, or ``worker.sandbox = "off"``), a confined worker cannot be made:
the request is refused ("not_started", start problem ``unconfined``) with ``refusal(why)``, unless
the user opted in (``--allow-unconfined`` / ``agent.allowUnconfined``, a user-only setting): then
the worker still gets the scratch folder and paths, but runs with the user's rights.
"""

from __future__ import annotations

import os
from typing import Any

from . import spawn
from .scratch import new_scratch, remove_scratch  # noqa: F401  (re-exported)

OPT_IN = "--allow-unconfined (setting agent.allowUnconfined = true, in your editor's settings only)"


def problem(config: Any) -> str | None:
    """Why no confined worker can be made for this ``WorkerConfig`` (None: it can)."""
    if config.command:
        return ("its worker would run on another host through a launcher (ssh, Ray), where pallasite does not "
                "set up namespaces")
    if config.sandbox == "off":
        return "the worker sandbox is turned off (worker.sandbox = \"off\")"
    return spawn.confinement_problem(config.python)


def refusal(why: str) -> str:
    """The message for model-written code that was not run because ``why``."""
    return ("model-written code runs only in a confined worker (no network, a read-only view of your files "
            f"except a scratch folder), and none can be made here: {why}. It was not run. To run it anyway with "
            "your own rights (it could then read, change or delete any file you can, and use the network), "
            f"pass {OPT_IN}.")


def refusal_for(config: Any) -> str | None:
    """The refusal for a ``WorkerConfig`` of a worker for model-written code that cannot be confined
    and was not allowed to run unconfined; None when it may start (or is not for model-written code)."""
    if not config.confine:
        return None
    why = problem(config)
    return refusal(why) if why is not None and not config.allow_unconfined else None


def worker_argv(config: Any, scratch: str) -> tuple[list[str], str | None]:
    """(the command line of a worker for model-written code, None), or ([], the refusal)."""
    argv = config.argv(None if config.command else scratch)
    refused = refusal_for(config)
    if refused:
        return [], refused
    if problem(config) is None:
        return spawn.confined(argv, scratch), None
    if config.command:  # opted in, on another host
        return argv, None
    return spawn.sandboxed(argv, config.sandbox)  # opted in: the PID sandbox as the setting says
