"""How far SubprocVecEnv is from a bare multiprocess prototype, measured in ONE process (paired rounds).

The prototype is the least a multiprocess vector env can do: 2 worker processes, each stepping its half of
the CartPole envs in a plain loop, observations and actions in shared memory, one byte each way per step, no
infos, no terminal observations, no checks. Rounds of ``--seconds`` alternate plain loop, prototype and
vecenv, so machine drift hits all three alike; the ratio vecenv / prototype is the median over rounds.
``--ablate`` swaps parts of vecenv for the prototype's to see what they cost (see docs/performance.md).

    python benchmarks/prototype_gap.py --rounds 5
    python benchmarks/prototype_gap.py --ablate group       # worker: EnvGroup.step -> the bare loop
    python benchmarks/prototype_gap.py --ablate infos       # parent: no info dicts rebuilt
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
from collections.abc import Callable
from multiprocessing import shared_memory
from typing import Any

import gymnasium as gym
import numpy as np
from paired import rate  # same directory: run as python benchmarks/prototype_gap.py

from vecenv import SubprocVecEnv
from vecenv.env_group import EnvGroup
from vecenv.workers import subproc


def prototype_worker(
    k: int, n: int, workers: int, name: str, receive: Callable[[], bytes], send: Callable[[bytes], Any]
) -> None:
    """Worker ``k`` of the prototype: steps its share of the envs each time ``receive()`` returns ``b"s"``."""
    shm = shared_memory.SharedMemory(name=name)
    obs = np.ndarray((n, 4), np.float32, shm.buf)
    act = np.ndarray((n,), np.int64, shm.buf[n * 16 :])
    lo, hi = k * n // workers, (k + 1) * n // workers
    envs = [gym.make("CartPole-v1") for _ in range(lo, hi)]
    for i, env in enumerate(envs):
        obs[lo + i] = env.reset(seed=i)[0]
    send(b"r")
    while receive() == b"s":
        for i, env in enumerate(envs):
            o, _, terminated, truncated, _ = env.step(act[lo + i])
            if terminated or truncated:
                o, _ = env.reset()
            obs[lo + i] = o
        send(b"d")


def bare_group_step(self: EnvGroup, actions: Any, indices: Any = None) -> Any:
    """The prototype's loop in place of EnvGroup.step (no infos, rewards or dones: an ablation only)."""
    for j, env in enumerate(self.envs):
        o, _, terminated, truncated, _ = env.step(actions[j])
        if terminated or truncated:
            o, _ = env.reset()
        self.obs[j] = o
    return [{}] * len(self.envs), self.reset_infos


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-envs", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=1.0, help="duration of each backend in each round")
    parser.add_argument("--ablate", choices=["none", "group", "infos"], default="none")
    args = parser.parse_args()
    n, workers = args.num_envs, 2
    if args.ablate == "group":
        EnvGroup.step = bare_group_step  # type: ignore[method-assign]  # inherited by the fork workers
    if args.ablate == "infos":
        subproc.SubprocWorker._step_reply = lambda self, data: ([{}] * len(self.env_indices), self._reset_infos)  # type: ignore[method-assign]
    rng = np.random.default_rng(0)
    envs = [gym.make("CartPole-v1") for _ in range(n)]
    for i, env in enumerate(envs):
        env.reset(seed=i)

    def plain() -> None:
        for env, action in zip(envs, list(rng.integers(0, 2, n)), strict=True):
            _, _, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                env.reset()

    shm = shared_memory.SharedMemory(create=True, size=n * 24)
    pipes = []
    for k in range(workers):
        r1, w1 = os.pipe()
        r2, w2 = os.pipe()
        args_ = (k, n, workers, shm.name, lambda r=r1: os.read(r, 1), lambda d, w=w2: os.write(w, d))
        mp.get_context("fork").Process(target=prototype_worker, args=args_, daemon=True).start()
        pipes.append((w1, r2))
    for _, r in pipes:
        os.read(r, 1)
    views = {"act": np.ndarray((n,), np.int64, shm.buf[n * 16 :]), "obs": np.ndarray((n, 4), np.float32, shm.buf)}

    def prototype() -> None:
        views["act"][:] = rng.integers(0, 2, n)
        for w, _ in pipes:
            os.write(w, b"s")
        for _, r in pipes:
            os.read(r, 1)
        views["obs"].copy()

    venv = SubprocVecEnv([lambda: gym.make("CartPole-v1")] * n, n_workers=workers, start_method="fork")
    venv.reset()
    results: dict[str, list[float]] = {"plain": [], "prototype": [], "vecenv": []}
    steps = {"plain": plain, "prototype": prototype, "vecenv": lambda: venv.step(rng.integers(0, 2, n))}
    for _ in range(args.rounds):
        for name, step in steps.items():
            results[name].append(rate(step, n, args.seconds))
    venv.close()
    for w, _ in pipes:
        os.write(w, b"q")
    medians = {name: float(np.median(values)) for name, values in results.items()}
    paired = float(np.median(np.array(results["vecenv"]) / np.array(results["prototype"])))
    print(f"env-steps/s (median of {args.rounds} rounds): " + ", ".join(f"{k} {v:,.0f}" for k, v in medians.items()))
    print(
        f"ablation: {args.ablate}; vecenv / prototype (paired median): {paired:.2f}; prototype / plain: "
        f"{medians['prototype'] / medians['plain']:.2f}; vecenv / plain: {medians['vecenv'] / medians['plain']:.2f}"
    )
    views.clear()  # release the views before the block
    shm.close()
    shm.unlink()


if __name__ == "__main__":
    main()
