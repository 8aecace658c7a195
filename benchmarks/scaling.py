"""Scaling from 1 to 16 workers: vecenv's SubprocVecEnv against a plain loop, SB3, Gymnasium and EnvPool, in ONE
process, paired.

For each workload and each worker count W of ``--workers``, N = W x envs-per-worker envs (``--envs-per-worker``,
default ``cartpole=64,cpu=8,image=8``) and every contender is built first:

- ``plain``: the N envs stepped in a Python loop in this process (the baseline of every ratio);
- ``vecenv``: ``SubprocVecEnv(n_workers=W)`` (``wait_mode="auto"``); ``vecenv-block`` / ``vecenv-spin`` with
  ``--wait-modes``;
- ``sb3``: Stable-Baselines3's ``SubprocVecEnv`` (forkserver, the module preloaded), where it is importable;
- ``gym-async``: Gymnasium's ``AsyncVectorEnv(shared_memory=True)``;
- ``envpool``: ``envpool.make("CartPole-v1", num_envs=N, num_threads=W)`` (C++ threads), CartPole only, where
  envpool is installed.

SB3 and Gymnasium run one process per env: they get min(N, ``--max-procs``) envs (default 64), and their
env-steps/s is compared with the plain loop's over N envs (a per-env-step rate, so the counts need not match).
Then ``--rounds`` rounds step every contender for ``--seconds`` in turn (the order rotated each round); a
contender's rate is the median over rounds and its ratio the median of its per-round ratios to the plain loop.
For vecenv's rows, ``caller us/step/W`` is the calling process's send+wait+collect per vector step divided by W
(``venv.step_stats()`` over the timed chunks) and ``busy`` its send+collect part (the wall time of the calling
process's work; the wait is blocked or spinning); ``cpu`` is the CPU time the calling thread used over the timed
chunks (``time.thread_time()``: user and system time, the system calls of its waits included, and its spinning for
replies where it spins), per vector step divided by W: its work without the time other processes held its core,
which ``busy`` counts where the workers and the calling process share the cores. ``limit`` says what stops the
scaling at that W.

Before the workloads, the machine's own capacity: ``burn`` (the CPU workload's loop) in 1 process against
``--capacity-procs`` processes at once (default: the usable cores), rounds interleaved, the median ratio. It is
the ceiling of any multi-process speed-up of the CPU workload on this machine. The CPU workload's rounds measure it
again (one more chunk per round), and its rows get ``x capacity``: the median over rounds of the row's ratio to
the plain loop over that round's capacity (1.0: as fast as this machine's processes allowed).

    python benchmarks/scaling.py                                           # everything, 1..16 workers
    python benchmarks/scaling.py --workloads cpu --workers 1,2,4 --rounds 5 --seconds 0.3
    python benchmarks/scaling.py --contenders plain,vecenv --wait-modes block,spin --output scaling.md
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import multiprocessing as mp
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np
from paired import rate, write_results  # same directory: run as python benchmarks/scaling.py

from vecenv import SubprocVecEnv
from vecenv.bench.adapters import GymVectorAdapter, PlainLoop
from vecenv.bench.machine import cpu_model, cpus_usable, machine_info, vecenv_commit
from vecenv.bench.tables import render_markdown
from vecenv.bench.workloads import WORKLOADS, burn, calibrate_cpu_iterations, register_envs

CONTENDERS = ("plain", "vecenv", "sb3", "gym-async", "envpool")
COLUMNS = [
    "workload",
    "W",
    "envs",
    "contender",
    "env-steps/s",
    "x plain",
    "caller us/step/W",
    "busy us/step/W",
    "cpu us/step/W",
    "x capacity",
    "limit",
]
ACTION_BATCHES = 16


def burn_until(iterations: int, start: float, seconds: float) -> float:
    """Wait for wall time ``start``, then call ``burn(iterations)`` until ``start + seconds``, at least once (a
    process that a busy machine schedules after the window still measures one call); return the calls per second
    of this process's own calls (always > 0)."""
    while time.time() < start:
        pass
    began, calls = time.perf_counter(), 0
    while calls == 0 or time.time() < start + seconds:
        burn(iterations)
        calls += 1
    return calls / max(time.perf_counter() - began, 1e-9)


