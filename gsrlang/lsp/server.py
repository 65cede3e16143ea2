"""The protocol side of `gsr lsp` (pygls 2, stdio): documents, debounced diagnostics, and the requests.

Choices, as mature servers (rust-analyzer, ruff) make them:

- Diagnostics are pushed (`textDocument/publishDiagnostics`) with the document version
  they were computed for: at once when a document opens or is saved, and
  `debounce` seconds (150 ms by default) after the last change while it is being typed.
  A newer change cancels a pending run, and a result that arrives after the document
  changed again is dropped, so stale diagnostics are never published.
- The analysis runs on a worker thread so requests keep being answered while a large
  document is checked; requests use the analysis of the current version (computing
  it at once when the debounced run has not happened yet).
- Saving any document re-checks every open document: another file's fragment may have
  changed. Imported files are read from the editor's buffer when open, else from disk.
- No request or notification ever takes the server down: each handler is guarded, an
  unexpected error is logged (`window/logMessage`) and answered with an empty result.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol
from pygls.uris import to_fs_path

from gsrlang import __version__
from gsrlang.lang.span import Span
from gsrlang.lsp import completion, diagnostics, hover, navigation
from gsrlang.lsp.model import DocumentModel, Files
from gsrlang.lsp.positions import PositionMap

DEFAULT_DEBOUNCE = 0.150
logger = logging.getLogger("gsrlang.lsp")


MAX_MESSAGE = 64 << 20  # bytes: a larger message (a Content-Length of 99999999999) is read past, never held
MAX_HEADER = 64 << 10  # bytes of one header line


class _Protocol(LanguageServerProtocol):
    """pygls's protocol, answering a request it cannot read.

    pygls logs a request whose params do not fit the method's type (a hover whose position is a string) and
    drops it, so the client waits for ever; here it gets the JSON-RPC error pygls raised (-32602 invalid
    params), naming the method."""

    def structure_message(self, data):
        try:
            return super().structure_message(data)
        except JsonRpcException as exc:
            if not ("method" in data and isinstance(data.get("id"), (int, str)) and not isinstance(data["id"], bool)):
                return None  # a notification or a response: nothing to answer
            method = str(data.get("method"))[:100]
            self._send_response(data["id"], error=types.ResponseError(
                code=exc.code, message=f"{exc.message}: the params of {method!r} do not fit its type"))
            return None

    def handle_message(self, message):
        readable = message is not None and hasattr(message, "jsonrpc")  # (if not, answered above)
        return super().handle_message(message) if readable else None


class _BoundedInput:
    """The server's stdin, read with bounds: a header line is cut at MAX_HEADER bytes, and the body of a message
    longer than MAX_MESSAGE is read past in blocks and dropped (the framing stays in step, memory stays flat),
    so a bad Content-Length costs that message, never the server."""

    def __init__(self, raw):
        self.raw = raw

    def readline(self) -> bytes:
        return self.raw.readline(MAX_HEADER)

    def read(self, n: int) -> bytes:
        if n <= MAX_MESSAGE:
            return self.raw.read(n)
        logger.warning("dropping a message of %d bytes (more than %d)", n, MAX_MESSAGE)
        left = n
        while left > 0:
            block = self.raw.read(min(left, 1 << 20))
            if not block:
                return b""  # the client closed the stream
            left -= len(block)
        return b"null"  # read as nothing (handle_message above ignores it)


class GsrLanguageServer(LanguageServer):
    def __init__(self, debounce: float = DEFAULT_DEBOUNCE):
        super().__init__("gsr", __version__, text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
                         protocol_cls=_Protocol)
        self.debounce = debounce
        self.models: dict[str, DocumentModel] = {}
        self.pending: dict[str, asyncio.Task] = {}
        self.files = Files(self._open_text)
        self.worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gsr-analysis")
        self.lock = threading.Lock()  # guards `models`: the analysis worker and the handlers both change it

    # ---- documents and their models ---------------------------------------------------------------------
    def _open_text(self, path: str) -> str | None:
        uri = Path(path).resolve().as_uri()
        try:
            doc = self.workspace.text_documents.get(uri)
        except Exception:
            return None
        return doc.source if doc is not None else None

    @property
    def encoding(self) -> str:
        enc = getattr(self.workspace, "position_encoding", None)
        return str(getattr(enc, "value", enc) or "utf-16")

    def model(self, uri: str) -> DocumentModel | None:
        """The model of the document's current version (built now if the debounced run has not happened)."""
        doc = self.workspace.text_documents.get(uri)
        return None if doc is None else self._model_for(uri, doc.source, doc.version)

    def _model_for(self, uri: str, text: str, version: int | None) -> DocumentModel:
        with self.lock:
            cached = self.models.get(uri)
            if cached is not None and cached.version == version and cached.text == text:
                return cached
        model = DocumentModel(uri, text, version, _path_of(uri))
        if model.internal_error:
            self.log(f"internal error while checking {uri}:\n{model.internal_error}", types.MessageType.Error)
        with self.lock:
            current = self.models.get(uri)
            if current is None or current.version is None or version is None or current.version <= version:
                self.models[uri] = model
        return model

    def positions(self, model: DocumentModel) -> PositionMap:
        return PositionMap(model.text, self.encoding)

    # ---- diagnostics ---------------------------------------------------------------------------------------------
    def schedule(self, uri: str, delay: float) -> None:
        previous = self.pending.pop(uri, None)
        if previous is not None:
            previous.cancel()
        self.pending[uri] = asyncio.get_running_loop().create_task(self._publish_later(uri, delay))

    async def _publish_later(self, uri: str, delay: float) -> None:
        try:
            if delay > 0:
                await asyncio.sleep(delay)
            doc = self.workspace.text_documents.get(uri)
            if doc is None:
                return
            text, version = doc.source, doc.version
            model = await asyncio.get_running_loop().run_in_executor(self.worker, self._model_for, uri, text, version)
            doc = self.workspace.text_documents.get(uri)
            if doc is None or doc.version != version:
                return  # the document changed while it was being checked: a newer run will publish
            found = diagnostics.to_lsp(model, self.positions(model), self.files)
            self.text_document_publish_diagnostics(
                types.PublishDiagnosticsParams(uri=uri, version=version, diagnostics=found))
        except asyncio.CancelledError:
            raise
        except Exception:
            self.log(f"diagnostics for {uri} failed:\n{traceback.format_exc()}", types.MessageType.Error)
        finally:
            if self.pending.get(uri) is asyncio.current_task():
                del self.pending[uri]

    def forget(self, uri: str) -> None:
        task = self.pending.pop(uri, None)
        if task is not None:
            task.cancel()
        with self.lock:
            self.models.pop(uri, None)
        self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    def log(self, message: str, kind: types.MessageType = types.MessageType.Info) -> None:
        try:
            self.window_log_message(types.LogMessageParams(type=kind, message=message))
        except Exception:  # the connection may be gone
            logger.exception("cannot log to the client")


