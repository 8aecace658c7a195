"""SubprocVecEnv's ``wait_mode``: spinning on shared-memory counters before blocking, only in processes that have
a core of their own, and in the workers only while the calling process does not work between steps.

Every check goes through the accounts (``step_stats()``: the mode in use, spin counts), never through timing.
``vecenv.workers.spin.usable_cores`` is patched so the "auto" rule is tested on the same layouts whatever the
machine. The guarantees of the blocking wait (dead workers, timeouts, Ctrl-C, restarts, partial batches) are
checked with the spin forced, so the parent and the workers spin before every wait.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import vecenv
from tests.envs_failure import SLOW, STEP, TERMINATE, expected_obs, make
from vecenv.errors import WorkerDiedError
from vecenv.stats import StepStats, WorkerStats
from vecenv.workers import spin
from vecenv.workers.spin import SPIN_PAUSED, BetweenSteps, Spinner, who_spins


def script_fns(n: int, **kwargs: Any) -> list[Callable[[], gym.Env]]:
    return [functools.partial(make, i, **kwargs) for i in range(n)]


def actions(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int64)


@pytest.fixture
def built() -> Iterator[list[Any]]:
    venvs: list[Any] = []
    yield venvs
    for venv in venvs:
        with contextlib.suppress(Exception):
            venv.close()


@pytest.fixture
def two_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    """The "auto" rule sees 2 usable cores."""
    monkeypatch.setattr(spin, "usable_cores", lambda: 2)


def _after(seconds: float, fn: Callable[..., Any], *args: Any) -> threading.Timer:
    timer = threading.Timer(seconds, fn, args=args)
    timer.start()
    return timer


# --- the rule and the arguments ------------------------------------------------------------------------------


def test_who_spins_gives_each_spinning_process_a_core() -> None:
    # (calling process, workers)
    assert who_spins("auto", n_workers=1, cores=2) == (True, True)  # 2 processes, 2 cores
    assert who_spins("auto", n_workers=2, cores=2) == (False, True)  # 3 processes: the workers alone fit
    assert who_spins("auto", n_workers=3, cores=2) == (False, False)  # not even the workers fit: block
    assert who_spins("auto", n_workers=3, cores=4) == (True, True)
    assert who_spins("auto", n_workers=4, cores=4) == (False, True)
    assert who_spins("auto", n_workers=16, cores=16) == (False, True)
    assert who_spins("auto", n_workers=1, cores=1) == (False, False)  # one core: a spinner delays the other
    assert who_spins("spin", n_workers=8, cores=1) == (True, True)
    assert who_spins("block", n_workers=1, cores=64) == (False, False)


def _steps(between: BetweenSteps, cpu: list[float], n: int, outside: float, cores: float) -> None:
    """``n`` steps, each followed by ``outside`` seconds of the calling process's work on ``cores`` busy cores
    (``cpu``: the patched process time)."""
    for _ in range(n):
        between.left()
        if between.mark >= 0.0:  # (StepClock calls entered() only for a measured interval)
            cpu[0] += outside * cores
            between.entered(outside)


def test_between_steps_pauses_the_workers_for_a_trainers_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """Measured intervals after steps decide, every SAMPLES_PER_DECISION of them, the workers' SPIN_PAUSED
    signal: on 2 cores with 2 spinning workers, paused while the intervals average over 50 us or keep over 1.5
    cores busy."""
    cpu = [0.0]
    monkeypatch.setattr(spin, "process_time", lambda: cpu[0])
    rows = [np.zeros(8, dtype=np.int64), np.zeros(8, dtype=np.int64)]
    between = BetweenSteps(rows, cores=2)

    def steps(n: int, outside: float, cores: float) -> None:
        _steps(between, cpu, n, outside, cores)

    intervals = spin.SAMPLE_EVERY * spin.SAMPLES_PER_DECISION  # steps per decision
    steps(intervals - 1, 10e-6, 1.0)
    assert between.cores is None and [row[SPIN_PAUSED] for row in rows] == [0, 0]  # no decision yet
    steps(1, 10e-6, 1.0)  # a step loop: 10 us, one core
    assert between.cores == pytest.approx(1.0) and between.between == pytest.approx(10e-6)
    assert not between.paused and [row[SPIN_PAUSED] for row in rows] == [0, 0]
    steps(intervals, 300e-6, 1.0)  # a single-threaded policy's forward pass
    assert between.paused and [row[SPIN_PAUSED] for row in rows] == [1, 1]
    steps(intervals, 10e-6, 1.0)
    assert not between.paused and [row[SPIN_PAUSED] for row in rows] == [0, 0]
    steps(intervals, 20e-6, 2.0)  # short, but every core busy (a math library's threads)
    assert between.cores == pytest.approx(2.0) and between.paused
    rows[1][SPIN_PAUSED] = 0  # a restarted worker's row starts from 0: the next decision writes it again
    steps(intervals, 20e-6, 2.0)
    assert [row[SPIN_PAUSED] for row in rows] == [1, 1]


@pytest.mark.parametrize(
    ("cores", "workers", "busy_cores", "paused"),
    [
        (16, 8, 1.0, False),  # a single-threaded trainer beside 8 spinning workers: 8 cores stay free
        (16, 8, 7.5, False),  # a trainer whose threads fit the free cores
        (16, 8, 8.5, True),  # ... and one whose threads need more
        (16, 15, 1.0, False),  # one core left: the single-threaded trainer's
        (16, 15, 1.003, False),  # (what such a trainer measures: within the slack)
        (16, 15, 1.2, True),  # a second thread at times: it needs part of a spinning worker's core
        (16, 16, 1.0, True),  # no core left
        (2, 1, 1.0, False),
        (2, 1, 1.5, True),
        (2, 1, 0.1, False),  # a trainer that waits (I/O, a GPU): its thread still gets the free core
        (2, 2, 1.0, True),
        (2, 2, 0.1, True),  # ... where no core is free, it would wait for a spinning worker's
    ],
)
def test_between_steps_keeps_the_workers_spinning_where_the_trainers_work_has_cores_of_its_own(
    monkeypatch: pytest.MonkeyPatch, cores: int, workers: int, busy_cores: float, paused: bool
) -> None:
    """A trainer's 300 us between steps pauses the spinning workers only where its busy cores, at least one (its
    thread's), do not fit in the cores the spinning workers leave free."""
    cpu = [0.0]
    monkeypatch.setattr(spin, "process_time", lambda: cpu[0])
    rows = [np.zeros(8, dtype=np.int64) for _ in range(workers)]
    between = BetweenSteps(rows, cores=cores)
    assert between.free_cores == cores - workers
    _steps(between, cpu, spin.SAMPLE_EVERY * spin.SAMPLES_PER_DECISION, 300e-6, busy_cores)
    assert between.cores == pytest.approx(busy_cores) and between.between == pytest.approx(300e-6)
    assert between.paused is paused and [row[SPIN_PAUSED] for row in rows] == [int(paused)] * workers


