"""One flag vocabulary (server/commands/flags.py): every subcommand's parser is walked, and each shared flag it
takes must have the one definition's name, type, meaning and choices; the README's table must be the
one the definitions and the parsers give; old spellings still parse, with a note on stderr."""

from __future__ import annotations

import argparse
import io
import re
from pathlib import Path

import pytest

from pallasite.server.commands import flags

ROOT = Path(__file__).resolve().parent.parent
PARSERS = flags.command_parsers()


def _options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {o: a for a in parser._actions for o in a.option_strings}


def _signature(action: argparse.Action) -> tuple:
    """What must be the same everywhere; a shared flag's choices may add to the vocabulary for one command
    only where its definition says so (check's --format sarif), compared there."""
    flag = next((flags.SHARED[o] for o in action.option_strings if o in flags.SHARED), None)
    choices = flag.choices if flag is not None and flag.more_choices else action.choices
    return (type(action).__name__, action.type, tuple(choices) if choices is not None else None,
            action.help, tuple(action.option_strings))


def test_a_flag_is_the_same_in_every_command_that_takes_it():
    """The parsers compared with each other: a flag name has one type, kind (switch, value, repeatable),
    choices, help and spelling set everywhere, and one default unless its definition gives each command
    its own (then the one help text names them)."""
    seen: dict[str, dict[tuple, list[str]]] = {}
    defaults: dict[str, dict[str, list[str]]] = {}
    for command, parser in PARSERS.items():
        for option, action in _options(parser).items():
            seen.setdefault(option, {}).setdefault(_signature(action), []).append(command)
            if action.default is not argparse.SUPPRESS:
                defaults.setdefault(option, {}).setdefault(repr(action.default), []).append(command)
    differ = [f"{option}: " + " vs ".join(f"{cmds} {sig[:4]}" for sig, cmds in sigs.items())
              for option, sigs in seen.items() if len(sigs) > 1]
    assert not differ, "\n".join(differ)
    by_command = [f"{option}: defaults {dict(d)} differ, and the definition does not give each command its own"
                  for option, d in defaults.items()
                  if len(d) > 1 and not (option in flags.SHARED and flags.SHARED[option].defaults)]
    assert not by_command, "\n".join(by_command)


@pytest.mark.parametrize("command", sorted(PARSERS))
def test_each_shared_flag_is_its_one_definition(command):
    wrong = []
    for option, action in _options(PARSERS[command]).items():
        flag = flags.SHARED.get(option)
        if flag is None:
            continue
        if flag.type is None:
            if not isinstance(action, argparse._StoreTrueAction):
                wrong.append(f"{option}: should be a switch")
        elif action.type is not flag.type:
            wrong.append(f"{option}: type {action.type} is not {flag.type}")
        if action.help != flag.help:
            wrong.append(f"{option}: help {action.help!r} is not the definition's {flag.help!r}")
        if action.default is not argparse.SUPPRESS and flag.type is not None and \
                action.default != flag.default_for(command):
            wrong.append(f"{option}: default {action.default!r} is not the definition's {flag.default_for(command)!r}")
        if (tuple(action.choices) if action.choices is not None else None) != flag.choices_for(command):
            wrong.append(f"{option}: choices {action.choices} are not {flag.choices_for(command)}")
        if action.option_strings != ([flag.short, option] if flag.short else [option]):
            wrong.append(f"{option}: other spellings on the same flag {action.option_strings}")
    assert not wrong, f"pallasite {command}:\n" + "\n".join(wrong)


_MENTION = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")


@pytest.mark.parametrize("command", sorted(PARSERS))
def test_no_help_names_a_flag_the_command_does_not_take(command):
    """(Nine commands' --format help said "unless --output", which only eval takes.)"""
    parser = PARSERS[command]
    options = set(_options(parser))
    texts = [parser.description or ""] + [a.help or "" for a in parser._actions if a.help is not argparse.SUPPRESS]
    texts = [re.sub(r"'[^']*'", "", text) for text in texts]  # a quoted example's own flags (ssh's --zone)
    missing = sorted({m for text in texts for m in _MENTION.findall(text)} - options)
    assert not missing, f"pallasite {command}: its help names {missing}, which it does not take"


def test_the_comparison_catches_a_flag_that_differs():
    one, two = argparse.ArgumentParser(), argparse.ArgumentParser()
    one.add_argument("--memory-mb", type=int, default=4096, help="memory")
    two.add_argument("--memory-mb", type=int, default=16384, help="memory")
    assert _options(one)["--memory-mb"].default != _options(two)["--memory-mb"].default
    assert _MENTION.findall("on stdout unless --output; see --max-rounds") == ["--output", "--max-rounds"]


@pytest.mark.parametrize("command", sorted(PARSERS))
def test_old_spellings_are_gone_from_the_parsers_and_their_new_names_exist(command):
    options = _options(PARSERS[command])
    for old, new in flags.RENAMED.get(command, {}).items():
        assert old not in options, f"pallasite {command} still defines {old}"
        for word in new.split():
            if word.startswith("--"):
                assert word in options, f"pallasite {command}: {old} becomes {new}, which it does not take"


