"""Shared memory: observations and actions of every space type through every start method, the layout of
the shared block, custom spaces falling back to pickling, and resource hygiene (file descriptors, /dev/shm).

Expectations come from the same envs stepped by hand with the same seeds and actions, never from vecenv.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import gc
import itertools
import multiprocessing as mp
import os
from typing import Any

import numpy as np
import pytest
from gymnasium import spaces

import vecenv
from tests.envs import CompositeObsEnv, CounterEnv, LooseObsEnv
from tests.envs_perf import PERF_SPACES, CustomSpaceEnv, SampleEnv, assert_same, custom_obs, leaf_signature
from vecenv.actions import write_actions
from vecenv.shared_memory import SharedBatch
from vecenv.spaces import batch_take, buffer_leaves, create_batch_buffer, make_row_reader, make_row_writer

START_METHODS = mp.get_all_start_methods()
KINDS = list(PERF_SPACES)
#: the dtype each action leaf is sent in (differs from the space's dtype where a lossless cast exists)
WIRE_DTYPES = {
    np.dtype(np.float32): np.float64,
    np.dtype(np.float64): np.float64,
    np.dtype(np.uint8): np.int64,
    np.dtype(np.int64): np.int32,
    np.dtype(np.int8): np.int64,
}


def sample_fns(kind: str, n: int, **kwargs: Any) -> list:
    return [functools.partial(SampleEnv, kind=kind, offset=i, **kwargs) for i in range(n)]


def assert_batch(actual: Any, singles: list[Any], space: spaces.Space) -> None:
    """``actual`` is the batch of ``singles``: space structure and key order, shape (n, *shape), dtype, bytes."""
    n = len(singles)
    if isinstance(space, spaces.Dict):
        assert isinstance(actual, dict)
        assert list(actual.keys()) == list(space.spaces.keys())
        for key, sub in space.spaces.items():
            assert_batch(actual[key], [s[key] for s in singles], sub)
    elif isinstance(space, spaces.Tuple):
        assert isinstance(actual, tuple) and len(actual) == len(space.spaces)
        for k, sub in enumerate(space.spaces):
            assert_batch(actual[k], [s[k] for s in singles], sub)
    else:
        expected = np.stack([np.asarray(s) for s in singles])  # no cast: the envs' own dtype
        assert isinstance(actual, np.ndarray)
        assert actual.shape == (n, *space.shape)
        assert actual.dtype == space.dtype == expected.dtype
        assert actual.tobytes() == expected.tobytes(), (actual, expected)


def batch_actions(space: spaces.Space, per_env: list[Any]) -> Any:
    """Batch per-env actions (dict / tuple of batches for Dict / Tuple), each leaf in its WIRE_DTYPES dtype."""
    if isinstance(space, spaces.Dict):
        return {key: batch_actions(sub, [a[key] for a in per_env]) for key, sub in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(batch_actions(sub, [a[k] for a in per_env]) for k, sub in enumerate(space.spaces))
    return np.stack([np.asarray(a) for a in per_env]).astype(WIRE_DTYPES[np.dtype(space.dtype)])


def row_of(batch: Any, i: int) -> Any:
    """Env ``i``'s action in a batch (dict / tuple of batches for Dict / Tuple spaces)."""
    if isinstance(batch, dict):
        return {key: row_of(sub, i) for key, sub in batch.items()}
    if isinstance(batch, tuple):
        return tuple(row_of(sub, i) for sub in batch)
    return batch[i]


def step_by_hand(env: Any, action: Any) -> tuple[Any, float, bool, dict]:
    """SB3's rule on one env: info gets TimeLimit.truncated, and terminal_observation + reset on episode end."""
    obs, reward, terminated, truncated, info = env.step(action)
    info = dict(info)
    info["TimeLimit.truncated"] = bool(truncated and not terminated)
    if terminated or truncated:
        info["terminal_observation"] = obs
        obs, _ = env.reset()
    return obs, reward, bool(terminated or truncated), info


def build(variant: str, fns: list) -> vecenv.VecEnv:
    if variant == "dummy":
        return vecenv.DummyVecEnv(fns)
    return vecenv.SubprocVecEnv(fns, n_workers=2, shared_memory=variant == "subproc")


VARIANTS = ["dummy", "subproc", "subproc-pickled"]


