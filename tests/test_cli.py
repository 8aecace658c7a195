"""The ``vecenv run`` command end to end: console script, ``python -m vecenv`` and in-process ``main``.

Summaries are checked against a reference computed here with plain Gymnasium envs (no vecenv): env ``i``
is ``gym.make(env_id, render_mode="rgb_array", **env_kwargs)`` reset with ``seed + i``, actions come from
``batch_space(action_space, n)`` seeded with ``seed``, rewards are accumulated as float32 values (the vector
env's reward buffer) and a finished env is reset without a seed.
"""

from __future__ import annotations

import fcntl
import math
import multiprocessing as mp
import os
import re
import select
import shutil
import stat
import struct
import subprocess
import sys
import termios
import time

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector.utils import batch_space

import vecenv
from tests.conftest import HAS_RAY
from vecenv.cli import main

SUMMARY_KEYS = [
    "env_id",
    "backend",
    "num_envs",
    "env_steps",
    "wall_time_s",
    "steps_per_s",
    "episodes",
    "episode_return_mean",
    "episode_return_min",
    "episode_return_max",
    "episode_length_mean",
    "episode_length_min",
    "episode_length_max",
]
STAT_KEYS = SUMMARY_KEYS[6:]
#: Lines printed after SUMMARY_KEYS, in this order, by the options that write or read files or check the run.
OPTION_KEYS = ["monitor", "normalize", "video", "check_nan"]
TIMEOUT = 60
DEFAULT_START_METHOD = "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"


def _vecenv_exe() -> str:
    exe = os.path.join(os.path.dirname(sys.executable), "vecenv")
    if not os.path.exists(exe):
        exe = shutil.which("vecenv") or exe
    return exe


def _run_script(
    *args: str, module: bool = False, cwd: str | os.PathLike[str] | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "vecenv", *args] if module else [_vecenv_exe(), *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT, check=False, cwd=cwd, env=env)


def _parse_summary(stdout: str) -> dict[str, str]:
    """Parse the ``key: value`` lines; every stdout line must be one, keys in the documented order (the lines
    of options, OPTION_KEYS, last)."""
    summary: dict[str, str] = {}
    for line in stdout.splitlines():
        key, sep, value = line.partition(":")
        assert sep, f"not a 'key: value' line: {line!r}"
        assert key == key.strip() and key, f"bad key in {line!r}"
        summary[key] = value.strip()
    keys = list(summary)
    assert keys[: len(SUMMARY_KEYS)] == SUMMARY_KEYS
    extra = keys[len(SUMMARY_KEYS) :]
    assert extra == [key for key in OPTION_KEYS if key in extra], keys
    return summary


def _reference_stats(env_id: str, n: int, steps: int, seed: int, env_kwargs: dict | None = None) -> dict[str, str]:
    """Episode statistics of ``vecenv run`` computed independently with plain Gymnasium envs."""
    envs = [gym.make(env_id, **{"render_mode": "rgb_array", **(env_kwargs or {})}) for _ in range(n)]
    actions = batch_space(envs[0].action_space, n)
    actions.seed(seed)
    for i, env in enumerate(envs):
        env.reset(seed=seed + i)
    running_return = [0.0] * n
    running_length = [0] * n
    returns: list[float] = []
    lengths: list[int] = []
    for _ in range(math.ceil(steps / n)):
        action = actions.sample()
        for i, env in enumerate(envs):
            _, reward, terminated, truncated, _ = env.step(action[i])
            running_return[i] += float(np.float32(reward))
            running_length[i] += 1
            if terminated or truncated:
                returns.append(running_return[i])
                lengths.append(running_length[i])
                running_return[i], running_length[i] = 0.0, 0
                env.reset()
    for env in envs:
        env.close()
    return _episode_stats(returns, lengths)


def _episode_stats(returns: list[float], lengths: list[int]) -> dict[str, str]:
    """The statistics lines of a summary, from the returns and lengths of the episodes that finished."""
    stats = {"episodes": str(len(returns))}
    if returns:
        stats |= {
            "episode_return_mean": f"{np.mean(returns):.3f}",
            "episode_return_min": f"{min(returns):.3f}",
            "episode_return_max": f"{max(returns):.3f}",
            "episode_length_mean": f"{np.mean(lengths):.3f}",
            "episode_length_min": str(min(lengths)),
            "episode_length_max": str(max(lengths)),
        }
    else:
        stats |= dict.fromkeys(STAT_KEYS[1:], "n/a")
    return stats


def _subproc_backend(start_method: str, num_envs: int, n_workers: int | None = None) -> str:
    """The backend line of a subproc run: start method and worker count (default: one per core, at most N)."""
    workers = min(n_workers if n_workers is not None else len(os.sched_getaffinity(0)), num_envs)
    return f"subproc ({start_method}, {workers} worker{'' if workers == 1 else 's'})"


def _check_summary(summary: dict[str, str], env_id: str, n: int, steps: int, backend: str) -> None:
    """Header lines of a summary: env id, backend, env count, rounded-up env steps, well-formed timings."""
    assert summary["env_id"] == env_id
    assert summary["backend"] == backend
    assert summary["num_envs"] == str(n)
    assert summary["env_steps"] == str(math.ceil(steps / n) * n)
    assert float(summary["wall_time_s"]) >= 0
    assert float(summary["steps_per_s"]) >= 0
    assert int(summary["episodes"]) >= 0


def _stats(summary: dict[str, str]) -> dict[str, str]:
    return {key: summary[key] for key in STAT_KEYS}


def _run_main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def _assert_one_line_error(code: int, out: str, err: str, command: str = "run") -> str:
    """A user error: exit status 2, nothing on stdout, exactly one ``vecenv <command>: error:`` line on stderr."""
    assert code == 2, err
    assert out == ""
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"vecenv {command}: error: "), err
    return lines[0]


def _script_error(result: subprocess.CompletedProcess[str], command: str = "run") -> str:
    """The one error line of a console-script run that failed with a user error (exit 2, no traceback)."""
    return _assert_one_line_error(result.returncode, result.stdout, result.stderr, command)


# ---------------------------------------------------------------------------------------------- console script


def test_run_without_stderr_prints_its_summary() -> None:
    """A process started with descriptor 2 closed (daemons, some launchers: ``sys.stderr`` is None) runs and
    prints its summary; the progress bar is left out."""
    command = [sys.executable, "-m", "vecenv", "run", "-n", "2", "--steps", "100", "-b", "dummy", "--seed", "0"]
    result = subprocess.run(
        command, stdout=subprocess.PIPE, text=True, timeout=TIMEOUT, check=False, preexec_fn=lambda: os.close(2)
    )
    assert result.returncode == 0
    _check_summary(_parse_summary(result.stdout), "CartPole-v1", 2, 100, "dummy")


