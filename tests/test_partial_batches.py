"""Partial batches (EnvPool's ``async_reset`` / ``send(actions, env_ids)`` / ``recv()``), Dummy and Subproc.

Every returned row is compared with the same env stepped by hand with the same actions (SB3's autoreset
rule). Which envs come back first is made deterministic with :class:`tests.envs_perf.GatedEnv`: a gated
env cannot finish its n-th call before the test writes n to the gate file, whatever the machine load.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import multiprocessing as mp
import os
from collections.abc import Callable, Iterator
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import vecenv
from tests.envs import EnvFaultError, FaultEnv
from tests.envs_perf import GatedEnv, SampleEnv, assert_same
from vecenv.errors import RemoteTraceback

ENDS = ["terminate", "truncate", "both"]


class Hand:
    """The envs of ``fns`` stepped one by one with SB3's rule; keeps each env's last reset info."""

    def __init__(self, fns: list[Callable[[], Any]]) -> None:
        self.envs = [fn() for fn in fns]
        self.reset_infos: list[dict] = [{} for _ in self.envs]

    def reset(self, i: int, seed: int | None = None) -> tuple[Any, np.float32, bool, dict]:
        obs, self.reset_infos[i] = self.envs[i].reset(seed=seed)
        return copy.deepcopy(obs), np.float32(0.0), False, copy.deepcopy(self.reset_infos[i])

    def step(self, i: int, action: Any) -> tuple[Any, np.float32, bool, dict]:
        obs, reward, terminated, truncated, info = self.envs[i].step(action)
        info = copy.deepcopy(info)
        info["TimeLimit.truncated"] = bool(truncated and not terminated)
        if terminated or truncated:
            info["terminal_observation"] = copy.deepcopy(obs)
            obs, self.reset_infos[i] = self.envs[i].reset()
        return copy.deepcopy(obs), np.float32(reward), bool(terminated or truncated), info


def check_recv(result: tuple, expected: dict[int, tuple]) -> None:
    """``recv()``'s result holds exactly the envs of ``expected`` (id -> (obs, reward, done, info)), in id order."""
    obs, rewards, dones, infos, env_ids = result
    ids = sorted(expected)
    assert isinstance(env_ids, np.ndarray) and env_ids.dtype == np.int64
    assert env_ids.tolist() == ids
    want_obs = np.stack([expected[i][0] for i in ids])
    assert obs.dtype == want_obs.dtype and obs.shape == want_obs.shape and obs.tobytes() == want_obs.tobytes()
    assert rewards.dtype == np.float32 and rewards.tolist() == [expected[i][1] for i in ids]
    assert dones.dtype == bool and dones.tolist() == [expected[i][2] for i in ids]
    assert_same(infos, [expected[i][3] for i in ids])


def env_fns(n: int, gate_path: str | None = None, slow: tuple[int, ...] = (), **kwargs: Any) -> list:
    """``n`` GatedEnvs with mixed info patterns; envs in ``slow`` wait on ``gate_path``."""
    patterns = [
        {"info_every": 2, "reset_info": "full"},
        {"info_every": 0, "reset_info": "alternate", "info_on_end": True},
        {"info_every": 1, "reset_info": "empty"},
        {"info_every": 0, "reset_info": "full"},
    ]
    return [
        functools.partial(
            GatedEnv,
            gate_path=gate_path if i in slow else None,
            offset=i,
            episode_len=2,
            end=ENDS[i % 3],
            **{**patterns[i % 4], **kwargs},
        )
        for i in range(n)
    ]


@pytest.fixture
def build() -> Iterator[Callable[..., vecenv.VecEnv]]:
    """``build(variant, fns, **kwargs)``: "dummy" or "subproc" (SubprocVecEnv kwargs), closed at teardown."""
    built: list[vecenv.VecEnv] = []

    def make(variant: str, fns: list, **kwargs: Any) -> vecenv.VecEnv:
        venv = vecenv.DummyVecEnv(fns) if variant == "dummy" else vecenv.SubprocVecEnv(fns, **kwargs)
        built.append(venv)
        return venv

    yield make
    for venv in built:
        with contextlib.suppress(Exception):
            venv.close()


