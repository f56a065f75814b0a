"""The command line's one vocabulary of flags: each shared flag defined once (name, type, help, default).

Every ``cmd_*.add_arguments`` adds a shared flag through :func:`add`, so a flag has the same name,
type, choices and help in every command that takes it, and the same default unless its definition
gives each command its own (named in the one help text). What a flag bounds in a command is said
in that one help text (``per``), never by the command. Budgets are named by their unit
(``--max-nodes``, ``--max-iterations``, ``--max-rounds``, ``--max-evaluations``, ``--max-tokens``),
``--time-limit`` bounds a command's unit of work and ``--request-time-limit`` each worker request
inside a longer run, JSON is ``--format json`` (eval's ``--output FILE`` writes it to a file), HTML
is ``--report FILE``.

Old spellings keep working for one release: :func:`translate` rewrites them in a command's argv
before it is parsed and says so on stderr. The README's flag table is :func:`markdown_table`
(tests/test_flags.py compares every command's parser with the others and with the definitions)."""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from typing import Any, Callable

from ...analysis.types import TIERS as CHECK_TIERS


@dataclass(frozen=True)
class Flag:
    """One shared flag. ``type`` is None for a switch (store_true); ``choices`` is the whole
    vocabulary. ``per`` adds what the flag bounds in some commands ((commands, words), said in one
    help text that every command shows); ``defaults`` gives a command its own default where the commands
    differ (one value per command, named in the help), else every command has ``default``."""

    name: str
    type: type | Callable[[str], Any] | None
    meaning: str
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    default: Any = None
    defaults: tuple[tuple[str, Any], ...] = ()
    per: tuple[tuple[str, str], ...] = ()
    action: str | None = None  # "append": repeatable
    short: str | None = None  # a one-letter spelling too, e.g. -v
    more_choices: tuple[tuple[str, tuple[str, ...]], ...] = ()  # command -> choices it takes besides ``choices``

    def choices_for(self, command: str) -> tuple[str, ...] | None:
        extra = dict(self.more_choices).get(command, ())
        return None if self.choices is None else self.choices + extra

    def default_for(self, command: str) -> Any:
        return dict(self.defaults).get(command, self.default)

    @property
    def help(self) -> str:
        """The one help text of the flag, the same in every command."""
        text = self.meaning + "".join(f"; {commands}: {words}" for commands, words in self.per)
        if self.defaults:
            by_value: dict[str, list[str]] = {}
            for command, value in self.defaults:
                by_value.setdefault(_shown(value), []).append(command)
            text += " (default: " + "; ".join(f"{v} in {', '.join(cs)}" for v, cs in by_value.items()) + ")"
        elif self.default not in (None, False, [], ()):
            text += f" (default: {_shown(self.default)})"
        return text.replace("%", "%%")


def _shown(value: Any) -> str:
    return "none" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


def chip(text: str) -> str:
    """--target's type: a chip of the table (argparse says which there are)."""
    from ...engine.checker import TARGETS

    if text not in TARGETS:
        raise argparse.ArgumentTypeError(f"{text!r}: unknown chip; choose one of {', '.join(TARGETS)}")
    return text