def test_version_console_script():
    """``vecenv --version`` prints the package version and exits 0."""
    result = _run_script("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"vecenv {vecenv.__version__}"


def test_console_script_run_matches_reference():
    """``vecenv run`` (dummy) prints the summary of the reference run; no progress bar when stderr is a pipe."""
    result = _run_script("run", "CartPole-v1", "-n", "2", "--steps", "400", "--seed", "3", "--backend", "dummy")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    summary = _parse_summary(result.stdout)
    _check_summary(summary, "CartPole-v1", 2, 400, "dummy")
    assert _stats(summary) == _reference_stats("CartPole-v1", 2, 400, 3)
    assert int(summary["episodes"]) > 0


def test_python_m_vecenv_subproc_matches_reference():
    """``python -m vecenv run`` with the subproc backend prints the same statistics as the reference run."""
    result = _run_script(
        "run", "CartPole-v1", "-n", "2", "--steps", "400", "--seed", "3", "--backend", "subproc", module=True
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    summary = _parse_summary(result.stdout)
    _check_summary(summary, "CartPole-v1", 2, 400, _subproc_backend(DEFAULT_START_METHOD, 2))
    assert _stats(summary) == _reference_stats("CartPole-v1", 2, 400, 3)


def test_console_script_unknown_env_id():
    """An unknown env id: exit 2 and one ``vecenv: error:`` line that suggests the close registered id."""
    result = _run_script("run", "CartPol-v1", "-n", "2")
    line = _assert_one_line_error(result.returncode, result.stdout, result.stderr)
    assert "CartPol-v1" in line
    assert "CartPole-v1" in line


def test_console_script_missing_dependency_subproc():
    """A missing optional dependency in subproc workers: one error line naming the package, no worker traceback."""
    result = _run_script("run", "LunarLander-v3", "-n", "2", "--steps", "10", "--backend", "subproc")
    line = _assert_one_line_error(result.returncode, result.stdout, result.stderr)
    assert "LunarLander-v3" in line
    assert "box2d" in line.lower()


def test_python_m_vecenv_env_kwargs_rejected():
    """``python -m vecenv`` with ``--env-kwargs`` the env rejects (subproc workers): exit 2, one error line."""
    result = _run_script("run", "--env-kwargs", '{"foo": 1}', "-n", "2", "--steps", "10", module=True)
    line = _assert_one_line_error(result.returncode, result.stdout, result.stderr)
    assert "foo" in line


def test_console_script_argparse_error():
    """A bad option value through the console script: argparse's usage error, exit 2, no traceback."""
    result = _run_script("run", "--steps", "abc")
    assert result.returncode == 2
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    last = result.stderr.splitlines()[-1]
    assert last.startswith("vecenv run: error: ")
    assert "--steps" in last


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_progress_bar_only_on_terminal():
    """With stderr on a terminal, a tqdm bar is drawn on stderr; the summary still goes to stdout."""
    master, slave = os.openpty()
    # a real terminal has a size (a fresh pty is 0x0, where tqdm draws an empty bar)
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    try:
        proc = subprocess.Popen(
            [_vecenv_exe(), "run", "CartPole-v1", "-n", "2", "--steps", "400", "--seed", "3", "--backend", "dummy"],
            stdout=subprocess.PIPE,
            stderr=slave,
            text=True,
        )
        os.close(slave)
        slave = -1
        chunks: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1.0)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                data = os.read(master, 4096)
            except OSError:  # EIO: the terminal's other end is closed
                break
            if not data:
                break
            chunks.append(data)
        stdout, _ = proc.communicate(timeout=TIMEOUT)
    finally:
        if slave != -1:
            os.close(slave)
        os.close(master)
    assert proc.returncode == 0
    terminal = b"".join(chunks).decode(errors="replace")
    assert "100%" in terminal
    assert "400/400" in terminal
    summary = _parse_summary(stdout)
    assert _stats(summary) == _reference_stats("CartPole-v1", 2, 400, 3)


# ------------------------------------------------------------------------------------------ in-process main()


# (env_id, n, steps, backend, (return_low, return_high), max_length)
ENV_CASES = [
    ("CartPole-v1", 2, 400, "dummy", (1.0, 500.0), 500),
    ("Pendulum-v1", 2, 400, "dummy", (-16.2736044 * 200, 0.0), 200),
    ("MountainCar-v0", 2, 400, "subproc", (-200.0, -1.0), 200),
    ("Acrobot-v1", 2, 1200, "dummy", (-500.0, 0.0), 500),
    ("FrozenLake-v1", 4, 400, "dummy", (0.0, 1.0), 100),
    ("Blackjack-v1", 2, 400, "subproc", (-1.0, 1.0), 400),
]


@pytest.mark.parametrize(
    ("env_id", "n", "steps", "backend", "return_range", "max_length"), ENV_CASES, ids=[case[0] for case in ENV_CASES]
)
def test_run_env_ids(capsys, env_id, n, steps, backend, return_range, max_length):
    """Several classic envs run and print sane statistics, equal to the reference run."""
    code, out, err = _run_main(
        capsys, "run", env_id, "-n", str(n), "--steps", str(steps), "--seed", "1", "--backend", backend
    )
    assert code == 0, err
    assert err == ""
    summary = _parse_summary(out)
    expected_backend = "dummy" if backend == "dummy" else _subproc_backend(DEFAULT_START_METHOD, n)
    _check_summary(summary, env_id, n, steps, expected_backend)
    episodes = int(summary["episodes"])
    assert episodes >= 1
    low, high = return_range
    r_min, r_mean, r_max = (float(summary[f"episode_return_{k}"]) for k in ("min", "mean", "max"))
    assert low - 1e-3 <= r_min <= r_mean <= r_max <= high + 1e-3
    l_min, l_max = int(summary["episode_length_min"]), int(summary["episode_length_max"])
    assert 1 <= l_min <= float(summary["episode_length_mean"]) <= l_max <= max_length
    # (the mean is printed rounded to 3 decimals)
    assert episodes * float(summary["episode_length_mean"]) <= int(summary["env_steps"]) + episodes * 5e-4
    if env_id == "CartPole-v1":  # +1 per step
        assert summary["episode_return_mean"] == summary["episode_length_mean"]
    if env_id in ("Pendulum-v1", "MountainCar-v0", "Acrobot-v1"):  # truncated (or ended) within the time limit
        assert episodes >= n * (math.ceil(steps / n) // max_length)
    assert _stats(summary) == _reference_stats(env_id, n, steps, 1)


def test_dummy_and_subproc_print_same_statistics(capsys):
    """The dummy and subproc backends print identical episode statistics for the same seed."""
    args = ["run", "FrozenLake-v1", "-n", "3", "--steps", "600", "--seed", "7"]
    code_d, out_d, err_d = _run_main(capsys, *args, "--backend", "dummy")
    code_s, out_s, err_s = _run_main(capsys, *args, "--backend", "subproc")
    assert (code_d, code_s) == (0, 0), err_d + err_s
    dummy, subproc = _parse_summary(out_d), _parse_summary(out_s)
    assert dummy["backend"] == "dummy"
    assert subproc["backend"] == _subproc_backend(DEFAULT_START_METHOD, 3)
    for key in ("env_id", "num_envs", "env_steps", *STAT_KEYS):
        assert dummy[key] == subproc[key], key
    assert int(dummy["episodes"]) > 0
    assert _stats(dummy) == _reference_stats("FrozenLake-v1", 3, 600, 7)


def test_defaults(capsys):
    """Without options: CartPole-v1, 8 envs, subproc backend, seed 0."""
    code, out, err = _run_main(capsys, "run", "--steps", "16")
    assert code == 0, err
    summary = _parse_summary(out)
    _check_summary(summary, "CartPole-v1", 8, 16, _subproc_backend(DEFAULT_START_METHOD, 8))
    assert _stats(summary) == _reference_stats("CartPole-v1", 8, 16, 0)


def test_help_shows_defaults(capsys, monkeypatch):
    """``vecenv run --help`` documents the defaults, including 100000 steps (10000 for a PettingZoo env module)."""
    monkeypatch.setenv("COLUMNS", "200")
    with pytest.raises(SystemExit) as excinfo:
        main(["run", "--help"])
    assert excinfo.value.code == 0
    out = capsys.readouterr().out
    for default in ("CartPole-v1", "8", "subproc", "0"):
        assert f"(default: {default})" in out
    assert "(default: 100000, or 10000 for a PettingZoo env module" in out


def test_version_in_process(capsys):
    """``main(["--version"])`` prints the version and exits 0."""
    with pytest.raises(SystemExit) as excinfo:
        main(["--version"])
    assert excinfo.value.code == 0
    assert capsys.readouterr().out.strip() == f"vecenv {vecenv.__version__}"


def test_steps_rounded_up_to_multiple_of_num_envs(capsys):
    """``--steps`` not a multiple of ``N``: ceil(S/N) vector steps, i.e. ceil(S/N)*N env steps."""
    code, out, err = _run_main(
        capsys, "run", "Acrobot-v1", "-n", "3", "--steps", "401", "--seed", "2", "--backend", "dummy"
    )
    assert code == 0, err
    summary = _parse_summary(out)
    _check_summary(summary, "Acrobot-v1", 3, 401, "dummy")
    assert summary["env_steps"] == "402"
    assert _stats(summary) == _reference_stats("Acrobot-v1", 3, 401, 2)


def test_no_finished_episode_prints_na(capsys):
    """No episode finished: episodes 0 and every episode statistic is ``n/a``."""
    code, out, err = _run_main(capsys, "run", "Pendulum-v1", "-n", "2", "--steps", "100", "--backend", "dummy")
    assert code == 0, err
    summary = _parse_summary(out)
    assert summary["episodes"] == "0"
    assert all(summary[key] == "n/a" for key in STAT_KEYS[1:])


def test_env_kwargs_reach_env(capsys):
    """``--env-kwargs`` is passed to ``gymnasium.make``: ``max_episode_steps`` caps every episode."""
    code, out, err = _run_main(
        capsys,
        "run",
        "CartPole-v1",
        "-n",
        "2",
        "--steps",
        "400",
        "--seed",
        "4",
        "--backend",
        "dummy",
        "--env-kwargs",
        '{"max_episode_steps": 10}',
    )
    assert code == 0, err
    summary = _parse_summary(out)
    assert int(summary["episode_length_max"]) == 10
    assert int(summary["episodes"]) >= 400 // 10
    assert _stats(summary) == _reference_stats("CartPole-v1", 2, 400, 4, {"max_episode_steps": 10})


def test_start_method_option(capsys):
    """``--start-method spawn`` is used by the subproc backend and shown in the backend line."""
    code, out, err = _run_main(
        capsys, "run", "CartPole-v1", "-n", "2", "--steps", "100", "--seed", "5", "--start-method", "spawn"
    )
    assert code == 0, err
    summary = _parse_summary(out)
    _check_summary(summary, "CartPole-v1", 2, 100, _subproc_backend("spawn", 2))
    assert _stats(summary) == _reference_stats("CartPole-v1", 2, 100, 5)


def test_different_seeds_differ(capsys):
    """The seed matters: two seeds give different statistics, each equal to its reference."""
    outs = []
    for seed in ("0", "1"):
        code, out, err = _run_main(
            capsys, "run", "CartPole-v1", "-n", "2", "--steps", "400", "--seed", seed, "--backend", "dummy"
        )
        assert code == 0, err
        outs.append(_stats(_parse_summary(out)))
        assert outs[-1] == _reference_stats("CartPole-v1", 2, 400, int(seed))
    assert outs[0] != outs[1]


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["--num-envs", "0"], "--num-envs"),
        (["-n", "-1"], "--num-envs"),
        (["-n", "two"], "--num-envs"),
        (["--steps", "abc"], "--steps"),
        (["--steps", "0"], "--steps"),
        (["--env-kwargs", "{not json"], "--env-kwargs"),
        (["--env-kwargs", "[1]"], "--env-kwargs"),
        (["--backend", "bogus"], "--backend"),
        (["--seed", "x"], "--seed"),
        (["--start-method", "bogus"], "--start-method"),
        (["--start-method", "bogus", "--backend", "dummy"], "--start-method"),
    ],
)
def test_bad_option_values(capsys, args, option):
    """Bad option values: argparse's ``vecenv run: error:`` line naming the option, exit 2, no traceback."""
    with pytest.raises(SystemExit) as excinfo:
        main(["run", *args])
    assert excinfo.value.code == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert "Traceback" not in err
    last = err.splitlines()[-1]
    assert last.startswith("vecenv run: error: ")
    assert option in last
    assert [line for line in err.splitlines() if "error:" in line] == [last]


