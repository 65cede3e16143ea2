"""Streaming readers for evaluation data: JSONL, CSV/TSV, Parquet and small JSON arrays.

A data file holds one item per row. A :class:`ColumnMap` says which fields of a
row hold the input, the response(s) to judge, and optionally an id, a gold
label and a reference text. Field names may be dotted paths into nested JSON
objects (``scores.overall``); see :func:`get_path`.

:func:`read_items` turns the rows of a file into :class:`Item` objects, one at a
time. A row that cannot become an item does not stop the stream: it comes out
as an :class:`ItemError` that says what is wrong and where, so a caller can
report it and carry on. Only problems with the file as a whole (missing file,
unsupported extension, bytes that are not UTF-8, a CSV header that lacks a
required column) raise :class:`DataError`.

JSONL and CSV files are read line by line and never held in memory whole, so
files of any length can be streamed with flat memory. A ``.json`` file must be
a single top-level array and is loaded whole.

This module needs only the standard library and ``attrs`` for local JSONL, CSV
and JSON files; Parquet needs pyarrow, and a URI (``s3://...``) fsspec or
pyarrow (:mod:`gsrlang.files.storage`), imported only for such files.
"""

from __future__ import annotations

import csv
import json
import math
import string
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import attrs

import gsrlang.files.jsonl as _jsonl
from gsrlang.files.jsonl import MAX_ROW_DEPTH, jsonl_lines  # the one JSON Lines reader, the limits every format shares
from gsrlang.files.jsonl import decode_line as _decode
from gsrlang.files.jsonl import deeper_than as _deeper_than
from gsrlang.files.jsonl import finite_float as _finite_float
from gsrlang.files.jsonl import json_type as _kind
from gsrlang.files.jsonl import number_problem as _number_problem
from gsrlang.files.jsonl import physical_lines as _physical_lines
from gsrlang.files.jsonl import too_long as _too_long

__all__ = [
    "Candidate",
    "ColumnMap",
    "DataError",
    "Item",
    "ItemError",
    "MissingFieldError",
    "SUPPORTED_EXTENSIONS",
    "check_columns",
    "default_id_field",
    "get_path",
    "id_records",
    "parse_pairwise_label",
    "parse_pointwise_label",
    "read_items",
    "read_rows",
    "Row",
]

#: File extensions :func:`read_items` understands (matched case-insensitively).
SUPPORTED_EXTENSIONS: tuple[str, ...] = (".jsonl", ".ndjson", ".csv", ".tsv", ".json", ".parquet", ".pq")

_CANDIDATE_IDS = string.ascii_uppercase
_MAX_LISTED_KEYS = 20


class DataError(Exception):
    """A data file cannot be read at all (as opposed to one bad row).

    The message always names the file.
    """


class MissingFieldError(KeyError):
    """Raised by :func:`get_path` when a (dotted) field is absent from a record.

    It is a :class:`KeyError`, so ``except KeyError`` catches it; unlike a plain
    ``KeyError`` its ``str()`` is a readable sentence rather than a quoted repr.

    Attributes:
        path: the field path that was asked for, e.g. ``"scores.overall"``.
        detail: what exactly is missing and which keys were available there.
    """

    def __init__(self, path: str, detail: str) -> None:
        super().__init__(path)
        self.path = path
        self.detail = detail

    def __str__(self) -> str:
        return f"missing field {self.path!r} ({self.detail})"


# --------------------------------------------------------------------------- records


@attrs.frozen
class Candidate:
    """One response to be judged. ``id`` is ``"A"``, ``"B"``, ... in column order."""

    id: str
    text: str


@attrs.frozen
class Item:
    """One row of a data file, ready to be judged.

    Attributes:
        id: the value of the id column as text, or else the 1-based row number
            (the line number for JSONL, the data-row number for CSV, the
            position in the array for JSON).
        line: where the row is: its 1-based line in a JSONL file, the line on
            which the row starts in a CSV file (the header is line 1), or its
            1-based position in a JSON array.
        input: the text the responses answer (prompt, conversation, ...).
        candidates: the responses, ``A`` first; one for pointwise data, two for
            pairwise data.
        reference: the reference text, or None when no reference column is
            configured or its value is null (an empty cell in CSV).
        label: the gold label exactly as stored in the row (not parsed; see
            :func:`parse_pointwise_label` and :func:`parse_pairwise_label`), or
            None when no label column is configured or its value is null (an
            empty cell in CSV).
        record: the whole raw row, for judges that read further fields.
    """

    id: str
    line: int
    input: str
    candidates: tuple[Candidate, ...]
    reference: str | None
    label: object | None = attrs.field(hash=False)
    record: dict = attrs.field(hash=False, repr=False)


