"""What waking W idle worker processes costs the process that wakes them, in ONE process, paired: one pipe per
worker (how SubprocVecEnv sends a step's requests: W one-byte writes, in worker order) against one eventfd that
every worker polls (one write wakes them all).

Each kind gets W forked workers that wait in the kernel, as blocking workers do between steps (``pipes``: a
blocking ``read(2)`` of the worker's own pipe; ``eventfd``: ``poll(2)`` of the shared eventfd, two of them used
in turn, the one not in use cleared before the other is written, so that no worker has to read it). Each wake
comes after ``--idle`` seconds of sleep, so that the workers' vCPUs may idle as between real steps. A woken worker
stores the time it woke (``CLOCK_MONOTONIC``, one clock for every process of the machine) and counts the wake in
shared memory, then acknowledges through a pipe. Per wake:

- ``writer CPU us``: the waking process's CPU time (``time.thread_time``) for its writes (for ``eventfd``, the
  clearing read too): what the calling process pays per step to start its workers;
- ``write us``: the wall time of the same writes;
- ``last awake us`` / ``median awake us``: from the start of the writes to the time the last worker (the median
  worker) woke: when the slowest worker can start its envs.

The kinds alternate in ``--rounds`` rounds of ``--wakes`` wakes each (the order reversed every other round); each
figure is the median over rounds of the round's median, and ``x pipes`` the median of the per-round ratios of
the writer's CPU time to that of ``pipes`` for the same W, with its quartiles. Every worker's wake count is checked
against the wakes sent: a lost or spurious wake raises. Linux only (``os.eventfd``).

    python benchmarks/wakeups.py                                # W = 2, 4 and 16; 10 rounds of 200 wakes
    python benchmarks/wakeups.py --workers 16 --rounds 20 --output wakeups.md --json wakeups.json
"""

from __future__ import annotations

import argparse
import contextlib
import mmap
import os
import select
import signal
import time
from typing import Any

import numpy as np
from paired import write_results  # same directory: run as python benchmarks/wakeups.py

from vecenv.bench.machine import machine_info
from vecenv.bench.tables import render_markdown
from vecenv.cli_args import positive_float, positive_int

KINDS = ("pipes", "eventfd")
COLUMNS = ["workers", "kind", "writer CPU us", "x pipes", "quartiles", "write us", "last awake us", "median awake us"]


class Workers:
    """``workers`` forked processes woken by ``kind`` (see the module), with their wake times and counts in a
    shared mapping: int64 ``[2 * w]`` the time worker ``w`` last woke (ns), ``[2 * w + 1]`` its wakes so far."""

    def __init__(self, kind: str, workers: int) -> None:
        self.kind, self.n = kind, workers
        self._shared = mmap.mmap(-1, 16 * workers)  # anonymous and shared: the children write, this process reads
        self.cells = np.frombuffer(self._shared, dtype=np.int64)
        self._ack_read, ack_write = os.pipe()
        # held by this process alone: a worker sees its end closed (POLLHUP) when this process is gone
        self._life_read, self._life_write = os.pipe()
        self._requests: list[int] = []  # pipes: each worker's request pipe (write end)
        self._eventfds: list[int] = []
        if kind == "eventfd":
            self._eventfds = [os.eventfd(0, os.EFD_NONBLOCK), os.eventfd(0, os.EFD_NONBLOCK)]
        self.pids: list[int] = []
        self.sent = 0
        try:
            for w in range(workers):
                request_read = -1
                if kind == "pipes":
                    request_read, request_write = os.pipe()
                    self._requests.append(request_write)
                pid = os.fork()
                if pid == 0:  # the worker: never returns
                    try:
                        for fd in [self._life_write, *self._requests]:  # (inherited write ends)
                            os.close(fd)
                        self._serve(w, request_read, ack_write)
                    finally:
                        os._exit(0)
                self.pids.append(pid)
                if request_read >= 0:
                    os.close(request_read)
        except BaseException:
            self.close()
            raise
        finally:
            os.close(ack_write)

    def _serve(self, w: int, request_read: int, ack_write: int) -> None:
        """A worker's loop, until this process is gone (its request pipe at EOF, or the life pipe hung up)."""
        cells, clock = self.cells, time.monotonic_ns
        if self.kind == "pipes":
            while os.read(request_read, 1):
                cells[2 * w] = clock()
                cells[2 * w + 1] += 1
                os.write(ack_write, b"a")
        polls = []
        for fd in self._eventfds:
            poll = select.poll()
            poll.register(fd, select.POLLIN)
            poll.register(self._life_read, select.POLLIN)
            polls.append(poll.poll)
        k = 0
        while True:
            if any(fd == self._life_read for fd, _ in polls[k % 2]()):
                return
            cells[2 * w] = clock()
            cells[2 * w + 1] += 1
            os.write(ack_write, b"a")
            k += 1

    def wake(self) -> tuple[float, float, float, float]:
        """Wake every worker once and wait for all of them.

        :return: ``(writer CPU, write wall time, last awake, median awake)``, in microseconds.
        """
        started, cpu_started = time.monotonic_ns(), time.thread_time_ns()
        if self.kind == "pipes":
            for fd in self._requests:
                os.write(fd, b"s")
        else:
            try:  # noqa: SIM105 (timed: cheaper than contextlib.suppress)
                # the eventfd of the wake before: every worker has left its poll (all acknowledged)
                os.eventfd_read(self._eventfds[(self.sent + 1) % 2])
            except BlockingIOError:
                pass
            os.eventfd_write(self._eventfds[self.sent % 2], 1)
        cpu, wrote = time.thread_time_ns() - cpu_started, time.monotonic_ns() - started
        self.sent += 1
        acknowledged = 0
        while acknowledged < self.n:
            data = os.read(self._ack_read, self.n - acknowledged)
            if not data:
                raise RuntimeError(f"wakeups: a {self.kind} worker ended")
            acknowledged += len(data)
        awake = self.cells[0::2] - started
        return cpu / 1e3, wrote / 1e3, float(awake.max()) / 1e3, float(np.median(awake)) / 1e3

    def check_counts(self) -> None:
        """:raises RuntimeError: if a worker woke more or fewer times than it was woken."""
        counts = self.cells[1::2].tolist()
        if any(count != self.sent for count in counts):
            raise RuntimeError(f"wakeups: {self.kind} workers counted {counts} wakes, {self.sent} were sent")

    def close(self) -> None:
        for pid in self.pids:
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        self.pids = []
        for fd in [self._ack_read, self._life_read, self._life_write, *self._requests, *self._eventfds]:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._requests, self._eventfds = [], []
        self._ack_read = self._life_read = self._life_write = -1


