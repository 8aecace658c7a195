"""The ownership rule of the observations ``step()`` / ``reset()`` return, with observation slots
(vecenv.engine.obs_slots): arrays the caller holds are never written again, slots are reused once dropped, a
caller that keeps everything gets copies (bounded memory), and arrays stay valid after ``close()``. Expected
values come from envs stepped by hand."""

from __future__ import annotations

import gc
import os
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import vecenv
from tests.conftest import HAS_RAY, RAY_TEST_OPTIONS
from tests.envs import CounterEnv, FaultEnv, SpaceEnv, space_obs
from vecenv.engine import obs_slots
from vecenv.engine.obs_slots import MAX_OBS_SLOTS, ObsSlots, default_obs_slots

N = 4
SEED = 7
_NEEDS_RAY = pytest.mark.skipif(not HAS_RAY, reason="ray is not installed (the ray extra)")
#: every backend, SubprocVecEnv with and without shared memory; "thread" is a worker without slots (copies)
SLOT_BACKENDS = ["dummy", "subproc", "subproc-pickled", "thread", pytest.param("ray", marks=_NEEDS_RAY)]


def build(backend: str, env_fns: list[Callable[[], Any]], **kwargs: Any) -> vecenv.VecEnv:
    """``backend``'s vector env, with 4 observation slots unless ``obs_slots`` is given (the test envs' batches
    are far below the size from which slots are the default)."""
    kwargs.setdefault("obs_slots", 4)
    if backend == "dummy":
        return vecenv.DummyVecEnv(env_fns, **kwargs)
    if backend == "subproc":
        return vecenv.SubprocVecEnv(env_fns, n_workers=2, **kwargs)
    if backend == "subproc-pickled":
        return vecenv.SubprocVecEnv(env_fns, n_workers=2, shared_memory=False, **kwargs)
    if backend == "thread":
        from tests.fake_transport import ThreadVecEnv

        return ThreadVecEnv(env_fns)
    assert backend == "ray", backend
    return vecenv.RayVecEnv(env_fns, **RAY_TEST_OPTIONS, **kwargs)  # type: ignore[arg-type]


@pytest.fixture
def built() -> Any:
    venvs: list[vecenv.VecEnv] = []

    def make(backend: str, env_fns: list[Callable[[], Any]], **kwargs: Any) -> vecenv.VecEnv:
        if backend == "ray":
            pytest.importorskip("ray")
        venv = build(backend, env_fns, **kwargs)
        venvs.append(venv)
        return venv

    yield make
    for venv in venvs:
        venv.close()


@pytest.fixture
def slots_for_any_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    """Slots by default whatever the batch's size (for classes that take no ``obs_slots``)."""
    monkeypatch.setattr(obs_slots, "MIN_OBS_SLOT_BATCH_BYTES", 0)


class ByHand:
    """The same envs stepped one by one, SB3's automatic reset (SAME_STEP): the independent expectation."""

    def __init__(self, make_env: Callable[[int], Any], n: int, seed: int) -> None:
        self.envs = [make_env(i) for i in range(n)]
        self.obs = [env.reset(seed=seed + i)[0] for i, env in enumerate(self.envs)]

    def step(self, actions: np.ndarray) -> list[Any]:
        for i, env in enumerate(self.envs):
            obs, _, terminated, truncated, _ = env.step(actions[i])
            if terminated or truncated:
                obs, _ = env.reset()
            self.obs[i] = obs
        return list(self.obs)


def counter(i: int) -> CounterEnv:
    return CounterEnv(episode_len=3 + i)


def counter_fns(n: int = N) -> list[Callable[[], CounterEnv]]:
    return [lambda i=i: counter(i) for i in range(n)]


def assert_rows(batch: np.ndarray, expected: list[np.ndarray]) -> None:
    np.testing.assert_array_equal(batch, np.stack(expected))


