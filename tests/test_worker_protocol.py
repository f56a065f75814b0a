"""Unit tests of the worker's pieces that need no process: messages, env allowlist, loader."""

from __future__ import annotations

import json
import os
import sys
import traceback

import pytest

from pallasite.runner import loader
from pallasite.wire import env, messages, protocol

DATA = os.path.join(os.path.dirname(__file__), "data", "worker")


# --------------------------------------------------------------------------- messages


def test_request_round_trips_through_one_line():
    params = messages.CheckParams(source=messages.Sources(messages.SourceFile("/k.py", "x = 'é'\n")))
    msg = protocol.request("7-1", params, deadline_s=2.5)
    line = protocol.encode(msg)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    back = protocol.decode(line)
    assert back == msg and back["op"] == "check"
    assert protocol.read_params(back["op"], back["params"]) == params


@pytest.mark.parametrize(
    "line, fragment",
    [
        (b"not json", "not a JSON line"),
        (b"[1, 2]", "JSON object with a string 'kind'"),
        (b'{"kind": "launch"}', "unknown message kind 'launch'"),
        (b'{"kind": "request", "op": "ping"}', "needs a string 'id'"),
        (b'{"kind": "request", "id": "1"}', "needs a string 'op'"),
        (b'{"kind": "request", "id": "1", "op": "ping", "params": 3}', "'params' must be an object"),
        (b'{"kind": "request", "id": "1", "op": "ping", "deadline_s": "soon"}', "'deadline_s' must be a number"),
        (b'{"kind": "result", "id": "1"}', "boolean 'ok'"),
        (b"\xff\xfe", "not UTF-8"),
    ],
)
def test_bad_lines_are_rejected_with_the_reason(line, fragment):
    with pytest.raises(protocol.ProtocolError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        protocol.decode(line)


def test_nan_is_not_sent_as_invalid_json():
    with pytest.raises(ValueError):
        protocol.encode(protocol.result_ok("1", {"x": float("nan")}))


def test_handshake_version_mismatch_is_refused():
    hello = protocol.Handshake.from_message({"kind": "handshake", "protocol": protocol.PROTOCOL_VERSION + 1, "pid": 5})
    with pytest.raises(protocol.ProtocolError, match="speaks worker protocol"):
        protocol.check_handshake(hello)
    same = protocol.Handshake.from_message(protocol.Handshake(protocol=protocol.PROTOCOL_VERSION, pid=5, devices=("cpu",)).to_message())
    protocol.check_handshake(same)
    assert same.devices == ("cpu",)


def test_error_info_keeps_the_traceback():
    try:
        {}["missing"]
    except KeyError as exc:
        info = protocol.error_info(exc)
    assert info.type == "KeyError" and "missing" in info.message
    assert "test_error_info_keeps_the_traceback" in info.traceback
    assert json.loads(protocol.encode(protocol.result_error("1", info)))["error"]["type"] == "KeyError"


def test_file_params_need_the_files_text():
    with pytest.raises(protocol.ProtocolError, match="'text' is missing"):
        protocol.read_params("import", {"source": {"file": {"path": "/a/k.py"}}})
    params = protocol.read_params("import", {"source": {"file": {"path": "/a/k.py", "text": "x = 1"}}})
    assert (params.source.path, params.source.text, params.source.modules) == ("/a/k.py", "x = 1", ())


# --------------------------------------------------------------------------- environment


def test_allowlist_passes_tooling_and_drops_secrets():
    base = {
        "PATH": "/usr/bin", "HOME": "/home/u", "LANG": "C.UTF-8", "LC_ALL": "C", "XDG_CACHE_HOME": "/c",
        "JAX_ENABLE_X64": "0", "XLA_FLAGS": "--xla_dump_to=/tmp", "TPU_NAME": "t", "LIBTPU_INIT_ARGS": "",
        "VIRTUAL_ENV": "/v", "PYTHONPATH": "/p",
        "GEMINI_API_KEY": "s", "OPENAI_API_KEY": "s", "ANTHROPIC_API_KEY": "s", "GITHUB_TOKEN": "s",
        "AWS_SECRET_ACCESS_KEY": "s", "AWS_PROFILE": "s", "AZURE_CLIENT_ID": "s",
        "GOOGLE_APPLICATION_CREDENTIALS": "/k.json", "SSH_AUTH_SOCK": "/s", "HF_TOKEN": "s",
        "JAX_SOME_TOKEN": "s", "PALLASITE_GEMINI_API_KEY": "s", "XDG_SESSION_COOKIE": "s",
        "DISPLAY": ":0", "RANDOM_APP_SETTING": "x",
    }
    out = env.filter_environment(base)
    assert set(out) == {"PATH", "HOME", "LANG", "LC_ALL", "XDG_CACHE_HOME", "JAX_ENABLE_X64", "XLA_FLAGS",
                        "TPU_NAME", "LIBTPU_INIT_ARGS", "VIRTUAL_ENV", "PYTHONPATH"}


def test_worker_environment_sets_cpu_and_quiet_libtpu_and_refuses_secret_extras():
    out = env.worker_environment({"PATH": "/bin", "JAX_PLATFORMS": "tpu"}, platforms="cpu",
                                 extra={"MY_FLAG": "1", "MY_API_KEY": "s"})
    assert out["JAX_PLATFORMS"] == "cpu"
    assert out["TPU_SKIP_MDS_QUERY"] == "1" and out["ALLOW_MULTIPLE_LIBTPU_LOAD"] == "1"
    assert out["MY_FLAG"] == "1" and "MY_API_KEY" not in out
    keep = env.worker_environment({"JAX_PLATFORMS": "tpu"}, platforms=None)
    assert keep["JAX_PLATFORMS"] == "tpu"


# --------------------------------------------------------------------------- loader


def test_unsaved_text_runs_under_the_users_path_with_buffer_line_numbers(tmp_path):
    path = tmp_path / "kernel.py"
    path.write_text("X = 1\n")  # the saved file differs from the buffer
    text = "X = 2\n\n\ndef f():\n    raise ValueError('from the buffer')\n\nf()\n"
    with pytest.raises(ValueError) as info:
        with loader.user_module(str(path), text):
            pass
    frame = traceback.extract_tb(info.value.__traceback__)[-1]
    assert frame.filename == str(path)
    assert frame.lineno == 5 and frame.line == "raise ValueError('from the buffer')"


def test_saved_file_is_read_when_no_text(tmp_path):
    path = tmp_path / "kernel.py"
    path.write_text("X = 41 + 1\n")
    with loader.user_module(str(path)) as module:
        assert module.X == 42 and module.__file__ == str(path)


def test_missing_file_says_what_to_do(tmp_path):
    with pytest.raises(loader.UserFileNotFound, match="send its text"):
        with loader.user_module(str(tmp_path / "nope.py")):
            pass


def test_each_load_is_a_fresh_module_and_leaves_no_trace(tmp_path):
    path = tmp_path / "kernel.py"
    path.write_text("import helper_mod\nVALUE = helper_mod.V\n")
    (tmp_path / "helper_mod.py").write_text("V = 1\n")
    path_before, modules_before = list(sys.path), set(sys.modules)
    with loader.user_module(str(path)) as first:
        assert first.VALUE == 1
        first_name = first.__name__
        assert sys.path[0] == str(tmp_path)
    assert sys.path == path_before
    assert "helper_mod" not in sys.modules and first_name not in sys.modules
    assert set(sys.modules) - modules_before == set()
    (tmp_path / "helper_mod.py").write_text("V = 2\n")  # an edit to the sibling is seen
    with loader.user_module(str(path)) as second:
        assert second.VALUE == 2 and second.__name__ != first_name


def test_relative_imports_work_inside_a_package(tmp_path):
    pkg = tmp_path / "mykernels"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "tiles.py").write_text("ROWS = 16\n")
    kernel = pkg / "flash.py"
    kernel.write_text("from .tiles import ROWS\nfrom mykernels import tiles\nSAME = tiles.ROWS == ROWS\n")
    with loader.user_module(str(kernel)) as module:
        assert module.ROWS == 16 and module.SAME
    assert "mykernels" not in sys.modules and "mykernels.tiles" not in sys.modules


def test_sibling_import_fixture_resolves_from_the_files_folder():
    with loader.user_module(os.path.join(DATA, "helper_blocks.py")) as module:
        assert module.BLOCK_ROWS == 256
