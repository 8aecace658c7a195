"""Worker groups (``n_workers``, ``split_groups``) and the sparse-info byte protocol of SubprocVecEnv.

DummyVecEnv on the same seeds and actions is the reference for SubprocVecEnv; DummyVecEnv itself is
checked against single envs stepped by hand (:class:`tests.reference.ReferenceVecEnv`), and group
layouts against hand-computed lists.
"""

from __future__ import annotations

import functools
import multiprocessing as mp
import os
from typing import Any

import numpy as np
import pytest

import vecenv
import vecenv.gymnasium
from tests.envs import CapturedListEnv, OwnTerminalKeyEnv
from tests.envs_perf import InfoEnv, PidEnv, assert_same
from tests.reference import ReferenceVecEnv
from vecenv.vec_env import default_n_workers, split_groups

ENDS = ["terminate", "truncate", "both"]


def info_fns(n: int) -> list:
    """``n`` InfoEnvs mixing every info pattern, episode length and end kind (env i has offset i)."""
    patterns = [
        {"info_every": 1, "reset_info": "full"},
        {"info_every": 0, "reset_info": "empty"},
        {"info_every": 3, "info_on_end": True, "reset_info": "alternate"},
        {"info_every": 0, "info_on_end": True, "reset_info": "full", "fake_default": True},
        {"info_every": 2, "reset_info": "empty"},
        {"info_every": 0, "reset_info": "alternate"},
        {"info_every": 5, "reset_info": "full"},
    ]
    return [
        functools.partial(InfoEnv, offset=i, episode_len=1 + i % 3, end=ENDS[i % 3], **patterns[i % len(patterns)])
        for i in range(n)
    ]


def new_vecenv_workers(before: set[int]) -> list[Any]:
    return [p for p in mp.active_children() if p.pid not in before and p.name.startswith("vecenv")]


# --- split_groups and the worker processes ---------------------------------------------------------------

GROUPS = [
    (1, 1, [[0]]),
    (5, 1, [[0, 1, 2, 3, 4]]),
    (5, 2, [[0, 1, 2], [3, 4]]),
    (5, 3, [[0, 1], [2, 3], [4]]),
    (5, 5, [[0], [1], [2], [3], [4]]),
    (7, 3, [[0, 1, 2], [3, 4], [5, 6]]),
    (8, 3, [[0, 1, 2], [3, 4, 5], [6, 7]]),
    (6, 4, [[0, 1], [2, 3], [4], [5]]),
]


@pytest.mark.parametrize(("num_envs", "n_workers", "groups"), GROUPS)
def test_split_groups(num_envs, n_workers, groups):
    """Contiguous groups in env order, the first ``num_envs % n_workers`` one env larger."""
    assert split_groups(num_envs, n_workers) == groups


@pytest.mark.parametrize(("num_envs", "n_workers", "groups"), [g for g in GROUPS if g[0] in (5, 7)])
def test_envs_live_in_their_group_process(num_envs, n_workers, groups):
    """Envs of one group share a worker process (asked from inside each env), one process per group."""
    venv = vecenv.SubprocVecEnv([functools.partial(PidEnv, offset=i) for i in range(num_envs)], n_workers=n_workers)
    try:
        assert venv.n_workers == n_workers
        assert len(venv.processes) == n_workers
        pids = venv.get_attr("pid")
        assert [[pids[i] for i in group] for group in groups] == [
            [p.pid] * len(g) for p, g in zip(venv.processes, groups, strict=True)
        ]
        assert len(set(pids)) == n_workers and os.getpid() not in pids
    finally:
        venv.close()


def test_n_workers_capped_at_num_envs():
    """More workers than envs: one process per env."""
    venv = vecenv.SubprocVecEnv([functools.partial(PidEnv, offset=i) for i in range(3)], n_workers=8)
    try:
        assert venv.n_workers == 3
        assert len(venv.processes) == 3
        assert len(set(venv.get_attr("pid"))) == 3
    finally:
        venv.close()