@attrs.frozen
class ItemError:
    """A row that cannot become an :class:`Item`.

    Attributes:
        id: the row's id when it could be determined (the id column's value, or
            the row number when no id column is configured), else None.
        line: where the row is, as for :attr:`Item.line`.
        reason: a complete sentence naming the place and the problem, e.g.
            ``"line 17: missing column 'response' (available: id, context)"``.
    """

    id: str | None
    line: int
    reason: str


def _response_fields(value: str | Sequence[str]) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else tuple(value)


def _check_response_fields(instance: ColumnMap, attribute: attrs.Attribute, value: tuple[str, ...]) -> None:
    if not value:
        raise ValueError("response_fields must name at least one column")
    if len(value) > len(_CANDIDATE_IDS):
        raise ValueError(f"at most {len(_CANDIDATE_IDS)} response fields are supported, got {len(value)}")
    for name in value:
        if not isinstance(name, str) or not name:
            raise ValueError(f"response field names must be non-empty strings, got {name!r}")
    if duplicates := sorted({name for name in value if value.count(name) > 1}):
        raise ValueError(f"response fields are repeated: {', '.join(map(repr, duplicates))}")


def _check_field_name(instance: ColumnMap, attribute: attrs.Attribute, value: str | None) -> None:
    if value is None and attribute.name != "input_field":
        return
    if not isinstance(value, str) or not value:
        raise ValueError(f"{attribute.name} must be a non-empty string, got {value!r}")


@attrs.frozen
class ColumnMap:
    """Which fields of a row hold what.

    Every name may be a dotted path into nested JSON objects (see
    :func:`get_path`). ``response_fields`` lists one column for pointwise data
    or two for pairwise data (more are allowed); a single string is accepted as
    a one-column tuple. Optional columns left as None are not read.
    """

    input_field: str = attrs.field(default="input", validator=_check_field_name)
    response_fields: tuple[str, ...] = attrs.field(default=("response",), converter=_response_fields,
                                                   validator=_check_response_fields)
    id_field: str | None = attrs.field(default=None, validator=_check_field_name)
    label_field: str | None = attrs.field(default=None, validator=_check_field_name)
    reference_field: str | None = attrs.field(default=None, validator=_check_field_name)
    # what the program reads (see gsrlang.files.needs): an unread input or response is not asked of the
    # row (its text is ""), and `fields` are further columns the program's criteria read, with who reads them
    read_input: bool = True
    read_responses: bool = True
    fields: tuple[tuple[str, str], ...] = ()

    def required_fields(self) -> tuple[str, ...]:
        """Every configured column that is read, in the order rows are checked."""
        return tuple(name for name, _ in self.needs())

    def needs(self) -> tuple[tuple[str, str], ...]:
        """(column, what reads it) for every column a row must have."""
        out = [(self.input_field, "the input (--input-field)")] if self.read_input else []
        if self.read_responses:
            out += [(f, "a response (--response-field / --responses)") for f in self.response_fields]
        out += [(f, what) for f, what in ((self.id_field, "the id (--id-field)"),
                                          (self.label_field, "the label (--label-field)"),
                                          (self.reference_field, "the reference (--reference-field)")) if f]
        out += [(f, f"criterion `{who}`") for f, who in self.fields]
        return tuple(dict((name, what) for name, what in reversed(out)).items())[::-1]


# --------------------------------------------------------------------------- paths


def _list_keys(mapping: Mapping) -> str:
    keys = [str(k) for k in mapping]
    if not keys:
        return "it is empty"
    shown = ", ".join(keys[:_MAX_LISTED_KEYS])
    if len(keys) > _MAX_LISTED_KEYS:
        shown += f", ... ({len(keys) - _MAX_LISTED_KEYS} more)"
    return f"available: {shown}"


