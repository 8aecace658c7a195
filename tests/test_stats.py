"""The step accounts of vecenv.stats on every backend, checked against an env with a known cost per step.

:class:`tests.envs_perf.SleepEnv` sleeps a fixed time in each step and the test sleeps a fixed time between its
steps, so each part of the accounts has a floor known in advance (a sleep never returns early); upper bounds are
loose (a loaded machine oversleeps), and the parts must add up to the wall time that the accounts and the test
itself measured.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import time
from functools import partial

import gymnasium as gym
import numpy as np
import pytest

import vecenv
from tests.conftest import HAS_RAY, RAY_TEST_OPTIONS
from tests.envs_failure import expected_obs, make
from tests.envs_perf import SleepEnv
from vecenv.adapters import from_gymnasium
from vecenv.errors import AlreadyPendingCallError, ClosedVecEnvError, WorkerDiedError
from vecenv.stats import StepStats, WorkerStats, thread_run_queue_seconds

SLEEP = 0.004  # seconds per env step
GAP = 0.002  # seconds the caller sleeps between steps
STEPS = 20
EPISODE = 7
NUM_ENVS = 4

LAYOUTS = [
    "dummy",
    "subproc",
    "subproc-parent",
    "gym-async",
    pytest.param("ray", marks=pytest.mark.skipif(not HAS_RAY, reason="ray is not installed (the ray extra)")),
]


def _env_fns() -> list:
    return [partial(SleepEnv, SLEEP, EPISODE) for _ in range(NUM_ENVS)]


def _build(layout: str, request: pytest.FixtureRequest):
    if layout == "dummy":
        return vecenv.DummyVecEnv(_env_fns())
    if layout == "subproc":
        return vecenv.SubprocVecEnv(_env_fns(), n_workers=2)
    if layout == "subproc-parent":
        return vecenv.SubprocVecEnv(_env_fns(), n_workers=1, parent_envs=1)
    if layout == "gym-async":
        return vecenv.gymnasium.AsyncVectorEnv(_env_fns(), n_workers=2)
    request.getfixturevalue("ray_session")
    return vecenv.RayVecEnv(_env_fns(), **RAY_TEST_OPTIONS)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_accounts_add_up(layout: str, request: pytest.FixtureRequest) -> None:
    venv = _build(layout, request)
    try:
        actions = np.zeros(NUM_ENVS, dtype=np.int64)
        started = time.perf_counter()
        venv.reset()
        for _ in range(STEPS):
            venv.step(actions)
            time.sleep(GAP)
        ended = time.perf_counter()
        stats = venv.step_stats()
        asked = time.perf_counter()
    finally:
        venv.close()

    finished = STEPS // EPISODE  # episodes each env ended (also in NEXT_STEP mode for these numbers: 7, 15)
    # Gymnasium's default NEXT_STEP mode resets a finished env at its next step instead of stepping it
    env_calls = STEPS - finished if layout == "gym-async" else STEPS
    assert (stats.steps, stats.env_steps, stats.episodes) == (STEPS, NUM_ENVS * STEPS, NUM_ENVS * finished)
    assert [index for worker in stats.workers for index in worker.env_indices] == list(range(NUM_ENVS))

    # the calling process: its parts are its wall time, which is the time the test measured around its calls
    parts = (
        stats.send_seconds,
        stats.wait_seconds,
        stats.collect_seconds,
        stats.parent_env_seconds,
        stats.reset_seconds,
        stats.outside_seconds,
    )
    assert min(parts) >= 0
    assert sum(parts) == pytest.approx(stats.wall_seconds, rel=0.01, abs=0.002)
    assert ended - started - 0.002 <= stats.wall_seconds <= asked - started
    assert stats.outside_seconds >= STEPS * GAP  # the test's own sleeps

    for worker in stats.workers:
        n = len(worker.env_indices)
        assert (worker.env_steps, worker.episodes, worker.resets) == (n * STEPS, n * finished, n * (1 + finished))
        assert n * env_calls * SLEEP <= worker.env_seconds <= 3 * n * STEPS * SLEEP + 0.2
        assert min(worker.data_seconds, worker.idle_seconds) >= 0
        worker_parts = worker.env_seconds + worker.data_seconds + worker.idle_seconds
        assert worker_parts == pytest.approx(worker.wall_seconds, rel=0.02, abs=0.005)

    in_parent = [worker for worker in stats.workers if worker.where == "calling process"]
    remote = [worker for worker in stats.workers if worker.where != "calling process"]
    parent_envs = sum(len(worker.env_indices) for worker in in_parent)
    assert parent_envs == {"dummy": NUM_ENVS, "subproc-parent": 1}.get(layout, 0)
    assert stats.parent_env_seconds >= parent_envs * env_calls * SLEEP
    if remote:
        # every step waits for the busiest worker's envs, less what the calling process did meanwhile
        busiest = max(len(worker.env_indices) for worker in remote)
        assert stats.wait_seconds >= env_calls * (busiest - parent_envs) * SLEEP * 0.7
        for worker in remote:  # a worker waits at least while the test sleeps
            assert worker.idle_seconds >= STEPS * GAP
            if thread_run_queue_seconds() is not None:  # Linux: the serving thread's wait for a core is known
                assert worker.run_queue_seconds is not None
                assert 0 <= worker.run_queue_seconds <= worker.wall_seconds
    else:
        assert stats.wait_seconds == 0
    assert all(worker.run_queue_seconds is None for worker in in_parent)


@pytest.mark.parametrize("layout", ["dummy", "subproc-parent"])
def test_calling_process_envs_idle_is_the_rest_of_its_time(layout: str, request: pytest.FixtureRequest) -> None:
    """For the calling process's own envs, ``idle`` is the calling process's time outside their step / reset
    calls (wall - env - data), not 0: at least the test's own sleeps, and at least the calling process's time
    outside the vector env, sending and waiting for the worker process, none of which steps these envs."""
    venv = _build(layout, request)
    slept = 0.0
    try:
        started = time.perf_counter()
        venv.reset()
        for _ in range(STEPS):
            venv.step(np.zeros(NUM_ENVS, dtype=np.int64))
            before = time.perf_counter()
            time.sleep(GAP)
            slept += time.perf_counter() - before
        stats = venv.step_stats()
        asked = time.perf_counter()
    finally:
        venv.close()
    (own,) = [worker for worker in stats.workers if worker.where == "calling process"]
    assert own.idle_seconds >= slept >= STEPS * GAP
    assert own.idle_seconds >= stats.outside_seconds + stats.send_seconds + stats.wait_seconds - 1e-3
    assert own.idle_seconds <= stats.wall_seconds - stats.parent_env_seconds + 1e-3
    assert own.idle_seconds <= asked - started - own.env_seconds
    assert own.idle_seconds == pytest.approx(own.wall_seconds - own.env_seconds - own.data_seconds, abs=1e-9)


def test_reset_restarts_every_account() -> None:
    venv = vecenv.SubprocVecEnv(_env_fns(), n_workers=2)
    try:
        venv.reset()
        for _ in range(3):
            venv.step(np.zeros(NUM_ENVS, dtype=np.int64))
        before = venv.step_stats(reset=True)
        after = venv.step_stats()
        venv.step(np.zeros(NUM_ENVS, dtype=np.int64))
        one_step = venv.step_stats()
    finally:
        venv.close()
    assert (before.steps, before.env_steps) == (3, 3 * NUM_ENVS)
    assert (after.steps, after.env_steps, after.wall_seconds, after.send_seconds) == (0, 0, 0.0, 0.0)
    assert all(worker.env_seconds == 0 and worker.env_steps == 0 for worker in after.workers)
    assert (one_step.steps, one_step.env_steps) == (1, NUM_ENVS)
    assert all(worker.env_seconds >= 2 * SLEEP for worker in one_step.workers)


def test_wrappers_and_adapters_pass_the_accounts_through() -> None:
    venv = vecenv.VecNormalize(vecenv.VecMonitor(vecenv.DummyVecEnv(_env_fns()[:2])))
    try:
        venv.reset()
        for _ in range(5):
            venv.step(np.zeros(2, dtype=np.int64))
        assert venv.step_stats().env_steps == 10
        gym_view = vecenv.adapters.to_gymnasium(venv)
        gym_view.step(np.zeros(2, dtype=np.int64))
        assert gym_view.step_stats().env_steps == 12
    finally:
        venv.close()


def test_refused_while_a_step_is_pending_and_after_close() -> None:
    venv = vecenv.DummyVecEnv(_env_fns()[:2])
    venv.reset()
    venv.step_async(np.zeros(2, dtype=np.int64))
    with pytest.raises(AlreadyPendingCallError, match=r"step_stats\(\) while a step is pending"):
        venv.step_stats()
    venv.step_wait()
    venv.close()
    with pytest.raises(ClosedVecEnvError):
        venv.step_stats()


def test_a_dead_worker_is_restarted_as_by_any_request() -> None:
    """With max_restarts, step_stats() restarts a worker killed between steps (as step() would) and returns the
    accounts, the new worker's from zero; the next step reports the restarted envs' cut episode."""
    venv = vecenv.SubprocVecEnv([partial(make, i) for i in range(4)], n_workers=2, max_restarts=3)
    try:
        venv.reset()
        venv.step(np.zeros(4, dtype=np.int64))
        old_pid = venv.processes[1].pid
        os.kill(old_pid, signal.SIGKILL)
        venv.processes[1].join(5)
        with pytest.warns(
            RuntimeWarning, match=r"restarting the worker of envs \[2, 3\] \(restart 1 of max_restarts=3\)"
        ):
            stats = venv.step_stats()
        new_pid = venv.processes[1].pid
        assert venv.restarts == 1 and new_pid != old_pid
        assert [worker.env_indices for worker in stats.workers] == [(0, 1), (2, 3)]
        assert stats.workers[1].where == f"worker process {new_pid}"
        assert [worker.env_steps for worker in stats.workers] == [2, 0]
        obs, rewards, dones, infos = venv.step(np.zeros(4, dtype=np.int64))
    finally:
        venv.close()
    np.testing.assert_array_equal(dones, [False, False, True, True])
    np.testing.assert_array_equal(rewards, [2.0, 2.0, 0.0, 0.0])
    assert [bool(info.get("vecenv.restarted")) for info in infos] == [False, False, True, True]
    assert all(
        infos[i]["TimeLimit.truncated"] and "WorkerDiedError" in infos[i]["vecenv.restart_cause"] for i in (2, 3)
    )
    np.testing.assert_array_equal(
        obs, [expected_obs(0, 0, 2), expected_obs(1, 0, 2), *(expected_obs(i, 0, 0) for i in (2, 3))]
    )


def test_without_restarts_a_dead_worker_raises() -> None:
    venv = vecenv.SubprocVecEnv([partial(make, i) for i in range(2)], n_workers=2)
    try:
        venv.reset()
        os.kill(venv.processes[0].pid, signal.SIGKILL)
        venv.processes[0].join(5)
        with pytest.raises(WorkerDiedError, match=r"running envs \[0\] was killed by SIGKILL"):
            venv.step_stats()
        assert venv.restarts == 0
    finally:
        venv.close()


def test_a_vector_env_without_accounts_says_so() -> None:
    venv = from_gymnasium(gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")]))
    try:
        with pytest.raises(NotImplementedError, match="keeps no step accounts"):
            venv.step_stats()
    finally:
        venv.close()


# --- the table and the advice, on fixed inputs ------------------------------------------------------------


def _worker(
    where: str,
    envs: range,
    env: float,
    data: float,
    idle: float,
    steps: int,
    cpu: float | None = None,
    run_queue: float | None = None,
) -> WorkerStats:
    """A worker's accounts; a worker process had the CPU whenever it worked unless ``cpu`` says otherwise."""
    if cpu is None and where != "calling process":
        cpu = env + data
    return WorkerStats(
        where, tuple(envs), env + data + idle, env, data, idle, steps * len(envs), len(envs), 0, cpu, run_queue
    )