@pytest.mark.parametrize("n_workers", [0, -1, 1.5, True, False, "2"])
def test_n_workers_invalid(n_workers):
    """Non-positive, non-integer or bool n_workers: ValueError, and no worker process is started."""
    before = {p.pid for p in mp.active_children()}
    with pytest.raises(ValueError, match="n_workers"):
        vecenv.SubprocVecEnv([PidEnv, PidEnv], n_workers=n_workers)
    assert new_vecenv_workers(before) == []


@pytest.mark.parametrize("num_envs", [1, 3])
def test_default_n_workers(num_envs):
    """n_workers=None: one worker per CPU this process may run on, never more than the number of envs."""
    cpus = len(os.sched_getaffinity(0))
    assert default_n_workers() == cpus
    venv = vecenv.SubprocVecEnv([functools.partial(PidEnv, offset=i) for i in range(num_envs)])
    try:
        assert len(venv.processes) == min(cpus, num_envs)
        assert len(set(venv.get_attr("pid"))) == min(cpus, num_envs)
    finally:
        venv.close()


# --- parity with DummyVecEnv ----------------------------------------------------------------------------------


def compare_rollouts(dummy: vecenv.VecEnv, subproc: vecenv.VecEnv, num_envs: int, n_steps: int, seed: int) -> dict:
    """Step both with the same seeds and actions; every output must be identical. Returns coverage counters."""
    dummy.seed(seed)
    subproc.seed(seed)
    d_obs, s_obs = dummy.reset(), subproc.reset()
    assert s_obs.dtype == d_obs.dtype and s_obs.tobytes() == d_obs.tobytes()
    assert_same(subproc.reset_infos, dummy.reset_infos)
    rng = np.random.default_rng(seed)
    seen = {"dones": 0, "truncated": 0, "default_infos": 0, "empty_reset_infos": 0, "reset_infos": 0}
    for _ in range(n_steps):
        actions = rng.integers(0, 3, size=num_envs)
        d_obs, d_rew, d_done, d_infos = dummy.step(actions)
        s_obs, s_rew, s_done, s_infos = subproc.step(actions)
        assert s_obs.dtype == d_obs.dtype and s_obs.tobytes() == d_obs.tobytes()
        assert s_rew.dtype == d_rew.dtype == np.float32 and s_rew.tobytes() == d_rew.tobytes()
        assert s_done.dtype == d_done.dtype == bool and s_done.tolist() == d_done.tolist()
        for i in range(num_envs):
            assert_same(s_infos[i], d_infos[i], f"infos[{i}]")
            assert_same(subproc.reset_infos[i], dummy.reset_infos[i], f"reset_infos[{i}]")
        seen["dones"] += int(d_done.sum())
        seen["truncated"] += sum(info["TimeLimit.truncated"] for info in d_infos)
        seen["default_infos"] += sum(info == {"TimeLimit.truncated": False} for info in d_infos)
        seen["empty_reset_infos"] += sum(not dummy.reset_infos[i] for i in np.flatnonzero(d_done))
        seen["reset_infos"] += sum(bool(dummy.reset_infos[i]) for i in np.flatnonzero(d_done))
    return seen


PARITY = [
    # (num_envs, n_workers, shared_memory, parent_envs: envs stepped by the calling process itself)
    (5, 1, True, 0),
    (5, 2, True, 0),
    (5, 3, True, 0),
    (5, 5, True, 0),
    (7, 3, True, 0),
    (5, 2, False, 0),
    (7, 3, False, 0),
    (5, 1, True, 2),
    (5, 2, True, 1),
    (7, 2, True, 4),
    (4, 1, False, 3),
    (7, 3, False, 2),
]