class Gate:
    """A file holding how many calls the gated envs may complete."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.open(0)

    def open(self, calls: int) -> None:
        with open(self.path + ".tmp", "w") as f:
            f.write(str(calls))
        os.replace(self.path + ".tmp", self.path)


@pytest.fixture
def gate(tmp_path, build) -> Iterator[Gate]:
    """A closed gate; opened for good before the vec envs are closed (this fixture depends on ``build``)."""
    g = Gate(str(tmp_path / "gate"))
    yield g
    g.open(10**9)


BACKENDS = ["dummy", "subproc"]

# --- async_reset / recv -----------------------------------------------------------------------------------


class SeedEchoEnv(gym.Env):
    """Reports the seed and options of each reset in its reset info."""

    observation_space = gym.spaces.Discrete(1)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[int, dict]:
        super().reset(seed=seed)
        return 0, {"seed": seed, "options": options}

    def step(self, action: Any) -> tuple[int, float, bool, bool, dict]:
        return 0, 0.0, False, False, {}


@pytest.mark.parametrize("variant", BACKENDS)
def test_async_reset_uses_the_latest_seeds_and_options(build, variant):
    """Seeds and options handed to the envs by a step, then replaced (``seed([None, 5])``, ``set_options(None)``):
    ``async_reset()`` resets with the replacements, as ``reset()`` does (docs/semantics.md, SB3's rule)."""
    venv = build(variant, [SeedEchoEnv, SeedEchoEnv], n_workers=1)
    for reset in ("reset", "async_reset"):
        venv.reset()
        venv.seed(100)
        venv.set_options({"level": 3})
        venv.send(np.array([0]), [0])  # (hands the staged seeds and options to the envs' group)
        venv.recv()
        venv.seed([None, 5])
        venv.set_options(None)
        if reset == "reset":
            venv.reset()
            infos = venv.reset_infos
        else:
            venv.async_reset()
            infos = venv.recv()[3]
        assert [dict(info) for info in infos] == [{"seed": None, "options": None}, {"seed": 5, "options": None}]


@pytest.mark.parametrize("variant", BACKENDS)
def test_async_reset_then_recv(build, variant):
    """async_reset() + recv(): first observations of every env with env_ids 0..n-1, rewards 0, dones False,
    the reset infos; then nothing is in flight, and full-batch steps work again."""
    fns = env_fns(3)
    venv = build(variant, fns)
    hand = Hand(fns)
    venv.seed(3)
    venv.async_reset()
    check_recv(venv.recv(), {i: hand.reset(i, seed=3 + i) for i in range(3)})
    assert_same(venv.reset_infos, hand.reset_infos)
    with pytest.raises(vecenv.NoAsyncCallError):
        venv.recv()
    obs, rewards, _, infos = venv.step(np.array([0, 1, 2]))
    expected = [hand.step(i, a) for i, a in enumerate([0, 1, 2])]
    assert obs.tobytes() == np.stack([e[0] for e in expected]).tobytes()
    assert rewards.tolist() == [e[1] for e in expected]
    assert_same(infos, [e[3] for e in expected])


# --- send / recv contents -----------------------------------------------------------------------------------

VARIANTS = [
    ("dummy", {}),
    ("subproc", {"n_workers": 1}),
    ("subproc", {"n_workers": 2}),
    ("subproc", {"n_workers": 4}),
    ("subproc", {"n_workers": 2, "shared_memory": False}),
    ("subproc", {"n_workers": 1, "parent_envs": 2}),
    ("subproc", {"n_workers": 2, "parent_envs": 1, "shared_memory": False}),
]


@pytest.mark.parametrize(
    ("variant", "kwargs"), VARIANTS, ids=["dummy", "1w", "2w", "4w", "2w-pickled", "parent2-1w", "parent1-2w-pickled"]
)
def test_send_recv_match_envs_stepped_by_hand(build, variant, kwargs):
    """Random subsets sent in random id order: recv returns exactly those envs in increasing id order, each row
    (obs, reward, done, info incl. terminal_observation, sparse infos) equal to the env stepped by hand;
    reset_infos follow. With one env per worker, two sends before one recv return the union."""
    fns = env_fns(4)
    venv = build(variant, fns, **kwargs)
    hand = Hand(fns)
    venv.seed(7)
    venv.async_reset()
    check_recv(venv.recv(), {i: hand.reset(i, seed=7 + i) for i in range(4)})
    rng = np.random.default_rng(0)
    n_done = 0
    for round_ in range(40):
        ids = rng.permutation(4)[: rng.integers(1, 5)].tolist()
        actions = rng.integers(0, 3, size=len(ids))
        expected = {}
        split = len(ids) // 2 if kwargs.get("n_workers") == 4 and round_ % 2 and len(ids) > 1 else len(ids)
        for part in (slice(0, split), slice(split, len(ids))):
            if ids[part]:
                venv.send(actions[part], ids[part])
                expected.update({i: hand.step(i, a) for i, a in zip(ids[part], actions[part], strict=True)})
        check_recv(venv.recv(), expected)
        assert_same(venv.reset_infos, hand.reset_infos)
        n_done += sum(e[2] for e in expected.values())
    assert n_done > 15
    with pytest.raises(vecenv.NoAsyncCallError):
        venv.recv()


def test_batch_size_fast_envs_first(build, gate):
    """One env per worker, batch_size=2, envs 1 and 3 gated: recv returns the fast envs 0 and 2 first, then the
    slow ones once released; fast envs can be stepped again while slow ones are in flight."""
    fns = env_fns(4, gate_path=gate.path, slow=(1, 3))
    venv = build("subproc", fns, n_workers=4, batch_size=2)
    assert venv.batch_size == 2
    hand = Hand(env_fns(4))
    venv.seed(0)
    venv.async_reset()
    check_recv(venv.recv(), {i: hand.reset(i, seed=i) for i in (0, 2)})
    # the fast envs step twice while the slow ones are still resetting
    for actions in ([2, 1], [0, 0]):
        venv.send(np.array(actions), [2, 0])
        check_recv(venv.recv(), {2: hand.step(2, actions[0]), 0: hand.step(0, actions[1])})
    gate.open(1)
    check_recv(venv.recv(), {i: hand.reset(i, seed=i) for i in (1, 3)})
    rng = np.random.default_rng(1)
    for round_ in range(6):
        ids = rng.permutation(4).tolist()
        actions = rng.integers(0, 3, size=4)
        venv.send(actions, ids)
        expected = {i: hand.step(i, a) for i, a in zip(ids, actions, strict=True)}
        check_recv(venv.recv(), {i: expected[i] for i in (0, 2)})
        gate.open(2 + round_)  # the slow envs' reset was call 1
        check_recv(venv.recv(), {i: expected[i] for i in (1, 3)})
        assert_same(venv.reset_infos, hand.reset_infos)
    with pytest.raises(vecenv.NoAsyncCallError):
        venv.recv()


def test_recv_returns_at_least_batch_size(build):
    """EnvPool's loop with env i sleeping (i % 2) * 0.03 s per call (order not asserted): every recv returns
    >= batch_size envs (or all in flight), in increasing id order, each once, each row equal to the hand-stepped env."""
    fns = env_fns(4, delay=0.0)
    fns = [functools.partial(fn, delay=(i % 2) * 0.03) for i, fn in enumerate(fns)]
    venv = build("subproc", fns, n_workers=4, batch_size=3)
    hand = Hand(env_fns(4))
    venv.seed(5)
    venv.async_reset()
    pending = {i: hand.reset(i, seed=5 + i) for i in range(4)}  # id -> expected row
    rng = np.random.default_rng(2)
    for _ in range(25):
        result = venv.recv()
        ids = result[4].tolist()
        assert ids == sorted(set(ids)) and set(ids) <= set(pending)
        assert len(ids) >= min(3, len(pending))
        check_recv(result, {i: pending.pop(i) for i in ids})
        actions = rng.integers(0, 3, size=len(ids))
        venv.send(actions, ids)
        pending.update({i: hand.step(i, a) for i, a in zip(ids, actions, strict=True)})
    while pending:
        result = venv.recv()
        check_recv(result, {i: pending.pop(i) for i in result[4].tolist()})


@pytest.mark.parametrize("variant", ["dummy", "subproc", "subproc-pickled"])
def test_send_dict_actions(build, variant):
    """Dict actions (dict of batches, then a list of per-env dicts) reach env env_ids[k] as actions[k]."""
    fns = [functools.partial(SampleEnv, kind="dict", offset=i) for i in range(3)]
    kwargs = {} if variant == "dummy" else {"n_workers": 3, "shared_memory": variant == "subproc"}
    venv = build("dummy" if variant == "dummy" else "subproc", fns, **kwargs)
    venv.async_reset()
    venv.recv()
    space = fns[0]().action_space
    space.seed(0)
    per_env = [space.sample() for _ in range(2)]
    batched = {key: np.stack([a[key] for a in per_env]) for key in space.spaces}
    for actions in (batched, per_env):
        venv.send(actions, [2, 0])
        _, _, _, infos, env_ids = venv.recv()
        assert env_ids.tolist() == [0, 2]
        assert_same(infos[1]["action"], per_env[0])  # env 2 got actions[0]
        assert_same(infos[0]["action"], per_env[1])


@pytest.mark.parametrize("variant", ["dummy", "subproc", "subproc-pickled"])
def test_send_malformed_box_actions_never_broadcast(build, variant):
    """send() with Box (2, 3) actions given as a (2, 3) array: env_ids[k] gets actions[k] (as DummyVecEnv) or a
    ValueError is raised; never one row broadcast over the whole (2, 3) action."""
    fns = [functools.partial(SampleEnv, kind="box32", offset=i) for i in range(2)]
    kwargs = {} if variant == "dummy" else {"n_workers": 2, "shared_memory": variant == "subproc"}
    venv = build("dummy" if variant == "dummy" else "subproc", fns, **kwargs)
    venv.async_reset()
    venv.recv()
    actions = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype=np.float32)
    try:
        venv.send(actions, [0, 1])
    except ValueError:
        return
    infos = venv.recv()[3]
    for k in range(2):
        assert_same(infos[k]["action"], actions[k])


