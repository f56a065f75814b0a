"""The JSON-RPC/LSP protocol of the pallasite server: pygls's, with two things done our way.

1. **One copy of each document's text.** pygls keeps its own copy in ``ls.workspace`` and updates
   it before our handler runs: it splits lines with ``str.splitlines()`` (which also breaks on
   ``\\x0b \\x0c \\x1c-\\x1e \\x85 \\u2028 \\u2029``, while LSP lines end only at ``\\n``, ``\\r\\n``,
   ``\\r``) and, for a column past its idea of the line's end, rewrites the request's position in
   place, so our handler saw a different edit than the client sent. Here didOpen/didChange/didClose
   only reach our handlers: the ``Session`` (session.py) is the one text store, applied with LSP's
   own line rules (shifting.py) in the negotiated position encoding (lsp_convert.py).
2. **Every malformed request gets an error reply.** A request whose params do not validate (a
   negative position, missing fields, numbers past 2^31) used to raise while decoding, so no reply
   was sent and the editor waited forever; it is now answered with ``InvalidParams`` (-32602)
   naming the method and the problem. A body that is not JSON, or not a JSON-RPC object, gets a
   ``ParseError`` / ``InvalidRequest`` reply with ``id: null`` as JSON-RPC asks.
3. **A command can be cancelled.** pygls runs ``workspace/executeCommand`` as a generator whose
   command coroutine is a second task under a made-up id, so ``$/cancelRequest`` for the request
   only answered "cancelled" while the command (an optimize run, a check) went on with its job.
   Here the command runs as the request's own task: ``$/cancelRequest`` cancels it at its next
   ``await``, where each command ends its job.
"""

from __future__ import annotations

import inspect
import logging
from dataclasses import dataclass
from typing import Any

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcInvalidParams
from pygls.protocol.language_server import LanguageServerProtocol, lsp_method

logger = logging.getLogger(__name__)

PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS = -32700, -32600, -32602


@dataclass(frozen=True)
class Malformed:
    """A request or notification that did not decode: what to tell the client."""

    id: Any
    method: str
    problem: str
    jsonrpc: str = "2.0"


def describe_problem(exc: BaseException) -> str:
    """A short, readable account of a decoding failure (cattrs nests the real causes)."""
    leaves: list[str] = []

    def walk(error: BaseException) -> None:
        inner = getattr(error, "exceptions", None)
        if inner:
            for sub in inner:
                walk(sub)
            return
        cause = error.__cause__
        if cause is not None and cause is not error and not leaves:
            walk(cause)
            return
        notes = "; ".join(getattr(error, "__notes__", []) or [])
        text = str(error) or type(error).__name__
        leaves.append(f"{text} ({notes})" if notes else text)

    walk(exc)
    text = "; ".join(dict.fromkeys(leaves))
    return text[:500] if text else type(exc).__name__


class PallasiteProtocol(LanguageServerProtocol):
    """pygls's protocol with our text sync and error replies (see the module docstring)."""

    # ------------------------------------------------------------------ text sync: the Session only

    @lsp_method(lsp.TEXT_DOCUMENT_DID_OPEN)
    def lsp_text_document__did_open(self, params: lsp.DidOpenTextDocumentParams):
        if (handler := self.fm.features.get(lsp.TEXT_DOCUMENT_DID_OPEN)) is not None:
            yield handler, (params,), None

    @lsp_method(lsp.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: lsp.DidChangeTextDocumentParams):
        if (handler := self.fm.features.get(lsp.TEXT_DOCUMENT_DID_CHANGE)) is not None:
            yield handler, (params,), None

    @lsp_method(lsp.TEXT_DOCUMENT_DID_CLOSE)
    def lsp_text_document__did_close(self, params: lsp.DidCloseTextDocumentParams):
        if (handler := self.fm.features.get(lsp.TEXT_DOCUMENT_DID_CLOSE)) is not None:
            yield handler, (params,), None

    # ------------------------------------------------------------------ commands: cancellable

    @lsp_method(lsp.WORKSPACE_EXECUTE_COMMAND)
    async def lsp_workspace__execute_command(self, params: lsp.ExecuteCommandParams) -> Any:
        if (handler := self.fm.commands.get(params.command, None)) is None:
            raise JsonRpcInvalidParams.of(ValueError(f"Command name {params.command!r} is not defined"))
        # every pallasite command takes ``(ls, *args)`` (pygls injects ``ls``): the arguments pass as they are
        result = handler(*(params.arguments or ()))
        return await result if inspect.isawaitable(result) else result

    # ------------------------------------------------------------------ malformed input

    def structure_message(self, data: dict[str, Any]):
        if "jsonrpc" not in data or "method" not in data:
            return super().structure_message(data)
        try:
            return super().structure_message(data)
        except (JsonRpcInvalidParams, Exception) as exc:  # noqa: BLE001 - any decoding failure
            cause = exc.__cause__ or exc
            method = data.get("method")
            return Malformed(data.get("id"), method if isinstance(method, str) else repr(method),
                             describe_problem(cause))

    def handle_message(self, message: Any):
        if isinstance(message, Malformed):
            self._answer_malformed(message)
            return
        if not hasattr(message, "jsonrpc"):
            self.send_raw_error(None, INVALID_REQUEST,
                                f"not a JSON-RPC message (a {type(message).__name__}); expected an object "
                                "with jsonrpc, method and (for requests) id")
            return
        super().handle_message(message)

    def _answer_malformed(self, message: Malformed) -> None:
        text = f"{message.method}: invalid params: {message.problem}"
        if message.id is None:  # a notification: nothing to answer; say it in the log
            logger.warning("ignored a malformed notification: %s", text)
            report = getattr(self._server, "report_malformed_notification", None)
            if report is not None:
                report(text)
            return
        self.send_raw_error(message.id, INVALID_PARAMS, text)

    def send_raw_error(self, msg_id: Any, code: int, message: str) -> None:
        """An error reply written as a plain JSON-RPC object (``msg_id`` may be None)."""
        if msg_id is not None and not isinstance(msg_id, (int, str)):
            msg_id = None
        self._send_data({"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}})