#: per process of a capacity pool: the env that :func:`step_until` steps for a factory, and its actions
_STEPPED: dict[str, tuple[Any, list[Any]]] = {}


def step_until(factory: Callable[[], Any], start: float, seconds: float) -> float:
    """Like :func:`burn_until`, stepping one env of ``factory`` (built and reset the first time this process
    sees the factory, then kept; seeded random actions, reset when an episode ends): env-steps per second."""
    key = repr(factory)
    if key not in _STEPPED:
        env = factory()
        env.reset(seed=0)
        env.action_space.seed(0)
        _STEPPED[key] = (env, [env.action_space.sample() for _ in range(64)])
    env, actions = _STEPPED[key]
    while time.time() < start:
        pass
    began, steps = time.perf_counter(), 0
    while steps == 0 or time.time() < start + seconds:
        _, _, terminated, truncated, _ = env.step(actions[steps % 64])
        if terminated or truncated:
            env.reset()
        steps += 1
    return steps / max(time.perf_counter() - began, 1e-9)


def capacity_round(
    pool: ProcessPoolExecutor,
    procs: int,
    iterations: int,
    seconds: float,
    flip: bool,
    factory: Callable[[], Any] | None = None,
) -> float:
    """One round of the machine's capacity: burns/s of ``procs`` processes at once over 1 process (each side the
    sum of its processes' own rates, each > 0, so the ratio is always defined); with ``factory``, env-steps/s of
    one env of it per process (:func:`step_until`) instead: the capacity for that workload."""
    rates = {}
    for n in (procs, 1) if flip else (1, procs):
        start = time.time() + 0.05
        if factory is None:
            rates[n] = sum(pool.map(burn_until, [iterations] * n, [start] * n, [seconds] * n))
        else:
            rates[n] = sum(pool.map(step_until, [factory] * n, [start] * n, [seconds] * n))
    return rates[procs] / rates[1]


def capacity_pool(procs: int, iterations: int, start_method: str) -> ProcessPoolExecutor:
    """The ``procs`` processes that burn for :func:`capacity_round`, started (fork where there is one: the task is
    this module's function, and the start method does not matter here)."""
    method = "fork" if "fork" in mp.get_all_start_methods() else start_method
    pool = ProcessPoolExecutor(procs, mp_context=mp.get_context(method))
    list(pool.map(burn_until, [iterations] * procs, [time.time()] * procs, [0.05] * procs))  # warm
    return pool


class CapacityProbe:
    """The machine's capacity as one more contender of a workload's rounds: each chunk is one round (the burn
    loop's capacity; with ``factory``, that env's own, :func:`step_until`)."""

    name = "capacity"

    def __init__(
        self, pool: ProcessPoolExecutor, procs: int, iterations: int, factory: Callable[[], Any] | None = None
    ) -> None:
        self.pool, self.procs, self.iterations, self.factory = pool, procs, iterations, factory
        self.rates: list[float] = []  # per-round ratios
        if factory is not None:  # the pool's processes build their envs outside the measured rounds
            for flip in (False, True):
                capacity_round(pool, procs, iterations, 0.05, flip, factory)

    def chunk(self, seconds: float) -> None:
        """One capacity round of ``seconds`` per side."""
        flip = len(self.rates) % 2 == 1
        self.rates.append(capacity_round(self.pool, self.procs, self.iterations, seconds, flip, self.factory))