def test_no_command(capsys):
    """``vecenv`` without a command is a usage error (exit 2)."""
    with pytest.raises(SystemExit) as excinfo:
        main([])
    assert excinfo.value.code == 2
    assert "vecenv: error:" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("env_id", "suggestion"),
    [("CartPol-v1", "CartPole-v1"), ("Cartpole-v1", "CartPole-v1"), ("Pendulum-v9", "Pendulum-v1")],
)
def test_unknown_env_id_suggests_close_ids(capsys, env_id, suggestion):
    """An unknown env id: one error line naming it and listing close registered ids."""
    code, out, err = _run_main(capsys, "run", env_id, "-n", "2", "--backend", "dummy")
    line = _assert_one_line_error(code, out, err)
    assert env_id in line
    assert suggestion in line


def test_unknown_env_id_without_close_match(capsys):
    """A totally unknown env id is still a one-line user error; it says how to name a package that registers it
    (plugins such as minigrid or highway-env register ids without a namespace)."""
    code, out, err = _run_main(capsys, "run", "Qwzxvbnmpl-v0", "-n", "2", "--backend", "dummy")
    line = _assert_one_line_error(code, out, err)
    assert "Qwzxvbnmpl-v0" in line  # (no registered id is close to it, Atari's included)
    assert line.endswith("MODULE:Qwzxvbnmpl-v0 or --import MODULE)")


@pytest.mark.parametrize("backend", ["dummy", "subproc"])
def test_env_kwargs_rejected_by_env(capsys, backend):
    """``--env-kwargs`` the env does not accept: one ``vecenv: error:`` line naming the bad key, exit 2."""
    code, out, err = _run_main(
        capsys, "run", "CartPole-v1", "-n", "2", "--backend", backend, "--env-kwargs", '{"foo": 1}'
    )
    line = _assert_one_line_error(code, out, err)
    assert "foo" in line


def test_missing_dependency_dummy(capsys):
    """``LunarLander-v3`` without Box2D (dummy backend): one error line naming the missing package, exit 2."""
    code, out, err = _run_main(capsys, "run", "LunarLander-v3", "-n", "1", "--backend", "dummy")
    line = _assert_one_line_error(code, out, err)
    assert "LunarLander-v3" in line
    assert "box2d" in line.lower()


# --- vecenv run --monitor and vecenv plot ------------------------------------------------------------------