def measure(workers: int, rounds: int, wakes: int, idle: float) -> dict[str, Any]:
    """The paired rounds of both kinds for ``workers`` workers: per kind, each round's medians of the four figures
    of :meth:`Workers.wake` (``{"kind": [[cpu, write, last, median] per round]}``) and the wake counts checked."""
    pools = {kind: Workers(kind, workers) for kind in KINDS}
    try:
        for pool in pools.values():  # a first wake of each: every worker started and waiting
            pool.wake()
        per_round: dict[str, list[list[float]]] = {kind: [] for kind in KINDS}
        for r in range(rounds):
            for kind in KINDS if r % 2 == 0 else KINDS[::-1]:
                samples = []
                for _ in range(wakes):
                    time.sleep(idle)
                    samples.append(pools[kind].wake())
                per_round[kind].append([float(np.median(column)) for column in zip(*samples, strict=True)])
        for pool in pools.values():
            pool.check_counts()
        return {"workers": workers, "rounds": per_round, "wakes_per_worker": {k: p.sent for k, p in pools.items()}}
    finally:
        for pool in pools.values():
            pool.close()


def rows_of(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The report's rows for one :func:`measure` result."""
    rounds = result["rounds"]
    base_cpu = np.array([values[0] for values in rounds["pipes"]])
    rows = []
    for kind in KINDS:
        figures = np.array(rounds[kind])
        ratios = figures[:, 0] / base_cpu
        q1, q3 = np.percentile(ratios, [25, 75])
        cpu, wrote, last, median = np.median(figures, axis=0)
        rows.append(
            {
                "workers": result["workers"],
                "kind": kind,
                "writer CPU us": round(float(cpu), 1),
                "x pipes": round(float(np.median(ratios)), 2),
                "quartiles": f"{q1:.2f}..{q3:.2f}",
                "write us": round(float(wrote), 1),
                "last awake us": round(float(last), 1),
                "median awake us": round(float(median), 1),
            }
        )
    return rows


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--workers", default="2,4,16", help="comma-separated worker counts W (default: 2,4,16)", metavar="W,..."
    )
    parser.add_argument("--rounds", type=positive_int, default=10, help="paired rounds (default: 10)")
    parser.add_argument("--wakes", type=positive_int, default=200, help="wakes per kind and round (default: 200)")
    parser.add_argument(
        "--idle", type=positive_float, default=0.002, help="seconds of sleep before each wake (default: 0.002)"
    )
    parser.add_argument("--output", help="also write the Markdown report here")
    parser.add_argument("--json", help="also write the rounds and machine facts here as JSON")
    args = parser.parse_args(argv)
    try:
        counts = [int(w) for w in args.workers.split(",")]
    except ValueError:
        parser.error(f"--workers: expected comma-separated positive integers, got {args.workers!r}")
    if not counts or min(counts) < 1:
        parser.error(f"--workers: expected comma-separated positive integers, got {args.workers!r}")
    if not hasattr(os, "eventfd"):
        parser.error("wakeups.py needs os.eventfd (Linux, Python 3.10 or later)")
    machine = machine_info()
    results = [measure(w, args.rounds, args.wakes, args.idle) for w in counts]
    rows = [row for result in results for row in rows_of(result)]
    header = (
        f"# Waking idle workers: W pipes against one eventfd\n\n{machine['cpu_model']}, {machine['cpus_usable']} "
        f"usable CPUs, {machine['python']}, {machine['date']}, load average {machine['load_average_start']}; "
        f"{args.rounds} paired rounds of {args.wakes} wakes, {args.idle * 1e3:g} ms idle before each. Medians over "
        "rounds of each round's median; `x pipes`: the writer's CPU time over that of `pipes`, per round."
    )
    cells = [[str(row[c]) for c in COLUMNS] for row in rows]
    text = header + "\n\n" + render_markdown(COLUMNS, cells, [c not in ("kind", "quartiles") for c in COLUMNS])
    print(text)
    result = {"text": text, "machine": machine, "args": vars(args), "results": results, "rows": rows}
    write_results(result, args.output, args.json)
    return result


if __name__ == "__main__":
    main()
