"""Writes that cannot destroy input: output paths checked against inputs, whole files replaced atomically.

Every command that writes a file calls :func:`check_outputs` with the paths it reads and
the paths it will write, before it opens anything for writing. Two paths are the same
file when they resolve to the same path (symlinks followed) or, when both exist, when
they are the same inode on the same device (hard links). A clash raises
:class:`PathClash` (the CLI prints its one line and exits 2), so `--out data.jsonl`
never truncates the data it was about to read, and `--out x --trace x` never
interleaves two files.

Whole-file writes (formatted sources, exported JSON, pictures, compiled programs,
reports) go through :func:`write_atomic`: a temporary file in the target's folder,
flushed to disk, then ``os.replace`` over the target, so a reader (or a crash) sees
the old file or the new one, never half of one.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path
from typing import Iterable

__all__ = ["PathClash", "atomic_file", "check_outputs", "check_work_dir", "machine_error", "same_file", "write_atomic"]

Named = tuple[str, "str | os.PathLike | None"]  # (what it is, e.g. "--data", path); a None or "-" path is skipped


class PathClash(ValueError):
    """An output path is an input of the same command, or another of its outputs."""


def _identity(path: str | os.PathLike) -> tuple[str, tuple[int, int] | None]:
    """The resolved path, and (device, inode) when the file exists."""
    resolved = os.path.realpath(os.fspath(path))
    try:
        st = os.stat(resolved)
    except OSError:  # not there yet (an output), or unreadable: the path alone decides
        return resolved, None
    return resolved, (st.st_dev, st.st_ino)


def same_file(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """True when `a` and `b` name one file: the same resolved path, or the same inode (a hard link)."""
    return _clash(_identity(a), _identity(b))


def _named(paths: Iterable[Named]) -> list[tuple[str, str, tuple]]:
    return [(what, os.fspath(p), _identity(p)) for what, p in paths if p is not None and os.fspath(p) != "-"]


def check_outputs(inputs: Iterable[Named], outputs: Iterable[Named]) -> None:
    """Raise PathClash when an output is one of the inputs or another output (see the module docstring)."""
    ins, outs = _named(inputs), _named(outputs)
    for i, (what, path, ident) in enumerate(outs):
        for others, why in ((ins, "refusing to overwrite an input"), (outs[:i], "two outputs cannot share a file")):
            for other_what, other_path, other in others:
                if _clash(ident, other):
                    raise PathClash(f"{what} `{path}` is the same file as {other_what} `{other_path}`: {why}; "
                                    "nothing was written")


def check_work_dir(what: str, folder: str | os.PathLike, inputs: Iterable[Named], outputs: Iterable[Named]) -> None:
    """Raise PathClash when a work folder a command will make, fill and then empty is, holds, or lies inside
    one of its inputs or outputs (a file in it could be taken for one of its own and removed).

    The folder's resolved path is compared with each named path (the same path, the same inode, or
    one below the other), so `--work-dir .` is safe only because the command makes a subfolder of
    its own in it, and that subfolder is what is checked here."""
    folder_path, folder_id = _identity(folder)
    for other_what, other_path, (resolved, ident) in _named(list(inputs) + list(outputs)):
        inside = resolved.startswith(folder_path.rstrip(os.sep) + os.sep)
        around = folder_path.startswith(resolved.rstrip(os.sep) + os.sep)
        if resolved == folder_path or (ident is not None and ident == folder_id) or inside or around:
            relation = "holds" if inside else "lies inside" if around else "is"
            raise PathClash(f"{what} `{os.fspath(folder)}` {relation} {other_what} "
                            f"`{other_path}`: the work folder is gsr's own, emptied when the run ends; "
                            "choose another; nothing was written")


def _clash(a: tuple, b: tuple) -> bool:
    return a[0] == b[0] or (a[1] is not None and a[1] == b[1])


def write_atomic(path: str | os.PathLike, data: str | bytes, encoding: str = "utf-8", newline: str | None = None,
                 ) -> None:
    """Replace `path` with `data` all at once (`atomic_file`). `newline` as for open(): None translates
    "\\n" to the platform's line ending, "" writes the text as it is."""
    if isinstance(data, str):
        if newline is None and os.linesep != "\n":
            data = data.replace("\n", os.linesep)
        data = data.encode(encoding)
    with atomic_file(path) as handle:
        handle.write(data)


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike):
    """A binary file to write whose bytes replace `path` all at once when the block ends without an error (a
    temporary file in the same folder, fsync, os.replace), and are removed when it raises: `path` is then as
    it was. A symlink is written through (its target is replaced, the link stays); an existing file keeps its
    permission bits; a pipe or a device is written to as it is. An OSError in writing names `path` (a full
    disk says which file it could not write)."""
    try:
        st = os.stat(path)  # (through links: /dev/stdout is a link to a pipe, say)
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):  # a pipe or a device: written as it is
        with open(path, "wb") as handle:
            yield handle
        return
    target = Path(os.path.realpath(os.fspath(path)))
    target.parent.mkdir(parents=True, exist_ok=True)
    if st is not None:
        mode = st.st_mode & 0o7777
    else:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    import tempfile  # here, not at the top: the CLI imports this module on every start (PathClash)

    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and exc.filename in (None, tmp):
            exc.filename = os.fspath(path)
        raise


# errors of the machine's state, not of gsr: a full disk or quota, a file too large, a read-only file system
_DISK = {errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is used up",
         errno.EFBIG: "the file is too large for its file system", errno.EROFS: "the file system is read-only",
         errno.EIO: "the disk failed to read or write"}
# errors of a path as given: what it names is missing, of the other kind, or closed to this user
_PATH = {errno.ENOENT: "no such file or folder", errno.ENOTDIR: "a part of this path is a file, not a folder",
         errno.EISDIR: "this is a folder, not a file", errno.EEXIST: "a file is in the way of this folder",
         errno.EACCES: "permission denied", errno.EPERM: "operation not permitted",
         errno.ENAMETOOLONG: "the name is too long", errno.ELOOP: "too many levels of symbolic links"}


def machine_error(exc: BaseException) -> str | None:
    """The one-line message for an OSError that says the disk cannot take a write (ENOSPC, EDQUOT, EFBIG,
    EROFS, EIO), naming the file when the error does, or that a path the user gave cannot be opened as asked
    (a folder that is missing or is a file, a file that is a folder, no permission), naming it; None for any
    other exception."""
    if isinstance(exc, OSError) and exc.errno in _PATH and exc.filename:
        return f"`{exc.filename}`: {_PATH[exc.errno]}"
    if not isinstance(exc, OSError) or exc.errno not in _DISK:
        return None
    where = f" writing `{exc.filename}`" if exc.filename else ""
    return (f"{exc.strerror or _DISK[exc.errno]}{where}: {_DISK[exc.errno]}; whole files gsr writes are replaced "
            "atomically, so each is the old one or absent (a results or trace file being streamed stops where "
            "the disk did, without its completion line)")