def test_spin_budget_follows_the_waits_seen() -> None:
    spinner = Spinner(limit=1e-3, adaptive=True)
    for _ in range(100):
        spinner.observe(100e-6)
    assert spinner.budget() == pytest.approx(1.5 * 100e-6 + 20e-6, rel=1e-3)
    assert spinner.budget(timeout=10e-6) == 10e-6
    for _ in range(100):
        spinner.observe(5e-3)  # waits much longer than the limit: no spin
    assert spinner.budget() == 0.0
    assert not spinner.spin([0, 0], 1, 1, spinner.budget())
    assert (spinner.waits, spinner.hits, spinner.seconds) == (0, 0, 0.0)  # a wait that did not spin
    forced = Spinner(limit=1e-3, adaptive=False)
    forced.observe(5e-3)
    assert forced.budget() == 1e-3
    assert forced.spin([0, 3], 1, 3, forced.budget())  # already there: no spin counted
    assert forced.waits == 0
    assert not forced.spin([0, 2], 1, 3, 1e-4)  # never comes: spins its budget, then gives up
    assert (forced.waits, forced.hits) == (1, 0) and forced.seconds > 0
    assert forced.spin_any([([0, 2], 3), ([0, 5], 5)], 1, 1e-4) == [1]


def test_wait_mode_is_checked() -> None:
    with pytest.raises(ValueError, match=r"wait_mode must be one of 'auto', 'spin', 'block', got 'busy'"):
        vecenv.SubprocVecEnv(script_fns(2), wait_mode="busy")
    with pytest.raises(ValueError, match=r"wait_mode='spin' needs shared_memory=True"):
        vecenv.SubprocVecEnv(script_fns(2), wait_mode="spin", shared_memory=False)