# --- 1. round trips through shared memory ------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("start_method", START_METHODS)
def test_round_trip_every_space(start_method, kind):
    """Obs written by the workers equal the same envs stepped by hand (values, dtypes, shapes, Dict key order);
    actions sent as batches in another dtype than the space's arrive at each env as its own row of the batch, in
    the batch's dtype (as SB3 and Gymnasium deliver them: such batches travel pickled, not through shared memory).

    3 envs over 2 workers, so rows are written by two processes at different offsets of the shared block.
    """
    venv = vecenv.SubprocVecEnv(sample_fns(kind, 3, episode_len=2), start_method=start_method, n_workers=2)
    try:
        assert len(venv.processes) == 2
        hand = [SampleEnv(kind=kind, offset=i, episode_len=2) for i in range(3)]
        space = hand[0].observation_space
        assert venv.observation_space == space and venv.action_space == hand[0].action_space
        venv.seed(1000)
        obs = venv.reset()
        firsts = [env.reset(seed=1000 + i) for i, env in enumerate(hand)]
        assert_batch(obs, [o for o, _ in firsts], space)
        assert_same(venv.reset_infos, [info for _, info in firsts])
        action_space = PERF_SPACES[kind]()
        action_space.seed(7)
        n_done = 0
        for _ in range(5):
            batch = batch_actions(action_space, [action_space.sample() for _ in range(3)])
            per_env = [row_of(batch, i) for i in range(3)]
            obs, rewards, dones, infos = venv.step(batch)
            expected = [step_by_hand(env, action) for env, action in zip(hand, per_env, strict=True)]
            assert_batch(obs, [e[0] for e in expected], space)
            assert rewards.dtype == np.float32
            assert rewards.tobytes() == np.array([e[1] for e in expected], dtype=np.float32).tobytes()
            assert dones.tolist() == [e[2] for e in expected]
            # infos echo the action each env received: its own row of the batch, in the batch's dtype(s)
            assert_same(infos, [e[3] for e in expected])
            for info, action in zip(infos, per_env, strict=True):
                assert info["signature"] == leaf_signature(action)
            n_done += int(dones.sum())
        assert n_done == 6  # two episode ends per env: terminal_observation and autoreset were compared
    finally:
        venv.close()


@pytest.mark.parametrize("kind", ["dict", "tuple", "multidiscrete"])
def test_actions_as_list_of_per_env_actions(make_venv, kind):
    """The list layout (one action per env) reaches each env unchanged through the shared action buffer."""
    venv = make_venv("subproc", sample_fns(kind, 2))
    assert venv.shared_memory
    hand = [SampleEnv(kind=kind, offset=i) for i in range(2)]
    venv.seed(0)
    venv.reset()
    for i, env in enumerate(hand):
        env.reset(seed=i)
    space = PERF_SPACES[kind]()
    space.seed(3)
    per_env = [space.sample() for _ in range(2)]
    _, _, _, infos = venv.step(per_env)
    assert_same(infos, [step_by_hand(env, a)[3] for env, a in zip(hand, per_env, strict=True)])


@pytest.mark.parametrize("variant", ["dummy", "subproc", "subproc-pickled"])
def test_action_dtype_per_backend(variant):
    """Every backend passes each env ``actions[i]`` in the caller's dtype, as SB3 does: Box float32 given float64
    0.1 gets float64 0.1, Discrete (int64) given int32 gets int32. A batch in the space's dtype takes shared
    memory and arrives with the same values and dtype.
    """
    box_venv = build(variant, sample_fns("box32", 2))
    discrete_venv = build(variant, sample_fns("discrete", 2))
    try:
        box_actions = np.full((2, 2, 3), 0.1, dtype=np.float64)
        box_actions[1] = -4.25
        discrete_actions = np.array([-2, 2], dtype=np.int32)
        box_venv.reset()
        discrete_venv.reset()
        for box_batch, discrete_batch in (
            (box_actions, discrete_actions),
            (box_actions.astype(np.float32), discrete_actions.astype(np.int64)),
        ):
            _, _, _, box_infos = box_venv.step(box_batch)
            _, _, _, discrete_infos = discrete_venv.step(discrete_batch)
            for i in range(2):
                assert_same(box_infos[i]["action"], box_batch[i])
                assert_same(discrete_infos[i]["action"], discrete_batch[i])
    finally:
        box_venv.close()
        discrete_venv.close()


@pytest.mark.parametrize("variant", VARIANTS)
def test_malformed_box_actions_never_broadcast(variant):
    """Box (2, 3) actions given as a (num_envs=2, 3) array (a wrong shape whose length equals num_envs): env i gets
    ``actions[i]`` (DummyVecEnv / SB3 semantics) or a ValueError is raised; never the whole array broadcast to each env.
    """
    venv = build(variant, sample_fns("box32", 2))
    try:
        venv.reset()
        actions = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype=np.float32)
        try:
            _, _, _, infos = venv.step(actions)
        except ValueError:
            return
        for i in range(2):
            assert_same(infos[i]["action"], actions[i])
    finally:
        venv.close()


