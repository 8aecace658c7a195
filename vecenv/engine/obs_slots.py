"""Observation batches handed to the caller without a copy: a small pool of batch buffers ("slots").

A vector env's envs write each step's observations into one slot, and ``step()`` / ``reset()`` return arrays
backed by that slot instead of a copy of it. The caller keeps those arrays as long as it likes (SB3's
``_last_obs``, ``VecNormalize.old_obs``, a list of observations): a slot is never written while any array
that shares its memory is alive. The next write goes to a free slot.

How a slot knows it is still referenced: each hand-out creates one :class:`_Lease`, and each returned array is
built over a small :class:`_SlotArray` that exposes the slot's memory through ``__array_interface__`` and holds
the lease. numpy makes that object the array's ``base``; every view, slice or ``memoryview`` of the array keeps
the array (and so the lease) alive. When the last of them is gone, the lease's ``__del__`` marks the slot free.
That runs wherever Python drops the last reference (any thread, any point of the caller's code); it only
decrements a counter, which is all the pool reads.

Bounded memory: one slot always stays free for the next write. When handing out the current slot would leave
none free (the caller keeps every batch), the hand-out is a copy instead (counted as ``obs_copied`` in
``step_stats()``), exactly what every step returned before slots existed.

A write that covers only some envs (a partial reset, a restart, results held after a failure) needs the other
envs' rows too: if the current slot is handed out, they are copied to the new slot first (rare paths only).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from gymnasium import spaces

from vecenv.spaces import batch_assign, batch_copy, create_batch_buffer, is_shareable

__all__ = ["MAX_OBS_SLOTS", "MAX_OBS_SLOT_BYTES", "MIN_OBS_SLOT_BATCH_BYTES", "ObsSlots", "default_obs_slots"]

#: batches smaller than this are copied (no slots): a copy of a few KiB costs less than the slots' bookkeeping
#: (switching slots, building the arrays: a few microseconds a step)
MIN_OBS_SLOT_BATCH_BYTES = 64 * 2**10
#: at most this many slots...
MAX_OBS_SLOTS = 4
#: ... and at most this many bytes in all slots together (the batch buffer times the number of slots)
MAX_OBS_SLOT_BYTES = 256 * 2**20


def _nbytes(buffer: Any) -> int:
    if isinstance(buffer, np.ndarray):
        return int(buffer.nbytes)
    values = buffer.values() if isinstance(buffer, dict) else buffer
    return sum(_nbytes(value) for value in values)


def default_obs_slots(observation_space: spaces.Space, num_envs: int) -> int:
    """How many slots a vector env of ``num_envs`` envs of ``observation_space`` uses by default: up to
    :data:`MAX_OBS_SLOTS` within :data:`MAX_OBS_SLOT_BYTES` in all; 0 (copies, no slots) for a batch under
    :data:`MIN_OBS_SLOT_BATCH_BYTES`, when fewer than 2 fit, or when the batch holds Python objects (spaces
    without a fixed-size dtype)."""
    one = create_batch_buffer(observation_space, 1)
    if not is_shareable(one):
        return 0
    size = max(1, _nbytes(one) * num_envs)
    if size < MIN_OBS_SLOT_BATCH_BYTES:
        return 0
    slots = min(MAX_OBS_SLOTS, MAX_OBS_SLOT_BYTES // size)
    return slots if slots >= 2 else 0


class _Lease:
    """One hand-out of slot ``index``: decrements its count of live hand-outs when the last array built on it
    is gone."""

    __slots__ = ("_held", "_index")

    def __init__(self, held: list[int], index: int) -> None:
        self._held = held
        self._index = index
        held[index] += 1

    def __del__(self) -> None:
        self._held[self._index] -= 1


class _SlotArray:
    """Exposes one array of a slot to ``np.asarray`` and becomes the returned array's ``base``: it holds the
    lease and the slot's array (which keeps the memory mapped, also after the vector env is closed)."""

    __slots__ = ("__array_interface__", "_array", "_lease")

    def __init__(self, interface: dict[str, Any], array: np.ndarray, lease: _Lease) -> None:
        self.__array_interface__ = interface
        self._array = array
        self._lease = lease


