"""Batch buffers in shared memory: observations, rewards, dones and actions of all envs in one block.

The parent creates one anonymous shared block (``memfd_create`` on Linux, an unlinked temporary file
elsewhere), maps it, and passes its file descriptor to each worker over the worker's pipe
(``SCM_RIGHTS``). Nothing has a name, so nothing can leak: the kernel frees the memory when the last
process unmaps it, even after SIGKILL.

Both sides lay the arrays out with the same deterministic allocator over the same spaces, so a worker
finds every array at the offset the parent used, and takes the rows of its envs.
"""

from __future__ import annotations

import errno
import math
import mmap
import os
import tempfile
from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium import spaces

from vecenv.errors import add_note
from vecenv.spaces import create_batch_buffer, is_shareable

__all__ = ["SharedBatch", "SharedFd", "block_error"]

_ALIGN = 64  # one cache line: no two arrays share one


class _BumpAllocator:
    """Hands out consecutive, aligned, zeroed arrays from a buffer (or only counts bytes when ``buffer`` is None)."""

    def __init__(self, buffer: Any = None) -> None:
        self.buffer = buffer
        self.offset = 0

    def align(self, boundary: int) -> None:
        """Start the next array at a multiple of ``boundary`` bytes."""
        self.offset = -(-self.offset // boundary) * boundary

    def __call__(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        self.offset = -(-self.offset // _ALIGN) * _ALIGN
        count = math.prod(shape)
        nbytes = count * dtype.itemsize
        if self.buffer is None:
            array = np.zeros(shape, dtype=dtype)
        else:
            array = np.frombuffer(self.buffer, dtype=dtype, count=count, offset=self.offset).reshape(shape)
        self.offset += nbytes
        return array


def _anonymous_fd(size: int) -> int:
    """A descriptor of ``size`` bytes of memory that no name reaches: ``memfd_create``, else (macOS, or a sandbox
    that refuses the call: seccomp, some container runtimes) a temporary file unlinked at once, in ``/dev/shm``
    where there is one."""
    fd = -1
    if hasattr(os, "memfd_create"):
        try:
            fd = os.memfd_create("vecenv-batch", os.MFD_CLOEXEC)
        except OSError as exc:
            if exc.errno not in (errno.ENOSYS, errno.EPERM, errno.EACCES, errno.EINVAL):
                raise
    in_file = fd < 0
    if in_file:
        fd, path = tempfile.mkstemp(prefix="vecenv-batch-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
        os.unlink(path)
    try:
        os.ftruncate(fd, max(size, 1))
        if in_file and hasattr(os, "posix_fallocate"):  # (a file system that is full fails here, not later with
            os.posix_fallocate(fd, 0, max(size, 1))  # SIGBUS in whichever process first writes past its space)
    except BaseException:  # (ENOMEM, ENOSPC, a Ctrl-C: the block is nobody's yet)
        os.close(fd)
        raise
    return fd


@dataclass
class SharedBatch:
    """The batch buffers of ``num_envs`` envs in one shared block.

    :ivar obs: observation batch buffer, ``(num_envs, *obs_shape)`` arrays (dict / tuple for Dict / Tuple).
    :ivar rewards: ``(num_envs,)``, float32 (SB3's dtype) or float64 (Gymnasium's), as created.
    :ivar dones: bool ``(num_envs,)``.
    :ivar terminations: bool ``(num_envs,)``: the ``terminated`` flag of each env's last step.
    :ivar truncations: bool ``(num_envs,)``: the ``truncated`` flag of each env's last step.
    :ivar terminal_obs: batch buffer of the observation space (as ``obs``) for the last observation of finished
        episodes; None when observations cannot live in shared memory (terminal observations then travel
        pickled in the infos, as do those that do not fit a row exactly: see :func:`vecenv.spaces.make_row_writer`).
    :ivar actions: action batch buffer ``(num_envs, *action_shape)``, or None if the action space cannot
        live in shared memory (actions then travel pickled).
    :ivar signals: int64 ``(num_envs, 8)``, one 64-byte line per env: the worker process whose first env is
        ``i`` and the calling process count their messages in row ``i`` (:mod:`vecenv.workers.spin`).
    :ivar obs_slots: every observation slot (:mod:`vecenv.engine.obs_slots`), ``obs`` first; just ``[obs]``
        when the block was made with fewer than 2 slots. Each slot starts on a page boundary and its arrays follow
        each other, so a slot can be page-locked for a GPU (``cudaHostRegister``) where it lives.
    :ivar obs_slot: int64 ``(1,)``: the slot the workers write observations into now (set by the calling
        process before its requests; read by the workers as each request arrives).
    """

    observation_space: spaces.Space
    action_space: spaces.Space
    num_envs: int
    size: int
    mapping: mmap.mmap
    obs: Any
    rewards: np.ndarray
    dones: np.ndarray
    terminations: np.ndarray
    truncations: np.ndarray
    terminal_obs: Any
    actions: Any
    signals: np.ndarray
    obs_slots: list[Any]
    obs_slot: np.ndarray

    @staticmethod
    def _layout(
        observation_space: spaces.Space,
        action_space: spaces.Space,
        num_envs: int,
        buffer: Any,
        rewards_dtype: Any,
        obs_slots: int,
    ) -> tuple[dict[str, Any], int]:
        """The block's arrays over ``buffer`` (zeroed arrays of their own if None), by field name, and the bytes
        they take."""
        alloc = _BumpAllocator(buffer)
        obs = create_batch_buffer(observation_space, num_envs, alloc)
        arrays: dict[str, Any] = {"obs": obs, "rewards": alloc((num_envs,), np.dtype(rewards_dtype))}
        for name in ("dones", "terminations", "truncations"):
            arrays[name] = alloc((num_envs,), np.dtype(bool))
        arrays["terminal_obs"] = create_batch_buffer(observation_space, num_envs, alloc) if is_shareable(obs) else None
        actions = create_batch_buffer(action_space, num_envs, alloc)
        arrays["actions"] = actions if is_shareable(actions) else None
        arrays["signals"] = alloc((num_envs, _ALIGN // 8), np.dtype(np.int64))
        slots = [obs]
        for _ in range(obs_slots - 1):
            alloc.align(mmap.PAGESIZE)  # each slot starts a page (the first is at 0): ready to be page-locked
            slots.append(create_batch_buffer(observation_space, num_envs, alloc))
        arrays["obs_slots"] = slots
        arrays["obs_slot"] = alloc((1,), np.dtype(np.int64))
        return arrays, alloc.offset

    @staticmethod
    def supports(observation_space: spaces.Space) -> bool:
        """Whether observations of ``observation_space`` can live in shared memory (fixed-size dtypes only)."""
        return is_shareable(create_batch_buffer(observation_space, 1))

    @classmethod
    def create(
        cls,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        num_envs: int,
        rewards_dtype: Any = np.float32,
        obs_slots: int = 1,
    ) -> tuple[SharedBatch, int]:
        """Allocate a new shared block (parent side).

        :param rewards_dtype: dtype of :attr:`rewards` (workers must attach with the same one).
        :param obs_slots: how many observation buffers the block holds (workers must attach with the same number).
        :return: the batch and the file descriptor to pass to workers (close it once they have it).
        """
        _, size = cls._layout(observation_space, action_space, num_envs, None, rewards_dtype, obs_slots)
        try:
            fd = _anonymous_fd(size)
            try:
                return cls.attach(observation_space, action_space, num_envs, fd, size, rewards_dtype, obs_slots), fd
            except BaseException:  # (the mapping failed or was interrupted: the block is nobody's yet)
                os.close(fd)
                raise
        except OSError as exc:
            if exc.errno not in _NO_ROOM:
                raise
            _, one_slot = cls._layout(observation_space, action_space, num_envs, None, rewards_dtype, 1)
            raise block_error(exc, size, num_envs, obs_slots, one_slot) from exc

    @classmethod
    def attach(
        cls,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        num_envs: int,
        fd: int,
        size: int,
        rewards_dtype: Any = np.float32,
        obs_slots: int = 1,
    ) -> SharedBatch:
        """Map the block behind ``fd`` (either side); ``fd`` stays open and is the caller's to close."""
        mapping = mmap.mmap(fd, max(size, 1))
        arrays, used = cls._layout(observation_space, action_space, num_envs, mapping, rewards_dtype, obs_slots)
        if used != size:
            raise RuntimeError(f"shared batch layout mismatch: {used} bytes laid out, {size} expected")
        return cls(observation_space, action_space, num_envs, size, mapping, **arrays)


#: the errors of a block that does not fit: out of memory, or of space in the file system holding it
_NO_ROOM = (errno.ENOMEM, errno.ENOSPC)


def block_error(exc: OSError, size: int, num_envs: int, obs_slots: int, one_slot: int | None = None) -> MemoryError:
    """The error for a shared block of ``size`` bytes that did not fit (``exc``: ENOMEM or ENOSPC): a ``MemoryError``
    naming its size (as NumPy's for an array too large), with a note on what the block holds and what needs less
    (``one_slot``: its size with one observation buffer)."""
    mib = size / 2**20
    smaller = f" (about {one_slot / 2**20:.1f} MiB)" if one_slot is not None and one_slot < size else ""
    note = (
        f"vecenv: the shared block of {mib:.1f} MiB for the batches of {num_envs} envs ({obs_slots} observation "
        f"buffer(s), the ended episodes' last observations, actions, rewards and flags) could not be "
        f"{'mapped' if one_slot is None else 'made'}. Needing less: obs_slots=1{smaller}, fewer envs or smaller "
        "observations, or shared_memory=False (everything pickled through the pipes); or raise the process's "
        "memory limit (ulimit -v, the container's, or the size of /dev/shm where memfd_create is refused)."
    )
    error = MemoryError(f"Unable to allocate {mib:.1f} MiB of shared memory: {exc.strerror}")
    add_note(error, note)
    return error


class SharedFd:
    """The shared block's file descriptor, kept open so restarted workers can map the block; closed once."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def close(self) -> None:
        fd, self.fd = self.fd, -1  # (forgotten first: a Ctrl-C after os.close must not close the number again)
        if fd >= 0:
            os.close(fd)
