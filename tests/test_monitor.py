"""Monitor (the per-env wrapper), ResultsWriter's file naming, load_results and get_monitor_files.

Files written by vecenv are parsed back with the ``csv`` and ``json`` modules; ``load_results`` is checked on
files written by Stable-Baselines3 itself (``tests/data/monitor``, made by ``tests/data/make_monitor_fixtures.py``).
"""

from __future__ import annotations

import csv
import functools
import json
import os
import pathlib
import subprocess
import sys
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from vecenv.monitor import (
    LoadMonitorResultsError,
    MissingExtraError,
    Monitor,
    ResultsWriter,
    get_monitor_files,
    load_results,
)

SB3_FIXTURES = pathlib.Path(__file__).resolve().parent / "data" / "monitor"


class WalkEnv(gym.Env):
    """Episode ``e`` (counted by resets) lasts ``2 + e % 2`` steps; reward of step ``t`` is ``0.1 * t + action``.

    Step info: ``{"t": t, "label": "e<e>"}``. ``reset`` also accepts a ``difficulty`` keyword (for
    ``reset_keywords``), kept in ``last_difficulty``.
    """

    def __init__(self) -> None:
        self.observation_space = spaces.Box(0.0, 10.0, shape=(1,), dtype=np.float32)
        self.action_space = spaces.Discrete(3)
        self.episode = -1
        self.t = 0
        self.last_difficulty: Any = None
        self.closed = False

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None, difficulty: Any = None
    ) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.last_difficulty = difficulty
        self.episode += 1
        self.t = 0
        return np.zeros(1, dtype=np.float32), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.t += 1
        terminated = self.t >= 2 + self.episode % 2
        return (
            np.full(1, self.t, dtype=np.float32),
            0.1 * self.t + int(action),
            terminated,
            False,
            {
                "t": self.t,
                "label": f"e{self.episode}",
            },
        )

    def close(self) -> None:
        self.closed = True


def read_monitor_csv(path: os.PathLike | str) -> tuple[dict, list[str], list[dict[str, str]], str]:
    """JSON header, column names, rows and full text of a monitor file (csv/json modules only)."""
    with open(path, newline="") as file:
        text = file.read()
    lines = text.splitlines(keepends=True)
    assert lines[0].startswith("#")
    header = json.loads(lines[0][1:])
    reader = csv.DictReader(lines[1:])
    rows = list(reader)
    return header, list(reader.fieldnames or []), rows, text


def play(env: gym.Env, actions: list[int], **reset_kwargs: Any) -> list[dict[str, Any]]:
    """Play ``actions``, resetting at episode ends; return the finished episodes computed by hand."""
    env.reset(**reset_kwargs)
    episodes, rewards = [], []
    for action in actions:
        _, reward, terminated, truncated, info = env.step(action)
        rewards.append(float(reward))
        if terminated or truncated:
            episodes.append({"r": sum(rewards), "l": len(rewards), "info": info})
            rewards = []
            env.reset(**reset_kwargs)
    return episodes


# ------------------------------------------------------------------------------------------------ Monitor


def test_monitor_episode_stats_and_file(tmp_path):
    """``info["episode"]``, the getters and the CSV rows match returns/lengths computed by hand."""
    env = Monitor(WalkEnv(), str(tmp_path / "walk"), info_keywords=("label",))
    assert env.results_writer is not None
    actions = [0, 1, 2, 0, 1, 2, 0, 1, 2, 1, 0]
    episodes = play(env, actions)
    assert [ep["l"] for ep in episodes] == [2, 3, 2, 3]
    for i, ep in enumerate(episodes):
        episode_info = ep["info"]["episode"]
        assert set(episode_info) == {"r", "l", "t", "label"}
        assert episode_info["r"] == round(ep["r"], 6)
        assert episode_info["l"] == ep["l"]
        assert episode_info["t"] == round(episode_info["t"], 6) >= 0.0
        assert episode_info["label"] == f"e{i}"
    assert env.get_episode_rewards() == [ep["r"] for ep in episodes]  # unrounded
    assert env.get_episode_lengths() == [ep["l"] for ep in episodes]
    times = env.get_episode_times()
    assert len(times) == 4
    assert times == sorted(times)
    assert env.get_total_steps() == len(actions)
    env.close()

    header, columns, rows, text = read_monitor_csv(tmp_path / "walk.monitor.csv")
    assert set(header) == {"t_start", "env_id"}
    assert header == {"t_start": env.t_start, "env_id": "None"}
    assert columns == ["r", "l", "t", "label"]
    # byte layout of SB3's files: "\n" after the JSON line, csv's "\r\n" after the others
    lines = text.splitlines(keepends=True)
    assert lines[0].endswith("}\n")
    assert all(line.endswith(",label\r\n" if i == 0 else "\r\n") for i, line in enumerate(lines[1:]))
    assert [float(row["r"]) for row in rows] == [round(ep["r"], 6) for ep in episodes]
    assert [int(row["l"]) for row in rows] == [2, 3, 2, 3]
    assert [float(row["t"]) for row in rows] == [ep["info"]["episode"]["t"] for ep in episodes]
    assert [row["label"] for row in rows] == ["e0", "e1", "e2", "e3"]


