"""benchmarks/trainers.py: the step timer counts each vector step once, the rounds rotate, and a tiny real run
(SB3's PPO and the CleanRL loop, every vector env) counts the env-steps the trainers asked for."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from tests.bench_scripts import load_bench_script

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks", "trainers.py")


def _load() -> Any:
    return load_bench_script("trainers_under_test", "trainers.py")


def test_imports_without_torch_or_sb3_and_help_works() -> None:
    probe = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('trainers_probe', {SCRIPT!r})\n"
        "module = sys.modules['trainers_probe'] = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(module)\n"
        "print(sorted(module.CASES), 'torch' in sys.modules, 'stable_baselines3' in sys.modules)\n"
    )
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False)
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.split() == [
        "['cartpole-64',",
        "'cartpole-8',",
        "'cleanrl-8',",
        "'pong-16',",
        "'pong-8']",
        "False",
        "False",
    ]
    helped = subprocess.run([sys.executable, SCRIPT, "--help"], capture_output=True, text=True, timeout=60, check=False)
    assert helped.returncode == 0, helped.stderr
    for option in ("--cases", "--rounds", "--timesteps", "--json", "--markdown", "--vec-envs", "--device"):
        assert option in helped.stdout
    refused = subprocess.run(
        [sys.executable, SCRIPT, "--timesteps", "pong-9=10"], capture_output=True, text=True, timeout=60, check=False
    )
    assert refused.returncode == 2 and "'pong-9=10'" in refused.stderr


def test_step_timer_counts_each_vector_step_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fake clock that advances 1 s per reading: every outermost call adds exactly 1 s, a ``step`` that calls
    the wrapped ``step_async`` and ``step_wait`` adds 1 s and one vector step, not 3 s and two."""
    trainers = _load()
    ticks = iter(range(1000))
    monkeypatch.setattr(trainers.time, "perf_counter", lambda: float(next(ticks)))

    class Fake:
        """SB3's protocol: ``step`` runs ``step_async`` then ``step_wait``; env 0 ends an episode each step."""

        def step_async(self, actions: Any) -> None:
            self.actions = actions

        def step_wait(self) -> tuple[Any, ...]:
            return np.zeros((3, 1)), np.zeros(3), np.array([True, False, False]), [{}] * 3

        def step(self, actions: Any) -> tuple[Any, ...]:
            self.step_async(actions)
            return self.step_wait()

    venv = Fake()
    timer = trainers.StepTimer(venv)
    for _ in range(4):
        venv.step(None)
    assert (timer.seconds, timer.vector_steps, timer.episodes) == (4.0, 4, 4)
    venv.step_async(None)  # the two halves called by the trainer itself: 1 s each, one vector step
    venv.step_wait()
    assert (timer.seconds, timer.vector_steps, timer.episodes) == (6.0, 5, 5)

    class FakeGym:
        """Gymnasium's protocol: ``(obs, rewards, terminations, truncations, infos)``."""

        def step(self, actions: Any) -> tuple[Any, ...]:
            return np.zeros((3, 1)), np.zeros(3), np.array([True, False, True]), np.array([True, True, False]), {}

    gym_timer = trainers.StepTimer(gym_venv := FakeGym())
    gym_venv.step(None)
    assert (gym_timer.vector_steps, gym_timer.episodes) == (1, 3)


def test_rotations_and_timesteps_option() -> None:
    trainers = _load()
    assert trainers.rotations(["a", "b", "c"], 4) == [
        ["a", "b", "c"],
        ["b", "c", "a"],
        ["c", "a", "b"],
        ["a", "b", "c"],
    ]
    assert trainers.parse_timesteps("4096") == dict.fromkeys(trainers.CASES, 4096)
    assert trainers.parse_timesteps("pong-8=8192,cartpole-8=100") == {"pong-8": 8192, "cartpole-8": 100}
    case = trainers.CASES["cartpole-64"]
    assert [trainers.rollout_steps(case, t) for t in (1, 8192, 8193)] == [8192, 8192, 16384]


