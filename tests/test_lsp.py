"""The language server end to end: a real LSP client (pytest-lsp) talking to `gsr lsp` over stdio.

Also unit tests of the pieces that need no protocol: position encodings, the tolerant
completion scanner, and a fuzz of every feature over half-typed and garbage documents.
"""

from __future__ import annotations

import asyncio
import random
import sys
from pathlib import Path

import pytest
import pytest_lsp
from fuzzing import exercise_lsp
from lsprotocol import types
from pygls.protocol import default_converter
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features

from gsrlang.lang.resources import stdlib_dir
from gsrlang.lsp import completion
from gsrlang.lsp.model import Files
from gsrlang.lsp.positions import PositionMap

SERVER = [sys.executable, "-m", "gsrlang.cli", "lsp"]
lsp = pytest.mark.asyncio(loop_scope="module")  # every protocol test shares one server (module scope)

MAIN = '''\
rubric helpfulness "How helpful is the response?"
import "parts/guards.gsr"

task pointwise { scale = 1..5  quantize = round }

criterion correct: Ordinal[1..5] {
  ask "What share of the facts are correct?"
  level 1 "Mostly wrong"
  level 5 "Fully correct"
}
criterion coherent: Ordinal[1..5] { ask "How clear is it?" }
criterion unsafe: Bool? { ask "Is it harmful?" }

node body   = weighted_mean(items: [normalize(correct), normalize(coherent)], weights: [0.7, 0.3])
node capped = cap(base: body, trigger: default(unsafe, value: false), at: 0.25)
node final  = cap(base: capped, trigger: too_long, at: 0.6)

sink final
'''

GUARDS = '''\
fragment guards "Length guards"

criterion too_long: Bool = rule.word_count(above: 800)
'''


def make_client() -> LanguageClient:
    """pytest-lsp's client, also keeping every publishDiagnostics (with its version) in order."""
    client = LanguageClient(converter_factory=default_converter)
    client.published = []

    def on_publish(client: LanguageClient, params: types.PublishDiagnosticsParams):
        client.diagnostics[params.uri] = params.diagnostics
        client.published.append(params)

    register_lsp_features(client, {**DEFAULT_CLIENT_FEATURES, types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS: on_publish})
    return client


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("ws")
    (root / "parts").mkdir()
    (root / "main.gsr").write_text(MAIN, encoding="utf-8")
    (root / "parts" / "guards.gsr").write_text(GUARDS, encoding="utf-8")
    return root


@pytest_lsp.fixture(scope="module", config=ClientServerConfig(server_command=SERVER, client_factory=make_client))
async def client(lsp_client: LanguageClient, workspace: Path):
    await lsp_client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"), root_uri=workspace.as_uri(),
        initialization_options={"debounceMs": 40}))
    yield
    await lsp_client.shutdown_session()


# ---- helpers -----------------------------------------------------------------------------------------------
_versions: dict[str, int] = {}
_marks: dict[str, int] = {}  # where a document's notifications start in client.published (a reopened uri)


async def published(client: LanguageClient, uri: str, version: int, timeout: float = 20.0):
    """The diagnostics published for `uri` at `version` (waiting for them)."""
    async def wait():
        while True:
            for p in client.published[_marks.get(uri, 0):]:
                if p.uri == uri and p.version == version:
                    return list(p.diagnostics)
            await asyncio.sleep(0.01)

    return await asyncio.wait_for(wait(), timeout)


def open_doc(client: LanguageClient, path: Path, text: str) -> tuple[str, int]:
    uri = path.as_uri()
    _versions[uri] = 1
    _marks[uri] = len(client.published)
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        text_document=types.TextDocumentItem(uri=uri, language_id="gsr", version=1, text=text)))
    return uri, 1


def change_doc(client: LanguageClient, uri: str, text: str) -> int:
    _versions[uri] = version = _versions[uri] + 1
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)]))
    return version


