"""RayVecEnv beside SubprocVecEnv and a plain loop, on a local Ray and on a simulated multi-node cluster.

For each workload, rounds of ``--seconds`` alternate the plain loop, ``SubprocVecEnv`` (default layout) and
``RayVecEnv`` (``--actors`` actors, envs split evenly), so machine drift hits all alike; each is reported in
env-steps/s (median over rounds) and as its paired median ratio to the plain loop of the same round. With
``--cluster``, RayVecEnv runs on a ``ray.cluster_utils.Cluster`` of this machine instead of a plain local
Ray: a head with no CPUs and ``--actors`` nodes of one CPU each, the actors spread over the nodes (their
calls and replies then go through Ray's cross-node paths, though the nodes share this machine's cores).

    python benchmarks/ray_layouts.py                    # cartpole N=64, cpu N=16 and N=64, local Ray
    python benchmarks/ray_layouts.py --cluster          # the same on a simulated 2-node cluster
    python benchmarks/ray_layouts.py --workloads cpu --num-envs 16 --rounds 5
"""

from __future__ import annotations

import argparse
import os
import platform
import secrets
from datetime import datetime, timezone
from typing import Any

import numpy as np
from paired import rate, report  # same directory: run as python benchmarks/ray_layouts.py
from tqdm import tqdm

from vecenv import RayVecEnv, SubprocVecEnv
from vecenv.bench.runner import PlainLoop
from vecenv.bench.workloads import WORKLOADS, calibrate_cpu_iterations, register_envs


def stepper(step: Any, batches: list[Any], reset: Any = None) -> Any:
    """A no-argument function stepping through ``batches`` in a cycle (after ``reset()``, if given)."""
    if reset is not None:
        reset()
    position = [0]

    def run() -> None:
        step(batches[position[0] % len(batches)])
        position[0] += 1

    return run


def start_ray(cluster: bool, actors: int) -> Any:
    """Start a local Ray (one CPU per core of this machine) or a simulated cluster; returns the cluster or None."""
    import ray

    os.environ.setdefault("RAY_AUTH_TOKEN", secrets.token_hex(16))  # nothing written to ~/.ray
    if not cluster:
        ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
        return None
    from ray.cluster_utils import Cluster

    sim = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
    for _ in range(actors):
        sim.add_node(num_cpus=1)
    sim.wait_for_nodes()
    ray.init(address=sim.address, log_to_driver=False)
    return sim


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default="cartpole,cpu,cpu", help="comma-separated (default: %(default)s)")
    parser.add_argument("--num-envs", default="64,16,64", help="N per workload, comma-separated (default: %(default)s)")
    parser.add_argument("--actors", type=int, default=2, help="RayVecEnv actors (default: %(default)s)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--seconds", type=float, default=1.0, help="duration of each contender in each round")
    parser.add_argument("--cluster", action="store_true", help="a simulated cluster of one-CPU nodes")
    parser.add_argument("--output", default=None, help="also write the table to this Markdown file")
    args = parser.parse_args()
    import ray

    register_envs()
    sim = start_ray(args.cluster, args.actors)
    rows = []
    try:
        cpu_iterations = calibrate_cpu_iterations()
        workloads = args.workloads.split(",")
        sizes = [int(n) for n in args.num_envs.split(",")]
        for name, n in zip(workloads, sizes, strict=True):
            factory = WORKLOADS[name].factory(cpu_iterations if name == "cpu" else None)
            fns = [factory] * n
            plain = PlainLoop(fns, seed=0)
            subproc = SubprocVecEnv(fns)
            ray_venv = RayVecEnv(fns, n_workers=args.actors, actor_options={"num_cpus": 1})
            nodes = len(set(ray_venv.node_ids))
            rng = np.random.default_rng(0)
            batches = [rng.integers(0, 2, n) for _ in range(64)]
            plain.reset()
            contenders = {
                "plain": stepper(plain.step, [plain.prepare(actions) for actions in batches]),
                "subproc": stepper(subproc.step, batches, subproc.reset),
                "ray": stepper(ray_venv.step, batches, ray_venv.reset),
            }
            for step in contenders.values():  # warm-up
                rate(step, n, 0.3)
            results: dict[str, list[float]] = {label: [] for label in contenders}
            for _ in tqdm(range(args.rounds), desc=f"{name} N={n}"):
                for label, step in contenders.items():
                    results[label].append(rate(step, n, args.seconds))
            for label in ("subproc", "ray"):
                ratios = np.array(results[label]) / np.array(results["plain"])
                rows.append(
                    {
                        "workload": name,
                        "N": n,
                        "backend": "SubprocVecEnv" if label == "subproc" else f"RayVecEnv ({args.actors} actors)",
                        "env-steps/s": f"{np.median(results[label]):,.0f}",
                        "x plain": f"{np.median(ratios):.2f}",
                        "x plain p25..p75": f"{np.quantile(ratios, 0.25):.2f}..{np.quantile(ratios, 0.75):.2f}",
                        "ms per vector step": f"{1000 * n / np.median(results[label]):.2f}",
                        "plain env-steps/s": f"{np.median(results['plain']):,.0f}",
                        "Ray nodes": nodes if label == "ray" else "",
                    }
                )
            subproc.close()
            ray_venv.close()
            plain.close()
    finally:
        ray.shutdown()
        if sim is not None:
            sim.shutdown()
    where = "a simulated cluster (head without CPUs + one-CPU nodes)" if args.cluster else "a local Ray"
    header = (
        f"Machine: {os.cpu_count()} cores ({platform.processor() or platform.machine()}); Python "
        f"{platform.python_version()}; Ray {ray.__version__} on {where}; "
        f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; {args.rounds} rounds of ~{args.seconds} s per contender."
    )
    report(header, rows, [False, True, False, True, True, False, True, True, True], args.output)


if __name__ == "__main__":
    main()