# --- layout of the shared block ----------------------------------------------------------------------------


def test_shared_batch_layout_and_two_mappings():
    """Every array is 64-byte aligned, none overlaps another, and a second mapping of the fd sees the same bytes."""
    obs_space, act_space = PERF_SPACES["dict"](), PERF_SPACES["tuple"]()
    shared, fd = SharedBatch.create(obs_space, act_space, 3)
    try:
        other = SharedBatch.attach(obs_space, act_space, 3, fd, shared.size)
    finally:
        os.close(fd)
    arrays = [*buffer_leaves(shared.obs), shared.rewards, shared.dones, *buffer_leaves(shared.actions)]
    base = np.frombuffer(shared.mapping, dtype=np.uint8).ctypes.data
    expected_shapes = [(3, *s.shape) for s in obs_space.spaces.values()]
    expected_shapes += [(3,), (3,)] + [(3, *s.shape) for s in act_space.spaces]
    assert [a.shape for a in arrays] == expected_shapes
    spans = []
    for array in arrays:
        offset = array.ctypes.data - base
        assert offset % 64 == 0
        assert not array.any()  # zeroed
        spans.append((offset, offset + array.nbytes))
    spans.sort()
    assert all(end <= next_start for (_, end), (next_start, _) in itertools.pairwise(spans))
    assert spans[-1][1] <= shared.size
    shared.obs["pos"][1] = 2.5
    shared.actions[3][0] = [[1, 0, 1], [0, 1, 1]]
    shared.rewards[2] = -1.5
    np.testing.assert_array_equal(other.obs["pos"][1], np.full((2, 3), 2.5, np.float32))
    np.testing.assert_array_equal(other.actions[3][0], [[1, 0, 1], [0, 1, 1]])
    assert other.rewards[2] == np.float32(-1.5)


@pytest.mark.parametrize("kind", [*KINDS, "text", "bag", "dict_text"])
def test_which_observations_live_in_shared_memory(kind):
    """Every array space (and Dict / Tuple of them) lives in shared memory; a space with any leaf of no fixed-size
    dtype (Text, a shapeless custom space) does not, as a whole."""
    if kind in PERF_SPACES:
        space, expected = PERF_SPACES[kind](), True
    else:
        space, expected = CustomSpaceEnv(obs_kind=kind).observation_space, False
    assert SharedBatch.supports(space) is expected


def test_create_batch_buffer_allocator_and_fallbacks():
    """The allocator is called once per leaf in space order; unknown spaces with shape/dtype batch like a Box,
    others become object arrays (n,); write_actions casts to the buffer's dtype and rejects wrong shapes."""
    calls = []

    def alloc(shape, dtype):
        calls.append((shape, dtype))
        return np.zeros(shape, dtype)

    buffer = create_batch_buffer(PERF_SPACES["tuple"](), 4, alloc)
    assert calls == [((4, *s.shape), np.dtype(s.dtype)) for s in PERF_SPACES["tuple"]().spaces]
    assert len(buffer) == 5
    text = create_batch_buffer(spaces.Text(5), 3, alloc)
    assert text.dtype == object and text.shape == (3,)
    assert len(calls) == 5  # the object array does not come from the allocator

    class Shaped(spaces.Space):
        def __init__(self):
            super().__init__(shape=(2,), dtype=np.int16)

    shaped = create_batch_buffer(Shaped(), 3)
    assert shaped.shape == (3, 2) and shaped.dtype == np.int16

    discrete = create_batch_buffer(spaces.Discrete(3), 2)
    write_actions(spaces.Discrete(3), discrete, np.array([1.9, 2.0]))
    assert discrete.dtype == np.int64 and discrete.tolist() == [1, 2]
    box = create_batch_buffer(PERF_SPACES["box32"](), 2)
    with pytest.raises(ValueError, match="shape"):
        write_actions(PERF_SPACES["box32"](), box, np.zeros((2, 4)))

    batch = {"a": np.arange(6).reshape(3, 2), "b": np.array([7, 8, 9])}
    taken = batch_take(batch, np.array([2, 0]))
    np.testing.assert_array_equal(taken["a"], [[4, 5], [0, 1]])
    np.testing.assert_array_equal(taken["b"], [9, 7])
    taken["b"][0] = -1
    assert batch["b"][2] == 9  # a copy