# --- which mode is in use: the accounts say ------------------------------------------------------------------


def _run(venv: Any, steps: int = 30) -> StepStats:
    venv.reset()
    for _ in range(steps):
        venv.step(actions(*[STEP] * venv.num_envs))
    stats: StepStats = venv.step_stats()
    return stats


def _assert_blocks(stats: StepStats) -> None:
    assert (stats.wait_mode, stats.spin_waits, stats.spin_hits, stats.spin_seconds) == ("block", 0, 0, 0.0)
    for worker in stats.workers:
        assert (worker.wait_mode, worker.spin_waits, worker.spin_hits, worker.spin_seconds) == ("block", 0, 0, 0.0)
    assert "spin:" not in stats.table()


def _assert_spins(stats: StepStats, workers: list[WorkerStats]) -> None:
    assert stats.wait_mode == "spin" and stats.spin_waits > 0 and stats.spin_seconds > 0
    assert stats.spin_hits <= stats.spin_waits
    for worker in workers:
        assert worker.wait_mode == "spin" and worker.spin_waits > 0 and worker.spin_seconds > 0
        assert worker.spin_hits <= worker.spin_waits
        assert worker.spin_seconds <= worker.idle_seconds
    assert stats.spin_seconds <= stats.wait_seconds
    assert "\nspin: calling process " in stats.table()


@pytest.mark.timeout(60)
def test_auto_blocks_when_the_workers_outnumber_the_cores(two_cores: None, built: list[Any]) -> None:
    # 3 workers on 2 cores: nobody spins
    venv = vecenv.SubprocVecEnv(script_fns(6), n_workers=3)
    built.append(venv)
    assert venv.wait_mode == "auto"
    _assert_blocks(_run(venv))


@pytest.mark.timeout(60)
def test_auto_spins_in_the_workers_alone_when_only_they_fit_the_cores(two_cores: None, built: list[Any]) -> None:
    # 2 workers + this process on 2 cores: the workers spin for requests, this process blocks for replies
    venv = vecenv.SubprocVecEnv(script_fns(4), n_workers=2)
    built.append(venv)
    stats = _run(venv)
    assert (stats.wait_mode, stats.spin_waits, stats.spin_seconds) == ("block", 0, 0.0)
    assert [worker.wait_mode for worker in stats.workers] == ["spin", "spin"]
    assert stats.spinning() is not None and stats.spinning().startswith("calling process blocks; workers ")


@pytest.mark.timeout(60)
def test_workers_stop_spinning_while_the_caller_works_between_steps(two_cores: None, built: list[Any]) -> None:
    """A trainer's work between steps (here 1 ms asleep) pauses the workers' spinning: from the decision on,
    they wait for every request in the kernel (no spin counted), and the profile says so."""
    venv = vecenv.SubprocVecEnv(script_fns(4), n_workers=2)
    built.append(venv)
    venv.reset()
    decision = spin.SAMPLE_EVERY * (spin.SAMPLES_PER_DECISION + 1)  # (an interval ends at the next call)
    for _ in range(decision):
        venv.step(actions(*[STEP] * 4))
        time.sleep(1e-3)
    before = venv.step_stats(reset=True)
    assert before.workers_spin_paused
    for _ in range(10):
        venv.step(actions(*[STEP] * 4))
        time.sleep(1e-3)
    stats = venv.step_stats()
    assert stats.workers_spin_paused
    assert [(worker.wait_mode, worker.spin_waits, worker.spin_seconds) for worker in stats.workers] == [
        ("spin", 0, 0.0),
        ("spin", 0, 0.0),
    ]
    # the spin line says why, with what the calling process did between steps: at least the 1 ms asleep, on no core
    assert stats.between_steps_seconds is not None and stats.between_steps_seconds >= 1e-3
    assert stats.between_steps_cores is not None and stats.between_steps_cores < spin.MAX_CORES_BETWEEN_STEPS
    assert (stats.spinning() or "").endswith(
        "; the workers now block, leaving the cores to the calling process, which spends "
        f"{stats.between_steps_seconds * 1e6:.0f} us between steps on average (over 50 us)"
    )
    # forced spin is never paused
    forced = vecenv.SubprocVecEnv(script_fns(4), n_workers=2, wait_mode="spin")
    built.append(forced)
    forced.reset()
    for _ in range(decision + 10):
        forced.step(actions(*[STEP] * 4))
        time.sleep(1e-3)
    assert not forced.step_stats().workers_spin_paused


