"""A fake LLM endpoint for tests: a real HTTP server on 127.0.0.1 that answers from a queue.

Both SDKs (google-genai, openai) use httpx2, which request mocks built for httpx do not see, so the
tests drive the real SDKs over real HTTP against this server (reached through ``base_url``).

    with FakeEndpoint() as server:
        server.queue.append(Answer(200, {...}))           # or Answer(429, {...}), Answer(200, "junk")
        ... base_url=server.url ...
        server.requests[0].path, .headers, .json
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Answer:
    status: int = 200
    body: Any = None  # dict -> JSON; str -> sent as is
    delay_s: float = 0.0
    headers: dict = field(default_factory=dict)


@dataclass
class Seen:
    method: str
    path: str
    headers: dict
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body or b"null")


class FakeEndpoint:
    def __init__(self) -> None:
        self.queue: list[Answer] = []
        self.requests: list[Seen] = []
        self.default = Answer(500, {"error": {"code": 500, "message": "no answer queued"}})
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                outer.requests.append(Seen("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                answer = outer.queue.pop(0) if outer.queue else outer.default
                if answer.delay_s:
                    time.sleep(answer.delay_s)
                data = answer.body if isinstance(answer.body, str) else json.dumps(answer.body)
                raw = data.encode()
                try:
                    self.send_response(answer.status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(raw)))
                    for name, value in answer.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(raw)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (time limit)
                    pass

            def log_message(self, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "FakeEndpoint":
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()


def gemini_reply(text: str, prompt_tokens: int = 12, output_tokens: int = 20, thoughts: int = 0) -> dict:
    usage = {"promptTokenCount": prompt_tokens, "candidatesTokenCount": output_tokens,
             "totalTokenCount": prompt_tokens + output_tokens + thoughts}
    if thoughts:
        usage["thoughtsTokenCount"] = thoughts
    return {"candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP",
                            "index": 0}], "usageMetadata": usage}


def openai_reply(text: str, prompt_tokens: int = 12, completion_tokens: int = 20, reasoning: int = 0) -> dict:
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "fake-model",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens,
                      "completion_tokens_details": {"reasoning_tokens": reasoning}}}
