"""Soak test (not run in CI): many env-steps through SubprocVecEnv with random worker crashes and restarts.

64 CartPole envs over the default number of worker processes; every env-step has a small chance of killing
its worker process (``os._exit``), and ``max_restarts`` lets the vec env rebuild dead workers and go on.
At the end the script reports env-steps done, restarts, episodes, the growth of the process tree's memory
(PSS, sampled every ``--sample-every`` steps), and what was left behind after ``close()``: worker
processes still alive, new ``/dev/shm`` entries, and file descriptors the parent did not close.

    python benchmarks/soak.py --env-steps 3000000 --crash-prob 1e-5 --output benchmarks/soak.json
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import time
import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from tqdm import tqdm

import vecenv
from vecenv.bench.memory import process_tree, tree_pss_kib


class CrashingCartPole(gym.Wrapper):
    """CartPole-v1 whose every step ends the worker process with probability ``crash_prob``."""

    def __init__(self, crash_prob: float, seed: int) -> None:
        super().__init__(gym.make("CartPole-v1"))
        self.crash_prob = crash_prob
        self.rng = np.random.default_rng(seed + os.getpid())

    def step(self, action: Any) -> Any:
        if self.rng.random() < self.crash_prob:
            os._exit(17)  # an abrupt death, as a segfault or the OOM killer would cause
        return self.env.step(action)


def make_env(crash_prob: float, seed: int) -> Any:
    return lambda: CrashingCartPole(crash_prob, seed)


def open_fds() -> set[int]:
    return {int(fd) for fd in os.listdir("/proc/self/fd")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-envs", type=int, default=64)
    parser.add_argument("--n-workers", type=int, default=None, help="worker processes (default: one per core)")
    parser.add_argument("--env-steps", type=int, default=3_000_000, help="total env-steps (all envs)")
    parser.add_argument("--crash-prob", type=float, default=1e-5, help="chance that an env-step kills its worker")
    parser.add_argument("--max-restarts", type=int, default=10_000)
    parser.add_argument("--sample-every", type=int, default=2_000, help="vector steps between memory samples")
    parser.add_argument("--output", type=Path, default=None, help="write the report as JSON here")
    args = parser.parse_args()

    # warm-up: the first SubprocVecEnv starts multiprocessing's forkserver, which lives (with its pipes) as
    # long as this interpreter; it is multiprocessing's, not vecenv's, so it is part of the baseline
    vecenv.SubprocVecEnv([make_env(0.0, 0)], n_workers=1).close()
    shm_before, fds_before, children_before = set(os.listdir("/dev/shm")), open_fds(), set(process_tree() or [])
    started = time.perf_counter()
    venv = vecenv.SubprocVecEnv(
        [make_env(args.crash_prob, i) for i in range(args.num_envs)],
        n_workers=args.n_workers,
        max_restarts=args.max_restarts,
    )
    venv.reset()
    rng = np.random.default_rng(0)
    vector_steps = args.env_steps // args.num_envs
    episodes, restarted_envs, pss = 0, 0, []
    worker_pids_seen: set[int] = set()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # one per restart; counted instead
        for k in tqdm(range(vector_steps), unit="step", unit_scale=args.num_envs, desc="soak (env-steps)"):
            _, _, dones, infos = venv.step(rng.integers(0, 2, args.num_envs))
            episodes += int(dones.sum())
            restarted_envs += sum(1 for info in infos if info.get("vecenv.restarted"))
            if k % args.sample_every == 0:
                pss.append(tree_pss_kib() or 0)
                worker_pids_seen.update(p.pid for p in venv.processes)
    elapsed = time.perf_counter() - started
    worker_pids_seen.update(p.pid for p in venv.processes)
    restarts, n_workers = venv.restarts, venv.n_workers
    venv.close()
    del venv  # closed vec envs keep their Process objects (and their sentinel pipes) inspectable, as SB3
    gc.collect()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(os.path.exists(f"/proc/{pid}") for pid in worker_pids_seen):
        time.sleep(0.1)
    report = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "num_envs": args.num_envs,
        "n_workers": n_workers,
        "env_steps": vector_steps * args.num_envs,
        "crash_prob": args.crash_prob,
        "seconds": round(elapsed, 1),
        "env_steps_per_s": round(vector_steps * args.num_envs / elapsed),
        "episodes": episodes,
        "restarts": restarts,
        "envs_reported_restarted": restarted_envs,
        "pss_mib_first": round(pss[0] / 1024, 1),
        "pss_mib_last": round(pss[-1] / 1024, 1),
        "pss_mib_peak": round(max(pss) / 1024, 1),
        "left_worker_processes": sorted(pid for pid in worker_pids_seen if os.path.exists(f"/proc/{pid}")),
        "left_children": sorted(set(process_tree() or []) - children_before),
        "new_dev_shm_entries": sorted(set(os.listdir("/dev/shm")) - shm_before),
        "new_open_fds": sorted(os.readlink(f"/proc/self/fd/{fd}") for fd in open_fds() - fds_before if fd > 2),
    }
    print(json.dumps(report, indent=2))
    if args.output is not None:
        tmp = args.output.with_suffix(".tmp")
        tmp.write_text(json.dumps(report, indent=2) + "\n")
        tmp.replace(args.output)  # atomic


if __name__ == "__main__":
    main()
