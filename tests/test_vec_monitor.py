"""VecMonitor: ``info["episode"]`` and the monitor CSV file, checked against returns computed by hand.

The CSV files are parsed back with the ``csv`` and ``json`` modules, never with vecenv's own reader.
"""

from __future__ import annotations

import csv
import functools
import json
import time
import warnings
from types import SimpleNamespace
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

import vecenv
from vecenv.monitor import Monitor
from vecenv.wrappers.vec_monitor import VecMonitor


class StairsEnv(gym.Env):
    """Episode ``e`` (counted by resets) lasts ``1 + (e + rank) % 3`` steps.

    Reward of step ``t`` (1-based): ``0.1 * t * (rank + 1) + action`` (not exact in binary, so float32
    accumulation matters). Step info: ``{"level": e, "tag": "r<rank>"}``.
    """

    def __init__(self, rank: int = 0) -> None:
        self.rank = rank
        self.observation_space = spaces.Box(0.0, 10.0, shape=(1,), dtype=np.float32)
        self.action_space = spaces.Discrete(3)
        self.episode = -1
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.episode += 1
        self.t = 0
        return np.zeros(1, dtype=np.float32), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.t += 1
        done = self.t >= 1 + (self.episode + self.rank) % 3
        reward = 0.1 * self.t * (self.rank + 1) + int(action)
        return (
            np.full(1, self.t, dtype=np.float32),
            reward,
            done,
            False,
            {"level": self.episode, "tag": f"r{self.rank}"},
        )


def stairs_fns(n: int) -> list:
    return [functools.partial(StairsEnv, rank=i) for i in range(n)]


def monitored_stairs(rank: int) -> gym.Env:
    """A StairsEnv wrapped with vecenv's Monitor (module level: picklable by reference)."""
    return Monitor(StairsEnv(rank))


class RecordingWrapper(vecenv.VecEnvWrapper):
    """Passes everything through and keeps the infos list it returned last."""

    def reset(self):
        return self.venv.reset()

    def step_wait(self):
        obs, rewards, dones, infos = self.venv.step_wait()
        self.last_infos = infos
        self.last_info_copies = [dict(info) for info in infos]
        return obs, rewards, dones, infos


def read_monitor_csv(path) -> tuple[str, dict, list[str], list[dict[str, str]]]:
    """Raw first line, JSON header, column names and rows of a monitor file (csv/json modules only)."""
    with open(path, newline="") as file:
        first_line = file.readline()
        header = json.loads(first_line[1:])
        reader = csv.DictReader(file)
        rows = list(reader)
        return first_line, header, list(reader.fieldnames or []), rows


def run_and_track(venv: vecenv.VecEnv, n_steps: int, seed: int = 0) -> list[dict[str, Any]]:
    """Step ``venv`` with random actions; return the episodes computed by hand from rewards and dones.

    Returns are accumulated in float32 (SB3's VecMonitor semantics), lengths counted; each episode is
    ``{"env": i, "r": np.float32, "l": int, "info": the info returned at its end}`` in end order.
    """
    rng = np.random.default_rng(seed)
    returns = np.zeros(venv.num_envs, dtype=np.float32)
    lengths = np.zeros(venv.num_envs, dtype=np.int64)
    episodes = []
    venv.reset()
    for _ in range(n_steps):
        actions = rng.integers(0, 3, size=venv.num_envs)
        _, rewards, dones, infos = venv.step(actions)
        for i in range(venv.num_envs):
            returns[i] = np.float32(returns[i] + np.float32(rewards[i]))
            lengths[i] += 1
            if dones[i]:
                episodes.append({"env": i, "r": returns[i], "l": int(lengths[i]), "info": infos[i]})
                returns[i] = 0
                lengths[i] = 0
    return episodes


