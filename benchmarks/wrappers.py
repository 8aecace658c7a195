"""Each vector env wrapper's own cost per step, vecenv's against Stable-Baselines3's, on the same data, paired.

For every case, ``--num-envs`` copies of the case's env are stepped first in a ``DummyVecEnv`` with seeded actions,
and ``--record`` steps of its results are recorded. Each library then replays them from a stub vector env of its
own (a subclass of its ``VecEnv`` that returns the recorded steps in turn, with fresh arrays and info dicts, as a
vector env does), bare and under the wrapper (``vecenv.VecNormalize`` over vecenv's stub, SB3's over SB3's). So
the time of the envs, which would drown a cheap wrapper's microseconds in their noise, is not in the figures. Each
of ``--rounds`` rounds times a chunk of ``--steps`` steps of all four, in an order rotated every round. The
wrapper's cost in a round is the wrapped chunk's time per step minus the bare one's, of the same library; the
table gives the medians over rounds and ``vecenv / SB3``, the median of the per-round ratios with their
quartiles. The envs:

- ``vector``: a ``Box(17,)`` float32 observation (a MuJoCo-sized state) and a ``Box(6,)`` action;
- ``frame``: an 84x84x1 ``uint8`` frame (Atari's preprocessed frame) and a ``Discrete(6)`` action;
- ``dict``: ``Dict(a: Box(8,), b: Box(3,))`` float32 observations.

Each episode lasts 100 steps, so the done paths (``terminal_observation``, the monitor's episode) are replayed
too. Needs ``stable_baselines3`` (``make test-sb3`` installs it into ``.venv-sb3``)::

    .venv-sb3/bin/python benchmarks/wrappers.py                        # every case, 8 envs, 9 rounds
    .venv-sb3/bin/python benchmarks/wrappers.py --cases VecFrameStack-frame,VecNormalize --rounds 15 \\
        --output wrappers.md --json wrappers.json
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from paired import write_results  # same directory: run as python benchmarks/wrappers.py

from vecenv.bench.machine import machine_info
from vecenv.bench.tables import render_markdown
from vecenv.cli_args import positive_int

EPISODE = 100
COLUMNS = ["case", "env", "vecenv us/step", "SB3 us/step", "vecenv / SB3", "quartiles"]


class VectorEnv(gym.Env):
    """A 17-dim float32 state, a 6-dim continuous action, a fresh observation every step."""

    observation_space = spaces.Box(-10.0, 10.0, (17,), np.float32)
    action_space = spaces.Box(-1.0, 1.0, (6,), np.float32)

    def __init__(self) -> None:
        self.t = 0
        self.rng = np.random.default_rng(0)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        self.t = 0
        return np.zeros(17, np.float32), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.t += 1
        return self.rng.standard_normal(17).astype(np.float32), 1.0, False, self.t >= EPISODE, {}


class FrameEnv(gym.Env):
    """An 84x84x1 uint8 frame, as Atari's preprocessed frames, copied fresh every step."""

    observation_space = spaces.Box(0, 255, (84, 84, 1), np.uint8)
    action_space = spaces.Discrete(6)

    def __init__(self) -> None:
        self.t = 0
        self.frame = np.arange(84 * 84, dtype=np.uint8).reshape(84, 84, 1)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        self.t = 0
        return self.frame.copy(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.t += 1
        return self.frame.copy(), 1.0, False, self.t >= EPISODE, {}


class DictEnv(gym.Env):
    """Two float32 parts in a Dict observation."""

    observation_space = spaces.Dict(
        {"a": spaces.Box(-1.0, 1.0, (8,), np.float32), "b": spaces.Box(-1.0, 1.0, (3,), np.float32)}
    )
    action_space = spaces.Discrete(2)

    def __init__(self) -> None:
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        self.t = 0
        return {"a": np.zeros(8, np.float32), "b": np.zeros(3, np.float32)}, {}

    def step(self, action: Any) -> tuple[dict, float, bool, bool, dict]:
        self.t += 1
        obs = {"a": np.full(8, 0.5, np.float32), "b": np.full(3, 0.25, np.float32)}
        return obs, 1.0, False, self.t >= EPISODE, {}


ENVS: dict[str, type[gym.Env]] = {"vector": VectorEnv, "frame": FrameEnv, "dict": DictEnv}


@dataclass(frozen=True)
class Case:
    """``wrap(module, venv)`` wraps ``venv`` with the wrapper of ``module`` (``vecenv`` or SB3's ``vec_env``)."""

    env: str
    wrap: Callable[[Any, Any], Any]


CASES: dict[str, Case] = {
    "VecMonitor": Case("vector", lambda m, v: m.VecMonitor(v)),
    "VecNormalize": Case("vector", lambda m, v: m.VecNormalize(v)),
    "VecFrameStack-frame": Case("frame", lambda m, v: m.VecFrameStack(v, 4)),
    "VecFrameStack-vector": Case("vector", lambda m, v: m.VecFrameStack(v, 4)),
    "VecTransposeImage": Case("frame", lambda m, v: m.VecTransposeImage(v)),
    "VecCheckNan": Case("vector", lambda m, v: m.VecCheckNan(v)),
    "VecExtractDictObs": Case("dict", lambda m, v: m.VecExtractDictObs(v, "a")),
}


def seconds_per_step(venv: Any, actions: Sequence[Any], steps: int) -> float:
    """Seconds per ``venv.step`` over ``steps`` steps, the action batches cycled."""
    begin = time.perf_counter()
    for i in range(steps):
        venv.step(actions[i % len(actions)])
    return (time.perf_counter() - begin) / steps


def record_steps(env_cls: type[gym.Env], num_envs: int, steps: int) -> tuple[Any, list[Any], list[tuple]]:
    """``(first observations, action batches, steps)``: ``steps`` results ``(obs, rewards, dones, infos)`` of
    ``num_envs`` envs of ``env_cls`` in vecenv's ``DummyVecEnv``, stepped with seeded actions."""
    import vecenv

    space = env_cls.action_space
    space.seed(0)
    actions = [np.stack([space.sample() for _ in range(num_envs)]) for _ in range(16)]
    venv = vecenv.DummyVecEnv([env_cls] * num_envs)
    try:
        first = venv.reset()
        recorded = [venv.step(actions[i % len(actions)]) for i in range(steps)]
    finally:
        venv.close()
    return first, actions, recorded


def _fresh(obs: Any) -> Any:
    return {key: value.copy() for key, value in obs.items()} if isinstance(obs, dict) else obs.copy()


def replay_class(module: Any) -> type:
    """A subclass of ``module.VecEnv`` (vecenv's or SB3's) that returns recorded steps in turn."""

    class Replay(module.VecEnv):  # type: ignore[misc, name-defined]
        def __init__(self, env_cls: type[gym.Env], first: Any, recorded: list[tuple]) -> None:
            self.first, self.recorded, self.position = first, recorded, 0
            super().__init__(len(recorded[0][1]), env_cls.observation_space, env_cls.action_space)

        def reset(self) -> Any:
            return _fresh(self.first)

        def step_async(self, actions: Any) -> None:
            self.actions = actions

        def step_wait(self) -> Any:
            obs, rewards, dones, infos = self.recorded[self.position]
            self.position = (self.position + 1) % len(self.recorded)
            fresh_infos = [{**info} for info in infos]
            return _fresh(obs), rewards.copy(), dones.copy(), fresh_infos

        def close(self) -> None:
            pass

        def get_attr(self, attr_name: str, indices: Any = None) -> list[Any]:
            return [None] * self.num_envs

        def set_attr(self, attr_name: str, value: Any, indices: Any = None) -> None:
            pass

        def env_method(self, method_name: str, *args: Any, indices: Any = None, **kwargs: Any) -> list[Any]:
            return [None] * self.num_envs

        def env_is_wrapped(self, wrapper_class: type, indices: Any = None) -> list[bool]:
            return [False] * self.num_envs

    return Replay


def run_case(name: str, num_envs: int, rounds: int, steps: int, record: int) -> dict[str, Any]:
    """Paired rounds of one case: per round, each library's wrapped minus bare time per step (microseconds)."""
    import stable_baselines3.common.vec_env as sb3

    import vecenv

    case = CASES[name]
    env_cls = ENVS[case.env]
    first, actions, recorded = record_steps(env_cls, num_envs, record)
    built: dict[tuple[str, str], Any] = {}
    for library, module in (("vecenv", vecenv), ("sb3", sb3)):
        replay = replay_class(module)
        built[library, "bare"] = replay(env_cls, first, recorded)
        built[library, "wrapped"] = case.wrap(module, replay(env_cls, first, recorded))
    for venv in built.values():
        venv.reset()
        seconds_per_step(venv, actions, max(1, steps // 5))  # warm-up
    order = list(built)
    times: dict[tuple[str, str], list[float]] = {key: [] for key in order}
    for r in range(rounds):
        shift = r % len(order)
        for key in order[shift:] + order[:shift]:
            times[key].append(seconds_per_step(built[key], actions, steps) * 1e6)
    added = {
        library: (np.array(times[library, "wrapped"]) - np.array(times[library, "bare"])).tolist()
        for library in ("vecenv", "sb3")
    }
    ratios = (np.array(added["vecenv"]) / np.array(added["sb3"])).tolist()
    return {
        "case": name,
        "env": case.env,
        "added_us": added,
        "bare_us": {library: times[library, "bare"] for library in ("vecenv", "sb3")},
        "ratios": ratios,
    }


def table(records: Sequence[dict[str, Any]]) -> str:
    rows = []
    for record in records:
        ratios = np.array(record["ratios"])
        rows.append(
            [
                record["case"],
                record["env"],
                f"{np.median(record['added_us']['vecenv']):.1f}",
                f"{np.median(record['added_us']['sb3']):.1f}",
                f"{np.median(ratios):.2f}",
                f"{np.percentile(ratios, 25):.2f}..{np.percentile(ratios, 75):.2f}",
            ]
        )
    return render_markdown(COLUMNS, rows, [False, False, True, True, True, True])


def case_list(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in CASES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown case(s) {unknown}; choose from {', '.join(CASES)}")
    return names


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", type=case_list, default=list(CASES), help=f"comma-separated, from {', '.join(CASES)}")
    p.add_argument("-n", "--num-envs", type=positive_int, default=8)
    p.add_argument("--rounds", type=positive_int, default=9)
    p.add_argument("--steps", type=positive_int, default=2000, help="vector steps per chunk")
    p.add_argument("--record", type=positive_int, default=200, help="env steps recorded, then replayed in turn")
    p.add_argument("--output", help="also write the report (Markdown) here")
    p.add_argument("--json", help="also write every round's times (JSON) here")
    return p


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parser().parse_args(argv)
    records = [run_case(name, args.num_envs, args.rounds, args.steps, args.record) for name in args.cases]
    machine = machine_info()
    header = (
        f"# vecenv's wrappers against SB3's\n\n{machine['cpus_usable']} usable cores, {machine['python']}, numpy "
        f"{machine['numpy']}, SB3 {machine['stable_baselines3']}; vecenv commit {machine['vecenv_commit']}; "
        f"{machine['date']}.\n"
        f"{args.num_envs} envs, {args.record} recorded steps replayed by each library's stub vector env, "
        f"{args.rounds} rotated rounds of {args.steps} steps; a wrapper's cost is the wrapped stub's time per step "
        "minus the bare stub's, of the same library and round."
    )
    text = f"{header}\n\n{table(records)}"
    print(text)
    result = {"text": text, "machine": machine, "args": vars(args), "records": records}
    write_results(result, args.output, args.json)
    return result


if __name__ == "__main__":
    main()
