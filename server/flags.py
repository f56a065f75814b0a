"""The command line's one vocabulary of flags: each shared flag defined once (name, type, meaning).

Every ``cmd_*.add_arguments`` adds a shared flag through :func:`add`, so a flag has the same name,
type and meaning in every command that takes it; a command adds its own detail after the meaning
(what the limit bounds there, its default). Budgets are named by their unit (``--max-nodes``,
``--max-iterations``, ``--max-evaluations``, ``--max-tokens``), one ``--time-limit`` bounds time,
JSON is ``--format json`` (``--output FILE`` writes it to a file), HTML is ``--report FILE``.

Old spellings keep working for one release: :func:`translate` rewrites them in a command's argv
before it is parsed and says so on stderr. The README's flag table is :func:`markdown_table`
(tests/test_flags.py holds both to the parsers)."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

from ..analysis.types import TIERS as CHECK_TIERS


@dataclass(frozen=True)
class Flag:
    """One shared flag. ``type`` is None for a switch (store_true); ``choices`` is the whole
    vocabulary (a command may accept a subset)."""

    name: str
    type: type | None
    meaning: str
    metavar: str | None = None
    choices: tuple[str, ...] | None = None


_FLAGS = (
    Flag("--target", str, "the TPU chip: v4, v5e, v5p, v6e or 7x (default: the project's `target` setting, v6e)",
         "CHIP"),
    Flag("--tiers", str, "checker tiers, e.g. 0,1,2 or 0-3 (default: the `tiers` setting)", "TIERS"),
    Flag("--format", str, "output: text, or json (a versioned document; on stdout unless --output)",
         choices=("text", "json")),
    Flag("--output", str, "write the JSON document to FILE (the text still goes to stdout)", "FILE"),
    Flag("--report", str, "write a self-contained HTML report to FILE", "FILE"),
    Flag("--backend", str, "where kernels run: estimate (nothing runs: the cost model for --target), local (a "
         "worker on this machine), ssh (a worker on --host), ray (a Ray actor)",
         choices=("estimate", "local", "ssh", "ray")),
    Flag("--time-limit", float, "wall-clock limit in seconds", "SECONDS"),
    Flag("--max-nodes", int, "search nodes (optimize iterations in the graph) at most", "N"),
    Flag("--max-iterations", int, "optimize-loop iterations at most (a parallel search: per trajectory)", "N"),
    Flag("--max-evaluations", int, "device evaluations (configurations timed) at most", "N"),
    Flag("--max-tokens", int, "model tokens at most (input + output + thinking)", "N"),
    Flag("--provider", str, "the model: gemini, openai, scripted, or replay:<run id> (a recorded run's answers; "
         "default: the agent.provider setting)", "NAME"),
    Flag("--model", str, "the model name (default: the provider's)", "NAME"),
    Flag("--base-url", str, "an OpenAI-compatible endpoint (openai) or an API endpoint override (gemini)", "URL"),
    Flag("--api-key-env", str, "the environment variable holding the API key", "VAR"),
    Flag("--scripted-file", str, "scripted provider: a JSON list of replies", "JSON"),
    Flag("--requests-per-minute", float, "run-wide limit on model requests per minute (0: none)", "N"),
    Flag("--tokens-per-minute", float, "run-wide limit on model tokens per minute (0: none)", "N"),
    Flag("--price-input", float, "USD per million input tokens (for the cost column; 0: cost unknown)", "USD"),
    Flag("--price-output", float, "USD per million output and thinking tokens", "USD"),
    Flag("--seed", int, "the seed of every random choice", "N"),
    Flag("--jobs", int, "workers used at once", "N"),
    Flag("--memory-mb", int, "each worker's memory limit in MiB", "MIB"),
    Flag("--entry", str, "the task's entry when the file has several", "NAME"),
    Flag("--apply", None, "write the result into the file (only if it is unchanged since the run began)"),
    Flag("--no-store", None, "do not record results in .pallasite/results.sqlite"),
    Flag("--allow-unconfined", None, "run model-written code even where no confined worker can be made; it then "
         "runs with your rights (it could read, change or delete your files and use the network)"),
    Flag("--host", str, "ssh: a host (user@host) that runs `pallasite worker`", "HOST"),
    Flag("--ssh-command", str, "ssh: the whole launcher command line ({worker} marks the worker command)", "CMD"),
    Flag("--remote-worker", str, "ssh: the worker command on the host", "CMD"),
    Flag("--ray-address", str, "ray: the cluster (default: RAY_ADDRESS, else a local cluster)", "ADDRESS"),
    Flag("--ray-resources", str, "ray: resources each worker holds, e.g. TPU=1 (a chip) or TPU=4 (a host's chips)",
         "RES"),
    Flag("--devices", int, "device workers the pool holds (Ray actors); jobs run on all of them at once", "N"),
)
SHARED: dict[str, Flag] = {f.name: f for f in _FLAGS}

# command -> {old spelling: new spelling}; a new spelling with a space also gives a value ("--format json").
# Kept for one release, with a note on stderr.
RENAMED: dict[str, dict[str, str]] = {
    "search": {"--budget": "--max-nodes", "--iterations": "--max-iterations"},
    "eval": {"--budget": "--max-nodes", "--iterations": "--max-iterations", "--max-seconds": "--time-limit",
             "--timeout": "--request-time-limit", "--json": "--output"},
    "optimize": {"--iterations": "--max-iterations", "--max-seconds": "--time-limit"},
    "tune": {"--budget": "--max-evaluations", "--chip": "--target", "--estimates": "--max-estimates"},
    "fix": {"--rounds": "--max-rounds"},
    "check": {"--no-cache": "--no-store"},
    "chips": {"--json": "--format json"},
    "docs": {"--json": "--format json"},
}


class UsageError(Exception):
    """Bad command-line input: reported on stderr with exit code 2."""


def parse_tiers(text: str) -> tuple[int, ...]:
    tiers: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        try:
            if "-" in part:
                lo, hi = (int(x) for x in part.split("-", 1))
                tiers.update(range(lo, hi + 1))
            elif part:
                tiers.add(int(part))
        except ValueError:
            raise UsageError(f"--tiers {text!r}: expected numbers like 0,1,2 or 0-3") from None
    if not tiers or not tiers <= set(CHECK_TIERS):
        raise UsageError(f"--tiers {text!r}: tiers are {', '.join(map(str, CHECK_TIERS))}")
    return tuple(sorted(tiers))


def add(parser, name: str, detail: str = "", **kwargs) -> argparse.Action:
    """Add the shared flag ``name`` to ``parser`` (a parser or an argument group). ``detail`` follows
    the meaning in the help (what it bounds here, its default); ``kwargs`` (default, dest, choices: a
    subset of the flag's) go to argparse."""
    flag = SHARED[name]
    help_text = flag.meaning + (f"; {detail}" if detail else "")
    if flag.type is None:
        return parser.add_argument(name, action="store_true", help=help_text, **kwargs)
    kwargs.setdefault("choices", flag.choices)
    if kwargs["choices"] is not None and not set(kwargs["choices"]) <= set(flag.choices or kwargs["choices"]):
        raise ValueError(f"{name}: choices {kwargs['choices']} are not the shared vocabulary {flag.choices}")
    if kwargs["choices"] is None:
        kwargs.setdefault("metavar", flag.metavar)
    return parser.add_argument(name, type=flag.type, help=help_text, **kwargs)


def add_model(parser, provider_detail: str = "", api_key_env: bool = True) -> None:
    """Which model answers: --provider, --model, --base-url, --api-key-env, --scripted-file."""
    add(parser, "--provider", provider_detail)
    for name in ("--model", "--base-url", "--api-key-env", "--scripted-file"):
        if name != "--api-key-env" or api_key_env:
            add(parser, name)


def add_search_knobs(parser) -> None:
    """The search algorithms' own knobs (parallel, beam, evolve): `search` and eval's search methods."""
    from ..agents.search import SearchOptions

    d = SearchOptions()
    parser.add_argument("--trajectories", type=int, default=d.trajectories, help="parallel: independent trajectories")
    parser.add_argument("--width", type=int, default=d.width, help="beam: nodes kept per depth")
    parser.add_argument("--depth", type=int, default=d.depth, help="beam: levels")
    parser.add_argument("--branches", type=int, default=d.branches, help="beam: children per beam node")
    parser.add_argument("--keep-factor", type=float, default=d.keep_factor,
                        help="beam: a child survives when speedup >= this x its parent's speedup")
    parser.add_argument("--population", type=int, default=d.population, help="evolve: population size")
    parser.add_argument("--generations", type=int, default=d.generations, help="evolve: generations")
    parser.add_argument("--crossover-rate", type=float, default=d.crossover_rate,
                        help="evolve: share of each generation's children made by crossover")


def add_rate_limits(parser) -> None:
    """--requests-per-minute, --tokens-per-minute (run-wide; rate-limited replies are retried as
    Retry-After asks, the wait shown)."""
    add(parser, "--requests-per-minute", "rate-limited replies are retried as Retry-After asks, the wait shown",
        default=0.0)
    add(parser, "--tokens-per-minute", default=0.0)


def add_pool(parser) -> None:
    """Where the device pool's workers are (ssh hosts, Ray actors): search, eval, optimize, tune."""
    add(parser, "--host", "repeat it for a pool of hosts, one device worker each", action="append")
    parser.add_argument("--hosts-file", help="ssh: a file of hosts, one a line (# comments), added to --host")
    add(parser, "--ssh-command")
    add(parser, "--remote-worker", "default: pallasite worker", default="pallasite worker")
    add(parser, "--ray-address")
    add(parser, "--ray-resources")
    add(parser, "--devices", "default 1", default=1)
    parser.add_argument("--ray-placement", choices=("spread", "strict_spread", "pack", "strict_pack"),
                        help="ray: place the pool's actors in one placement group (strict_spread: one per node, "
                             "e.g. one per host of a multi-host slice)")
    parser.add_argument("--device-kind", help="a mixed pool: the chip kind the run's jobs go to (e.g. 'TPU v6 lite'; "
                        "default: the kind most workers have)")


def add_backend(parser, detail: str = "default estimate; local / ssh / ray: tests and timings on the device pool "
                "there (--devices, several --host)") -> None:
    """--backend estimate|local|ssh|ray, where its pool is, and --allow-unconfined: the agent commands."""
    add(parser, "--backend", detail, default="estimate")
    add_pool(parser)
    add(parser, "--allow-unconfined")


def translate(command: str, argv: list[str], err=None) -> list[str]:
    """``argv`` (the command's own arguments) with this command's old spellings replaced by the new
    ones, each said once on ``err`` (stderr). ``--old=value`` works too; nothing after ``--`` changes."""
    renamed = RENAMED.get(command, {})
    out: list[str] = []
    said: set[str] = set()
    rest = False
    for arg in argv:
        if rest or arg == "--" or not arg.startswith("--"):
            rest = rest or arg == "--"
            out.append(arg)
            continue
        old, eq, value = arg.partition("=")
        new = renamed.get(old)
        if new is None:
            out.append(arg)
            continue
        if old not in said:
            said.add(old)
            print(f"pallasite {command}: note: {old} is deprecated and goes in the next release; use {new}",
                  file=err or sys.stderr)
        out.extend(new.split())
        if eq:
            out.append(value)
    return out


# `pallasite worker` is the worker's own protocol loop (runner/, which imports nothing of server/):
# started by pallasite, not typed by users, so it is outside the vocabulary.
INTERNAL = ("worker",)


def command_parsers() -> dict[str, argparse.ArgumentParser]:
    """Every user-facing subcommand's parser, built as `pallasite` builds it (imports each command module)."""
    import importlib

    from .commands import COMMANDS

    parsers = {}
    for name, (module_name, help_text) in COMMANDS.items():
        if name in INTERNAL:
            continue
        module = importlib.import_module(module_name)
        parser = argparse.ArgumentParser(prog=f"pallasite {name}", description=help_text)
        module.add_arguments(parser, name)
        parsers[name] = parser
    return parsers


def uses() -> dict[str, list[str]]:
    """Shared flag name -> the commands that take it, in the CLI's order."""
    found: dict[str, list[str]] = {name: [] for name in SHARED}
    for command, parser in command_parsers().items():
        for action in parser._actions:
            for option in action.option_strings:
                if option in found:
                    found[option].append(command)
    return found


def markdown_table() -> str:
    """The README's table of shared flags (tests/test_flags.py checks the README holds exactly this)."""
    rows = ["| flag | value | means | in |", "|---|---|---|---|"]
    for name, commands in uses().items():
        flag = SHARED[name]
        value = "switch" if flag.type is None else ("|".join(flag.choices) if flag.choices else
                                                    f"{flag.metavar} ({flag.type.__name__})")
        rows.append(f"| `{name}` | {value.replace('|', ' / ')} | {flag.meaning.replace('|', '/')} | "
                    f"{', '.join(commands) or '-'} |")
    return "\n".join(rows)


if __name__ == "__main__":  # python -m pallasite.server.flags: print the README's table
    print(markdown_table())
