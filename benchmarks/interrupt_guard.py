"""What deferring Ctrl-C (vecenv.interrupts) costs per step, in paired, interleaved rounds in one process.

Each case builds one vector env and steps it in rounds of ``--seconds``; every round runs three contenders in a
rotating order: ``on`` (vecenv as shipped), ``off`` (the guard's ``enter`` / ``leave`` / ``wait_begin`` /
``wait_end`` replaced by functions that do nothing, which is what a vecenv without the guard would call: the
difference is the guard's cost, a little under it since a call remains) and ``on'`` (a second ``on``: the A/A
noise). The statistic of a round is the difference in microseconds per step call, ``on - off`` and ``on' - on``;
the table gives the median and quartiles over rounds, and the cost as a share of a step.

    python benchmarks/interrupt_guard.py                      # every case, 15 rounds of 0.5 s
    python benchmarks/interrupt_guard.py --cases dummy-cartpole-2 --rounds 30
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from collections.abc import Callable
from typing import Any

import numpy as np

CASES: dict[str, tuple[str, int]] = {
    "dummy-cartpole-2": ("dummy", 2),
    "dummy-cartpole-16": ("dummy", 16),
    "subproc-cartpole-16": ("subproc", 16),
    "subproc-cartpole-64": ("subproc", 64),
}


def build(kind: str, n: int) -> Any:
    import gymnasium as gym

    import vecenv

    fns = [lambda: gym.make("CartPole-v1") for _ in range(n)]
    return vecenv.DummyVecEnv(fns) if kind == "dummy" else vecenv.SubprocVecEnv(fns)


class Switch:
    """Turns the guard's methods into no-ops (``off``) and back (``on``)."""

    def __init__(self) -> None:
        from vecenv.interrupts import GUARD

        self.guard = GUARD
        self.real = {name: getattr(GUARD, name) for name in ("enter", "leave", "wait_begin", "wait_end")}
        self.noop: dict[str, Callable[..., Any]] = {
            "enter": lambda: False,
            "leave": lambda counted, raise_at_end=True: None,
            "wait_begin": lambda: False,
            "wait_end": lambda counted: None,
        }

    def set(self, on: bool) -> None:
        for name, method in (self.real if on else self.noop).items():
            setattr(self.guard, name, method)


def per_step_us(venv: Any, actions: np.ndarray, seconds: float) -> float:
    """Microseconds per ``step`` call over at least ``seconds`` (whole batches of 64 calls)."""
    calls = 0
    started = time.perf_counter()
    while True:
        for _ in range(64):
            venv.step(actions)
        calls += 64
        elapsed = time.perf_counter() - started
        if elapsed >= seconds:
            return elapsed / calls * 1e6


def run_case(name: str, rounds: int, seconds: float) -> dict[str, Any]:
    kind, n = CASES[name]
    venv = build(kind, n)
    switch = Switch()
    try:
        venv.reset()
        actions = np.zeros(n, dtype=np.int64)
        per_step_us(venv, actions, seconds)  # warm-up
        times: dict[str, list[float]] = {"on": [], "off": [], "on'": []}
        orders = [("on", "off", "on'"), ("off", "on'", "on"), ("on'", "on", "off")]
        for r in range(rounds):
            for contender in orders[r % 3]:
                switch.set(contender != "off")
                times[contender].append(per_step_us(venv, actions, seconds))
        switch.set(True)
    finally:
        switch.set(True)
        venv.close()
    on, off, on2 = (np.array(times[k]) for k in ("on", "off", "on'"))
    return {"case": name, "step_us": float(np.median(on)), "ab": on - off, "aa": on2 - on}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, from: {', '.join(CASES)}")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--seconds", type=float, default=0.5, help="per contender per round")
    args = parser.parse_args()
    print(
        f"Machine: {os.cpu_count()} CPUs ({platform.processor() or platform.machine()}); Python "
        f"{platform.python_version()}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {args.rounds} rounds "
        f"of {args.seconds} s per contender; load average {os.getloadavg()[0]:.2f}.\n"
    )
    print("| case | us per step (on) | on - off, us: median (p25..p75) | on' - on (A/A), us | cost |")
    print("|---|---:|---:|---:|---:|")
    for name in args.cases.split(","):
        result = run_case(name, args.rounds, args.seconds)
        ab, aa = result["ab"], result["aa"]
        q = np.percentile
        print(
            f"| {name} | {result['step_us']:.1f} | {np.median(ab):+.2f} ({q(ab, 25):+.2f}..{q(ab, 75):+.2f}) | "
            f"{np.median(aa):+.2f} ({q(aa, 25):+.2f}..{q(aa, 75):+.2f}) | "
            f"{np.median(ab) / result['step_us'] * 100:+.1f}% |",
            flush=True,
        )


if __name__ == "__main__":
    main()