# --- 5. custom spaces fall back to pickling ----------------------------------------------------------------


@pytest.mark.parametrize("obs_kind", ["text", "bag", "dict_text"])
@pytest.mark.parametrize("variant", VARIANTS)
def test_custom_observation_space(variant, obs_kind):
    """Text / shapeless custom obs: an object array (num_envs,) of the per-env observations (a Dict with a Text
    leaf: that leaf only); terminal_observation is the env's last observation; actions still use shared memory."""
    fns = [functools.partial(CustomSpaceEnv, obs_kind=obs_kind, action_kind="discrete", offset=i) for i in range(3)]
    venv = build(variant, fns)
    try:
        hand = [fn() for fn in fns]
        obs = venv.reset()
        expected = [env.reset()[0] for env in hand]

        def check(batch: Any, singles: list[Any]) -> None:
            if obs_kind == "dict_text":
                assert list(batch.keys()) == ["name", "x"]
                assert batch["name"].dtype == object and batch["name"].shape == (3,)
                assert batch["name"].tolist() == [s["name"] for s in singles]
                assert batch["x"].dtype == np.int64 and batch["x"].tolist() == [s["x"] for s in singles]
            else:
                assert isinstance(batch, np.ndarray) and batch.dtype == object and batch.shape == (3,)
                assert_same(list(batch), singles)

        check(obs, expected)
        for step in range(4):
            actions = np.array([step % 4, (step + 1) % 4, 3])
            obs, rewards, dones, infos = venv.step(actions)
            results = [step_by_hand(env, a) for env, a in zip(hand, actions, strict=True)]
            check(obs, [r[0] for r in results])
            assert rewards.tolist() == [r[1] for r in results]
            assert dones.tolist() == [r[2] for r in results]
            assert_same(infos, [r[3] for r in results])
        assert_same(infos[0]["terminal_observation"], custom_obs(obs_kind, 0, 2, np.int64(3)))
    finally:
        venv.close()


@pytest.mark.parametrize("action_kind", ["text", "bag"])
@pytest.mark.parametrize("obs_kind", ["box", "text"])
@pytest.mark.parametrize("variant", VARIANTS)
def test_custom_action_space(variant, obs_kind, action_kind):
    """Text / custom actions passed as a list travel pickled and reach env i unchanged (Box obs stay shared)."""
    fns = [functools.partial(CustomSpaceEnv, obs_kind=obs_kind, action_kind=action_kind, offset=i) for i in range(3)]
    venv = build(variant, fns)
    try:
        hand = [fn() for fn in fns]
        venv.reset()
        for env in hand:
            env.reset()
        for step in range(3):
            if action_kind == "text":
                actions = [f"go{step}", "", f"x{step}y"]
            else:
                actions = [("a", step), ("b", 10 + step), ("c", -step)]
            obs, _, dones, infos = venv.step(actions)
            results = [step_by_hand(env, a) for env, a in zip(hand, actions, strict=True)]
            if obs_kind == "box":
                assert obs.dtype == np.float32
                np.testing.assert_array_equal(obs, np.stack([r[0] for r in results]))
            else:
                assert obs.dtype == object and list(obs) == [r[0] for r in results]
            assert_same(infos, [r[3] for r in results])
            assert [info["action"] for info in infos] == actions
            assert dones.tolist() == [r[2] for r in results]
    finally:
        venv.close()


@pytest.mark.parametrize("variant", ["dummy", "subproc"])
def test_nested_space_with_text_still_rejected(variant):
    """A Dict inside a Dict (even holding a Text) raises SB3's NotImplementedError; no worker is left behind."""
    before = {p.pid for p in mp.active_children()}
    fns = [functools.partial(CustomSpaceEnv, obs_kind="nested_text", offset=i) for i in range(2)]
    with pytest.raises(NotImplementedError, match=r"Nested observation spaces are not supported"):
        build(variant, fns)
    assert [p for p in mp.active_children() if p.pid not in before and p.name.startswith("vecenv")] == []


# --- 6. resource hygiene -----------------------------------------------------------------------------------


def open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def fd_targets(fds: set[str]) -> dict[str, str]:
    targets = {}
    for fd in fds:
        with contextlib.suppress(OSError):
            targets[fd] = os.readlink(f"/proc/self/fd/{fd}")
    return targets


def describe_fds(fds: set[str]) -> list[str]:
    out = []
    for fd in sorted(fds):
        try:
            out.append(f"{fd} -> {os.readlink(f'/proc/self/fd/{fd}')}")
        except OSError:
            out.append(f"{fd} -> ?")
    return out


