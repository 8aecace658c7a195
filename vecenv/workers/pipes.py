"""The worker pipes' framing: ``multiprocessing.Connection``'s (a 4-byte big-endian length, or -1 and an 8-byte
length for messages over 2 GiB, then the bytes), so its ``recv_bytes`` / ``send_bytes`` interoperate, read with
:func:`read_message`, which gets a 1-byte message (every step request and most replies) in a single ``read(2)``,
or with :func:`read_reply` where nothing can follow the message."""

from __future__ import annotations

import importlib
import os
import signal
import struct
from collections.abc import Callable
from typing import Any, TypeVar

from vecenv.workers.messages import STEP_SHARED_MESSAGE

__all__ = [
    "STEP_SHARED_FRAME",
    "frame",
    "read_message",
    "read_reply",
    "sigpipe_kills",
    "without_sigpipe",
    "write_message",
]

R = TypeVar("R")

_SIGPIPE = signal.SIGPIPE
#: the C function (``signal.getsignal`` converts its result to an enum member: slower)
_getsignal: Callable[[int], Any] = importlib.import_module("_signal").getsignal


def sigpipe_kills() -> bool:
    """Whether a write to a pipe whose reader is gone (a dead worker's) would end this process: SIGPIPE's default
    action, which a program restores (``signal.signal(SIGPIPE, SIG_DFL)``) to end quietly when its output is
    closed (``| head``); Python itself ignores SIGPIPE, and such a write raises ``BrokenPipeError``."""
    return bool(_getsignal(_SIGPIPE) == signal.SIG_DFL)


def without_sigpipe(function: Callable[[], R]) -> R:
    """Run ``function`` (which writes to worker pipes); where SIGPIPE is at its default action
    (:func:`sigpipe_kills`), with SIGPIPE blocked in this thread, dropping the SIGPIPE its writes raised: a write to
    a dead worker's pipe then raises ``BrokenPipeError``, which vecenv reports as the worker's death, instead of
    ending the process."""
    if not sigpipe_kills():
        return function()
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {_SIGPIPE})
    try:
        return function()
    finally:
        if _SIGPIPE not in previous:
            while _SIGPIPE in signal.sigpending():
                signal.sigtimedwait({_SIGPIPE}, 0)
            signal.pthread_sigmask(signal.SIG_SETMASK, previous)


_SIZE = struct.Struct("!i")
_BIG_SIZE = struct.Struct("!Q")
_ONE_BYTE_HEADER = _SIZE.pack(1)
#: the framed STEP request of every env with shared actions (the common request), built once
STEP_SHARED_FRAME = _ONE_BYTE_HEADER + STEP_SHARED_MESSAGE


def _read_exactly(fd: int, size: int) -> bytes:
    data = os.read(fd, size)
    if len(data) == size:
        return data
    if not data:
        raise EOFError
    chunks = [data]
    remaining = size - len(data)
    while remaining:
        chunk = os.read(fd, remaining)
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def _rest_of_message(fd: int, data: bytes) -> bytes:
    """The body of the framed message whose first bytes are ``data`` (the first read of it, possibly short of
    its header), reading the rest from ``fd``.

    :raises EOFError: if the pipe's other end is closed.
    :raises RuntimeError: if ``data`` runs past the message (the pipe held a second one).
    """
    if not data:
        raise EOFError
    if len(data) < _SIZE.size:
        data += _read_exactly(fd, _SIZE.size - len(data))
    (size,), start = _SIZE.unpack_from(data), _SIZE.size
    if size == -1:
        big = _SIZE.size + _BIG_SIZE.size
        if len(data) < big:
            data += _read_exactly(fd, big - len(data))
        (size,), start = _BIG_SIZE.unpack_from(data, _SIZE.size), big
    body = data[start:]
    if len(body) > size:
        raise RuntimeError("vecenv: a worker's reply pipe held more than the reply to the request in flight")
    return body + _read_exactly(fd, size - len(body)) if len(body) < size else body


def read_message(fd: int) -> bytes:
    """Read one framed message from a pipe; a 1-byte message (every step request and most replies) costs
    one ``read(2)`` where ``Connection.recv_bytes`` makes two. Never reads past the message, which is why
    messages are never empty (:func:`frame` refuses them): the first read asks for a header and one byte.

    :raises EOFError: if the pipe's other end is closed.
    """
    head = os.read(fd, 5)
    if head[:4] == _ONE_BYTE_HEADER and len(head) == 5:
        return head[4:]
    return _rest_of_message(fd, head)


#: how many bytes :func:`read_reply` asks for at once: a header and a reply of a step's infos fit
_REPLY_CHUNK = 4096


def read_reply(fd: int) -> bytes:
    """Read one framed message from a pipe that holds nothing after it, the reply to the only request in flight
    (:class:`~vecenv.workers.common_step.CommonStep`): a message of up to 4 KiB, header included, costs one
    ``read(2)`` where :func:`read_message` makes two.

    :raises EOFError: if the pipe's other end is closed.
    :raises RuntimeError: if the pipe held more than one message (a request had two replies).
    """
    data = os.read(fd, _REPLY_CHUNK)
    if len(data) > 4 and _SIZE.unpack_from(data)[0] == len(data) - 4:  # the whole message
        return data[4:]
    return _rest_of_message(fd, data)


def frame(data: bytes) -> bytes:
    """``data`` with its length header (see :func:`read_message`).

    :raises ValueError: if ``data`` is empty (every message of the protocol has at least a status byte).
    """
    if not data:
        raise ValueError("worker pipe messages are never empty")
    if len(data) > 0x7FFFFFFF:
        return _SIZE.pack(-1) + _BIG_SIZE.pack(len(data)) + data
    return _SIZE.pack(len(data)) + data


def write_message(fd: int, data: bytes) -> None:
    """Write ``frame(data)`` to a pipe (all of it: large messages take several ``write(2)`` calls)."""
    view = memoryview(frame(data))
    while view:
        view = view[os.write(fd, view) :]