def get_path(record: Mapping, path: str) -> object:
    """Return the value at ``path`` in ``record``.

    A key that exists verbatim wins (so a CSV column literally named
    ``scores.overall`` is found). Otherwise the path is split on dots and
    followed through nested objects; a purely numeric part may also index into
    an array (``turns.0``).

    Raises:
        MissingFieldError: (a ``KeyError``) when some part of the path is
            absent or leads through a value that is not an object; the message
            says which part and lists the keys available at that point.
    """
    if path in record:
        return record[path]
    current: object = record
    walked: list[str] = []
    for part in path.split("."):
        if isinstance(current, Mapping):
            if part not in current:
                if walked:
                    where = ".".join(walked)
                    raise MissingFieldError(path, f"{where!r} has no key {part!r}; {_list_keys(current)}")
                raise MissingFieldError(path, _list_keys(current))
            current = current[part]
        elif isinstance(current, list) and part.isdigit():
            index = int(part)
            if index >= len(current):
                raise MissingFieldError(path, f"{'.'.join(walked)!r} has only {len(current)} elements")
            current = current[index]
        else:
            raise MissingFieldError(path, f"{'.'.join(walked)!r} is {_kind(current)}, not an object")
        walked.append(part)
    return current


# --------------------------------------------------------------------------- labels


