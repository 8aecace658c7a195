"""Per-env-step overhead of the in-process vector envs over a plain loop, measured in ONE process.

`vecenv bench` times each backend in its own process, so the difference between two separately measured
rates (what "overhead" means there) carries the machine's drift between processes: on a noisy 2-core VM
it swings by several microseconds and even turns negative. Here the plain loop, vecenv's DummyVecEnv and
(if installed) SB3's DummyVecEnv run on the same envs' copies in one process, in interleaved rounds
(plain, vecenv, SB3, plain, ...); the overhead of a round is ``(t_backend - t_plain) / (steps * N)`` with
the plain time of the same round, and the table reports the median over rounds.

    python benchmarks/dummy_overhead.py --rounds 15 --steps 300 --output benchmarks/snapshots/dummy-overhead.md
"""

from __future__ import annotations

import argparse
import importlib
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from tqdm import tqdm

from vecenv import DummyVecEnv
from vecenv.bench.report import _markdown
from vecenv.bench.runner import PlainLoop, VecEnvAdapter
from vecenv.bench.workloads import WORKLOADS, calibrate_cpu_iterations, register_envs


def timed(backend: Any, batches: list[Any]) -> float:
    """Seconds to step ``backend`` through every batch of actions."""
    start = time.perf_counter()
    for actions in batches:
        backend.step(actions)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default="cartpole,image,cpu")
    parser.add_argument("--num-envs", default="1,4,16,64")
    parser.add_argument("--rounds", type=int, default=15, help="interleaved rounds (median reported)")
    parser.add_argument("--steps", type=int, default=300, help="vector steps per backend per round")
    parser.add_argument("--output", type=Path, default=None, help="also write the Markdown table here")
    args = parser.parse_args()
    register_envs()
    try:
        sb3 = importlib.import_module("stable_baselines3.common.vec_env")
    except ImportError:
        sb3 = None
    cpu_iterations = calibrate_cpu_iterations()
    rows = []
    cases = [(w, int(n)) for w in args.workloads.split(",") for n in args.num_envs.split(",")]
    for workload, n in tqdm(cases, desc="cases"):
        factory = WORKLOADS[workload].factory(cpu_iterations)
        steps = max(10, args.steps // (20 if workload == "cpu" else 1))
        fns = [factory] * n
        backends: dict[str, Any] = {
            "plain": PlainLoop(fns),
            "vecenv-dummy": VecEnvAdapter(DummyVecEnv(fns)),
        }
        if sb3 is not None:
            backends["sb3-dummy"] = VecEnvAdapter(sb3.DummyVecEnv(fns))
        space = backends["plain"].action_space
        space.seed(0)
        raw = [np.array([space.sample() for _ in range(n)]) for _ in range(steps)]
        prepared = {name: [b.prepare(a) for a in raw] for name, b in backends.items()}
        for name, backend in backends.items():
            backend.reset()
            timed(backend, prepared[name])  # warm-up round, not counted
        overheads: dict[str, list[float]] = {name: [] for name in backends if name != "plain"}
        for _ in range(args.rounds):
            plain = timed(backends["plain"], prepared["plain"])
            for name, values in overheads.items():
                values.append((timed(backends[name], prepared[name]) - plain) / (steps * n) * 1e6)
        plain_us = plain / (steps * n) * 1e6
        for name, values in overheads.items():
            rows.append(
                {
                    "workload": workload,
                    "N": n,
                    "backend": name,
                    "plain us/env-step": round(plain_us, 2),
                    "overhead us/env-step (median)": round(float(np.median(values)), 2),
                    "p25": round(float(np.percentile(values, 25)), 2),
                    "p75": round(float(np.percentile(values, 75)), 2),
                }
            )
        for backend in backends.values():
            backend.close()
    frame = pd.DataFrame(rows)
    cells = [[str(value) for value in row] for row in frame.values.tolist()]
    table = _markdown(list(frame.columns), cells, [False, True, False, True, True, True, True])
    print(table)
    if args.output is not None:
        tmp = args.output.with_suffix(".tmp")
        tmp.write_text(table + "\n")
        tmp.replace(args.output)


if __name__ == "__main__":
    main()