@pytest.mark.parametrize("backend", SLOT_BACKENDS)
def test_held_batches_are_never_overwritten(backend: str, built: Any) -> None:
    """Batches of steps t..t+3 (and views, slices, memoryviews of them) keep their values while later steps run;
    each equals the envs stepped by hand at its step."""
    venv = build_seeded(built, backend)
    by_hand = ByHand(counter, N, SEED)
    first = venv.reset()
    first_view, expected_first = first[1:], np.stack(by_hand.obs)
    rng = np.random.default_rng(0)
    held: list[tuple[Any, np.ndarray]] = []
    for _ in range(40):
        actions = rng.integers(0, 3, N)
        obs, *_ = venv.step(actions)
        expected = np.stack(by_hand.step(actions))
        np.testing.assert_array_equal(obs, expected)
        held.append((obs if len(held) % 3 else memoryview(obs), expected))
        held = held[-4:]
        for kept, value in held:
            np.testing.assert_array_equal(np.asarray(kept), value)
        np.testing.assert_array_equal(first_view, expected_first[1:])
    stats = venv.step_stats()
    assert stats.obs_shared + stats.obs_copied == 41
    if backend == "thread":  # a worker without use_obs_rows: copies, as before slots
        assert stats.obs_shared == 0
    else:  # the caller held at most 5 batches + the first: with 4 slots, most batches were copies
        assert stats.obs_shared >= 3


def build_seeded(built: Any, backend: str, **kwargs: Any) -> vecenv.VecEnv:
    venv = built(backend, counter_fns(), **kwargs)
    venv.seed(SEED)
    return venv


@pytest.mark.parametrize("backend", ["dummy", "subproc"])
def test_dropped_slots_are_reused(backend: str, built: Any) -> None:
    """A caller that keeps only the last batch (as SB3's ``_last_obs``) gets every batch without a copy, from no
    more than the slots' memory."""
    venv = build_seeded(built, backend)
    by_hand = ByHand(counter, N, SEED)
    last = venv.reset()
    addresses = {last.__array_interface__["data"][0]}
    for t in range(60):
        actions = np.full(N, t % 3)
        last, *_ = venv.step(actions)
        assert_rows(last, by_hand.step(actions))
        assert not last.flags.owndata
        addresses.add(last.__array_interface__["data"][0])
    stats = venv.step_stats()
    assert (stats.obs_shared, stats.obs_copied) == (61, 0)
    assert len(addresses) <= MAX_OBS_SLOTS


@pytest.mark.parametrize("backend", ["dummy", "subproc"])
def test_keeping_every_batch_falls_back_to_copies(backend: str, built: Any) -> None:
    """A caller that keeps every batch holds at most ``slots - 1`` slots; every later batch is a copy of its own
    (memory bounded by the slots plus what the caller keeps), and every kept batch keeps its values."""
    venv = build_seeded(built, backend, obs_slots=3)
    by_hand = ByHand(counter, N, SEED)
    kept = [(venv.reset(), np.stack(by_hand.obs))]
    for t in range(30):
        actions = np.full(N, t % 3)
        obs, *_ = venv.step(actions)
        kept.append((obs, np.stack(by_hand.step(actions))))
    for obs, expected in kept:
        np.testing.assert_array_equal(obs, expected)
    stats = venv.step_stats()
    assert (stats.obs_shared, stats.obs_copied) == (2, 29)
    assert sum(not obs.flags.owndata for obs, _ in kept) == 2
    del kept, obs
    gc.collect()
    last, *_ = venv.step(np.zeros(N, dtype=np.int64))  # the slots are free again
    assert not last.flags.owndata