class Contender:
    """One stepping function over ``num_envs`` envs; ``venv`` (vecenv only) answers ``step_stats()``."""

    def __init__(
        self,
        name: str,
        num_envs: int,
        step: Callable[[Any], None],
        batches: Sequence[Any],
        close: Callable[[], None],
        venv: Any = None,
        outer: bool = False,
    ) -> None:
        self.name, self.num_envs, self._step, self.batches, self.close = name, num_envs, step, batches, close
        self.venv = venv
        #: ``venv`` is the vector env inside ``step`` (e.g. of PettingZoo's env copies, under their rows): the
        #: calling process's time per step is then the whole ``step`` (the outer layer's work included), and busy
        #: that time less ``venv``'s wait
        self.outer = outer
        self.count = 0
        self.rates: list[float] = []
        self.reset_accounts()

    def reset_accounts(self) -> None:
        """Forget the calling process's accounts (``caller``): send+wait+collect seconds, send+collect seconds,
        vector steps, and the calling thread's CPU seconds."""
        self.caller: list[float] = [0.0, 0.0, 0, 0.0]

    def one(self) -> None:
        """One vector step, with the next batch of actions."""
        self.count += 1
        self._step(self.batches[self.count % len(self.batches)])

    def chunk(self, seconds: float) -> None:
        """Time one chunk; add the calling process's accounts over it (vecenv)."""
        before = self.venv.step_stats() if self.venv is not None else None
        started, cpu = time.perf_counter(), time.thread_time()
        self.rates.append(rate(self.one, self.num_envs, seconds))
        if before is not None:
            elapsed, cpu = time.perf_counter() - started, time.thread_time() - cpu
            after = self.venv.step_stats()
            wait = after.wait_seconds - before.wait_seconds
            if self.outer:
                busy = elapsed - wait
            else:
                busy = (after.send_seconds - before.send_seconds) + (after.collect_seconds - before.collect_seconds)
            self.caller[0] += busy + wait
            self.caller[1] += busy
            self.caller[2] += after.steps - before.steps
            self.caller[3] += cpu

    def accounts_us(self, per: int = 1) -> dict[str, float]:
        """The calling process's accounts per vector step (divided by ``per``), in us: ``caller_us`` (send + wait +
        collect), ``busy_us`` (send + collect) and ``cpu_us`` (the calling thread's CPU); empty if none counted."""
        total, busy, steps, cpu = self.caller
        if self.venv is None or not steps:
            return {}
        scale = 1e6 / steps / per
        return {"caller_us": total * scale, "busy_us": busy * scale, "cpu_us": cpu * scale}


def interleave(built: Sequence[Contender], probe: CapacityProbe | None, rounds: int, seconds: float) -> None:
    """Warm every contender up (first steps, page faults), then ``rounds`` rounds of one ``seconds`` chunk per
    contender (and per ``probe``), the order rotated each round; the chunks' rates land in each ``rates``."""
    for c in built:
        rate(c.one, c.num_envs, min(0.1, seconds))
        c.rates.clear()
    rotation: list[Contender | CapacityProbe] = [*built, *([probe] if probe is not None else [])]
    for r in range(rounds):
        shift = r % len(rotation)
        for c in rotation[shift:] + rotation[:shift]:
            c.chunk(seconds)


def batches_for(space: Any, n: int) -> list[np.ndarray]:
    """Seeded action batches ``(n, ...)``, cycled."""
    space.seed(0)
    return [np.stack([space.sample() for _ in range(n)]) for _ in range(ACTION_BATCHES)]


def build(name: str, workload: str, factory: Any, workers: int, n: int, args: argparse.Namespace) -> Contender:
    """Build and reset contender ``name`` (``plain``, ``vecenv[-mode]``, ``sb3``, ``gym-async``, ``envpool``)."""
    if name == "plain":
        plain = PlainLoop([factory] * n)
        plain.reset()
        per_env = [plain.prepare(b) for b in batches_for(plain.action_space, n)]
        return Contender(name, n, plain.step, per_env, plain.close)
    if name.startswith("vecenv"):
        mode = name.partition("-")[2] or "auto"
        venv = SubprocVecEnv([factory] * n, n_workers=workers, start_method=args.start_method, wait_mode=mode)
        venv.seed(0)
        venv.reset()
        return Contender(name, n, venv.step, batches_for(venv.action_space, n), venv.close, venv)
    procs = min(n, args.max_procs)
    if name == "sb3":
        from stable_baselines3.common.vec_env import SubprocVecEnv as SB3SubprocVecEnv

        sb3 = SB3SubprocVecEnv([factory] * procs, start_method=args.start_method)
        sb3.seed(0)
        sb3.reset()
        return Contender(name, procs, sb3.step, batches_for(sb3.action_space, procs), sb3.close)
    if name == "gym-async":
        import gymnasium as gym

        adapter = GymVectorAdapter(gym.vector.AsyncVectorEnv([factory] * procs, shared_memory=True))
        adapter.reset()
        return Contender(name, procs, adapter.step, batches_for(adapter.action_space, procs), adapter.close)
    if name == "envpool":
        import envpool

        pool = envpool.make("CartPole-v1", env_type="gymnasium", num_envs=n, num_threads=workers, seed=0)
        pool.reset()
        return Contender(name, n, pool.step, batches_for(pool.action_space, n), pool.close)
    raise ValueError(f"unknown contender {name!r}")