@pytest.mark.parametrize(("num_envs", "n_workers", "shared_memory", "parent_envs"), PARITY)
def test_parity_with_dummy(num_envs, n_workers, shared_memory, parent_envs):
    """300 steps: obs, rewards, dones, infos (terminal_observation, TimeLimit.truncated, env content) and
    reset_infos identical to DummyVecEnv, for even and uneven worker groups, with and without shared memory,
    and whichever side of a ``parent_envs`` split an env is on."""
    fns = info_fns(num_envs)
    dummy = vecenv.DummyVecEnv(fns)
    subproc = vecenv.SubprocVecEnv(fns, n_workers=n_workers, shared_memory=shared_memory, parent_envs=parent_envs)
    try:
        assert subproc.n_workers == n_workers and len(subproc.processes) == n_workers
        assert subproc.parent_envs == parent_envs
        seen = compare_rollouts(dummy, subproc, num_envs, 300, seed=num_envs * 10 + n_workers + parent_envs)
    finally:
        dummy.close()
        subproc.close()
    # the rollout covered what it claims to compare
    assert seen["dones"] > 50 and seen["truncated"] > 10 and seen["default_infos"] > 50
    assert seen["empty_reset_infos"] > 10 and seen["reset_infos"] > 10


def test_dummy_matches_envs_stepped_by_hand():
    """The reference itself: DummyVecEnv with the mixed info patterns equals single envs stepped by hand."""
    fns = info_fns(7)
    venv = vecenv.DummyVecEnv(fns)
    reference = ReferenceVecEnv(fns)
    venv.seed(4)
    np.testing.assert_array_equal(venv.reset(), reference.reset(seed=4))
    assert_same(venv.reset_infos, reference.reset_infos)
    rng = np.random.default_rng(1)
    for _ in range(60):
        actions = rng.integers(0, 3, size=7)
        obs, rewards, dones, infos = venv.step(actions)
        exp_obs, exp_rewards, exp_dones, exp_infos = reference.step(actions)
        assert obs.tobytes() == exp_obs.tobytes()
        assert rewards.tobytes() == exp_rewards.tobytes()
        assert dones.tolist() == exp_dones.tolist()
        assert_same(infos, exp_infos)
        assert_same(venv.reset_infos, reference.reset_infos)
    venv.close()


# --- 3. sparse infos ---------------------------------------------------------------------------------------


SPARSE_CASES = [
    # (info pattern of every env, n_workers, shared_memory)
    ("only-sometimes", 2, True),
    ("only-sometimes", 4, True),
    ("only-sometimes", 4, False),
    ("never", 2, True),
    ("always", 1, True),
]


def sparse_fns(pattern: str) -> list:
    """4 envs; their step infos have content always / never / only sometimes; reset infos differ per env."""
    resets = ["full", "empty", "alternate", "alternate"]
    every = {"always": [1, 1, 1, 1], "never": [0, 0, 0, 0], "only-sometimes": [2, 0, 3, 0]}[pattern]
    return [
        functools.partial(
            InfoEnv,
            offset=i,
            episode_len=2,
            end=ENDS[i % 3],
            info_every=every[i],
            info_on_end=pattern == "only-sometimes" and i == 3,
            reset_info=resets[i],
            fake_default=i == 1,
        )
        for i in range(4)
    ]


@pytest.mark.parametrize(("pattern", "n_workers", "shared_memory"), SPARSE_CASES)
def test_sparse_infos_never_dropped_or_misplaced(pattern, n_workers, shared_memory):
    """Per env and per step, infos and reset_infos equal DummyVecEnv's: content on some steps only, on episode
    ends only, never (the 1-byte reply), reset infos non-empty then empty on autoreset (the stale one is cleared)."""
    fns = sparse_fns(pattern)
    dummy = vecenv.DummyVecEnv(fns)
    subproc = vecenv.SubprocVecEnv(fns, n_workers=n_workers, shared_memory=shared_memory)
    try:
        seen = compare_rollouts(dummy, subproc, 4, 120, seed=11)
    finally:
        dummy.close()
        subproc.close()
    assert seen["reset_infos"] > 20 and seen["empty_reset_infos"] > 20
    if pattern == "always":
        assert seen["default_infos"] == 0
    else:
        assert seen["default_infos"] > 50


