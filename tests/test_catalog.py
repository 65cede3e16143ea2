"""The stdlib catalogue is read lazily: each signature is parsed from its own declaration the first time it is
asked for, and is what parsing its whole file gives. Nothing is cached on disk, so nothing can be planted there
(the pickled start-up cache it replaces had to be verified with an HMAC: issue 11)."""

from __future__ import annotations

import pickle

import pytest

import gsrlang.lang.catalog as catalog_module
from gsrlang.lang.check.driver import analyze
from gsrlang.lang.resources import stdlib_dir
from gsrlang.lang.syntax import ast, parser
from gsrlang.lang.syntax.parser import parse

PROGRAM = 'rubric r "d"\ntask pointwise { scale = 1..5 }\ncriterion c: Ordinal[1..5] { ask "q?" }\nsink normalize(c)\n'
KINDS = {ast.OpDecl: "operators", ast.RuleDecl: "rules", ast.JudgeDecl: "judges", ast.EnumDecl: "enums"}


def test_each_signature_is_what_its_whole_file_gives():
    catalog = catalog_module.load_catalog(stdlib_dir())
    seen = {kind: [] for kind in KINDS.values()}
    for path in sorted(stdlib_dir().glob("*.gsr")):
        result = parse(path.read_text(encoding="utf-8"))
        assert result.ok, path
        for item in result.module.items:
            kind = KINDS[type(item)]
            seen[kind].append(item.name.name)
            sig = getattr(catalog, kind)[item.name.name]
            assert sig.doc == item.doc, (path, item.name.name)
            if kind != "enums":
                assert (sig.path, sig.span) == (str(path), item.span), item.name.name
            else:
                assert sig.members == tuple(m.name for m in item.members)
    assert {kind: list(getattr(catalog, kind)) for kind in KINDS.values()} == seen  # all, in file order
    assert all(sig.doc for sig in catalog.operators.values()), "every operator is documented"


def test_a_check_parses_only_the_declarations_it_uses(monkeypatch):
    parsed = []
    real = parser.parse_declaration
    monkeypatch.setattr(parser, "parse_declaration", lambda text, base: parsed.append(base) or real(text, base))
    catalog = catalog_module.load_catalog(stdlib_dir())
    monkeypatch.setattr("gsrlang.lang.check.driver.default_catalog", lambda: catalog)
    assert analyze(PROGRAM).ok
    total = sum(len(getattr(catalog, kind)) for kind in KINDS.values())
    assert 0 < len(parsed) < total / 2, (len(parsed), total)
    assert "normalize" in catalog.operators._made and "cap" not in catalog.operators._made


def test_a_broken_or_doubled_declaration_is_a_catalogue_error(tmp_path):
    broken = catalog_module.load_catalog(tmp_path, extra_sources={"extra.gsr": "transform squash(x: Score -> Score\n"})
    assert "squash" in broken.operators
    with pytest.raises(catalog_module.CatalogError, match="extra.gsr: GSR001"):
        broken.operators["squash"]
    huge = catalog_module.load_catalog(tmp_path, extra_sources={
        "big.gsr": "transform big(x: Score; n: Int = 99999999999999999999999) -> Score\n"})
    with pytest.raises(catalog_module.CatalogError, match="big.gsr: GSR006"):
        huge.operators["big"]
    with pytest.raises(catalog_module.CatalogError, match="operator 'cap' declared twice"):
        catalog_module.load_catalog(stdlib_dir(), extra_sources={"extra.gsr": "gate cap(base: Score) -> Score\n"})


def test_the_catalogue_pickles_as_plain_mappings_required_included():
    catalog = catalog_module.load_catalog(stdlib_dir())
    again = pickle.loads(pickle.dumps(catalog))
    assert again == catalog and type(again.operators) is dict
    assert again.operators["cap"].param("at").default is catalog_module.REQUIRED


def test_checking_writes_and_reads_nothing_in_the_cache_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    catalog_module.default_catalog.cache_clear()
    try:
        assert analyze(PROGRAM).ok
    finally:
        catalog_module.default_catalog.cache_clear()
    assert list(tmp_path.iterdir()) == []