@pytest.mark.timeout(60)
def test_auto_spins_when_every_party_has_a_core(two_cores: None, built: list[Any]) -> None:
    venv = vecenv.SubprocVecEnv(script_fns(2), n_workers=1)
    built.append(venv)
    stats = _run(venv)
    # (how much it spins depends on the waits it sees: only the mode is certain)
    assert stats.wait_mode == "spin" and [worker.wait_mode for worker in stats.workers] == ["spin"]
    venv.close()
    # with parent_envs this process still counts once
    venv = vecenv.SubprocVecEnv(script_fns(3), n_workers=1, parent_envs=1)
    built.append(venv)
    stats = _run(venv)
    assert stats.wait_mode == "spin" and [worker.wait_mode for worker in stats.workers] == ["block", "spin"]


@pytest.mark.timeout(60)
def test_block_and_no_shared_memory_never_spin(two_cores: None, built: list[Any]) -> None:
    for kwargs in ({"wait_mode": "block"}, {"shared_memory": False}):
        venv = vecenv.SubprocVecEnv(script_fns(2), n_workers=1, **kwargs)
        built.append(venv)
        _assert_blocks(_run(venv))


@pytest.mark.timeout(60)
def test_other_backends_block() -> None:
    venv = vecenv.DummyVecEnv(script_fns(2))
    try:
        _assert_blocks(_run(venv))
    finally:
        venv.close()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("n_workers", [1, 2])
def test_forced_spin_steps_exactly_and_accounts_for_it(n_workers: int, built: list[Any]) -> None:
    """Spinning even when oversubscribed: the results are those of DummyVecEnv's, step after step, and the
    accounts of both sides show spins; step_stats(reset=True) starts them again."""
    venv = vecenv.SubprocVecEnv(script_fns(4, max_steps=7), n_workers=n_workers, wait_mode="spin")
    reference = vecenv.DummyVecEnv(script_fns(4, max_steps=7))
    built += [venv, reference]
    np.testing.assert_array_equal(venv.reset(), reference.reset())
    for t in range(20):
        batch = actions(*(TERMINATE if (t + i) % 5 == 0 else STEP for i in range(4)))
        obs, rewards, dones, infos = venv.step(batch)
        expected = reference.step(batch)
        np.testing.assert_array_equal(obs, expected[0])
        np.testing.assert_array_equal(rewards, expected[1])
        np.testing.assert_array_equal(dones, expected[2])
        assert [set(info) for info in infos] == [set(info) for info in expected[3]]
    stats = venv.step_stats(reset=True)
    _assert_spins(stats, list(stats.workers))
    again = venv.step_stats()
    assert (again.spin_waits, again.spin_seconds) == (0, 0.0)
    assert all((worker.spin_waits, worker.spin_seconds) == (0, 0.0) for worker in again.workers)


# --- the blocking wait's guarantees, with the spin forced -----------------------------------------------------


def _spinning_pair(built: list[Any], n_workers: int, slow: float, **kwargs: Any) -> vecenv.SubprocVecEnv:
    """Two scripted envs that spin (``slow``: seconds a SLOW step takes), reset and stepped once."""
    venv = vecenv.SubprocVecEnv(script_fns(2, slow=slow), n_workers=n_workers, wait_mode="spin", **kwargs)
    built.append(venv)
    venv.reset()
    venv.step(actions(STEP, STEP))
    return venv


@pytest.mark.timeout(60)
@pytest.mark.parametrize("n_workers", [1, 2])
def test_a_worker_killed_during_a_spinning_wait_is_reported(n_workers: int, built: list[Any]) -> None:
    venv = _spinning_pair(built, n_workers, 2.0)
    victim = venv.processes[-1]
    timer = _after(0.2, victim.kill)
    with pytest.raises(WorkerDiedError, match=rf"worker process {victim.pid} .*was killed by SIGKILL .*during step"):
        venv.step(actions(SLOW, SLOW))
    timer.join()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("n_workers", [1, 2])