def test_episode_info_and_csv_match_hand_computed(backend, make_venv, tmp_path):
    """``info["episode"]`` and the CSV rows equal returns/lengths computed from what the venv returned."""
    venv = VecMonitor(make_venv(backend, stairs_fns(3)), str(tmp_path / "run"), info_keywords=("level", "tag"))
    episodes = run_and_track(venv, n_steps=9)
    assert len(episodes) >= 12
    # hand-made check of the env itself: env 0's first episodes last 1, 2, 3 steps
    assert [ep["l"] for ep in episodes if ep["env"] == 0][:3] == [1, 2, 3]

    for ep in episodes:
        episode_info = ep["info"]["episode"]
        assert set(episode_info) == {"r", "l", "t", "level", "tag"}
        assert type(episode_info["r"]) is np.float32
        assert episode_info["r"] == ep["r"]
        assert type(episode_info["l"]) is np.int32
        assert episode_info["l"] == ep["l"]
        assert isinstance(episode_info["t"], float)
        assert episode_info["t"] == round(episode_info["t"], 6)
        # seconds since the wrapper was created
        assert 0.0 <= episode_info["t"] <= time.time() - venv.t_start + 1e-6
        assert episode_info["level"] == ep["info"]["level"]
        assert episode_info["tag"] == f"r{ep['env']}"
    assert venv.episode_count == len(episodes)
    venv.close()

    first_line, header, columns, rows = read_monitor_csv(tmp_path / "run.monitor.csv")
    assert first_line.startswith("#{")
    assert set(header) == {"t_start", "env_id"}
    assert header["env_id"] == "None"
    assert header["t_start"] == venv.t_start
    assert columns == ["r", "l", "t", "level", "tag"]
    assert len(rows) == len(episodes)
    for row, ep in zip(rows, episodes, strict=True):
        # the float32 return is written unrounded; its shortest repr reads back to the same float32
        assert np.float32(row["r"]) == ep["r"]
        assert int(row["l"]) == ep["l"]
        assert float(row["t"]) == ep["info"]["episode"]["t"]
        assert int(row["level"]) == ep["info"]["level"]
        assert row["tag"] == f"r{ep['env']}"
    times = [float(row["t"]) for row in rows]
    assert times == sorted(times)


def test_attributes_and_counters(make_venv):
    """``episode_returns`` float32 / ``episode_lengths`` int32 track the episodes in progress; ``reset`` zeroes them."""
    t_before = time.time()
    venv = VecMonitor(make_venv("dummy", stairs_fns(2)))
    assert t_before <= venv.t_start <= time.time()
    assert venv.results_writer is None
    assert venv.info_keywords == ()
    assert venv.episode_count == 0
    for array, dtype in ((venv.episode_returns, np.float32), (venv.episode_lengths, np.int32)):
        assert array.dtype == dtype
        assert array.shape == (2,)
    venv.reset()
    # env 0's episode lasts 1 step, env 1's 2 steps
    _, rewards, dones, _ = venv.step(np.array([2, 1]))
    assert dones.tolist() == [True, False]
    assert venv.episode_returns.tolist() == [0.0, np.float32(rewards[1])]
    assert venv.episode_lengths.tolist() == [0, 1]
    venv.reset()
    assert venv.episode_returns.tolist() == [0.0, 0.0]
    assert venv.episode_lengths.tolist() == [0, 0]
    # after reset both envs start 3-step episodes (env 1's unfinished step is forgotten)
    returned = np.float32(0)
    for _ in range(3):
        _, rewards, dones, infos = venv.step(np.array([0, 0]))
        returned = np.float32(returned + rewards[1])
    assert dones.tolist() == [True, True]
    assert [info["episode"]["l"] for info in infos] == [3, 3]
    assert infos[1]["episode"]["r"] == returned
    # the reset does not touch the count: 1 episode before it, 2 after
    assert venv.episode_count == 3
    venv.close()


