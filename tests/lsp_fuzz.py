"""A bounded LSP fuzz of `pallasite serve` on the wire (used by tests/test_lsp_fuzz.py).

Each step does one of: an incremental edit at random (valid) positions inserting text with control
characters (``\\x0b \\x0c \\x1c \\x85 \\u2028``, ``\\r``, ``\\r\\n``), non-BMP characters and now
and then a lone surrogate; a full-text change; a request (hover, code lens, code action) at a random
and often invalid position (negative, huge, past the line's end, inside a surrogate pair); a
malformed message (not JSON, not an object, params of the wrong shape, an unknown method). After
every step the server's copy of the edited document is read back and compared with the client's.

Counted: server deaths, requests without a reply (after ``hang_s``), replies slower than
``hang_s`` (hangs), text divergences. A request that must be answered and is not is never retried.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

from lsp_wire import NoReply, WireClient, apply_change, client_lines, position_of

DATA = Path(__file__).parent / "data"
PIECES = ["x", "pl", " ", "    ", "(", ")", "[", "]", ":", ",", "=", "#", "'", '"', "\\",
          "\n", "\r", "\r\n", "\t", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029",
          "\x00", "\x7f", "é", "€", "日本", "😋", "𝔭", "\U0010fffd", "\ufeff",
          "pl.BlockSpec((8, 128), lambda i: (i, 0))", "def k(x_ref, o_ref):\n    o_ref[...] = x_ref[...]\n",
          "import jax\n", "from jax.experimental import pallas as pl\n", "grid=(4,)", "100", "128"]


@dataclass
class FuzzFigures:
    steps: int = 0
    edits: int = 0
    requests: int = 0
    malformed: int = 0
    deaths: int = 0
    unanswered: int = 0
    hangs: int = 0
    divergences: int = 0
    slowest_reply_s: float = 0.0
    elapsed_s: float = 0.0
    notes: list[str] = field(default_factory=list)

    def line(self) -> str:
        return (f"{self.steps} steps ({self.edits} edits, {self.requests} requests, {self.malformed} malformed) "
                f"in {self.elapsed_s:.1f} s: {self.deaths} deaths, {self.unanswered} unanswered requests, "
                f"{self.divergences} divergences, {self.hangs} hangs > hang limit; slowest reply "
                f"{self.slowest_reply_s * 1000:.0f} ms")


class Fuzzer:
    def __init__(self, client: WireClient, folder: Path, seed: int, encoding: str = "utf-16",
                 hang_s: float = 5.0) -> None:
        self.client, self.rng, self.encoding, self.hang_s = client, random.Random(seed), encoding, hang_s
        self.figures = FuzzFigures()
        self.docs: dict[str, list] = {}  # uri -> [text, version]
        for name in ("add_ok.py", "tiling_broken.py"):
            path = folder / name
            text = (DATA / "lsp" / name).read_text()
            path.write_text(text)
            client.notify("textDocument/didOpen", {"textDocument": {"uri": path.as_uri(), "languageId": "python",
                                                                    "version": 1, "text": text}})
            self.docs[path.as_uri()] = [text, 1]

    # ------------------------------------------------------------------ one step

    def step(self) -> None:
        self.figures.steps += 1
        uri = self.rng.choice(list(self.docs))
        roll = self.rng.random()
        if roll < 0.55:
            self.edit(uri)
        elif roll < 0.60:
            self.full_change(uri)
        elif roll < 0.85:
            self.random_request(uri)
        else:
            self.malformed(uri)
        self.compare(uri)

    def run(self, steps: int) -> FuzzFigures:
        started = time.monotonic()
        for _ in range(steps):
            if self.client.proc.poll() is not None:
                self.figures.deaths += 1
                self.figures.notes.append(f"the server exited with {self.client.proc.returncode}")
                break
            self.step()
        self.figures.elapsed_s = time.monotonic() - started
        return self.figures

    # ------------------------------------------------------------------ what a step does

    def new_text(self) -> str:
        pieces = [self.rng.choice(PIECES) for _ in range(self.rng.randint(0, 4))]
        if self.rng.random() < 0.03:
            pieces.append(self.rng.choice(["\ud800", "\udfff", "\udc00"]))  # a lone surrogate
        return "".join(pieces)

    def offset(self, text: str) -> int:
        at = self.rng.randint(0, len(text))
        while 0 < at < len(text) and text[at - 1] == "\r" and text[at] == "\n":
            at -= 1  # never between the two characters of a \r\n break
        return at

    def edit(self, uri: str) -> None:
        text, version = self.docs[uri]
        a, b = sorted((self.offset(text), self.offset(text)))
        if b - a > 200:
            b = a + self.rng.randint(0, 200)
            while 0 < b < len(text) and text[b - 1] == "\r" and text[b] == "\n":
                b -= 1
        rng = {"start": position_of(text, a, self.encoding), "end": position_of(text, b, self.encoding)}
        new = self.new_text()
        version += 1
        self.client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version},
                                                      "contentChanges": [{"range": rng, "text": new}]})
        self.docs[uri] = [apply_change(text, rng, new, self.encoding), version]
        self.figures.edits += 1

    def full_change(self, uri: str) -> None:
        text, version = self.docs[uri]
        new = (DATA / "lsp" / "add_ok.py").read_text() + self.new_text()
        version += 1
        self.client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version},
                                                      "contentChanges": [{"text": new}]})
        self.docs[uri] = [new, version]
        self.figures.edits += 1

    def position(self, text: str) -> dict:
        lines = client_lines(text)
        kind = self.rng.random()
        if kind < 0.6:
            line = self.rng.randrange(len(lines))
            start, end = lines[line]
            return {"line": line, "character": self.rng.randint(0, (end - start) * 2 + 2)}
        if kind < 0.8:
            return {"line": self.rng.randint(len(lines), len(lines) + 1000), "character": self.rng.randint(0, 5)}
        return {"line": self.rng.choice([-1, 2**31, 2**40, 0]), "character": self.rng.choice([-5, 0, 2**33])}

    def random_request(self, uri: str) -> None:
        text = self.docs[uri][0]
        method = self.rng.choice(["textDocument/hover", "textDocument/codeLens", "textDocument/codeAction"])
        if method == "textDocument/hover":
            params = {"textDocument": {"uri": uri}, "position": self.position(text)}
        elif method == "textDocument/codeLens":
            params = {"textDocument": {"uri": uri}}
        else:
            params = {"textDocument": {"uri": uri}, "range": {"start": self.position(text), "end": self.position(text)},
                      "context": {"diagnostics": []}}
        self.ask(method, params)

    def malformed(self, uri: str) -> None:
        self.figures.malformed += 1
        kind = self.rng.randrange(6)
        if kind == 0:
            self.client.send_raw(b"{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": ")
        elif kind == 1:
            self.client.send_raw(json.dumps(["not", "an", "object"]).encode())
        elif kind == 2:
            self.ask("textDocument/hover", {"textDocument": {"uri": uri}, "position": "here"})
        elif kind == 3:
            self.ask("textDocument/hover", None)
        elif kind == 4:
            self.ask("pallasite/noSuchMethod", {"x": 1})
        else:
            self.client.notify("textDocument/didChange", {"textDocument": {"uri": uri}, "contentChanges": 7})

    def ask(self, method: str, params) -> dict | None:
        self.figures.requests += 1
        sent = time.monotonic()
        try:
            reply = self.client.request(method, params, timeout=self.hang_s)
        except NoReply:
            self.figures.unanswered += 1
            self.figures.hangs += 1
            self.figures.notes.append(f"no reply to {method} {json.dumps(params)[:200]}")
            if self.client.proc.poll() is not None:
                self.figures.deaths += 1
            return None
        took = time.monotonic() - sent
        self.figures.slowest_reply_s = max(self.figures.slowest_reply_s, took)
        return reply

    def compare(self, uri: str) -> None:
        reply = self.ask("pallasite/documentState", {"uri": uri})
        if reply is None:
            return
        state = reply.get("result") or {}
        text, version = self.docs[uri]
        if state.get("text") != text or state.get("version") != version:
            self.figures.divergences += 1
            if len(self.figures.notes) < 20:
                self.figures.notes.append(f"divergence at step {self.figures.steps} in {uri}: version "
                                          f"{state.get('version')} vs {version}")
            self.docs[uri] = [state.get("text", text), state.get("version", version)]  # resync, go on