# --- errors --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", BACKENDS)
def test_recv_with_nothing_in_flight(build, variant):
    venv = build(variant, env_fns(2))
    with pytest.raises(vecenv.NoAsyncCallError):
        venv.recv()
    venv.async_reset()
    venv.recv()
    venv.send(np.array([1]), [1])
    venv.recv()
    with pytest.raises(vecenv.NoAsyncCallError):
        venv.recv()


@pytest.mark.parametrize(
    ("variant", "kwargs"), [("dummy", {}), ("subproc", {"n_workers": 3}), ("subproc", {"n_workers": 2})]
)
def test_send_to_env_in_flight(build, variant, kwargs):
    """Sending to an env in flight, or to another env of a busy worker, raises AlreadyPendingCallError and sends
    nothing; envs of idle workers can be sent."""
    fns = env_fns(3)
    venv = build(variant, fns, **kwargs)
    hand = Hand(fns)
    venv.seed(1)
    venv.async_reset()
    with pytest.raises(vecenv.AlreadyPendingCallError):
        venv.send(np.array([0]), [0])  # its reset result was not received
    check_recv(venv.recv(), {i: hand.reset(i, seed=1 + i) for i in range(3)})
    venv.send(np.array([1]), [0])
    with pytest.raises(vecenv.AlreadyPendingCallError):
        venv.send(np.array([1]), [0])
    with pytest.raises(vecenv.AlreadyPendingCallError):
        venv.send(np.array([2, 1]), [2, 0])
    expected = {0: hand.step(0, 1)}
    n_workers = kwargs.get("n_workers", 1)
    if n_workers == 1:  # dummy: one group
        with pytest.raises(vecenv.AlreadyPendingCallError):
            venv.send(np.array([2]), [2])
    else:
        busy = [1] if n_workers == 2 else []  # n_workers=2: groups [0, 1] and [2]
        for env_id in busy:
            with pytest.raises(vecenv.AlreadyPendingCallError):
                venv.send(np.array([2]), [env_id])
        venv.send(np.array([2]), [2])
        expected[2] = hand.step(2, 2)
    check_recv(venv.recv(), expected)  # env 0 was stepped exactly once


