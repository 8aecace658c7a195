"""What ``from_gymnasium`` and vecenv's wrappers cost on top of an EnvPool pool, measured in ONE process.

Rounds of ``--seconds`` alternate the raw pool, ``from_gymnasium(pool)``, ``VecMonitor`` over it and
``VecNormalize(VecMonitor(...))``, each over its own pool of the same env, seed and actions, so machine drift
hits all alike; each layer is reported in env-steps/s (median over rounds) and as the extra microseconds per
env-step over the raw pool of the same round (median and quartiles). The raw pool resets finished envs on its
next step; the adapter resets them in the same step (SB3's rule) with ``reset(env_id=ids)``, one more call into
EnvPool per step that has an episode end, which ``resets per step`` counts.

    python benchmarks/envpool_adapter.py                 # CartPole-v1, 64 envs
    python benchmarks/envpool_adapter.py --num-envs 16 --rounds 9
"""

from __future__ import annotations

import argparse
import os
import platform
import warnings
from datetime import datetime, timezone
from typing import Any

import numpy as np
from paired import rate, report  # same directory: run as python benchmarks/envpool_adapter.py
from tqdm import tqdm

from vecenv import VecMonitor, VecNormalize
from vecenv.adapters import from_gymnasium


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env-id", default="CartPole-v1")
    parser.add_argument("--num-envs", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--seconds", type=float, default=1.0, help="duration of each contender in each round")
    parser.add_argument("--output", default=None, help="also write the table to this Markdown file")
    args = parser.parse_args()
    import envpool

    n = args.num_envs

    def pool() -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # gymnasium warns about EnvPool's float64 Box bounds
            return envpool.make(args.env_id, env_type="gymnasium", num_envs=n, seed=0)

    raw = pool()
    layers = {
        "EnvPool pool": raw,
        "from_gymnasium(pool)": from_gymnasium(pool()),
        "VecMonitor(from_gymnasium(pool))": VecMonitor(from_gymnasium(pool())),
        "VecNormalize(VecMonitor(from_gymnasium(pool)))": VecNormalize(VecMonitor(from_gymnasium(pool()))),
    }
    space = raw.single_action_space
    space.seed(0)
    batches = [np.stack([space.sample() for _ in range(n)]) for _ in range(64)]
    steppers = {}
    ends: dict[str, list[int]] = {}
    for label, venv in layers.items():
        venv.reset()
        position, count = [0], [0, 0]

        def step(venv: Any = venv, position: list[int] = position, count: list[int] = count) -> None:
            result = venv.step(batches[position[0] % 64])
            position[0] += 1
            count[0] += 1
            count[1] += bool(np.asarray(result[2]).any())  # dones (VecEnv) or terminated (pool)

        steppers[label] = step
        ends[label] = count
        rate(step, n, 0.3)  # warm-up
    results: dict[str, list[float]] = {label: [] for label in layers}
    for _ in tqdm(range(args.rounds), desc=f"{args.env_id} N={n}"):
        for label, step in steppers.items():
            results[label].append(rate(step, n, args.seconds))
    rows = []
    base = np.array(results["EnvPool pool"])
    for label in layers:
        rates = np.array(results[label])
        extra = 1e6 / rates - 1e6 / base  # us per env-step over the raw pool, per round
        steps, with_end = ends[label]
        rows.append(
            {
                "layer": label,
                "env-steps/s": f"{np.median(rates):,.0f}",
                "x pool": f"{np.median(rates / base):.2f}",
                "extra us/env-step": f"{np.median(extra):+.2f}",
                "p25..p75": f"{np.quantile(extra, 0.25):+.2f}..{np.quantile(extra, 0.75):+.2f}",
                "steps with an episode end": f"{with_end / max(steps, 1):.0%}",
            }
        )
    for venv in layers.values():
        venv.close()
    header = (
        f"Machine: {os.cpu_count()} cores ({platform.machine()}); Python {platform.python_version()}; EnvPool "
        f"{envpool.__version__}; {args.env_id}, {n} envs; {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; "
        f"{args.rounds} rounds of ~{args.seconds} s per contender."
    )
    report(header, rows, [False, True, True, True, True, True], args.output)


if __name__ == "__main__":
    main()
