"""``vecenv bench``: workloads, the plain-loop baseline and adapters, derived ratios and targets, and a tiny
end-to-end run (JSON that parses back, a PNG that decodes). No timing assertions: the machine may be busy.
"""

from __future__ import annotations

import contextlib
import errno
import importlib.util
import json
import math
import os
import pickle
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

import vecenv
from tests.bench_scripts import BENCH_DIR, load_bench_script, registered_bench_script
from tests.processes import pid_running, still_running
from vecenv.bench import memory
from vecenv.bench.runner import (
    BenchConfig,
    BenchRun,
    Case,
    GymVectorAdapter,
    PlainLoop,
    VecEnvAdapter,
    backend_spec,
    plan_cases,
    run_case,
    run_case_isolated,
    time_steps,
    warm_up,
)
from vecenv.bench.workloads import (
    CPU_ENV_ID,
    IMAGE_ENV_ID,
    WORKLOADS,
    CpuEnv,
    ImageEnv,
    WorkloadFactory,
    calibrate_cpu_iterations,
)


class CountingEnv(gym.Env):
    """Counts steps and resets; episodes last ``episode_length`` steps; records the actions it got."""

    def __init__(self, episode_length: int = 3) -> None:
        self.observation_space = spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32)
        self.action_space = spaces.Discrete(5)
        self.episode_length = episode_length
        self.steps = 0
        self.resets = 0
        self.actions: list[int] = []
        self._t = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.resets += 1
        self._t = 0
        return np.zeros(2, dtype=np.float32), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.steps += 1
        self._t += 1
        self.actions.append(int(action))
        return np.zeros(2, dtype=np.float32), 1.0, self._t >= self.episode_length, False, {}


# --- workloads -------------------------------------------------------------------------------------


def test_image_env_observations() -> None:
    env = ImageEnv(episode_length=5)
    obs, info = env.reset(seed=3)
    assert obs.shape == (84, 84, 4) and obs.dtype == np.uint8 and info == {}
    assert env.observation_space.contains(obs)
    assert isinstance(env.action_space, spaces.Discrete) and env.action_space.n == 4
    previous = obs
    for t in range(1, 6):
        obs, reward, terminated, truncated, _ = env.step(env.action_space.sample())
        assert env.observation_space.contains(obs)
        assert obs is not previous and not np.shares_memory(obs, previous)  # a fresh array per step
        assert reward in (0.0, 1.0) and not terminated
        assert truncated == (t == 5)
        previous = obs
    assert env.render().shape == (84, 84, 3)


def test_image_env_is_deterministic_given_seed() -> None:
    a, b = ImageEnv(), ImageEnv()
    np.testing.assert_array_equal(a.reset(seed=1)[0], b.reset(seed=1)[0])
    for action in (0, 3, 1):
        np.testing.assert_array_equal(a.step(action)[0], b.step(action)[0])


def test_cpu_env_runs_and_returns_valid_obs() -> None:
    env = CpuEnv(iterations=50, episode_length=4)
    obs, _ = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    for t in range(1, 5):
        obs, reward, terminated, truncated, _ = env.step(t % 2)
        assert env.observation_space.contains(obs) and obs.dtype == np.float32
        assert reward == 1.0 and not terminated and truncated == (t == 4)


def test_calibration_gives_a_positive_iteration_count() -> None:
    iterations = calibrate_cpu_iterations(20.0, trials=2)
    assert isinstance(iterations, int) and iterations >= 1
    with pytest.raises(ValueError):
        calibrate_cpu_iterations(0)


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_workload_factories_are_picklable_and_make_registered_envs(name: str) -> None:
    factory = WORKLOADS[name].factory(cpu_iterations=10)
    env = pickle.loads(pickle.dumps(factory))()
    try:
        obs, _ = env.reset(seed=0)
        assert env.observation_space.contains(obs)
        obs, *_ = env.step(env.action_space.sample())
        assert env.observation_space.contains(obs)
    finally:
        env.close()
    assert WORKLOADS["cpu"].factory(cpu_iterations=7) == WorkloadFactory(CPU_ENV_ID, {"iterations": 7})
    assert WORKLOADS["image"].factory().env_id == IMAGE_ENV_ID


def test_workload_envs_pass_gymnasium_env_checker() -> None:
    from gymnasium.utils.env_checker import check_env

    check_env(ImageEnv(), skip_render_check=True)
    check_env(CpuEnv(iterations=10), skip_render_check=True)


# --- plain loop, adapters, timing ------------------------------------------------------------------


def test_plain_loop_counts_steps_and_resets_finished_envs() -> None:
    n, iterations = 3, 10
    loop = PlainLoop([lambda: CountingEnv(episode_length=3)] * n, seed=5)
    envs: list[CountingEnv] = loop.envs  # type: ignore[assignment]
    assert len({id(env) for env in envs}) == n
    loop.reset()
    pool = [loop.prepare(np.array([k, k + 1, k + 2])) for k in range(2)]
    assert pool[0] == [0, 1, 2]
    elapsed = time_steps(loop, pool, iterations)
    assert elapsed > 0
    for i, env in enumerate(envs):
        assert env.steps == iterations
        assert env.resets == 1 + iterations // 3  # the first reset, then one per finished episode
        assert env.actions == [pool[t % 2][i] for t in range(iterations)]  # actions cycle through the pool
    loop.close()