def _stats(workers: tuple[WorkerStats, ...], **parts: float) -> StepStats:
    fields = dict(send=0.0, wait=0.0, collect=0.0, parent_env=0.0, reset=0.0, outside=0.0) | parts
    wall = sum(fields.values())
    steps = max(worker.env_steps // len(worker.env_indices) for worker in workers)
    return StepStats(
        wall_seconds=wall,
        **{f"{name}_seconds": value for name, value in fields.items()},
        steps=steps,
        env_steps=sum(worker.env_steps for worker in workers),
        episodes=0,
        workers=workers,
    )


def test_table_per_env_step_and_percent() -> None:
    # 1000 steps of 4 envs in 2 workers: 4000 env-steps in 1 s
    workers = (
        _worker("worker process 11", range(0, 2), env=0.2, data=0.1, idle=0.7, steps=1000),
        _worker("worker process 12", range(2, 4), env=0.2, data=0.1, idle=0.7, steps=1000),
    )
    stats = _stats(workers, send=0.1, wait=0.6, collect=0.1, outside=0.2)
    assert stats.table().splitlines() == [
        "vecenv step profile: 1000 steps, 4000 env-steps, 0 env episodes, 1.000 s, 4,000 env-steps/s",
        "where                              part       us/env-step      %",
        "calling process                    send             25.00   10.0",
        "calling process                    wait            150.00   60.0",
        "calling process                    collect          25.00   10.0",
        "calling process                    env               0.00    0.0",
        "calling process                    reset             0.00    0.0",
        "calling process                    outside          50.00   20.0",
        "worker process 11 (envs 0-1)       env             100.00   20.0",
        "worker process 11 (envs 0-1)       data             50.00   10.0",
        "worker process 11 (envs 0-1)       idle            350.00   70.0",
        "worker process 12 (envs 2-3)       env             100.00   20.0",
        "worker process 12 (envs 2-3)       data             50.00   10.0",
        "worker process 12 (envs 2-3)       idle            350.00   70.0",
        "advice: envs are cheap (100.0 us per env-step): workers wait for the calling process 70% of the time; "
        "try more envs per worker, parent_envs, or DummyVecEnv",
    ]
    assert str(stats) == stats.table()


@pytest.mark.parametrize("where", ["cheap", "data"])
def test_the_advice_to_ray_actors_names_what_ray_vec_env_has(where: str) -> None:
    """RayVecEnv has neither parent_envs nor shared_memory: the advice to its actors names what it has."""
    env, data, idle = (0.2, 0.1, 0.7) if where == "cheap" else (0.2, 0.5, 0.3)
    workers = tuple(
        _worker(f"Ray actor vecenv-1-abc-{k} (process {20 + k})", range(2 * k, 2 * k + 2), env, data, idle, 1000)
        for k in range(2)
    )
    advice = _stats(workers, send=0.1, wait=0.6, collect=0.1, outside=0.2).advice()
    assert advice is not None
    assert "parent_envs" not in advice and "shared_memory" not in advice, advice
    if where == "cheap":
        assert advice.endswith("try more envs per actor, SubprocVecEnv, or DummyVecEnv"), advice
    else:
        assert advice.endswith("keep observations small, and return infos only when they carry something"), advice


def test_table_columns_fit_long_labels() -> None:
    """A label longer than the first column (a Ray actor's name) widens the column: in every line the part
    starts, and the numbers end, where the header's ``part``, ``us/env-step`` and ``%`` do."""
    actor = "Ray actor vecenv-13647-7fba62bbb450-0 (process 14046)"
    workers = (
        _worker(actor, range(0, 2), env=0.2, data=0.1, idle=0.7, steps=1000),
        _worker("worker process 12", range(2, 4), env=0.2, data=0.1, idle=0.7, steps=1000),
    )
    lines = _stats(workers, send=0.1, wait=0.6, collect=0.1, outside=0.2).table().splitlines()
    header, rows = lines[1], [line for line in lines[2:] if not line.startswith("advice: ")]
    assert header.startswith("where ")
    part_at = header.index("part")
    ends = [header.index("us/env-step") + len("us/env-step"), len(header)]
    assert part_at > len(f"{actor} (envs 0-1)")  # one space at least between the columns
    labels = []
    for line in rows:
        assert len(line) == len(header), line
        assert line[part_at - 1] == " " and line[part_at] != " ", line
        label = line[:part_at].rstrip()
        part, per_step, share = line[part_at:].split()
        assert line[ends[0] - len(per_step) : ends[0]] == per_step and line.endswith(share), line
        float(per_step), float(share)
        labels.append((label, part))
    assert labels[6:9] == [(f"{actor} (envs 0-1)", part) for part in ("env", "data", "idle")]
    assert labels[9][0] == "worker process 12 (envs 2-3)"
    assert len(rows) == 12


def test_spin_line_says_what_the_calling_process_did_between_steps() -> None:
    """With the workers' spinning paused, the ``spin:`` line names each limit the calling process went over
    between steps (time, busy cores), with its measurement; where nothing was measured, only that it worked."""
    spinning = dataclasses.replace(_worker("worker process 11", range(0, 2), 0.2, 0.1, 0.7, 1000), wait_mode="spin")
    stats = dataclasses.replace(_stats((spinning,), wait=0.8, outside=0.2), workers_spin_paused=True)
    cases = [
        (212e-6, 0.9, ", which spends 212 us between steps on average (over 50 us)"),
        (20e-6, 1.8, ", which keeps 1.8 cores busy between steps (over 1.5)"),
        (
            60e-6,
            2.0,
            ", which spends 60 us between steps on average (over 50 us) and keeps 2.0 cores busy between "
            "steps (over 1.5)",
        ),
        (None, None, "'s work between steps"),
    ]
    for seconds, cores, reason in cases:
        line = dataclasses.replace(stats, between_steps_seconds=seconds, between_steps_cores=cores).spinning()
        assert line is not None and line.startswith("calling process blocks; workers ")
        assert line.endswith(f"; the workers now block, leaving the cores to the calling process{reason}"), line
    assert "the workers now block" not in (dataclasses.replace(stats, workers_spin_paused=False).spinning() or "")


def test_advice_follows_the_numbers() -> None:
    def remote(env: float, data: float, idle: float) -> tuple[WorkerStats, ...]:
        return (_worker("worker process 1", range(2), env=env, data=data, idle=idle, steps=1000),)

    outside = _stats(remote(0.1, 0.0, 0.0), wait=0.1, outside=0.9)
    assert outside.advice() is not None and outside.advice().startswith("90% of the time is spent outside")
    per_step_us = 0.9e6 / outside.steps  # the autotune gets the loop's own time per vector step
    assert outside.advice().endswith(
        f"; vecenv bench --autotune ENV_ID --trainer-us {per_step_us:.0f} ranks the layouts with it"
    )
    images = _stats(remote(0.2, 0.6, 0.2), wait=0.8, send=0.1)
    assert images.advice() is not None and images.advice().startswith("moving data costs the workers more")
    cpu = _stats(remote(0.9, 0.05, 0.05), wait=0.9)
    assert cpu.advice() is not None and cpu.advice().startswith("workers spend 90% of their time in env steps")
    # (the worker-off-the-CPU cases: test_advice_tells_envs_that_block_from_a_machine_short_of_cores)
    balanced = _stats(remote(0.6, 0.1, 0.3), wait=0.5, collect=0.1)
    assert balanced.advice() is None
    dummy = (_worker("calling process", range(2), env=0.5, data=0.01, idle=0.0, steps=1000),)
    expensive = _stats(dummy, parent_env=0.5, collect=0.05)
    assert expensive.advice() is not None and expensive.advice().startswith("envs are expensive (250 us")
    too_short = _stats((_worker("worker process 1", range(2), env=0.1, data=0.0, idle=0.9, steps=10),), wait=0.1)
    assert too_short.advice() is None and "advice" not in too_short.table()


OFF_CPU = "worker process 7 had the CPU only 50% of the time it had work"
SHORT_OF_CORES = (
    f"{OFF_CPU}: the machine is short of free cores (other processes, or more workers than cores); try fewer workers"
)
ONE_WORKER_SHORT_OF_CORES = (
    f"{OFF_CPU}: the machine is short of free cores (other processes, or the worker and this process share one "
    "core); DummyVecEnv steps the envs without handing each step to another process"
)
ENVS_BLOCK = (
    "mostly not waiting for a free core: its envs wait for something else (a sleep, I/O, an external "
    "simulator); more workers, even more than cores, can overlap those waits"
)


@pytest.mark.parametrize(
    ("cpu", "run_queue", "expected"),
    [
        # starved: off the CPU 0.35 s of its 0.7 s of work, 0.3 s of it waiting for a core
        (0.35, 0.3, SHORT_OF_CORES),
        (0.35, 0.175, SHORT_OF_CORES),  # half of the time off the CPU in the run queue: still the cores
        # an env that sleeps (or waits for I/O, a simulator) on an idle machine: off the CPU, not queued
        (0.35, 0.01, f"{OFF_CPU}, {ENVS_BLOCK}"),
        (0.014, 0.02, f"worker process 7 had the CPU only 2% of the time it had work, {ENVS_BLOCK}"),
        # no run queue known (not Linux): both causes named
        (
            0.35,
            None,
            f"{OFF_CPU}: either its envs wait for something other than the CPU (a sleep, I/O, an external "
            "simulator; more workers, even more than cores, can overlap those waits) or the machine is short of "
            "free cores (other processes, or more workers than cores; try fewer workers)",
        ),
    ],
)
@pytest.mark.parametrize("n_workers", [2, 1])
def test_advice_tells_envs_that_block_from_a_machine_short_of_cores(
    cpu: float, run_queue: float | None, expected: str, n_workers: int
) -> None:
    def worker(cpu: float | None) -> WorkerStats:  # 0.7 s of work in 1 s
        return _worker("worker process 7", range(2), 0.6, 0.1, 0.3, steps=1000, cpu=cpu, run_queue=run_queue)

    if n_workers == 1 and expected == SHORT_OF_CORES:  # (fewer workers cannot help one worker waiting for a core)
        expected = ONE_WORKER_SHORT_OF_CORES
    assert _stats((worker(cpu),) * n_workers, wait=0.9).advice() == expected
    # a worker that had the CPU for all its work gets the usual advice (here none) whatever its run queue says
    assert _stats((worker(None),) * n_workers, wait=0.9).advice() is None


def test_envs_that_sleep_are_not_a_shortage_of_cores() -> None:
    """Envs that sleep 10 ms per step in two worker processes: off the CPU nearly all the time they step, but
    not waiting for a core. Load-independent: the advice would blame the cores only if each worker waited for
    a core for half of those 10 ms per step or more."""
    venv = vecenv.SubprocVecEnv([partial(SleepEnv, 0.01, 1000) for _ in range(2)], n_workers=2)
    try:
        venv.reset()
        for _ in range(50):
            venv.step(np.zeros(2, dtype=np.int64))
        stats = venv.step_stats()
    finally:
        venv.close()
    advice = stats.advice()
    assert advice is not None and advice.startswith("worker process ")
    if thread_run_queue_seconds() is None:  # not Linux: the run queue is unknown, both causes are named
        assert "either its envs wait for something other than the CPU" in advice
    else:
        assert advice.endswith(ENVS_BLOCK) and "short of free cores" not in advice
        assert all(worker.run_queue_seconds is not None for worker in stats.workers)


def test_run_profile_prints_the_table_after_the_summary(capsys: pytest.CaptureFixture[str]) -> None:
    from vecenv.cli import main

    args = ["run", "CartPole-v1", "-n", "4", "--steps", "400", "-b", "subproc", "--n-workers", "2", "--profile"]
    assert main(args) == 0
    summary_text, profile_text = capsys.readouterr().out.split("\n\n")
    summary = dict(line.split(":", 1) for line in summary_text.splitlines())
    lines = profile_text.splitlines()
    episodes = int(summary["episodes"])
    assert lines[0].startswith(f"vecenv step profile: 100 steps, 400 env-steps, {episodes} env episodes, ")
    assert lines[1].split() == ["where", "part", "us/env-step", "%"]
    rows = [line.rsplit(maxsplit=3) for line in lines[2:] if not line.startswith("advice: ")]
    parent = [(part, float(share)) for where, part, _, share in rows if where.strip() == "calling process"]
    assert [part for part, _ in parent] == ["send", "wait", "collect", "env", "reset", "outside"]
    assert sum(share for _, share in parent) == pytest.approx(100, abs=0.5)
    workers: dict[str, list[tuple[str, float]]] = {}
    for where, part, _, share in rows:
        if where.startswith("worker process"):
            workers.setdefault(where.strip(), []).append((part, float(share)))
    assert [where.split(" (")[1] for where in workers] == ["envs 0-1)", "envs 2-3)"]
    for parts in workers.values():
        assert [part for part, _ in parts] == ["env", "data", "idle"]
        assert sum(share for _, share in parts) == pytest.approx(100, abs=0.5)


def test_partial_batches_are_accounted() -> None:
    venv = vecenv.SubprocVecEnv(_env_fns(), n_workers=2, batch_size=2)
    try:
        venv.async_reset()
        sent = 0
        for _ in range(6):  # each recv() returns one worker's two envs: their reset, then their steps
            *_, env_ids = venv.recv()
            venv.send(np.zeros(len(env_ids), dtype=np.int64), env_ids)
            sent += len(env_ids)
        for _ in range(2):  # collect the last two batches in flight
            venv.recv()
        stats = venv.step_stats()
    finally:
        venv.close()
    assert (stats.steps, stats.env_steps) == (8, sent) == (8, 12)  # every recv() counts as a step
    assert [worker.env_steps for worker in stats.workers] == [6, 6]
    assert min(worker.env_seconds for worker in stats.workers) >= 6 * SLEEP
    assert stats.send_seconds > 0 and stats.collect_seconds > 0
    # the calling process does nothing but wait while the workers step (in parallel)
    assert stats.wait_seconds >= 0.7 * max(worker.env_seconds for worker in stats.workers)
