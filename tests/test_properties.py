"""Property-based tests (hypothesis) over random spaces and random action sequences.

1. Shared memory and batch buffers: for random spaces (Box of every fixed-size dtype and random shapes,
   scalar and empty ones included; Discrete with a start; MultiDiscrete; MultiBinary; Dict and Tuple
   nested up to depth 3), values written into a :class:`~vecenv.shared_memory.SharedBatch` through one
   mapping come back bit-identical through a second mapping of the same file descriptor, and the
   observation writer round-trips through :func:`~vecenv.spaces.create_batch_buffer` buffers.
2. Backends agree: a scripted deterministic env (:class:`tests.envs_random.ScriptedEnv`) over random
   spaces, random numbers of envs and workers, random end-of-episode scripts, seeds, options and action
   sequences gives exactly the results of the same envs stepped by hand with SB3's rules, with
   :class:`~vecenv.DummyVecEnv` and with :class:`~vecenv.SubprocVecEnv` (forkserver; spawn and fork in
   one small test each). Returned arrays are re-checked at the end, so a batch that a later step
   overwrote is caught too.

Expected values never come from vecenv: they are the values written, or single envs stepped by hand.
Floats are compared by their bytes (NaN payloads and -0.0 included).
"""

from __future__ import annotations

import copy
import functools
import multiprocessing as mp
import os
import struct
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from hypothesis import HealthCheck, Phase, event, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import vecenv
from tests.envs_random import EchoActionEnv, ScriptedEnv, ZeroDimObsEnv, canonical
from vecenv.actions import write_actions
from vecenv.shared_memory import SharedBatch
from vecenv.spaces import create_batch_buffer, make_obs_writer

START_METHODS = mp.get_all_start_methods()
DEFAULT_START_METHOD = "forkserver" if "forkserver" in START_METHODS else "spawn"

LEAF_DTYPES = [
    np.float16,
    np.float32,
    np.float64,
    np.int8,
    np.int16,
    np.int32,
    np.int64,
    np.uint8,
    np.uint16,
    np.uint32,
    np.uint64,
    np.bool_,
]
FLOAT_DTYPES = [np.float16, np.float32, np.float64]
END_KINDS = ["terminated", "truncated", "both"]
SB3_NESTED_MESSAGE = "Nested observation spaces are not supported"

# float specials cast to float16/float32 overflow to inf on purpose (in the test envs and in vecenv's reward cast)
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")