def _read_monitor_csv(path: str) -> tuple[dict, list[dict[str, str]]]:
    """Parse a monitor CSV with the json/csv modules: (header, rows)."""
    import csv
    import json

    with open(path, newline="") as handle:
        first = handle.readline()
        assert first.startswith("#")
        return json.loads(first[1:]), list(csv.DictReader(handle))


def test_run_monitor_writes_one_csv_per_env(capsys, tmp_path):
    """``--monitor DIR``: one SB3-format CSV per env whose episodes are exactly those the summary counted."""
    out_dir = tmp_path / "mon"
    code, out, err = _run_main(
        capsys, "run", "CartPole-v1", "-n", "2", "--steps", "400", "--seed", "3", "--backend", "dummy",
        "--monitor", str(out_dir),
    )  # fmt: skip
    assert code == 0, err
    summary = _parse_summary(out)
    assert sorted(os.listdir(out_dir)) == ["0.monitor.csv", "1.monitor.csv"]
    returns = []
    for name in ("0.monitor.csv", "1.monitor.csv"):
        header, rows = _read_monitor_csv(str(out_dir / name))
        assert set(header) == {"t_start", "env_id"}
        assert header["env_id"] == "CartPole-v1"
        returns += [float(row["r"]) for row in rows]
        assert all(float(row["r"]) == int(row["l"]) for row in rows)  # CartPole: reward 1 per step
    assert len(returns) == int(summary["episodes"])
    assert f"{np.mean(returns):.3f}" == summary["episode_return_mean"]
    assert _stats(summary) == _reference_stats("CartPole-v1", 2, 400, 3)


def test_plot_writes_png(capsys, tmp_path):
    """``vecenv plot DIR`` writes DIR/monitor.png (a decodable image); ``-o`` picks the file."""
    pytest.importorskip("matplotlib")
    import matplotlib.image

    out_dir = tmp_path / "mon"
    assert _run_main(capsys, "run", "-n", "2", "--steps", "300", "-b", "dummy", "--monitor", str(out_dir))[0] == 0
    code, out, err = _run_main(capsys, "plot", str(out_dir))
    assert code == 0, err
    assert out.strip() == f"wrote {out_dir / 'monitor.png'}"
    image = matplotlib.image.imread(str(out_dir / "monitor.png"))
    assert image.ndim == 3 and image.shape[0] > 100 and image.shape[1] > 100
    assert image.std() > 0  # not a blank canvas
    target = tmp_path / "curve.png"
    code, out, err = _run_main(capsys, "plot", str(out_dir / "0.monitor.csv"), "-o", str(target), "--window", "5")
    assert code == 0, err
    assert matplotlib.image.imread(str(target)).shape == image.shape


def test_plot_without_monitor_files_is_a_user_error(capsys, tmp_path):
    """``vecenv plot`` on a folder with no monitor file: one error line, exit 2."""
    line = _assert_one_line_error(*_run_main(capsys, "plot", str(tmp_path)), command="plot")
    assert "MONITOR_DIR_OR_CSV" in line and "a folder without *monitor.csv files" in line


def test_plot_without_plot_extra_names_the_extra(capsys, tmp_path, monkeypatch):
    """Without pandas/matplotlib, ``vecenv plot`` says which extra to install and exits 2."""
    for module in ("pandas", "matplotlib", "matplotlib.figure"):
        monkeypatch.setitem(sys.modules, module, None)  # makes ``import module`` raise ImportError
    line = _assert_one_line_error(*_run_main(capsys, "plot", str(tmp_path)), command="plot")
    assert '"plot" extra: pip install pandas matplotlib' in line


# --- vecenv run --video / --check-nan ----------------------------------------------------------------------


def test_run_video_records_first_steps(capsys, tmp_path):
    """``--video DIR --video-length N``: one MP4 of N+1 frames (SB3's count) of the tiled envs, frames changing."""
    import cv2

    code, _, err = _run_main(
        capsys, "run", "CartPole-v1", "-n", "2", "--steps", "100", "-b", "dummy",
        "--video", str(tmp_path), "--video-length", "12",
    )  # fmt: skip
    assert code == 0, err
    assert sorted(os.listdir(tmp_path)) == ["rl-video-step-0-to-step-12.mp4"]
    capture = cv2.VideoCapture(str(tmp_path / "rl-video-step-0-to-step-12.mp4"))
    frames = []
    while True:
        ok, frame = capture.read()
        if not ok:
            break
        frames.append(frame)
    capture.release()
    assert len(frames) == 13
    env = gym.make("CartPole-v1", render_mode="rgb_array")
    env.reset(seed=0)
    height, width, _ = env.render().shape
    env.close()
    assert frames[0].shape == (2 * height, width, 3)  # 2 envs tiled into a 2x1 grid
    assert any(np.abs(frames[0].astype(int) - frame.astype(int)).mean() > 0.1 for frame in frames[1:])


def test_run_video_without_rgb_array_is_a_user_error(capsys, tmp_path):
    """``--video`` on envs made without rgb_array rendering: one error line saying how to create them, exit 2."""
    code, _, err = _run_main(
        capsys, "run", "CartPole-v1", "-n", "2", "--steps", "10", "-b", "dummy",
        "--video", str(tmp_path), "--env-kwargs", '{"render_mode": null}',
    )  # fmt: skip
    line = _assert_one_line_error(code, "", err)
    assert "argument --video" in line and "rgb_array" in line and "render_mode=None" in line
    assert os.listdir(tmp_path) == []  # refused before the folder is written to


def test_run_check_nan_passes_clean_env(capsys):
    """``--check-nan`` on a finite env changes nothing: same statistics as without it."""
    code, out, err = _run_main(capsys, "run", "CartPole-v1", "-n", "2", "--steps", "400", "--seed", "3",
                               "-b", "dummy", "--check-nan")  # fmt: skip
    assert code == 0, err
    assert _stats(_parse_summary(out)) == _reference_stats("CartPole-v1", 2, 400, 3)


# --- vecenv run --normalize / --save-normalize / --load-normalize --------------------------------------------


def test_run_save_and_load_normalize(capsys, tmp_path):
    """``--save-normalize`` writes statistics of every observation seen; episode stats stay the env's own rewards;
    ``--load-normalize`` starts from them; a corrupt file is a one-line error (exit 2)."""
    path = tmp_path / "norm.npz"
    args = ("run", "CartPole-v1", "-n", "2", "--steps", "400", "--seed", "3", "-b", "dummy")
    code, out, err = _run_main(capsys, *args, "--save-normalize", str(path))
    assert code == 0, err
    assert _stats(_parse_summary(out)) == _reference_stats("CartPole-v1", 2, 400, 3)  # raw, not normalized
    venv = vecenv.DummyVecEnv([lambda: gym.make("CartPole-v1")])
    loaded = vecenv.VecNormalize.load(path, venv)
    # one update for the first reset and one per vector step, 2 envs each (RunningMeanStd starts at 1e-4)
    assert loaded.obs_rms.count == pytest.approx(1e-4 + 2 * (1 + 200))
    loaded.close()
    code, out, err = _run_main(capsys, *args, "--load-normalize", str(path))
    assert code == 0, err
    path.write_bytes(path.read_bytes()[:100])  # truncated
    line = _assert_one_line_error(*_run_main(capsys, *args, "--load-normalize", str(path)))
    assert "norm.npz" in line


