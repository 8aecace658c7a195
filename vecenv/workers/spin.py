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
other side needs delays the very message it waits for. So :func:`who_spins` lets the ``"auto"`` mode spin only
where the spinning processes fit the cores this process may run on: every process when the calling process and
its workers together fit them, else the workers alone (the calling process blocks) when they fit them, else
nobody. Each :class:`Spinner` sizes its spins from the waits it has seen (spinning stops while waits are much
longer than :data:`SPIN_LIMIT`, where the wake-up is a small part of the wait). And while the calling process
works between two steps (over 50 us on average, or over 1.5 busy cores: a trainer's forward pass or update),
:class:`BetweenSteps` pauses the workers' spinning for requests, the cores being then the trainer's, unless the
spinning workers leave it as many cores as it keeps busy, and at least one.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from time import perf_counter, process_time
from typing import Any

__all__ = [
    "REPLIES",
    "REQUESTS",
    "SPIN_LIMIT",
    "SPIN_PAUSED",
    "WAIT_MODES",
    "BetweenSteps",
    "Spinner",
    "checked_wait_mode",
    "who_spins",
]

#: the ways a vector env may wait for its worker processes (SubprocVecEnv's ``wait_mode``)
WAIT_MODES = ("auto", "spin", "block")
#: the longest spin, in seconds, before blocking in the kernel; also the typical wait beyond which ``"auto"``
#: stops spinning
SPIN_LIMIT = 1e-3
#: the positions, in a worker's row of :attr:`~vecenv.shared_memory.SharedBatch.signals`, of the number of
#: requests the calling process has written to the pipe and of the replies the worker has written
REQUESTS, REPLIES = 0, 1
#: the position, in a worker's row of signals, of the calling process's request to block instead of spinning
#: for requests (non-zero: paused; see :class:`BetweenSteps`)
SPIN_PAUSED = 2
#: :class:`BetweenSteps`: the busy cores and the mean time (seconds) between steps above which the workers
#: stop spinning for requests, how often an interval between steps is measured (every this many steps) and
#: how many measured intervals make one decision
MAX_CORES_BETWEEN_STEPS = 1.5
MAX_TIME_BETWEEN_STEPS = 50e-6
#: :class:`BetweenSteps`: how far the calling process's busy cores may exceed the cores the spinning workers
#: leave free, with the workers still spinning through its work between steps (the measure's own noise: a
#: single-threaded trainer measures 1.000 to 1.003 cores)
BUSY_CORES_SLACK = 0.05
SAMPLE_EVERY = 4
SAMPLES_PER_DECISION = 8
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
    """The CPU cores this process may use: those it may run on (its affinity mask where the system has one), at
    most its cgroup's CPU limit rounded up (:func:`cgroup_cpu_limit`: a container's ``--cpus``, a Kubernetes
    limit), at least one."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    limit = cgroup_cpu_limit()
    return max(1, cores if limit is None else min(cores, math.ceil(limit)))


def cgroup_cpu_limit(root: str = "/sys/fs/cgroup", own: str = "/proc/self/cgroup") -> float | None:
    """The CPUs per period that this process's cgroup may use: the smallest CFS quota over its period along its
    group and the groups above it (``cpu.max`` in cgroup v2, ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us`` in v1),
    or None where no limit is set or none can be read (not Linux).

    :param root: where the cgroup file systems are mounted.
    :param own: the file naming the process's cgroups (``/proc/self/cgroup``).
    """
    groups: dict[str, str] = {}  # controller ("" for v2) -> the process's group
    try:
        with open(own, encoding="utf-8") as file:
            for line in file:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                for controller in controllers.split(",") if controllers else [""]:
                    groups[controller] = path
    except (OSError, ValueError):
        pass
    limits: list[float] = []
    places: list[tuple[str, str | None, bool]] = [(root, groups.get(""), True)]  # v2: "max 100000", "200000 100000"
    places += [(os.path.join(root, mount), groups.get("cpu"), False) for mount in ("cpu", "cpu,cpuacct")]
    for base, group, v2 in places:
        path = (group or "/").strip("/")
        while True:  # the group, then each group above it up to the root of what this process sees
            folder = os.path.join(base, path)
            if v2:
                limit = _read_limit(os.path.join(folder, "cpu.max"), None)
            else:
                limit = _read_limit(os.path.join(folder, "cpu.cfs_quota_us"), os.path.join(folder, "cpu.cfs_period_us"))
            if limit is not None:
                limits.append(limit)
            if not path:
                break
            path = os.path.dirname(path)
    return min(limits) if limits else None


def _read_limit(quota_file: str, period_file: str | None) -> float | None:
    """A CFS limit in CPUs from ``quota_file`` (v2's ``cpu.max`` when ``period_file`` is None), or None: no limit,
    or no such file."""
    try:
        with open(quota_file, encoding="ascii") as file:
            fields = file.read().split()
        if period_file is not None:
            with open(period_file, encoding="ascii") as file:
                fields += file.read().split()
        quota, period = fields[0], int(fields[1])
        return None if quota == "max" or int(quota) <= 0 or period <= 0 else int(quota) / period
    except (OSError, IndexError, ValueError):
        return None


def who_spins(wait_mode: str, n_workers: int, cores: int | None = None) -> tuple[bool, bool]:
    """Whether the calling process spins for replies, and whether ``n_workers`` worker processes spin for
    requests: ``(parent, workers)``.

    ``"spin"``: both; ``"block"``: neither; ``"auto"``: each spinning process must have a core of its own among
    ``cores`` (default: :func:`usable_cores`): both if the calling process and the workers together fit the
    cores, else the workers alone if they fit them and there are at least 2 cores (on one core a spinning worker
    would only delay the calling process), else neither.
    """
    if wait_mode != "auto":
        return (True, True) if wait_mode == "spin" else (False, False)
    cores = usable_cores() if cores is None else cores
    if n_workers + 1 <= cores:
        return True, True
    return False, 2 <= n_workers <= cores


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


class BetweenSteps:
    """What the calling process does between two steps, and the workers' spinning for requests paused while
    it is a trainer's work.

    A worker that spins for its next request takes a core for as long as the calling process stays away. That
    pays while the calling process only loops over steps (collecting with random or scripted actions), whose
    time between steps is a few microseconds; a trainer's work there (a policy's forward pass, an update) needs
    the cores, and SB3's PPO lost 4% of its throughput to workers spinning through it on 2 cores. Where the
    spinning workers leave cores free, the trainer's work runs there: on 16 cores, SB3's PPO on 8 CartPoles
    (8 workers) trained at 0.77-0.90x SB3's ``DummyVecEnv`` with the spinning paused and at 0.99-1.05x with
    ``wait_mode="spin"``, whose workers never pause. Every :data:`SAMPLE_EVERY`-th interval after a step (from
    the end of ``step_wait`` or ``recv`` to the start of the next vector-env call, as
    :class:`vecenv.stats.StepClock` sees it) is measured in wall time and in process CPU time
    (:func:`time.process_time`, all threads); every :data:`SAMPLES_PER_DECISION` measured intervals, the
    workers' :data:`SPIN_PAUSED` signals are set: paused while the intervals average over
    :data:`MAX_TIME_BETWEEN_STEPS` or keep over :data:`MAX_CORES_BETWEEN_STEPS` cores busy, unless the busy
    cores, at least one (the calling thread's, which needs a core whenever it runs), fit in the cores the
    spinning workers leave free (up to :data:`BUSY_CORES_SLACK` over them). On 2
    cores, SB3's PPO on 8 CartPoles over one worker trained at 0.88x SB3's ``DummyVecEnv`` with the spinning
    paused and at 0.94x with it going on, its step taking 1.57 and 1.19 times as long as SB3's.

    :param rows: each spinning worker's row of :attr:`vecenv.shared_memory.SharedBatch.signals`.
    :param cores: the cores the vector env's processes may run on (default: :func:`usable_cores`).
    """

    __slots__ = ("between", "cores", "countdown", "cpu", "free_cores", "mark", "paused", "rows", "samples", "wall")

    def __init__(self, rows: Sequence[Any], cores: int | None = None) -> None:
        self.rows = list(rows)
        #: the cores the spinning workers leave free (at least 0)
        self.free_cores = max(0, (usable_cores() if cores is None else cores) - len(self.rows))
        #: at the last decision (None before the first): the busy cores and the mean seconds between steps; and
        #: whether the workers' spinning is paused
        self.cores: float | None = None
        self.between: float | None = None
        self.paused = False
        self.countdown = SAMPLE_EVERY
        self.mark = -1.0  # process time at the start of the interval being measured (-1: none)
        self.cpu = self.wall = 0.0
        self.samples = 0

    def left(self) -> None:
        """A step's results go back to the caller: measure the interval that starts now if it is due."""
        self.countdown -= 1
        if self.countdown <= 0:
            self.countdown = SAMPLE_EVERY
            self.mark = process_time()

    def entered(self, outside: float) -> None:
        """A vector-env call starts, ``outside`` seconds after the last one ended (only called while an
        interval is measured: :attr:`mark` >= 0)."""
        self.cpu += process_time() - self.mark
        self.wall += outside
        self.mark = -1.0
        self.samples += 1
        if self.samples >= SAMPLES_PER_DECISION:
            self.decide()

    def decide(self) -> None:
        """Set the workers' :data:`SPIN_PAUSED` signals from the intervals measured since the last decision."""
        if self.wall > 0.0:
            self.cores = self.cpu / self.wall
            self.between = self.wall / self.samples
            works = self.cores > MAX_CORES_BETWEEN_STEPS or self.between > MAX_TIME_BETWEEN_STEPS
            # the calling process needs the cores it keeps busy, and at least one: its own thread's
            self.paused = works and max(self.cores, 1.0) > self.free_cores + BUSY_CORES_SLACK
        self.cpu = self.wall = 0.0
        self.samples = 0
        flag = int(self.paused)
        for row in self.rows:  # every time: a restarted worker's row starts from 0 again
            row[SPIN_PAUSED] = flag