def test_send_before_result_received(build, gate):
    """With batch_size=2, envs whose reset result recv() has not returned cannot be sent, even once they are done."""
    fns = env_fns(4, gate_path=gate.path, slow=(1, 3))
    venv = build("subproc", fns, n_workers=4, batch_size=2)
    hand = Hand(env_fns(4))
    venv.seed(2)
    venv.async_reset()
    check_recv(venv.recv(), {i: hand.reset(i, seed=2 + i) for i in (0, 2)})
    for actions, ids in (([1], [1]), ([1, 1], [0, 1]), ([2], [3])):
        with pytest.raises(vecenv.AlreadyPendingCallError):
            venv.send(np.array(actions), ids)
    gate.open(1)
    with pytest.raises(vecenv.AlreadyPendingCallError):
        venv.send(np.array([1]), [1])
    check_recv(venv.recv(), {i: hand.reset(i, seed=2 + i) for i in (1, 3)})
    venv.send(np.array([1, 2, 0, 1]), [0, 1, 2, 3])
    expected = {i: hand.step(i, a) for i, a in enumerate([1, 2, 0, 1])}  # env 0 stepped once
    check_recv(venv.recv(), {i: expected[i] for i in (0, 2)})
    gate.open(2)
    check_recv(venv.recv(), {i: expected[i] for i in (1, 3)})