def unavailable(name: str, workload: str, workers: int, n: int, args: argparse.Namespace) -> str | None:
    """Why contender ``name`` is skipped for this case, or None."""
    if name == "sb3" and importlib.util.find_spec("stable_baselines3") is None:
        return "stable_baselines3 not importable"
    if name == "envpool" and (workload != "cartpole" or importlib.util.find_spec("envpool") is None):
        return "envpool: CartPole only" if workload != "cartpole" else "envpool not installed"
    if name in ("sb3", "gym-async") and workers > args.max_workers_procs:
        return f"W > --max-workers-procs {args.max_workers_procs}"
    return None


def limit(row: dict[str, Any], env_us: float, cores: int) -> str:
    """What stops the scaling of a worker-process row: the cores, or the calling process's CPU per step."""
    workers = row["W"]
    notes = []
    if row["contender"] == "envpool":  # C++ threads, the calling thread waits
        return f"cores: W threads > {cores}" if workers > cores else "-"
    if workers + 1 > cores:  # the calling process needs a core too
        notes.append(f"cores: W workers + caller > {cores}")
    busy = row.get("busy_us")
    if busy is not None:
        env_per_worker = env_us * row["envs"] / workers  # one worker's env time per vector step
        if busy * workers >= env_per_worker:
            notes.append(f"caller: {busy * workers:.0f} us >= env {env_per_worker:.0f} us per step")
    return "; ".join(notes) or "-"


def run_case(
    workload: str, workers: int, factory: Any, args: argparse.Namespace, probe: CapacityProbe | None = None
) -> list[dict[str, Any]]:
    """Every contender at W = ``workers``, in paired interleaved rounds; one record per contender. With ``probe``,
    each round also measures the machine's capacity, and each row gets its ratio to the plain loop over it."""
    n = args.envs_per_worker[workload] * workers
    names = ["plain", *(c for c in args.contenders if c != "plain")]
    skipped: dict[str, str] = {}
    built: list[Contender] = []
    try:
        for name in names:
            why = unavailable(name.partition("-")[0] if name.startswith("vecenv") else name, workload, workers, n, args)
            if why is not None:
                skipped[name] = why
                continue
            built.append(build(name, workload, factory, workers, n, args))
        interleave(built, probe, args.rounds, args.seconds)
    finally:
        for c in built:
            c.close()
    plain = np.array(built[0].rates)
    records: dict[str, dict[str, Any]] = {
        name: {"workload": workload, "W": workers, "envs": n, "contender": name, "skipped": why}
        for name, why in skipped.items()
    }
    for c in built:
        rates = np.array(c.rates)
        record: dict[str, Any] = {
            "workload": workload,
            "W": workers,
            "envs": c.num_envs,
            "contender": c.name,
            "rates": c.rates,
            "rate": float(np.median(rates)),
            "x_plain": float(np.median(rates / plain)),
        }
        if probe is not None:
            record["x_capacity"] = float(np.median(rates / plain / np.array(probe.rates)))
            record["capacity_ratios"] = probe.rates
        record |= c.accounts_us(workers)
        records[c.name] = record
    return [records[name] for name in names]


