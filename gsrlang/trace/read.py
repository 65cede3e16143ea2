"""Reading traces: every record of a version 1 or 2 file, as stored (`read_records`) or in the logical form
(`read_trace`; see gsrlang.trace.schema)."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from gsrlang.files.dataset import recorded_label_problem
from gsrlang.trace.jsonio import DecodeError, loads
from gsrlang.trace.schema import HEADER, MALFORMED, READABLE_VERSIONS, RUN_SUMMARY, TraceError, judgment_v1, \
    malformed, readout_of_result

__all__ = ["HEADER_LINE", "check_label", "logical_record", "read_records", "read_trace", "record_header"]


def logical_record(header: dict, rec: dict) -> dict:
    """A version 2 item record in the logical (version 1) form, given its header record."""
    nodes = []
    out = rec.get("out")
    if out is not None and header["nodes"]:
        judgments = rec.get("j") or {}
        unknown = rec.get("u") or {}
        for i, base in enumerate(header["nodes"]):
            d = dict(base)
            v = out[i] if i < len(out) else None
            d["output"] = v
            flags = unknown.get(str(i))
            if flags:
                d["unknown"] = flags
            js = judgments.get(base["id"])
            if js is not None:
                d["judgments"] = [judgment_v1(j, v[c] if v is not None and c < len(v) else None)
                                  for c, j in enumerate(js)]
            nodes.append(d)
    result = rec.get("result")
    return {"trace_version": header["trace_version"], "program": header["program"], "mode": rec.get("mode"),
            "item": rec.get("item"), "status": rec.get("status"), "nodes": nodes,
            "readout": readout_of_result(result), "result": result}


def read_records(path: str | Path) -> Iterator[tuple[int, dict | None, dict]]:
    """(line number, header or None, record) for every record of a trace file, as stored.

    Version 1 records come with header None; version 2 item records with their
    header record; header records themselves are not yielded. Raises TraceError."""
    path = Path(path)
    if not path.is_file():
        raise TraceError(f"{path}: no such file")
    headers: dict = {}
    with path.open("rb") as handle:
        for line, raw in enumerate(handle, start=1):
            try:
                record = loads(raw)
            except DecodeError as exc:
                if not raw.strip():  # a blank line (looked for only here: most lines are not)
                    continue
                raise TraceError(f"{path}: line {line} is not a JSON object: {exc}") from None
            header = record_header(path, line, record, headers)
            if header is HEADER_LINE:
                continue
            if header is not None or record.get("kind") != RUN_SUMMARY:
                check_label(path, line, record)
            yield line, header, record


HEADER_LINE = object()  # `record_header` of a header record: kept, not yielded


def record_header(path, line: int, record, headers: dict):
    """The header of the decoded trace record on `line` (None: a version 1 record or the run summary), or
    HEADER_LINE for a header record, which is kept in `headers` (key -> header); raises TraceError for a
    record that is none of these. Its label is not looked at (`check_label`)."""
    if not isinstance(record, dict):
        raise TraceError(f"{path}: line {line} is not a trace record")
    if "p" in record and "trace_version" not in record:
        header = headers.get(record["p"]) if isinstance(record["p"], (int, str)) else None
        if header is None:
            raise TraceError(f"{path}: line {line} names header {record['p']!r}, which no earlier line "
                             "declares (is the file cut or reordered?)")
        return header
    version = record.get("trace_version")
    if version is None:
        raise TraceError(f"{path}: line {line} is not a trace record (no `trace_version`)")
    if version not in READABLE_VERSIONS:
        raise TraceError(f"{path}: line {line} is a version {version} trace record; this gsr reads "
                         f"versions {', '.join(map(str, READABLE_VERSIONS))}")
    if record.get("kind") == HEADER:
        if not isinstance(record.get("nodes"), list) or not isinstance(record.get("program"), dict):
            raise TraceError(f"{path}: line {line} is a header record without `program` and `nodes`")
        headers[record.get("key")] = record
        return HEADER_LINE
    return None


def check_label(path, line: int, record: dict) -> None:
    """Refuse an item record whose recorded label gsr cannot have written (data.recorded_label_problem)."""
    result = record.get("result")
    if type(result) is dict and result.get("label") is not None:
        problem = recorded_label_problem(result["label"], result.get("mode", record.get("mode")), result.get("scale"))
        if problem:
            raise TraceError(f"{path}: line {line}: {problem} (was the file edited?)")


def read_trace(path: str | Path, summaries: bool = False) -> Iterator[tuple[int, dict]]:
    """(line number, record) for every item record of a file (and the run summary with `summaries`),
    in the logical form (the module docstring), whichever version wrote the file.

    Raises TraceError on a malformed line."""
    for line, header, record in read_records(path):
        if header is not None:
            try:
                logical = logical_record(header, record)
            except MALFORMED as exc:
                raise malformed(path, line, exc) from None
            yield line, logical
        elif summaries or record.get("kind") != RUN_SUMMARY:
            yield line, record