def test_monitor_env_id_from_spec(tmp_path):
    """The header's ``env_id`` is the env spec's id."""
    env = Monitor(gym.make("CartPole-v1"), str(tmp_path / "cp"))
    env.close()
    header, columns, rows, _ = read_monitor_csv(tmp_path / "cp.monitor.csv")
    assert header["env_id"] == "CartPole-v1"
    assert (columns, rows) == (["r", "l", "t"], [])


def test_monitor_no_file():
    """Without a filename there is no writer, and episodes are still recorded in the infos."""
    env = Monitor(WalkEnv())
    assert env.results_writer is None
    episodes = play(env, [0, 0])
    assert episodes[0]["info"]["episode"]["l"] == 2
    env.close()


def test_monitor_early_reset_and_step_rules():
    """Early resets raise only with ``allow_early_resets=False``; stepping a finished episode always raises."""
    env = Monitor(WalkEnv(), allow_early_resets=False)
    with pytest.raises(RuntimeError, match="needs reset"):
        env.step(0)
    env.reset()
    env.step(0)
    with pytest.raises(RuntimeError, match="allow_early_resets=True"):
        env.reset()
    _, _, terminated, _, _ = env.step(0)
    assert terminated
    with pytest.raises(RuntimeError, match="needs reset"):
        env.step(0)
    env.reset()  # allowed: the episode is over

    lenient = Monitor(WalkEnv())
    lenient.reset()
    lenient.step(0)
    # play() starts with an early reset: the interrupted episode is not recorded
    episodes = play(lenient, [0, 0, 0])
    assert lenient.get_episode_lengths() == [3] == [ep["l"] for ep in episodes]


def test_monitor_reset_keywords(tmp_path):
    """``reset_keywords`` are required at reset, passed on to the env, and logged with each episode."""
    env = Monitor(WalkEnv(), str(tmp_path / "kw"), reset_keywords=("difficulty",), info_keywords=("label",))
    with pytest.raises(ValueError, match="difficulty"):
        env.reset()
    episodes = play(env, [0, 0], difficulty="hard")
    assert env.unwrapped.last_difficulty == "hard"
    episode_info = episodes[0]["info"]["episode"]
    assert episode_info == {
        "r": round(0.1 + 0.2, 6),
        "l": 2,
        "t": episode_info["t"],
        "label": "e0",
        "difficulty": "hard",
    }
    env.close()
    _, columns, rows, _ = read_monitor_csv(tmp_path / "kw.monitor.csv")
    # reset keywords come before info keywords
    assert columns == ["r", "l", "t", "difficulty", "label"]
    assert rows[0]["difficulty"] == "hard"


def test_monitor_close_closes_env_and_file(tmp_path):
    """``close()`` closes the env and the monitor file."""
    env = Monitor(WalkEnv(), str(tmp_path / "x"))
    env.close()
    assert env.unwrapped.closed
    assert env.results_writer is not None and env.results_writer.file_handler.closed


def monitored_walk(filename: str | None) -> gym.Env:
    return Monitor(WalkEnv(), filename)


