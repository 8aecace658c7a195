"""vecenv.gymnasium's classes look like Gymnasium's to the libraries that inspect a vector env's class.

Other libraries decide how to drive an env from its class: skrl's ``wrap_env(env)`` (``wrapper="auto"``) from the
names of the class's DIRECT bases, TorchRL and skrl's Gymnasium wrapper with ``isinstance`` checks against
``gymnasium.vector.VectorEnv`` and ``gymnasium.spaces.Space``, TorchRL also from ``str(env)`` and
``env.autoreset_mode``. These tests apply those rules (re-implemented here, the libraries are not dependencies)
to vecenv's classes and to Gymnasium's own, and expect the same answers.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import pickle
import re
from collections.abc import Callable
from functools import partial
from typing import Any, Generic

import gymnasium as gym
import pytest
from gymnasium.vector import VectorEnv

import vecenv.gymnasium as vg
from tests.envs_gym import ParityEnv
from vecenv.gymnasium.vector_env import VecenvVectorEnv

CTX = "fork" if "fork" in mp.get_all_start_methods() else None
PAIRS = [("SyncVectorEnv", {}), ("AsyncVectorEnv", {"context": CTX})]


def env_fns(n: int = 2) -> list[Callable[[], gym.Env]]:
    return [partial(ParityEnv, "box", "discrete", i, 2) for i in range(n)]


def skrl_auto_wrapper(env: Any) -> str | list[str]:
    """The wrapper skrl 2.1 picks for ``wrap_env(env)`` (``wrapper="auto"``): the rule of ``_get_wrapper_name`` in
    skrl/envs/wrappers/torch/__init__.py (the jax and warp packages have the same one).

    The names of the direct bases of ``type(env)`` and of ``type(env.unwrapped)`` (``str(base)`` without
    ``<class '...'>``) are matched, in this order, against the patterns below: a name matches a pattern when it
    contains it or when ``re.match`` (anchored at the start) succeeds. No match: skrl raises
    ``ValueError: Unknown wrapper type: <the sorted base names>``, returned here as that list.
    """

    def base_names(cls: type) -> list[str]:
        return [str(base).replace("<class '", "").replace("'>", "") for base in cls.__bases__]

    names = base_names(type(env))
    with contextlib.suppress(Exception):
        names += base_names(type(env.unwrapped))
    names = sorted(set(names))

    def found(patterns: list[str]) -> bool:
        return any(p in name or re.match(p, name) for name in names for p in patterns)

    rules = [
        (["omni.isaac.lab.*", "isaaclab.*"], "isaaclab-*"),
        (["mujoco_playground..*"], "playground"),
        (["mani_skill.envs..*"], "mani-skill"),
        (["pettingzoo.utils.env", "pettingzoo.utils.wrappers"], "pettingzoo"),
        (["gymnasium..*"], "gymnasium"),
        (["gym..*"], "gym"),
    ]
    for patterns, wrapper in rules:
        if found(patterns):
            return wrapper
    return names


def test_skrl_rule_as_reimplemented_tells_vecenvs_base_from_gymnasiums() -> None:
    """The rule above answers "gymnasium" for Gymnasium's classes and refuses a class whose only direct base is
    vecenv's (with the list of names from skrl's error message): it can tell the two apart."""
    ref = gym.vector.SyncVectorEnv(env_fns())
    try:
        assert skrl_auto_wrapper(ref) == "gymnasium"
    finally:
        ref.close()
    only_vecenv_base = type("SyncVectorEnv", (VecenvVectorEnv,), {})
    bare = only_vecenv_base.__new__(only_vecenv_base)  # (nothing is built: the rule reads the class only)
    assert skrl_auto_wrapper(bare) == ["vecenv.gymnasium.vector_env.VecenvVectorEnv"]


@pytest.mark.parametrize(("name", "kwargs"), PAIRS, ids=[name for name, _ in PAIRS])
def test_skrl_auto_wrapper_picks_gymnasium(name: str, kwargs: dict[str, Any]) -> None:
    envs = getattr(vg, name)(env_fns(), **kwargs)
    try:
        assert skrl_auto_wrapper(envs) == "gymnasium"
        # what skrl's GymnasiumWrapper then checks to treat the env as a vector env
        assert isinstance(envs, gym.vector.VectorEnv)
    finally:
        envs.close()


def test_gymnasium_vector_env_is_a_direct_base_and_the_mro_is_unchanged() -> None:
    for cls in (vg.SyncVectorEnv, vg.AsyncVectorEnv):
        assert VectorEnv in cls.__bases__
        assert cls.__mro__ == (cls, VecenvVectorEnv, VectorEnv, Generic, object)


@pytest.mark.parametrize(("name", "kwargs"), PAIRS, ids=[name for name, _ in PAIRS])
def test_what_clients_read_from_the_class_matches_gymnasium(name: str, kwargs: dict[str, Any]) -> None:
    """Name, qualified name, ``repr`` / ``str``, ``spec``, ``unwrapped``, the ``isinstance`` checks TorchRL makes
    (``GymWrapper``: the env's library from ``isinstance(env.action_space, gymnasium.spaces.Space)``, batched
    from ``isinstance(env.unwrapped, VectorEnv)``, ``env.autoreset_mode``), as Gymnasium's class of the same
    name. ``__module__`` stays vecenv's, so the class pickles by reference (cloudpickled factories,
    ``vec_env_cls`` arguments sent to other processes)."""
    ours_cls, ref_cls = getattr(vg, name), getattr(gym.vector, name)
    ours, ref = ours_cls(env_fns(), **kwargs), ref_cls(env_fns(), **kwargs)
    try:
        assert (ours_cls.__name__, ours_cls.__qualname__) == (ref_cls.__name__, ref_cls.__qualname__)
        assert repr(ours) == repr(ref) == f"{name}(num_envs=2)"
        assert str(ours) == str(ref)
        assert ours.spec is ref.spec is None
        assert ours.unwrapped is ours and ref.unwrapped is ref
        assert isinstance(ours.unwrapped, VectorEnv) and isinstance(ours.action_space, gym.spaces.Space)
        assert ours.autoreset_mode is ref.autoreset_mode
        assert ours.metadata == ref.metadata
        assert ours_cls.__module__ == f"vecenv.gymnasium.{ref_cls.__module__.rsplit('.', 1)[1]}"
        assert pickle.loads(pickle.dumps(ours_cls)) is ours_cls
    finally:
        ours.close()
        ref.close()


@pytest.mark.parametrize(("name", "kwargs"), PAIRS, ids=[name for name, _ in PAIRS])
def test_real_skrl_wrap_env_picks_its_gymnasium_wrapper(name: str, kwargs: dict[str, Any]) -> None:
    """skrl's own ``wrap_env`` where skrl (and torch) are installed (they are not dependencies of vecenv)."""
    wrappers = pytest.importorskip("skrl.envs.wrappers.torch")
    envs = getattr(vg, name)(env_fns(), **kwargs)
    try:
        wrapped = wrappers.wrap_env(envs, verbose=False)
        assert type(wrapped).__name__ == "GymnasiumWrapper"
        assert wrapped.num_envs == 2
    finally:
        envs.close()
