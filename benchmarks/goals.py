"""The speed goals of vecenv, measured in one run: each goal's value beside the goal, met or missed.

Every goal compares contenders of one case, all built first (and reset), then stepped in ``--rounds`` rounds
of one ``--seconds`` chunk each, the order rotated every round (``scaling.interleave``); a ratio is the
median of the per-round ratios, so a machine that slows down for a while slows both sides of the ratio.

- ``cartpole-64``: ``SubprocVecEnv(env_fns)`` over 64 CartPole-v1, >= 1.4x the plain loop over the same envs;
- ``cpu-16``: over 16 ~200 us CPU envs, >= 1.9x the plain loop, or >= 0.95 of the machine's two-process capacity;
- ``image-16``: over 16 84x84x4 image envs, >= 0.6x the plain loop and >= 5x Gymnasium's
  ``AsyncVectorEnv(shared_memory=True)``;
- ``pong-8``: over 8 ``ALE/Pong-v5`` (needs ``ale-py``), >= 1.8x the plain loop;
- ``dummy-16``, ``dummy-64``: vecenv's ``DummyVecEnv`` over CartPole-v1, >= 1.0x SB3's;
- ``dummy-image-16``: vecenv's ``DummyVecEnv`` over 16 image envs, >= 1.0x SB3's.

The goals of a 16-core machine (not run by default; ``--cases sixteen`` runs them all):

- ``cartpole-1024``: ``SubprocVecEnv(env_fns)`` over 1024 CartPole-v1, >= 10x the plain loop;
- ``pong-64``: over 64 ``ALE/Pong-v5``, >= 13x the plain loop;
- ``image-128``: over 128 image envs, >= 2x the plain loop;
- ``cpu-128``: over 128 CPU envs, >= 0.95 of the machine's capacity.

``SubprocVecEnv`` runs with its defaults (workers, wait mode). The capacity is ``scaling.py``'s: the CPU
workload's ``burn`` loop in ``--capacity-procs`` processes at once over one process, measured as one more
contender of the ``cpu-16`` rounds. With ``--workload-capacity``, the other SubprocVecEnv cases measure the same
for their own env (each process stepping one env of the case, ``scaling.step_until``): how far the machine's
cores scale that env at all (shared caches, memory bandwidth, hyperthreads), beside how far vecenv scales it.
Where SB3 or ale-py cannot be imported, the row says so.

    python benchmarks/goals.py                                    # every case, 10 rounds of 0.5 s
    python benchmarks/goals.py --cases cartpole-64,dummy-16 --rounds 5 --output goals.md
    python benchmarks/goals.py --cases sixteen --rounds 5 --workload-capacity   # on a 16-core machine
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import multiprocessing as mp
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from paired import write_results
from scaling import (  # same directory: run as python benchmarks/goals.py
    CapacityProbe,
    Contender,
    add_run_options,
    batches_for,
    build,
    capacity_pool,
    interleave,
    picked,
)

from vecenv import DummyVecEnv, SubprocVecEnv
from vecenv.bench.machine import cpu_model, cpus_usable, machine_info, vecenv_commit
from vecenv.bench.tables import render_markdown
from vecenv.bench.workloads import WORKLOADS, WorkloadFactory, calibrate_cpu_iterations, register_envs

#: ``gymnasium.make`` imports ale_py (which registers its envs) before making the env, in every worker too
PONG_ID = "ale_py:ALE/Pong-v5"
COLUMNS = ["case", "contender", "measured", "goal", "result", "env-steps/s (median over rounds)"]


@dataclass(frozen=True)
class Check:
    """One goal of a case: ``value(rates)`` against ``target``; ``text`` names what the ratio is over."""

    text: str
    value: Callable[[dict[str, np.ndarray]], float]
    target: float


@dataclass(frozen=True)
class Case:
    """``contenders`` over ``num_envs`` envs of ``workload``; the goal (of ``title``, the contender measured) is
    met when any check of ``checks`` is met (``all_of``: when every one is)."""

    title: str
    workload: str
    num_envs: int
    contenders: tuple[str, ...]
    checks: tuple[Check, ...]
    all_of: bool = False
    needs: str = ""


def _over(numerator: str, denominator: str) -> Callable[[dict[str, np.ndarray]], float]:
    """The median over rounds of ``numerator``'s rate over ``denominator``'s (``capacity``: a probe's ratio)."""

    def value(rates: dict[str, np.ndarray]) -> float:
        return float(np.median(rates[numerator] / rates[denominator]))

    return value


def _over_capacity(rates: dict[str, np.ndarray]) -> float:
    return float(np.median(rates["vecenv"] / rates["plain"] / rates["capacity"]))


_SUBPROC = "SubprocVecEnv(env_fns)"
_PLAIN = _over("vecenv", "plain")
_SB3 = Check("SB3's", _over("dummy", "sb3-dummy"), 1.0)
CASES: dict[str, Case] = {
    "cartpole-64": Case(_SUBPROC, "cartpole", 64, ("plain", "vecenv"), (Check("plain loop", _PLAIN, 1.4),)),
    "cpu-16": Case(
        _SUBPROC,
        "cpu",
        16,
        ("plain", "vecenv"),
        (Check("plain loop", _PLAIN, 1.9), Check("plain loop x capacity", _over_capacity, 0.95)),
    ),
    "image-16": Case(
        _SUBPROC,
        "image",
        16,
        ("plain", "vecenv", "gym-async"),
        (
            Check("plain loop", _PLAIN, 0.6),
            Check("Gymnasium async", _over("vecenv", "gym-async"), 5.0),
        ),
        all_of=True,
    ),
    "pong-8": Case(_SUBPROC, "pong", 8, ("plain", "vecenv"), (Check("plain loop", _PLAIN, 1.8),), needs="ale_py"),
    "dummy-16": Case("DummyVecEnv", "cartpole", 16, ("dummy", "sb3-dummy"), (_SB3,), needs="stable_baselines3"),
    "dummy-64": Case("DummyVecEnv", "cartpole", 64, ("dummy", "sb3-dummy"), (_SB3,), needs="stable_baselines3"),
    "dummy-image-16": Case("DummyVecEnv", "image", 16, ("dummy", "sb3-dummy"), (_SB3,), needs="stable_baselines3"),
}
#: the cases ``--cases`` runs by default: the goals of a 2-core machine
DEFAULT_CASES = tuple(CASES)
#: the goals of a 16-core machine (``--cases sixteen``)
SIXTEEN_CORE_CASES = {
    "cartpole-1024": Case(_SUBPROC, "cartpole", 1024, ("plain", "vecenv"), (Check("plain loop", _PLAIN, 10.0),)),
    "pong-64": Case(_SUBPROC, "pong", 64, ("plain", "vecenv"), (Check("plain loop", _PLAIN, 13.0),), needs="ale_py"),
    "image-128": Case(_SUBPROC, "image", 128, ("plain", "vecenv"), (Check("plain loop", _PLAIN, 2.0),)),
    "cpu-128": Case(_SUBPROC, "cpu", 128, ("plain", "vecenv"), (Check("plain loop x capacity", _over_capacity, 0.95),)),
}
CASES.update(SIXTEEN_CORE_CASES)
_MISSING = {"ale_py": "ale-py not installed", "stable_baselines3": "SB3 not installed"}


def build_goal_contender(name: str, factory: Any, n: int, args: argparse.Namespace) -> Contender:
    """``vecenv`` (``SubprocVecEnv(env_fns)``: its defaults), ``dummy`` / ``sb3-dummy`` (vecenv's / SB3's
    ``DummyVecEnv``); ``plain`` and ``gym-async`` through ``scaling.build``."""
    if name in ("plain", "gym-async"):
        return build(name, "", factory, 0, n, args)
    if name == "vecenv":
        venv: Any = SubprocVecEnv([factory] * n)
    elif name == "dummy":
        venv = DummyVecEnv([factory] * n)
    else:
        from stable_baselines3.common.vec_env import DummyVecEnv as SB3DummyVecEnv

        venv = SB3DummyVecEnv([factory] * n)
    venv.seed(0)
    venv.reset()
    return Contender(
        name, n, venv.step, batches_for(venv.action_space, n), venv.close, venv if name == "vecenv" else None
    )


def run_goal(name: str, case: Case, args: argparse.Namespace, iterations: int) -> dict[str, Any]:
    """Build ``case``'s contenders, interleave their rounds; the record of its goal."""
    record: dict[str, Any] = {"case": name, "num_envs": case.num_envs}
    if case.needs and importlib.util.find_spec(case.needs) is None:
        return {**record, "skipped": _MISSING[case.needs]}
    if case.workload == "pong":
        factory: Any = WorkloadFactory(PONG_ID)
    else:
        factory = WORKLOADS[case.workload].factory(iterations if case.workload == "cpu" else 0)
    built: list[Contender] = []
    pool, probe = None, None
    try:
        for contender in case.contenders:
            built.append(build_goal_contender(contender, factory, case.num_envs, args))
        if case.workload == "cpu" and args.capacity_procs > 1:
            pool = capacity_pool(args.capacity_procs, iterations, args.start_method)
            probe = CapacityProbe(pool, args.capacity_procs, iterations)
        elif args.workload_capacity and args.capacity_procs > 1 and "plain" in case.contenders:
            pool = capacity_pool(args.capacity_procs, 0, args.start_method)
            probe = CapacityProbe(pool, args.capacity_procs, 0, factory)
        interleave(built, probe, args.rounds, args.seconds)
    finally:
        for c in built:
            c.close()
        if pool is not None:
            pool.shutdown()
    rates = {c.name: np.array(c.rates) for c in built}
    if probe is not None:
        rates["capacity"] = np.array(probe.rates)
    record["rates"] = {k: v.tolist() for k, v in rates.items()}
    for c in built:
        record |= c.accounts_us()  # the calling process's accounts over the timed chunks
    if "caller_us" in record and "plain" in rates and record["caller_us"] > record["busy_us"]:
        # a model, not a measurement: the rate if the calling process did no work of its own and still waited for
        # the workers as long per step
        wait_s = (record["caller_us"] - record["busy_us"]) * 1e-6
        record["x_plain_if_no_busy"] = case.num_envs / wait_s / float(np.median(rates["plain"]))
    record["checks"] = [
        {"text": check.text, "value": check.value(rates), "target": check.target}
        for check in case.checks
        if check.value is not _over_capacity or probe is not None
    ]
    met = [check["value"] >= check["target"] for check in record["checks"]]
    record["met"] = all(met) if case.all_of else any(met)
    return record


def goal_rows(records: Sequence[dict[str, Any]]) -> list[list[str]]:
    """The table's rows: one per goal."""
    rows = []
    for record in records:
        case = CASES[record["case"]]
        joiner = " and " if case.all_of else " or "
        goal = joiner.join(f">= {c.target:g}x {c.text}" for c in case.checks)
        if "skipped" in record:
            rows.append([record["case"], case.title, "-", goal, record["skipped"], "-"])
            continue
        checks = record["checks"]
        rates = ", ".join(f"{k} {float(np.median(v)):,.0f}" for k, v in record["rates"].items() if k != "capacity")
        if "caller_us" in record:
            rates += (
                f" (calling process per step: {record['caller_us']:.0f} us, busy {record['busy_us']:.0f} us, "
                f"CPU {record['cpu_us']:.0f} us)"
            )
        if "x_plain_if_no_busy" in record:
            rates += f"; with busy 0 and the same wait (a model): {record['x_plain_if_no_busy']:.2f}x plain loop"
        if "capacity" in record["rates"]:
            capacity = np.array(record["rates"]["capacity"])
            rates += f"; capacity {float(np.median(capacity)):.2f}x"
            if case.workload != "cpu":  # (the CPU cases' capacity is the burn loop's, their goal's own)
                share = np.array(record["rates"]["vecenv"]) / np.array(record["rates"]["plain"]) / capacity
                rates += f" (the env's own; vecenv at {float(np.median(share)):.2f} of it)"
        rows.append(
            [
                record["case"],
                case.title,
                joiner.join(f"{c['value']:.2f}x {c['text']}" for c in checks),
                goal,
                "met" if record["met"] else "missed",
                rates,
            ]
        )
    return rows


def parser() -> argparse.ArgumentParser:
    """The command line."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--cases",
        default=",".join(DEFAULT_CASES),
        help=f"comma-separated, among {', '.join(CASES)}; sixteen: the 16-core goals",
    )
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--seconds", type=float, default=0.5, help="duration of each contender's chunk in a round")
    p.add_argument("--max-procs", type=int, default=64, help="Gymnasium's AsyncVectorEnv: at most this many envs")
    p.add_argument(
        "--workload-capacity",
        action="store_true",
        help="also measure each SubprocVecEnv case's capacity for its own env (--capacity-procs processes each "
        "stepping one, over one process), in the same rounds",
    )
    add_run_options(p)
    return p


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the goals, print the report; return ``{"text", "records", "machine"}``."""
    args = parser().parse_args(argv)
    names = picked(args.cases.replace("sixteen", ",".join(SIXTEEN_CORE_CASES)), list(CASES), "--cases")
    register_envs()
    if importlib.util.find_spec("stable_baselines3") is not None:
        mp.set_forkserver_preload(["stable_baselines3.common.vec_env"])  # as a script importing SB3 at the top
    iterations = calibrate_cpu_iterations() if any(CASES[n].workload == "cpu" for n in names) else 0
    records = [run_goal(name, CASES[name], args, iterations) for name in names]
    info = machine_info()
    cores = cpus_usable() or os.cpu_count() or 1
    text = "\n".join(
        [
            "# vecenv speed goals",
            "",
            f"Machine: {cores} usable cores ({os.cpu_count()} CPUs), {cpu_model()}, {info['python']}; "
            f"date {dt.datetime.now(dt.timezone.utc).isoformat(timespec='seconds')}; vecenv commit "
            f"{vecenv_commit()}; load {info['load_average_start']}.",
            f"{args.rounds} interleaved rounds of {args.seconds} s per contender; ratios are medians of the per-round "
            f"ratios; SubprocVecEnv with its defaults; Gymnasium async: AsyncVectorEnv(shared_memory=True); CPU "
            f"workload {iterations} burn iterations per step. The calling process's time per vector step is its "
            "send + wait + collect (step_stats()), busy without the wait; CPU is the calling thread's CPU time "
            "(time.thread_time(): user and system, its waits' system calls and any spinning for replies included), "
            "which leaves out the time other processes held its core; 'with busy 0 and the same wait' is a model, "
            "not a measurement: num_envs over that wait, over the plain loop's rate.",
            "",
            render_markdown(COLUMNS, goal_rows(records), [False, False, False, False, False, False]),
        ]
    )
    print(text)
    result = {"text": text, "records": records, "machine": info}
    write_results(result, args.output, args.json)
    return result


if __name__ == "__main__":
    main()