def test_monitor_in_vec_env(backend, make_venv, tmp_path):
    """Inside a vector env (both backends): ``env_is_wrapped``, ``env_method`` getters, one file per env."""
    fns = [functools.partial(monitored_walk, str(tmp_path / str(i))) for i in range(2)]
    venv = make_venv(backend, fns)
    assert venv.env_is_wrapped(Monitor) == [True, True]
    venv.reset()
    ended = []
    for _ in range(5):
        _, _, dones, infos = venv.step(np.array([1, 2]))
        ended += [(i, infos[i]["episode"]) for i in np.flatnonzero(dones)]
    # each env: episodes of 2 then 3 steps; rewards 0.1 t + action
    assert [(i, ep["l"]) for i, ep in ended] == [(0, 2), (1, 2), (0, 3), (1, 3)]
    assert ended[0][1]["r"] == round(0.1 + 1 + 0.2 + 1, 6)
    assert venv.env_method("get_episode_lengths") == [[2, 3], [2, 3]]
    assert venv.env_method("get_total_steps") == [5, 5]
    venv.close()
    for i in range(2):
        _, _, rows, _ = read_monitor_csv(tmp_path / f"{i}.monitor.csv")
        assert [int(row["l"]) for row in rows] == [2, 3]


# ------------------------------------------------------------------------------------- file naming, appending


@pytest.mark.parametrize(
    ("filename", "expected"),
    [
        ("run", "run.monitor.csv"),  # a plain prefix gets ".monitor.csv"
        ("run.csv", "run.csv.monitor.csv"),
        ("run.monitor.csv", "run.monitor.csv"),  # already ends with monitor.csv: unchanged
        ("runmonitor.csv", "runmonitor.csv"),
        ("deep/er/run", "deep/er/run.monitor.csv"),  # missing parent folders are created
        ("existing_dir", "existing_dir/monitor.csv"),  # an existing folder gets monitor.csv inside
    ],
)
def test_monitor_file_naming(tmp_path, monkeypatch, filename, expected):
    """SB3's naming rules; relative names resolve against the current directory."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "existing_dir").mkdir()
    env = Monitor(WalkEnv(), filename)
    env.close()
    assert env.results_writer is not None
    assert env.results_writer.filename == os.path.realpath(tmp_path / expected)
    created = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert created == [expected]


def test_monitor_path_objects(tmp_path):
    """A ``pathlib.Path`` works as a filename."""
    env = Monitor(WalkEnv(), tmp_path / "p")
    env.close()
    assert (tmp_path / "p.monitor.csv").is_file()


def test_override_existing_false_appends_without_header(tmp_path):
    """``override_existing=False`` appends rows to an existing file and writes no second header."""
    path = tmp_path / "a"
    first = Monitor(WalkEnv(), str(path))
    play(first, [0, 0])
    first.close()
    second = Monitor(WalkEnv(), str(path), override_existing=False)
    play(second, [1, 1])
    second.close()
    header, _, rows, text = read_monitor_csv(tmp_path / "a.monitor.csv")
    assert text.count("#") == 1
    assert text.count("r,l,t") == 1
    assert header["t_start"] == first.t_start
    assert [float(row["r"]) for row in rows] == [round(0.1 + 0.2, 6), round(1.1 + 1.2, 6)]
    # the default truncates
    third = Monitor(WalkEnv(), str(path))
    third.close()
    header, _, rows, _ = read_monitor_csv(tmp_path / "a.monitor.csv")
    assert (header["t_start"], rows) == (third.t_start, [])


def test_override_existing_false_on_new_file_writes_header(tmp_path):
    """Appending to a file that does not exist yet writes the header (vecenv; SB3 leaves it headerless)."""
    env = Monitor(WalkEnv(), str(tmp_path / "new"), override_existing=False)
    play(env, [0, 0])
    env.close()
    header, columns, rows, _ = read_monitor_csv(tmp_path / "new.monitor.csv")
    assert header["t_start"] == env.t_start
    assert (columns, len(rows)) == (["r", "l", "t"], 1)


def test_results_writer_direct(tmp_path):
    """``ResultsWriter`` writes the header at once and flushes every row (readable before close)."""
    writer = ResultsWriter(str(tmp_path / "w"), header={"t_start": 5.0, "env_id": "X-v0"}, extra_keys=("k",))
    writer.write_row({"r": 1.5, "l": 3, "t": 0.25, "k": "a"})
    header, columns, rows, _ = read_monitor_csv(tmp_path / "w.monitor.csv")
    assert header == {"t_start": 5.0, "env_id": "X-v0"}
    assert columns == ["r", "l", "t", "k"]
    assert rows == [{"r": "1.5", "l": "3", "t": "0.25", "k": "a"}]
    with pytest.raises(ValueError):
        writer.write_row({"r": 1.0, "l": 1, "t": 0.0, "unknown": 1})
    writer.close()
    writer.close()


# ------------------------------------------------------------------------------------------ load_results


def expected_table(folder: pathlib.Path) -> list[tuple[float, int, float, dict[str, str]]]:
    """What load_results must return, computed with csv/json: rows of all files, absolute t, sorted by t,
    minus the smallest t_start (as ``(r, l, t, other columns)``)."""
    rows, t_starts = [], []
    for path in sorted(folder.glob("*monitor.csv")):
        header, _, file_rows, _ = read_monitor_csv(path)
        t_starts.append(header["t_start"])
        for row in file_rows:
            extra = {k: v for k, v in row.items() if k not in ("r", "l", "t")}
            rows.append((float(row["r"]), int(row["l"]), float(row["t"]) + header["t_start"], extra))
    rows.sort(key=lambda row: row[2])
    return [(r, length, t - min(t_starts), extra) for r, length, t, extra in rows]


def stairs_episodes(rank: int, n: int) -> list[tuple[float, int, int]]:
    """The fixture env's first ``n`` episodes: ``(return, length, level)`` (see make_monitor_fixtures.py)."""
    episodes = []
    for e in range(n):
        length = 1 + e % 3
        episodes.append((0.1 * (rank + 1) * length * (length + 1) / 2, length, e))
    return episodes