_AGENTS = ("optimize", "tune", "search", "eval")
_FLAGS = (
    Flag("--target", chip, "the TPU chip: v4, v5e, v5p, v6e or 7x (default: the project's `target` setting, v6e)",
         "CHIP"),
    Flag("--tiers", str, "checker tiers, e.g. 0,1,2 or 0-3 (default: the `tiers` setting)", "TIERS"),
    Flag("--format", str, "output: text, or json (a versioned document, on stdout)", choices=("text", "json"),
         default="text", per=(("check", "also sarif (SARIF 2.1.0, for code scanning)"),),
         more_choices=(("check", ("sarif",)),)),
    Flag("--output", str, "write the JSON document to FILE (with --format text the text still goes to stdout; with "
         "--format json only a line saying where the document is)", "FILE"),
    Flag("--report", str, "write a self-contained HTML report to FILE", "FILE",
         per=(("search", "default .pallasite/search/<run id>.html"),)),
    Flag("--backend", str, "where kernels run: estimate (nothing runs on a device: the cost model's figures for "
         "--target, labelled estimate), local (a worker on this machine: its accelerator, else TPU interpret mode "
         "on its CPU), ssh (a worker on --host), ray (a Ray actor)",
         choices=("estimate", "local", "ssh", "ray"),
         defaults=(("time", "local"), ("profile", "local"), *((c, "estimate") for c in _AGENTS))),
    Flag("--time-limit", float, "wall-clock limit in seconds",
         "SECONDS", per=(("check", "each file, in the worker"), ("time, profile", "the whole command"),
                         ("optimize", "the whole run, inside every phase"),
                         ("eval", "each task and method, its scoring included")),
         defaults=(("check", None), ("time", 600.0), ("profile", 600.0), ("optimize", 1800.0), ("eval", 1800.0))),
    Flag("--request-time-limit", float, "seconds each worker request inside a longer run may take (a check, a "
         "test or a timing of one candidate); default: the project's check.timeLimitS", "SECONDS", default=None),
    Flag("--max-nodes", int, "search nodes (optimize iterations in the graph) at most", "N",
         per=(("eval", "search methods, per task"),), default=50),
    Flag("--max-iterations", int, "optimize-loop iterations at most (a parallel search: per trajectory)", "N",
         per=(("eval", "auto, per task"),),
         defaults=(("optimize", 3), ("search", 5), ("eval", 5))),
    Flag("--max-rounds", int, "verified-fixer rounds at most (a model's proposal checked by the tiers, each)", "N",
         per=(("fix", "none: the agent.maxRounds setting (3)"), ("optimize", "per failing candidate; 0: no fixer")),
         defaults=(("fix", None), ("optimize", 0))),
    Flag("--max-evaluations", int, "device evaluations (configurations timed) at most", "N",
         per=(("tune", "default: 25% of the estimated feasible configurations"),)),
    Flag("--max-tokens", int, "model tokens at most (input + output + thinking)", "N",
         per=(("optimize", "the whole run"), ("eval", "per task and method")), default=500_000),
    Flag("--provider", str, "the model: gemini, openai, scripted, or replay:<run id> (a recorded run's answers; "
         "eval: a recorded eval's id; default: the agent.provider setting)", "NAME"),
    Flag("--model", str, "the model name (default: the provider's)", "NAME"),
    Flag("--base-url", str, "an OpenAI-compatible endpoint (openai) or an API endpoint override (gemini)", "URL"),
    Flag("--api-key-env", str, "the environment variable holding the API key", "VAR"),
    Flag("--scripted-file", str, "scripted provider: a JSON list of replies (docs/agents.md shows each agent's)",
         "JSON"),
    Flag("--requests-per-minute", float, "run-wide limit on model requests per minute (0: none; rate-limited "
         "replies are retried as Retry-After asks, the wait shown)", "N", default=0.0),
    Flag("--tokens-per-minute", float, "run-wide limit on model tokens per minute (0: none)", "N", default=0.0),
    Flag("--price-input", float, "USD per million input tokens (for the cost column; 0: cost unknown)", "USD",
         default=0.0),
    Flag("--price-output", float, "USD per million output and thinking tokens", "USD", default=0.0),
    Flag("--seed", int, "the seed of every random choice", "N",
         per=(("time, profile", "of the fresh random inputs; none: a new one each run"),),
         defaults=(("time", None), ("profile", None), ("tune", 0), ("search", 0), ("eval", 0))),
    Flag("--jobs", int, "workers used at once", "N",
         per=(("check", "files checked at once, each in its own warm worker; none: the number of cores, at most 4"),
              ("tune", "configurations estimated at once"), ("search", "nodes evaluated at once"),
              ("eval", "tasks evaluated at once")),
         defaults=(("check", None), ("tune", min(2, os.cpu_count() or 1)), ("search", 2), ("eval", 1))),
    Flag("--memory-mb", int, "each worker's memory limit in MiB (RSS; a remote worker enforces it itself; default: "
         "the project's check.memoryMb setting, 4096; interpret-mode checks of big kernels can need more)", "MIB"),
    Flag("--runs", int, "timed runs, of the kernel and of the reference each", "N",
         defaults=(("time", 20), ("profile", 5))),
    Flag("--entry", str, "the task's entry when the file has several", "NAME"),
    Flag("--kernel", str, "score this kernel FILE as the task's candidate, against the task's reference and "
         "inputs (eval: the one task named)", "FILE"),
    Flag("--apply", None, "write the result into the file (only if it is unchanged since the run began)",
         per=(("fix", "the verified fix"), ("optimize", "the winner (without it: FILE.optimized.py beside it)"),
              ("tune", "the best configuration"), ("search", "the best node's source"))),
    Flag("--no-store", None, "do not record results in .pallasite/results.sqlite (nor reuse them)"),
    Flag("--allow-unconfined", None, "run model-written code even where no confined worker can be made; it then "
         "runs with your rights (it could read, change or delete your files and use the network)"),
    Flag("--host", str, "ssh: a host (user@host) that runs `pallasite worker`; repeat it for a pool of hosts, one "
         "device worker each (time and profile take one)", "HOST", action="append"),
    Flag("--ssh-command", str, "ssh: the whole launcher command line ({worker} marks the worker command), e.g. "
         "'gcloud compute tpus tpu-vm ssh NAME --zone Z --command \"{worker}\"'", "CMD"),
    Flag("--remote-worker", str, "ssh: the worker command on the host, e.g. '~/venv/bin/pallasite worker'", "CMD",
         default="pallasite worker"),
    Flag("--ray-address", str, "ray: the cluster (default: RAY_ADDRESS, else a local cluster)", "ADDRESS"),
    Flag("--ray-resources", str, "ray: resources each worker holds, e.g. TPU=1 (a chip) or TPU=4 (a host's chips)",
         "RES"),
    Flag("--verbose", None, "say more", short="-v",
         per=(("check", "text format: also notes, information findings and a line per file saying which tiers ran"),
              ("tune", "every step of the walk through tier 2, with the compiler's messages"),
              ("serve", "debug messages too, in the log file"))),
    Flag("--devices", int, "device workers the pool holds (Ray actors); jobs run on all of them at once", "N",
         default=1),
)
SHARED: dict[str, Flag] = {f.name: f for f in _FLAGS}