def test_a_case_whose_package_is_missing_is_skipped_with_a_row_saying_why(
    capsys: pytest.CaptureFixture[str], tmp_path: Any
) -> None:
    trainers = _load()
    case = trainers.CASES["cartpole-8"]
    trainers.CASES["cartpole-8"] = dataclasses.replace(case, needs=("no_such_module_for_trainers",))
    out = tmp_path / "skipped.json"
    result = trainers.main(["--cases", "cartpole-8", "--rounds", "1", "--vec-envs", "vecenv-dummy", "--json", str(out)])
    printed = capsys.readouterr().out
    assert "cartpole-8: skipped, no_such_module_for_trainers not installed" in printed
    with open(out, encoding="utf-8") as handle:
        rows = json.load(handle)["rows"]
    assert (
        rows
        == result["rows"]
        == [
            {"case": "cartpole-8", "vec_env": name, "skipped": "no_such_module_for_trainers not installed"}
            for name in ("sb3-dummy", "vecenv-dummy")  # the reference always runs
        ]
    )


def test_layouts_add_vecenv_subproc_runs_with_their_keyword_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--layouts`` adds ``vecenv-subproc:LABEL`` to an SB3 case, built with LABEL's keyword arguments; the other
    vector envs get none. (The runner is replaced by one that records its calls.)"""
    trainers = _load()
    monkeypatch.setitem(trainers.CASES, "cartpole-8", dataclasses.replace(trainers.CASES["cartpole-8"], needs=()))
    calls: list[tuple[str, Any]] = []

    def runner(case: Any, vec_env: str, timesteps: int, seed: int, device: str, kwargs: Any) -> dict[str, Any]:
        calls.append((vec_env, kwargs))
        return {
            "learn_s": 1.0,
            "startup_s": 0.0,
            "step_s": 0.5,
            "vector_steps": 2,
            "env_steps": 16,
            "episodes": 0,
            "trainer_timesteps": 16,
        }

    monkeypatch.setitem(trainers._RUNNERS, "sb3", runner)
    layouts = '{"w1": {"n_workers": 1}, "spin": {"wait_mode": "spin", "n_workers": 2}}'
    argv = [
        "--cases",
        "cartpole-8",
        "--rounds",
        "1",
        "--no-warmup",
        "--vec-envs",
        "vecenv-subproc",
        "--layouts",
        layouts,
    ]
    result = trainers.main(argv)
    assert calls == [
        ("sb3-dummy", None),
        ("vecenv-subproc", None),
        ("vecenv-subproc:w1", {"n_workers": 1}),
        ("vecenv-subproc:spin", {"wait_mode": "spin", "n_workers": 2}),
    ]
    assert [row["vec_env"] for row in result["rows"]] == [name for name, _ in calls]
    assert result["settings"]["layouts"] == json.loads(layouts)
    assert trainers.sb3_vec_env_class("vecenv-subproc:w1").__name__ == "SubprocVecEnv"


@pytest.mark.parametrize("text", ["not json", "[1]", '{"w1": 4}', '{"a b": {}}', '{"": {}}'])
def test_layouts_that_are_not_labelled_keyword_arguments_are_refused(text: str) -> None:
    trainers = _load()
    with pytest.raises(argparse.ArgumentTypeError, match="--layouts expects"):
        trainers.parse_layouts(text)


# --- a tiny real run of the script: SB3's PPO and the CleanRL loop over every vector env ---------------------------

SB3_VEC_ENVS = ["sb3-dummy", "sb3-subproc", "vecenv-dummy", "vecenv-subproc"]
GYM_VEC_ENVS = ["gym-sync", "gym-async", "vecenv-gym-sync", "vecenv-gym-async"]
ASKED = {"cartpole-8": 1500, "cleanrl-8": 900}  # PPO rounds up to whole rollouts of 128 x 8 env-steps
ROUNDS = 4


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    pytest.importorskip("torch")
    pytest.importorskip("stable_baselines3")
    out = tmp_path_factory.mktemp("trainers")
    argv = [
        sys.executable,
        SCRIPT,
        "--cases",
        "cartpole-8,cleanrl-8",
        "--rounds",
        str(ROUNDS),
        "--timesteps",
        ",".join(f"{case}={steps}" for case, steps in ASKED.items()),
        "--json",
        str(out / "t.json"),
        "--markdown",
        str(out / "t.md"),
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    with open(out / "t.json", encoding="utf-8") as handle:
        parsed = json.load(handle)
    yield {"json": parsed, "markdown": (out / "t.md").read_text(encoding="utf-8"), "stdout": done.stdout}


@pytest.mark.sb3
@pytest.mark.timeout(900)
def test_json_and_markdown_have_one_row_per_case_and_vec_env(tiny_run: dict[str, Any]) -> None:
    expected = [("cartpole-8", v) for v in SB3_VEC_ENVS] + [("cleanrl-8", v) for v in GYM_VEC_ENVS]
    assert [(row["case"], row["vec_env"]) for row in tiny_run["json"]["rows"]] == expected
    table = [line for line in tiny_run["markdown"].splitlines() if line.startswith("| c")][1:]  # past the header
    assert [tuple(cell.strip() for cell in line.strip("|").split("|")[:2]) for line in table] == expected
    assert tiny_run["markdown"].rstrip("\n") in tiny_run["stdout"]


@pytest.mark.sb3
@pytest.mark.timeout(900)
def test_counted_env_steps_are_what_the_trainer_asked_for(tiny_run: dict[str, Any]) -> None:
    """The step timer's count equals learn()'s timesteps rounded up to whole rollouts (128 steps x 8 envs), and
    equals the trainer's own count (PPO's ``num_timesteps``, the CleanRL loop's ``global_step``)."""
    for row in tiny_run["json"]["rows"]:
        expected = math.ceil(ASKED[row["case"]] / (128 * 8)) * 128 * 8
        assert len(row["rounds"]) == ROUNDS
        for run in row["rounds"]:
            assert run["env_steps"] == run["trainer_timesteps"] == expected, (row["vec_env"], run)
            assert run["vector_steps"] == expected // 8