def test_run_n_workers(capsys):
    """``--n-workers W`` runs W worker processes (shown in the summary) with the same statistics as dummy."""
    args = ("run", "CartPole-v1", "-n", "3", "--steps", "300", "--seed", "2")
    code, out, err = _run_main(capsys, *args, "--n-workers", "3")
    assert code == 0, err
    summary = _parse_summary(out)
    assert summary["backend"] == _subproc_backend(DEFAULT_START_METHOD, 3, n_workers=3)
    assert _stats(summary) == _reference_stats("CartPole-v1", 3, 300, 2)


def test_run_parent_envs(capsys):
    """``--parent-envs K``: K envs in this process, the rest in the workers (summary line), same statistics as
    dummy; K >= N is a one-line usage error before anything starts."""
    args = ("run", "CartPole-v1", "-n", "3", "--steps", "300", "--seed", "2")
    code, out, err = _run_main(capsys, *args, "--parent-envs", "2")
    assert code == 0, err
    summary = _parse_summary(out)
    assert summary["backend"] == f"subproc ({DEFAULT_START_METHOD}, 1 worker, 2 envs in this process)"
    assert _stats(summary) == _reference_stats("CartPole-v1", 3, 300, 2)
    line = _assert_one_line_error(*_run_main(capsys, *args, "--parent-envs", "3"))
    assert "--parent-envs 3 must be below --num-envs 3" in line


def test_missing_render_dependency_is_a_user_error(capsys, tmp_path, monkeypatch):
    """A render dependency missing at run time (pygame for --video): one error line naming it, exit 2."""
    from gymnasium.envs.classic_control import cartpole

    def render_without_pygame(self):
        raise gym.error.DependencyNotInstalled(
            'pygame is not installed, run `pip install "gymnasium[classic-control]"`'
        )

    monkeypatch.setattr(cartpole.CartPoleEnv, "render", render_without_pygame)
    line = _assert_one_line_error(
        *_run_main(capsys, "run", "-n", "2", "--steps", "10", "-b", "dummy", "--video", str(tmp_path))
    )
    assert "pygame" in line


# --- user errors, output paths and summary lines, through the console script -------------------------------


def test_console_script_monitor_folder_cannot_be_created(tmp_path):
    """``--monitor DIR`` under a regular file: exit 2, one line naming the option, the path and the file."""
    (tmp_path / "afile").write_text("")
    result = _run_script("run", "-n", "2", "--steps", "10", "-b", "dummy", "--monitor", "afile/mon", cwd=tmp_path)
    line = _script_error(result)
    assert "argument --monitor: expected a folder that exists or can be created" in line
    assert "'afile/mon'" in line and "'afile' is a file, not a folder" in line


@pytest.mark.parametrize(
    ("given", "received"), [("missing.npz", "which does not exist"), ("folder", "which is a folder")]
)
def test_console_script_load_normalize_missing_file_or_folder(tmp_path, given, received):
    """``--load-normalize`` with a missing file or with a folder: one line naming the option, what it expects
    and the path, before any env starts."""
    (tmp_path / "folder").mkdir()
    result = _run_script("run", "Pendulum-v1", "-n", "2", "--steps", "8", "--load-normalize", given, cwd=tmp_path)
    line = _script_error(result)
    assert line == (
        "vecenv run: error: argument --load-normalize: expected a statistics file saved by --save-normalize "
        f"(VecNormalize.save), got {given!r}, {received}"
    )


def test_console_script_plot_missing_path(tmp_path):
    """``vecenv plot`` on a path that does not exist says so (and what it expects)."""
    pytest.importorskip("pandas")
    pytest.importorskip("matplotlib")
    line = _script_error(_run_script("plot", "runs/nothing", cwd=tmp_path), "plot")
    assert "argument MONITOR_DIR_OR_CSV: expected a folder of *monitor.csv files" in line
    assert line.endswith("got 'runs/nothing', which does not exist")
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (bytes(range(128, 256)) * 4, "is not utf-8 text"),
        (b"name,score\nada,3\n", "its first line should be '#' followed by a JSON header"),
        (b'#{"t_start": 1.0}\nname,score\nada,3\n', "missing ['l', 'r', 't']"),
        (b'#{"t_start": 1.0}\n', "expected CSV rows under the columns r,l,t"),
    ],
    ids=["binary", "unrelated-text", "other-columns", "header-only"],
)
def test_console_script_plot_not_a_monitor_csv(tmp_path, content, problem):
    """``vecenv plot`` on a file that is not a monitor CSV: says what a monitor CSV is, and what is wrong."""
    pytest.importorskip("pandas")
    pytest.importorskip("matplotlib")
    (tmp_path / "data.csv").write_bytes(content)
    line = _script_error(_run_script("plot", "data.csv", cwd=tmp_path), "plot")
    assert line.startswith(
        "vecenv plot: error: argument MONITOR_DIR_OR_CSV: expected a monitor CSV written by vecenv's or SB3's "
        "Monitor (a '#{...}' JSON header line, then the columns r,l,t); got 'data.csv': "
    )
    assert problem in line
    assert os.listdir(tmp_path) == ["data.csv"]  # no image written


@pytest.mark.parametrize("command", ["run", "plot", "bench"])
def test_console_script_unknown_option_shows_the_command_usage(command):
    """An unknown option of a sub-command: that sub-command's usage and error line, exit 2."""
    args = {"run": ["run", "CartPole-v1", "--bogus"], "plot": ["plot", "x", "--bogus"], "bench": ["bench", "--bogus"]}
    result = _run_script(*args[command])
    assert result.returncode == 2
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith(f"usage: vecenv {command} ")
    assert "usage: vecenv [-h]" not in result.stderr
    assert result.stderr.splitlines()[-1] == f"vecenv {command}: error: unrecognized arguments: --bogus"