# command -> {old spelling: new spelling}; a new spelling with a space also gives a value ("--format json").
# Kept for one release, with a note on stderr.
RENAMED: dict[str, dict[str, str]] = {
    "search": {"--budget": "--max-nodes", "--iterations": "--max-iterations"},
    "eval": {"--budget": "--max-nodes", "--iterations": "--max-iterations", "--max-seconds": "--time-limit",
             "--timeout": "--request-time-limit", "--json": "--output"},
    "optimize": {"--iterations": "--max-iterations", "--max-seconds": "--time-limit", "--fix-rounds": "--max-rounds"},
    "tune": {"--budget": "--max-evaluations", "--chip": "--target", "--estimates": "--max-estimates"},
    "fix": {"--rounds": "--max-rounds"},
    "check": {"--no-cache": "--no-store"},
    "chips": {"--json": "--format json"},
    "docs": {"--json": "--format json"},
}


def deprecated_markdown() -> str:
    """The README's list of old spellings, each with the commands that still take it and its new one
    (tests/test_flags.py checks the README holds exactly this)."""
    by_old: dict[tuple[str, str], list[str]] = {}
    for command, renamed in RENAMED.items():
        for old, new in renamed.items():
            by_old.setdefault((old, new), []).append(command)
    return ", ".join(f"`{old}` ({', '.join(commands)}; now `{new}`)" for (old, new), commands in sorted(by_old.items()))


class UsageError(Exception):
    """Bad command-line input: reported on stderr with exit code 2."""


class Parser(argparse.ArgumentParser):
    """A usage error is one line that says ``error:`` first, as every other error of the command line
    does, and where the help is (no usage block before it: the help has it)."""

    def error(self, message: str):
        self.exit(2, f"error: {message}{_renamed_hint(self, message)} (see `{self.prog} --help`)\n")


def _renamed_hint(parser: argparse.ArgumentParser, message: str) -> str:
    """For an unrecognized old spelling another command still takes (`check --chip`): what this
    command calls it, where it takes the new one."""
    if not message.startswith("unrecognized arguments:"):
        return ""
    mine = set(parser._option_string_actions)
    said = []
    for word in message.split(":", 1)[1].split():
        old = word.split("=", 1)[0]
        new = {n for renamed in RENAMED.values() for o, n in renamed.items() if o == old and n.split()[0] in mine}
        if len(new) == 1:
            said.append(f"{old} is now {new.pop()}")
    return f"; {', '.join(said)}" if said else ""


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


