"""Data files on any filesystem: local paths, and URIs (``s3://``, ``gs://``, ``hdfs://``, ``memory://``, ...).

A URI is opened through fsspec when it is installed (it knows the most filesystems, given
their own packages: s3fs, gcsfs, ...), else through pyarrow's filesystems. Neither is part
of the core install (``pip install gsrlang[parquet]`` or ``gsrlang[ray]`` brings both); a
local path needs neither. :class:`RemoteFile` has the few methods of ``pathlib.Path`` the
readers use, so they read a URI as they read a local file.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from urllib.parse import urlparse

__all__ = ["RemoteFile", "StorageError", "is_uri"]

_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]+://")  # two letters at least: `C:/x` is a Windows path


class StorageError(OSError):
    """A URI cannot be opened (no filesystem for it, or the filesystem failed); the message names it.

    The data readers turn it into a `DataError`."""


def is_uri(path: object) -> bool:
    return isinstance(path, str) and bool(_SCHEME.match(path))


class RemoteFile:
    """A file named by a URI, read-only: ``open("rb")``, ``exists()``, ``is_file()``, ``read_bytes()``."""

    def __init__(self, uri: str):
        self.uri = uri
        self.name = PurePosixPath(urlparse(uri).path).name
        self.suffix = PurePosixPath(self.name).suffix
        self._fs, self._path = _filesystem(uri)

    def __str__(self) -> str:
        return self.uri

    def open(self, mode: str = "rb"):
        try:
            return self._fs.open(self._path, mode)
        except Exception as exc:  # each filesystem has its own errors
            raise StorageError(f"{self.uri}: cannot open: {exc}") from None

    def exists(self) -> bool:
        return self._info() is not None

    def is_file(self) -> bool:
        info = self._info()
        return info is not None and info.get("type") == "file"

    def read_bytes(self) -> bytes:
        with self.open("rb") as handle:
            return handle.read()

    def _info(self) -> dict | None:
        try:
            return self._fs.info(self._path)
        except FileNotFoundError:
            return None
        except Exception as exc:
            raise StorageError(f"{self.uri}: cannot read: {exc}") from None


def _filesystem(uri: str):
    """(an fsspec-style filesystem, the path within it)."""
    try:
        import fsspec
    except ImportError:
        fsspec = None
    try:
        if fsspec is not None:
            return fsspec.core.url_to_fs(uri)
        try:
            from pyarrow import fs as pafs
        except ImportError:
            raise StorageError(f"{uri}: reading a URI needs fsspec or pyarrow (pip install gsrlang[parquet])") \
                from None
        arrow, path = pafs.FileSystem.from_uri(uri)
        return _ArrowFS(arrow), path
    except StorageError:
        raise
    except Exception as exc:  # an unknown protocol, a filesystem package that is missing, ...
        raise StorageError(f"{uri}: cannot open this filesystem: {exc}") from None


class _ArrowFS:
    """pyarrow's filesystem with fsspec's `open` / `info`, for when fsspec is not installed."""

    def __init__(self, fs):
        self.fs = fs

    def open(self, path: str, mode: str = "rb"):
        return self.fs.open_input_file(path)

    def info(self, path: str) -> dict:
        from pyarrow import fs as pafs

        info = self.fs.get_file_info(path)
        if info.type == pafs.FileType.NotFound:
            raise FileNotFoundError(path)
        return {"type": "file" if info.type == pafs.FileType.File else "directory"}
