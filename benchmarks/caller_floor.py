"""The least CPU a calling process can spend per step of N envs in W worker processes under SB3's API, beside
``SubprocVecEnv``'s, in ONE process, paired.

Both step N copies of ``vecenv/Cpu200us-v0``'s env (8 float32 observations; each step burns ``--env-us`` of CPU;
env ``i`` truncates its episodes every ``--episode-length + i % --episode-length`` steps, so that about
``N / (1.5 x --episode-length)`` envs end per step, spread over the steps):

- ``floor``: W forked children stand in for the workers. Each steps its N / W envs' worth of CPU (the same
  ``burn`` calls, no env) and answers one byte. Per step, the calling process does only what SB3's API leaves to
  any vector env of processes:
  - ``send``: it writes W one-byte requests, builds W lists of N / W fresh ``{"TimeLimit.truncated": False}``
    dicts and frees the lists of two steps ago;
  - ``collect``: it polls and reads the W answers, places the lists into one list of N, and for each env that
    ended it sets ``TimeLimit.truncated`` and copies its terminal observation (a row of a float32 array).
- ``vecenv``: ``SubprocVecEnv(n_workers=W, wait_mode="block")`` over the N envs, ``step_async`` as ``send``
  and ``step_wait`` as ``collect``.

Each half is timed in the calling thread's CPU time (``time.thread_time``), as ``revision_ab.py``'s ``send-*``
and ``collect-*`` cases: ``collect`` after a sleep of ``--sleep-ms`` (by default 1.5 times the envs' work spread
over the cores the workers can use, plus 1 ms), so that every worker has answered and nothing of the wait is
counted. The two alternate in ``--rounds`` rounds of
``--steps`` steps each (the order reversed every other round); each figure is the median over rounds, and ``x
floor`` the median of the per-round ratios of vecenv's send + collect to the floor's, with their quartiles.

    python benchmarks/caller_floor.py                      # 1024 envs in 16 workers, 6 rounds of 100 steps
    python benchmarks/caller_floor.py --num-envs 128 --workers 16 --output floor.md --json floor.json
"""

from __future__ import annotations

import argparse
import gc
import multiprocessing as mp
import os
import select
import time
from itertools import repeat
from typing import Any

import numpy as np
from paired import write_results  # same directory: run as python benchmarks/caller_floor.py

from vecenv import SubprocVecEnv
from vecenv.bench.machine import cpus_usable, machine_info
from vecenv.bench.tables import render_markdown
from vecenv.bench.workloads import CPU_ENV_ID, WorkloadFactory, burn, calibrate_cpu_iterations
from vecenv.cli_args import positive_float, positive_int

COLUMNS = ["contender", "send us/step", "collect us/step", "us per env-step", "x floor", "quartiles"]
_DEFAULT_INFO = {"TimeLimit.truncated": False}
_OBS_SIZE = 8  # the CPU env's observations


def episode_lengths(num_envs: int, length: int) -> list[int]:
    """Env ``i``'s episode length: ``length + i % length`` (ends spread over the steps, as envs drift apart)."""
    return [length + i % length for i in range(num_envs)]


def _child(requests: int, answers: int, life: int, calls: int, iterations: int) -> None:
    """A floor worker: for each request byte, ``calls`` x ``burn(iterations)``, then one answer byte; ends on
    ``b"q"`` or when the parent's end of ``life`` is gone."""
    poll = select.poll()
    poll.register(requests, select.POLLIN)
    poll.register(life, select.POLLIN)
    while True:
        ready = dict(poll.poll())
        if requests not in ready:
            return  # the parent is gone
        if os.read(requests, 1) != b"s":
            return
        for _ in range(calls):
            burn(iterations)
        os.write(answers, b"\x00")


class Floor:
    """W forked children and the calling process's least work per step (see the module)."""

    def __init__(self, num_envs: int, workers: int, iterations: int, lengths: list[int]) -> None:
        self.num_envs, self.workers, self.per = num_envs, workers, num_envs // workers
        self.lengths, self.t = np.array(lengths), 0
        self.terminal = np.zeros((num_envs, _OBS_SIZE), dtype=np.float32)
        self.infos: list[Any] = []
        self._parts: list[list[dict[str, Any]]] = []
        self._older: list[Any] | None = None
        ctx = mp.get_context("fork")
        life_read, self._life = os.pipe()  # (held by this process alone: closed, every child ends)
        self._requests, self._answers, self.processes = [], [], []
        self._poll = select.poll()
        for _ in range(workers):
            request_read, request_write = os.pipe()
            answer_read, answer_write = os.pipe()
            process = ctx.Process(
                target=_child, args=(request_read, answer_write, life_read, self.per, iterations), daemon=True
            )
            process.start()
            os.close(request_read)
            os.close(answer_write)
            self._requests.append(request_write)
            self._answers.append(answer_read)
            self._poll.register(answer_read, select.POLLIN)
            self.processes.append(process)
        os.close(life_read)

    def send(self) -> None:
        """The requests, this step's default infos, and the infos of two steps ago freed."""
        for fd in self._requests:
            os.write(fd, b"s")
        self._older = None
        self._parts = [list(map(dict.copy, repeat(_DEFAULT_INFO, self.per))) for _ in range(self.workers)]

    def collect(self) -> list[dict[str, Any]]:
        """Every answer read; the step's infos, those of the envs that ended with their terminal observation."""
        infos: list[Any] = [None] * self.num_envs
        left = self.workers
        while left:
            for fd, _ in self._poll.poll():
                os.read(fd, 1)
                left -= 1
        per = self.per
        for w, part in enumerate(self._parts):
            infos[w * per : (w + 1) * per] = part
        self.t += 1
        for j in np.flatnonzero(self.t % self.lengths == 0).tolist():
            info = infos[j]
            info["TimeLimit.truncated"] = True
            info["terminal_observation"] = self.terminal[j, ...].copy()
        self._older, self.infos = self.infos, infos
        return infos

    def close(self) -> None:
        """End and reap every child."""
        for fd in self._requests:
            os.write(fd, b"q")
            os.close(fd)
        os.close(self._life)
        for process in self.processes:
            process.join(timeout=10)
            if process.is_alive():
                process.kill()
                process.join()
        for fd in self._answers:
            os.close(fd)