@pytest.mark.sb3
@pytest.mark.timeout(900)
def test_step_share_is_a_fraction_and_the_same_seeds_give_the_same_episodes(tiny_run: dict[str, Any]) -> None:
    for case in ASKED:
        rows = [row for row in tiny_run["json"]["rows"] if row["case"] == case]
        for row in rows:
            shares = [run["step_s"] / run["learn_s"] for run in row["rounds"]]
            assert all(0 < share < 1 for share in shares)
            assert row["step_share"] == pytest.approx(float(np.median(shares)))
            assert 0 < row["step_share"] < 1
        episodes = {run["episodes"] for row in rows for run in row["rounds"]}
        assert len(episodes) == 1 and episodes.pop() > 0, case  # CartPole episodes end within 1024 steps


@pytest.mark.sb3
@pytest.mark.timeout(900)
def test_ratios_are_paired_by_round_and_the_reference_is_exactly_one(tiny_run: dict[str, Any]) -> None:
    rows = tiny_run["json"]["rows"]
    for case, reference in (("cartpole-8", "sb3-dummy"), ("cleanrl-8", "gym-sync")):
        by_name = {row["vec_env"]: row for row in rows if row["case"] == case}
        ref_rates = np.array([run["env_steps"] / run["learn_s"] for run in by_name[reference]["rounds"]])
        assert by_name[reference]["ratios"] == [1.0] * ROUNDS
        assert by_name[reference]["ratio"] == by_name[reference]["ratio_min"] == by_name[reference]["ratio_max"] == 1.0
        for name, row in by_name.items():
            assert row["reference"] == reference
            rates = np.array([run["env_steps"] / run["learn_s"] for run in row["rounds"]])
            assert row["ratios"] == pytest.approx((rates / ref_rates).tolist())
            assert row["ratio"] == pytest.approx(float(np.median(rates / ref_rates)))
            assert row["ratio_min"] <= row["ratio"] <= row["ratio_max"], name
            assert row["rate"] == pytest.approx(float(np.median(rates)))
            steps = np.array([run["step_s"] for run in row["rounds"]])
            ref_steps = np.array([run["step_s"] for run in by_name[reference]["rounds"]])
            assert row["step_ratios"] == pytest.approx((steps / ref_steps).tolist())
            assert row["step_ratio"] == pytest.approx(float(np.median(steps / ref_steps)))
        assert by_name[reference]["step_ratios"] == [1.0] * ROUNDS


@pytest.mark.sb3
@pytest.mark.timeout(900)
def test_rounds_visit_every_rotation(tiny_run: dict[str, Any]) -> None:
    """With as many rounds as vector envs, each round's order is a different rotation of the case's list: each
    vector env runs first once, and in every position once."""
    for case, names in (("cartpole-8", SB3_VEC_ENVS), ("cleanrl-8", GYM_VEC_ENVS)):
        orders = next(c["orders"] for c in tiny_run["json"]["cases"] if c["case"] == case)
        assert sorted(orders) == sorted(names[i:] + names[:i] for i in range(len(names)))
        for position in range(len(names)):
            assert sorted(order[position] for order in orders) == sorted(names)