@pytest.mark.parametrize("variant", BACKENDS)
def test_send_validation(build, variant):
    """Duplicate env_ids or a number of actions that differs from the number of ids: ValueError, nothing sent."""
    fns = env_fns(3)
    venv = build(variant, fns)
    hand = Hand(fns)
    venv.seed(3)
    venv.async_reset()
    check_recv(venv.recv(), {i: hand.reset(i, seed=3 + i) for i in range(3)})
    with pytest.raises(ValueError, match="repeat"):
        venv.send(np.array([0, 1]), [1, 1])
    with pytest.raises(ValueError, match="repeat"):
        venv.send(np.array([0, 1]), [2, -1])  # -1 is env 2
    for actions, ids in (([0], [0, 1]), ([0, 1, 2], [0, 1]), ([], [2])):
        with pytest.raises(ValueError, match="action"):
            venv.send(np.array(actions, dtype=np.int64), ids)
    with pytest.raises(vecenv.NoAsyncCallError):
        venv.recv()  # nothing was sent
    venv.send(np.array([2, 1]), [1, 0])
    check_recv(venv.recv(), {1: hand.step(1, 2), 0: hand.step(0, 1)})  # each stepped exactly once


@pytest.mark.parametrize("variant", BACKENDS)
def test_full_batch_calls_refused_during_partial(build, variant):
    """step_async / step / calls on sub-envs while partial batches are in flight: AlreadyPendingCallError;
    async_reset / send while a full step is pending: AlreadyPendingCallError, and recv: NoAsyncCallError."""
    fns = env_fns(2)
    venv = build(variant, fns)
    hand = Hand(fns)
    venv.seed(4)
    venv.async_reset()
    with pytest.raises(vecenv.AlreadyPendingCallError):
        venv.step_async(np.array([0, 0]))
    with pytest.raises(vecenv.AlreadyPendingCallError):
        venv.step(np.array([0, 0]))
    with pytest.raises(vecenv.AlreadyPendingCallError):
        venv.get_attr("t")
    with pytest.raises(vecenv.NoAsyncCallError):
        venv.step_wait()
    check_recv(venv.recv(), {i: hand.reset(i, seed=4 + i) for i in range(2)})
    venv.step_async(np.array([1, 2]))
    with pytest.raises(vecenv.AlreadyPendingCallError):
        venv.async_reset()
    with pytest.raises(vecenv.AlreadyPendingCallError):
        venv.send(np.array([0]), [0])
    with pytest.raises(vecenv.NoAsyncCallError):
        venv.recv()
    obs, _, _, infos = venv.step_wait()
    expected = [hand.step(0, 1), hand.step(1, 2)]
    assert obs.tobytes() == np.stack([e[0] for e in expected]).tobytes()
    assert_same(infos, [e[3] for e in expected])


@pytest.mark.parametrize(("variant", "kwargs"), [("dummy", {}), ("subproc", {"n_workers": 3})])
@pytest.mark.parametrize("when", ["reset-in-flight", "steps-in-flight"])
def test_reset_during_partial_drains(build, variant, kwargs, when):
    """reset() with partial batches in flight collects and drops them, then resets every env normally."""
    fns = env_fns(3)
    venv = build(variant, fns, **kwargs)
    hand = Hand(fns)
    venv.async_reset()
    for i in range(3):
        hand.reset(i)
    if when == "steps-in-flight":
        venv.recv()
        venv.send(np.array([2, 1]), [1, 0])
        hand.step(1, 2)
        hand.step(0, 1)
        if variant == "subproc":
            venv.send(np.array([0]), [2])
            hand.step(2, 0)
    venv.seed(50)
    obs = venv.reset()
    firsts = [hand.reset(i, seed=50 + i) for i in range(3)]
    assert obs.tobytes() == np.stack([f[0] for f in firsts]).tobytes()
    assert_same(venv.reset_infos, hand.reset_infos)
    with pytest.raises(vecenv.NoAsyncCallError):
        venv.recv()
    obs, _, _, infos = venv.step(np.array([1, 1, 1]))
    expected = [hand.step(i, 1) for i in range(3)]
    assert obs.tobytes() == np.stack([e[0] for e in expected]).tobytes()
    assert_same(infos, [e[3] for e in expected])
    venv.async_reset()  # and the partial API works again
    check_recv(venv.recv(), {i: hand.reset(i) for i in range(3)})