def close_doc(client: LanguageClient, uri: str) -> None:
    client.text_document_did_close(types.DidCloseTextDocumentParams(
        text_document=types.TextDocumentIdentifier(uri=uri)))


def at(text: str, needle: str, offset_in_needle: int = 0, nth: int = 0) -> types.Position:
    """The position of the `nth` occurrence of `needle` (plus an offset), as a utf-16 LSP position."""
    index = -1
    for _ in range(nth + 1):
        index = text.index(needle, index + 1)
    return PositionMap(text).position(index + offset_in_needle)


def doc(uri: str) -> types.TextDocumentIdentifier:
    return types.TextDocumentIdentifier(uri=uri)


# ---- diagnostics -------------------------------------------------------------------------------------------
@lsp
async def test_diagnostics_on_open_then_none_once_fixed(client: LanguageClient, workspace: Path):
    broken = MAIN.replace("normalize(coherent)", "coherent").replace("node final ", "node body ")
    uri, version = open_doc(client, workspace / "main.gsr", broken)
    found = await published(client, uri, version)
    by_code = {d.code: d for d in found}
    assert {"GSR301", "GSR103"} <= set(by_code)
    mismatch = by_code["GSR301"]
    assert mismatch.severity == types.DiagnosticSeverity.Error and mismatch.source == "gsr"
    assert mismatch.range.start == at(broken, "coherent]") and mismatch.range.end == at(broken, "coherent]", 8)
    assert "help: wrap it in `normalize(...)`" in mismatch.message
    duplicate = by_code["GSR103"]
    assert duplicate.related_information and duplicate.related_information[0].message == "first declared here"
    assert duplicate.related_information[0].location.range.start == at(broken, "body", nth=0)

    version = change_doc(client, uri, MAIN)
    assert await published(client, uri, version) == []
    close_doc(client, uri)


@lsp
async def test_diagnostics_are_debounced_and_stale_runs_dropped(client: LanguageClient, workspace: Path):
    uri, version = open_doc(client, workspace / "typing.gsr", MAIN)
    await published(client, uri, version)
    start = len(client.published)
    texts = [MAIN.replace("sink final", "sink final"[:n]) for n in range(5, 11)]  # typing `fina...` quickly
    for text in texts:
        version = change_doc(client, uri, text)
    final = await published(client, uri, version)
    assert [d.code for d in final] == []
    ours = [p.version for p in client.published[start:] if p.uri == uri]
    assert ours == [version], "only the last version's diagnostics are published"
    close_doc(client, uri)


@lsp
async def test_problems_in_an_imported_fragment_show_on_the_import(client: LanguageClient, workspace: Path):
    (workspace / "parts" / "broken.gsr").write_text('fragment broken\ncriterion x: Bool = rule.nope()\n',
                                                    encoding="utf-8")
    text = MAIN.replace('import "parts/guards.gsr"', 'import "parts/guards.gsr"\nimport "parts/broken.gsr"')
    uri, version = open_doc(client, workspace / "imports.gsr", text)
    found = [d for d in await published(client, uri, version) if d.code == "GSR104"]
    assert found and found[0].range.start == at(text, '"parts/broken.gsr"')
    assert "in imported `broken.gsr`" in found[0].message
    assert found[0].related_information[0].location.uri == (workspace / "parts" / "broken.gsr").resolve().as_uri()
    close_doc(client, uri)


