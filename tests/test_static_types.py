"""vecenv's annotations as a user's type checker sees them: mypy ``--strict`` accepts the code that type-checks
against SB3's and Gymnasium's classes of the same names, and still rejects what is wrong (the last line of the
program below is a deliberate error, which mypy must report, and only it)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import vecenv.gymnasium as vg

ROOT = Path(__file__).resolve().parents[1]

PROGRAM = textwrap.dedent(
    """
    import gymnasium as gym
    import numpy as np
    from numpy.typing import NDArray

    import vecenv.gymnasium as vg
    from vecenv import DummyVecEnv, VecFrameStack, VecNormalize, dict_to_obs

    Obs = NDArray[np.float32]


    def make_envs(n: int) -> vg.SyncVectorEnv[Obs, NDArray[np.int64]]:
        return vg.SyncVectorEnv([lambda: gym.make("CartPole-v1") for _ in range(n)])


    def first_obs(envs: vg.AsyncVectorEnv[Obs, NDArray[np.int64]]) -> Obs:
        obs, _ = envs.reset(seed=0)
        obs, rewards, terminations, truncations, infos = envs.step(np.zeros(2, dtype=np.int64))
        return obs


    def predict(observation: np.ndarray | dict[str, np.ndarray]) -> None:  # SB3's policy.predict
        pass


    venv = DummyVecEnv([lambda: gym.make("CartPole-v1") for _ in range(2)])
    venv.step([0, 1])  # one action per env, as the docs show
    venv.step_async(np.zeros(2, dtype=np.int64))
    norm = VecNormalize(venv)
    predict(norm.reset())
    predict(norm.get_original_obs())
    normalized: np.ndarray = norm.normalize_obs(np.zeros((2, 4)))
    stacked = VecFrameStack(venv, 2, channels_order={"image": None, "vector": "last"})
    stacked_obs = stacked.step_wait()[0]
    predict(stacked_obs)
    wrong: int = dict_to_obs(venv.observation_space, {None: np.zeros((2, 4))})
    """
)


def test_mypy_strict_accepts_the_peers_typed_uses_and_reports_the_one_error(tmp_path: Path) -> None:
    program = tmp_path / "program.py"
    program.write_text(PROGRAM)
    config = tmp_path / "mypy.ini"
    config.write_text(
        "[mypy]\nstrict = True\nfollow_imports_for_stubs = True\n"
        f"cache_dir = {tmp_path / 'cache'}\n[mypy-vecenv.*]\nfollow_imports = silent\n"
    )
    env = {**os.environ, "MYPYPATH": str(ROOT)}  # (an editable install is an import hook mypy does not follow)
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(config), str(program)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    last_line = len(PROGRAM.strip("\n").splitlines())
    assert len(errors) == 1, done.stdout
    assert f"program.py:{last_line + 1}:" in errors[0] or f"program.py:{last_line}:" in errors[0], done.stdout
    assert "Incompatible types in assignment" in errors[0], done.stdout


@pytest.mark.parametrize("cls", [vg.SyncVectorEnv, vg.AsyncVectorEnv])
def test_the_gymnasium_classes_take_type_arguments_at_run_time_as_gymnasiums(cls: type) -> None:
    alias = cls[np.ndarray, np.int64]  # type: ignore[index]
    assert alias.__origin__ is cls
    assert alias.__args__ == (np.ndarray, np.int64)