def one_cycle(keep: list | None = None, **kwargs: Any) -> None:
    venv = vecenv.SubprocVecEnv([functools.partial(CounterEnv, offset=i) for i in range(2)], **kwargs)
    venv.reset()
    venv.step(np.array([1, 2]))
    venv.close()
    if keep is not None:
        keep.append(venv)


def test_no_fd_leak_over_create_close_cycles():
    """10 create / step / close cycles leave exactly as many open fds as before (no slack).

    One warm-up cycle first: the first forkserver use starts the server process, whose pipe stays open
    for the life of the interpreter (multiprocessing's, not vecenv's).
    """
    one_cycle()
    gc.collect()
    before = open_fds()
    for _ in range(10):
        one_cycle()
    after = open_fds()
    assert after == before, describe_fds(after - before)


def vecenv_mappings() -> int:
    return mapped_paths("self").count("memfd:vecenv-batch")


def memfds() -> list[str]:
    """This process's open file descriptors of vecenv's shared blocks."""
    return [fd for fd, target in fd_targets(open_fds()).items() if "vecenv-batch" in target]


@pytest.mark.parametrize("parent_envs", [0, 1])
def test_close_releases_shared_block_while_referenced(parent_envs):
    """close() itself releases what vecenv owns, even while the closed vec envs are still referenced (kept in a
    list, in a traceback, by a logger...): the worker pipes and the shared block (its fd and its mapping).

    Slack, justified: each ``venv.processes[k]`` stays inspectable after close (``is_alive()`` / ``exitcode``,
    as SB3; see test_errors.test_processes_report_exit_after_close), and a multiprocessing Process keeps
    its own pipes (sentinel) until it is closed or collected: at most 2 pipes per worker process.
    """
    one_cycle()
    gc.collect()
    before, maps_before = open_fds(), vecenv_mappings()
    keep: list = []
    for _ in range(10):
        one_cycle(keep, parent_envs=parent_envs)  # (with parent_envs, this process's envs write into the block)
    new = {
        fd: os.readlink(f"/proc/self/fd/{fd}") for fd in open_fds() - before if os.path.exists(f"/proc/self/fd/{fd}")
    }
    assert all(venv.closed for venv in keep)
    assert all(conn.closed for venv in keep for conn in venv.remotes)
    assert [fd for fd, target in new.items() if "memfd" in target] == []
    assert vecenv_mappings() == maps_before
    assert all(target.startswith("pipe:") for target in new.values()), new
    assert len(new) <= 2 * sum(len(venv.processes) for venv in keep)


def dev_shm() -> set[str]:
    """Entries of /dev/shm that this test process or its workers could have made (other processes on a
    shared machine come and go, so only names carrying vecenv's or our pid are considered)."""
    if not os.path.isdir("/dev/shm"):
        return set()
    return {name for name in os.listdir("/dev/shm") if "vecenv" in name or str(os.getpid()) in name}


def mapped_paths(pid: int | str) -> str:
    with open(f"/proc/{pid}/maps") as f:
        return f.read()


def shm_mappings(pid: int | str) -> set[str]:
    """Paths under /dev/shm that process ``pid`` maps."""
    return {token for line in mapped_paths(pid).splitlines() for token in line.split() if token.startswith("/dev/shm/")}


@pytest.mark.parametrize("start_method", START_METHODS)
def test_shared_block_is_anonymous(start_method):
    """The block is a memfd mapped by the parent and by every worker; /dev/shm never changes."""
    before = dev_shm()
    venv = vecenv.SubprocVecEnv(sample_fns("image", 3), start_method=start_method, n_workers=2)
    try:
        venv.reset()
        venv.step(np.zeros((3, 6, 5, 3), dtype=np.uint8))
        assert dev_shm() == before
        assert "memfd:vecenv-batch" in mapped_paths("self")
        # with fork, a worker inherits the parent's mappings (multiprocessing semaphores, or heap arenas of
        # other libraries' shared memory, e.g. Gymnasium's AsyncVectorEnv used earlier in this process): not ours
        inherited = shm_mappings("self")
        for process in venv.processes:
            maps = mapped_paths(process.pid)
            assert "memfd:vecenv-batch" in maps
            assert not {path for path in shm_mappings(process.pid) if not path.startswith("/dev/shm/sem.")} - inherited
    finally:
        venv.close()
    assert dev_shm() == before


