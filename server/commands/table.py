"""The command line's table of subcommands: name -> (the module that runs it, its one-line help).

Read by the CLI (server/cli.py) and by the flag vocabulary's walk over every command's parser
(server/commands/flags.py); a module of its own so neither imports the other."""

from __future__ import annotations

# name -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "check": ("pallasite.server.commands.cmd_check", "check Pallas kernel files for the target TPU"),
    "fix": ("pallasite.server.commands.cmd_fix", "an LLM proposes a minimal fix; printed only once the checker verified it"),
    "time": ("pallasite.server.commands.cmd_time", "time a kernel against its XLA reference, after checking it cannot game the timing"),
    "profile": ("pallasite.server.commands.cmd_time", "profile a kernel: per-kernel time, FLOP/s and bytes/s vs the roofline, the trace"),
    "optimize": ("pallasite.server.commands.cmd_optimize", "the optimize loop: plan, implement, test, tune, measure; best valid candidate wins"),
    "tune": ("pallasite.server.commands.cmd_tune", "autotune a kernel's block sizes for a TPU chip (cost model; device when given)"),
    "search": ("pallasite.server.commands.cmd_search", "search for a faster kernel: parallel / beam / evolutionary optimize runs, with an HTML report"),
    "eval": ("pallasite.server.commands.cmd_eval", "evaluate a folder of JAXBench/MaxKernel tasks: compile/correct rates, geomean speedup, fast_p"),
    "serve": ("pallasite.server.commands.cmd_serve", "run the language server (stdio, or --tcp on 127.0.0.1)"),
    "mcp": ("pallasite.server.commands.cmd_mcp", "run the MCP server for coding agents (stdio): check, judge, tune, ... as tools"),
    "worker": ("pallasite.runner.worker", "run a worker: JSON lines on stdin/stdout (used by the server, ssh and Ray)"),
    "explain": ("pallasite.server.commands.cmd_knowledge", "explain a finding code, e.g. `pallasite explain PLS001`"),
    "docs": ("pallasite.server.commands.cmd_knowledge", "search the offline Pallas docs: `pallasite docs search QUERY`"),
    "store": ("pallasite.server.commands.cmd_knowledge", "show or clear the results store under .pallasite/"),
    "settings": ("pallasite.server.commands.cmd_settings", "show the settings, or their JSON Schema with --schema"),
    "chips": ("pallasite.server.commands.cmd_chips", "show the TPU chip table read from the installed jax (via a worker)"),
}
