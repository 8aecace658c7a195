"""Where a vector env's time goes: :class:`StepStats`, returned by ``venv.step_stats()``.

Every backend keeps the accounts while it runs (a few clock reads per worker and step, and two per env
step): the calling process ("parent") times its side of ``step_async`` / ``step_wait`` and ``reset``, the
time it waits for workers and the time between those calls (the caller's own code); each worker (a worker
process, a Ray actor, or the parent itself for DummyVecEnv and ``parent_envs``) times its envs' ``step`` /
``reset`` calls, the rest of its work on a request (moving actions, observations and infos) and the time it
waits for the next request. :meth:`StepStats.table` prints them per env-step; :meth:`StepStats.advice` says
in one line what they suggest.

>>> import gymnasium as gym, numpy as np
>>> from vecenv import DummyVecEnv
>>> venv = DummyVecEnv([lambda: gym.make("CartPole-v1")] * 2)
>>> _ = venv.reset()
>>> for _ in range(10):
...     _ = venv.step(np.zeros(2, dtype=np.int64))
>>> stats = venv.step_stats()
>>> stats.steps, stats.env_steps, len(stats.workers)
(10, 20, 1)
>>> venv.close()
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = ["StepClock", "StepStats", "WorkerStats", "thread_run_queue_seconds"]

#: Linux's scheduler statistics of the calling thread: ``on-CPU ns, run-queue ns, time slices``
_SCHEDSTAT = "/proc/thread-self/schedstat"


def thread_run_queue_seconds() -> float | None:
    """Seconds the calling thread has spent ready to run but waiting for a free core, since it started (Linux's
    ``/proc/thread-self/schedstat``), or None where the system does not say (not Linux, or no scheduler
    statistics)."""
    try:
        with open(_SCHEDSTAT, "rb") as file:
            return int(file.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return None


@dataclass(frozen=True)
class WorkerStats:
    """The accounts of one worker: a group of envs stepped together, in a worker process, a Ray actor or the
    calling process. Times are seconds since the accounts started (construction or the last reset).

    ``env_seconds + data_seconds + idle_seconds`` is the worker's ``wall_seconds``. For a worker that serves
    requests, these end when the statistics request arrived: the time answering it is in none of them.

    :param where: where the group runs, e.g. ``"worker process 1234"``, ``"calling process"``.
    :param env_indices: global indices of the group's envs.
    :param wall_seconds: time covered by these accounts.
    :param env_seconds: inside the envs' ``step`` and ``reset`` (automatic resets included).
    :param data_seconds: the rest of the worker's work on requests: actions read, observations and flags
        written, infos copied and pickled, replies sent.
    :param idle_seconds: waiting for the next request; for the calling process's own envs (DummyVecEnv,
        ``parent_envs``), which wait for no request, the rest of the calling process's time: its own code,
        sending, waiting for worker processes (``wall_seconds - env_seconds - data_seconds``).
    :param env_steps: env steps taken (one per env and vector step).
    :param resets: env resets (requested and automatic).
    :param episodes: episodes ended (terminated or truncated).
    :param cpu_seconds: CPU time of the worker's process over the same time (all its threads), or None for the
        calling process's own envs. Well below ``env_seconds + data_seconds`` means the worker was off the CPU
        while it had work: waiting for a free core (see ``run_queue_seconds``), or blocked in its envs (a
        sleep, I/O, an external simulator).
    :param run_queue_seconds: time the worker's serving thread was ready to run but waited for a free core,
        over the same time (Linux's scheduler statistics), or None where unknown (other systems, the calling
        process's own envs).
    :param wait_mode: how the worker waits for requests: ``"spin"`` (on a shared-memory counter first, then in
        the kernel; see SubprocVecEnv's ``wait_mode``) or ``"block"`` (in the kernel; every other worker).
    :param spin_seconds: the part of ``idle_seconds`` spent spinning.
    :param spin_waits: waits for a request that spun.
    :param spin_hits: those whose request came while spinning (the others went on to block).
    """

    where: str
    env_indices: tuple[int, ...]
    wall_seconds: float
    env_seconds: float
    data_seconds: float
    idle_seconds: float
    env_steps: int
    resets: int
    episodes: int
    cpu_seconds: float | None = None
    run_queue_seconds: float | None = None
    wait_mode: str = "block"
    spin_seconds: float = 0.0
    spin_waits: int = 0
    spin_hits: int = 0


@dataclass(frozen=True)
class StepStats:
    """Where a vector env's time went, on the calling process's side and on each worker's
    (``venv.step_stats()``). Times are seconds since the accounts started (construction or the last reset).

    On the calling process's side, ``send_seconds + wait_seconds + collect_seconds + parent_env_seconds +
    reset_seconds + outside_seconds`` is ``wall_seconds`` (up to the clock reads themselves).

    :param wall_seconds: time covered by these accounts, in the calling process.
    :param send_seconds: in ``step_async``: checking the actions and handing them to the workers.
    :param wait_seconds: in ``step_wait``, blocked until a worker's reply arrived.
    :param collect_seconds: the rest of ``step_wait``: reading replies, rebuilding infos, copying the batch out
        (minus ``parent_env_seconds``).
    :param parent_env_seconds: inside the ``step`` / ``reset`` of envs that run in the calling process
        (DummyVecEnv, SubprocVecEnv's ``parent_envs``) during ``step_wait``.
    :param reset_seconds: in ``reset()`` (every part of it: the envs' resets are also in the workers' accounts).
    :param outside_seconds: between those calls: the caller's own code (policy, learning), and any other
        call on the vector env.
    :param steps: vector steps: ``step_wait`` calls that returned, and ``recv`` calls of partial batches (also
        those that collect only the first observations of :meth:`~vecenv.SubprocVecEnv.async_reset`).
    :param env_steps: env steps taken by all workers.
    :param episodes: episodes ended in all workers.
    :param workers: each worker's accounts, in env order.
    :param wait_mode: how the calling process waits for worker replies: ``"spin"`` (on the workers'
        shared-memory counters first, then in the kernel: SubprocVecEnv's ``wait_mode``) or ``"block"``.
    :param spin_seconds: the part of ``wait_seconds`` spent spinning.
    :param spin_waits: waits for replies that spun.
    :param spin_hits: those whose reply came while spinning (the others went on to block).
    :param workers_spin_paused: the workers' spinning for requests is paused at the end of these accounts: with
        ``wait_mode="auto"``, the calling process spent more than 50 us, or kept more than 1.5 cores busy, between
        steps, and its busy cores, at least one, do not fit in the cores the spinning workers leave free (its own
        work there, such as a trainer's, gets the cores; :class:`vecenv.workers.spin.BetweenSteps`), so they block.
    :param between_steps_seconds: the mean time the calling process spent between steps in the intervals behind
        the last decision to pause the workers' spinning or not, or None before one (or where the workers do not
        spin with ``wait_mode="auto"``).
    :param between_steps_cores: the cores the calling process kept busy in those intervals (CPU time of all its
        threads over wall time), or None.
    :param obs_shared: observation batches ``step()`` / ``reset()`` handed out without a copy, backed by an
        observation slot (:mod:`vecenv.engine.obs_slots`).
    :param obs_copied: those handed out as a copy: the vector env has no slots (``obs_slots=0``, or a space
        without a fixed-size dtype), or the caller held every slot but the one the envs write next.
    """

    wall_seconds: float
    send_seconds: float
    wait_seconds: float
    collect_seconds: float
    parent_env_seconds: float
    reset_seconds: float
    outside_seconds: float
    steps: int
    env_steps: int
    episodes: int
    workers: tuple[WorkerStats, ...] = field(default_factory=tuple)
    wait_mode: str = "block"
    spin_seconds: float = 0.0
    spin_waits: int = 0
    spin_hits: int = 0
    workers_spin_paused: bool = False
    between_steps_seconds: float | None = None
    between_steps_cores: float | None = None
    obs_shared: int = 0
    obs_copied: int = 0

    @property
    def num_envs(self) -> int:
        """Number of envs the accounts cover."""
        return sum(len(worker.env_indices) for worker in self.workers)

    def per_env_step_us(self, seconds: float) -> float:
        """``seconds`` in microseconds per env-step of the whole vector env (0 before any step)."""
        return seconds * 1e6 / self.env_steps if self.env_steps else 0.0

    def table(self) -> str:
        """The accounts as a text table: the calling process's parts, then each worker's, in microseconds per
        env-step (of the vector env for the calling process, of the worker's own envs for a worker) and in
        percent of the wall time; then the advice, if any.

        :return: the table, lines separated by ``"\\n"``, without a trailing newline.
        """
        wall = self.wall_seconds
        header = f"{'part':<9} {'us/env-step':>12} {'%':>6}"
        rows: list[tuple[str, str]] = []  # (where, the rest of the line)

        def row(where: str, part: str, seconds: float, env_steps: int, wall_seconds: float) -> None:
            per_step = seconds * 1e6 / env_steps if env_steps else 0.0
            share = 100.0 * seconds / wall_seconds if wall_seconds > 0 else 0.0
            rows.append((where, f"{part:<9} {per_step:>12.2f} {share:>6.1f}"))

        where = "calling process"
        for part, seconds in (
            ("send", self.send_seconds),
            ("wait", self.wait_seconds),
            ("collect", self.collect_seconds),
            ("env", self.parent_env_seconds),
            ("reset", self.reset_seconds),
            ("outside", self.outside_seconds),
        ):
            row(where, part, seconds, self.env_steps, wall)
        for worker in self.workers:
            label = f"{worker.where} (envs {_index_range(worker.env_indices)})"
            for part, seconds in (
                ("env", worker.env_seconds),
                ("data", worker.data_seconds),
                ("idle", worker.idle_seconds),
            ):
                row(label, part, seconds, worker.env_steps, worker.wall_seconds)
        # the first column is as wide as its longest label (a Ray actor's name is long), at least 34
        width = max([34, *(len(where) for where, _ in rows)])
        lines = [
            f"vecenv step profile: {self.steps} steps, {self.env_steps} env-steps, {self.episodes} env episodes, "
            f"{wall:.3f} s, {self.env_steps / wall if wall > 0 else 0.0:,.0f} env-steps/s",
            f"{'where':<{width}} {header}",
            *(f"{where:<{width}} {rest}" for where, rest in rows),
        ]
        spinning = self.spinning()
        if spinning:
            lines.append(f"spin: {spinning}")
        advice = self.advice()
        if advice:
            lines.append(f"advice: {advice}")
        return "\n".join(lines)

    def spinning(self) -> str | None:
        """One line on the spinning waits (SubprocVecEnv's ``wait_mode``): for the calling process and the
        worker processes together, the time spent spinning in microseconds per env-step and in percent of the wall
        time, and how many waits the spin caught; None where nobody waits by spinning."""
        spinners = [worker for worker in self.workers if worker.wait_mode == "spin"]
        if self.wait_mode != "spin" and not spinners:
            return None
        parts = []
        if self.wait_mode == "spin":
            parts.append(
                f"calling process {self.per_env_step_us(self.spin_seconds):.2f} us/env-step "
                f"({_share(self.spin_seconds, self.wall_seconds)}), {_caught(self.spin_hits, self.spin_waits)}"
            )
        else:
            parts.append("calling process blocks")
        if spinners:
            seconds = sum(worker.spin_seconds for worker in spinners)
            env_steps = sum(worker.env_steps for worker in spinners)
            wall = sum(worker.wall_seconds for worker in spinners)
            hits, waits = sum(worker.spin_hits for worker in spinners), sum(worker.spin_waits for worker in spinners)
            per_step = seconds * 1e6 / env_steps if env_steps else 0.0
            parts.append(f"workers {per_step:.2f} us/env-step ({_share(seconds, wall)}), {_caught(hits, waits)}")
            if self.workers_spin_paused:
                parts.append(f"the workers now block, leaving the cores to the calling process{self._between_steps()}")
        else:
            parts.append("workers block")
        return "; ".join(parts)

    def _between_steps(self) -> str:
        """``", which spends 212 us between steps on average (over 50 us)"``: what the calling process did between
        steps that paused the workers' spinning (each limit it exceeded), or ``"'s work between steps"`` where it
        was not measured."""
        from vecenv.workers.spin import MAX_CORES_BETWEEN_STEPS, MAX_TIME_BETWEEN_STEPS

        seconds, cores = self.between_steps_seconds, self.between_steps_cores
        over = []
        if seconds is not None and seconds > MAX_TIME_BETWEEN_STEPS:
            over.append(
                f"spends {seconds * 1e6:.0f} us between steps on average (over {MAX_TIME_BETWEEN_STEPS * 1e6:.0f} us)"
            )
        if cores is not None and cores > MAX_CORES_BETWEEN_STEPS:
            over.append(f"keeps {cores:.1f} cores busy between steps (over {MAX_CORES_BETWEEN_STEPS:g})")
        return f", which {' and '.join(over)}" if over else "'s work between steps"

    def __str__(self) -> str:
        return self.table()

    def advice(self) -> str | None:
        """One line on what the accounts suggest, or None when they suggest nothing (or cover too little).

        The rules, in order: most of the time is spent outside vecenv (> 50 %: a faster vector env cannot
        help much; ``vecenv bench --autotune --trainer-us`` with that time per step ranks the layouts with that
        work between steps); a worker process had the CPU for less than 2/3 of the time it had work: too few free cores
        if it spent most of the rest waiting for a core (``run_queue_seconds``), envs that block (a sleep, I/O,
        an external simulator) if it did not, either where the run queue is unknown; the workers wait for
        requests more than half the time while the calling process waits for them less (envs too cheap for
        their worker: more envs per worker, ``parent_envs`` or DummyVecEnv); moving data costs the workers more
        than their envs (large observations or infos); the workers are busy with their envs more than 80 % of
        the time (more workers, if cores are free); envs in the calling process cost more than 100 us per step
        (worker processes would run them in parallel).
        """
        wall = self.wall_seconds
        if self.env_steps < 100 or wall <= 0:
            return None
        if self.outside_seconds / wall > 0.5:
            text = (
                f"{100 * self.outside_seconds / wall:.0f}% of the time is spent outside the vector env (your "
                "code): a faster vector env cannot speed this loop up much"
            )
            if self.steps:  # how the layouts compare with that much of the loop's own work between steps
                text += (
                    f"; vecenv bench --autotune ENV_ID --trainer-us {self.outside_seconds * 1e6 / self.steps:.0f} "
                    "ranks the layouts with it"
                )
            return text
        remote = [worker for worker in self.workers if worker.cpu_seconds is not None]
        remote_steps = sum(worker.env_steps for worker in remote)
        if remote and remote_steps:
            for worker in remote:
                off_cpu = _off_cpu_advice(worker, len(remote))
                if off_cpu is not None:
                    return off_cpu
            idle = sum(worker.idle_seconds for worker in remote) / sum(worker.wall_seconds for worker in remote)
            env = sum(worker.env_seconds for worker in remote)
            data = sum(worker.data_seconds for worker in remote)
            env_us = env * 1e6 / remote_steps
            ray = all(worker.where.startswith("Ray actor") for worker in remote)  # (RayVecEnv's options differ)
            if idle > 0.5:
                layouts = "more envs per actor, SubprocVecEnv" if ray else "more envs per worker, parent_envs"
                return (
                    f"envs are cheap ({env_us:.1f} us per env-step): workers wait for the calling process "
                    f"{100 * idle:.0f}% of the time; try {layouts}, or DummyVecEnv"
                )
            if data > env:
                keep = "keep observations small" if ray else "keep shared_memory=True and observations small"
                return (
                    f"moving data costs the workers more than their envs ({data * 1e6 / remote_steps:.1f} vs "
                    f"{env_us:.1f} us per env-step): {keep}, and return infos only when they carry something"
                )
            busy = sum(worker.env_seconds for worker in remote) / sum(worker.wall_seconds for worker in remote)
            if busy > 0.8:
                return (
                    f"workers spend {100 * busy:.0f}% of their time in env steps ({env_us:.1f} us per env-step): "
                    "the envs are the limit; more workers help only if cores are free"
                )
            return None
        env_us = self.per_env_step_us(self.parent_env_seconds)
        if env_us > 100:
            return (
                f"envs are expensive ({env_us:.0f} us per env-step) and step one after another in this process: "
                "SubprocVecEnv with one worker per core steps them in parallel"
            )
        return None


def _off_cpu_advice(worker: WorkerStats, n_workers: int) -> str | None:
    """The advice for a worker process (one of ``n_workers``) that was off the CPU for a third or more of the time
    it had work (and for more than 10 % of its wall time), or None: the machine is short of free cores if the
    worker spent most of that time waiting for a core (in the run queue; with one worker, fewer workers cannot
    help), its envs block (a sleep, I/O, an external simulator) if it did not; both possibilities where the run
    queue is unknown."""
    working, cpu = worker.env_seconds + worker.data_seconds, worker.cpu_seconds or 0.0
    off_cpu = working - cpu
    if working <= 1.5 * cpu or off_cpu <= 0.1 * worker.wall_seconds:
        return None
    had = f"{worker.where} had the CPU only {100 * cpu / working:.0f}% of the time it had work"
    queued = worker.run_queue_seconds
    if queued is None:
        return (
            f"{had}: either its envs wait for something other than the CPU (a sleep, I/O, an external simulator; "
            "more workers, even more than cores, can overlap those waits) or the machine is short of free cores "
            "(other processes, or more workers than cores; try fewer workers)"
        )
    if queued >= 0.5 * off_cpu:
        if n_workers == 1:
            return (
                f"{had}: the machine is short of free cores (other processes, or the worker and this process share "
                "one core); DummyVecEnv steps the envs without handing each step to another process"
            )
        return (
            f"{had}: the machine is short of free cores (other processes, or more workers than cores); try fewer "
            "workers"
        )
    return (
        f"{had}, mostly not waiting for a free core: its envs wait for something else (a sleep, I/O, an "
        "external simulator); more workers, even more than cores, can overlap those waits"
    )


def _share(seconds: float, wall: float) -> str:
    return f"{100.0 * seconds / wall if wall > 0 else 0.0:.1f}%"


def _caught(hits: int, waits: int) -> str:
    return f"{hits} of {waits} spins caught the message"


def _index_range(indices: tuple[int, ...]) -> str:
    if not indices:
        return "none"
    return str(indices[0]) if len(indices) == 1 else f"{indices[0]}-{indices[-1]}"


class StepClock:
    """The calling process's side of :class:`StepStats`: running totals in seconds, updated by the vector env
    at the entry and exit of ``step_async`` / ``step_wait`` / ``reset`` (:func:`time.perf_counter`)."""

    __slots__ = (
        "between",
        "collect",
        "last_exit",
        "obs_copied",
        "obs_shared",
        "outside",
        "reset",
        "send",
        "spinner",
        "start",
        "steps",
        "wait",
    )

    def __init__(self) -> None:
        #: how the calling process waits for replies, if it spins (a :class:`vecenv.workers.spin.Spinner`, whose
        #: accounts restart with these); None: it blocks
        self.spinner: Any = None
        #: what the calling process does between steps, where it decides whether the workers spin (a
        #: :class:`vecenv.workers.spin.BetweenSteps`; None: not measured)
        self.between: Any = None
        self.restart()

    def restart(self) -> None:
        """Start the accounts again from zero; they run from the next step or reset call on."""
        self.start: float | None = None
        self.last_exit = 0.0
        self.send = self.wait = self.collect = self.reset = self.outside = 0.0
        self.steps = 0
        #: observation batches handed out over a slot / as a copy (see StepStats)
        self.obs_shared = self.obs_copied = 0
        if self.spinner is not None:
            self.spinner.restart_accounts()

    def enter(self) -> float:
        """A vector-env call starts: the time since the last one ended was spent outside. :return: now."""
        now = time.perf_counter()
        if self.start is None:
            self.start = self.last_exit = now
        self.outside += now - self.last_exit
        between = self.between
        if between is not None and between.mark >= 0.0:
            between.entered(now - self.last_exit)
        return now

    def elapsed(self) -> float:
        """Seconds since the accounts started (0 before the first call)."""
        return 0.0 if self.start is None else time.perf_counter() - self.start

    def leave(self, started: float) -> float:
        """The call that started at ``started`` (:meth:`enter`) ends. :return: its duration in seconds."""
        self.last_exit = now = time.perf_counter()
        return now - started

    @contextlib.contextmanager
    def timing(self, part: str) -> Iterator[None]:
        """Count the ``with`` block's time in ``part`` (``"reset"``, ``"send"``, ...), except the time it waited
        for replies (counted in ``wait`` where it is measured); for calls off the hot path."""
        started, waited = self.enter(), self.wait
        try:
            yield
        finally:
            setattr(self, part, getattr(self, part) + self.leave(started) - (self.wait - waited))

    def summary(self, workers: tuple[WorkerStats, ...], parent_env_seconds: float) -> StepStats:
        """The accounts as a :class:`StepStats` (``parent_env_seconds`` is moved from ``collect`` to its own part)."""
        now = time.perf_counter()
        if self.start is None:  # no call yet
            self.last_exit = now
        spinner = self.spinner
        spin = {} if spinner is None else spinner.accounts()
        return StepStats(
            wall_seconds=self.elapsed(),
            send_seconds=self.send,
            wait_seconds=self.wait,
            collect_seconds=max(0.0, self.collect - parent_env_seconds),
            parent_env_seconds=parent_env_seconds,
            reset_seconds=self.reset,
            outside_seconds=self.outside + (now - self.last_exit),
            steps=self.steps,
            env_steps=sum(worker.env_steps for worker in workers),
            episodes=sum(worker.episodes for worker in workers),
            workers=workers,
            workers_spin_paused=self.between is not None and self.between.paused,
            between_steps_seconds=None if self.between is None else self.between.between,
            between_steps_cores=None if self.between is None else self.between.cores,
            obs_shared=self.obs_shared,
            obs_copied=self.obs_copied,
            **spin,
        )