#: no "explain" phase: it reruns a failing example hundreds of times (minutes, with worker processes)
BASE_SETTINGS = settings(
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# --- comparison ------------------------------------------------------------------------------------------


def assert_identical(actual: Any, expected: Any, path: str = "value") -> None:
    """Same structure, same types, same key order, same dtypes and shapes, same bytes (NaN-exact)."""
    assert type(actual) is type(expected), f"{path}: {type(actual).__name__} != {type(expected).__name__}"
    if isinstance(expected, dict):
        assert list(actual) == list(expected), f"{path}: keys {list(actual)} != {list(expected)}"
        for key in expected:
            assert_identical(actual[key], expected[key], f"{path}[{key!r}]")
    elif isinstance(expected, (tuple, list)):
        assert len(actual) == len(expected), f"{path}: length {len(actual)} != {len(expected)}"
        for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
            assert_identical(a, e, f"{path}[{i}]")
    elif isinstance(expected, (np.ndarray, np.generic)):
        assert actual.dtype == expected.dtype, f"{path}: dtype {actual.dtype} != {expected.dtype}"
        assert actual.shape == expected.shape, f"{path}: shape {actual.shape} != {expected.shape}"
        assert np.ascontiguousarray(actual).tobytes() == np.ascontiguousarray(expected).tobytes(), (
            f"{path}: {actual!r} != {expected!r}"
        )
    elif isinstance(expected, float):
        assert struct.pack("<d", actual) == struct.pack("<d", expected), f"{path}: {actual!r} != {expected!r}"
    else:
        assert actual == expected, f"{path}: {actual!r} != {expected!r}"


def leaves(space: spaces.Space, value: Any) -> list[tuple[spaces.Space, Any]]:
    """``(leaf space, leaf value)`` pairs of a value of ``space``, depth first in space order."""
    if isinstance(space, spaces.Dict):
        return [pair for key, sub in space.spaces.items() for pair in leaves(sub, value[key])]
    if isinstance(space, spaces.Tuple):
        return [pair for i, sub in enumerate(space.spaces) for pair in leaves(sub, value[i])]
    return [(space, value)]


def expected_batch(space: spaces.Space, values: list[Any]) -> Any:
    """The batch of ``values`` (one per env) as vecenv documents it, built with NumPy alone.

    Arrays ``(n, *shape)`` of the space's dtype; dict (space key order) / tuple for Dict / Tuple.
    """
    if isinstance(space, spaces.Dict):
        return {key: expected_batch(sub, [v[key] for v in values]) for key, sub in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(expected_batch(sub, [v[i] for v in values]) for i, sub in enumerate(space.spaces))
    dtype = np.dtype(space.dtype)
    out = np.empty((len(values), *space.shape), dtype=dtype)
    for i, value in enumerate(values):
        out[i] = np.asarray(value, dtype=dtype)
    return out


def zero_value(space: spaces.Space) -> Any:
    """The all-zeros value of ``space`` (what a fresh batch buffer holds in every row)."""
    if isinstance(space, spaces.Dict):
        return {key: zero_value(sub) for key, sub in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(zero_value(sub) for sub in space.spaces)
    return np.zeros(space.shape, dtype=space.dtype)


# --- strategies: spaces ----------------------------------------------------------------------------------


def shapes(min_side: int = 0) -> st.SearchStrategy[tuple[int, ...]]:
    """Shapes of 0-3 dimensions (``()`` included), sides ``min_side..3``."""
    return st.lists(st.integers(min_side, 3), max_size=3).map(tuple)


@st.composite
def box_spaces(draw: st.DrawFn, min_side: int = 0) -> spaces.Box:
    # floats (half of the draws) carry the interesting bit patterns
    dtype = np.dtype(draw(st.one_of(st.sampled_from(FLOAT_DTYPES), st.sampled_from(LEAF_DTYPES))))
    shape = draw(shapes(min_side))
    if dtype.kind == "b":
        return spaces.Box(low=0, high=1, shape=shape, dtype=dtype)
    if dtype.kind == "f":
        low, high = draw(st.sampled_from([(-1.0, 1.0), (-np.inf, np.inf), (0.0, 255.0)]))
        return spaces.Box(low=low, high=high, shape=shape, dtype=dtype)
    info = np.iinfo(dtype)
    return spaces.Box(low=max(info.min, -100), high=min(info.max, 100), shape=shape, dtype=dtype)


def discrete_spaces() -> st.SearchStrategy[spaces.Discrete]:
    starts = st.one_of(st.just(0), st.integers(-5, 5), st.integers(-(2**40), 2**40))
    return st.builds(lambda n, start: spaces.Discrete(n, start=start), st.integers(1, 9), starts)


@st.composite
def multi_discrete_spaces(draw: st.DrawFn) -> spaces.MultiDiscrete:
    shape = draw(st.lists(st.integers(1, 3), min_size=1, max_size=2).map(tuple))
    nvec = draw(hnp.arrays(np.int64, shape, elements=st.integers(1, 6)))
    start = draw(hnp.arrays(np.int64, shape, elements=st.integers(-5, 5)))
    return spaces.MultiDiscrete(nvec, start=start)


def multi_binary_spaces() -> st.SearchStrategy[spaces.MultiBinary]:
    return st.one_of(
        st.integers(1, 5).map(spaces.MultiBinary),
        st.lists(st.integers(1, 3), min_size=1, max_size=2).map(spaces.MultiBinary),
    )


def leaf_spaces(min_side: int = 0) -> st.SearchStrategy[spaces.Space]:
    return st.one_of(box_spaces(min_side), discrete_spaces(), multi_discrete_spaces(), multi_binary_spaces())


KEYS = st.text(alphabet="abcdxyz_", min_size=1, max_size=3)


def containers(children: st.SearchStrategy[spaces.Space]) -> st.SearchStrategy[spaces.Space]:
    """Dict spaces (random, unsorted key order) and Tuple spaces of 1-3 ``children``."""
    dicts = st.lists(st.tuples(KEYS, children), min_size=1, max_size=3, unique_by=lambda kv: kv[0]).map(
        lambda items: spaces.Dict(OrderedDict(items))
    )
    tuples = st.lists(children, min_size=1, max_size=3).map(lambda subs: spaces.Tuple(tuple(subs)))
    return st.one_of(dicts, tuples)


def nested_spaces(depth: int, min_side: int = 0) -> st.SearchStrategy[spaces.Space]:
    """Any space with Dict/Tuple nesting up to ``depth`` levels (0: leaf spaces only)."""
    if depth == 0:
        return leaf_spaces(min_side)
    return st.one_of(leaf_spaces(min_side), containers(nested_spaces(depth - 1, min_side)))


def flat_spaces(min_side: int = 0) -> st.SearchStrategy[spaces.Space]:
    """What the SB3-style vector envs accept as observation space: leaves, and Dict/Tuple of leaves.

    The kind is drawn first, uniformly, so that few examples still cover every kind.
    """
    kinds: dict[str, st.SearchStrategy[spaces.Space]] = {
        "box": box_spaces(min_side),
        "discrete": discrete_spaces(),
        "multidiscrete": multi_discrete_spaces(),
        "multibinary": multi_binary_spaces(),
        "container": containers(leaf_spaces(min_side)),
    }
    return st.sampled_from(list(kinds)).flatmap(kinds.__getitem__)


@st.composite
def deeply_nested_spaces(draw: st.DrawFn) -> spaces.Space:
    """A Dict/Tuple with a Dict/Tuple inside (nesting depth 2 or 3)."""
    inner = draw(containers(nested_spaces(draw(st.integers(0, 1)))))
    siblings = draw(st.lists(nested_spaces(1), max_size=2))
    position = draw(st.integers(0, len(siblings)))
    children = [*siblings[:position], inner, *siblings[position:]]
    if draw(st.booleans()):
        return spaces.Tuple(tuple(children))
    return spaces.Dict(OrderedDict((f"k{i}", child) for i, child in enumerate(children)))


# --- strategies: values -----------------------------------------------------------------------------------


@st.composite
def values_of(draw: st.DrawFn, space: spaces.Space) -> Any:
    """An arbitrary value of ``space``'s dtypes and shapes (any bit pattern: NaN payloads, infinities, -0.0).

    Dict values list their keys in a random order; scalar leaves come as 0-d arrays, NumPy scalars or
    (Discrete) Python ints.
    """
    if isinstance(space, spaces.Dict):
        items = [(key, draw(values_of(sub))) for key, sub in space.spaces.items()]
        return dict(draw(st.permutations(items)))
    if isinstance(space, spaces.Tuple):
        return tuple(draw(values_of(sub)) for sub in space.spaces)
    if isinstance(space, spaces.Discrete):
        value = draw(st.integers(int(space.start), int(space.start + space.n - 1)))
        return draw(st.sampled_from([value, np.int64(value)]))
    dtype = np.dtype(space.dtype)
    array = draw(hnp.arrays(dtype, space.shape, elements=hnp.from_dtype(dtype, allow_subnormal=True)))
    if array.shape == () and draw(st.booleans()):
        return array[()]
    return array


# --- 1. shared memory and batch buffers ------------------------------------------------------------------


@settings(BASE_SETTINGS, max_examples=150)
@given(space=nested_spaces(3), num_envs=st.integers(1, 4), data=st.data())
def test_batch_buffer_obs_writer_round_trip(space: spaces.Space, num_envs: int, data: st.DataObject) -> None:
    """create_batch_buffer gives zeroed (n, *shape) arrays of the space's dtypes in space order; the obs writer
    stores each env's value bit-exactly in its row (rows written in random order) and nowhere else."""
    buffer = create_batch_buffer(space, num_envs)
    assert_identical(buffer, expected_batch(space, [zero_value(space)] * num_envs), "fresh buffer")
    values = [data.draw(values_of(space), label=f"value {i}") for i in range(num_envs)]
    write = make_obs_writer(space)
    for i in data.draw(st.permutations(range(num_envs)), label="write order"):
        write(buffer, i, values[i])
    assert_identical(buffer, expected_batch(space, values), "buffer")


def batched_actions(space: spaces.Space, per_env: list[Any]) -> Any:
    """SB3's batched layout: one array (n, ...) per leaf; a dict / tuple of them for (flat) Dict / Tuple spaces."""
    if isinstance(space, spaces.Dict):
        return {key: batched_actions(sub, [a[key] for a in per_env]) for key, sub in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(batched_actions(sub, [a[i] for a in per_env]) for i, sub in enumerate(space.spaces))
    return expected_batch(space, per_env)


def is_flat(space: spaces.Space) -> bool:
    if isinstance(space, spaces.Dict):
        return not any(isinstance(sub, (spaces.Dict, spaces.Tuple)) for sub in space.spaces.values())
    if isinstance(space, spaces.Tuple):
        return not any(isinstance(sub, (spaces.Dict, spaces.Tuple)) for sub in space.spaces)
    return True


def buffer_leaves(space: spaces.Space, buffer: Any) -> list[np.ndarray]:
    return [leaf for _, leaf in leaves(space, buffer)]


@settings(BASE_SETTINGS, max_examples=120)
@given(
    obs_space=nested_spaces(3),
    action_space=nested_spaces(3),
    num_envs=st.integers(1, 4),
    worker_writes_obs=st.booleans(),
    data=st.data(),
)
def test_shared_batch_round_trip(
    obs_space: spaces.Space, action_space: spaces.Space, num_envs: int, worker_writes_obs: bool, data: st.DataObject
) -> None:
    """Two mappings of one SharedBatch fd: obs / rewards / dones / actions written through one side (rows in
    random order, every array written before any is read) read back bit-identical on the other side."""
    parent, fd = SharedBatch.create(obs_space, action_space, num_envs)
    try:
        worker = SharedBatch.attach(obs_space, action_space, num_envs, fd, parent.size)
    finally:
        os.close(fd)
    assert SharedBatch.supports(obs_space)
    assert parent.actions is not None and worker.actions is not None
    for side in (parent, worker):  # zeroed, laid out as documented, no two arrays share a byte
        assert_identical(side.obs, expected_batch(obs_space, [zero_value(obs_space)] * num_envs), "fresh obs")
        assert_identical(
            side.actions, expected_batch(action_space, [zero_value(action_space)] * num_envs), "fresh actions"
        )
        arrays = [
            *buffer_leaves(obs_space, side.obs),
            side.rewards,
            side.dones,
            *buffer_leaves(action_space, side.actions),
        ]
        for i, a in enumerate(arrays):
            for b in arrays[i + 1 :]:
                assert not np.shares_memory(a, b)
    obs_writer, obs_reader = (worker, parent) if worker_writes_obs else (parent, worker)
    action_writer, action_reader = (parent, worker) if worker_writes_obs else (worker, parent)

    obs_values = [data.draw(values_of(obs_space), label=f"obs {i}") for i in range(num_envs)]
    actions = [data.draw(values_of(action_space), label=f"action {i}") for i in range(num_envs)]
    rewards = data.draw(hnp.arrays(np.float32, (num_envs,)), label="rewards")
    dones = data.draw(hnp.arrays(np.bool_, (num_envs,)), label="dones")
    write = make_obs_writer(obs_space)
    for i in data.draw(st.permutations(range(num_envs)), label="row order"):
        write(obs_writer.obs, i, obs_values[i])
    obs_writer.rewards[:] = rewards
    obs_writer.dones[:] = dones
    layout = data.draw(st.sampled_from(["list", "batched"] if is_flat(action_space) else ["list"]), label="layout")
    write_actions(
        action_space, action_writer.actions, actions if layout == "list" else batched_actions(action_space, actions)
    )

    assert_identical(obs_reader.obs, expected_batch(obs_space, obs_values), "obs")
    assert_identical(obs_reader.rewards, rewards, "rewards")
    assert_identical(obs_reader.dones, dones, "dones")
    assert_identical(action_reader.actions, expected_batch(action_space, actions), "actions")


# --- 2. DummyVecEnv and SubprocVecEnv agree with envs stepped by hand ------------------------------------


class ReferenceEnvs:
    """The same envs, stepped one by one in this process with SB3's rules (written from the documentation)."""

    def __init__(self, env_fns: list[Callable[[], gym.Env]], observation_space: spaces.Space) -> None:
        self.envs = [env_fn() for env_fn in env_fns]
        self.observation_space = observation_space
        self.reset_infos: list[dict[str, Any]] = [{} for _ in env_fns]

    def reset(self, seeds: list[int | None], options: list[dict[str, Any]]) -> Any:
        obs = []
        for i, env in enumerate(self.envs):
            kwargs = {"options": options[i]} if options[i] else {}
            first, self.reset_infos[i] = env.reset(seed=seeds[i], **kwargs)
            obs.append(first)
        return expected_batch(self.observation_space, obs)

    def step(self, actions: list[Any]) -> tuple[Any, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        obs, rewards, dones, infos = [], [], [], []
        for i, env in enumerate(self.envs):
            ob, reward, terminated, truncated, info = env.step(actions[i])
            info = dict(info)
            info["TimeLimit.truncated"] = bool(truncated and not terminated)
            if terminated or truncated:
                info["terminal_observation"] = ob
                ob, self.reset_infos[i] = env.reset()
            obs.append(ob)
            rewards.append(np.float32(reward))
            dones.append(bool(terminated or truncated))
            infos.append(info)
        return expected_batch(self.observation_space, obs), np.array(rewards, np.float32), np.array(dones), infos


def reset_ops(num_envs: int) -> st.SearchStrategy[tuple[str, Any, Any]]:
    """An explicit reset: ``("reset", seed or None, options)`` with options None, one dict, or one per env."""
    options = st.one_of(
        st.none(),
        st.fixed_dictionaries({"level": st.integers(0, 9)}),
        st.lists(
            st.one_of(st.just({}), st.fixed_dictionaries({"level": st.integers(0, 9)})),
            min_size=num_envs,
            max_size=num_envs,
        ),
    )
    return st.tuples(st.just("reset"), st.one_of(st.none(), st.integers(0, 2**32)), options)


def run_agreement(data: st.DataObject, start_method: str, max_envs: int, max_ops: int) -> None:
    """Draw a scenario, run it on the reference, DummyVecEnv and SubprocVecEnv, and compare everything exactly."""
    obs_space = data.draw(flat_spaces(), label="observation_space")
    action_space = data.draw(flat_spaces(), label="action_space")
    num_envs = data.draw(st.integers(1, max_envs), label="num_envs")
    parent_envs = data.draw(st.sampled_from([0, 0, 0, *range(num_envs)]), label="parent_envs")
    n_workers = data.draw(st.integers(1, num_envs - parent_envs), label="n_workers")
    shared_memory = data.draw(st.sampled_from([True, True, True, False]), label="shared_memory")
    special = data.draw(st.booleans(), label="special floats")
    first_reset = data.draw(reset_ops(num_envs), label="first reset")
    ops = data.draw(
        st.lists(
            st.one_of(st.just(("step",)), st.just(("step",)), st.just(("step",)), reset_ops(num_envs)),
            min_size=1,
            max_size=max_ops,
        ),
        label="ops",
    )
    n_steps = sum(op[0] == "step" for op in ops)
    ends = [
        data.draw(
            st.dictionaries(st.integers(1, max(n_steps, 1)), st.sampled_from(END_KINDS), max_size=4), label=f"ends {i}"
        )
        for i in range(num_envs)
    ]
    action_seed = data.draw(st.integers(0, 2**32 - 1), label="action seed")
    env_fns = [
        functools.partial(ScriptedEnv, obs_space, action_space, env_id=i, ends=ends[i], special=special)
        for i in range(num_envs)
    ]
    action_space.seed(action_seed)

    reference = ReferenceEnvs(env_fns, obs_space)
    venvs: list[vecenv.VecEnv] = []
    try:
        venvs.append(vecenv.DummyVecEnv(env_fns))
        venvs.append(
            vecenv.SubprocVecEnv(
                env_fns,
                start_method=start_method,
                n_workers=n_workers,
                shared_memory=shared_memory,
                parent_envs=parent_envs,
            )
        )
        assert venvs[1].n_workers == n_workers
        for venv in venvs:
            assert venv.num_envs == num_envs
            assert venv.observation_space == obs_space and venv.action_space == action_space

        # every result of every call, compared at once and again at the end (returned arrays are the caller's)
        history: list[tuple[str, Any, list[Any]]] = []

        def do_reset(seed: int | None, options: Any) -> None:
            per_env_options = (
                [{} for _ in range(num_envs)]
                if options is None
                else (
                    [copy.deepcopy(options) for _ in range(num_envs)]
                    if isinstance(options, dict)
                    else copy.deepcopy(options)
                )
            )
            seeds = [None] * num_envs if seed is None else [seed + i for i in range(num_envs)]
            expected = (reference.reset(seeds, per_env_options), copy.deepcopy(reference.reset_infos))
            results = []
            for venv in venvs:
                if seed is not None:
                    assert venv.seed(seed) == seeds
                if options is not None:
                    venv.set_options(options)
                obs = venv.reset()
                results.append((obs, list(venv.reset_infos)))
            history.append(("reset", expected, results))
            for venv, result in zip(venvs, results, strict=True):
                assert_identical(result, expected, f"{type(venv).__name__} reset #{len(history)}")

        do_reset(first_reset[1], first_reset[2])
        for op in ops:
            if op[0] == "reset":
                do_reset(op[1], op[2])
                continue
            per_env = [action_space.sample() for _ in range(num_envs)]
            layout = data.draw(st.sampled_from(["list", "batched"]), label="action layout")
            actions = per_env if layout == "list" else batched_actions(action_space, per_env)
            expected_step = reference.step(per_env)
            expected = (*expected_step, copy.deepcopy(reference.reset_infos))
            results = []
            for venv in venvs:
                obs, rewards, dones, infos = venv.step(actions)
                results.append((obs, rewards, dones, infos, list(venv.reset_infos)))
            history.append((f"step ({layout} actions)", expected, results))
            for venv, result in zip(venvs, results, strict=True):
                assert_identical(result, expected, f"{type(venv).__name__} call #{len(history)}")
            # the env puts the action it received into its info (unless empty), so the infos compared above
            # show every backend delivered the sampled actions; check that the reference did too
            for i, info in enumerate(expected[3]):
                if "action" in info:
                    assert_identical(info["action"], canonical(action_space, per_env[i]), f"action of env {i}")

        event(f"num_envs={num_envs} n_workers={n_workers} parent_envs={parent_envs} shared_memory={shared_memory}")
        event(f"observation space {type(obs_space).__name__}, action space {type(action_space).__name__}")
        ends_seen = sum(bool(expected[2].any()) for what, expected, _ in history if what != "reset")
        event(f"steps with an episode end: {ends_seen}")
        for n, (what, expected, results) in enumerate(history, start=1):
            for venv, result in zip(venvs, results, strict=True):
                assert_identical(result, expected, f"{type(venv).__name__} {what} #{n}, re-checked at the end")
    finally:
        for venv in venvs:
            venv.close()


AGREEMENT_SETTINGS = settings(BASE_SETTINGS, print_blob=True)


@settings(AGREEMENT_SETTINGS, max_examples=60)
@given(data=st.data())
def test_backends_agree_with_envs_stepped_by_hand(data: st.DataObject) -> None:
    """Reference == DummyVecEnv == SubprocVecEnv (default start method), every obs leaf, reward, done, info
    (terminal_observation, TimeLimit.truncated, the received action) and reset info, at every call."""
    run_agreement(data, DEFAULT_START_METHOD, max_envs=5, max_ops=8)


@pytest.mark.parametrize(
    "start_method",
    [pytest.param(m, marks=pytest.mark.skipif(m not in START_METHODS, reason=f"no {m}")) for m in ("spawn", "fork")],
)
@settings(AGREEMENT_SETTINGS, max_examples=4)
@given(data=st.data())
def test_backends_agree_other_start_methods(start_method: str, data: st.DataObject) -> None:
    """The same agreement with the spawn and fork start methods (few, small examples: spawn is slow)."""
    run_agreement(data, start_method, max_envs=3, max_ops=4)


# --- what the SB3-style vector envs refuse ---------------------------------------------------------------


@settings(BASE_SETTINGS, max_examples=40)
@given(obs_space=deeply_nested_spaces(), action_space=flat_spaces())
def test_nested_observation_spaces_refused_by_dummy(obs_space: spaces.Space, action_space: spaces.Space) -> None:
    """A Dict/Tuple inside a Dict/Tuple observation space raises SB3's NotImplementedError at construction."""
    with pytest.raises(NotImplementedError, match=SB3_NESTED_MESSAGE):
        vecenv.DummyVecEnv([functools.partial(ScriptedEnv, obs_space, action_space)])


def test_nested_observation_space_refused_by_subproc() -> None:
    obs_space = spaces.Dict({"a": spaces.Tuple((spaces.Discrete(2),)), "b": spaces.Discrete(3)})
    with pytest.raises(NotImplementedError, match=SB3_NESTED_MESSAGE):
        vecenv.SubprocVecEnv([functools.partial(ScriptedEnv, obs_space, spaces.Discrete(2))] * 2)


# --- regressions: bugs this file found (0-d terminal observations, nested action spaces), now fixed -------


def test_zero_dim_terminal_observation_keeps_its_type() -> None:
    """An env returning 0-d arrays (Box of shape ()) gets its terminal observations back as 0-d arrays."""
    venvs: list[vecenv.VecEnv] = []
    try:
        venvs.append(vecenv.DummyVecEnv([ZeroDimObsEnv] * 2))
        venvs.append(vecenv.SubprocVecEnv([ZeroDimObsEnv] * 2, n_workers=1))
        for venv in venvs:
            venv.reset()
            _, _, dones, infos = venv.step(np.array([0, 1]))
            assert dones.tolist() == [True, True]
            for info in infos:
                assert_identical(info["terminal_observation"], np.array(1, dtype=np.int8), type(venv).__name__)
    finally:
        for venv in venvs:
            venv.close()


NESTED_ACTION_SPACES = {
    "dict_in_dict": spaces.Dict({"a": spaces.Dict({"b": spaces.Discrete(3)}), "c": spaces.Discrete(2)}),
    "tuple_in_tuple": spaces.Tuple((spaces.Tuple((spaces.Discrete(3),)), spaces.Discrete(2))),
    "tuple_in_dict": spaces.Dict(
        {"a": spaces.Tuple((spaces.Discrete(3), spaces.Discrete(4))), "c": spaces.Discrete(2)}
    ),
    "dict_in_tuple": spaces.Tuple((spaces.Dict({"x": spaces.Discrete(3)}), spaces.Discrete(2))),
}


@pytest.mark.parametrize("kind", list(NESTED_ACTION_SPACES))
def test_nested_action_spaces_same_on_both_backends(kind: str) -> None:
    """Either both backends refuse a nested action space at construction (NotImplementedError, as for nested
    observation spaces), or both hand every env exactly the action it was given (a list of per-env actions)."""
    action_space = NESTED_ACTION_SPACES[kind]
    action_space.seed(0)
    env_fns = [functools.partial(EchoActionEnv, action_space)] * 3
    refused = []
    for build in (lambda: vecenv.DummyVecEnv(env_fns), lambda: vecenv.SubprocVecEnv(env_fns, n_workers=2)):
        try:
            venv = build()
        except NotImplementedError:
            refused.append(True)
            continue
        refused.append(False)
        try:
            venv.reset()
            for _ in range(3):
                actions = [action_space.sample() for _ in range(3)]
                _, _, _, infos = venv.step(actions)
                for i, info in enumerate(infos):
                    where = f"{type(venv).__name__}: env {i} was sent {actions[i]!r} and received {info['action']!r}"
                    try:
                        received = canonical(action_space, info["action"])
                    except AssertionError:
                        pytest.fail(f"{where} (another structure)")
                    assert_identical(received, canonical(action_space, actions[i]), where)
        finally:
            venv.close()
    assert refused in ([True, True], [False, False])
