"""A small LSP client written on the wire (stdlib only), for tests that must send what a well-behaved
client library would refuse to: malformed JSON, invalid params, raw bytes, an abrupt end of input.

``WireClient`` starts ``pallasite serve`` (or any command), reads frames on a thread, answers the
server's own requests (configuration, trust question, progress), and offers ``request`` (waits for
the reply, with a time limit), ``notify`` and ``send_raw``. Notifications are kept in order.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable


class NoReply(AssertionError):
    """The server did not answer a request within the time limit."""


class WireClient:
    def __init__(self, home: Path, *, env: dict[str, str] | None = None, argv: list[str] | None = None,
                 settings: dict[str, Any] | None = None, trust_answer: str | None = "Not now",
                 cwd: str | None = None) -> None:
        base = dict(os.environ if env is None else env)
        for var in ("XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME"):
            base[var] = str(home / var.lower())
        base["HOME"] = str(home)
        home.mkdir(parents=True, exist_ok=True)
        self.stderr_path = home / "server-stderr.txt"
        self._stderr = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen(argv or [sys.executable, "-m", "pallasite.server.cli", "serve"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
                                     env=base, cwd=cwd)
        self.settings = settings or {}
        self.settings_by_scope: dict[str, dict[str, Any]] = {}  # folder uri -> its own settings
        self.trust_answer = trust_answer
        self.trust_questions: list[str] = []
        self.notifications: list[dict[str, Any]] = []
        self.replies: dict[Any, dict[str, Any]] = {}
        self.unmatched_replies: list[dict[str, Any]] = []  # replies with id null or unknown ids
        self._ids = itertools.count(1)
        self._cond = threading.Condition()
        self._write_lock = threading.Lock()
        self.closed = False
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    # ------------------------------------------------------------------ sending

    def send_raw(self, body: bytes, *, header: bytes | None = None) -> None:
        frame = (header if header is not None else f"Content-Length: {len(body)}\r\n\r\n".encode()) + body
        with self._write_lock:
            try:
                self.proc.stdin.write(frame)
                self.proc.stdin.flush()
            except (BrokenPipeError, ValueError, OSError):
                pass

    def send(self, message: dict[str, Any]) -> None:
        # ensure_ascii keeps lone surrogates as \\udXXX escapes, as a JavaScript client writes them
        self.send_raw(json.dumps({"jsonrpc": "2.0", **message}).encode("ascii"))

    def notify(self, method: str, params: Any = None) -> None:
        self.send({"method": method, **({} if params is None else {"params": params})})

    def request_async(self, method: str, params: Any = None) -> int:
        msg_id = next(self._ids)
        self.send({"id": msg_id, "method": method, **({} if params is None else {"params": params})})
        return msg_id

    def wait_reply(self, msg_id: Any, timeout: float = 10.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while msg_id not in self.replies:
                left = deadline - time.monotonic()
                if left <= 0 or self.closed:
                    raise NoReply(f"no reply to request {msg_id} within {timeout:g} s "
                                  f"(server alive: {self.proc.poll() is None})")
                self._cond.wait(min(left, 0.1))
            return self.replies.pop(msg_id)

    def request(self, method: str, params: Any = None, timeout: float = 10.0) -> dict[str, Any]:
        return self.wait_reply(self.request_async(method, params), timeout)

    def initialize(self, folder: Path | None = None, *, encodings: list[str] | None = None,
                   init_options: dict[str, Any] | None = None) -> dict[str, Any]:
        caps: dict[str, Any] = {"workspace": {"configuration": True},
                                "window": {"workDoneProgress": True}}
        if encodings:
            caps["general"] = {"positionEncodings": encodings}
        params: dict[str, Any] = {"processId": os.getpid(), "capabilities": caps, "rootUri": None,
                                  "initializationOptions": init_options or {}}
        if folder is not None:
            params["workspaceFolders"] = [{"uri": folder.as_uri(), "name": folder.name}]
            params["rootUri"] = folder.as_uri()
        reply = self.request("initialize", params, timeout=30)
        self.notify("initialized", {})
        return reply

    def wait_for(self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 10.0,
                 what: str = "a notification") -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        with self._cond:
            seen = 0
            while True:
                for note in self.notifications[seen:]:
                    if predicate(note):
                        return note
                seen = len(self.notifications)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"timed out waiting for {what}")
                self._cond.wait(min(left, 0.1))

    def close(self, timeout: float = 10.0) -> int | None:
        """Shut down politely (shutdown, exit); kill the server if it does not end."""
        if self.proc.poll() is None:
            try:
                self.request("shutdown", None, timeout=timeout)
            except NoReply:
                pass
            self.notify("exit")
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._stderr.close()
        return self.proc.returncode

    # ------------------------------------------------------------------ reading

    def _read(self) -> None:
        out = self.proc.stdout
        while True:
            length = None
            while True:
                line = out.readline()
                if not line:
                    with self._cond:
                        self.closed = True
                        self._cond.notify_all()
                    return
                if line in (b"\r\n", b"\n"):
                    break
                name, _, value = line.decode("ascii", "replace").partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value.strip())
            if length is None:
                continue
            body = out.read(length)
            try:
                message = json.loads(body)
            except ValueError:
                continue
            self._dispatch(message)

    def _dispatch(self, message: dict[str, Any]) -> None:
        if "method" in message and "id" in message:  # the server asks us something
            self.send({"id": message["id"], "result": self._answer(message["method"], message.get("params"))})
            return
        with self._cond:
            if "method" in message:
                self.notifications.append(message)
            elif message.get("id") is None:
                self.unmatched_replies.append(message)
            else:
                self.replies[message["id"]] = message
            self._cond.notify_all()

    def _answer(self, method: str, params: Any) -> Any:
        if method == "workspace/configuration":  # per scope when the test gave folder settings
            return [self.settings_by_scope.get((item or {}).get("scopeUri"), self.settings)
                    for item in (params or {}).get("items", [None])]
        if method == "window/showMessageRequest":
            self.trust_questions.append((params or {}).get("message", ""))
            return {"title": self.trust_answer} if self.trust_answer else None
        return None


# --------------------------------------------------------------------------- the client's own text model

_BREAKS = ("\r\n", "\r", "\n")


def client_lines(text: str) -> list[tuple[int, int]]:
    """(start, end-of-content) offsets of each LSP line of ``text`` (breaks: \\r\\n, \\r, \\n only)."""
    lines, start, i = [], 0, 0
    while i < len(text):
        if text.startswith("\r\n", i):
            lines.append((start, i))
            i += 2
            start = i
        elif text[i] in "\r\n":
            lines.append((start, i))
            i += 1
            start = i
        else:
            i += 1
    lines.append((start, len(text)))
    return lines


def unit_width(char: str, encoding: str) -> int:
    code = ord(char)
    if encoding == "utf-32":
        return 1
    if encoding == "utf-8":
        return 1 if code < 0x80 else 2 if code < 0x800 else 3 if code < 0x10000 else 4
    return 2 if code > 0xFFFF else 1


def offset_at(text: str, line: int, character: int, encoding: str = "utf-16") -> int:
    """The offset of an LSP position, clamped as the specification says (past the line's end: its
    end; past the last line: the document's end)."""
    lines = client_lines(text)
    if line >= len(lines):
        return len(text)
    start, end = lines[line]
    units = 0
    for index in range(start, end):
        if units >= character:
            return index
        units += unit_width(text[index], encoding)
    return end


def position_of(text: str, offset: int, encoding: str = "utf-16") -> dict[str, int]:
    """The LSP position of a code-point offset (which must not split a line break)."""
    for number, (start, end) in enumerate(client_lines(text)):
        if start <= offset <= end:
            return {"line": number, "character": sum(unit_width(c, encoding) for c in text[start:offset])}
    raise ValueError(f"offset {offset} is inside a line break")


def apply_change(text: str, rng: dict[str, Any] | None, new_text: str, encoding: str = "utf-16") -> str:
    if rng is None:
        return new_text
    begin = offset_at(text, rng["start"]["line"], rng["start"]["character"], encoding)
    end = offset_at(text, rng["end"]["line"], rng["end"]["character"], encoding)
    return text[:begin] + new_text + text[max(begin, end):]
