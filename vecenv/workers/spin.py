"""Waiting for the other side of a worker pipe: spin briefly on a shared-memory counter, then block.

Waking a process that sleeps in ``poll(2)`` / ``read(2)`` costs tens of microseconds on a VM (about 90 us on a
2-vCPU one), and a step pays it at least twice: the worker wakes for the request, the calling process for the
reply. A process that instead keeps its core and watches a counter in shared memory sees the other side's
message about four times sooner. Each side of a :class:`~vecenv.workers.subproc.SubprocWorker` channel bumps a
counter in the shared batch block (:attr:`vecenv.shared_memory.SharedBatch.signals`) right after writing a
message to the pipe, so the reader, once it sees the bump, reads the pipe without ever blocking; if the counter
has not moved when the spin budget runs out, it blocks in the kernel exactly as without spinning (sentinels,
timeouts and all).

Spinning only pays while every spinning process has a core of its own: a process that spins on a core the
other side needs delays the very message it waits for. So :func:`spin_allowed` lets the ``"auto"`` mode spin
only when the calling process and its worker processes together fit the cores this process may run on, and the
:class:`Spinner` sizes each spin from the waits it has seen (spinning stops while waits are much longer than
:data:`SPIN_LIMIT`, where the wake-up is a small part of the wait).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from time import perf_counter

__all__ = ["REPLIES", "REQUESTS", "SPIN_LIMIT", "WAIT_MODES", "Spinner", "checked_wait_mode", "spin_allowed"]

#: the ways a vector env may wait for its worker processes (SubprocVecEnv's ``wait_mode``)
WAIT_MODES = ("auto", "spin", "block")
#: the longest spin, in seconds, before blocking in the kernel; also the typical wait beyond which ``"auto"``
#: stops spinning
SPIN_LIMIT = 1e-3
#: the positions, in a worker's row of :attr:`~vecenv.shared_memory.SharedBatch.signals`, of the number of
#: requests the calling process has written to the pipe and of the replies the worker has written
REQUESTS, REPLIES = 0, 1
# the share of the newest wait in the running estimate of the wait, and the spin budget over that estimate
_NEW_WAIT_WEIGHT = 0.125
_BUDGET_OVER_ESTIMATE = 1.5
_BUDGET_MARGIN = 20e-6


def checked_wait_mode(wait_mode: str) -> str:
    """``wait_mode`` if it is one of :data:`WAIT_MODES`.

    :raises ValueError: naming the argument, the accepted values and the one received.
    """
    if wait_mode not in WAIT_MODES:
        raise ValueError(f"wait_mode must be one of {', '.join(map(repr, WAIT_MODES))}, got {wait_mode!r}")
    return wait_mode


def usable_cores() -> int:
    """The CPU cores this process may run on (its affinity mask where the system has one)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def spin_allowed(wait_mode: str, n_workers: int, cores: int | None = None) -> bool:
    """Whether the calling process and ``n_workers`` worker processes spin while they wait for each other.

    ``"spin"``: always; ``"block"``: never; ``"auto"``: only if every party that may spin at once (the calling
    process and each worker process) has a core of its own among ``cores`` (default: :func:`usable_cores`).
    """
    if wait_mode != "auto":
        return wait_mode == "spin"
    return n_workers + 1 <= (usable_cores() if cores is None else cores)


class Spinner:
    """One side's spinning policy and accounts: how long to spin before blocking, and the time it spun.

    :param limit: the longest spin, in seconds (0: never spin).
    :param adaptive: size each spin from the waits seen (``"auto"``): about 1.5 times their running mean, and
        none while that mean is over ``limit``. False (``"spin"``): always spin up to ``limit``.
    """

    __slots__ = ("adaptive", "estimate", "hits", "limit", "seconds", "waits")

    def __init__(self, limit: float = SPIN_LIMIT, adaptive: bool = True) -> None:
        self.limit, self.adaptive = limit, adaptive
        #: running mean of how long the waits took, spin or not (seconds)
        self.estimate = 0.0
        self.restart_accounts()

    def restart_accounts(self) -> None:
        """Start the accounts again from zero (the running estimate is kept)."""
        #: seconds spent spinning, waits that spun, and those whose message came while spinning
        self.seconds = 0.0
        self.waits = self.hits = 0

    def budget(self, timeout: float | None = None) -> float:
        """Seconds to spin for the next wait (no more than ``timeout``)."""
        budget = self.limit
        if self.adaptive:
            estimate = self.estimate
            budget = 0.0 if estimate > budget else min(budget, _BUDGET_OVER_ESTIMATE * estimate + _BUDGET_MARGIN)
        return budget if timeout is None else min(budget, timeout)

    def observe(self, waited: float) -> None:
        """Add a wait that took ``waited`` seconds (spinning and blocking together) to the running estimate."""
        self.estimate += _NEW_WAIT_WEIGHT * (waited - self.estimate)

    def spin(self, counters: Sequence[int], position: int, target: int, budget: float) -> bool:
        """Spin until ``counters[position] >= target`` (True) or ``budget`` seconds passed (False)."""
        if counters[position] >= target:
            return True
        if budget <= 0.0:
            return False
        started = now = perf_counter()
        end = started + budget
        yield_core = os.sched_yield
        while counters[position] < target:
            if now >= end:
                self.seconds += now - started
                self.waits += 1
                return False
            yield_core()  # let a process waiting for this core run (when the cores are oversubscribed)
            now = perf_counter()
        self.seconds += perf_counter() - started
        self.waits += 1
        self.hits += 1
        return True

    def spin_any(self, watched: Sequence[tuple[Sequence[int], int]], position: int, budget: float) -> list[int]:
        """Spin until ``counters[position] >= target`` for some ``(counters, target)`` of ``watched``, or ``budget``
        seconds passed. :return: the positions in ``watched`` that reached their target (empty: none did)."""
        ready = [k for k, (counters, target) in enumerate(watched) if counters[position] >= target]
        if ready or budget <= 0.0:
            return ready
        started = now = perf_counter()
        end = started + budget
        yield_core = os.sched_yield
        while not ready:
            if now >= end:
                self.seconds += now - started
                self.waits += 1
                return ready
            yield_core()
            now = perf_counter()
            ready = [k for k, (counters, target) in enumerate(watched) if counters[position] >= target]
        self.seconds += perf_counter() - started
        self.waits += 1
        self.hits += 1
        return ready

    def accounts(self) -> dict[str, float | int | str]:
        """``wait_mode`` (``"spin"`` or ``"block"``), ``spin_seconds``, ``spin_waits``, ``spin_hits``."""
        return {
            "wait_mode": "spin" if self.limit > 0 else "block",
            "spin_seconds": self.seconds,
            "spin_waits": self.waits,
            "spin_hits": self.hits,
        }