def table(records: list[dict[str, Any]], cores: int) -> str:
    """The Markdown table of ``records`` (``limit`` from the plain loop's per-env-step time at W = 1)."""
    plain_us = {
        r["workload"]: 1e6 / r["rate"]
        for r in records
        if r["contender"] == "plain" and r["W"] == min(x["W"] for x in records if x["workload"] == r["workload"])
    }
    rows = []
    for r in records:
        if "skipped" in r:
            blank = [""] * (len(COLUMNS) - 6)  # the measured columns
            rows.append([r["workload"], str(r["W"]), str(r["envs"]), r["contender"], "skipped", *blank, r["skipped"]])
            continue
        worker_row = r["contender"] != "plain"
        rows.append(
            [
                r["workload"],
                str(r["W"]),
                str(r["envs"]),
                r["contender"],
                f"{r['rate']:,.0f}",
                f"{r['x_plain']:.3f}",
                f"{r['caller_us']:.1f}" if "caller_us" in r else "",
                f"{r['busy_us']:.1f}" if "busy_us" in r else "",
                f"{r['cpu_us']:.1f}" if "cpu_us" in r else "",
                f"{r['x_capacity']:.3f}" if "x_capacity" in r else "",
                limit(r, plain_us[r["workload"]], cores) if worker_row else "-",
            ]
        )
    return render_markdown(COLUMNS, rows, [False, True, True, False, True, True, True, True, True, True, False])


def scaling_lines(records: list[dict[str, Any]]) -> list[str]:
    """Per workload: the W at which vecenv's throughput peaks."""
    lines = []
    for workload in dict.fromkeys(r["workload"] for r in records):
        rows = [r for r in records if r["workload"] == workload and r["contender"] == "vecenv" and "rate" in r]
        if rows:
            best = max(rows, key=lambda r: r["rate"])
            caps = [f"W={r['W']}: {np.median(r['capacity_ratios']):.2f}x" for r in rows if "capacity_ratios" in r]
            lines.append(
                f"- {workload}: vecenv peaks at W={best['W']} ({best['rate']:,.0f} env-steps/s, "
                f"{best['x_plain']:.2f}x plain); "
                + ", ".join(f"W={r['W']}: {r['x_plain']:.2f}x" for r in rows)
                + (f"; capacity in the same rounds: {', '.join(caps)}" if caps else "")
            )
    return lines


def parse_envs_per_worker(text: str) -> dict[str, int]:
    """``"cartpole=64,cpu=8"`` -> ``{"cartpole": 64, "cpu": 8}`` over the defaults."""
    out = {"cartpole": 64, "cpu": 8, "image": 8}
    for item in filter(None, text.split(",")):
        name, _, value = item.partition("=")
        if name not in WORKLOADS or not value.isdigit() or int(value) < 1:
            raise argparse.ArgumentTypeError(f"--envs-per-worker expects workload=count (got {item!r})")
        out[name] = int(value)
    return out


def picked(text: str, allowed: Sequence[str], option: str) -> list[str]:
    """The comma-separated names of ``text``; exits naming ``option`` if one is not in ``allowed``."""
    names = [name for name in text.split(",") if name]
    for name in names:
        if name not in allowed:
            raise SystemExit(
                f"{option}: unknown {option.strip('-').rstrip('s')} {name!r} (expected among {', '.join(allowed)})"
            )
    return names


def add_run_options(p: argparse.ArgumentParser) -> None:
    """The options this script shares with ``goals.py``: capacity processes, start method, outputs."""
    p.add_argument("--capacity-procs", type=int, default=cpus_usable() or os.cpu_count() or 1)
    p.add_argument("--start-method", default="forkserver")
    p.add_argument("--output", help="also write the report (Markdown) here")
    p.add_argument("--json", help="also write every round's rates (JSON) here")


