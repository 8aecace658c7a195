"""Write the Stable-Baselines3 monitor files that ``tests/test_monitor.py`` reads, and check the reverse way.

The tests never run this script and never import SB3: they read the files it produced. Regenerate them
(only needed if the fixtures must change) with a Python that has stable-baselines3 and vecenv installed,
from the repository root::

    python tests/data/make_monitor_fixtures.py

It writes, under ``tests/data/monitor/``, with SB3's own classes only:

- ``sb3_make_vec_env/0.monitor.csv`` and ``1.monitor.csv``: SB3's
  ``make_vec_env(StairsEnv, n_envs=2, monitor_dir=..., monitor_kwargs={"info_keywords": ("level",)})``
  (so SB3's ``Monitor``), stepped 12 times: 6 episodes per env.
- ``sb3_vec_monitor/vm.monitor.csv``: SB3's ``VecMonitor(DummyVecEnv([StairsEnv(0), StairsEnv(1)]),
  ".../vm", info_keywords=("level",))``, stepped 12 times: 12 episodes.
- ``sb3_empty/monitor.csv``: SB3's ``Monitor(StairsEnv(0), filename=<that folder>)`` closed before any
  episode ended (header lines only; a folder name gets ``monitor.csv`` inside it).

:class:`StairsEnv` (rank ``k``): its episode number ``e`` (0, 1, 2... counted by resets) lasts
``1 + e % 3`` steps; the reward of step ``t`` (1-based) is ``0.1 * t * (k + 1)``; every step's info holds
``level = e``. ``tests/test_monitor.py`` derives the expected returns and lengths from these rules.

It checks that vecenv's ``load_results`` reads each fixture folder exactly as SB3's does. Then, the other
way round, it writes files with vecenv (``Monitor`` through ``vecenv.make_vec_env``, and
``VecMonitor``) into a temporary folder, reads them with SB3's ``load_results`` and with vecenv's, and
checks that both give the same table. Output of the last run (SB3 2.9.2, pandas 3.1.1)::

    SB3 fixture sb3_empty: 0 rows ['index', 'r', 'l', 't']; SB3's load_results == vecenv's: True
    SB3 fixture sb3_make_vec_env: 12 rows ['index', 'r', 'l', 't', 'level']; SB3's load_results == vecenv's: True
    SB3 fixture sb3_vec_monitor: 12 rows ['index', 'r', 'l', 't', 'level']; SB3's load_results == vecenv's: True
    vecenv make_vec_env: 12 rows ['index', 'r', 'l', 't', 'level']; SB3's load_results == vecenv's: True
    vecenv VecMonitor: 12 rows ['index', 'r', 'l', 't', 'level']; SB3's load_results == vecenv's: True
    SB3's VecMonitor over vecenv.make_vec_env warns about the Monitor: False (SB3 looks for its own Monitor class)
"""

from __future__ import annotations

import itertools
import pathlib
import shutil
import tempfile
import warnings
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import pandas as pd
from gymnasium import spaces
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.monitor import Monitor, load_results
from stable_baselines3.common.vec_env import DummyVecEnv, VecMonitor

import vecenv
import vecenv.monitor
import vecenv.wrappers.vec_monitor

OUT = pathlib.Path(__file__).resolve().parent / "monitor"
N_STEPS = 12


class StairsEnv(gym.Env):
    """Episode ``e`` lasts ``1 + e % 3`` steps; reward ``0.1 * t * (rank + 1)``; ``info["level"] = e``."""

    def __init__(self, rank: int = 0) -> None:
        self.rank = rank
        self.observation_space = spaces.Box(0.0, 10.0, shape=(1,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)
        self.episode = -1
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.episode += 1
        self.t = 0
        return np.zeros(1, dtype=np.float32), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.t += 1
        done = self.t >= 1 + self.episode % 3
        return (
            np.full(1, self.t, dtype=np.float32),
            0.1 * self.t * (self.rank + 1),
            done,
            False,
            {"level": self.episode},
        )


def _run(venv: Any, n_steps: int = N_STEPS) -> None:
    venv.reset()
    for _ in range(n_steps):
        venv.step(np.zeros(venv.num_envs, dtype=np.int64))
    venv.close()


def write_sb3_fixtures() -> None:
    shutil.rmtree(OUT, ignore_errors=True)
    OUT.mkdir(parents=True)
    _run(
        make_vec_env(
            _ranked_stairs(),
            n_envs=2,
            monitor_dir=str(OUT / "sb3_make_vec_env"),
            monitor_kwargs={"info_keywords": ("level",)},
        )
    )
    _run(
        VecMonitor(
            DummyVecEnv([lambda: StairsEnv(0), lambda: StairsEnv(1)]),
            str(OUT / "sb3_vec_monitor" / "vm"),
            info_keywords=("level",),
        )
    )
    (OUT / "sb3_empty").mkdir()
    Monitor(StairsEnv(0), filename=str(OUT / "sb3_empty")).close()


def _ranked_stairs() -> Callable[[], StairsEnv]:
    """A factory giving ranks 0, 1, ... to the envs make_vec_env builds in order (it passes no rank)."""
    ranks = itertools.count()
    return lambda: StairsEnv(next(ranks))


def check_sb3_reads_vecenv() -> None:
    for folder in sorted(OUT.iterdir()):
        _compare(f"SB3 fixture {folder.name}", folder)
    with tempfile.TemporaryDirectory() as tmp:
        folder = pathlib.Path(tmp)
        venv = vecenv.make_vec_env(
            _ranked_stairs(),
            n_envs=2,
            monitor_dir=str(folder / "mve"),
            monitor_kwargs={"info_keywords": ("level",)},
        )
        _run(venv)
        _compare("vecenv make_vec_env", folder / "mve")
        _run(
            vecenv.wrappers.vec_monitor.VecMonitor(
                vecenv.DummyVecEnv([lambda: StairsEnv(0), lambda: StairsEnv(1)]),
                str(folder / "vm" / "vm"),
                info_keywords=("level",),
            )
        )
        _compare("vecenv VecMonitor", folder / "vm")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            sb3_monitored = VecMonitor(vecenv.make_vec_env(StairsEnv, n_envs=2))
        sb3_monitored.close()
        print(
            "SB3's VecMonitor over vecenv.make_vec_env warns about the Monitor:",
            any("Monitor" in str(w.message) for w in caught),
            "(SB3 looks for its own Monitor class)",
        )


def _compare(what: str, folder: pathlib.Path) -> None:
    theirs = load_results(str(folder))
    ours = vecenv.monitor.load_results(folder)
    same = list(theirs.columns) == list(ours.columns)
    try:
        pd.testing.assert_frame_equal(theirs, ours)
    except AssertionError:
        same = False
    print(f"{what}: {len(theirs)} rows {list(theirs.columns)}; SB3's load_results == vecenv's: {same}")


if __name__ == "__main__":
    write_sb3_fixtures()
    check_sb3_reads_vecenv()