def timed(send: Any, collect: Any, steps: int, sleep: float) -> tuple[float, float]:
    """Seconds of the calling thread's CPU in ``send`` and in ``collect`` (after ``sleep``), per step."""
    gc.collect()
    sent = collected = 0.0
    for _ in range(steps):
        begin = time.thread_time()
        send()
        sent += time.thread_time() - begin
        time.sleep(sleep)
        begin = time.thread_time()
        collect()
        collected += time.thread_time() - begin
    return sent / steps, collected / steps


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Both contenders in alternating rounds; each round's send and collect seconds per step."""
    iterations = calibrate_cpu_iterations(args.env_us)
    lengths = episode_lengths(args.num_envs, args.episode_length)
    factories = [WorkloadFactory(CPU_ENV_ID, {"iterations": iterations, "episode_length": n}) for n in lengths]
    floor = Floor(args.num_envs, args.workers, iterations, lengths)
    venv = None
    try:
        venv = SubprocVecEnv(factories, n_workers=args.workers, wait_mode="block")
        venv.reset()
        actions = np.zeros(args.num_envs, dtype=np.int64)
        halves = {
            "floor": (floor.send, floor.collect),
            "vecenv": (lambda: venv.step_async(actions), venv.step_wait),
        }
        for send, collect in halves.values():  # warm-up: first steps, page faults
            timed(send, collect, max(1, args.steps // 10), args.sleep_ms / 1000)
        rounds: dict[str, list[tuple[float, float]]] = {name: [] for name in halves}
        for r in range(args.rounds):
            for name in list(halves) if r % 2 == 0 else list(halves)[::-1]:
                rounds[name].append(timed(*halves[name], args.steps, args.sleep_ms / 1000))
    finally:
        if venv is not None:
            venv.close()
        floor.close()
    return {"iterations": iterations, "rounds": rounds}


def rows_of(result: dict[str, Any], num_envs: int) -> list[list[str]]:
    """The report's rows: median send and collect per step, per env-step, and vecenv over the floor."""
    floor = np.array(result["rounds"]["floor"]).sum(axis=1)
    rows = []
    for name, rounds in result["rounds"].items():
        halves = np.array(rounds)
        ratios = halves.sum(axis=1) / floor
        send, collect = np.median(halves, axis=0) * 1e6
        rows.append(
            [
                name,
                f"{send:.0f}",
                f"{collect:.0f}",
                f"{float(np.median(halves.sum(axis=1))) * 1e6 / num_envs:.3f}",
                f"{float(np.median(ratios)):.2f}",
                "{:.2f}..{:.2f}".format(*np.percentile(ratios, [25, 75])),
            ]
        )
    return rows


def parser() -> argparse.ArgumentParser:
    """The command line."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--num-envs", "-n", type=positive_int, default=1024, help="N envs (a multiple of --workers)")
    p.add_argument("--workers", "-w", type=positive_int, default=16, help="W worker processes")
    p.add_argument("--env-us", type=positive_float, default=20.0, help="CPU time of one env step, us")
    p.add_argument("--episode-length", type=positive_int, default=15, help="the shortest episode, in steps")
    p.add_argument("--rounds", type=positive_int, default=6)
    p.add_argument("--steps", type=positive_int, default=100, help="timed steps per contender and round")
    p.add_argument(
        "--sleep-ms", type=positive_float, help="sleep before collect, ms (default: 1.5 x the envs' work per core + 1)"
    )
    p.add_argument("--output", help="also write the report (Markdown) here")
    p.add_argument("--json", help="also write the rounds (JSON) here")
    return p


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run, print the report, return it (``text``, ``rounds``, ``machine``)."""
    args = parser().parse_args(argv)
    if args.num_envs % args.workers:
        parser().error(f"--num-envs must be a multiple of --workers, got {args.num_envs} and {args.workers}")
    if args.sleep_ms is None:  # all the envs' work over the cores the workers can use, 1.5 times over, plus 1 ms
        cores = min(args.workers, cpus_usable() or os.cpu_count() or 1)
        args.sleep_ms = 1.5 * args.env_us * args.num_envs / cores / 1000 + 1
    info = machine_info()
    result = measure(args)
    text = "\n".join(
        [
            f"# The calling process's CPU per step: {args.num_envs} envs in {args.workers} workers",
            "",
            f"Machine: {info['cpus_usable']} usable cores, {info['cpu_model']}, {info['python']}; "
            f"vecenv commit {info['vecenv_commit']}; load {info['load_average_start']}.",
            f"{args.rounds} rounds of {args.steps} steps per contender; env step {args.env_us} us of CPU "
            f"({result['iterations']} burn iterations); episodes of {args.episode_length} to "
            f"{2 * args.episode_length - 1} steps; collect after {args.sleep_ms:.1f} ms. CPU time of the calling "
            "thread, medians over rounds.",
            "",
            render_markdown(COLUMNS, rows_of(result, args.num_envs), [False, True, True, True, True, True]),
        ]
    )
    print(text)
    result = {"text": text, "machine": info, **result}
    write_results(result, args.output, args.json)
    return result


if __name__ == "__main__":
    main()
