"""Tests for gsrlang.files.dataset: column maps, dotted paths, labels and the streaming reader."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from runfiles import records  # noqa: E402
from shared_datasets import LLMBAR, TOPICAL_CHAT, needs_llmbar, needs_topical_chat  # noqa: E402

from gsrlang.files import dataset
from gsrlang.files import jsonl as jsonl_reader
from gsrlang.files.dataset import (
    Candidate,
    ColumnMap,
    DataError,
    Item,
    ItemError,
    MissingFieldError,
    get_path,
    parse_pairwise_label,
    parse_pointwise_label,
    read_items,
)

POINTWISE = ColumnMap()
PAIRWISE = ColumnMap(response_fields=("left", "right"))


def write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def jsonl(*rows: object) -> str:
    return "".join(json.dumps(row) + "\n" for row in rows)


def only(results: list) -> Item | ItemError:
    assert len(results) == 1, results
    return results[0]


# --------------------------------------------------------------------------- ColumnMap


def test_column_map_defaults():
    columns = ColumnMap()
    assert columns.input_field == "input"
    assert columns.response_fields == ("response",)
    assert columns.id_field is None and columns.label_field is None and columns.reference_field is None


def test_column_map_accepts_a_single_response_name_and_lists():
    assert ColumnMap(response_fields="answer").response_fields == ("answer",)
    assert ColumnMap(response_fields=["a", "b"]).response_fields == ("a", "b")


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"response_fields": ()}, "at least one"),
        ({"response_fields": ("a", "a")}, "repeated"),
        ({"response_fields": ("a", "")}, "non-empty"),
        ({"response_fields": tuple(f"r{i}" for i in range(27))}, "at most 26"),
        ({"input_field": ""}, "input_field"),
        ({"label_field": ""}, "label_field"),
    ],
)
def test_column_map_rejects_bad_configurations(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ColumnMap(**kwargs)


# --------------------------------------------------------------------------- get_path


def test_get_path_follows_dots_and_array_indices():
    record = {"scores": {"overall": 4.5, "per_turn": [1, 2]}, "id": 7}
    assert get_path(record, "id") == 7
    assert get_path(record, "scores.overall") == 4.5
    assert get_path(record, "scores.per_turn.1") == 2


def test_get_path_prefers_a_verbatim_key_with_dots():
    assert get_path({"scores.overall": "3", "scores": {"overall": 5}}, "scores.overall") == "3"


def test_get_path_missing_top_level_key_lists_available_keys():
    with pytest.raises(KeyError) as caught:
        get_path({"context": "", "fact": ""}, "response")
    assert str(caught.value) == "missing field 'response' (available: context, fact)"
    assert isinstance(caught.value, MissingFieldError)
    assert caught.value.path == "response"


def test_get_path_missing_nested_key_names_the_parent():
    with pytest.raises(KeyError, match=r"'scores' has no key 'overal'; available: coherence, overall"):
        get_path({"scores": {"coherence": 1, "overall": 2}}, "scores.overal")


def test_get_path_through_a_non_object():
    with pytest.raises(KeyError, match=r"'scores' is a number, not an object"):
        get_path({"scores": 3}, "scores.overall")
    with pytest.raises(KeyError, match=r"'turns' has only 2 elements"):
        get_path({"turns": ["a", "b"]}, "turns.5")


# --------------------------------------------------------------------------- labels


@pytest.mark.parametrize(
    "value, expected",
    [
        (1, "first"),
        (2, "second"),
        (0, "tie"),
        (1.0, "first"),
        ("1", "first"),
        (" 2 ", "second"),
        ("0", "tie"),
        ("tie", "tie"),
        ("TIE", "tie"),
        ("A", "first"),
        ("b", "second"),
        ("left", "first"),
        ("right", "second"),
        ("First", "first"),
    ],
)
def test_parse_pairwise_label_accepts(value, expected):
    assert parse_pairwise_label(value, ("left", "right")) == expected


@pytest.mark.parametrize("value", [3, -1, 1.5, "C", "", "yes", None, True, [1], {"winner": 1}])
def test_parse_pairwise_label_rejects(value):
    with pytest.raises(ValueError, match="pairwise label"):
        parse_pairwise_label(value, ("left", "right"))


def test_parse_pairwise_label_prefers_field_names_over_letters():
    # Fields literally named "B" and "A": the field name is the more specific reading.
    assert parse_pairwise_label("B", ("B", "A")) == "first"


def test_parse_pairwise_label_needs_two_fields():
    with pytest.raises(ValueError, match="exactly two response fields"):
        parse_pairwise_label(1, ("response",))


@pytest.mark.parametrize("value, expected", [(4, 4.0), (4.6666, 4.6666), ("3.5", 3.5), (" 2 ", 2.0), (0, 0.0)])
def test_parse_pointwise_label_accepts(value, expected):
    assert parse_pointwise_label(value) == expected


@pytest.mark.parametrize("value", [None, True, "", "four", "nan", float("inf"), [4], {"score": 4}])
def test_parse_pointwise_label_rejects(value):
    with pytest.raises(ValueError, match="pointwise label"):
        parse_pointwise_label(value)


# --------------------------------------------------------------------------- JSONL


def test_jsonl_pointwise_item(tmp_path):
    row = {"input": "q", "response": "r", "extra": {"x": 1}}
    item = only(list(read_items(write(tmp_path, "d.jsonl", jsonl(row)), POINTWISE)))
    assert item == Item(
        id="1", line=1, input="q", candidates=(Candidate("A", "r"),), reference=None, label=None, record=row
    )


def test_jsonl_pairwise_and_wider_candidates_are_lettered_in_order(tmp_path):
    row = {"input": "q", "left": "l", "right": "r", "third": "t"}
    path = write(tmp_path, "d.jsonl", jsonl(row))
    pair = only(list(read_items(path, PAIRWISE)))
    assert pair.candidates == (Candidate("A", "l"), Candidate("B", "r"))
    three = only(list(read_items(path, ColumnMap(response_fields=("third", "left", "right")))))
    assert [(c.id, c.text) for c in three.candidates] == [("A", "t"), ("B", "l"), ("C", "r")]


def test_jsonl_id_label_and_reference_columns(tmp_path):
    row = {"meta": {"uid": 17}, "q": "question", "a": "answer", "gold": {"score": 4}, "ref": "reference"}
    columns = ColumnMap(
        input_field="q", response_fields=("a",), id_field="meta.uid", label_field="gold.score", reference_field="ref"
    )
    item = only(list(read_items(write(tmp_path, "d.ndjson", jsonl(row)), columns)))
    assert (item.id, item.input, item.label, item.reference) == ("17", "question", 4, "reference")
    assert item.record == row


def test_jsonl_null_label_and_reference_read_as_none(tmp_path):
    row = {"input": "q", "response": "r", "label": None, "ref": None}
    columns = ColumnMap(label_field="label", reference_field="ref")
    item = only(list(read_items(write(tmp_path, "d.jsonl", jsonl(row)), columns)))
    assert isinstance(item, Item)
    assert item.label is None and item.reference is None


def test_jsonl_labels_are_kept_as_stored(tmp_path):
    rows = [{"input": "q", "response": "r", "label": value} for value in (2, "B", {"a": 1})]
    items = list(read_items(write(tmp_path, "d.jsonl", jsonl(*rows)), ColumnMap(label_field="label")))
    assert [item.label for item in items] == [2, "B", {"a": 1}]


def test_jsonl_blank_lines_are_skipped_but_counted(tmp_path):
    row = {"input": "q", "response": "r"}
    text = json.dumps(row) + "\n\n   \n" + json.dumps(row) + "\r\n"
    items = list(read_items(write(tmp_path, "d.jsonl", text), POINTWISE))
    assert [(item.id, item.line) for item in items] == [("1", 1), ("4", 4)]


def test_jsonl_utf8_bom_and_non_ascii_text(tmp_path):
    text = "\ufeff" + json.dumps({"input": "¿qué?", "response": "日本語"}, ensure_ascii=False) + "\n"
    item = only(list(read_items(write(tmp_path, "d.jsonl", text), POINTWISE)))
    assert (item.input, item.candidates[0].text) == ("¿qué?", "日本語")


def test_missing_response_column_names_it_and_lists_the_columns(tmp_path):
    text = jsonl({"input": "q", "response": "r"}, {"input": "q", "answer": "r"})
    error = list(read_items(write(tmp_path, "d.jsonl", text), POINTWISE))[1]
    assert error == ItemError(id="2", line=2, reason="line 2: missing column 'response' (available: input, answer)")


def test_missing_input_column(tmp_path):
    error = only(list(read_items(write(tmp_path, "d.jsonl", jsonl({"response": "r"})), POINTWISE)))
    assert isinstance(error, ItemError)
    assert error.reason == "line 1: missing column 'input' (available: response)"


def test_missing_nested_label_column(tmp_path):
    row = {"input": "q", "response": "r", "scores": {"overall": 3}}
    error = only(list(read_items(write(tmp_path, "d.jsonl", jsonl(row)), ColumnMap(label_field="scores.overal"))))
    assert isinstance(error, ItemError)
    assert error.reason.startswith("line 1: missing column 'scores.overal' ('scores' has no key 'overal'")


def test_numbers_become_text(tmp_path):
    row = {"id": 12, "input": 3.5, "response": 4}
    item = only(list(read_items(write(tmp_path, "d.jsonl", jsonl(row)), ColumnMap(id_field="id"))))
    assert (item.id, item.input, item.candidates[0].text) == ("12", "3.5", "4")


@pytest.mark.parametrize("value, kind", [(None, "null"), ({"text": "r"}, "an object"), (["r"], "an array"), (True, "a boolean")])
def test_non_text_response_is_an_item_error(tmp_path, value, kind):
    row = {"id": "x-1", "input": "q", "response": value}
    error = only(list(read_items(write(tmp_path, "d.jsonl", jsonl(row)), ColumnMap(id_field="id"))))
    assert error == ItemError(id="x-1", line=1, reason=f"line 1: column 'response' must be text, got {kind}")


def test_bad_id_value_gives_an_error_without_id(tmp_path):
    row = {"id": None, "input": "q", "response": "r"}
    error = only(list(read_items(write(tmp_path, "d.jsonl", jsonl(row)), ColumnMap(id_field="id"))))
    assert error == ItemError(id=None, line=1, reason="line 1: column 'id' must be text, got null")


@pytest.mark.parametrize("row, kind", [([1, 2], "an array"), ("text", "a string"), (3, "a number"), (None, "null")])
def test_non_object_row_is_an_item_error(tmp_path, row, kind):
    error = only(list(read_items(write(tmp_path, "d.jsonl", json.dumps(row) + "\n"), POINTWISE)))
    assert error == ItemError(id="1", line=1, reason=f"line 1: expected a JSON object, got {kind}")


def test_truncated_last_line_unterminated_string(tmp_path):
    good = json.dumps({"input": "q", "response": "r"})
    text = good + "\n" + good + '\n{"input": "q", "response": "cut of'  # no final newline
    results = list(read_items(write(tmp_path, "d.jsonl", text), POINTWISE))
    assert [type(r) for r in results] == [Item, Item, ItemError]
    assert results[2] == ItemError(
        id="3", line=3, reason="line 3: truncated JSON (unterminated string starting at column 28)"
    )


def test_truncated_line_between_values(tmp_path):
    text = '{"input": "q", "response": "r",\n'
    error = only(list(read_items(write(tmp_path, "d.jsonl", text), POINTWISE)))
    assert error.reason.startswith("line 1: truncated JSON (the line ends at column 32, expecting property name")


def test_invalid_json_reports_the_column(tmp_path):
    text = jsonl({"input": "q", "response": "r"}) + '{"input": "q" "response": "r"}\n' + jsonl({"input": "q", "response": "r"})
    results = list(read_items(write(tmp_path, "d.jsonl", text), POINTWISE))
    assert [type(r) for r in results] == [Item, ItemError, Item]
    assert results[1].reason == "line 2: invalid JSON at column 15: expecting ',' delimiter"
    assert results[2].line == 3


def test_invalid_json_with_id_column_has_no_id(tmp_path):
    error = only(list(read_items(write(tmp_path, "d.jsonl", "{oops}\n"), ColumnMap(id_field="id"))))
    assert error.id is None and error.reason.startswith("line 1: invalid JSON at column 2")


def test_invalid_utf8_is_a_failed_row_naming_its_line(tmp_path):
    good = jsonl({"input": "q", "response": "r"}).encode()
    text = good + b'{"input": "caf\xe9", "response": "r"}\n' + good
    results = list(read_items(write(tmp_path, "d.jsonl", text), POINTWISE))
    assert [type(r) for r in results] == [Item, ItemError, Item]
    assert results[1].reason == "line 2: not valid UTF-8 (byte 0xe9 at byte 15 of the line)"


def test_jsonl_is_streamed_not_loaded_whole(tmp_path, monkeypatch):
    # Rows come out one at a time: the reader holds one line, however long the file.
    good = jsonl({"input": "q", "response": "r"}).encode()
    path = write(tmp_path, "d.jsonl", good * 2 + b"x" * 5000 + b"\n" + good * 1000)
    monkeypatch.setattr(jsonl_reader, "MAX_ROW_BYTES", 1000)  # the limit every data format shares
    items = read_items(path, POINTWISE)
    assert isinstance(next(items), Item)
    assert isinstance(next(items), Item)
    assert next(items) == ItemError(id="3", line=3, reason="line 3: the line is longer than 1,000 bytes")
    assert isinstance(next(items), Item)


def test_many_rows_keep_numbering(tmp_path):
    row = json.dumps({"input": "q", "response": "r"}) + "\n"
    path = write(tmp_path, "d.jsonl", row * 5000)
    last = None
    count = 0
    for last in read_items(path, POINTWISE):
        count += 1
    assert count == 5000 and last.id == "5000"


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.fixed_dictionaries(
            {
                "id": st.text(min_size=1, max_size=8),
                "input": st.text(max_size=30),
                "a": st.text(max_size=30),
                "b": st.text(max_size=30),
                "label": st.one_of(st.none(), st.integers(0, 2)),
            }
        ),
        max_size=8,
    )
)
def test_jsonl_round_trip(tmp_path_factory, rows):
    path = tmp_path_factory.mktemp("rt") / "d.jsonl"
    path.write_text(jsonl(*rows), encoding="utf-8")
    columns = ColumnMap(response_fields=("a", "b"), id_field="id", label_field="label")
    items = list(read_items(path, columns))
    assert [(i.id, i.input, i.candidates[0].text, i.candidates[1].text, i.label) for i in items] == [
        (r["id"], r["input"], r["a"], r["b"], r["label"]) for r in rows
    ]
    assert [i.line for i in items] == list(range(1, len(rows) + 1))


# --------------------------------------------------------------------------- CSV / TSV


def test_csv_rows(tmp_path):
    text = "id,input,response,gold,ref\nq1,hello,world,4,a fact\nq2,\"multi\nline\",\"with, comma\",,\n"
    columns = ColumnMap(id_field="id", label_field="gold", reference_field="ref")
    first, second = read_items(write(tmp_path, "d.csv", text), columns)
    assert (first.id, first.line, first.input, first.candidates[0].text, first.label, first.reference) == (
        "q1", 2, "hello", "world", "4", "a fact",
    )
    assert (second.id, second.line, second.input, second.candidates[0].text) == ("q2", 3, "multi\nline", "with, comma")
    assert second.label is None and second.reference is None  # empty cells
    assert second.record == {"id": "q2", "input": "multi\nline", "response": "with, comma", "gold": "", "ref": ""}


def test_csv_ids_default_to_row_numbers_and_lines_follow_the_file(tmp_path):
    text = "input,response\r\na,b\r\n\"x\ny\",z\r\n\r\nc,d\r\n"
    items = list(read_items(write(tmp_path, "d.csv", text), POINTWISE))
    assert [(i.id, i.line) for i in items] == [("1", 2), ("2", 3), ("3", 6)]


def test_tsv_and_dotted_header_names(tmp_path):
    text = "input\tresponse\tscores.overall\nq\tr\t3.5\n"
    item = only(list(read_items(write(tmp_path, "d.TSV", text), ColumnMap(label_field="scores.overall"))))
    assert item.label == "3.5"
    assert parse_pointwise_label(item.label) == 3.5


def test_csv_with_bom(tmp_path):
    text = "\ufeffinput,response\nq,r\n"
    item = only(list(read_items(write(tmp_path, "d.csv", text), POINTWISE)))
    assert item.input == "q"


def test_csv_header_missing_a_column_is_a_data_error(tmp_path):
    path = write(tmp_path, "d.csv", "input,answer\nq,r\n")
    with pytest.raises(DataError, match=r"d\.csv: the header has no column 'response' \(columns: input, answer\)"):
        list(read_items(path, POINTWISE))


def test_csv_rows_with_the_wrong_number_of_fields(tmp_path):
    text = "input,response\nq\nq,r,extra\nq,r\n"
    short, long, good = read_items(write(tmp_path, "d.csv", text), POINTWISE)
    assert short == ItemError(id="1", line=2, reason="line 2: row has 1 fields but the header has 2")
    assert long == ItemError(id="2", line=3, reason="line 3: row has 3 fields but the header has 2")
    assert isinstance(good, Item) and good.id == "3"


def test_csv_empty_file_has_no_items(tmp_path):
    assert list(read_items(write(tmp_path, "d.csv", ""), POINTWISE)) == []


def test_csv_invalid_utf8_is_a_failed_row(tmp_path):
    path = write(tmp_path, "d.csv", b"input,response\nq,r\nq,\xc3\x28\nq,r\n")
    results = list(read_items(path, POINTWISE))
    assert [type(r) for r in results] == [Item, ItemError, Item]
    assert results[1].reason == "line 3: not valid UTF-8 (byte 0xc3 at byte 3 of the line)"


def test_csv_invalid_utf8_in_the_header_is_a_data_error(tmp_path):
    with pytest.raises(DataError, match=r"d\.csv: line 1 \(the header\): not valid UTF-8"):
        list(read_items(write(tmp_path, "d.csv", b"inp\xffut,response\nq,r\n"), POINTWISE))


# --------------------------------------------------------------------------- JSON arrays


def test_json_array(tmp_path):
    rows = [{"input": "q", "response": "r"}, "not an object", {"input": "q"}]
    first, second, third = read_items(write(tmp_path, "d.json", json.dumps(rows, indent=2)), POINTWISE)
    assert isinstance(first, Item) and (first.id, first.line) == ("1", 1)
    assert second == ItemError(id="2", line=2, reason="item 2: expected a JSON object, got a string")
    assert third.reason == "item 3: missing column 'response' (available: input)"


def test_json_that_is_not_an_array(tmp_path):
    with pytest.raises(DataError, match=r"expected a top-level JSON array of objects, got an object"):
        list(read_items(write(tmp_path, "d.json", '{"input": "q"}'), POINTWISE))


def test_json_lines_in_a_json_file_suggest_jsonl(tmp_path):
    text = jsonl({"input": "q", "response": "r"}, {"input": "q", "response": "r"})
    with pytest.raises(DataError, match=r"line 2 column 1: Extra data \(.*named \.jsonl\)"):
        list(read_items(write(tmp_path, "d.json", text), POINTWISE))


def test_json_invalid_utf8(tmp_path):
    with pytest.raises(DataError, match=r"d\.json: line 2 is not valid UTF-8"):
        list(read_items(write(tmp_path, "d.json", b'[\n"\xff"]'), POINTWISE))


# --------------------------------------------------------------------------- files


def test_missing_file_raises_at_once(tmp_path):
    with pytest.raises(DataError, match=r"nope\.jsonl: no such file"):
        read_items(tmp_path / "nope.jsonl", POINTWISE)


def test_directory_is_not_a_data_file(tmp_path):
    (tmp_path / "dir.jsonl").mkdir()
    with pytest.raises(DataError, match="not a regular file"):
        read_items(tmp_path / "dir.jsonl", POINTWISE)


@pytest.mark.parametrize("name", ["data.txt", "data.jsonl.gz", "data"])
def test_unknown_extension_lists_the_supported_ones(tmp_path, name):
    path = write(tmp_path, name, "")
    with pytest.raises(DataError, match=r"unsupported file type .*supported extensions: \.jsonl, \.ndjson, \.csv, \.tsv, \.json"):
        read_items(path, POINTWISE)


# --------------------------------------------------------------------------- real data


@needs_topical_chat
def test_topical_chat_dev():
    columns = ColumnMap(
        input_field="context",
        response_fields=("response",),
        id_field="id",
        label_field="scores.overall",
        reference_field="fact",
    )
    items = list(read_items(TOPICAL_CHAT, columns))
    assert len(items) == 240
    assert all(isinstance(item, Item) for item in items)
    first = items[0]
    assert first.id == "tc-000" and first.line == 1
    assert first.label == pytest.approx(4.6667, abs=1e-4)
    assert [c.id for c in first.candidates] == ["A"]
    assert first.candidates[0].text == first.record["response"]
    assert first.reference == first.record["fact"]
    assert get_path(first.record, "scores.naturalness") == 3.0
    assert len({item.id for item in items}) == 240
    labels = [parse_pointwise_label(item.label) for item in items]
    assert all(1 <= label <= 5 for label in labels)


@needs_llmbar
def test_llmbar_natural():
    columns = ColumnMap(input_field="input", response_fields=("output_1", "output_2"), label_field="label")
    items = list(read_items(LLMBAR, columns))
    assert len(items) == 100
    assert all(isinstance(item, Item) for item in items)
    assert [item.id for item in items] == [str(i) for i in range(1, 101)]
    assert all([c.id for c in item.candidates] == ["A", "B"] for item in items)
    labels = [parse_pairwise_label(item.label, columns.response_fields) for item in items]
    assert set(labels) == {"first", "second"}
    assert labels.count("first") == sum(item.record["label"] == 1 for item in items)


# --------------------------------------------------------------------------- rows beyond the limits (issue 11)


@pytest.mark.parametrize("line, reason", [
    ("[" * 100_000 + "]" * 100_000, f"JSON nested more than {dataset.MAX_ROW_DEPTH} levels deep"),
    ('{"input": "q", "response": ' + "[" * 500 + "]" * 500 + "}", f"JSON nested more than {dataset.MAX_ROW_DEPTH} levels deep"),
    ('{"input": "q", "response": "r", "n": ' + "9" * 5000 + "}", "invalid JSON: an integer with more than 4,300 digits"),
    ('{"input": "q", "response": "r", "n": -1.5e400}', "invalid JSON: the number -1.5e400 is out of range"),
])
def test_a_row_beyond_the_limits_is_a_failed_row_and_later_rows_are_read(tmp_path, line, reason):
    good = jsonl({"input": "q", "response": "r"})
    results = list(read_items(write(tmp_path, "d.jsonl", good + line + "\n" + good), POINTWISE))
    assert [type(r) for r in results] == [Item, ItemError, Item]
    assert results[1] == ItemError(id="2", line=2, reason=f"line 2: {reason}")


def test_rows_nested_up_to_the_limit_are_read(tmp_path):
    value = "[" * (dataset.MAX_ROW_DEPTH - 1) + "]" * (dataset.MAX_ROW_DEPTH - 1)
    (item,) = read_items(write(tmp_path, "d.jsonl", '{"input": "q", "response": "r", "deep": ' + value + "}\n"), POINTWISE)
    assert isinstance(item, Item)


def test_a_json_array_row_nested_too_deeply_is_a_failed_row(tmp_path):
    rows = [{"input": "q", "response": "r"}, {"input": "q", "response": "r", "x": "DEEP"}]
    text = json.dumps(rows).replace('"DEEP"', "[" * 300 + "]" * 300)
    results = list(read_items(write(tmp_path, "d.json", text), POINTWISE))
    assert [type(r) for r in results] == [Item, ItemError]
    assert results[1].reason == f"item 2: JSON nested more than {dataset.MAX_ROW_DEPTH} levels deep"


def test_a_json_array_too_deep_to_decode_is_a_data_error(tmp_path):
    with pytest.raises(DataError, match="nested too deeply to read"):
        list(read_items(write(tmp_path, "d.json", "[" * 100_000 + "]" * 100_000), POINTWISE))


def test_csv_cells_longer_than_pythons_default_limit_are_read(tmp_path):
    long = "x" * 200_000  # the csv module's default field limit is 131,072 characters
    path = write(tmp_path, "d.csv", f"input,response\nq,{long}\nq,r\n")
    results = list(read_items(path, POINTWISE))
    assert [r.candidates[0].text for r in results] == [long, "r"]


def test_a_csv_cell_beyond_the_limit_is_a_failed_row_and_later_rows_are_read(tmp_path, monkeypatch):
    monkeypatch.setattr(jsonl_reader, "MAX_ROW_BYTES", 1000)  # the limit every data format shares
    path = write(tmp_path, "d.csv", f'input,response\nq,r\nq,"{"x" * 600}\n{"y" * 600}"\nq,r2\n')
    results = list(read_items(path, POINTWISE))
    assert [type(r) for r in results] == [Item, ItemError, Item]
    assert results[1].reason == "line 3: field larger than field limit (1000)"
    assert results[2].candidates[0].text == "r2"


def test_a_csv_line_longer_than_the_limit_is_a_failed_row(tmp_path, monkeypatch):
    monkeypatch.setattr(jsonl_reader, "MAX_ROW_BYTES", 1000)  # the limit every data format shares
    path = write(tmp_path, "d.csv", f"input,response\nq,{'x' * 5000}\nq,r\n")
    results = list(read_items(path, POINTWISE))
    assert [type(r) for r in results] == [ItemError, Item]
    assert results[0].reason == "line 2: the line is longer than 1,000 bytes"


def test_a_label_beyond_a_floats_range_is_a_label_error_not_a_crash():
    with pytest.raises(ValueError, match="out of range"):
        parse_pointwise_label(10**400)


def test_gsr_run_reports_each_bad_row_with_its_line_and_goes_on(tmp_path, capsys):
    from gsrlang.cli import main

    program = write(tmp_path, "p.gsr", 'rubric r "d"\ntask pointwise { scale = 1..5 }\n'
                                       "criterion long: Bool = rule.word_count(above: 1)\nsink normalize(long)\n")
    good = jsonl({"input": "q", "response": "a b"}).encode()
    rows = [b"[" * 100_000 + b"]" * 100_000 + b"\n", b'{"n": ' + b"9" * 5000 + b"}\n", b'{"input": "caf\xe9"}\n']
    path = write(tmp_path, "d.jsonl", good + b"".join(rows) + good)
    out = tmp_path / "out.jsonl"
    assert main(["run", str(program), "--data", str(path), "--out", str(out)]) == 1
    results = records(out)
    assert [(r["line"], r["status"]) for r in results] == [(1, "ok"), (2, "failed"), (3, "failed"), (4, "failed"),
                                                          (5, "ok")]
    err = capsys.readouterr().err
    assert "line 2: JSON nested more than" in err and "line 3: invalid JSON" in err and "line 4: not valid UTF-8" in err