def assert_matches_expected(df: Any, folder: pathlib.Path) -> None:
    expected = expected_table(folder)
    assert len(df) == len(expected)
    assert df["r"].tolist() == [row[0] for row in expected]
    assert df["l"].tolist() == [row[1] for row in expected]
    np.testing.assert_allclose(df["t"].to_numpy(), [row[2] for row in expected], rtol=0, atol=1e-6)
    assert df.index.tolist() == list(range(len(expected)))


def test_load_results_reads_sb3_monitor_files():
    """Files written by SB3's make_vec_env + Monitor: all rows, sorted by t, t relative to the first t_start."""
    folder = SB3_FIXTURES / "sb3_make_vec_env"
    df = load_results(folder)
    assert list(df.columns) == ["index", "r", "l", "t", "level"]
    assert_matches_expected(df, folder)
    # the values follow from the fixture env's rules
    got = sorted(zip(df["r"].round(6), df["l"], df["level"], strict=True))
    want = sorted((round(r, 6), length, level) for k in (0, 1) for r, length, level in stairs_episodes(k, 6))
    assert got == want
    assert df["t"].min() >= 0.0
    # "index" is each row's position within its own file (SB3 keeps it)
    assert sorted(df["index"].tolist()) == sorted(list(range(6)) * 2)


def test_load_results_reads_sb3_vec_monitor_file():
    """A file written by SB3's VecMonitor (float32 returns, extra column)."""
    folder = SB3_FIXTURES / "sb3_vec_monitor"
    df = load_results(str(folder))
    assert list(df.columns) == ["index", "r", "l", "t", "level"]
    assert_matches_expected(df, folder)
    want = sorted((round(r, 5), length, level) for k in (0, 1) for r, length, level in stairs_episodes(k, 6))
    assert sorted(zip(df["r"].round(5), df["l"], df["level"], strict=True)) == want


def test_load_results_empty_files():
    """Only header lines: an empty table with SB3's columns."""
    df = load_results(SB3_FIXTURES / "sb3_empty")
    assert len(df) == 0
    assert list(df.columns) == ["index", "r", "l", "t"]


def test_load_results_reads_vecenv_files(tmp_path):
    """Files written by vecenv's Monitor: combined across files, t relative to the earliest t_start."""
    for i in range(2):
        env = Monitor(WalkEnv(), str(tmp_path / str(i)), info_keywords=("label",))
        play(env, [i, i, i, i, i])
        env.close()
    df = load_results(tmp_path)
    assert list(df.columns) == ["index", "r", "l", "t", "label"]
    assert_matches_expected(df, tmp_path)
    assert sorted(df["l"].tolist()) == [2, 2, 3, 3]