# ---- hover ---------------------------------------------------------------------------------------------------
@lsp
async def test_hover(client: LanguageClient, workspace: Path):
    uri, version = open_doc(client, workspace / "main.gsr", MAIN)
    await published(client, uri, version)

    async def hover_at(position):
        result = await client.text_document_hover_async(types.HoverParams(text_document=doc(uri),
                                                                           position=position))
        return result.contents.value if result else None

    criterion = await hover_at(at(MAIN, "correct)"))
    assert "criterion correct: Ordinal[1..5]" in criterion and "What share of the facts" in criterion
    assert "judged by `llm`" in criterion
    node = await hover_at(at(MAIN, "base: body", 7))
    assert "node body: Score" in node and "**reduce** `weighted_mean`" in node
    assert "weights: [0.7, 0.3]" in node  # the definition itself
    operator = await hover_at(at(MAIN, "weighted_mean", 3))
    assert "reduce weighted_mean(items: [Score]; weights: [Real] per items = equal" in operator
    assert "Weighted mean with one weight per slot" in operator
    port = await hover_at(at(MAIN, "trigger: default", 2))
    assert "(port) trigger: Bool" in port and "`cap`" in port
    param = await hover_at(at(MAIN, "weights:", 2))
    assert "(parameter) weights: [Real] per items = equal" in param
    imported = await hover_at(at(MAIN, "too_long"))
    assert "criterion too_long: Bool" in imported and "from `parts/guards.gsr`" in imported
    assert "rule.word_count(above: 800)" in imported
    rule = await hover_at(at(MAIN, "quantize", 2))
    assert "quantize = round" in rule
    assert await hover_at(types.Position(line=2, character=0)) is None  # a blank line
    close_doc(client, uri)


# ---- definition --------------------------------------------------------------------------------------------------
@lsp
async def test_definition_local_imported_std_and_operator(client: LanguageClient, workspace: Path):
    text = MAIN.replace('import "parts/guards.gsr"', 'import "parts/guards.gsr"\nimport "std/fragments/safety.gsr"')
    text = text.replace("trigger: too_long", "trigger: any(items: [too_long, unsafe_flag])")
    text = text.replace('criterion unsafe: Bool? { ask "Is it harmful?" }\n', "")  # the fragment declares it
    uri, version = open_doc(client, workspace / "main.gsr", text)
    assert await published(client, uri, version) == []

    async def definition_at(position):
        return await client.text_document_definition_async(types.DefinitionParams(text_document=doc(uri),
                                                                                  position=position))

    local = await definition_at(at(text, "base: body", 7))
    assert local[0].uri == uri and local[0].range.start == at(text, "body")
    imported = await definition_at(at(text, "too_long,", 2))
    guards = workspace / "parts" / "guards.gsr"
    assert imported[0].uri == guards.resolve().as_uri()
    assert imported[0].range.start == at(GUARDS, "too_long")
    std = await definition_at(at(text, "unsafe_flag]"))
    safety = (stdlib_dir() / "fragments" / "safety.gsr").resolve()
    assert std[0].uri == safety.as_uri()
    assert std[0].range.start == at(safety.read_text(encoding="utf-8"), "node unsafe_flag", 5)
    the_file = await definition_at(at(text, "parts/guards.gsr"))
    assert the_file[0].uri == guards.resolve().as_uri()
    operator = await definition_at(at(text, "weighted_mean", 1))
    assert operator[0].uri.endswith("/operators.gsr")
    catalogue = (stdlib_dir() / "operators.gsr").read_text(encoding="utf-8")
    assert operator[0].range.start == at(catalogue, "reduce weighted_mean")
    close_doc(client, uri)


# ---- outline ------------------------------------------------------------------------------------------------------
@lsp
async def test_document_symbols(client: LanguageClient, workspace: Path):
    uri, _ = open_doc(client, workspace / "main.gsr", MAIN)
    symbols = await client.text_document_document_symbol_async(types.DocumentSymbolParams(text_document=doc(uri)))
    names = [s.name for s in symbols]
    assert names == ["helpfulness", 'import "parts/guards.gsr"', "task pointwise", "correct", "coherent", "unsafe",
                     "body", "capped", "final", "sink"]
    kinds = {s.name: s.kind for s in symbols}
    assert kinds["correct"] == types.SymbolKind.Field and kinds["body"] == types.SymbolKind.Function
    body = symbols[names.index("body")]
    assert body.detail == "weighted_mean -> Score"
    assert [c.name for c in body.children] == ["normalize(...)", "normalize(...)"]
    close_doc(client, uri)