def test_arrays_stay_valid_after_close() -> None:
    """Batches handed out before ``close()`` keep their memory (shared memory stays mapped while they live)."""
    venv = vecenv.SubprocVecEnv(counter_fns(), n_workers=2, obs_slots=4)
    venv.seed(SEED)
    by_hand = ByHand(counter, N, SEED)
    first, expected_first = venv.reset(), np.stack(by_hand.obs)
    obs, *_ = venv.step(np.ones(N, dtype=np.int64))
    expected = np.stack(by_hand.step(np.ones(N, dtype=np.int64)))
    venv.close()
    del venv
    gc.collect()
    np.testing.assert_array_equal(obs, expected)
    np.testing.assert_array_equal(first, expected_first)
    obs[0, 0] = 123  # still writable memory of this process
    assert obs[0, 0] == 123


@pytest.mark.parametrize("obs_kind", ["dict", "tuple", "image"])
@pytest.mark.parametrize("backend", ["dummy", "subproc"])
def test_dict_and_tuple_batches_are_kept(backend: str, obs_kind: str, built: Any) -> None:
    """Every array of a Dict / Tuple batch belongs to the same hand-out: one array kept alone keeps the slot."""
    venv = built(backend, [lambda i=i: SpaceEnv(obs_kind, offset=i, episode_len=50) for i in range(N)])
    venv.reset()

    def expected(t: int, key: Any = None) -> np.ndarray:
        rows = [space_obs(obs_kind, 100 * i + t) for i in range(N)]
        return np.stack(rows if key is None else [row[key] for row in rows])

    key = {"dict": "z", "tuple": 0, "image": None}[obs_kind]
    held = []
    for t in range(1, 12):
        obs, *_ = venv.step(np.zeros(N, dtype=np.int64))
        held.append(obs if key is None else obs[key])  # the rest of the batch is dropped
        for s, part in enumerate(held[-3:], start=max(1, t - 2)):
            np.testing.assert_array_equal(part, expected(s, key))
    assert venv.step_stats().obs_shared >= 3


def test_partial_batches_keep_held_step_batches(built: Any) -> None:
    """``send`` / ``recv`` after a ``step()`` write into another slot (with the other envs' rows): the step's batch
    is unchanged and ``recv`` returns the rows stepped by hand."""
    venv = vecenv.SubprocVecEnv(counter_fns(), n_workers=N, obs_slots=4)
    try:
        venv.seed(SEED)
        by_hand = ByHand(counter, N, SEED)
        venv.reset()
        obs, *_ = venv.step(np.ones(N, dtype=np.int64))
        expected = np.stack(by_hand.step(np.ones(N, dtype=np.int64)))
        for _ in range(3):
            venv.send(np.array([2, 2]), [0, 3])
            rows, _, _, _, env_ids = venv.recv()
            for row, env_id in zip(rows, env_ids, strict=True):
                env = by_hand.envs[env_id]
                value, _, terminated, truncated, _ = env.step(2)
                if terminated or truncated:
                    value, _ = env.reset()
                by_hand.obs[env_id] = value
                np.testing.assert_array_equal(row, value)
            np.testing.assert_array_equal(obs, expected)
        full, *_ = venv.step(np.zeros(N, dtype=np.int64))
        assert_rows(full, by_hand.step(np.zeros(N, dtype=np.int64)))
    finally:
        venv.close()


def faulty_run(
    built: Any, backend: str, fail_in: str, env: int, after: int, steps: int, **kwargs: Any
) -> tuple[vecenv.VecEnv, ByHand, list[tuple[np.ndarray, np.ndarray]]]:
    """A vector env whose env ``env`` fails (``fail_in``) at its step ``after``, stepped ``steps`` times with ones,
    beside the same envs stepped by hand (without the fault); every batch kept with its expected value."""
    env_fns = [lambda i=i: FaultEnv(fail_in if i == env else None, after=after, offset=i) for i in range(N)]
    venv = built(backend, env_fns, **kwargs)
    venv.seed(SEED)
    by_hand = ByHand(lambda i: FaultEnv(None, offset=i), N, SEED)
    venv.reset()
    ones = np.ones(N, dtype=np.int64)
    kept = []
    for _ in range(steps):
        obs, *_ = venv.step(ones)
        kept.append((obs, np.stack(by_hand.step(ones))))
    return venv, by_hand, kept