def _path_of(uri: str) -> str | None:
    if not uri.startswith("file:"):
        return None
    try:
        return to_fs_path(uri)
    except Exception:
        return None


def _guarded(default=None):
    """Never let a handler's exception reach pygls: log it and answer `default` (a request stays answered)."""

    def wrap(f):
        @functools.wraps(f)
        def run(ls, params):
            try:
                return f(ls, params)
            except Exception:
                ls.log(f"{f.__name__} failed:\n{traceback.format_exc()}", types.MessageType.Error)
                return default() if callable(default) else default
        return run

    return wrap


def _on_document(default):
    """`_guarded`, for a request about an open document: the handler gets its model and position map as well;
    a document that is not open is answered `default()`."""

    def wrap(f):
        @_guarded(default)
        @functools.wraps(f)
        def run(ls, params):
            model = ls.model(params.text_document.uri)
            return default() if model is None else f(ls, params, model, ls.positions(model))
        return run

    return wrap


def create_server(debounce: float = DEFAULT_DEBOUNCE) -> GsrLanguageServer:
    server = GsrLanguageServer(debounce)

    @server.feature(types.INITIALIZE)
    @_guarded()
    def initialize(ls: GsrLanguageServer, params: types.InitializeParams):
        options = params.initialization_options
        if isinstance(options, dict) and isinstance(options.get("debounceMs"), (int, float)):
            ls.debounce = max(0.0, float(options["debounceMs"]) / 1000)

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    @_guarded()
    def did_open(ls: GsrLanguageServer, params: types.DidOpenTextDocumentParams):
        ls.schedule(params.text_document.uri, 0)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    @_guarded()
    def did_change(ls: GsrLanguageServer, params: types.DidChangeTextDocumentParams):
        ls.schedule(params.text_document.uri, ls.debounce)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    @_guarded()
    def did_save(ls: GsrLanguageServer, params: types.DidSaveTextDocumentParams):
        for uri in list(ls.workspace.text_documents):
            if uri != params.text_document.uri:
                with ls.lock:
                    ls.models.pop(uri, None)  # an imported fragment may have changed on disk
            ls.schedule(uri, 0)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    @_guarded()
    def did_close(ls: GsrLanguageServer, params: types.DidCloseTextDocumentParams):
        ls.forget(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    @_on_document(lambda: None)
    def on_hover(ls: GsrLanguageServer, params: types.HoverParams, model, positions):
        return hover.hover(model, positions.offset(params.position), positions, ls.files)

    @server.feature(types.TEXT_DOCUMENT_DEFINITION)
    @_on_document(list)
    def on_definition(ls: GsrLanguageServer, params: types.DefinitionParams, model, positions):
        return navigation.definition(model, positions.offset(params.position), positions, ls.files)

    @server.feature(types.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
    @_on_document(list)
    def on_symbols(ls: GsrLanguageServer, params: types.DocumentSymbolParams, model, positions):
        return navigation.document_symbols(model, positions)

    @server.feature(types.TEXT_DOCUMENT_COMPLETION,
                    types.CompletionOptions(trigger_characters=[".", "(", ",", ":", "[", "=", " ", '"']))
    @_on_document(list)
    def on_completion(ls: GsrLanguageServer, params: types.CompletionParams, model, positions):
        items = completion.complete(model, positions.offset(params.position), positions, _snippets(ls))
        return types.CompletionList(is_incomplete=False, items=items)

    @server.feature(types.TEXT_DOCUMENT_FORMATTING)
    @_guarded(list)
    def on_formatting(ls: GsrLanguageServer, params: types.DocumentFormattingParams):
        doc = ls.workspace.text_documents.get(params.text_document.uri)
        return [] if doc is None else format_edits(ls, doc.source)

    @server.feature(types.TEXT_DOCUMENT_CODE_ACTION,
                    types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix]))
    @_on_document(list)
    def on_code_action(ls: GsrLanguageServer, params: types.CodeActionParams, model, positions):
        only = params.context.only
        if only and not any(str(k.value if hasattr(k, "value") else k).startswith("quickfix") for k in only):
            return []
        return diagnostics.code_actions(model, positions.span(params.range), positions, ls.files,
                                        list(params.context.diagnostics or ()))

    return server


def _snippets(ls: GsrLanguageServer) -> bool:
    try:
        item = ls.client_capabilities.text_document.completion.completion_item
        return bool(item and item.snippet_support)
    except AttributeError:
        return False


def format_edits(ls: GsrLanguageServer, text: str) -> list[types.TextEdit]:
    """One edit replacing the whole document with the formatter's output; none when it cannot format."""
    from gsrlang.lang.syntax.formatter import FormatError, format_source

    try:
        formatted = format_source(text)
    except FormatError as exc:  # a syntax error: the diagnostics already show it
        ls.log(f"not formatted: {exc}", types.MessageType.Info)
        return []
    if formatted == text:
        return []
    return [types.TextEdit(range=PositionMap(text, ls.encoding).range(Span(0, len(text))), new_text=formatted)]


def serve(debounce: float = DEFAULT_DEBOUNCE) -> None:
    import sys

    create_server(debounce).start_io(_BoundedInput(sys.stdin.buffer))
