"""What vecenv does with one sub-env besides stepping it: build it from its factory (checking what the factory
returns), compare its spaces with env 0's, find a wrapper in its chain (SB3's ``is_wrapped``), copy what it
returns (infos, observations) so the caller may keep it, and check that its rewards are numbers."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from copy import deepcopy
from typing import Any

import gymnasium as gym
import numpy as np

from vecenv.errors import add_env_context
from vecenv.protocol import Command
from vecenv.sb3_compat import matches_wrapper, wrapper_target

__all__ = [
    "SubEnvRequests",
    "build_env",
    "check_distinct_envs",
    "check_same_spaces",
    "copy_info",
    "copy_observation",
    "is_number",
    "is_wrapped",
    "reward_error",
    "scalar_rewards",
]

# info values that cannot change after the env returned them, so a shallow copy of the dict suffices
_ATOMIC = frozenset(
    {bool, int, float, complex, str, bytes, type(None), np.bool_, np.int32, np.int64, np.float32, np.float64}
)

SAME_INSTANCE_MESSAGE = (
    "You tried to create multiple environments, but the function to create them returned the same instance "
    "instead of creating different objects. "
    "You are probably using `make_vec_env(lambda: env)` or `DummyVecEnv([lambda: env] * n_envs)`. "
    "You should replace `lambda: env` by a `make_env` function that "
    "creates a new instance of the environment at every call "
    "(using `gym.make()` for instance). You can take a look at the documentation for an example. "
    "Please read https://github.com/DLR-RM/stable-baselines3/issues/1151 for more information."
)


def copy_info(env_info: dict[str, Any]) -> dict[str, Any]:
    """A copy of an env's info the caller may keep, equal to ``deepcopy(env_info)`` (SB3) but cheaper for the
    common infos: immutable values are shared, plain dicts of immutable keys and values (``Monitor``'s
    ``info["episode"]``) are copied with ``dict()``, arrays without Python objects with ``copy(order="K")`` (what
    their ``__deepcopy__`` does); an info holding anything else takes ``deepcopy``. A value held under two keys
    stays one object in the copy, as ``deepcopy`` keeps it."""
    info = dict(env_info)
    copied: dict[int, Any] | None = None
    for key, value in info.items():
        kind = type(value)
        if kind in _ATOMIC:
            continue
        if type(env_info) is not dict:  # (deepcopy keeps a dict subclass's type)
            return deepcopy(env_info)
        if kind is dict:
            if not all(type(k) in _ATOMIC and type(v) in _ATOMIC for k, v in value.items()):
                return deepcopy(env_info)
        elif kind is not np.ndarray or value.dtype.hasobject:
            return deepcopy(env_info)
        if copied is None:
            copied = {}
        twin = copied.get(id(value))
        if twin is None:
            twin = copied[id(value)] = dict(value) if kind is dict else value.copy(order="K")
        info[key] = twin  # (replacing a key's value while iterating is allowed)
    return info


def copy_observation(obs: Any) -> Any:
    """``deepcopy(obs)``; an array without Python objects is copied directly (what its ``__deepcopy__`` does)."""
    if type(obs) is np.ndarray and not obs.dtype.hasobject:
        return obs.copy(order="K")
    return deepcopy(obs)


def is_wrapped(env: gym.Env, wrapper_class: type[gym.Wrapper] | frozenset[str]) -> bool:
    """Whether ``wrapper_class`` appears in the ``gymnasium.Wrapper`` chain of ``env`` (SB3's ``is_wrapped``).

    SB3's ``Monitor`` and vecenv's ``Monitor`` stand for each other (SB3's ``evaluate_policy`` asks for SB3's);
    ``wrapper_class`` may also be the full class names :func:`vecenv.sb3_compat.wrapper_target` gives.
    """
    target = wrapper_target(wrapper_class)
    current: Any = env
    while isinstance(current, gym.Wrapper):
        if matches_wrapper(current, target):
            return True
        current = current.env
    return False


def build_env(env_fn: Callable[[], gym.Env], env_index: int) -> gym.Env:
    if not callable(env_fn):
        raise TypeError(
            f"env_fns[{env_index}] must be a callable returning a gymnasium.Env, got {type(env_fn).__name__}: "
            f"{env_fn!r}. Pass e.g. `lambda: gymnasium.make('CartPole-v1')`, not the env itself."
        )
    try:
        env = env_fn()
    except Exception as exc:
        add_env_context(exc, env_index, "env construction (calling env_fns[i]())")
        raise
    if not isinstance(env, gym.Env):
        raise TypeError(
            f"env_fns[{env_index}]() must return a gymnasium.Env, got {type(env).__module__}.{type(env).__qualname__}. "
            "Old `gym` environments can be converted with shimmy's compatibility wrappers."
        )
    return env


def _same_space(a: gym.Space, b: gym.Space) -> bool:
    """Space equality; custom spaces without their own ``__eq__`` compare by type, shape and dtype."""
    if type(a).__eq__ is object.__eq__:
        return type(a) is type(b) and a.shape == b.shape and a.dtype == b.dtype
    return bool(a == b)


def check_same_spaces(
    env_index: int,
    observation_space: gym.Space,
    action_space: gym.Space,
    expected_observation_space: gym.Space,
    expected_action_space: gym.Space,
) -> None:
    """Raise a :class:`ValueError` naming ``env_index`` if its spaces differ from env 0's.

    :raises ValueError: with both spaces in the message.
    """
    for kind, got, expected in (
        ("observation_space", observation_space, expected_observation_space),
        ("action_space", action_space, expected_action_space),
    ):
        if not _same_space(got, expected):
            raise ValueError(
                f"All sub-envs must share the same spaces, but env {env_index} has {kind} {got!r} "
                f"while env 0 has {expected!r}. Make every env factory build the same kind of env."
            )


def check_distinct_envs(envs: list[gym.Env]) -> None:
    """Raise SB3's :class:`ValueError` if two factories returned the same env instance (``lambda: env``)."""
    if len({id(env.unwrapped) for env in envs}) != len(envs):
        raise ValueError(SAME_INSTANCE_MESSAGE)


class SubEnvRequests:
    """The requests on a group's envs other than stepping and resetting (attributes, methods, wrappers, frames),
    each on the envs at the given local indices; an env's error carries a note naming it. Mixed into
    :class:`~vecenv.env_group.EnvGroup`, which provides ``envs`` and ``_fail``."""

    envs: list[gym.Env]

    def _fail(self, exc: BaseException, local_index: int, command: Command) -> None:
        raise NotImplementedError

    def _call_each(self, command: Command, indices: Sequence[int], fn: Callable[[gym.Env], Any]) -> list[Any]:
        results = []
        for j in indices:
            try:
                results.append(fn(self.envs[j]))
            except Exception as exc:
                self._fail(exc, j, command)
                raise
        return results

    def get_attr(self, payload: tuple[str, Sequence[int]]) -> list[Any]:
        """``(name, indices)`` -> ``env.get_wrapper_attr(name)`` of each env (searches the wrapper chain)."""
        name, indices = payload
        return self._call_each(Command.GET_ATTR, indices, lambda env: env.get_wrapper_attr(name))

    def set_attr(self, payload: tuple[str, Any, Sequence[int]]) -> None:
        """``(name, value, indices)`` -> ``setattr`` on the outermost wrapper (SB3; Gymnasium >= 1 does not forward)."""
        name, value, indices = payload
        self._call_each(Command.SET_ATTR, indices, lambda env: setattr(env, name, value))

    def has_attr(self, payload: tuple[str, Sequence[int]]) -> list[bool]:
        """``(name, indices)`` -> whether each env's wrapper chain has attribute ``name``."""
        name, indices = payload

        def has(env: gym.Env) -> bool:
            try:
                env.get_wrapper_attr(name)
            except AttributeError:
                return False
            return True

        return self._call_each(Command.HAS_ATTR, indices, has)

    def env_method(self, payload: tuple[str, tuple[Any, ...], dict[str, Any], Sequence[int]]) -> list[Any]:
        """``(name, args, kwargs, indices)`` -> ``env.get_wrapper_attr(name)(*args, **kwargs)`` per env."""
        name, args, kwargs, indices = payload
        return self._call_each(Command.ENV_METHOD, indices, lambda env: env.get_wrapper_attr(name)(*args, **kwargs))

    def call(self, payload: tuple[str, tuple[Any, ...], dict[str, Any], Sequence[int]]) -> list[Any]:
        """``(name, args, kwargs, indices)`` -> Gymnasium's ``call`` per env: ``env.get_wrapper_attr(name)``, read
        once, then called with ``args`` / ``kwargs`` if it is callable, else returned as it is."""
        name, args, kwargs, indices = payload

        def call(env: gym.Env) -> Any:
            value = env.get_wrapper_attr(name)
            return value(*args, **kwargs) if callable(value) else value

        return self._call_each(Command.CALL, indices, call)

    def is_wrapped(self, payload: tuple[type[gym.Wrapper], Sequence[int]]) -> list[bool]:
        """``(wrapper_class, indices)`` -> whether each env's wrapper chain contains ``wrapper_class``."""
        wrapper_class, indices = payload
        return self._call_each(Command.IS_WRAPPED, indices, lambda env: is_wrapped(env, wrapper_class))

    def render(self, payload: tuple[Sequence[int]]) -> list[Any]:
        """``(indices,)`` -> ``env.render()`` of each env (an ``(H, W, 3)`` uint8 frame in ``rgb_array`` mode)."""
        (indices,) = payload
        return self._call_each(Command.RENDER, indices, lambda env: env.render())


def is_number(value: Any) -> bool:
    """Whether ``value`` is one real number (Python's, a numpy scalar, a 0-d array): what a reward must be."""
    return np.ndim(value) == 0 and np.asarray(value).dtype.kind in "biuf"


def scalar_rewards(rewards: list[Any]) -> tuple[list[Any], int | None]:
    """Rewards that numpy could not store as one number per env, read as SB3's ``DummyVecEnv`` stores them: an
    array of one element is that element.

    :return: ``(rewards, position)``: the rewards so read, and the position of the first that is still not one
        number (a multi-objective env's vector, a string), or None if there is none.
    """
    read = [np.asarray(reward).reshape(()) if np.size(reward) == 1 else reward for reward in rewards]
    return read, next((p for p, reward in enumerate(read) if not is_number(reward)), None)


def reward_error(env_index: int, reward: Any) -> ValueError:
    """The error for env ``env_index``'s reward that is not one number, saying what to do."""
    return ValueError(
        f"vecenv: env {env_index} returned a reward of {type(reward).__name__} {np.shape(reward)} ({reward!r:.60}): "
        "a vector env's rewards are one number per env. Make the env return one (a multi-objective env: wrap it "
        "in a scalarizing wrapper, e.g. mo_gymnasium's LinearReward)."
    )