@pytest.mark.parametrize("backend", ["dummy", "subproc"])
def test_results_held_after_a_failure_keep_their_rows(backend: str, built: Any) -> None:
    """A step that raises in env 2: envs 0-1 hold their results; the next step returns them from a new slot (the
    caller still holds the previous batch, which is unchanged)."""
    venv, by_hand, kept = faulty_run(built, backend, fail_in="step", env=2, after=3, steps=2)
    ones = np.ones(N, dtype=np.int64)
    with pytest.raises(Exception, match="custom fault in step"):
        venv.step(ones)
    for env in by_hand.envs[:2]:  # envs 0 and 1 stepped before env 2 raised
        by_hand.obs[by_hand.envs.index(env)] = env.step(1)[0]
    venv.env_method("__setattr__", "fail_in", None, indices=[2])
    obs, *_ = venv.step(ones)
    expected = list(by_hand.obs)
    for i in (2, 3):  # the envs that had not stepped step now
        expected[i] = by_hand.envs[i].step(1)[0]
    assert_rows(obs, expected)
    for held, value in kept:
        np.testing.assert_array_equal(held, value)


def test_restart_writes_a_new_slot_while_the_caller_holds_the_batch(built: Any) -> None:
    """A worker that dies is restarted (its envs reset into the vector env's buffers) without touching the batch the
    caller holds."""
    venv, by_hand, kept = faulty_run(built, "subproc", fail_in="exit", env=3, after=4, steps=3, max_restarts=1)
    ones = np.ones(N, dtype=np.int64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        obs, _, dones, infos = venv.step(ones)
    assert infos[3].get("vecenv.restarted") and dones[3]
    expected = by_hand.step(ones)
    np.testing.assert_array_equal(obs[:2], np.stack(expected[:2]))  # envs 0-1 share no worker with env 3
    assert obs[3, 1] == 0 and obs[3, 2] == 0  # env 3: a fresh env's first episode, t == 0
    for held, value in kept:
        np.testing.assert_array_equal(held, value)


@pytest.mark.parametrize("wrapper", ["frame_stack", "normalize", "transpose", "monitor"])
def test_wrappers_keep_the_rule(wrapper: str, built: Any) -> None:
    """Through each wrapper that passes or transforms observations, batches held by the caller keep their values."""
    venv = built("subproc", [lambda i=i: SpaceEnv("image", offset=i, episode_len=50) for i in range(N)])
    if wrapper == "frame_stack":
        venv = vecenv.VecFrameStack(venv, n_stack=2)
    elif wrapper == "normalize":
        venv = vecenv.VecNormalize(venv, norm_obs=False, norm_reward=False)
    elif wrapper == "transpose":
        venv = vecenv.VecTransposeImage(venv)
    else:
        venv = vecenv.VecMonitor(venv)
    venv.reset()
    held = []
    for _ in range(8):
        obs, *_ = venv.step(np.zeros(N, dtype=np.int64))
        held.append((obs, obs.copy()))
        for kept, value in held[-4:]:
            np.testing.assert_array_equal(kept, value)
    if wrapper == "normalize":  # VecNormalize keeps the raw batch by reference: still the last step's
        last = np.stack([space_obs("image", 100 * i + 8) for i in range(N)])
        np.testing.assert_array_equal(venv.get_original_obs(), last)


@pytest.mark.parametrize("copy", [True, False])
@pytest.mark.parametrize("cls", ["SyncVectorEnv", "AsyncVectorEnv"])
def test_gymnasium_layer_keeps_the_rule(cls: str, copy: bool, slots_for_any_batch: None) -> None:
    """vecenv.gymnasium's classes hand out batches nothing overwrites, with ``copy=True`` and ``copy=False``."""
    import vecenv.gymnasium as vg

    env_fns = [lambda i=i: SpaceEnv("box", offset=i, episode_len=50) for i in range(N)]
    kwargs = {"n_workers": 2} if cls == "AsyncVectorEnv" else {}
    envs = getattr(vg, cls)(env_fns, copy=copy, **kwargs)
    try:
        first, _ = envs.reset(seed=SEED)
        held = [(first, first.copy())]
        for t in range(1, 9):
            obs, *_ = envs.step(np.zeros(N, dtype=np.int64))
            np.testing.assert_array_equal(obs, np.stack([space_obs("box", 100 * i + t) for i in range(N)]))
            held.append((obs, obs.copy()))
            for kept, value in held[-4:]:
                np.testing.assert_array_equal(kept, value)
        assert envs.step_stats().obs_shared >= 3
        del held, obs
        envs.step_stats(reset=True)
        resets = [envs.reset(seed=SEED)[0] for _ in range(3)]  # each is the caller's, and counted
        envs.step(np.zeros(N, dtype=np.int64))
        for kept in resets:
            np.testing.assert_array_equal(kept, first)
        stats = envs.step_stats()
        assert (stats.obs_shared + stats.obs_copied, stats.obs_shared >= 1) == (4, True)
    finally:
        envs.close()


def test_obs_slots_zero_copies_every_batch(built: Any) -> None:
    venv = build_seeded(built, "subproc", obs_slots=0)
    venv.reset()
    obs, *_ = venv.step(np.zeros(N, dtype=np.int64))
    assert obs.flags.owndata
    stats = venv.step_stats()
    assert (stats.obs_shared, stats.obs_copied) == (0, 2)


@pytest.mark.parametrize("value", [-1, 1.5, "2", True])
@pytest.mark.parametrize("cls", [vecenv.DummyVecEnv, vecenv.SubprocVecEnv])
def test_bad_obs_slots_are_refused(cls: type, value: Any) -> None:
    with pytest.raises(ValueError, match=r"obs_slots must be None .* got " + repr(value).replace(".", r"\.")):
        cls(counter_fns(), obs_slots=value)


def test_default_slot_count_is_bounded_by_memory() -> None:
    from gymnasium import spaces

    small = spaces.Box(0, 255, (84, 84, 4), np.uint8)
    assert default_obs_slots(small, 16) == MAX_OBS_SLOTS
    assert default_obs_slots(spaces.Box(-1, 1, (4,), np.float32), 1024) == 0  # 16 KiB: a copy costs less
    assert default_obs_slots(small, 4096) == 2  # 116 MB a batch: 2 fit in 256 MiB
    assert default_obs_slots(small, 8192) == 0  # 231 MB a batch: 1 fits, too few
    huge = spaces.Box(0, 255, (1024, 1024, 3), np.uint8)
    assert default_obs_slots(huge, 64) == 0  # 201 MB a batch: fewer than 2 slots fit
    assert default_obs_slots(spaces.Text(5), 4) == 0  # Python objects: copies


def test_pool_always_leaves_one_slot_free() -> None:
    buffers = [np.zeros((2, 3)) for _ in range(3)]
    slots = ObsSlots(buffers)
    a, copied_a = slots.hand_out()
    assert not copied_a and slots.held == [1, 0, 0]
    assert slots.free_slot(keep_rows=False) == 1
    _kept_b, copied_b = slots.hand_out()  # (kept alive: it holds slot 1)
    assert not copied_b and slots.held == [1, 1, 0]
    assert slots.free_slot(keep_rows=False) == 2
    c, copied_c = slots.hand_out()  # slot 2 is the last free one: a copy
    assert copied_c and slots.held == [1, 1, 0] and c.flags.owndata
    view = a[1:]
    del a
    gc.collect()
    assert slots.held == [1, 1, 0]  # the view keeps the slot
    del view
    assert slots.held == [0, 1, 0]
    buffers[2][:] = 5
    assert slots.free_slot(keep_rows=True) is None  # slot 2 is free: the envs write it again
    with pytest.raises(ValueError, match="at least 2 buffers"):
        ObsSlots(buffers[:1])


@pytest.mark.parametrize("cls", ["SyncVectorEnv", "AsyncVectorEnv"])
def test_masked_reset_keeps_the_other_envs_rows(cls: str, slots_for_any_batch: None) -> None:
    """A reset of some envs while the caller holds the last batch writes a new slot holding the other envs' rows:
    Gymnasium's ``reset(options={"reset_mask": ...})`` returns them unchanged, and the held batch is intact."""
    import vecenv.gymnasium as vg

    env_fns = [lambda i=i: SpaceEnv("box", offset=i, episode_len=50) for i in range(N)]
    kwargs = {"n_workers": 2} if cls == "AsyncVectorEnv" else {}
    envs = getattr(vg, cls)(env_fns, **kwargs)
    try:
        envs.reset(seed=SEED)
        for _ in range(3):
            held, *_ = envs.step(np.zeros(N, dtype=np.int64))
        after_3 = np.stack([space_obs("box", 100 * i + 3) for i in range(N)])
        mask = np.array([False, True, False, True])
        obs, _ = envs.reset(options={"reset_mask": mask})
        expected = after_3.copy()
        expected[mask] = np.stack([space_obs("box", 100 * i) for i in (1, 3)])
        np.testing.assert_array_equal(obs, expected)
        np.testing.assert_array_equal(held, after_3)
    finally:
        envs.close()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("backend", ["subproc", "dummy"])
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_forked_childs_batch_is_never_overwritten(backend: str, built: Any) -> None:
    """A child forked while the caller holds a batch keeps it as it was, also once the parent drops its own arrays
    and steps on (shared slots held at the fork are never written again); the parent's later batches are still
    the envs' own."""
    venv = build_seeded(built, backend)
    by_hand = ByHand(counter, N, SEED)
    venv.reset()
    actions = np.ones(N, dtype=np.int64)
    obs, *_ = venv.step(actions)
    expected = np.stack(by_hand.step(actions))
    read_end, write_end = os.pipe()
    child_go_r, child_go_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: wait until the parent stepped on, then compare its inherited batch
        try:
            os.close(read_end)
            os.read(child_go_r, 1)
            os.write(write_end, b"1" if np.array_equal(obs, expected) else b"0")
        finally:
            os._exit(0)
    os.close(write_end)
    del obs
    gc.collect()
    for _ in range(12):
        obs, *_ = venv.step(actions)
        np.testing.assert_array_equal(obs, np.stack(by_hand.step(actions)))
    os.write(child_go_w, b"g")
    answer = os.read(read_end, 1)
    os.waitpid(pid, 0)
    for fd in (read_end, child_go_r, child_go_w):
        os.close(fd)
    assert answer == b"1", "the forked child's batch was overwritten by the parent's later steps"


@pytest.mark.timeout(60)
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_vecenvs_own_forked_workers_retire_no_slot(built: Any) -> None:
    """Starting vecenv's own worker processes with ``start_method="fork"`` while the caller holds a batch retires
    no slot (those workers read none of the caller's arrays): a loop that keeps its last batch goes on getting
    batches over the slots."""
    venv = build_seeded(built, "subproc")
    held: list[Any] = []
    for _ in range(3):  # a new batch held at each fork (3 of the 4 slots, were they retired)
        held[:] = [venv.step(np.zeros(N, dtype=np.int64))[0]]
        built("subproc", counter_fns(2), start_method="fork").close()
    venv.step_stats(reset=True)
    for _ in range(10):
        held[:] = [venv.step(np.zeros(N, dtype=np.int64))[0]]  # (the last batch held while the next is written)
    assert venv.step_stats().obs_shared == 10