def test_a_restarted_worker_spins_again(n_workers: int, built: list[Any]) -> None:
    venv = _spinning_pair(built, n_workers, 2.0, max_restarts=1)
    timer = _after(0.2, venv.processes[-1].kill)
    with pytest.warns(RuntimeWarning, match="restarting the worker of envs"):
        obs, _, dones, infos = venv.step(actions(SLOW, SLOW))
    timer.join()
    assert dones[1] and infos[1]["vecenv.restarted"] is True
    np.testing.assert_array_equal(obs[1], expected_obs(1, 0, 0))  # the new env's first observation
    venv.step_stats(reset=True)
    for t in range(1, 6):  # the counters of the new worker start again: every step is exact
        obs, _, _, _ = venv.step(actions(STEP, STEP))
        np.testing.assert_array_equal(obs[1], expected_obs(1, 0, t))
    stats = venv.step_stats()
    _assert_spins(stats, [stats.workers[-1]])


@pytest.mark.timeout(60)
@pytest.mark.parametrize("n_workers", [1, 2])
def test_step_timeout_while_spinning(n_workers: int, built: list[Any]) -> None:
    venv = _spinning_pair(built, n_workers, 5.0, step_timeout=0.3)
    with pytest.raises(TimeoutError, match=r"did not finish step within 0.3 s"):
        venv.step(actions(STEP, SLOW))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("n_workers", [1, 2])