def add(parser, name: str, command: str, *, suppress: bool = False, **kwargs) -> argparse.Action:
    """Add the shared flag ``name`` to ``parser`` (a parser or an argument group) of ``command``: its one
    type, choices, help and (``command``'s) default. ``kwargs`` are only where the value goes (``dest``);
    ``suppress``: no default (a subcommand's copy of a flag its parent parser also takes)."""
    flag = SHARED[name]
    names = (flag.short, name) if flag.short else (name,)
    if suppress:
        kwargs["default"] = argparse.SUPPRESS
        return parser.add_argument(*names, type=flag.type, choices=flag.choices_for(command), help=flag.help,
                                   **kwargs)
    if set(kwargs) - {"dest"}:
        raise ValueError(f"{name}: {sorted(set(kwargs) - {'dest'})} belong in the flag's one definition "
                         "(server/commands/flags.py), not in one command")
    if flag.defaults and command not in dict(flag.defaults):
        raise ValueError(f"{name}: give {command}'s default in the flag's definition (server/commands/flags.py)")
    if flag.type is None:
        return parser.add_argument(*names, action="store_true", help=flag.help, **kwargs)
    if flag.action:
        kwargs["action"] = flag.action
    if flag.choices is None:
        kwargs["metavar"] = flag.metavar
    return parser.add_argument(*names, type=flag.type, choices=flag.choices_for(command),
                               default=flag.default_for(command),
                               help=flag.help, **kwargs)


def add_model(parser, command: str, api_key_env: bool = True) -> None:
    """Which model answers: --provider, --model, --base-url, --api-key-env, --scripted-file."""
    for name in ("--provider", "--model", "--base-url", "--api-key-env", "--scripted-file"):
        if name != "--api-key-env" or api_key_env:
            add(parser, name, command)


def add_search_knobs(parser) -> None:
    """The search algorithms' own knobs (parallel, beam, evolve): `search` and eval's search methods."""
    from ...agents.search import SearchOptions

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


def add_rate_limits(parser, command: str) -> None:
    """--requests-per-minute, --tokens-per-minute (run-wide; rate-limited replies are retried as
    Retry-After asks, the wait shown)."""
    add(parser, "--requests-per-minute", command)
    add(parser, "--tokens-per-minute", command)


def add_pool(parser, command: str) -> None:
    """Where the device pool's workers are (ssh hosts, Ray actors): search, eval, optimize, tune."""
    add(parser, "--host", command)
    parser.add_argument("--hosts-file", help="ssh: a file of hosts, one a line (# comments), added to --host")
    for name in ("--ssh-command", "--remote-worker", "--ray-address", "--ray-resources", "--devices"):
        add(parser, name, command)
    parser.add_argument("--ray-placement", choices=("spread", "strict_spread", "pack", "strict_pack"),
                        help="ray: place the pool's actors in one placement group (strict_spread: one per node, "
                             "e.g. one per host of a multi-host slice)")
    parser.add_argument("--device-kind", help="a mixed pool: the chip kind the run's jobs go to (e.g. 'TPU v6 lite'; "
                        "default: the kind most workers have)")


def add_backend(parser, command: str) -> None:
    """--backend estimate|local|ssh|ray, where its pool is, and --allow-unconfined: the agent commands."""
    add(parser, "--backend", command)
    add_pool(parser, command)
    add(parser, "--allow-unconfined", command)


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

    from .table import COMMANDS

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
        kind = "str" if flag.type is chip else getattr(flag.type, "__name__", "")
        value = "switch" if flag.type is None else ("|".join(flag.choices) if flag.choices else
                                                    f"{flag.metavar} ({kind})")
        spelled = f"`{flag.short}`, `{name}`" if flag.short else f"`{name}`"
        rows.append(f"| {spelled} | {value.replace('|', ' / ')} | {flag.help.replace('%%', '%').replace('|', '/')} | "
                    f"{', '.join(commands) or '-'} |")
    return "\n".join(rows)


if __name__ == "__main__":  # python -m pallasite.server.commands.flags: print the README's table
    print(markdown_table())