def test_a_trainers_work_follows_every_timed_step(monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``trainer_s``, each step is followed by that long a busy loop on the clock: on a clock that moves 10
    us per read, 3 steps and 100 us of trainer work each take at least 300 us, and the steps are all taken."""
    from vecenv.bench import case

    now = [0.0]

    def clock() -> float:
        now[0] += 10e-6
        return now[0]

    loop = PlainLoop([CountingEnv], seed=0)
    loop.reset()
    pool = [loop.prepare(np.array([1]))]
    monkeypatch.setattr(case.time, "perf_counter", clock)
    elapsed = time_steps(loop, pool, 3, trainer_s=100e-6)
    assert 300e-6 <= elapsed < 400e-6
    env: CountingEnv = loop.envs[0]  # type: ignore[assignment]
    assert env.steps == 3
    reads = now[0] / 10e-6
    assert time_steps(loop, pool, 3) == pytest.approx(10e-6)  # without: two clock reads in all
    assert now[0] / 10e-6 == pytest.approx(reads + 2)


def test_warm_up_returns_the_last_chunk() -> None:
    loop = PlainLoop([CountingEnv], seed=0)
    loop.reset()
    chunk, elapsed = warm_up(loop, [loop.prepare(np.array([1]))], seconds=0.0)
    assert chunk == 2 and elapsed > 0  # two chunks at least: 1 then 2 steps
    env: CountingEnv = loop.envs[0]  # type: ignore[assignment]
    assert env.steps == 3


@pytest.mark.parametrize("kind", ["vecenv", "gym"])
def test_adapters_step_every_env(kind: str) -> None:
    n, iterations = 2, 7
    env_fns = [lambda: CountingEnv(episode_length=4)] * n
    backend: Any
    if kind == "vecenv":
        venv = vecenv.DummyVecEnv(env_fns)
        backend, envs = VecEnvAdapter(venv, seed=0), venv.envs
    else:
        gvenv = gym.vector.SyncVectorEnv(env_fns)
        backend, envs = GymVectorAdapter(gvenv, seed=0), gvenv.envs
    assert backend.action_space == spaces.Discrete(5)
    backend.reset()
    batch = np.array([3, 4])
    assert backend.prepare(batch) is batch
    time_steps(backend, [batch], iterations)
    counted = [env.unwrapped.steps for env in envs]
    # vecenv resets in the same step; Gymnasium's next-step autoreset spends one step call on the reset
    assert counted == ([iterations] * n if kind == "vecenv" else [iterations - 1] * n)
    backend.close()


def test_backend_registry() -> None:
    assert backend_spec("plain").in_process
    assert not backend_spec("vecenv-subproc").in_process
    variant = backend_spec("vecenv-subproc-w3")
    assert variant.n_workers == 3 and variant.library == "vecenv"
    for bad in ("nope", "vecenv-subproc-w0", "vecenv-subproc-wx"):
        with pytest.raises(KeyError):
            backend_spec(bad)


def test_plan_skips_duplicate_and_oversized_worker_variants() -> None:
    config = BenchConfig(workloads=["cartpole"], num_envs=[1, 64], n_workers=[1, 4, 128])
    cases, _ = plan_cases(config, cpu_iterations=None)
    planned = {(c.num_envs, c.backend) for c in cases}
    assert (1, "plain") in planned and (64, "vecenv-dummy") in planned
    assert (1, "vecenv-subproc-w1") not in planned  # the same layout as the default at N=1
    assert (1, "vecenv-subproc-w4") not in planned  # more workers than envs
    assert (64, "vecenv-subproc-w4") in planned
    assert (64, "vecenv-subproc-w128") not in planned


def test_parent_backend_gets_one_share_per_core(monkeypatch: pytest.MonkeyPatch) -> None:
    """vecenv-subproc-parent: parent_envs = N // cores with cores - 1 workers; not planned where N < cores."""
    from vecenv.bench import backends, runner

    monkeypatch.setattr("vecenv.vec_env.default_n_workers", lambda parent_envs=0: 2 - bool(parent_envs))
    assert [runner.parent_share(n) for n in (1, 2, 5, 64)] == [0, 1, 2, 32]
    monkeypatch.setattr("vecenv.vec_env.default_n_workers", lambda parent_envs=0: 1)
    assert runner.parent_share(64) == 0  # one core: no share
    monkeypatch.setattr("vecenv.vec_env.default_n_workers", lambda parent_envs=0: 2 - bool(parent_envs))
    cases, notes = plan_cases(BenchConfig(workloads=["cartpole"], num_envs=[1, 4]), cpu_iterations=None)
    planned = {(c.num_envs, c.backend) for c in cases}
    assert (4, "vecenv-subproc-parent") in planned and (1, "vecenv-subproc-parent") not in planned
    assert any("vecenv-subproc-parent runs only" in note for note in notes)
    adapter = backends._build_vecenv_subproc_parent([lambda: CountingEnv(episode_length=4)] * 4, 0, None)
    try:
        assert adapter.venv.n_workers == 1 and len(adapter.venv.processes) == 1
        assert [type(w).__name__ for w in adapter.venv._workers] == ["InProcessWorker", "SubprocWorker"]
        assert [w.env_indices for w in adapter.venv._workers] == [[0, 1], [2, 3]]
    finally:
        adapter.close()


# --- one case ---------------------------------------------------------------------------------------


def test_run_case_in_process_record() -> None:
    case = Case("cartpole", 2, "vecenv-dummy", repeats=2, seconds=0.01, warmup_seconds=0.005)
    record = run_case(case)
    assert record["status"] == "ok", record.get("error")
    assert len(record["rates"]) == 2
    assert record["env_steps_per_s"] == pytest.approx(float(np.median(record["rates"])))
    assert record["env_steps_per_s_min"] <= record["env_steps_per_s"] <= record["env_steps_per_s_max"]
    assert record["steps_per_repeat"] >= 1 and record["startup_s"] > 0
    if sys.platform.startswith("linux"):
        assert record["peak_rss_mib"] > 10 and record["pss_mib"] > 1


def test_run_case_records_an_error() -> None:
    record = run_case(Case("cartpole", 1, "vecenv-dummy", cpu_iterations=None, repeats=0))
    assert record["status"] == "error" and "StatisticsError" in record["error"]


def test_isolated_case_is_killed_after_its_timeout() -> None:
    case = Case("cpu", 1, "plain", repeats=1, seconds=60, warmup_seconds=0.01, cpu_iterations=100)
    start = time.perf_counter()
    record = run_case_isolated(case, timeout=1.0)
    assert time.perf_counter() - start < 20
    assert record["status"] == "error" and "timed out" in record["error"]


# --- memory ----------------------------------------------------------------------------------------


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc")
def test_process_tree_includes_children_and_memory_is_positive() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        deadline = time.monotonic() + 10
        tree = memory.process_tree() or []
        while child.pid not in tree and time.monotonic() < deadline:
            time.sleep(0.05)
            tree = memory.process_tree() or []
        assert tree[0] == os.getpid() and child.pid in tree
        pss = memory.tree_pss_kib()
        rss = memory.tree_rss_kib()  # read after PSS: the child may still be growing while it starts
        assert rss is not None and rss > 1000
        assert pss is None or 0 < pss <= rss
        with memory.PeakRssSampler(interval=0.01) as sampler:
            sampler.pause()
            sampler.resume()
            assert sampler.sample() is not None
        assert sampler.peak_kib is not None and sampler.peak_kib > 1000
    finally:
        child.kill()
        child.wait()


# --- reports (need pandas / matplotlib: the bench extra) ---------------------------------------------


def _record(workload: str, n: int, backend: str, rate: float, **extra: Any) -> dict[str, Any]:
    spec = backend_spec(backend)
    record: dict[str, Any] = {
        "workload": workload,
        "num_envs": n,
        "backend": backend,
        "library": spec.library,
        "in_process": spec.in_process,
        "status": "ok",
        "env_steps_per_s": rate,
        "env_steps_per_s_min": rate,
        "env_steps_per_s_max": rate,
    }
    record.update(extra)
    return record


def _fake_records() -> list[dict[str, Any]]:
    return [
        _record("cartpole", 64, "plain", 1e6, env_steps_per_s_min=0.9e6, env_steps_per_s_max=1.1e6),  # 1 us/step
        _record("cartpole", 64, "vecenv-dummy", 5e5),  # 2 us/step: 1 us overhead
        _record("cartpole", 64, "sb3-dummy", 2.5e5),  # 4 us/step: 3 us overhead
        _record("cartpole", 64, "gym-sync", 8e5),  # 1.25 us/step: 0.25 us overhead
        _record("cartpole", 64, "vecenv-subproc", 2e6, startup_s=1.5, peak_rss_mib=900.0),
        _record("cartpole", 64, "sb3-subproc", 1e5),
        _record("cartpole", 64, "gym-async", 4e5),
        _record("cartpole", 64, "vecenv-subproc-parent", 1.5e6),  # 15x sb3-subproc, 1.5x plain
        _record("cartpole", 16, "plain", 1e6),
        _record("cartpole", 16, "vecenv-dummy", 4e5),  # 2.5 us/step: 1.5 us overhead, not below 1.5
        {"workload": "cartpole", "num_envs": 16, "backend": "sb3-dummy", "status": "error", "error": "boom"},
        _record("image", 16, "plain", 1e5),
        _record("image", 16, "vecenv-subproc", 4e5),
        _record("image", 16, "gym-async", 1e5),
    ]


def test_derived_columns_match_hand_computed_values() -> None:
    pytest.importorskip("pandas")
    from vecenv.bench.report import COLUMNS, results_frame

    df = results_frame(_fake_records())
    assert list(df.columns)[: len(COLUMNS)] == COLUMNS
    row = {(r["workload"], r["num_envs"], r["backend"]): r for r in df.to_dict(orient="records")}
    assert row["cartpole", 64, "plain"]["x_plain"] == pytest.approx(1.0)
    assert row["cartpole", 64, "plain"]["overhead_us"] == pytest.approx(0.0)
    assert row["cartpole", 64, "plain"]["spread_pct"] == pytest.approx(20.0)
    assert row["cartpole", 64, "vecenv-dummy"]["overhead_us"] == pytest.approx(1.0)
    assert row["cartpole", 64, "vecenv-dummy"]["x_plain"] == pytest.approx(0.5)
    assert row["cartpole", 64, "vecenv-dummy"]["x_sb3_subproc"] == pytest.approx(5.0)
    assert row["cartpole", 64, "sb3-dummy"]["overhead_us"] == pytest.approx(3.0)
    assert row["cartpole", 64, "gym-sync"]["overhead_us"] == pytest.approx(0.25)
    assert row["cartpole", 64, "vecenv-subproc"]["x_sb3_subproc"] == pytest.approx(20.0)
    assert row["cartpole", 64, "vecenv-subproc"]["x_plain"] == pytest.approx(2.0)
    assert math.isnan(row["cartpole", 64, "vecenv-subproc"]["overhead_us"])  # not in-process
    assert row["cartpole", 64, "sb3-subproc"]["x_sb3_subproc"] == pytest.approx(1.0)
    assert row["cartpole", 16, "vecenv-dummy"]["overhead_us"] == pytest.approx(1.5)
    assert math.isnan(row["cartpole", 16, "vecenv-dummy"]["x_sb3_subproc"])  # no sb3-subproc at N=16
    error = row["cartpole", 16, "sb3-dummy"]
    assert error["status"] == "error" and math.isnan(error["overhead_us"]) and math.isnan(error["x_plain"])
    assert row["image", 16, "vecenv-subproc"]["x_plain"] == pytest.approx(4.0)


def test_targets_on_a_fake_table() -> None:
    pytest.importorskip("pandas")
    from vecenv.bench.report import check_targets, results_frame, targets_markdown

    targets = {t.target: t for t in check_targets(results_frame(_fake_records()))}
    verdicts = {name: t.verdict for name, t in targets.items()}
    assert verdicts["cartpole N=64: vecenv-subproc >= 20x sb3-subproc"] == "PASS"  # exactly 20x
    assert verdicts["cartpole N=64: vecenv-subproc >= 1.25x plain"] == "PASS"
    assert verdicts["cpu N=16: vecenv-subproc >= 1.5x plain"] == "n/a"
    assert verdicts["cartpole N=64: vecenv-subproc-parent >= 20x sb3-subproc"] == "FAIL"  # 15x
    assert verdicts["cartpole N=64: vecenv-subproc-parent >= 1.25x plain"] == "PASS"  # 1.5x
    assert verdicts["image N=16: vecenv-subproc-parent >= 5x gym-async"] == "n/a"
    assert verdicts["image N=16: vecenv-subproc >= 5x gym-async"] == "FAIL"  # 4x
    assert targets["image N=16: vecenv-subproc >= 5x gym-async"].measured.startswith("4.00x")
    # N=16 sb3-dummy failed, so only N=64 is compared: 1 us < 3 us
    assert verdicts["cartpole, every N: vecenv-dummy overhead < sb3-dummy overhead"] == "PASS"
    assert verdicts["cartpole, N >= 16: vecenv-dummy overhead < 1.5 us"] == "FAIL"  # 1.5 at N=16
    assert verdicts["image, every N: vecenv-dummy overhead < sb3-dummy overhead"] == "n/a"
    assert verdicts["cartpole N=64: vecenv-subproc startup_s < 2 s"] == "PASS"
    assert verdicts["cartpole N=64: vecenv-subproc peak_rss_mib < 1024 MiB"] == "PASS"
    header = targets_markdown(list(targets.values())).splitlines()[0]
    assert header.startswith("| target") and "result" in header


def test_markdown_table_formats_numbers_and_errors() -> None:
    pytest.importorskip("pandas")
    from vecenv.bench.report import markdown_table, results_frame

    lines = markdown_table(results_frame(_fake_records())).splitlines()
    assert lines[0].startswith("| workload") and "x SB3 subproc" in lines[0] and "overhead us/step" in lines[0]
    assert set(lines[1]) <= set("|-: ")
    assert len(lines) == 2 + len(_fake_records())
    dummy = next(line for line in lines if "vecenv-dummy" in line and "| 64 |" in line)
    cells = [cell.strip() for cell in dummy.split("|")[1:-1]]
    # workload, N, backend, env-steps/s, ± %, x SB3 subproc, x plain, overhead, startup, RSS, PSS
    assert cells[:8] == ["cartpole", "64", "vecenv-dummy", "500,000", "0", "5.00", "0.50", "1.00"]
    assert cells[8:] == ["", "", ""]
    error = next(line for line in lines if "sb3-dummy" in line and "| 16 |" in line)
    assert "error" in error


def test_speedup_chart_from_split_runs_draws_the_five_series(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """benchmarks/charts.py puts two bench.json files together and draws, at N=64, the plain loop, SB3's and
    Gymnasium's multiprocess classes, vecenv's default SubprocVecEnv and vecenv's fastest layout, each as its
    env-steps/s over the plain loop's; Gymnasium-API and EnvPool rows never count as vecenv's fastest layout."""
    pytest.importorskip("pandas")
    pytest.importorskip("matplotlib")
    import matplotlib.image

    cartpole = [
        _record("cartpole", 64, "plain", 1e6),
        _record("cartpole", 64, "vecenv-dummy", 5e5),
        _record("cartpole", 64, "vecenv-subproc", 1.2e6),
        _record("cartpole", 64, "vecenv-subproc-parent", 1.5e6),
        _record("cartpole", 64, "vecenv-envpool", 9e6),  # EnvPool's C++ pool: not one of vecenv's layouts
        _record("cartpole", 64, "vecenv-gym-async", 3e6),  # Gymnasium's API: not counted either
        _record("cartpole", 64, "sb3-subproc", 1e5),
        _record("cartpole", 64, "gym-async", 2e5),
        _record("cartpole", 16, "plain", 1e6),
        _record("cartpole", 16, "sb3-subproc", 9e9),  # another N: not drawn
    ]
    image = [
        _record("image", 64, "plain", 2e5),
        _record("image", 64, "vecenv-dummy", 1e5),
        _record("image", 64, "vecenv-subproc", 5e4),
        _record("image", 64, "vecenv-subproc-w1", 4e4),
        _record("image", 64, "gym-async", 1e4),
        {"workload": "image", "num_envs": 64, "backend": "sb3-subproc", "status": "error", "error": "boom"},
        _record("cpu", 16, "plain", 5e3),  # no plain loop at N=64: the workload is left out
        _record("cpu", 16, "vecenv-subproc", 8e3),
    ]
    paths = []
    for name, records in (("cartpole", cartpole), ("image", image)):
        path = tmp_path / f"{name}.json"
        machine = {"cpu_count": 2, "cpus_usable": 2, "cpu_model": "Test CPU", "date": "2026-01-02T03:04:05+00:00"}
        path.write_text(json.dumps({"machine": machine, "results": records}), encoding="utf-8")
        paths.append(str(path))

    out = tmp_path / "speedup.png"
    with registered_bench_script("charts_under_test", "charts.py") as charts:
        drawn = charts.main([*paths, "--num-envs", "64", "--speedup", str(out), "--grid", str(tmp_path / "grid.png")])

    assert drawn.num_envs == 64 and drawn.workloads == ["cartpole", "image"]
    nan = math.nan
    expected = {
        "plain loop": [1.0, 1.0],
        "SB3 SubprocVecEnv": [0.1, nan],
        "Gymnasium AsyncVectorEnv": [0.2, 0.05],
        "vecenv SubprocVecEnv (defaults)": [1.2, 0.25],
        "vecenv, fastest layout": [1.5, 0.5],
    }
    assert list(drawn.series) == list(expected)
    for label, values in expected.items():
        assert drawn.series[label] == pytest.approx(values, nan_ok=True), label
    assert drawn.best_layouts == ["SubprocVecEnv(parent_envs=32)", "DummyVecEnv"]
    for png in (out, tmp_path / "grid.png"):
        picture = matplotlib.image.imread(str(png))
        assert picture.ndim == 3 and picture.shape[0] > 100 and picture.shape[1] > 100
    printed = capsys.readouterr().out
    assert "vecenv, fastest layout" in printed and "cartpole  1.50x" in printed


def test_speedup_data_needs_the_plain_loop() -> None:
    pytest.importorskip("pandas")
    from vecenv.bench.chart import layout_label, speedup_data
    from vecenv.bench.report import results_frame

    df = results_frame([_record("cartpole", 4, "plain", 1e5), _record("cartpole", 8, "vecenv-subproc", 1e5)])
    assert speedup_data(df).num_envs == 4  # default: the largest N of the plain loop
    with pytest.raises(ValueError, match="no successful case at N=8"):
        speedup_data(df, num_envs=8)
    assert layout_label("vecenv-subproc-w4", 16) == "SubprocVecEnv(n_workers=4)"
    assert layout_label("vecenv-subproc-parent", 16) == "SubprocVecEnv(parent_envs=N // cores)"


def test_quick_run_writes_json_markdown_and_png(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("pandas")
    pytest.importorskip("matplotlib")
    import matplotlib.image

    from vecenv.bench.cli import main
    from vecenv.bench.report import COLUMNS, load_results

    argv = ["--quick", "--workloads", "cartpole", "--num-envs", "2", "--backends", "plain,vecenv-dummy,vecenv-subproc"]
    assert main([*argv, "--output-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "| workload" in out and "vecenv-subproc" in out and "wrote" in out

    with open(tmp_path / "bench.json", encoding="utf-8") as f:
        data = json.load(f)
    assert {"machine", "settings", "results", "targets", "notes"} <= set(data)
    assert data["machine"]["cpu_count"] == os.cpu_count() and data["machine"]["numpy"] == np.__version__
    assert data["settings"]["repeats"] == 2
    df = load_results(tmp_path / "bench.json")
    assert list(df.columns) == COLUMNS
    assert sorted(df["backend"]) == ["plain", "vecenv-dummy", "vecenv-subproc"]
    assert (df["status"] == "ok").all(), df["error"].tolist()
    assert (df["env_steps_per_s"] > 0).all() and (df["num_envs"] == 2).all()
    plain = df[df["backend"] == "plain"].iloc[0]
    assert plain["x_plain"] == pytest.approx(1.0) and plain["overhead_us"] == pytest.approx(0.0)
    subproc = df[df["backend"] == "vecenv-subproc"].iloc[0]
    assert subproc["overhead_us"] is None or math.isnan(subproc["overhead_us"])
    if sys.platform.startswith("linux"):
        assert subproc["processes"] >= 2  # the case process and at least one worker
        assert subproc["peak_rss_mib"] > plain["peak_rss_mib"] * 0.5

    for chart in ("bench.png", "bench-speedup.png"):
        image = matplotlib.image.imread(str(tmp_path / chart))
        assert image.ndim == 3 and image.shape[0] > 100 and image.shape[1] > 100
    assert f"{tmp_path / 'bench.png'} and {tmp_path / 'bench-speedup.png'}" in out
    markdown = (tmp_path / "bench.md").read_text(encoding="utf-8")
    assert "| workload" in markdown and "## Targets" in markdown


def test_missing_pandas_is_a_one_line_error(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    from vecenv.bench.cli import main

    monkeypatch.setitem(sys.modules, "pandas", None)  # makes `import pandas` raise ImportError
    assert main(["--quick", "--output-dir", "unused"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("vecenv bench: error:") and 'pip install -e ".[bench]"' in err[0]


def test_unknown_backend_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("pandas")
    pytest.importorskip("matplotlib")
    from vecenv.bench.cli import main

    assert main(["--backends", "plain,warp-drive"]) == 2
    err = capsys.readouterr().err
    assert "unknown backend 'warp-drive'" in err and "vecenv-dummy" in err


def test_bad_option_values_exit_2() -> None:
    from vecenv.bench.cli import main

    for argv in (["--workloads", "atari"], ["--num-envs", "0"], ["--repeats", "x"], ["--seconds", "-1"]):
        with pytest.raises(SystemExit) as info:
            main(argv)
        assert info.value.code == 2


def test_list_backends(capsys: pytest.CaptureFixture[str]) -> None:
    from vecenv.bench.cli import main

    assert main(["--list-backends"]) == 0
    out = capsys.readouterr().out
    for name in ("plain", "vecenv-dummy", "vecenv-subproc", "sb3-dummy", "sb3-subproc", "gym-sync", "gym-async"):
        assert name in out


def test_bench_subcommand_can_be_added_to_a_parser() -> None:
    import argparse

    from vecenv.bench.cli import add_bench_parser, cmd_bench

    parser = argparse.ArgumentParser(prog="vecenv")
    add_bench_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["bench", "--quick", "-n", "1,4", "-b", "plain"])
    assert args.handler is cmd_bench and args.num_envs == [1, 4] and args.backends == ["plain"] and args.quick


def test_run_bench_script_help() -> None:
    script = os.path.join(BENCH_DIR, "run_bench.py")
    result = subprocess.run([sys.executable, script, "--help"], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0 and "--num-envs" in result.stdout and "--quick" in result.stdout


@pytest.mark.sb3
def test_sb3_backends_run() -> None:
    pytest.importorskip("stable_baselines3")
    for backend in ("sb3-dummy", "sb3-subproc"):
        case = Case("cartpole", 2, backend, repeats=1, seconds=0.01, warmup_seconds=0.005)
        record = run_case_isolated(case, timeout=120)
        assert record["status"] == "ok", record.get("error")
        assert record["library"] == "stable-baselines3" and record["env_steps_per_s"] > 0


def test_envpool_backends_run_only_the_cartpole_workload() -> None:
    """EnvPool has only its own C++ envs: its two backends are planned for CartPole alone, and a note says so."""
    config = BenchConfig(workloads=["cartpole", "cpu"], num_envs=[4], backends=["plain", "envpool", "vecenv-envpool"])
    cases, notes = plan_cases(config, cpu_iterations=10)
    planned = {(c.workload, c.backend) for c in cases}
    if importlib.util.find_spec("envpool") is None:
        assert not any(backend.endswith("envpool") for _, backend in planned)
        assert any("envpool is not installed" in note for note in notes)
        return
    assert {("cartpole", "envpool"), ("cartpole", "vecenv-envpool")} <= planned
    assert not {("cpu", "envpool"), ("cpu", "vecenv-envpool")} & planned
    assert "envpool runs only the cartpole workload(s)" in notes


def test_scaling_script_table_rows_and_paired_ratios(capsys: pytest.CaptureFixture[str]) -> None:
    """benchmarks/scaling.py, tiny: one row per (W, contender), and each ratio is the median of the rounds' rates
    over the plain loop's of the same round."""
    argv = [
        "--workloads",
        "cartpole,cpu",
        "--workers",
        "1,2",
        "--envs-per-worker",
        "cartpole=2,cpu=1",
        "--contenders",
        "plain,vecenv",
        "--rounds",
        "3",
        "--seconds",
        "0.02",
        "--capacity-procs",
        "2",
        "--capacity-rounds",
        "1",
    ]
    # (registered in sys.modules while it runs: its capacity task is pickled by reference to a forked pool)
    with registered_bench_script("scaling_under_test", "scaling.py") as scaling:
        result = scaling.main(argv)
    printed = capsys.readouterr().out
    assert result["text"] in printed and "Machine capacity: 2 processes of burn at once" in printed
    lines = [line for line in printed.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    assert header == scaling.COLUMNS and len(header) == 11
    assert header[-3:] == ["cpu us/step/W", "x capacity", "limit"]  # (the rows below are read by column name)
    rows = [dict(zip(header, (cell.strip() for cell in line.strip("|").split("|")), strict=True)) for line in lines[2:]]
    assert [(r["workload"], r["W"], r["envs"], r["contender"]) for r in rows] == [
        ("cartpole", "1", "2", "plain"),
        ("cartpole", "1", "2", "vecenv"),
        ("cartpole", "2", "4", "plain"),
        ("cartpole", "2", "4", "vecenv"),
        ("cpu", "1", "1", "plain"),
        ("cpu", "1", "1", "vecenv"),
        ("cpu", "2", "2", "plain"),
        ("cpu", "2", "2", "vecenv"),
    ]
    records = {(r["workload"], r["W"], r["contender"]): r for r in result["records"]}
    for row in rows:
        record = records[(row["workload"], int(row["W"]), row["contender"])]
        rates = np.array(record["rates"])
        plain = np.array(records[(row["workload"], int(row["W"]), "plain")]["rates"])
        assert len(rates) == 3 and float(row["env-steps/s"].replace(",", "")) == pytest.approx(
            np.median(rates), abs=0.5
        )
        assert float(row["x plain"]) == pytest.approx(float(np.median(rates / plain)), abs=5e-4)
        if row["workload"] == "cpu":  # the capacity measured in the same rounds
            capacity = np.array(record["capacity_ratios"])
            assert len(capacity) == 3 and (capacity > 0).all()
            assert float(row["x capacity"]) == pytest.approx(float(np.median(rates / plain / capacity)), abs=5e-4)
        else:
            assert row["x capacity"] == ""
        if row["contender"] == "plain":
            assert row["x plain"] == "1.000" and row["caller us/step/W"] == row["cpu us/step/W"] == ""
            assert row["limit"] == "-"
        else:
            assert float(row["caller us/step/W"]) >= float(row["busy us/step/W"]) > 0
            assert float(row["cpu us/step/W"]) == pytest.approx(record["cpu_us"], abs=0.05) and record["cpu_us"] > 0


def test_scaling_contender_counts_the_calling_threads_cpu_per_step(monkeypatch: pytest.MonkeyPatch) -> None:
    """``cpu``: the calling thread's CPU time over the chunks per vector step, apart from ``busy`` (the send+collect
    wall time that ``step_stats()`` reports). A fake vector env whose step takes 300 us of the thread's CPU (a fake
    clock) and reports 400 us of send gives 300 and 400 us, however long the wall time."""
    with registered_bench_script("scaling_cpu_under_test", "scaling.py") as scaling:
        clock = {"cpu": 0.0, "steps": 0}
        monkeypatch.setattr(scaling.time, "thread_time", lambda: clock["cpu"])

        def stats() -> Any:
            steps = clock["steps"]
            return SimpleNamespace(steps=steps, wait_seconds=0.0, send_seconds=steps * 4e-4, collect_seconds=0.0)

        def step(actions: Any) -> None:
            clock["cpu"] += 3e-4
            clock["steps"] += 1

        venv = SimpleNamespace(step_stats=stats)
        contender = scaling.Contender("vecenv", 4, step, [None], lambda: None, venv=venv)
        contender.chunk(0.01)
        contender.chunk(0.01)
        _, busy, steps, cpu = contender.caller
        assert steps == clock["steps"] > 0
        assert cpu / steps == pytest.approx(3e-4) and busy / steps == pytest.approx(4e-4)
        contender.reset_accounts()
        assert contender.caller == [0.0, 0.0, 0, 0.0]


def test_capacity_and_rates_are_defined_for_a_process_that_runs_after_its_window(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A busy machine can let a burn process (or the stepping loop) run only after its timing window closed: it
    still counts one call, so the capacity ratio has no zero denominator (it raised ZeroDivisionError at
    ``rates[procs] / rates[1]``) and a paired rate is never 0."""
    scaling = load_bench_script("scaling_late_window", "scaling.py")
    calls: list[int] = []
    monkeypatch.setattr(scaling, "burn", calls.append)  # each call records its iterations
    # the window [start, start + seconds) ended a second before the process got to run: exactly one call
    late_rate = scaling.burn_until(7, time.time() - 1.0, 0.02)
    assert calls == [7] and late_rate > 0 and math.isfinite(late_rate)

    class LatePool:
        """Runs each task here, as processes that a busy machine schedules one second after the window opened."""

        def map(self, fn: Any, *iterables: Any) -> list[Any]:
            return [fn(iterations, start - 1.0, seconds) for iterations, start, seconds in zip(*iterables, strict=True)]

    calls.clear()
    ratio = scaling.capacity_round(LatePool(), 3, 5, 0.02, flip=False)
    assert calls == [5] * 4  # one call by the single process, one by each of the three
    assert ratio > 0 and math.isfinite(ratio)
    steps: list[int] = []
    assert scaling.rate(lambda: steps.append(1), 4, 0.0) > 0 and steps == [1]  # a window of 0 s: one call

    class CountingEnv:
        """Records its calls; an episode ends at every second step."""

        action_space = gym.spaces.Discrete(3)

        def reset(self, seed: int | None = None) -> tuple[int, dict[str, Any]]:
            steps.append(-1)
            return 0, {}

        def step(self, action: int) -> tuple[int, float, bool, bool, dict[str, Any]]:
            steps.append(int(action))
            return 0, 0.0, sum(1 for s in steps if s >= 0) % 2 == 0, False, {}

    steps.clear()
    late_steps = scaling.step_until(CountingEnv, time.time() - 1.0, 0.02)  # built, reset, then one step
    assert late_steps > 0 and len(steps) == 2 and steps[0] == -1 and 0 <= steps[1] < 3
    steps.clear()
    scaling.step_until(CountingEnv, time.time(), 0.05)  # the same env again (no new reset first), reset on ends
    stepped = [s for s in steps if s >= 0]
    assert steps[0] != -1 and len(stepped) > 4 and steps.count(-1) == len(stepped) // 2


def test_goals_script_one_row_per_goal_from_the_paired_rounds(capsys: pytest.CaptureFixture[str]) -> None:
    """benchmarks/goals.py, tiny: one row per goal in the order asked; each measured ratio is the median of the
    rounds' ratios, met exactly when it reaches the goal; a case whose package is missing says so."""
    cases = ["cartpole-64", "cpu-16", "pong-8", "dummy-16"]
    argv = ["--cases", ",".join(cases), "--rounds", "2", "--seconds", "0.02", "--capacity-procs", "2"]
    with registered_bench_script("goals_under_test", "goals.py") as goals:
        result = goals.main(argv)
    printed = capsys.readouterr().out
    assert result["text"] in printed
    lines = [line for line in printed.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    assert header == goals.COLUMNS
    rows = [dict(zip(header, (cell.strip() for cell in line.strip("|").split("|")), strict=True)) for line in lines[2:]]
    assert [row["case"] for row in rows] == cases
    assert [row["contender"] for row in rows] == ["SubprocVecEnv(env_fns)"] * 3 + ["DummyVecEnv"]
    assert rows[0]["goal"] == ">= 1.4x plain loop"
    assert rows[1]["goal"] == ">= 1.9x plain loop or >= 0.95x plain loop x capacity"
    missing = {"pong-8": ("ale_py", "ale-py not installed"), "dummy-16": ("stable_baselines3", "SB3 not installed")}
    for row, record in zip(rows, result["records"], strict=True):
        package, why = missing.get(row["case"], ("", ""))
        if package and importlib.util.find_spec(package) is None:
            assert (row["result"], row["measured"], record["skipped"]) == (why, "-", why)
            continue
        rates = {name: np.array(values) for name, values in record["rates"].items()}
        assert all(len(values) == 2 for values in rates.values())
        numerator, denominator = ("dummy", "sb3-dummy") if row["case"].startswith("dummy") else ("vecenv", "plain")
        ratio = float(np.median(rates[numerator] / rates[denominator]))
        measured = row["measured"].split(" or ")
        assert float(measured[0].split("x")[0]) == pytest.approx(ratio, abs=5e-3)
        values = [ratio]
        if row["case"] == "cpu-16":  # and over the capacity measured in the same rounds
            values.append(float(np.median(rates["vecenv"] / rates["plain"] / rates["capacity"])))
            assert float(measured[1].split("x")[0]) == pytest.approx(values[1], abs=5e-3)
        if "caller_us" in record:  # the model: num_envs over the wait per step, over the plain loop's rate
            wait_s = (record["caller_us"] - record["busy_us"]) * 1e-6
            num_envs = int(row["case"].rsplit("-", 1)[1])  # (the case's name ends with its number of envs)
            expected = num_envs / wait_s / float(np.median(rates["plain"]))
            assert record["x_plain_if_no_busy"] == pytest.approx(expected)
            model = f"with busy 0 and the same wait (a model): {expected:.2f}x plain loop"
            assert model in row["env-steps/s (median over rounds)"]
            assert (
                f"busy {record['busy_us']:.0f} us, CPU {record['cpu_us']:.0f} us)"
                in row["env-steps/s (median over rounds)"]
            )
            assert record["cpu_us"] > 0
        targets = [float(goal.split("x")[0].removeprefix(">= ")) for goal in row["goal"].split(" or ")]
        met = any(value >= target for value, target in zip(values, targets, strict=True))
        assert row["result"] == ("met" if met else "missed")
    assert "x_plain_if_no_busy" in result["records"][0]  # (cartpole-64: SubprocVecEnv against the plain loop)


def test_goals_script_sixteen_runs_the_16_core_goals(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--cases sixteen`` stands for the 16-core goals, in their order; the default runs the 2-core ones only."""
    ran: list[str] = []

    def skipped(name: str, case: Any, args: Any, iterations: int) -> dict[str, Any]:
        ran.append(name)
        return {"case": name, "num_envs": case.num_envs, "skipped": "not run"}

    with registered_bench_script("goals_sixteen", "goals.py") as goals:
        monkeypatch.setattr(goals, "run_goal", skipped)
        monkeypatch.setattr(goals, "calibrate_cpu_iterations", lambda: 1)
        result = goals.main(["--cases", "sixteen,dummy-16"])
        assert ran == ["cartpole-1024", "pong-64", "image-128", "cpu-128", "dummy-16"]
        assert ">= 10x plain loop" in result["text"] and ">= 0.95x plain loop x capacity" in result["text"]
        ran.clear()
        goals.main([])
        assert ran == list(goals.DEFAULT_CASES) and "cartpole-1024" not in ran


@contextlib.contextmanager
def _revision_ab_contender(monkeypatch: Any, kind: str) -> Iterator[tuple[Any, Any]]:
    """benchmarks/revision_ab.py loaded, and a ``kind`` contender of 4 CartPoles in 2 workers, warmed up."""
    with registered_bench_script("revision_ab_under_test", "revision_ab.py") as revision_ab:
        repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        actions = [[k % 2, (k + 1) % 2, 0, 1] for k in range(revision_ab.ACTION_POOL)]
        request = {"kind": kind, "workload": "cartpole", "num_envs": 4, "cpu_iterations": None}
        request |= {"actions": actions, "dtype": "int64", "subproc_kwargs": {"n_workers": 2}}
        # (the checking wrapper lives in the script, which the worker processes cannot import under this name)
        monkeypatch.setattr(revision_ab, "CheckedFactory", lambda tree, inner: inner)
        contender = None
        try:
            contender = revision_ab.Contender(repo, request)
            assert contender.settle == 0.0
            per_second = contender.warmup(0.05)
            assert contender.settle > 0.001
            assert 0 < per_second < 1 / contender.settle
            yield revision_ab, contender
        finally:
            if contender is not None:
                contender.close()


def test_revision_ab_pettingzoo_cases_step_one_action_per_agent(monkeypatch):
    """The ``*-pettingzoo-*`` cases of benchmarks/revision_ab.py: the seeded batches hold one action of the agents'
    space per row (3 rows per simple_spread copy), and the contender steps vecenv.pettingzoo's rows of the copies,
    its figures per agent-step."""
    with registered_bench_script("revision_ab_under_test", "revision_ab.py") as revision_ab:
        case = revision_ab.Case("subproc", "pettingzoo", 2)
        assert case.rows == 6 and revision_ab.CASES["collect-pettingzoo-64"].rows == 192
        actions, dtype = revision_ab.seeded_actions(case, None)
        assert len(actions) == revision_ab.ACTION_POOL and dtype == "int64"
        assert all(len(batch) == 6 and set(batch) <= set(range(5)) for batch in actions)
        assert actions == revision_ab.seeded_actions(case, None)[0]  # seeded
        monkeypatch.setattr(revision_ab, "CheckedFactory", lambda tree, inner: inner)
        repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        request = {"kind": "subproc", "workload": "pettingzoo", "num_envs": 2, "cpu_iterations": None}
        request |= {"actions": actions, "dtype": dtype, "subproc_kwargs": {"n_workers": 2}}
        contender = revision_ab.Contender(repo, request)
        try:
            assert contender.venv.num_envs == 6 and contender.venv.possible_agents[0] == "agent_0"
            assert contender.measure(4)["vec"] > 0
            assert contender.venv.step_stats().steps == 4
        finally:
            contender.close()


def test_revision_ab_collect_times_step_wait_alone_after_a_settle_per_step(monkeypatch):
    """A ``collect-*`` case of benchmarks/revision_ab.py: after the warm-up, each measured step is ``step_async``,
    a sleep of ``settle`` (3 steps' time plus 1 ms), then ``step_wait`` (the only part timed); every step is
    a real step of the vector env."""
    with _revision_ab_contender(monkeypatch, "collect") as (revision_ab, contender):
        before = contender.venv.step_stats().steps
        slept: list[float] = []
        real_sleep = time.sleep
        monkeypatch.setattr(revision_ab.time, "sleep", lambda seconds: (slept.append(seconds), real_sleep(seconds)))
        timed = contender.measure(5)["vec"]
        assert slept == [contender.settle] * 5
        assert contender.venv.step_stats().steps - before == 5
        assert timed > 0


def test_revision_ab_send_counts_the_cpu_time_of_step_async_alone(monkeypatch):
    """A ``send-*`` case of benchmarks/revision_ab.py: each measured step is ``step_async`` (timed with the
    thread's CPU clock), a sleep of ``settle``, then ``step_wait`` (not timed); every step is a real step."""
    with _revision_ab_contender(monkeypatch, "send") as (revision_ab, contender):
        # a CPU clock that only the two halves move: 0.25 s per step_async, 4 s per step_wait
        cpu = [0.0]
        venv = contender.venv
        step_async, step_wait = venv.step_async, venv.step_wait
        monkeypatch.setattr(venv, "step_async", lambda a: (cpu.__setitem__(0, cpu[0] + 0.25), step_async(a))[1])
        monkeypatch.setattr(venv, "step_wait", lambda: (cpu.__setitem__(0, cpu[0] + 4.0), step_wait())[1])
        monkeypatch.setattr(revision_ab.time, "thread_time", lambda: cpu[0])
        slept: list[float] = []
        real_sleep = time.sleep
        monkeypatch.setattr(revision_ab.time, "sleep", lambda seconds: (slept.append(seconds), real_sleep(seconds)))
        before = venv.step_stats().steps
        assert contender.measure(5)["vec"] == 5 * 0.25
        assert slept == [contender.settle] * 5
        assert venv.step_stats().steps - before == 5


def test_wakeups_script_wakes_every_worker_once_per_wake_of_each_kind() -> None:
    """benchmarks/wakeups.py: per W, one row per kind; every worker of both kinds woke exactly once per wake sent
    (the warm-up wake and ``rounds x wakes``), and a worker's wake time lies after the writes began."""
    wakeups = load_bench_script("wakeups_under_test", "wakeups.py")
    result = wakeups.main(["--workers", "3", "--rounds", "2", "--wakes", "4", "--idle", "0.0005"])
    (measured,) = result["results"]
    assert measured["wakes_per_worker"] == {"pipes": 1 + 2 * 4, "eventfd": 1 + 2 * 4}
    rows = result["rows"]
    assert [(row["workers"], row["kind"]) for row in rows] == [(3, "pipes"), (3, "eventfd")]
    assert rows[0]["x pipes"] == 1.0
    for row in rows:
        assert 0 <= row["median awake us"] <= row["last awake us"]
        assert row["writer CPU us"] >= 0 and row["write us"] >= 0
    assert "| workers | kind" in result["text"]


def test_wakeups_workers_detect_a_lost_wake_and_end_with_close() -> None:
    """A worker whose wake count differs from the wakes sent is reported; ``close`` ends and reaps every worker."""
    wakeups = load_bench_script("wakeups_under_test", "wakeups.py")
    pool = wakeups.Workers("eventfd", 2)
    try:
        pool.wake()
        pool.wake()
        pool.check_counts()
        pool.cells[3] -= 1  # worker 1 missed one
        with pytest.raises(RuntimeError, match=r"counted \[2, 1\] wakes, 2 were sent"):
            pool.check_counts()
        pids = list(pool.pids)
    finally:
        pool.close()
    for pid in pids:
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc")
def test_wakeups_workers_end_when_the_waking_process_is_killed() -> None:
    """The workers of both kinds exit on their own once the process that woke them is gone, even killed."""
    script = (
        "import sys, time\n"
        f"sys.path.insert(0, {BENCH_DIR!r})\n"
        "import wakeups\n"
        "pools = [wakeups.Workers('pipes', 2), wakeups.Workers('eventfd', 2)]\n"
        "for pool in pools:\n"
        "    pool.wake()\n"
        "print(' '.join(str(pid) for pool in pools for pid in pool.pids), flush=True)\n"
        "time.sleep(60)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        pids = [int(pid) for pid in parent.stdout.readline().split()]
        assert len(pids) == 4 and all(pid_running(pid) for pid in pids)
    finally:
        parent.kill()
        parent.wait()
    assert still_running(pids) == []


# --- the command: signals, output files, option values ----------------------------------------------------------


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (read from ``/proc``)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                if int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry))
    return found


def _running_case_process(parent: subprocess.Popen[Any], patience: float = 60.0) -> int:
    """The pid of the case process (``python -m vecenv.bench.runner``) that ``parent`` started, once it runs its
    case: it has started a second thread (the one that watches its parent), well after ``parent``'s Popen returned."""
    deadline = time.monotonic() + patience
    while time.monotonic() < deadline and parent.poll() is None:
        for pid in _children(parent.pid):
            with contextlib.suppress(OSError):
                command = Path(f"/proc/{pid}/cmdline").read_bytes()
                if b"vecenv.bench.runner" in command and len(os.listdir(f"/proc/{pid}/task")) >= 2:
                    return pid
        time.sleep(0.05)
    raise AssertionError(f"no case process of {parent.pid} started (exit status {parent.poll()})")


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="reads /proc")
def test_case_process_ends_itself_and_removes_its_folder_when_its_parent_is_killed(tmp_path: Any) -> None:
    """A parent killed with SIGKILL cannot end its case process (a session of its own): the case process notices
    that its parent is gone, and ends, removing its temporary folder, instead of running its case out."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    script = (
        "from vecenv.bench.runner import Case, run_case_isolated\n"
        "run_case_isolated(Case('cartpole', 1, 'plain', repeats=1, seconds=120, warmup_seconds=0.01), 300)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], env={**os.environ, "TMPDIR": str(tmp)})
    child = None
    try:
        child = _running_case_process(parent)
        assert len(os.listdir(tmp)) == 1  # its vecenv-bench-* folder
    finally:
        parent.kill()
        parent.wait()
    try:
        assert still_running([child]) == []
        assert os.listdir(tmp) == []
    finally:
        with contextlib.suppress(OSError):
            os.killpg(child, signal.SIGKILL)


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="reads /proc")
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_sigterm_ends_the_bench_command_with_its_case_process_and_temporary_folder(tmp_path: Any, signum: int) -> None:
    """SIGTERM (or SIGHUP) to ``vecenv bench`` alone (not to the case process, in a session of its own) ends the
    case process and removes its temporary folder before the command exits, with status 128 + the signal's number
    and one line on stderr."""
    pytest.importorskip("pandas")
    pytest.importorskip("matplotlib")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    command = [sys.executable, "-m", "vecenv", "bench", "-w", "cartpole", "-n", "1", "-b", "plain", "-r", "1",
               "-s", "120", "--warmup", "0.01", "-o", str(tmp_path / "out")]  # fmt: skip
    # (under nohup this process ignores SIGHUP, and the command would inherit that and keep it: see below)
    previous = signal.signal(signal.SIGHUP, signal.SIG_DFL)
    try:
        parent = subprocess.Popen(
            command, env={**os.environ, "TMPDIR": str(tmp)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
    finally:
        signal.signal(signal.SIGHUP, previous)
    child = None
    try:
        child = _running_case_process(parent)
        parent.send_signal(signum)
        out, err = parent.communicate(timeout=60)
        assert parent.returncode == 128 + signum, err
        assert err.splitlines()[-1] == f"vecenv: terminated by {signal.Signals(signum).name}", err
        assert "Traceback" not in err and out == ""
        assert not pid_running(child)  # ended (and reaped) before the command exited
        assert os.listdir(tmp) == []
        assert not (tmp_path / "out").exists()
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.communicate()
        if child is not None:
            with contextlib.suppress(OSError):
                os.killpg(child, signal.SIGKILL)


def test_an_ignored_hangup_stays_ignored_while_the_command_runs() -> None:
    """Under ``nohup`` (SIGHUP ignored) the command leaves SIGHUP ignored, and SIGTERM's action is restored after."""
    from vecenv.bench.cli import _terminate_by_exception

    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN), signal.getsignal(signal.SIGTERM)
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        with _terminate_by_exception():
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
            assert callable(signal.getsignal(signal.SIGTERM))
            os.kill(os.getpid(), signal.SIGHUP)
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    finally:
        signal.signal(signal.SIGHUP, previous[0])
        signal.signal(signal.SIGTERM, previous[1] if previous[1] is not None else signal.SIG_DFL)


@pytest.mark.parametrize("option", ["--case-timeout", "--cpu-us", "--seconds", "--warmup"])
@pytest.mark.parametrize("value", ["inf", "-inf", "1e400"])
def test_infinite_option_values_are_usage_errors(capsys: pytest.CaptureFixture[str], option: str, value: str) -> None:
    """Durations and the cpu workload's CPU time must be finite: argparse's one line, exit status 2."""
    from vecenv.bench.cli import main

    with pytest.raises(SystemExit) as info:
        main(["-w", "cpu", "-n", "1", "-b", "plain", f"{option}={value}"])
    assert info.value.code == 2
    out, err = capsys.readouterr()
    shown = "--seconds/-s" if option == "--seconds" else option
    assert out == "" and "Traceback" not in err
    assert err.splitlines()[-1] == f"vecenv bench: error: argument {shown}: expected a finite number > 0, got {value!r}"


def test_positive_float_takes_finite_positive_numbers_only() -> None:
    import argparse

    from vecenv.cli_args import positive_float

    assert positive_float("0.5") == 0.5 and positive_float("1e300") == 1e300 and positive_float("5e-324") > 0
    for bad in ("0", "-1", "nan", "inf", "-inf", "Infinity", "1e400", "x"):
        with pytest.raises(argparse.ArgumentTypeError, match=f"expected a finite number > 0, got '{bad}'"):
            positive_float(bad)


def _fake_run(records: list[dict[str, Any]], cpu_us: float = 200.0) -> BenchRun:
    """A finished run of these records (nothing measured), as ``run_benchmark`` returns it."""
    settings = {**asdict(BenchConfig(cpu_us=cpu_us, repeats=1)), "cpu_iterations": 10}
    machine = {"cpu_count": 2, "cpus_usable": 2, "cpu_model": "Test CPU", "date": "2026-01-01", "python": "3.x"}
    return BenchRun(records, machine, settings, ["a note"], 1.0)


#: What an earlier run left in the output folder (no PNG).
_EARLIER = {"bench.png": b"OLD", "bench-speedup.png": b"OLD", "bench.md": b"old\n", "bench.json": b'{"old": true}\n'}


def _earlier_report(folder: Path) -> None:
    folder.mkdir(exist_ok=True)
    for name, data in _EARLIER.items():
        (folder / name).write_bytes(data)


def _is_png(path: Path) -> bool:
    data = path.read_bytes()
    return data.startswith(b"\x89PNG\r\n\x1a\n") and data.endswith(b"IEND\xaeB`\x82")


def test_report_is_rendered_before_any_file_is_replaced_and_bench_json_comes_last(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """write_outputs draws both charts first, then replaces each file atomically, bench.json last: interrupted
    before bench.md, the folder has the new charts and still the earlier bench.md and bench.json (never a new
    bench.json beside the charts of another run)."""
    pytest.importorskip("pandas")
    pytest.importorskip("matplotlib")
    from vecenv.bench import report

    events: list[str] = []
    grid, speedup, write = report.grid_figure, report.speedup_figure, report.atomic_write_bytes

    def drawn(name: str, draw: Any) -> Any:
        def spy(*args: Any, **kwargs: Any) -> Any:
            events.append(f"draw {name}")
            return draw(*args, **kwargs)

        return spy

    def written(path: str, data: bytes) -> None:
        events.append(f"write {os.path.basename(path)}")
        if path.endswith("bench.md"):
            raise KeyboardInterrupt
        write(path, data)

    monkeypatch.setattr(report, "grid_figure", drawn("bench.png", grid))
    monkeypatch.setattr(report, "speedup_figure", drawn("bench-speedup.png", speedup))
    monkeypatch.setattr(report, "atomic_write_bytes", written)
    out = tmp_path / "out"
    _earlier_report(out)
    with pytest.raises(KeyboardInterrupt):
        report.write_outputs(_fake_run(_fake_records()), out)
    assert events == [
        "draw bench.png",
        "draw bench-speedup.png",
        "write bench.png",
        "write bench-speedup.png",
        "write bench.md",
    ]
    assert _is_png(out / "bench.png") and _is_png(out / "bench-speedup.png")
    assert (out / "bench.md").read_bytes() == _EARLIER["bench.md"]
    assert (out / "bench.json").read_bytes() == _EARLIER["bench.json"]
    assert sorted(os.listdir(out)) == sorted(_EARLIER)


def test_a_report_file_interrupted_while_written_keeps_the_earlier_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C in the middle of writing bench.png (the first file): the earlier bench.png is left whole, no
    temporary file is left, and no other file was replaced."""
    pytest.importorskip("pandas")
    pytest.importorskip("matplotlib")
    from vecenv import atomic
    from vecenv.bench import report

    def half_then_interrupt(file: Any, data: bytes) -> None:
        file.write(data[: len(data) // 2])
        file.flush()
        raise KeyboardInterrupt

    monkeypatch.setattr(atomic, "_write_payload", half_then_interrupt)
    out = tmp_path / "out"
    _earlier_report(out)
    with pytest.raises(KeyboardInterrupt):
        report.write_outputs(_fake_run(_fake_records()), out)
    assert {name: (out / name).read_bytes() for name in os.listdir(out)} == _EARLIER


def test_a_report_without_the_plain_loop_removes_an_earlier_speedup_chart(tmp_path: Path) -> None:
    """No plain loop, no bench-speedup.png: the one of an earlier run is removed, not left beside the new report."""
    pytest.importorskip("pandas")
    pytest.importorskip("matplotlib")
    from vecenv.bench.report import write_outputs

    out = tmp_path / "out"
    _earlier_report(out)
    outputs = write_outputs(_fake_run([_record("cartpole", 4, "vecenv-dummy", 1e5)]), out)
    assert outputs["speedup_png"] is None
    assert sorted(os.listdir(out)) == ["bench.json", "bench.md", "bench.png"]
    assert _is_png(out / "bench.png")
    assert json.loads((out / "bench.json").read_text(encoding="utf-8"))["results"][0]["backend"] == "vecenv-dummy"


def test_charts_name_the_cpu_workload_with_the_runs_cpu_us(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run with --cpu-us 50: both charts call the cpu workload "~50 us of CPU per step", as bench.md does."""
    pytest.importorskip("pandas")
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure
    from matplotlib.text import Text

    from vecenv.bench.chart import workload_labels
    from vecenv.bench.report import write_outputs

    texts: list[list[str]] = []
    savefig = Figure.savefig

    def spy(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = savefig(self, *args, **kwargs)  # drawn: the tick labels are set
        texts.append([text.get_text() for text in self.findobj(Text)])
        return result

    monkeypatch.setattr(Figure, "savefig", spy)
    records = [_record("cpu", 1, "plain", 2e4), _record("cpu", 1, "vecenv-dummy", 1.9e4)]
    write_outputs(_fake_run(records, cpu_us=50.0), tmp_path)
    assert len(texts) == 2  # bench.png and bench-speedup.png
    for figure_texts in texts:
        assert "~50 us of CPU per step" in figure_texts
        assert not any("200 us" in text for text in figure_texts)
    assert "(~50 us)" in (tmp_path / "bench.md").read_text(encoding="utf-8")
    assert workload_labels(1500.0)["cpu"] == "~1500 us of CPU per step"
    assert workload_labels(None)["cpu"] == "~200 us of CPU per step"


def _no_run(config: Any) -> Any:
    raise AssertionError("no case may run")


@pytest.mark.parametrize("name", ["bench.json", "bench.md", "bench.png", "bench-speedup.png"])
def test_an_output_file_that_is_a_folder_is_refused_before_any_case_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    """DIR/bench.json (or another output file) is a folder: one line naming that file, exit 2, before any case
    runs and without writing anything."""
    pytest.importorskip("pandas")
    pytest.importorskip("matplotlib")
    from vecenv.bench.cli import main

    monkeypatch.setattr("vecenv.bench.cli.run_benchmark", _no_run)
    (tmp_path / name).mkdir()
    assert main(["--quick", "-w", "cartpole", "-n", "1", "-b", "plain", "-o", str(tmp_path)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [
        "vecenv bench: error: argument --output-dir/-o: expected a file path whose folder exists or can be created, "
        f"got {str(tmp_path / name)!r}, which is an existing folder"
    ]
    assert os.listdir(tmp_path) == [name] and os.listdir(tmp_path / name) == []


def test_an_output_file_that_cannot_be_written_after_the_run_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A report file refused when written (after the checks passed): the line names that file and why."""
    pytest.importorskip("pandas")
    pytest.importorskip("matplotlib")
    from vecenv.bench import report
    from vecenv.bench.cli import main

    write = report.atomic_write_bytes

    def refuse_markdown(path: str, data: bytes) -> None:
        if path.endswith("bench.md"):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), path)
        write(path, data)

    monkeypatch.setattr("vecenv.bench.cli.run_benchmark", lambda config: _fake_run(_fake_records()))
    monkeypatch.setattr(report, "atomic_write_bytes", refuse_markdown)
    assert main(["--quick", "-w", "cartpole", "-n", "1", "-b", "plain", "-o", str(tmp_path)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [
        "vecenv bench: error: argument --output-dir/-o: expected a file path whose folder exists or can be created, "
        f"got {str(tmp_path / 'bench.md')!r}: cannot write it: permission denied"
    ]


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="no CPU affinity")
def test_plan_compares_worker_variants_with_the_default_layout_of_the_usable_cores(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One usable core of eight (CPU affinity): SubprocVecEnv's default at N=4 is one worker, so
    vecenv-subproc-w1 is that layout again and is left out, and w2 (two workers) runs; the note says so."""
    from vecenv.subproc_vec_env import default_n_workers

    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    assert default_n_workers() == 1  # what SubprocVecEnv starts without n_workers
    cases, notes = plan_cases(BenchConfig(workloads=["cartpole"], num_envs=[4], n_workers=[1, 2, 4]), None)
    variants = [c.backend for c in cases if c.backend.startswith("vecenv-subproc-w")]
    assert variants == ["vecenv-subproc-w2", "vecenv-subproc-w4"]
    assert any("(min(N, cores), 1 usable cores here)" in note for note in notes), notes


def test_all_backends_given_with_others_is_refused_saying_all_goes_alone(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("pandas")
    pytest.importorskip("matplotlib")
    from vecenv.bench.cli import main

    assert main(["--quick", "-b", "all,plain"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [
        "vecenv bench: error: argument --backends/-b: 'all' (every available backend) must be given alone, got "
        "'all,plain'"
    ]