@pytest.mark.parametrize("refusal", [errno.ENOSYS, errno.EPERM])
def test_shared_block_where_memfd_create_is_refused(monkeypatch, refusal):
    """A sandbox that refuses ``memfd_create`` (seccomp, some container runtimes): the block is a temporary file
    unlinked at once, the batches are those of envs stepped in the calling process, and nothing is left in
    /dev/shm (as where the call does not exist)."""

    def refused(*args: Any) -> int:
        raise OSError(refusal, os.strerror(refusal))

    monkeypatch.setattr(os, "memfd_create", refused)
    before = dev_shm()
    fns = sample_fns("image", 3)
    venv, reference = vecenv.SubprocVecEnv(fns, start_method="fork", n_workers=2), vecenv.DummyVecEnv(fns)
    try:
        assert "memfd:vecenv-batch" not in mapped_paths("self")
        venv.seed(1000)
        reference.seed(1000)
        assert_same(venv.reset(), reference.reset())
        actions = np.zeros((3, 6, 5, 3), dtype=np.uint8)
        for _ in range(3):
            assert_same(venv.step(actions)[:3], reference.step(actions)[:3])
    finally:
        venv.close()
        reference.close()
    assert dev_shm() == before


def test_a_shared_block_that_does_not_fit_in_memory_says_its_size_and_what_needs_less(monkeypatch):
    """Mapping the block fails for lack of memory (a container's or ``ulimit -v``'s limit): a ``MemoryError`` naming
    the block's size (as NumPy's for an array too large), with a note on what it holds and what needs less; no
    descriptor or worker process is left."""
    import mmap

    from vecenv import shared_memory

    def no_memory(*args: Any) -> Any:
        raise OSError(errno.ENOMEM, os.strerror(errno.ENOMEM))

    monkeypatch.setattr(shared_memory.mmap, "mmap", no_memory)
    gc.collect()
    before = {p.pid for p in mp.active_children()}
    fds = len(os.listdir("/proc/self/fd"))
    with pytest.raises(MemoryError, match=r"Unable to allocate \d+\.\d MiB of shared memory") as info:
        vecenv.SubprocVecEnv(sample_fns("image", 3), n_workers=2, obs_slots=2, start_method="fork")
    note = " ".join(getattr(info.value, "__notes__", []))
    assert "3 envs (2 observation buffer(s)" in note and "obs_slots=1 (about" in note and "shared_memory=False" in note
    monkeypatch.setattr(shared_memory.mmap, "mmap", mmap.mmap)
    del info  # (its traceback holds the constructor's frames)
    gc.collect()
    assert len(os.listdir("/proc/self/fd")) == fds
    assert [p for p in mp.active_children() if p.pid not in before and p.name.startswith("vecenv")] == []


def test_a_file_block_larger_than_its_file_system_is_refused_at_construction(monkeypatch):
    """Where ``memfd_create`` is refused, the block is a file in /dev/shm, whose space (Docker's 64 MiB) may be
    smaller than the block: its space is reserved at construction, so that it fails there (``MemoryError`` naming
    the size), not later with SIGBUS in whichever process first writes past it."""

    def refused(*args: Any) -> int:
        raise OSError(errno.ENOSYS, os.strerror(errno.ENOSYS))

    def full(fd: int, offset: int, length: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "memfd_create", refused)
    monkeypatch.setattr(os, "posix_fallocate", full)
    with pytest.raises(MemoryError, match=r"Unable to allocate \d+\.\d MiB of shared memory: No space left") as info:
        vecenv.SubprocVecEnv(sample_fns("image", 3), n_workers=2, start_method="fork")
    assert "/dev/shm" in " ".join(getattr(info.value, "__notes__", []))


def test_no_shared_block_without_shared_memory():
    """shared_memory=False: workers map no shared block (everything is pickled through the pipes)."""
    venv = vecenv.SubprocVecEnv(sample_fns("box32", 2), shared_memory=False)
    try:
        venv.reset()
        for process in venv.processes:
            assert "memfd:vecenv-batch" not in mapped_paths(process.pid)
    finally:
        venv.close()


def test_box_actions_are_never_reordered():
    """A Box(2, 3) action batch given as (n, 3, 2) has the right size but the wrong shape: ValueError, not a reshape."""
    from gymnasium import spaces

    from vecenv.actions import write_actions

    space = spaces.Box(-1, 1, (2, 3), np.float32)
    buffer = np.zeros((2, 2, 3), np.float32)
    with pytest.raises(ValueError, match=r"must have shape \(2, 2, 3\), got shape \(2, 3, 2\)"):
        write_actions(space, buffer, np.ones((2, 3, 2)))
    write_actions(space, buffer, np.ones((2, 2, 3, 1)))  # only length-1 axes may differ
    assert (buffer == 1).all()