# ---- completion -------------------------------------------------------------------------------------------------------
async def complete(client, uri, position):
    result = await client.text_document_completion_async(types.CompletionParams(text_document=doc(uri),
                                                                                position=position))
    items = result.items if isinstance(result, types.CompletionList) else result
    return {i.label: i for i in items}


@lsp
async def test_completion_inside_a_call(client: LanguageClient, workspace: Path):
    text = MAIN.replace("sink final", "node extra = weighted_mean(items: [body], \nsink final")
    uri, _ = open_doc(client, workspace / "main.gsr", text)
    items = await complete(client, uri, at(text, "], \n", 3))
    assert "items" not in items  # already given
    assert items["weights"].detail == "parameter weights: [Real] per items = equal"
    assert items["on_abstain"].detail == "parameter on_abstain: Abstain = fail"
    assert items["weights"].text_edit.new_text == "weights: "

    text2 = text.replace("[body], \n", "[body], on_abstain: \n")
    change_doc(client, uri, text2)
    items = await complete(client, uri, at(text2, "on_abstain: \n", 12))
    assert set(items) == {"skip", "zero", "partial", "fail"}
    assert items["skip"].kind == types.CompletionItemKind.EnumMember

    text3 = text.replace("[body], \n", "[body, ")
    change_doc(client, uri, text3)
    items = await complete(client, uri, at(text3, "[body, ", 7))
    assert {"correct", "capped", "normalize", "mean"} <= set(items)
    assert "extra" not in items  # the node being declared: it would be a cycle
    assert items["capped"].detail == "node capped: Score" and items["correct"].detail == "criterion correct: " \
                                                                                          "Ordinal[1..5]"
    # names whose type fits the port (Score) sort before those that do not (an Ordinal needs normalize)
    assert items["capped"].sort_text < items["correct"].sort_text
    # VS Code takes snippets: a lone port is positional, list ports and required parameters are named
    assert items["normalize"].text_edit.new_text == "normalize($1)$0"
    assert items["default"].text_edit.new_text == "default($1, value: $2)$0"
    assert items["cap"].text_edit.new_text == "cap(base: $1, trigger: $2, at: $3)$0"
    assert items["mean"].text_edit.new_text == "mean(items: [$1])$0"
    close_doc(client, uri)


@lsp
async def test_completion_of_rules_settings_and_keywords(client: LanguageClient, workspace: Path):
    text = MAIN + "criterion short: Bool = rule.w"
    uri, _ = open_doc(client, workspace / "main.gsr", text)
    items = await complete(client, uri, PositionMap(text).position(len(text)))
    assert {"word_count", "regex", "json_valid"} <= set(items)
    assert items["word_count"].detail == "rule word_count(above: Int = none, below: Int = none) -> Bool"

    text = MAIN.replace("quantize = round", "quantize = ")
    change_doc(client, uri, text)
    items = await complete(client, uri, at(text, "quantize = ", 11))
    assert {"round", "floor", "ceil", "none", "thresholds"} <= set(items)

    text = MAIN + "\ncri"
    change_doc(client, uri, text)
    items = await complete(client, uri, PositionMap(text).position(len(text)))
    assert {"criterion", "node", "sink", "import"} <= set(items)
    close_doc(client, uri)


# ---- formatting and quick fixes ---------------------------------------------------------------------------------------
@lsp
async def test_formatting(client: LanguageClient, workspace: Path):
    formatter = pytest.importorskip("gsrlang.lang.syntax.formatter",
                                    reason="the formatter (gsrlang/lang/syntax/formatter.py) is not in this tree yet")
    messy = MAIN.replace("node body   = weighted_mean(", "node body=weighted_mean(   ")
    uri, _ = open_doc(client, workspace / "main.gsr", messy)
    edits = await client.text_document_formatting_async(types.DocumentFormattingParams(
        text_document=doc(uri), options=types.FormattingOptions(tab_size=2, insert_spaces=True)))
    assert len(edits) == 1 and edits[0].range.start == types.Position(line=0, character=0)
    assert edits[0].range.end == PositionMap(messy).position(len(messy))
    assert edits[0].new_text == formatter.format_source(messy)
    # a document with syntax errors is left alone (its diagnostics say why)
    change_doc(client, uri, "node = (\n")
    edits = await client.text_document_formatting_async(types.DocumentFormattingParams(
        text_document=doc(uri), options=types.FormattingOptions(tab_size=2, insert_spaces=True)))
    assert not edits
    close_doc(client, uri)


