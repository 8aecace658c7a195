"""SubprocVecEnv layouts, with and without ``parent_envs``, against a plain loop, measured in ONE process.

Every layout ``W:K`` is ``SubprocVecEnv(n_workers=W, parent_envs=K)`` on the same workload; rounds of
``--seconds`` alternate the plain loop and every layout, so machine drift hits all alike, and each layout
is reported as its paired median ratio to the plain loop of the same round (and to the first layout, the
reference). This is the measurement behind ``parent_envs`` in docs/backends.md and docs/performance.md.

    python benchmarks/parent_envs.py --rounds 12                         # 64 CartPoles: 2:0 vs 1:32 ...
    python benchmarks/parent_envs.py --workload cpu --num-envs 16 --layouts 2:0,1:8
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np
import pandas as pd
from paired import rate  # same directory: run as python benchmarks/parent_envs.py
from tqdm import tqdm

from vecenv import SubprocVecEnv
from vecenv.bench.report import _markdown
from vecenv.bench.runner import PlainLoop
from vecenv.bench.workloads import WORKLOADS, calibrate_cpu_iterations, register_envs


def layout(text: str) -> tuple[int, int]:
    """``"W:K"`` -> ``(n_workers, parent_envs)``."""
    workers, _, parent = text.partition(":")
    return int(workers), int(parent or 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", choices=sorted(WORKLOADS), default="cartpole")
    parser.add_argument("--num-envs", type=int, default=64)
    parser.add_argument("--layouts", default="2:0,1:32,1:28,1:36", help="comma-separated n_workers:parent_envs")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--seconds", type=float, default=1.0, help="duration of each contender in each round")
    parser.add_argument("--start-method", default="forkserver")
    args = parser.parse_args()
    register_envs()
    n = args.num_envs
    factory = WORKLOADS[args.workload].factory(calibrate_cpu_iterations() if args.workload == "cpu" else 0)
    plain = PlainLoop([factory] * n)
    plain.reset()
    space = plain.action_space
    space.seed(0)
    batches = [np.stack([space.sample() for _ in range(n)]) for _ in range(16)]
    per_env = [plain.prepare(batch) for batch in batches]
    venvs = {}
    for text in args.layouts.split(","):
        workers, parent = layout(text)
        venvs[text] = SubprocVecEnv(
            [factory] * n, n_workers=workers, parent_envs=parent, start_method=args.start_method
        )
        venvs[text].reset()
    counter = [0]

    def stepper(step: Any, actions: list[Any]) -> Any:
        def one() -> None:
            counter[0] += 1
            step(actions[counter[0] % len(actions)])

        return one

    contenders = {"plain": stepper(plain.step, per_env)}
    contenders.update({text: stepper(venv.step, batches) for text, venv in venvs.items()})
    rates: dict[str, list[float]] = {name: [] for name in contenders}
    try:
        for _ in tqdm(range(args.rounds), desc="rounds"):
            for name, one in contenders.items():
                rates[name].append(rate(one, n, args.seconds))
    finally:
        for venv in venvs.values():
            venv.close()
        plain.close()
    plain_rates = np.array(rates["plain"])
    reference = np.array(rates[next(iter(venvs))])
    rows = []
    for name, values in rates.items():
        ratios = np.array(values) / plain_rates
        rows.append(
            {
                "layout (n_workers:parent_envs)": name,
                "env-steps/s (median)": f"{np.median(values):,.0f}",
                "x plain (paired median)": f"{np.median(ratios):.3f}",
                "x plain min..max": f"{ratios.min():.2f}..{ratios.max():.2f}",
                "x first layout (paired median)": f"{np.median(np.array(values) / reference):.3f}",
            }
        )
    frame = pd.DataFrame(rows)
    print(f"{args.workload}, N={n}, {args.rounds} rounds of {args.seconds} s")
    print(_markdown(list(frame.columns), frame.values.tolist(), [False, True, True, True, True]))


if __name__ == "__main__":
    main()