def test_ctrl_c_while_spinning_loses_no_step(n_workers: int, built: list[Any]) -> None:
    venv = _spinning_pair(built, n_workers, 1.0)
    main = threading.main_thread().ident
    assert main is not None
    timer = _after(0.3, signal.pthread_kill, main, signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        venv.step(actions(SLOW, SLOW))
    timer.join()
    obs, _, _, _ = venv.step(actions(TERMINATE, TERMINATE))  # returns the interrupted step
    np.testing.assert_array_equal(obs, [expected_obs(0, 0, 2), expected_obs(1, 0, 2)])
    obs, _, _, _ = venv.step(actions(STEP, STEP))
    np.testing.assert_array_equal(obs, [expected_obs(0, 0, 3), expected_obs(1, 0, 3)])


@pytest.mark.timeout(60)
def test_partial_batches_while_spinning(built: list[Any]) -> None:
    venv = vecenv.SubprocVecEnv(script_fns(4), n_workers=4, wait_mode="spin", batch_size=2)
    built.append(venv)
    venv.async_reset()
    returned = [0, 0, 0, 0]  # observations returned per env
    for _ in range(12):
        obs, _, _, _, env_ids = venv.recv()
        assert len(env_ids) >= 2
        for row, env_id in zip(obs, env_ids, strict=True):
            np.testing.assert_array_equal(row, expected_obs(env_id, 0, returned[env_id]))
            returned[env_id] += 1
        venv.send(actions(*[STEP] * len(env_ids)), env_ids)
    assert sum(returned) >= 24


# --- vecenv run --wait-mode ------------------------------------------------------------------------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", ["spin", "block"])
def test_run_wait_mode_shows_in_the_profile(mode: str, capsys: pytest.CaptureFixture[str]) -> None:
    from vecenv.cli import main

    args = ["run", "CartPole-v1", "-n", "4", "--steps", "200", "--n-workers", "2", "--wait-mode", mode, "--profile"]
    assert main(args) == 0
    profile = capsys.readouterr().out.split("\n\n")[1].splitlines()
    spin_lines = [line for line in profile if line.startswith("spin: ")]
    if mode == "block":
        assert spin_lines == []
    else:
        assert len(spin_lines) == 1 and spin_lines[0].startswith("spin: calling process ")
        assert "; workers " in spin_lines[0]


def test_run_wait_mode_needs_the_subproc_backend(capsys: pytest.CaptureFixture[str]) -> None:
    from vecenv.cli import main

    assert main(["run", "CartPole-v1", "-b", "dummy", "--wait-mode", "spin", "--steps", "8"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.strip() == (
        "vecenv run: error: argument --wait-mode: needs --backend subproc (got --backend dummy, which steps every env "
        "in this process)"
    )


def test_spinning_line_of_the_table() -> None:
    worker = WorkerStats("worker process 7", (0, 1), 1.0, 0.4, 0.1, 0.5, 2000, 2, 0, 0.5, None, "spin", 0.25, 1000, 900)
    stats = StepStats(
        wall_seconds=1.0,
        send_seconds=0.1,
        wait_seconds=0.5,
        collect_seconds=0.1,
        parent_env_seconds=0.0,
        reset_seconds=0.0,
        outside_seconds=0.3,
        steps=1000,
        env_steps=2000,
        episodes=0,
        workers=(worker,),
        wait_mode="spin",
        spin_seconds=0.2,
        spin_waits=1000,
        spin_hits=800,
    )
    assert stats.spinning() == (
        "calling process 100.00 us/env-step (20.0%), 800 of 1000 spins caught the message; "
        "workers 125.00 us/env-step (25.0%), 900 of 1000 spins caught the message"
    )
    lines = stats.table().splitlines()
    spin_line = lines.index(f"spin: {stats.spinning()}")  # after the rows, before the advice
    assert lines[spin_line - 1].split()[-3:] == ["idle", "250.00", "50.0"]
    assert all(line.startswith("advice: ") for line in lines[spin_line + 1 :])
    blocking = dataclasses.replace(stats, wait_mode="block", workers=(dataclasses.replace(worker, wait_mode="block"),))
    assert blocking.spinning() is None and "spin:" not in blocking.table()


def _cgroups(tmp_path: Any, own: str, files: dict[str, str]) -> tuple[str, str]:
    """A cgroup tree under ``tmp_path``: ``files`` (path -> text) and the process's ``/proc/self/cgroup``."""
    for path, text in files.items():
        target = tmp_path / "fs" / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    (tmp_path / "own").write_text(own)
    return str(tmp_path / "fs"), str(tmp_path / "own")


@pytest.mark.parametrize(
    ("own", "files", "expected"),
    [
        # cgroup v2, a container's --cpus=2.5 on its own group
        ("0::/kubepods/pod1\n", {"kubepods/pod1/cpu.max": "250000 100000\n"}, 2.5),
        # v2: the smallest limit along the group and those above it
        ("0::/a/b\n", {"a/b/cpu.max": "max 100000\n", "a/cpu.max": "150000 100000\n"}, 1.5),
        # v2: no limit anywhere
        ("0::/a\n", {"a/cpu.max": "max 100000\n"}, None),
        # v1 (cpu,cpuacct mounted as cpu): the group's quota over its period
        (
            "4:cpu,cpuacct:/docker/abc\n",
            {"cpu/docker/abc/cpu.cfs_quota_us": "300000\n", "cpu/docker/abc/cpu.cfs_period_us": "100000\n"},
            3.0,
        ),
        # v1 inside a container that sees its own group as the root; -1: no quota above it
        (
            "4:cpu,cpuacct:/docker/abc\n",
            {"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"},
            None,
        ),
        # nothing readable (another system)
        ("", {}, None),
    ],
)
def test_cgroup_cpu_limit(tmp_path: Any, own: str, files: dict[str, str], expected: float | None) -> None:
    from vecenv.workers.spin import cgroup_cpu_limit

    root, own_file = _cgroups(tmp_path, own, files)
    assert cgroup_cpu_limit(root, own_file) == expected


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="no CPU affinity")
@pytest.mark.parametrize(("limit", "expected"), [(None, 8), (2.5, 3), (0.5, 1), (64.0, 8)])
def test_default_workers_follow_a_containers_cpu_limit(
    monkeypatch: pytest.MonkeyPatch, limit: float | None, expected: int
) -> None:
    """Eight CPUs in the affinity mask but a cgroup limit of 2.5 (``docker run --cpus=2.5``, a Kubernetes limit):
    the defaults count 3 usable cores, so that 8 workers (spinning, where "auto" sees free cores) do not share
    2.5 CPUs."""
    from vecenv.subproc_vec_env import default_n_workers
    from vecenv.workers import spin

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)))
    monkeypatch.setattr(spin, "cgroup_cpu_limit", lambda: limit)
    assert spin.usable_cores() == expected
    assert default_n_workers() == expected and default_n_workers(parent_envs=1) == max(1, expected - 1)