def test_infos_are_copied(make_venv):
    """The info of a finished episode is a copy: the wrapped venv's info dict gets no "episode" key."""
    recorder = RecordingWrapper(make_venv("dummy", stairs_fns(2)))
    venv = VecMonitor(recorder)
    venv.reset()
    _, _, dones, infos = venv.step(np.array([0, 0]))
    assert dones.tolist() == [True, False]
    assert "episode" in infos[0]
    assert infos[0] is not recorder.last_infos[0]
    assert recorder.last_infos[0] == recorder.last_info_copies[0]
    assert "episode" not in recorder.last_infos[0]
    # infos of envs still running are passed through untouched
    assert infos[1] is recorder.last_infos[1]
    assert infos is not recorder.last_infos
    venv.close()


@pytest.mark.parametrize("filename", [None, ""])
def test_no_filename_writes_nothing(make_venv, tmp_path, monkeypatch, filename):
    """``filename=None`` or ``""``: no writer and no file, but ``info["episode"]`` is still added."""
    monkeypatch.chdir(tmp_path)
    venv = VecMonitor(make_venv("dummy", stairs_fns(1)), filename=filename)
    assert venv.results_writer is None
    venv.reset()
    _, _, dones, infos = venv.step(np.array([0]))
    assert dones[0]
    assert infos[0]["episode"]["l"] == 1
    venv.close()
    assert list(tmp_path.iterdir()) == []


def test_env_id_from_venv_spec(make_venv, tmp_path):
    """The header's ``env_id`` is ``venv.spec.id`` when the venv has a ``spec`` attribute."""
    inner = make_venv("dummy", stairs_fns(1))
    inner.spec = SimpleNamespace(id="Stairs-v7")
    VecMonitor(inner, str(tmp_path)).close()
    # a directory name gets monitor.csv inside it
    _, header, columns, rows = read_monitor_csv(tmp_path / "monitor.csv")
    assert header["env_id"] == "Stairs-v7"
    assert columns == ["r", "l", "t"]
    assert rows == []


def test_warns_if_envs_have_monitor(backend, make_venv):
    """A venv whose envs are wrapped with Monitor warns (also below another VecEnvWrapper); others do not."""
    monitored = make_venv(backend, [functools.partial(monitored_stairs, 0), functools.partial(monitored_stairs, 1)])
    with pytest.warns(UserWarning, match="already wrapped with a `Monitor` wrapper"):
        VecMonitor(monitored)
    with pytest.warns(UserWarning, match="already wrapped with a `Monitor` wrapper"):
        VecMonitor(RecordingWrapper(monitored))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        VecMonitor(make_venv("dummy", stairs_fns(2)))


class NoEnvIsWrapped(vecenv.DummyVecEnv):
    """A vector env that cannot answer ``env_is_wrapped`` (like SB3's Procgen-style vector envs)."""

    def env_is_wrapped(self, wrapper_class, indices=None):
        raise AttributeError("env_is_wrapped")


def test_no_warning_if_env_is_wrapped_unsupported():
    """A venv whose ``env_is_wrapped`` raises AttributeError is assumed unmonitored (no warning, no error)."""
    inner = NoEnvIsWrapped([functools.partial(monitored_stairs, 0)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        venv = VecMonitor(inner)
    venv.close()


class CloseRecorder(vecenv.DummyVecEnv):
    """Records, when closed, whether the monitor file above it was already closed."""

    monitor: VecMonitor | None = None
    writer_closed_first: bool | None = None

    def close(self):
        assert self.monitor is not None and self.monitor.results_writer is not None
        self.writer_closed_first = self.monitor.results_writer.file_handler.closed
        super().close()


def test_close_closes_writer_then_venv(tmp_path):
    """``close()`` closes the monitor file, then the vector env."""
    inner = CloseRecorder(stairs_fns(1))
    venv = VecMonitor(inner, str(tmp_path / "c"))
    inner.monitor = venv
    venv.close()
    assert inner.writer_closed_first is True
    assert venv.results_writer is not None and venv.results_writer.file_handler.closed