@pytest.mark.parametrize("obs_type", ["exact", "float64", "list"])
@pytest.mark.parametrize("end", ["terminate", "truncate"])
def test_terminal_observation_as_the_env_returned_it(obs_type, end):
    """SubprocVecEnv carries terminal observations through shared memory when they match the space's array;
    either way ``infos[i]["terminal_observation"]`` is what the env returned (type, dtype, values), as with the
    env stepped by hand, and ``TimeLimit.truncated`` tells truncation from termination. 3 envs, 2 workers."""
    fns = [functools.partial(LooseObsEnv, obs_type=obs_type, offset=i, end=end) for i in range(3)]
    venv = vecenv.SubprocVecEnv(fns, n_workers=2)
    try:
        venv.reset()
        ends = _episode_ends(venv, [fn() for fn in fns])
        assert len(ends) == 3 + 2 + 1  # episode lengths 2, 3, 4 over 6 steps
        for info, obs in ends:
            assert info["TimeLimit.truncated"] is (end == "truncate")
            assert_same(info["terminal_observation"], obs)
    finally:
        venv.close()


def _episode_ends(venv: Any, hand: list[Any], steps: int = 6) -> list[tuple[dict[str, Any], Any]]:
    """Step ``venv`` and the same envs by hand (``hand``, reset here) ``steps`` times with action 0: each step's
    dones must agree, and the info of an env not done is ``{"TimeLimit.truncated": False}``. Returns ``(info, the
    env's last observation)`` of each episode end, whose info holds ``TimeLimit.truncated`` and
    ``terminal_observation`` only."""
    for env in hand:
        env.reset(seed=0)
    ends = []
    for _ in range(steps):
        _, _, dones, infos = venv.step(np.zeros(len(hand), dtype=np.int64))
        for env, done, info in zip(hand, dones, infos, strict=True):
            obs, _, terminated, truncated, _ = env.step(0)
            assert done == (terminated or truncated)
            if done:
                assert list(info) == ["TimeLimit.truncated", "terminal_observation"]
                ends.append((info, obs))
                env.reset()
            else:
                assert info == {"TimeLimit.truncated": False}
    return ends


#: CompositeObsEnv's observation types whose terminal observations a row holds exactly (through shared memory)
ROW_EXACT = {"dict": True, "tuple": True, "dict_own_order": False, "ordered_dict": False, "dict_float64": False}


@pytest.mark.parametrize("obs_type", list(ROW_EXACT))
def test_composite_terminal_observation_as_the_env_returned_it(obs_type, monkeypatch):
    """Dict and Tuple spaces: a terminal observation that a row of the space holds exactly (a ``dict`` in the
    space's key order, a ``tuple``, arrays of the leaves' dtypes) travels through shared memory, so the step's
    reply carries no pickled info; any other (the env's own key order, an ``OrderedDict``, another dtype) travels
    pickled. Either way ``infos[i]["terminal_observation"]`` is what the env returned: type, key order, dtypes
    and values, as with the env stepped by hand. 3 envs, 2 workers."""
    fns = [functools.partial(CompositeObsEnv, obs_type=obs_type, offset=i) for i in range(3)]
    venv = vecenv.SubprocVecEnv(fns, n_workers=2)
    try:
        venv.reset()
        decoded = []  # the steps' replies decoded with a pickled part, over every worker
        for worker in venv._workers:
            decode = worker._reply
            monkeypatch.setattr(worker, "_reply", lambda data, decode=decode: decoded.append(1) or decode(data))
        ends = _episode_ends(venv, [fn() for fn in fns])
        assert len(ends) == 3 + 2 + 1  # episode lengths 2, 3, 4 over 6 steps
        for info, obs in ends:
            assert info["TimeLimit.truncated"] is False
            assert_same(info["terminal_observation"], obs)
            assert type(info["terminal_observation"]) is type(obs)
            if isinstance(obs, dict):
                assert list(info["terminal_observation"]) == list(obs)  # the env's key order
        assert (not decoded) is ROW_EXACT[obs_type]
    finally:
        venv.close()