def test_console_script_output_paths_create_missing_folders(tmp_path):
    """The rule of every output option: missing folders are created (--monitor, --save-normalize, --video,
    plot -o); the summary names the files written."""
    pytest.importorskip("pandas")
    pytest.importorskip("matplotlib")
    result = _run_script(
        "run", "-n", "2", "--steps", "40", "-b", "dummy", "--monitor", "a/mon", "--save-normalize", "b/c/n.npz",
        "--video", "d/vid", "--video-length", "3", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    summary = _parse_summary(result.stdout)
    assert sorted(os.listdir(tmp_path / "a" / "mon")) == ["0.monitor.csv", "1.monitor.csv"]
    assert (tmp_path / "b" / "c" / "n.npz").is_file()
    assert os.listdir(tmp_path / "d" / "vid") == ["rl-video-step-0-to-step-3.mp4"]
    assert summary["monitor"] == "2 files, a/mon/{0..1}.monitor.csv"
    assert summary["normalize"] == "on, statistics saved to b/c/n.npz"
    assert summary["video"] == "d/vid/rl-video-step-0-to-step-3.mp4"
    result = _run_script("plot", "a/mon", "-o", "e/f/curve.png", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "wrote e/f/curve.png\n"
    assert (tmp_path / "e" / "f" / "curve.png").is_file()


@pytest.mark.parametrize(
    ("args", "option", "problem"),
    [
        (["run", "--monitor", "afile/x"], "--monitor", "'afile' is a file, not a folder"),
        (["run", "--monitor", "afile"], "--monitor", "which is an existing file"),
        (["run", "--save-normalize", "afile/x/n.npz"], "--save-normalize", "'afile' is a file, not a folder"),
        (["run", "--save-normalize", "adir"], "--save-normalize", "which is an existing folder"),
        (["run", "--video", "afile/v"], "--video", "'afile' is a file, not a folder"),
        (["run", "--video", "afile"], "--video", "which is an existing file"),
        (["plot", "adir/0.monitor.csv", "-o", "afile/p.png"], "-o/--output", "'afile' is a file, not a folder"),
        (["plot", "adir/0.monitor.csv", "-o", "adir"], "-o/--output", "which is an existing folder"),
        (["bench", "--quick", "--output-dir", "afile/out"], "--output-dir/-o", "'afile' is a file, not a folder"),
        (["bench", "--quick", "--output-dir", "afile"], "--output-dir/-o", "which is an existing file"),
    ],
    ids=lambda value: value if isinstance(value, str) else "-".join(value).replace("/", "_"),
)
def test_console_script_output_path_refused(tmp_path, args, option, problem):
    """An output path whose folder cannot be created, or a folder where a file is expected (or the reverse):
    exit 2 with one line naming the option, before anything is written or run."""
    if args[0] in ("plot", "bench"):
        pytest.importorskip("pandas")
        pytest.importorskip("matplotlib")
    (tmp_path / "afile").write_text("")
    (tmp_path / "adir").mkdir()
    (tmp_path / "adir" / "0.monitor.csv").write_text('#{"t_start": 1.0, "env_id": "x"}\nr,l,t\n1.0,1,0.5\n')
    extra = ["-n", "2", "--steps", "10", "-b", "dummy", "--monitor", "new/mon"] if args[0] == "run" else []
    if "--monitor" in args:
        extra = extra[:-2]
    result = _run_script(*args, *extra, cwd=tmp_path)
    line = _script_error(result, args[0])
    assert line.startswith(f"vecenv {args[0]}: error: argument {option}: expected ")
    assert problem in line
    assert sorted(os.listdir(tmp_path)) == ["adir", "afile"]  # nothing created, not even the other output folders
    assert os.listdir(tmp_path / "adir") == ["0.monitor.csv"]


def test_console_script_n_workers_above_num_envs():
    """``--n-workers`` above ``--num-envs``: said once on stderr; the summary shows the workers actually used."""
    result = _run_script("run", "CartPole-v1", "-n", "2", "--steps", "20", "--n-workers", "5")
    assert result.returncode == 0, result.stderr
    assert result.stderr == "vecenv run: --n-workers 5 is more than --num-envs 2; using 2 workers\n"
    summary = _parse_summary(result.stdout)
    assert summary["backend"] == f"subproc ({DEFAULT_START_METHOD}, 2 workers)"
    result = _run_script("run", "CartPole-v1", "-n", "3", "--steps", "30", "--n-workers", "4", "--parent-envs", "1")
    assert result.returncode == 0, result.stderr
    assert result.stderr == (
        "vecenv run: --n-workers 4 is more than the 2 envs in worker processes (--num-envs 3, --parent-envs 1); "
        "using 2 workers\n"
    )
    assert (
        _parse_summary(result.stdout)["backend"]
        == f"subproc ({DEFAULT_START_METHOD}, 2 workers, 1 env in this process)"
    )


@pytest.mark.parametrize("backend", ["dummy", "subproc"])
def test_console_script_video_prints_only_its_own_output(tmp_path, backend):
    """A ``--video`` run without a desktop session (no XDG_RUNTIME_DIR, no SDL driver chosen): nothing from SDL
    on stderr, in this process or in the worker processes."""
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_RUNTIME_DIR", "SDL_VIDEODRIVER", "SDL_AUDIODRIVER")}
    result = _run_script(
        "run", "-n", "2", "--steps", "10", "-b", backend, "--video", "vid", "--video-length", "3", cwd=tmp_path, env=env
    )
    assert result.returncode == 0, result.stderr
    assert "XDG_RUNTIME_DIR" not in result.stderr
    assert result.stderr == ""
    assert _parse_summary(result.stdout)["video"] == "vid/rl-video-step-0-to-step-3.mp4"


def test_video_sdl_drivers_only_when_not_set(capsys, tmp_path, monkeypatch):
    """SDL's offscreen video and dummy audio drivers are set for the run only when the user did not choose drivers,
    and removed after (not the dummy video driver: highway-env draws blank frames with it)."""
    import vecenv.cli_run

    seen: list[tuple[str | None, str | None]] = []
    monkeypatch.setattr(
        vecenv.cli_run,
        "_run",
        lambda args: seen.append((os.environ.get("SDL_VIDEODRIVER"), os.environ.get("SDL_AUDIODRIVER"))) or 0,
    )
    monkeypatch.delenv("SDL_VIDEODRIVER", raising=False)
    monkeypatch.setenv("SDL_AUDIODRIVER", "pulse")
    args = ["run", "-n", "2", "--steps", "10", "-b", "dummy"]
    assert main([*args, "--video", str(tmp_path)]) == 0
    assert main(args) == 0
    assert seen == [("offscreen", "pulse"), (None, "pulse")]
    assert "SDL_VIDEODRIVER" not in os.environ and os.environ["SDL_AUDIODRIVER"] == "pulse"


def test_console_script_summary_names_loaded_and_saved_files(tmp_path):
    """The summary says where normalization statistics were loaded from and saved to, and that NaN checking
    was on."""
    args = ("run", "Pendulum-v1", "-n", "2", "--steps", "20", "-b", "dummy")
    result = _run_script(*args, "--normalize", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert _parse_summary(result.stdout)["normalize"] == "on"
    result = _run_script(*args, "--save-normalize", "n.npz", "--check-nan", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    summary = _parse_summary(result.stdout)
    assert summary["normalize"] == "on, statistics saved to n.npz"
    assert summary["check_nan"] == "on, no NaN or infinity found"
    result = _run_script(*args, "--load-normalize", "n.npz", "--save-normalize", "m.npz", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    summary = _parse_summary(result.stdout)
    assert summary["normalize"] == "on, statistics loaded from n.npz and saved to m.npz"
    assert "check_nan" not in summary and "video" not in summary and "monitor" not in summary
    assert sorted(os.listdir(tmp_path)) == ["m.npz", "n.npz"]


@pytest.mark.parametrize(("workloads", "cpu_line"), [("cpu", True), ("cartpole", False)])
def test_console_script_bench_report_cpu_iterations(tmp_path, workloads, cpu_line):
    """``vecenv bench``'s report gives the calibrated busy-loop iterations of the cpu workload when it runs,
    and no ``None`` when it does not."""
    pytest.importorskip("pandas")
    pytest.importorskip("matplotlib")
    result = _run_script(
        "bench", "--quick", "-w", workloads, "-b", "plain", "-n", "1", "--in-process", "--output-dir", "out",
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    report = (tmp_path / "out" / "bench.md").read_text(encoding="utf-8")
    settings = next(line for line in report.splitlines() if line.startswith("Settings:"))
    assert "None" not in settings
    match = re.search(r"cpu workload (\d+) busy-loop iterations per step \(~200 us\)", settings)
    assert (match is not None) == cpu_line, settings
    if match:
        assert int(match.group(1)) >= 1


@pytest.mark.parametrize("command", ["", "run", "plot", "bench"])
def test_docs_cli_shows_the_real_usage(command):
    """docs/cli.md pastes each command's ``--help``; its usage part (up to the first blank line, whitespace
    aside, since argparse wraps it to the terminal) is the one the command prints."""
    docs = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "cli.md")
    with open(docs, encoding="utf-8") as handle:
        page = handle.read()
    shown = f"$ vecenv {command} --help\n" if command else "$ vecenv --help\n"
    assert shown in page
    documented = page.split(shown, 1)[1].split("\n\n", 1)[0]
    result = _run_script(*([command] if command else []), "--help", env={**os.environ, "COLUMNS": "80"})
    assert result.returncode == 0
    actual = result.stdout.split("\n\n", 1)[0]
    assert " ".join(documented.split()) == " ".join(actual.split())


@pytest.mark.skipif(not HAS_RAY, reason="ray is not installed (the ray extra)")
@pytest.mark.filterwarnings("ignore:RayVecEnv. Ray is already initialised:RuntimeWarning")
def test_ray_backend_prints_the_reference_statistics(capsys, ray_session):
    """--backend ray: RayVecEnv actors (here in the tests' Ray), the same statistics as plain Gymnasium envs."""
    args = ["run", "FrozenLake-v1", "-n", "3", "--steps", "600", "--seed", "7", "--backend", "ray", "--n-workers", "2"]
    code, out, err = _run_main(capsys, *args)
    assert code == 0, err
    summary = _parse_summary(out)
    assert summary["backend"] == "ray (2 actors on 1 node)"
    assert _stats(summary) == _reference_stats("FrozenLake-v1", 3, 600, 7)


@pytest.mark.skipif(not HAS_RAY, reason="ray is not installed (the ray extra)")
@pytest.mark.filterwarnings("ignore:RayVecEnv. Ray is already initialised:RuntimeWarning")
def test_ray_n_workers_above_num_envs_is_said(capsys, ray_session):
    """--backend ray with more actors than envs: said once on stderr, as for subproc; one actor per env runs."""
    code, out, err = _run_main(
        capsys, "run", "FrozenLake-v1", "-n", "2", "--steps", "20", "-b", "ray", "--n-workers", "3"
    )
    assert code == 0, err
    assert err == "vecenv run: --n-workers 3 is more than --num-envs 2; using 2 actors\n"
    assert _parse_summary(out)["backend"] == "ray (2 actors on 1 node)"


def test_ray_address_needs_the_ray_backend(capsys):
    code, out, err = _run_main(capsys, "run", "--ray-address", "auto", "--steps", "8")
    assert _assert_one_line_error(code, out, err) == (
        "vecenv run: error: argument --ray-address: needs --backend ray (got --backend subproc, which starts its "
        "worker processes on this machine)"
    )


def test_ray_backend_without_ray_names_the_extra(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # as if ray were not installed
    code, out, err = _run_main(capsys, "run", "--backend", "ray", "--steps", "8")
    line = _assert_one_line_error(code, out, err)
    assert "--backend ray: RayVecEnv needs ray, which is not installed" in line and '"ray" extra' in line


# --- options of other backends, path errors, help ------------------------------------------------------------

DUMMY_DOES = "which steps every env in this process"
RAY_DOES = "whose actors Ray starts, none of them in this process"


@pytest.mark.parametrize(
    ("backend", "given", "needs", "does"),
    [
        ("dummy", ["--n-workers", "2"], "subproc or ray", DUMMY_DOES),
        ("dummy", ["--parent-envs", "1"], "subproc", DUMMY_DOES),
        ("dummy", ["--parent-envs", "0"], "subproc", DUMMY_DOES),
        ("dummy", ["--start-method", DEFAULT_START_METHOD], "subproc", DUMMY_DOES),
        ("dummy", ["--ray-address", "auto"], "ray", DUMMY_DOES),
        ("subproc", ["--ray-address", "auto"], "ray", "which starts its worker processes on this machine"),
        ("ray", ["--start-method", DEFAULT_START_METHOD], "subproc", RAY_DOES),
        ("ray", ["--parent-envs", "1"], "subproc", RAY_DOES),
    ],
    ids=lambda value: "-".join(value).lstrip("-") if isinstance(value, list) else None,
)
def test_console_script_option_of_another_backend_is_refused(backend, given, needs, does):
    """An option that the chosen backend does not use is a user error naming the option, the backends that use
    it and the one given (exit 2, before anything starts), never silently ignored."""
    result = _run_script("run", "-n", "2", "--steps", "10", "-b", backend, *given)
    assert _script_error(result) == (
        f"vecenv run: error: argument {given[0]}: needs --backend {needs} (got --backend {backend}, {does})"
    )


def test_console_script_options_of_the_backend_run():
    """The options of the chosen backend are taken without a word: subproc with all its own, dummy with none."""
    result = _run_script(
        "run", "-n", "3", "--steps", "30", "-b", "subproc", "--n-workers", "1", "--parent-envs", "1",
        "--start-method", DEFAULT_START_METHOD,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert (
        _parse_summary(result.stdout)["backend"] == f"subproc ({DEFAULT_START_METHOD}, 1 worker, 1 env in this process)"
    )
    result = _run_script("run", "-n", "1", "--steps", "10", "-b", "dummy")
    assert result.returncode == 0 and result.stderr == ""


def _proc_problem() -> str:
    """Why nothing can be created in /proc, as vecenv words it: a virtual file system refuses new entries
    (ENOENT, as root) and an unprivileged user has no permission there (EACCES)."""
    import errno

    try:
        os.mkdir("/proc/vecenv-test-probe")
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return "the folder '/proc' does not accept new files or folders (its file system refuses them)"
        if exc.errno in (errno.EACCES, errno.EPERM):
            return "no permission to write in the folder '/proc'"
        raise
    os.rmdir("/proc/vecenv-test-probe")
    pytest.skip("/proc accepts new folders here")


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc")
@pytest.mark.parametrize(
    ("args", "option", "path", "expected"),
    [
        (["run", "--video"], "--video", "/proc/vid", "a folder that exists or can be created"),
        (["run", "--monitor"], "--monitor", "/proc/mon", "a folder that exists or can be created"),
        (
            ["run", "--save-normalize"],
            "--save-normalize",
            "/proc/version",
            "a file path whose folder exists or can be created",
        ),
        (
            ["run", "--save-normalize"],
            "--save-normalize",
            "/proc/new/n.npz",
            "a file path whose folder exists or can be created",
        ),
        (["plot", "adir", "-o"], "-o/--output", "/proc/curve.png", "a file path whose folder exists or can be created"),
        (
            ["bench", "--quick", "--output-dir"],
            "--output-dir/-o",
            "/proc/out",
            "a folder that exists or can be created",
        ),
    ],
    ids=lambda value: value if isinstance(value, str) and value.startswith("/") else None,
)
def test_console_script_unwritable_path_one_wording(tmp_path, args, option, path, expected):
    """A path that cannot be written, for every output option: one line in one wording, ``argument OPTION:
    expected WHAT, got 'PATH': WHY`` with the real reason (not a raw ``[Errno 2] No such file or directory``),
    before anything runs."""
    if args[0] in ("plot", "bench"):
        pytest.importorskip("pandas")
        pytest.importorskip("matplotlib")
    (tmp_path / "adir").mkdir()
    (tmp_path / "adir" / "0.monitor.csv").write_text('#{"t_start": 1.0, "env_id": "x"}\nr,l,t\n1.0,1,0.5\n')
    extra = ["-n", "1", "--steps", "10", "-b", "dummy"] if args[0] == "run" else []
    line = _script_error(_run_script(*args, path, *extra, cwd=tmp_path), args[0])
    assert line == f"vecenv {args[0]}: error: argument {option}: expected {expected}, got {path!r}: {_proc_problem()}"
    assert os.listdir(tmp_path) == ["adir"]


@pytest.mark.skipif(not os.path.exists("/proc/self/mem"), reason="needs Linux's /proc")
def test_console_script_unreadable_load_normalize_says_why():
    """--load-normalize of a file that cannot be read: the same wording, with the reason in words."""
    line = _script_error(
        _run_script("run", "-n", "1", "--steps", "10", "-b", "dummy", "--load-normalize", "/proc/self/mem")
    )
    assert line == (
        "vecenv run: error: argument --load-normalize: expected a statistics file saved by --save-normalize "
        "(VecNormalize.save), got '/proc/self/mem': cannot read it: input/output error"
    )


def test_save_normalize_failing_at_the_end_says_why(capsys, tmp_path, monkeypatch):
    """An output that passed the checks but cannot be written at the end of the run: the same wording."""
    import errno

    from vecenv.wrappers.vec_normalize import VecNormalize

    def refuse(self, path):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), path)

    monkeypatch.setattr(VecNormalize, "save", refuse)
    path = str(tmp_path / "n.npz")
    line = _assert_one_line_error(
        *_run_main(capsys, "run", "-n", "1", "--steps", "10", "-b", "dummy", "--save-normalize", path)
    )
    assert line == (
        "vecenv run: error: argument --save-normalize: expected a file path whose folder exists or can be created, "
        f"got {path!r}: cannot write it: permission denied"
    )


def test_os_reason_words():
    import errno

    from vecenv.cli_args import os_reason

    assert os_reason(PermissionError(errno.EACCES, "Permission denied")) == "permission denied"
    assert os_reason(OSError(errno.EROFS, "Read-only file system")) == "read-only file system"
    assert (
        os_reason(NotADirectoryError(errno.ENOTDIR, "Not a directory")) == "a part of the path is a file, not a folder"
    )
    assert os_reason(OSError(errno.EIO, "Input/output error")) == "input/output error"


def test_console_script_help_names_autotune():
    """``vecenv --help`` names ``vecenv bench --autotune``, an option of a sub-command."""
    result = _run_script("--help", env={**os.environ, "COLUMNS": "200"})
    assert result.returncode == 0
    assert "vecenv bench --autotune ENV_ID times the vector-env layouts of one env" in result.stdout
    assert "find the fastest vector env for one env (--autotune ENV_ID)" in result.stdout


@pytest.mark.parametrize(
    ("option", "given", "received"),
    [
        ("--save-normalize", "stats/", "which ends in a folder separator"),
        ("--save-normalize", "", "got an empty path"),
        ("--monitor", "", "got an empty path"),
    ],
)
def test_run_refuses_an_output_path_without_a_name_before_anything_runs(capsys, tmp_path, option, given, received):
    """A file path ending in '/' or an empty path: one error line naming the option, before any env starts (it
    used to run first, create ``stats`` as a folder, then fail, or fail with a traceback)."""
    os.chdir(tmp_path)
    line = _assert_one_line_error(*_run_main(capsys, "run", "-b", "dummy", "-n", "2", "-s", "8", option, given))
    assert f"argument {option}:" in line and received in line
    assert os.listdir(tmp_path) == []


def test_run_refuses_video_length_without_video(capsys):
    line = _assert_one_line_error(*_run_main(capsys, "run", "-b", "dummy", "-n", "2", "-s", "8", "--video-length", "5"))
    assert line == "vecenv run: error: argument --video-length: goes with --video DIR (without it no video is recorded)"


def test_save_normalize_writes_into_a_named_pipe_in_place(capsys, tmp_path):
    """An output that is not a regular file (a named pipe here, /dev/null alike) is written into, as
    ``open(path, "wb")`` does, never replaced by a file (the atomic write replaced /dev/null)."""
    fifo = tmp_path / "stats.npz"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        code, _, err = _run_main(
            capsys, "run", "Pendulum-v1", "-b", "dummy", "-n", "2", "-s", "8", "--save-normalize", str(fifo)
        )
        assert code == 0, err
        data = os.read(reader, 1 << 16)
    finally:
        os.close(reader)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert data[:4] == b"PK\x03\x04"  # the statistics file, a ZIP archive, came through the pipe


@pytest.mark.parametrize("error", [ConnectionError("Could not find any running Ray instance."), TimeoutError("60 s")])
def test_run_ray_without_a_cluster_is_a_user_error(capsys, monkeypatch, error):
    """``--backend ray --ray-address ADDRESS`` where no Ray answers (RayVecEnv raises ConnectionError, or
    TimeoutError after connect_timeout): one line naming the option and Ray's message, exit status 2."""
    import vecenv.cli_run

    class NoCluster(vecenv.cli_run.RayVecEnv):  # type: ignore[misc]
        def __init__(self, *args: object, **kwargs: object) -> None:
            raise error

    monkeypatch.setattr(vecenv.cli_run, "RayVecEnv", NoCluster)
    line = _assert_one_line_error(
        *_run_main(capsys, "run", "-b", "ray", "-n", "2", "-s", "8", "--ray-address", "10.0.0.1:6379")
    )
    assert line == f"vecenv run: error: --backend ray --ray-address 10.0.0.1:6379: {error}"


def test_plot_to_a_format_this_machine_cannot_render_is_a_user_error(capsys, tmp_path, monkeypatch):
    """matplotlib's RuntimeError for a format it cannot render here (.pgf without xelatex): one error line."""
    pytest.importorskip("matplotlib")
    import vecenv.cli_plot

    out_dir = tmp_path / "mon"
    assert _run_main(capsys, "run", "-n", "2", "--steps", "300", "-b", "dummy", "--monitor", str(out_dir))[0] == 0

    def no_latex(*args: object, **kwargs: object) -> None:
        raise RuntimeError("'xelatex' not found")

    monkeypatch.setattr(vecenv.cli_plot, "plot_results", no_latex)
    line = _assert_one_line_error(*_run_main(capsys, "plot", str(out_dir), "-o", str(tmp_path / "a.pgf")), "plot")
    assert line.endswith(
        "matplotlib cannot render " + repr(str(tmp_path / "a.pgf")) + " on this machine: 'xelatex' not found"
    )


@pytest.mark.parametrize("option", ["--normalize", "--save-normalize"])
def test_normalize_of_observations_vecnormalize_cannot_take_is_a_usage_error(capsys, tmp_path, option):
    """``--normalize`` / ``--save-normalize`` on an env whose observations are not arrays (FrozenLake's Discrete) is a
    one-line user error naming the option and the space, with what to do, and writes nothing."""
    args = ["run", "FrozenLake-v1", "-n", "2", "--steps", "10", "-b", "dummy", option]
    if option == "--save-normalize":
        args.append(str(tmp_path / "stats.npz"))
    line = _assert_one_line_error(*_run_main(capsys, *args))
    assert line.startswith(f"vecenv run: error: argument {option}: cannot normalize the observations of FrozenLake-v1")
    assert "Discrete(16)" in line and line.endswith(f"leave {option} out")
    assert list(tmp_path.iterdir()) == []