@lsp
async def test_code_action_applies_the_checkers_fix(client: LanguageClient, workspace: Path):
    broken = MAIN.replace("normalize(coherent)", "coherent").replace("cap(base: body", "cap(bse: body")
    uri, version = open_doc(client, workspace / "main.gsr", broken)
    found = await published(client, uri, version)
    mismatch = next(d for d in found if d.code == "GSR301")
    actions = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=doc(uri), range=mismatch.range, context=types.CodeActionContext(diagnostics=[mismatch])))
    assert [a.title for a in actions] == ["Wrap in `normalize(...)`"]
    action = actions[0]
    assert action.kind == types.CodeActionKind.QuickFix and action.is_preferred
    assert action.diagnostics[0].code == "GSR301"
    (edit,) = action.edit.changes[uri]
    assert edit.range == mismatch.range and edit.new_text == "normalize(coherent)"

    rename = next(d for d in found if d.code == "GSR201")
    actions = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=doc(uri), range=rename.range, context=types.CodeActionContext(diagnostics=[rename])))
    assert [a.title for a in actions] == ["Rename to `base`"]
    assert actions[0].edit.changes[uri][0].new_text == "base"
    close_doc(client, uri)


# ---- robustness ------------------------------------------------------------------------------------------------------
GARBAGE = ["", "\x00\x01\x02", "((((((((", '"""', "node = = = ", "criterion : {", "}}}]]])))", "#" * 500,
           "task pointwise { scale = ", "node x = cap(base: , trigger: ", "rule.", "sink", "\ud7ff\U0001f600 x",
           "import \"../../../../etc/passwd\"", "criterion a: Ordinal{", "node x = weighted_mean(items: [a, b" * 30]


@lsp
async def test_garbage_and_half_typed_documents_never_crash_it(client: LanguageClient, workspace: Path):
    uri, version = open_doc(client, workspace / "garbage.gsr", GARBAGE[0])
    await published(client, uri, version)
    rnd = random.Random(7)
    texts = GARBAGE + [MAIN[:n] for n in rnd.sample(range(len(MAIN)), 25)]
    for text in texts:
        version = change_doc(client, uri, text)
        positions = PositionMap(text)
        for offset in sorted({0, len(text), *rnd.sample(range(len(text) + 1), min(4, len(text) + 1))}):
            pos = positions.position(offset)
            await client.text_document_hover_async(types.HoverParams(text_document=doc(uri), position=pos))
            await client.text_document_definition_async(types.DefinitionParams(text_document=doc(uri), position=pos))
            await client.text_document_completion_async(types.CompletionParams(text_document=doc(uri), position=pos))
            await client.text_document_code_action_async(types.CodeActionParams(
                text_document=doc(uri), range=types.Range(start=pos, end=pos),
                context=types.CodeActionContext(diagnostics=[])))
        await client.text_document_document_symbol_async(types.DocumentSymbolParams(text_document=doc(uri)))
    # positions beyond the end of the document are clamped, not an error
    far = types.Position(line=10_000, character=10_000)
    await client.text_document_hover_async(types.HoverParams(text_document=doc(uri), position=far))
    await published(client, uri, version)
    # still alive and still right
    version = change_doc(client, uri, MAIN)
    assert await published(client, uri, version) == []
    assert not [m for m in client.log_messages if m.type == types.MessageType.Error]
    close_doc(client, uri)