def test_default_infos_are_exactly_sb3_default():
    """Envs whose infos are always empty: every step's info is exactly {"TimeLimit.truncated": <bool>}
    (plus terminal_observation on episode end), fresh dicts each step; no content invented or lost."""
    fns = [functools.partial(InfoEnv, offset=i, episode_len=2, end="truncate", info_every=0) for i in range(3)]
    venv = vecenv.SubprocVecEnv(fns, n_workers=2)
    try:
        venv.reset()
        previous: list[dict] = []
        for step in range(1, 7):
            _, _, dones, infos = venv.step(np.zeros(3, dtype=np.int64))
            for i, info in enumerate(infos):
                ends = (step - 1) % (2 + i) == 1 + i  # env i has episodes of 2 + i steps
                assert bool(dones[i]) == ends
                if ends:
                    assert set(info) == {"TimeLimit.truncated", "terminal_observation"}
                    assert info["TimeLimit.truncated"] is True
                    assert info["terminal_observation"][2] == 2 + i
                else:
                    assert info == {"TimeLimit.truncated": False}
                    assert info["TimeLimit.truncated"] is False
            assert all(a is not b for a, b in zip(infos, previous, strict=False))
            infos[0]["mutated"] = True  # the caller owns the dicts
            previous = infos
    finally:
        venv.close()


@pytest.mark.parametrize(
    "start_method",
    [
        pytest.param(m, marks=pytest.mark.skipif(m not in mp.get_all_start_methods(), reason=f"no {m}"))
        for m in ("forkserver", "spawn")
    ],
)
@pytest.mark.parametrize("api", ["sb3", "gymnasium"])
def test_envs_of_one_worker_get_their_own_copy_of_what_factories_captured(start_method: str, api: str) -> None:
    """Three factories close over one list, and one worker builds all three envs: as with one process per env
    (SB3's SubprocVecEnv, Gymnasium's AsyncVectorEnv), each env appends to its own copy, so after two steps each
    sees 2 items, not 6. (In-process backends share the list, as SB3's DummyVecEnv does.)"""
    captured: list[int] = []
    fns = [functools.partial(CapturedListEnv, captured) for _ in range(3)]
    if api == "sb3":
        venv: Any = vecenv.SubprocVecEnv(fns, n_workers=1, start_method=start_method)
    else:
        venv = vecenv.gymnasium.AsyncVectorEnv(fns, n_workers=1, context=start_method)
    try:
        venv.reset()
        venv.step(np.zeros(3, dtype=np.int64))
        assert venv.step(np.zeros(3, dtype=np.int64))[0].ravel().tolist() == [2, 2, 2]
    finally:
        venv.close()
    dummy = vecenv.DummyVecEnv(fns)
    dummy.reset()
    dummy.step(np.zeros(3, dtype=np.int64))
    assert dummy.step(np.zeros(3, dtype=np.int64))[0].ravel().tolist() == [4, 5, 6] and len(captured) == 6


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"n_workers": 1}, {"shared_memory": False}, {"n_workers": 1, "parent_envs": 1}, {"obs_slots": 0}],
    ids=["default", "one-worker", "pickled", "parent-envs", "no-slots"],
)
def test_terminal_observation_overwrites_the_envs_own_key(kwargs: dict[str, Any]) -> None:
    """SB3's rule (DummyVecEnv sets ``infos[i]["terminal_observation"] = obs``): at an episode end the last
    observation replaces a key of that name the env put in its info, whichever way the observation travels."""
    venv = vecenv.SubprocVecEnv([OwnTerminalKeyEnv, OwnTerminalKeyEnv], **kwargs)
    try:
        venv.reset()
        _, _, dones, infos = venv.step(np.zeros(2, dtype=np.int64))
        assert not dones.any() and [info["terminal_observation"] for info in infos] == ["env's own"] * 2
        _, _, dones, infos = venv.step(np.zeros(2, dtype=np.int64))
        assert dones.all()
        for info in infos:
            np.testing.assert_array_equal(info["terminal_observation"], np.full(2, 2.0, np.float32))
    finally:
        venv.close()