def test_row_writer_takes_only_what_a_row_gives_back():
    """make_row_writer stores a value only if make_row_reader gives it back as it was: same type, key order, dtypes
    and shapes; each read is a copy."""
    space = spaces.Dict({"b": spaces.Box(0, 1, (2,), np.float32), "a": spaces.Tuple((spaces.Discrete(3),))})
    assert list(space.spaces) == ["a", "b"]  # gymnasium sorts a Dict's keys
    buffer = create_batch_buffer(space, 2)
    write, read = make_row_writer(space), make_row_reader(buffer)
    value = {"a": (np.array(2, dtype=np.int64),), "b": np.array([0.5, 1.0], dtype=np.float32)}
    assert write(buffer, 1, value)
    row = read(1)
    assert_same(row, value)
    assert list(row) == ["a", "b"] and type(row["a"]) is tuple
    row["b"][0] = 7
    assert buffer["b"][1, 0] == 0.5  # a copy
    refused = [
        {"b": value["b"], "a": value["a"]},  # another key order
        {"a": value["a"]},  # a key missing
        {"a": (2,), "b": value["b"]},  # a Python int, not an array
        {"a": value["a"], "b": value["b"].astype(np.float64)},  # another dtype
        {"a": value["a"], "b": value["b"][:1]},  # another shape
        {"a": [value["a"][0]], "b": value["b"]},  # a list, not a tuple
    ]
    for other in refused:
        assert not write(buffer, 0, other), other


@pytest.mark.parametrize("obs_type", ["dict", "dict_own_order"])
def test_composite_terminal_observation_in_partial_batches(obs_type):
    """send / recv of some envs of a worker (4 envs in 2 workers): each ended env's ``terminal_observation`` is the
    env's last observation, type and key order included, whether it came through shared memory (``dict``) or
    pickled (the env's own key order); compared with the envs stepped by hand."""
    fns = [functools.partial(CompositeObsEnv, obs_type=obs_type, offset=i % 2) for i in range(4)]
    hand = [fn() for fn in fns]
    for env in hand:
        env.reset(seed=0)
    venv = vecenv.SubprocVecEnv(fns, n_workers=2)
    try:
        venv.reset()
        ends = 0
        for ids in ([0, 2], [1], [0, 3], [2], [0, 1, 2, 3], [1, 3], [0]) * 2:
            venv.send(np.zeros(len(ids), dtype=np.int64), ids)
            _, _, dones, infos, env_ids = venv.recv()
            assert env_ids.tolist() == sorted(ids)
            for i, done, info in zip(env_ids.tolist(), dones, infos, strict=True):
                obs, _, terminated, truncated, _ = hand[i].step(0)
                assert done == (terminated or truncated)
                if done:
                    ends += 1
                    assert_same(info["terminal_observation"], obs)
                    assert list(info["terminal_observation"]) == list(obs)
                    hand[i].reset()
                else:
                    assert "terminal_observation" not in info
        assert ends == 4 + 2 + 3 + 2  # env i steps 8, 6, 6, 6 times; episodes of 2 or 3 steps
    finally:
        venv.close()


def test_an_interrupted_block_creation_leaves_no_descriptor(monkeypatch):
    """A Ctrl-C (or an error) while the shared block is sized or mapped closes its descriptor: nothing owns it yet."""
    from vecenv import shared_memory

    before = memfds()
    real_mmap = shared_memory.mmap.mmap

    def interrupted(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    space = spaces.Box(0, 1, (3,), np.float32)
    monkeypatch.setattr(shared_memory.os, "ftruncate", interrupted)
    with pytest.raises(KeyboardInterrupt):
        SharedBatch.create(space, spaces.Discrete(2), 2)
    monkeypatch.undo()
    monkeypatch.setattr(shared_memory.mmap, "mmap", interrupted)
    with pytest.raises(KeyboardInterrupt):
        SharedBatch.create(space, spaces.Discrete(2), 2)
    monkeypatch.setattr(shared_memory.mmap, "mmap", real_mmap)
    assert memfds() == before


def test_shared_fd_is_closed_once_even_if_interrupted(monkeypatch):
    """``SharedFd.close`` forgets the number before closing it: a Ctrl-C right after ``os.close`` returns cannot
    make a later close hit the number again (by then maybe a file of the program's)."""
    from vecenv import shared_memory

    read_end, write_end = os.pipe()
    os.close(write_end)
    closed: list[int] = []
    real_close = os.close

    def close_then_interrupt(fd: int) -> None:
        real_close(fd)
        closed.append(fd)
        if len(closed) == 1:
            raise KeyboardInterrupt

    shared_fd = shared_memory.SharedFd(read_end)
    monkeypatch.setattr(shared_memory.os, "close", close_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        shared_fd.close()
    shared_fd.close()  # (a worker's shutdown closes it again)
    assert closed == [read_end] and shared_fd.fd == -1
