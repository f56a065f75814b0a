"""Where model-written code runs: in a confined worker, or not at all unless the user opted in.

A model's code (fixer proposals, optimize and search candidates, test-writer proposals, what
``eval`` runs) is untrusted: the engine sends it to workers started with ``WorkerConfig.confine``
(``Engine.backend(options, untrusted=True)``). Such a worker never runs model code itself: each
request runs in a fresh child it forks from its pre-imported self, and the child first builds a
sandbox from nothing (``runner/isolation/sandbox.py``): its own user, mount, PID, network, IPC and UTS
namespaces; an empty root holding only the interpreter, its packages and pallasite's modules
(read-only), a minimal ``/dev``, its own ``/proc`` and a size-capped scratch (also ``/tmp``); uid
nobody, no terminal, no capabilities; memory limited by a cgroup where one can be made. Its files
come under scratch paths (the candidate's ``__file__`` is never the user's path); replies name the
user's files again; a pallas_call that asks for interpret mode is refused
(``runner/tier3/interpret_guard.py``). Nothing persists from one request to the next.

Where namespaces are unavailable (a system that refuses them, macOS, a worker on another host
through ssh or Ray, or ``worker.sandbox = "off"``), a confined worker cannot be made: the request is
refused ("not_started", start problem ``unconfined``) with ``refusal(why)``, unless the user opted
in (``--allow-unconfined`` / ``agent.allowUnconfined``, a user-only setting): then each request
still gets a fresh process and the scratch folder and paths, but runs with the user's rights.
"""

from __future__ import annotations

import dataclasses
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
    return ("model-written code runs only in a confined worker (a sandbox of its own: no home, project, sockets, "
            f"terminal or network; the interpreter read-only and a scratch folder), and none can be made here: {why}. "
            "It was not run. To run it anyway with "
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
    refused = refusal_for(config)
    if refused:
        return [], refused
    if problem(config) is None:
        return spawn.confined(config.argv(scratch)), None
    # opted in: a fresh plain process per request where no sandbox can be built
    opted_in = dataclasses.replace(config, worker_args=(*config.worker_args, "--allow-unconfined"))
    argv = opted_in.argv(None if config.command else scratch)
    if config.command:  # on another host
        return argv, None
    return spawn.sandboxed(argv, config.sandbox)  # the PID sandbox as the setting says