def _as_integer(value: object) -> int | None:
    """An int for integral numbers and numeric strings, else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            return None
    if isinstance(value, float):
        return int(value) if value.is_integer() else None
    return None


def parse_pairwise_label(value: object, response_fields: Sequence[str]) -> str:
    """Normalise a pairwise gold label to ``"first"``, ``"second"`` or ``"tie"``.

    Accepted spellings, in the order they are tried:

    * the name of one of the two response fields (exact match);
    * ``1`` / ``2`` (ints, integral floats or numeric strings) for first/second,
      and ``0`` for a tie;
    * ``"A"`` / ``"B"`` and ``"tie"`` (any case, surrounding spaces ignored);
    * the already normal forms ``"first"`` / ``"second"`` (any case).

    Raises:
        ValueError: for anything else (including None and booleans), or when
            ``response_fields`` does not hold exactly two names.
    """
    fields = _response_fields(response_fields)
    if len(fields) != 2:
        raise ValueError(f"pairwise labels need exactly two response fields, got {len(fields)}: {fields!r}")
    if isinstance(value, str) and value in fields:
        return "first" if value == fields[0] else "second"
    number = _as_integer(value)
    if number is not None:
        if number in (0, 1, 2):
            return ("tie", "first", "second")[number]
    elif isinstance(value, str):
        word = value.strip().lower()
        named = {"a": "first", "b": "second", "first": "first", "second": "second", "tie": "tie"}
        if word in named:
            return named[word]
    raise ValueError(f"cannot read {value!r} as a pairwise label: expected 1 or 2 (0 for a tie), "
                     f"'A' or 'B', 'tie', or a response field name ({fields[0]!r} or {fields[1]!r})")


def parse_pointwise_label(value: object) -> float:
    """Read a pointwise gold label (a number, or a numeric string) as a float.

    Raises:
        ValueError: for None, booleans, non-numeric strings, NaN and infinities.
    """
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            number = float(value)
        except OverflowError:  # an integer beyond a float's range
            raise ValueError(f"cannot read an integer of {len(str(value))} digits as a pointwise label: it is out of "
                             "range") from None
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            raise ValueError(f"cannot read {value!r} as a pointwise label: expected a number") from None
    else:
        raise ValueError(f"cannot read {value!r} as a pointwise label: expected a number, got {_kind(value)}")
    if not math.isfinite(number):
        raise ValueError(f"cannot read {value!r} as a pointwise label: it is not a finite number")
    return number


RECORDED_PAIRWISE = ("first", "second", "tie")
_REAL = (int, float)


def recorded_label_problem(label: object, mode: object, scale: object = None) -> str | None:
    """Why a label recorded in a results file or a trace cannot be the one gsr wrote, else None.

    gsr records a pointwise label as the finite number it parsed, inside the line's scale (a label outside
    it is recorded as null, with a `label_error`), and a pairwise one as first, second or tie. Anything else
    ("3", 1e308 on a 1..5 scale, [3], true) was edited in: every command that reads labels back (metrics,
    compare, ablate, report, replay, tune) refuses it with this reason and the line."""
    if label is None:
        return None
    if mode == "pairwise":
        return None if isinstance(label, str) and label in RECORDED_PAIRWISE else \
            f"a pairwise 'label' must be first, second, tie or null; the recorded label is {_shown(label)}"
    if type(label) not in _REAL or not math.isfinite(label):
        return f"the recorded pointwise label {_shown(label)} is not a finite number"
    lo, hi = scale if isinstance(scale, (list, tuple)) and len(scale) == 2 else (None, None)
    if type(lo) in _REAL and type(hi) in _REAL and lo <= hi:  # a malformed scale is the reader's own error
        if not lo <= label <= hi:
            return f"the recorded label {_shown(label)} lies outside the line's scale {lo:g}..{hi:g}"
    elif abs(label) > 1e12:
        return f"the recorded label {_shown(label)} is out of any scale's range"
    return None


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


# --------------------------------------------------------------------------- rows to items


class _RowProblem(Exception):
    """Internal: why one row cannot become an item (message without location)."""


def _field(record: Mapping, name: str) -> object:
    if name in record:  # a key that exists verbatim (most rows): `get_path`'s first rule, without its call
        return record[name]
    try:
        return get_path(record, name)
    except MissingFieldError as error:
        raise _RowProblem(f"missing column {name!r} ({error.detail})") from None


def _as_text(value: object, name: str) -> str:
    """The value of a text column: strings as they are, numbers as text."""
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    raise _RowProblem(f"column {name!r} must be text, got {_kind(value)}")


def _text(record: Mapping, name: str) -> str:
    value = _field(record, name)
    return value if type(value) is str else _as_text(value, name)


def _optional(value: object, empty_is_none: bool) -> object | None:
    return None if empty_is_none and value == "" else value


def _build_item(record: object, columns: ColumnMap, line: int, where: str, fallback_id: str,
                empty_is_none: bool) -> Item | ItemError:
    """Turn one parsed row into an Item, or an ItemError saying what is wrong."""
    item_id: str | None = fallback_id if columns.id_field is None else None
    try:
        if not isinstance(record, dict):
            raise _RowProblem(f"expected a JSON object, got {_kind(record)}")
        if columns.id_field is not None:
            item_id = _text(record, columns.id_field)
        text = _text(record, columns.input_field) if columns.read_input else ""
        read = columns.read_responses
        candidates = tuple([Candidate(letter, _text(record, name) if read else "")
                            for letter, name in zip(_CANDIDATE_IDS, columns.response_fields)])
        reference = None
        if columns.reference_field is not None:
            value = _optional(_field(record, columns.reference_field), empty_is_none)
            if value is not None:
                reference = _as_text(value, columns.reference_field)
        label = None if columns.label_field is None else _optional(_field(record, columns.label_field), empty_is_none)
    except _RowProblem as problem:
        return ItemError(id=item_id, line=line, reason=f"{where}: {problem}")
    assert item_id is not None
    return Item(item_id, line, text, candidates, reference, label, record)


# --------------------------------------------------------------------------- file formats


@attrs.frozen
class Row:
    """One row of a data file, parsed but not yet interpreted (see :func:`read_rows`)."""

    line: int  # the physical line the row starts on (its position, in a .json array)
    where: str  # how messages name it: "line 17" or "item 3"
    default_id: str  # its id when no id column is named: the line (JSONL), row (CSV) or position (.json)
    record: object = None  # the parsed row (a dict when well formed); None when `problem` says why not
    problem: str | None = None
    empty_is_none: bool = False  # CSV: an empty cell means "no value"


def _jsonl_rows(path: Path) -> Iterator[Row]:
    for line, record, problem in jsonl_lines(path):
        yield Row(line, f"line {line}", str(line), record, problem)


def _decoded_lines(handle, problems: dict[int, str]) -> Iterator[str]:
    """Decode a binary file line by line for the CSV reader; what is wrong with a line (bad bytes, too long) goes
    into `problems` by line number, so the row that holds the line becomes a failed row."""
    for line, raw in _physical_lines(handle):
        if raw is None:
            problems[line] = _too_long()
            yield "\n"
            continue
        text, bad_bytes = _decode(raw, line)
        if bad_bytes:
            problems[line] = bad_bytes
        yield text


def _csv_rows(path: Path, required: Sequence[str], delimiter: str) -> Iterator[Row]:
    previous_limit = csv.field_size_limit(_jsonl.MAX_ROW_BYTES)  # Python's default, 131,072, is short for a response
    try:
        yield from _csv_rows_limited(path, required, delimiter)
    finally:
        csv.field_size_limit(previous_limit)


def _csv_rows_limited(path: Path, required: Sequence[str], delimiter: str) -> Iterator[Row]:
    with path.open("rb") as handle:
        line_problems: dict[int, str] = {}
        reader = csv.reader(_decoded_lines(handle, line_problems), delimiter=delimiter)
        header: list[str] | None = None
        row_number = 0
        while True:
            start = reader.line_num + 1  # a quoted cell may span several lines
            problem = None
            try:
                cells = next(reader)
            except StopIteration:
                return
            except csv.Error as error:  # the reader goes on at the next line
                cells, problem = None, str(error)
            found = [(n, line_problems.pop(n)) for n in range(start, reader.line_num + 1) if n in line_problems]
            if found:  # a row that spans lines names the line
                problem = found[0][1] if found[0][0] == start else f"its line {found[0][0]}: {found[0][1]}"
            if header is None:
                if problem is not None:
                    raise DataError(f"{path}: line {start} (the header): {problem}")
                if not cells:  # blank line
                    continue
                header = cells
                if missing := [name for name in required if name not in header]:
                    raise DataError(f"{path}: the header has no column {', '.join(map(repr, missing))} "
                                    f"(columns: {', '.join(header)}); CSV column names must match exactly")
                continue
            if cells == [] and problem is None:  # blank line
                continue
            row_number += 1
            where = f"line {start}"
            if problem is None and len(cells) != len(header):
                problem = f"row has {len(cells)} fields but the header has {len(header)}"
            yield (Row(start, where, str(row_number), problem=problem) if problem is not None else
                   Row(start, where, str(row_number), dict(zip(header, cells)), empty_is_none=True))


def _json_array_rows(path: Path) -> Iterator[Row]:
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as error:
        line = raw.count(b"\n", 0, error.start) + 1
        raise DataError(f"{path}: line {line} is not valid UTF-8 (byte 0x{raw[error.start]:02x})") from None
    try:
        rows = json.loads(text, parse_float=_finite_float)
    except json.JSONDecodeError as error:
        hint = " (a file with one JSON object per line should be named .jsonl)" if error.msg == "Extra data" else ""
        raise DataError(f"{path}: invalid JSON at line {error.lineno} column {error.colno}: "
                        f"{error.msg}{hint}") from None
    except RecursionError:
        raise DataError(f"{path}: JSON nested too deeply to read") from None
    except ValueError as error:
        raise DataError(f"{path}: invalid JSON: {_number_problem(error)}") from None
    if not isinstance(rows, list):
        raise DataError(f"{path}: expected a top-level JSON array of objects, got {_kind(rows)}")
    for position, record in enumerate(rows, start=1):
        problem = f"JSON nested more than {MAX_ROW_DEPTH} levels deep" if _deeper_than(record, MAX_ROW_DEPTH) else None
        yield Row(position, f"item {position}", str(position), None if problem else record, problem)


def _parquet_rows(path: Path) -> Iterator[Row]:
    from gsrlang.files.parquet import ParquetMissing, parquet_records

    try:
        with path.open("rb") as handle:
            for position, record in enumerate(parquet_records(handle), start=1):
                yield Row(position, f"row {position}", str(position), record)
    except (ParquetMissing, ValueError) as error:
        raise DataError(f"{path}: {error}") from None


def _source(path: str | Path):
    """A local Path, or a RemoteFile for a URI (see :mod:`gsrlang.files.storage`)."""
    from gsrlang.files.storage import RemoteFile, is_uri

    return RemoteFile(str(path)) if is_uri(path) else Path(path)


def read_rows(path: str | Path, required_columns: Sequence[str] = ()) -> Iterator[Row]:
    """Stream the rows of a JSONL, CSV/TSV or JSON-array file, parsed but not interpreted.

    The one reader behind :func:`read_items` and the compiler's batch mode. A row that
    cannot be parsed (invalid JSON, a CSV row with the wrong number of fields) is a
    :class:`Row` with a `problem`; a CSV header lacking one of `required_columns`, a
    file that is not UTF-8, or an unreadable file raise :class:`DataError`. `path` may be
    a URI that fsspec or pyarrow opens (``s3://bucket/items.parquet``).
    """
    from gsrlang.files.storage import StorageError

    try:
        return _rows(_source(path), required_columns)
    except StorageError as error:
        raise DataError(str(error)) from None


def _rows(path, required_columns: Sequence[str]) -> Iterator[Row]:
    from gsrlang.files.storage import StorageError

    suffix = path.suffix.lower()
    if suffix not in SUPPORTED_EXTENSIONS:
        raise DataError(f"{path}: unsupported file type {path.suffix or '(no extension)'!r}; "
                        f"supported extensions: {', '.join(SUPPORTED_EXTENSIONS)}")
    if not path.exists():
        raise DataError(f"{path}: no such file")
    if not path.is_file():
        raise DataError(f"{path}: not a regular file")
    if suffix in (".parquet", ".pq"):
        rows = _parquet_rows(path)
    elif suffix in (".jsonl", ".ndjson"):
        rows = _jsonl_rows(path)
    elif suffix in (".csv", ".tsv"):
        rows = _csv_rows(path, tuple(required_columns), "\t" if suffix == ".tsv" else ",")
    else:
        rows = _json_array_rows(path)
    if isinstance(path, Path):
        return rows

    def remote() -> Iterator[Row]:  # a filesystem that fails while the file is read
        try:
            yield from rows
        except StorageError as error:
            raise DataError(str(error)) from None
    return remote()


def read_items(path: str | Path, columns: ColumnMap) -> Iterator[Item | ItemError]:
    """Read the rows of a data file as :class:`Item` or :class:`ItemError`, in order.

    Formats, by extension (case-insensitive):

    * ``.jsonl`` / ``.ndjson``: one JSON object per line, streamed. Blank lines
      are skipped but still counted, so ``line`` is the physical line number.
    * ``.csv`` / ``.tsv``: a header row, then one row per item (comma or tab
      separated), streamed. Every value is a string; an empty label or
      reference cell reads as None. Dotted names match header names verbatim.
    * ``.json``: one top-level array of objects, loaded whole.
    * ``.parquet`` / ``.pq``: one row per item, streamed by record batch (needs
      pyarrow); ``line`` and the default id are the 1-based row number.

    Candidates get ids ``A``, ``B``, ... in the order of
    ``columns.response_fields``. Text columns (input, responses, id,
    reference) must hold strings; numbers are converted to text, while null,
    booleans, objects and arrays make the row an :class:`ItemError`. Labels are
    kept as stored.

    Raises:
        DataError: at once, when the file does not exist or its extension is
            not supported; during iteration, when a line is not valid UTF-8,
            when a CSV header lacks a configured column, when CSV cannot be
            parsed, or when a ``.json`` file is not a valid JSON array.
    """
    return (_item_from_row(row, columns) for row in read_rows(path, columns.required_fields()))


def default_id_field(path: str | Path) -> str | None:
    """The id column a run uses when --id-field is not given: `id` when the data's first well-formed row (a CSV
    file's header) has an `id` column, else None (items are numbered by their line)."""
    return next(("id" if "id" in row.record else None for row in read_rows(path)
                 if row.problem is None and isinstance(row.record, dict)), None)


def id_records(path: str | Path, id_field: str | None = None) -> Iterator[tuple[str, dict]]:
    """(item id, record) of each object row of a data file, the ids as `gsr run` gives them: `id_field`, else
    the data's `id` column when it has one, else the row's position."""
    id_field = default_id_field(path) if id_field is None else id_field
    for row in read_rows(path):
        if isinstance(row.record, dict):
            yield str(row.default_id if id_field is None else row.record.get(id_field)), row.record


def check_columns(path: str | Path, columns: ColumnMap) -> None:
    """Refuse a file whose first row lacks columns the program needs, in one message.

    The first well-formed row (a CSV file's header) stands for the file: when it lacks some
    needed column, every row would fail the same way, so one DataError lists what is needed
    (and what reads it) and what the file has. Later rows missing a column are failed rows.
    """
    needs = columns.needs()
    for row in read_rows(path):
        if row.problem is not None or not isinstance(row.record, dict):
            continue
        missing = []
        for name, what in needs:
            try:
                get_path(row.record, name)
            except MissingFieldError:
                missing.append(f"{name!r} ({what})")
        if missing:
            has = ", ".join(map(str, list(row.record)[:_MAX_LISTED_KEYS])) or "no columns"
            more = f", ... ({len(row.record) - _MAX_LISTED_KEYS} more)" if len(row.record) > _MAX_LISTED_KEYS else ""
            raise DataError(f"{path}: the data lacks columns this run reads: {'; '.join(missing)}. "
                            f"The run reads: {', '.join(n for n, _ in needs)}; the file ({row.where}) has: "
                            f"{has}{more}")
        return


def _item_from_row(row: Row, columns: ColumnMap) -> Item | ItemError:
    if row.problem is not None:
        fallback = row.default_id if columns.id_field is None else None
        return ItemError(id=fallback, line=row.line, reason=f"{row.where}: {row.problem}")
    return _build_item(row.record, columns, row.line, row.where, row.default_id, row.empty_is_none)