def test_no_budget_or_timeout_word_is_left_anywhere():
    # the words the vocabulary replaced: a budget named by no unit, a second word for a time limit, JSON to a file
    for command, parser in PARSERS.items():
        left = {"--budget", "--iterations", "--max-seconds", "--timeout", "--json", "--chip"} & set(_options(parser))
        assert not left, f"pallasite {command}: {sorted(left)}"


def test_the_readme_table_is_the_definitions():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert flags.markdown_table() in readme, "README's flag table is stale: python -m pallasite.server.commands.flags prints it"


def _parse(command: str, argv: list[str]) -> argparse.Namespace:
    return PARSERS[command].parse_args(argv)


@pytest.mark.parametrize("command, old, new", [
    ("search", ["k.py", "--budget", "3", "--iterations=2"], ["k.py", "--max-nodes", "3", "--max-iterations", "2"]),
    ("optimize", ["k.py", "--iterations", "2", "--max-seconds", "9"], ["k.py", "--max-iterations", "2", "--time-limit", "9"]),
    ("eval", ["d", "--json", "o.json", "--timeout", "5", "--budget", "4"],
     ["d", "--output", "o.json", "--request-time-limit", "5", "--max-nodes", "4"]),
    ("tune", ["k.py", "--chip", "v5e", "--budget", "7", "--estimates", "9"],
     ["k.py", "--target", "v5e", "--max-evaluations", "7", "--max-estimates", "9"]),
    ("fix", ["k.py", "--rounds", "2"], ["k.py", "--max-rounds", "2"]),
    ("chips", ["--json"], ["--format", "json"]),
    ("check", ["k.py", "--no-cache"], ["k.py", "--no-store"]),
])
def test_old_spellings_still_parse_with_a_note(command, old, new):
    err = io.StringIO()
    assert _parse(command, flags.translate(command, old, err)) == _parse(command, new)
    notes = err.getvalue().splitlines()
    assert notes and all(n.startswith(f"pallasite {command}: note: --") and "deprecated" in n for n in notes)


def test_translate_leaves_other_words_alone():
    err = io.StringIO()
    argv = ["k.py", "--budget-file", "x", "--", "--budget"]
    assert flags.translate("search", argv, err) == argv and not err.getvalue()
    assert flags.translate("check", ["--budget", "3"], err) == ["--budget", "3"]  # not an old spelling of check's


def test_docs_search_takes_format_json_anywhere():
    from pallasite.server import cli

    with pytest.raises(SystemExit):  # --json on `docs` itself and after the action both translate
        cli.main(["docs", "--help"])
    assert flags.translate("docs", ["search", "q", "--json"], io.StringIO()) == ["search", "q", "--format", "json"]


def test_time_and_profile_take_target_from_the_project_settings(tmp_path):
    """--target's meaning says "default: the project's target setting": profile used none (the worker's own)."""
    from pallasite.server.commands import cmd_time

    (tmp_path / "pyproject.toml").write_text('[tool.pallasite]\ntarget = "v5e"\n')
    kernel = str(tmp_path / "k.py")
    assert cmd_time._target(argparse.Namespace(command="profile", target=None), kernel) == "v5e"
    assert cmd_time._target(argparse.Namespace(command="profile", target="v4"), kernel) == "v4"
    assert cmd_time._target(argparse.Namespace(command="time", target=None), kernel) == "v5e"


@pytest.mark.parametrize("command", sorted(c for c, p in PARSERS.items() if "--target" in _options(p)))
def test_every_command_refuses_an_unknown_chip(command, capsys):
    """profile --target v9 was accepted where every other command refused it."""
    positional = {"eval": ["folder"], "check": ["k.py"]}.get(command, ["k.py"])
    with pytest.raises(SystemExit) as stop:
        PARSERS[command].parse_args([*positional, "--target", "v9"])
    assert stop.value.code == 2 and "unknown chip" in capsys.readouterr().err


def test_the_readme_lists_each_old_spelling_with_the_commands_that_take_it():
    """Before, the README said `--chip`, `--json`, `--estimates`, `--timeout` still work, with no command;
    `check --chip` and `time --json` were then unknown flags with no word of the new name (issue 52)."""
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert flags.deprecated_markdown() in readme, "README's old spellings are stale: flags.deprecated_markdown()"
    for command, renamed in flags.RENAMED.items():
        for old, new in renamed.items():
            assert f"`{old}` (" in flags.deprecated_markdown() and command in flags.deprecated_markdown()


@pytest.mark.parametrize("argv, said", [
    (["check", "--chip", "v5e", "k.py"], "error: unrecognized arguments: --chip; --chip is now --target "
                                         "(see `pallasite check --help`)"),
    (["time", "--json", "k.py"], "error: unrecognized arguments: --json; --json is now --format json "
                                 "(see `pallasite time --help`)"),
    (["check", "--frobnicate", "k.py"], "error: unrecognized arguments: --frobnicate (see `pallasite check --help`)"),
])
def test_an_old_spelling_elsewhere_is_one_line_that_names_the_new_one(argv, said, capsys):
    """Before: a 5-11 line usage block, then "unrecognized arguments: --chip" alone."""
    from pallasite.server.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    assert capsys.readouterr().err.splitlines() == [said]