def _hand_out_builder(buffer: Any) -> Callable[[_Lease], Any]:
    """A function that returns arrays over ``buffer``'s memory (same structure: array, dict, tuple), all holding
    one lease."""
    if isinstance(buffer, np.ndarray):
        interface = dict(buffer.__array_interface__)

        def leaf(lease: _Lease) -> Any:
            return np.asarray(_SlotArray(interface, buffer, lease))

        return leaf
    if isinstance(buffer, dict):
        parts = {key: _hand_out_builder(value) for key, value in buffer.items()}
        return lambda lease: {key: part(lease) for key, part in parts.items()}
    items = [_hand_out_builder(value) for value in buffer]
    return lambda lease: tuple(item(lease) for item in items)


class ObsSlots:
    """The pool: ``buffers[i]`` is slot ``i``, a full batch buffer ``(num_envs, *obs_shape)`` (dict / tuple of
    them for Dict / Tuple spaces); :attr:`current` holds the envs' latest observations.

    :param buffers: two or more batch buffers of the same structure, shapes and dtypes.
    :param shared: whether the buffers are memory shared with other processes (the workers' block), which a
        forked child also shares: see :meth:`retire_handed_out`.
    :raises ValueError: if fewer than two buffers are given.
    """

    def __init__(self, buffers: Sequence[Any], shared: bool = False) -> None:
        if len(buffers) < 2:
            raise ValueError(f"ObsSlots needs at least 2 buffers, got {len(buffers)}")
        self.buffers = list(buffers)
        self.shared = shared
        #: live hand-outs of each slot (a slot with none may be written)
        self.held = [0] * len(self.buffers)
        #: the slot holding the envs' latest observations (what the envs write into now)
        self.current = 0
        self._builders = [_hand_out_builder(buffer) for buffer in self.buffers]

    def __getstate__(self) -> dict[str, Any]:
        """A copy of the pool (a copied vector env's): its buffers, none handed out."""
        return {"buffers": self.buffers, "current": self.current, "shared": self.shared}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.buffers = state["buffers"]
        self.current = state["current"]
        self.shared = state.get("shared", False)
        self.held = [0] * len(self.buffers)
        self._builders = [_hand_out_builder(buffer) for buffer in self.buffers]

    def hand_out(self) -> tuple[Any, bool]:
        """The current slot's observations for the caller to keep: arrays over the slot (it is not written again
        until they are all gone), or a copy if that would leave no slot free for the next write.

        :return: ``(observations, whether they are a copy)``.
        """
        current, held = self.current, self.held
        for i, count in enumerate(held):
            if count == 0 and i != current:
                return self._builders[current](_Lease(held, current)), False
        return batch_copy(self.buffers[current]), True

    def retire_handed_out(self) -> None:
        """The process forks: a child gets its own references to the arrays handed out, over the same memory when
        the slots are shared with other processes, and the parent cannot tell when the child lets them go. So a
        shared slot handed out now is never written again (a hand-out that never ends). One slot always stays
        free (:meth:`hand_out` leaves one), so the envs go on writing; with fewer slots left, more hand-outs are
        copies."""
        if not self.shared:
            return  # (a child's copy of private memory is its own)
        held = self.held
        for i, count in enumerate(held):
            if count:
                held[i] = count + 1

    def free_slot(self, keep_rows: bool) -> int | None:
        """Make sure the envs may write into the current slot: if it is handed out, move to a free slot (copying
        the current rows into it first if ``keep_rows``: a write that covers only some envs).

        :return: the new current slot, or None if the current one stays.
        :raises RuntimeError: if no slot is free (cannot happen: :meth:`hand_out` always leaves one).
        """
        current, held = self.current, self.held
        if held[current] == 0:
            return None
        for i, count in enumerate(held):
            if count == 0:
                if keep_rows:
                    batch_assign(self.buffers[i], self.buffers[current])
                self.current = i
                return i
        raise RuntimeError("vecenv: every observation slot is handed out; one should always stay free")