@lsp
async def test_requests_for_unknown_documents_are_empty(client: LanguageClient, workspace: Path):
    uri = (workspace / "never-opened.gsr").as_uri()
    assert await client.text_document_hover_async(types.HoverParams(
        text_document=doc(uri), position=types.Position(line=0, character=0))) is None
    assert await client.text_document_definition_async(types.DefinitionParams(
        text_document=doc(uri), position=types.Position(line=0, character=0))) == []


# ---- position encodings (a fresh server per client) ----------------------------------------------------------------------
EMOJI = 'rubric e "\U0001f600\U0001f600 caf\u00e9"\ntask pointwise { scale = 1..5 }\ncriterion c: Bool { ask "\U0001f600" } node n = normalize(c) sink nx\n'


@lsp
@pytest.mark.parametrize("encoding, width", [("utf-8", 4), ("utf-16", 2), ("utf-32", 1)])
async def test_positions_in_the_negotiated_encoding(encoding, width, workspace: Path):
    config = ClientServerConfig(server_command=SERVER, client_factory=make_client)
    client = await config.start()
    try:
        caps = client_capabilities("visual-studio-code")
        caps.general = types.GeneralClientCapabilities(position_encodings=[encoding])
        result = await client.initialize_session(types.InitializeParams(capabilities=caps))
        assert result.capabilities.position_encoding == encoding
        uri, version = open_doc(client, workspace / "emoji.gsr", EMOJI)
        (unknown,) = [d for d in await published(client, uri, version) if d.code == "GSR101"]
        line = EMOJI.splitlines()[2]
        before = line[: line.index("sink nx") + 5]  # one emoji (a non-BMP character) before `nx`
        assert unknown.range.start.line == 2
        assert unknown.range.start.character == len(before) - 1 + width
        hovered = await client.text_document_hover_async(types.HoverParams(
            text_document=doc(uri), position=types.Position(line=2, character=unknown.range.start.character - 9)))
        assert hovered is not None and "transform normalize" in hovered.contents.value  # on `normalize`
    finally:
        await client.shutdown_session()
        await client.stop()


# ---- pieces without the protocol ----------------------------------------------------------------------------------------------
def test_position_map_round_trips_in_every_encoding():
    text = "a\U0001f600b\u00e9\r\nsecond \u4e2d line\nlast"
    for encoding in ("utf-8", "utf-16", "utf-32"):
        pm = PositionMap(text, encoding)
        for offset in range(len(text) + 1):
            if text[offset - 1: offset + 1] == "\r\n":
                continue  # between \r and \n is not a position a client can name
            assert pm.offset(pm.position(offset)) == offset, (encoding, offset)
    assert PositionMap(text, "utf-16").position(2).character == 3  # after the emoji: 2 utf-16 units
    assert PositionMap(text, "utf-8").position(2).character == 5
    assert PositionMap(text, "utf-8").offset(types.Position(line=0, character=3)) == 1  # inside the emoji: clamp
    assert PositionMap(text).offset(types.Position(line=99, character=0)) == len(text)


def test_tokenizer_knows_when_the_cursor_is_in_a_string_or_comment():
    assert completion.tokenize('node x = a # comment')[1] == "comment"
    assert completion.tokenize('criterion x: Bool { ask "unfinished')[1] == "string"
    assert completion.tokenize('ask """one\ntwo')[1] == "string"
    tokens, inside = completion.tokenize('ask "done" level 1..5')
    assert inside is None and [t.text for t in tokens] == ["ask", '"done"', "level", "1", "..", "5"]


def test_every_feature_survives_a_fuzz_of_half_typed_documents(root: Path):
    files = Files()
    rnd = random.Random(11)
    sources = [MAIN, *(p.read_text(encoding="utf-8") for p in sorted((root / "examples").glob("*/*.gsr")))]
    for source in sources:
        for _ in range(12):
            cut = rnd.randrange(len(source) + 1)
            text = source[:cut] + source[cut + rnd.randint(0, 40):]
            model = exercise_lsp(text, rnd, 15, files)
            assert model.internal_error is None, model.internal_error