@pytest.mark.parametrize("batch_size", [0, 4, -1, True, 1.5, "2"])
def test_batch_size_invalid(batch_size):
    before = {p.pid for p in mp.active_children()}
    with pytest.raises(ValueError, match="batch_size"):
        vecenv.SubprocVecEnv(env_fns(3), batch_size=batch_size)
    assert [p for p in mp.active_children() if p.pid not in before and p.name.startswith("vecenv")] == []


@pytest.mark.parametrize(("batch_size", "expected"), [(None, 3), (1, 1), (3, 3)])
def test_batch_size_valid(build, batch_size, expected):
    assert build("subproc", env_fns(3), n_workers=1, batch_size=batch_size).batch_size == expected
    assert build("dummy", env_fns(3)).batch_size == 3


def notes_of(exc: BaseException) -> list[str]:
    return list(getattr(exc, "__notes__", []))


@pytest.mark.parametrize(
    ("variant", "kwargs"), [("dummy", {}), ("subproc", {"n_workers": 3}), ("subproc", {"n_workers": 1})]
)
def test_env_exception_during_partial_step(build, variant, kwargs):
    """The env's own exception type reaches recv()'s caller with a note naming env 1 and the step; reset() recovers."""
    fns = [functools.partial(FaultEnv, offset=i, fail_in="step" if i == 1 else None, after=2) for i in range(3)]
    venv = build(variant, fns, **kwargs)
    venv.async_reset()
    venv.recv()
    venv.send(np.zeros(3, dtype=np.int64), [0, 1, 2])
    venv.recv()
    venv.send(np.zeros(3, dtype=np.int64), [2, 1, 0])
    with pytest.raises(EnvFaultError, match="custom fault in step") as info:
        venv.recv()
    assert any("raised by env 1 during step" in note for note in notes_of(info.value)), notes_of(info.value)
    if variant == "subproc":
        assert isinstance(info.value.__cause__, RemoteTraceback)
        assert any("worker process" in note for note in notes_of(info.value))
    obs = venv.reset()
    assert obs[:, 0].tolist() == [0, 1, 2] and obs[:, 2].tolist() == [0, 0, 0]
    venv.send(np.array([1, 1]), [0, 2])
    obs, _, _, _, env_ids = venv.recv()
    assert env_ids.tolist() == [0, 2] and obs[:, 2].tolist() == [1, 1]


@pytest.mark.parametrize(("variant", "kwargs"), [("dummy", {}), ("subproc", {"n_workers": 1})])
def test_state_after_partial_error_with_nothing_in_flight(build, variant, kwargs):
    """When the failing recv() leaves nothing in flight (one worker), the next recv() returns what the envs that
    stepped before the error returned; then the vec env is idle again: recv() raises NoAsyncCallError (not an
    empty batch) and calls on sub-envs work."""
    fns = [functools.partial(FaultEnv, offset=i, fail_in="step" if i == 1 else None, after=1) for i in range(2)]
    venv = build(variant, fns, **kwargs)
    venv.async_reset()
    venv.recv()
    venv.send(np.zeros(2, dtype=np.int64), [0, 1])
    with pytest.raises(EnvFaultError):
        venv.recv()
    obs, _, _, _, env_ids = venv.recv()  # env 0 stepped before env 1 raised: its result comes now
    assert env_ids.tolist() == [0] and obs[0, 2] == 1
    with pytest.raises(vecenv.NoAsyncCallError):
        venv.recv()
    assert venv.get_attr("offset") == [0, 1]


@pytest.mark.parametrize("method", ["async_reset", "send", "recv"])
def test_wrappers_refuse_partial_batches(method):
    """A wrapper never lets partial batches bypass it silently: NotImplementedError naming the wrapper."""
    import gymnasium as gym

    venv = vecenv.VecNormalize(vecenv.DummyVecEnv([lambda: gym.make("CartPole-v1")]))
    args = {"async_reset": (), "send": (np.zeros(1, dtype=np.int64), [0]), "recv": ()}[method]
    with pytest.raises(NotImplementedError, match=rf"VecNormalize does not support partial batches \({method}\)"):
        getattr(venv, method)(*args)
    venv.close()


def test_batch_size_attribute_is_validated():
    """Setting ``batch_size`` outside 1..num_envs is a ValueError (as in the constructor)."""
    import gymnasium as gym

    venv = vecenv.DummyVecEnv([lambda: gym.make("CartPole-v1") for _ in range(2)])
    for bad in (0, 3, 1.5, True):
        with pytest.raises(ValueError, match="batch_size"):
            venv.batch_size = bad
    venv.batch_size = 1
    assert venv.batch_size == 1
    venv.close()