def parser() -> argparse.ArgumentParser:
    """The command line."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workloads", default="cartpole,cpu,image")
    p.add_argument("--workers", default="1,2,4,8,16", help="comma-separated worker counts W")
    p.add_argument("--envs-per-worker", type=parse_envs_per_worker, default=parse_envs_per_worker(""))
    p.add_argument("--contenders", default=",".join(CONTENDERS), help=f"among {', '.join(CONTENDERS)}")
    p.add_argument("--wait-modes", default="", help="extra vecenv rows: block, spin (comma-separated)")
    p.add_argument("--max-procs", type=int, default=64, help="SB3 / Gymnasium: at most this many envs (1 per process)")
    p.add_argument("--max-workers-procs", type=int, default=16, help="skip SB3 / Gymnasium above this W")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--seconds", type=float, default=0.3, help="duration of each contender's chunk in a round")
    p.add_argument("--capacity-rounds", type=int, default=6, help="0: skip the capacity measurement")
    add_run_options(p)
    return p


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark, print the report; return ``{"text", "records", "capacity", "machine"}``."""
    args = parser().parse_args(argv)
    workloads = picked(args.workloads, list(WORKLOADS), "--workloads")
    contenders = picked(args.contenders, CONTENDERS, "--contenders")
    modes = [m for m in args.wait_modes.split(",") if m]
    args.contenders = contenders + [f"vecenv-{m}" for m in modes if "vecenv" in contenders]
    worker_counts = [int(w) for w in args.workers.split(",") if w]
    register_envs()
    if "sb3" in contenders and importlib.util.find_spec("stable_baselines3") is not None:
        mp.set_forkserver_preload(["stable_baselines3.common.vec_env"])  # as a script importing SB3 at the top
    iterations = calibrate_cpu_iterations()
    cores = cpus_usable() or os.cpu_count() or 1
    cap = None
    records: list[dict[str, Any]] = []
    pool = capacity_pool(args.capacity_procs, iterations, args.start_method) if args.capacity_rounds > 0 else None
    try:
        if pool is not None:
            ratios = [
                capacity_round(pool, args.capacity_procs, iterations, args.seconds, r % 2 == 1)
                for r in range(args.capacity_rounds)
            ]
            cap = {"procs": args.capacity_procs, "ratios": ratios, "median": float(np.median(ratios))}
        for workload in workloads:
            factory = WORKLOADS[workload].factory(iterations if workload == "cpu" else 0)
            for workers in worker_counts:
                probe = None
                if pool is not None and workload == "cpu":
                    probe = CapacityProbe(pool, args.capacity_procs, iterations)
                records.extend(run_case(workload, workers, factory, args, probe))
    finally:
        if pool is not None:
            pool.shutdown()
    info = machine_info()
    lines = [
        f"# Scaling: {', '.join(workloads)}; W = {args.workers}",
        "",
        f"Machine: {cores} usable cores ({os.cpu_count()} CPUs), {cpu_model()}, {info['python']}; "
        f"date {dt.datetime.now(dt.timezone.utc).isoformat(timespec='seconds')}; vecenv commit {vecenv_commit()}; "
        f"load {info['load_average_start']}.",
        f"Envs per worker: {', '.join(f'{w}={args.envs_per_worker[w]}' for w in workloads)}; SB3 / Gymnasium: one "
        f"env per process, at most {args.max_procs}; {args.rounds} rounds of {args.seconds} s per contender; "
        f"CPU workload {iterations} burn iterations per step; start method {args.start_method}.",
    ]
    if cap is not None:
        lines.append(
            f"Machine capacity: {cap['procs']} processes of burn at once = {cap['median']:.3f}x one process "
            f"(median of {len(cap['ratios'])} rounds; {min(cap['ratios']):.2f}..{max(cap['ratios']):.2f}); "
            f"95% of it: {0.95 * cap['median']:.3f}x. In the CPU workload's rounds too: `x capacity` is the "
            "median over rounds of the row's ratio to the plain loop over that round's capacity."
        )
    lines += ["", table(records, cores), "", "Where scaling stops:", *scaling_lines(records)]
    text = "\n".join(lines)
    print(text)
    result = {"text": text, "records": records, "capacity": cap, "machine": info}
    write_results(result, args.output, args.json)
    return result


if __name__ == "__main__":
    main()