def test_load_results_single_file(tmp_path):
    """vecenv extension: a path to one monitor file reads that file."""
    env = Monitor(WalkEnv(), str(tmp_path / "only"))
    play(env, [0, 0])
    env.close()
    df = load_results(tmp_path / "only.monitor.csv")
    assert df["l"].tolist() == [2]


def test_load_results_no_files(tmp_path):
    """No ``*monitor.csv`` file: LoadMonitorResultsError naming the folder and the pattern."""
    (tmp_path / "notes.csv").write_text("r,l,t\n")
    with pytest.raises(LoadMonitorResultsError, match=r"No monitor files of the form \*monitor\.csv") as info:
        load_results(tmp_path)
    assert str(tmp_path) in str(info.value)
    with pytest.raises(LoadMonitorResultsError):
        load_results(tmp_path / "missing")


@pytest.mark.parametrize(
    ("content", "match"),
    [
        ("r,l,t\n1,1,0.1\n", "first line"),
        ("#not json\nr,l,t\n", "JSON"),
        ('#{"env_id": "x"}\nr,l,t\n', "t_start"),
        ('#{"t_start": 1.0}\na,b\n1,2\n', "missing"),
    ],
)
def test_load_results_malformed_file(tmp_path, content, match):
    """A file that is not in the monitor format: LoadMonitorResultsError naming the file and the problem."""
    (tmp_path / "bad.monitor.csv").write_text(content)
    with pytest.raises(LoadMonitorResultsError, match=match) as info:
        load_results(tmp_path)
    assert "bad.monitor.csv" in str(info.value)


def test_get_monitor_files(tmp_path):
    """``*monitor.csv`` files of the folder only, sorted; special glob characters in the folder name work."""
    folder = tmp_path / "run[1]"
    (folder / "sub").mkdir(parents=True)
    for name in ("1.monitor.csv", "0.monitor.csv", "monitor.csv", "xmonitor.csv", "other.csv", "sub/2.monitor.csv"):
        (folder / name).write_text("")
    assert get_monitor_files(folder) == [
        str(folder / name) for name in ("0.monitor.csv", "1.monitor.csv", "monitor.csv", "xmonitor.csv")
    ]
    assert get_monitor_files(str(folder / "0.monitor.csv")) == [str(folder / "0.monitor.csv")]
    assert get_monitor_files(tmp_path / "nowhere") == []


def test_load_results_without_pandas(monkeypatch):
    """Without pandas: MissingExtraError (an ImportError) telling to install the plot extra."""
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(
        MissingExtraError,
        match=r"pip install pandas matplotlib \(or pip install -e \"\.\[plot\]\" in a clone of vecenv\)",
    ) as info:
        load_results(SB3_FIXTURES / "sb3_make_vec_env")
    assert isinstance(info.value, ImportError)
    assert "pandas" in str(info.value)
    assert info.value.extra == "plot"


def test_importing_the_modules_does_not_import_pandas():
    """Importing the monitor, plotting and VecMonitor modules imports neither pandas nor matplotlib."""
    code = (
        "import sys, vecenv.monitor, vecenv.plotting, vecenv.wrappers.vec_monitor\n"
        "print(sorted(m for m in ('pandas', 'matplotlib') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize(("column", "row"), [("r", "xyz,3,0.1"), ("l", "1.0,abc,0.1"), ("t", "1.0,3,abc")])
def test_load_results_refuses_values_that_are_not_numbers(tmp_path, column, row):
    """A value that is not a number in r, l or t (a damaged file): LoadMonitorResultsError naming the file, the
    column and the value, not pandas' error (or text where numbers belong) further on; a file without rows still
    loads."""
    pytest.importorskip("pandas")
    bad = tmp_path / "0.monitor.csv"
    bad.write_text(f'#{{"t_start": 1, "env_id": "X"}}\nr,l,t\n1.0,2,0.5\n{row}\n')
    with pytest.raises(LoadMonitorResultsError, match=rf"column '{column}' must hold numbers; row 2 holds") as info:
        load_results(tmp_path)
    assert str(bad) in str(info.value)
    bad.write_text('#{"t_start": 1, "env_id": "X"}\nr,l,t\n')
    assert len(load_results(tmp_path)) == 0
