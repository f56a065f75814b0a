"""Text sync and malformed input over the wire: the server's copy of a document stays the editor's
(LSP line rules, negotiated position encodings), every malformed request gets an error reply, and a
lone surrogate neither breaks tier 0 nor leaves stale diagnostics.

The server's text is read back with ``pallasite/documentState`` and compared with the client's own
model (tests/lsp_wire.py, written from the specification, not from the server's code).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from lsp_wire import WireClient, apply_change, position_of

DATA = Path(__file__).parent / "data"


@pytest.fixture
def wire(tmp_path):
    clients: list[WireClient] = []

    def start(**kwargs) -> WireClient:
        client = WireClient(tmp_path / f"home{len(clients)}", **kwargs)
        clients.append(client)
        return client

    yield start
    for client in clients:
        client.close()


def open_text(client: WireClient, path: Path, text: str, version: int = 1) -> str:
    uri = path.as_uri()
    client.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python",
                                                            "version": version, "text": text}})
    return uri


def server_text(client: WireClient, uri: str) -> str:
    reply = client.request("pallasite/documentState", {"uri": uri})
    assert "result" in reply and reply["result"] is not None, reply
    return reply["result"]["text"]


def edit(client: WireClient, uri: str, version: int, text: str, start: int, end: int, new: str,
         encoding: str = "utf-16") -> str:
    """Send one incremental change replacing text[start:end]; returns the client's new text."""
    rng = {"start": position_of(text, start, encoding), "end": position_of(text, end, encoding)}
    client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version},
                                             "contentChanges": [{"range": rng, "text": new}]})
    return apply_change(text, rng, new, encoding)


def test_form_feed_edit_keeps_the_texts_equal(wire, tmp_path):
    """A form feed is not an LSP line break: an edit after one on the same line lands where the
    editor put it (pygls's splitlines() copy clamped it to column 0 and rewrote the request)."""
    client = wire()
    client.initialize(tmp_path)
    path = tmp_path / "form_feed_kernel.py"
    text = (DATA / "textsync" / "form_feed_kernel.py").read_text()
    uri = open_text(client, path, text)
    at = text.index("# inputs") + 2
    text = edit(client, uri, 2, text, at, at + len("inputs"), "example inputs")
    assert "\x0c # example inputs \x0c" in text
    at = text.index("def add(x, y")
    text = edit(client, uri, 3, text, at, at, "\x0b\x1c\x85\u2028")
    assert server_text(client, uri) == text


@pytest.mark.parametrize("encoding", ["utf-8", "utf-16", "utf-32"])
def test_negotiated_position_encoding_places_edits(wire, tmp_path, encoding):
    client = wire()
    reply = client.initialize(tmp_path, encodings=[encoding])
    assert reply["result"]["capabilities"]["positionEncoding"] == encoding
    text = 'x = "😋é€"  # 😋 after\nsecond line\r\nthird\rlast'
    uri = open_text(client, tmp_path / "enc.py", text)
    version = 1
    for needle, new in [("after", "AFTER"), ("€", "¢😀"), ("third", "3rd"), ("last", "LAST😋")]:
        version += 1
        at = text.index(needle)
        text = edit(client, uri, version, text, at, at + len(needle), new, encoding)
    assert server_text(client, uri) == text
    # a hover after the non-BMP characters answers (positions in the negotiated units)
    hover = client.request("textDocument/hover", {"textDocument": {"uri": uri},
                                                  "position": position_of(text, text.index("AFTER"), encoding)})
    assert "result" in hover


MALFORMED = [
    ("textDocument/hover", {"textDocument": {"uri": "file:///x.py"}, "position": {"line": -1, "character": 0}}),
    ("textDocument/hover", {"textDocument": {"uri": "file:///x.py"}}),
    ("textDocument/hover", None),
    ("textDocument/hover", {"textDocument": {"uri": "file:///x.py"}, "position": {"line": 2**40, "character": 0}}),
    ("textDocument/codeAction", {"textDocument": {"uri": "file:///x.py"}, "range": "everything"}),
    ("textDocument/codeLens", {"textDocument": 7}),
]


