"""Atomic file replacement: a reader sees the previous file or the complete new one, never a partial write.

Used by :meth:`VecNormalize.save <vecenv.VecNormalize.save>` and by :func:`~vecenv.plot_results`.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from typing import IO

__all__ = ["atomic_write_bytes"]


def _write_payload(file: IO[bytes], data: bytes) -> None:
    """Write all of ``data`` to ``file`` (a seam for the crash tests)."""
    file.write(data)


def _new_file_mode(path: str) -> int:
    """Permissions for the written file: those of the file it replaces, else what ``open()`` would give."""
    with contextlib.suppress(OSError):
        return os.stat(path).st_mode & 0o777
    umask = os.umask(0o022)
    os.umask(umask)
    return 0o666 & ~umask


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Replace the file at ``path`` by ``data`` atomically.

    The bytes go to a temporary file in the same folder, which is flushed, fsynced and then renamed
    over ``path`` with :func:`os.replace`. If anything fails the temporary file is removed and the
    previous file at ``path`` (if any) is left untouched. The new file gets the permissions of the
    file it replaces, or those :func:`open` would give a new file. A symbolic link is written through,
    as ``open(path, "wb")`` would: the file it points to is replaced, and the link stays. A path that is
    not a regular file (``/dev/null``, a named pipe) is written in place, as ``open(path, "wb")`` would,
    never replaced.

    :param path: the destination (``str``, ``bytes`` or :class:`os.PathLike`); its folder must exist and be
        writable (the temporary file is created there).
    :param data: the full file content.
    :raises OSError: if the file cannot be written (any previous file is left unchanged); its ``filename`` is
        ``path``, and its message says why where the cause is the temporary file.
    """
    given = os.fsdecode(path)
    if not given or given.endswith((os.sep, "/")):  # (realpath would drop the separator: refuse as open() does)
        raise IsADirectoryError(errno.EISDIR, f"cannot write {given!r}: a file name is needed", given)
    path = os.path.realpath(given)  # (through symbolic links, to the file they point to)
    try:
        mode: int | None = os.stat(path).st_mode
    except OSError:  # (no such file yet)
        mode = None
    if mode is not None and not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
        with open(path, "wb") as device:  # a device, a pipe: written in place, never replaced
            _write_payload(device, data)
        return
    directory = os.path.dirname(path)
    try:
        fd, tmp_path = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        why = "its folder does not exist" if not os.path.isdir(directory) else "its folder is not writable"
        raise type(exc)(
            exc.errno,
            f"cannot write {given!r}: {why} (the file is written to a temporary file in {directory!r}, then renamed "
            f"over it, so that it is never left half written): {exc.strerror}",
            given,
        ) from exc
    try:
        with os.fdopen(fd, "wb") as file:
            _write_payload(file, data)
            file.flush()
            os.fsync(file.fileno())
        os.chmod(tmp_path, _new_file_mode(path))
        os.replace(tmp_path, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp_path)
        if isinstance(exc, OSError) and exc.filename == tmp_path:
            raise type(exc)(exc.errno, f"cannot write {given!r}: {exc.strerror}", given) from exc
        raise
    # make the rename itself durable (not possible on every platform / file system)
    with contextlib.suppress(OSError):
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
