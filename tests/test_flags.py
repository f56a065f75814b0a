"""One flag vocabulary (server/flags.py): every subcommand's parser is walked, and each shared flag it
takes must have the one definition's name, type, meaning and choices; the README's table must be the
one the definitions and the parsers give; old spellings still parse, with a note on stderr."""

from __future__ import annotations

import argparse
import io
from pathlib import Path

import pytest

from pallasite.server import flags

ROOT = Path(__file__).resolve().parent.parent
PARSERS = flags.command_parsers()


def _options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {o: a for a in parser._actions for o in a.option_strings}


@pytest.mark.parametrize("command", sorted(PARSERS))
def test_each_shared_flag_has_its_one_definition(command):
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
        if not (action.help or "").startswith(flag.meaning):
            wrong.append(f"{option}: help {action.help!r} does not start with the meaning {flag.meaning!r}")
        if action.choices is not None and not set(action.choices) <= set(flag.choices or ()):
            wrong.append(f"{option}: choices {action.choices} are outside {flag.choices}")
        if action.option_strings != [option]:
            wrong.append(f"{option}: other spellings on the same flag {action.option_strings}")
    assert not wrong, f"pallasite {command}:\n" + "\n".join(wrong)


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
    assert flags.markdown_table() in readme, "README's flag table is stale: python -m pallasite.server.flags prints it"


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


def test_profile_takes_target_from_the_project_settings(tmp_path):
    """--target's meaning says "default: the project's target setting": profile used none (the worker's own)."""
    from pallasite.server import cmd_time

    (tmp_path / "pyproject.toml").write_text('[tool.pallasite]\ntarget = "v5e"\n')
    kernel = str(tmp_path / "k.py")
    assert cmd_time._target(argparse.Namespace(command="profile", target=None), kernel) == "v5e"
    assert cmd_time._target(argparse.Namespace(command="profile", target="v4"), kernel) == "v4"
    assert cmd_time._target(argparse.Namespace(command="time"), kernel) is None