def test_every_malformed_request_gets_an_error_reply(wire, tmp_path):
    client = wire()
    client.initialize(tmp_path)
    for method, params in MALFORMED:
        reply = client.request(method, params, timeout=5)
        assert reply.get("error", {}).get("code") == -32602, (method, params, reply)
        assert method in reply["error"]["message"]
    # a body that is not JSON, and JSON that is not a JSON-RPC object: answered with id null
    client.send_raw(b"{this is not json")
    client.send_raw(json.dumps([1, 2, 3]).encode())
    deadline = time.monotonic() + 5
    while len(client.unmatched_replies) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    codes = sorted(r["error"]["code"] for r in client.unmatched_replies)
    assert codes == [-32700, -32600], client.unmatched_replies
    # a malformed notification is ignored, and the server still answers
    client.notify("textDocument/didChange", {"textDocument": {"uri": 5}})
    assert client.request("pallasite/serverStats", {}).get("result", {}).get("pid") == client.proc.pid


UNDECODABLE = {
    "not JSON": b'{"jsonrpc": "2.0", "id": 3, "method": ',
    "invalid UTF-8": b'{"jsonrpc": "2.0", "id": 4, "method": "textDocument/hover", "params": "\xff\xfe"}',
    "a 5001-digit number": b'{"jsonrpc": "2.0", "id": 5, "method": "x", "params": {"n": ' + b"7" * 5001 + b"}}",
    "100,000-deep nesting": b'{"jsonrpc": "2.0", "id": 6, "method": "x", "params": ' + b"[" * 100_000
                            + b"]" * 100_000 + b"}",
}


def test_every_undecodable_message_gets_a_parse_error_with_id_null_and_no_popup(wire, tmp_path):
    client = wire()
    client.initialize(tmp_path)
    for what, body in UNDECODABLE.items():
        before = len(client.unmatched_replies)
        client.send_raw(body)
        deadline = time.monotonic() + 10
        while len(client.unmatched_replies) == before and time.monotonic() < deadline:
            time.sleep(0.02)
        replies = client.unmatched_replies[before:]
        assert [(r.get("id", "absent"), r.get("error", {}).get("code")) for r in replies] == [(None, -32700)], (
            what, replies)
        # and the server goes on answering
        assert client.request("pallasite/serverStats", {})["result"]["pid"] == client.proc.pid, what
    popups = [n for n in client.notifications if n["method"] == "window/showMessage"]
    assert popups == [], popups  # before: "Error in server: maximum recursion depth exceeded ..."


def test_commands_with_bad_names_or_arguments_are_answered(wire, tmp_path):
    """Commands run as the request's own task (server/lsp_protocol.py): an unknown name is InvalidParams,
    and a known command given junk arguments answers (an error or a result saying why), never hangs."""
    client = wire()
    client.initialize(tmp_path)
    reply = client.request("workspace/executeCommand", {"command": "pallasite.noSuchCommand"}, timeout=5)
    assert reply["error"]["code"] == -32602 and "pallasite.noSuchCommand" in reply["error"]["message"]
    for command, arguments in [("pallasite.optimize", [5]), ("pallasite.optimize", None),
                               ("pallasite.search", ["file:///nowhere.py"]), ("pallasite.optimize.approve", [{}]),
                               ("pallasite.autotune", [{"uri": 3}])]:
        reply = client.request("workspace/executeCommand", {"command": command, "arguments": arguments}, timeout=10)
        assert reply["result"]["ok"] is False and reply["result"]["message"].startswith(command), (command, reply)
    assert client.request("pallasite/serverStats", {}).get("result", {}).get("pid") == client.proc.pid


def test_lone_surrogate_neither_breaks_tier0_nor_keeps_stale_diagnostics(wire, tmp_path):
    client = wire()
    client.initialize(tmp_path)
    path = tmp_path / "tiling_broken.py"
    text = (DATA / "lsp" / "tiling_broken.py").read_text()
    uri = open_text(client, path, text)
    first = client.wait_for(lambda n: n["method"] == "textDocument/publishDiagnostics"
                            and n["params"]["uri"] == uri, what="diagnostics")
    assert any(d["code"] == "PLS001" for d in first["params"]["diagnostics"])
    # a lone surrogate in a comment (a JavaScript client sends "\ud800"), and the mistake fixed
    at = text.index("def add(x, y)")
    text = edit(client, uri, 2, text, at, at, "# broken half of a pair: \ud800\n")
    at = text.index("100), lambda")
    text = edit(client, uri, 3, text, at, at + 3, "128")
    assert server_text(client, uri) == text

    def fresh(n):
        return (n["method"] == "textDocument/publishDiagnostics" and n["params"]["uri"] == uri
                and n["params"].get("version") == 3)

    published = client.wait_for(fresh, what="diagnostics for version 3")
    assert not [d for d in published["params"]["diagnostics"] if d["code"] == "PLS001"], published
