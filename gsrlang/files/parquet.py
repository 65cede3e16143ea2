"""Parquet in and out, through pyarrow (an optional extra: ``pip install gsrlang[parquet]``).

Reading: :func:`parquet_records` streams a file's rows as dicts (nested structs become
dicts, lists lists), one record batch at a time, so memory stays flat.

Writing: :class:`ResultsParquet` writes the results lines of a run (the same fields as
``results.jsonl``, see :mod:`gsrlang.trace.schema`) with a fixed schema, in row groups
of `rows_per_group`, so a run of millions of items is read back by any Parquet tool
without parsing JSON. Columns: ``id``, ``line``, ``status``, ``mode``, ``program``
(per-item programs: name/hash/path), ``score``, ``raw`` (float64; pointwise), ``scale``
(list of two floats), ``winner`` (pairwise), ``sink`` (JSON text: the sink value per
candidate, which may be an abstention or a non-finite number), ``label`` (float64
pointwise, text pairwise), ``label_error`` and ``reason``. A field a line lacks is null.
"""

from __future__ import annotations

import json
from typing import Iterator

__all__ = ["ParquetMissing", "ResultsParquet", "is_parquet", "parquet_records", "pyarrow_parquet"]


class ParquetMissing(ImportError):
    """pyarrow is not installed."""


def pyarrow_parquet():
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise ParquetMissing("Parquet files need pyarrow: pip install gsrlang[parquet]") from None
    return pq


def is_parquet(path: object) -> bool:
    return isinstance(path, str) and path.lower().endswith((".parquet", ".pq"))


def parquet_records(handle, batch_rows: int = 4096) -> Iterator[dict]:
    """The rows of an open Parquet file, as dicts. Raises ValueError when it is not a Parquet file."""
    pq = pyarrow_parquet()
    import pyarrow as pa

    try:
        for batch in pq.ParquetFile(handle).iter_batches(batch_size=batch_rows):
            yield from batch.to_pylist()
    except (pa.ArrowException, OSError) as exc:
        raise ValueError(f"not a readable Parquet file ({exc})") from None


def _schema(mode: str):
    import pyarrow as pa

    text, real = pa.string(), pa.float64()
    return pa.schema([
        ("id", text), ("line", pa.int64()), ("status", text), ("mode", text),
        ("program", pa.struct([("name", text), ("hash", text), ("path", text)])),
        ("score", real), ("raw", real), ("scale", pa.list_(real)), ("winner", text), ("sink", text),
        ("label", real if mode == "pointwise" else text), ("label_error", text), ("reason", text),
    ])


class ResultsParquet:
    """Writes result lines (dicts) to a Parquet file: ``write(line)``, then ``close()``."""

    def __init__(self, path: str, mode: str, rows_per_group: int = 65536):
        pq = pyarrow_parquet()
        self.schema = _schema(mode)
        self.rows_per_group = rows_per_group
        self.name = path
        self._rows: list[dict] = []
        self._writer = pq.ParquetWriter(path, self.schema)

    def write(self, line: dict) -> None:
        row = dict(line)
        row["sink"] = None if line.get("sink") is None else json.dumps(line["sink"], ensure_ascii=False)
        if isinstance(row.get("score"), bool):  # not expected, but never let a bool pass as a number silently
            row["score"] = float(row["score"])
        self._rows.append(row)
        if len(self._rows) >= self.rows_per_group:
            self._flush()

    def _flush(self) -> None:
        import pyarrow as pa

        if self._rows:
            self._writer.write_table(pa.Table.from_pylist(self._rows, schema=self.schema))
            self._rows = []

    def close(self) -> None:
        self._flush()
        self._writer.close()
