"""The :class:`VecEnvWrapper` base class (Stable-Baselines3's, with its attribute lookup rules)."""

from __future__ import annotations

import inspect
from abc import abstractmethod
from collections.abc import Sequence
from typing import Any, TypeVar, cast

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode

from vecenv.base import VecEnv, VecEnvIndices, VecEnvObs, VecEnvStepReturn
from vecenv.sb3_compat import sb3_counterpart
from vecenv.stats import StepStats

__all__ = ["VecEnvWrapper", "VecEnvWrapperT", "is_vecenv_wrapped", "unwrap_vec_wrapper"]


class VecEnvWrapper(VecEnv):
    """Base class of vectorized-environment wrappers; forwards everything it does not override to ``venv``.

    Subclasses implement :meth:`reset` and :meth:`step_wait` (and :meth:`step_async` if they change
    actions), and must transform ``infos[i]["terminal_observation"]`` exactly as they transform observations.

    Unknown attributes are looked up down the wrapper stack (SB3 semantics): ``wrapper.foo`` finds the
    first level that defines ``foo``; if a level further down also defines it, the lookup is ambiguous
    and raises :class:`AttributeError`.

    :param venv: the vectorized environment to wrap.
    :param observation_space: the wrapper's observation space (None: ``venv.observation_space``).
    :param action_space: the wrapper's action space (None: ``venv.action_space``).
    """

    def __init__(
        self,
        venv: VecEnv,
        observation_space: spaces.Space | None = None,
        action_space: spaces.Space | None = None,
    ) -> None:
        self.venv = venv
        super().__init__(
            num_envs=venv.num_envs,
            observation_space=observation_space or venv.observation_space,
            action_space=action_space or venv.action_space,
        )
        self.class_attributes = dict(inspect.getmembers(self.__class__))

    def step_async(self, actions: np.ndarray) -> None:
        self.venv.step_async(actions)

    @abstractmethod
    def reset(self) -> VecEnvObs:
        pass

    @abstractmethod
    def step_wait(self) -> VecEnvStepReturn:
        pass

    def seed(self, seed: int | Sequence[int | None] | None = None) -> Sequence[int | None]:
        return self.venv.seed(seed)

    def set_options(self, options: list[dict] | dict | None = None) -> None:
        return self.venv.set_options(options)

    def close(self) -> None:
        return self.venv.close()

    def step_stats(self, reset: bool = False) -> StepStats:
        """The wrapped vector env's :meth:`~vecenv.VecEnv.step_stats` (a wrapper's own work counts as the
        caller's time, ``outside_seconds``).

        :raises NotImplementedError: if the wrapped vector env keeps no step accounts (not one of vecenv's).
        """
        step_stats = getattr(self.venv, "step_stats", None)
        if step_stats is None:
            return VecEnv.step_stats(self.venv, reset)  # (names the vector env without accounts)
        return step_stats(reset)

    def render(self, mode: str | None = None) -> np.ndarray | None:
        return self.venv.render(mode=mode)

    def get_images(self) -> Sequence[np.ndarray | None]:
        return self.venv.get_images()

    def has_attr(self, attr_name: str) -> bool:
        return self.venv.has_attr(attr_name)

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        return self.venv.get_attr(attr_name, indices)

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        return self.venv.set_attr(attr_name, value, indices)

    def env_method(
        self, method_name: str, *method_args: Any, indices: VecEnvIndices = None, **method_kwargs: Any
    ) -> list[Any]:
        return self.venv.env_method(method_name, *method_args, indices=indices, **method_kwargs)

    def env_is_wrapped(self, wrapper_class: type[gym.Wrapper], indices: VecEnvIndices = None) -> list[bool]:
        return self.venv.env_is_wrapped(wrapper_class, indices=indices)

    @property
    def unwrapped(self) -> VecEnv:
        return self.venv.unwrapped

    def _no_partial_batches(self, name: str) -> NotImplementedError:
        return NotImplementedError(
            f"{type(self).__name__} does not support partial batches ({name}): wrappers transform full "
            "batches only (step_async/step_wait). Call it on the base vector env (venv.unwrapped), "
            "knowing that no wrapper will see those steps."
        )

    def async_reset(self) -> None:
        """Not supported through wrappers: :class:`NotImplementedError` (instead of silently bypassing the wrapper)."""
        raise self._no_partial_batches("async_reset")

    def send(self, actions: Any, env_ids: VecEnvIndices) -> None:
        """Not supported through wrappers: :class:`NotImplementedError` (instead of silently bypassing the wrapper)."""
        raise self._no_partial_batches("send")

    def recv(self) -> Any:
        """Not supported through wrappers: :class:`NotImplementedError` (instead of silently bypassing the wrapper)."""
        raise self._no_partial_batches("recv")

    def __getattr__(self, name: str) -> Any:
        """Find ``name`` down the wrapper stack; :class:`AttributeError` if the lookup is ambiguous."""
        if name.startswith("__") or name in ("venv", "class_attributes"):
            # not set yet (during unpickling or __init__): never recurse
            raise AttributeError(name)
        blocked_class = self.getattr_depth_check(name, already_found=False)
        if blocked_class is not None:
            own_class = f"{type(self).__module__}.{type(self).__name__}"
            raise AttributeError(
                f"Error: Recursive attribute lookup for {name} from {own_class} is "
                f"ambiguous and hides attribute from {blocked_class}"
            )
        return self.getattr_recursive(name)

    def _get_all_attributes(self) -> dict[str, Any]:
        """Instance attributes plus class attributes of this wrapper."""
        all_attributes = self.__dict__.copy()
        all_attributes.update(self.class_attributes)
        return all_attributes

    def getattr_recursive(self, name: str) -> Any:
        """Return ``name`` from the first level of the stack (this one first) that defines it."""
        if name in self._get_all_attributes():
            return getattr(self, name)
        if hasattr(self.venv, "getattr_recursive"):
            return self.venv.getattr_recursive(name)
        return getattr(self.venv, name)

    def getattr_depth_check(self, name: str, already_found: bool) -> str | None:
        """See :meth:`VecEnv.getattr_depth_check`."""
        all_attributes = self._get_all_attributes()
        if name in all_attributes and already_found:
            return f"{type(self).__module__}.{type(self).__name__}"
        if name in all_attributes and not already_found:
            return self.venv.getattr_depth_check(name, True)
        return self.venv.getattr_depth_check(name, already_found)


VecEnvWrapperT = TypeVar("VecEnvWrapperT", bound=VecEnvWrapper)


def autoreset_mode_of(venv: VecEnv) -> AutoresetMode:
    """The rule ``venv``'s steps follow at an episode end: its ``autoreset_mode`` (DummyVecEnv, SubprocVecEnv,
    adapters; found through wrappers), else SB3's ``SAME_STEP``."""
    return AutoresetMode(getattr(venv, "autoreset_mode", AutoresetMode.SAME_STEP))


def resets_next(dones: np.ndarray, infos: Sequence[dict[str, Any]]) -> np.ndarray:
    """``NEXT_STEP`` mode: bool ``(num_envs,)``, the envs whose next step resets them instead of stepping them
    (reward 0, not done, a first observation): those whose episode ended at this step, except the envs of a
    restarted worker (``infos[i]["vecenv.restarted"]``), which returned their new first observation already."""
    resetting = np.array(dones, dtype=bool)
    for i in np.flatnonzero(resetting).tolist():
        if infos[i].get("vecenv.restarted", False):
            resetting[i] = False
    return resetting


def wrapper_below(venv: Any, classes: tuple[type, ...]) -> Any:
    """The first vector env in the stack of ``venv`` (``venv`` itself, then each ``venv`` attribute down, whatever
    library's wrappers the stack holds) that is one of ``classes`` (see :func:`stack_classes`), or None.

    Unlike :func:`unwrap_vec_wrapper`, the walk goes on through any object with a ``venv`` attribute, not only
    through wrappers: it looks for what a stack holds, not for SB3's semantics."""
    env: Any = venv
    while env is not None:
        if is_one_of(env, classes):
            return env
        env = env.__dict__.get("venv") if hasattr(env, "__dict__") else None
    return None


def stack_classes(vecenv_class: type) -> tuple[type, ...]:
    """``vecenv_class`` and, where SB3 is loaded, SB3's class it stands for: what a walk down a stack that mixes
    both libraries' wrappers matches (SB3's own helpers match vecenv's classes, registered as SB3's)."""
    counterpart = sb3_counterpart(vecenv_class)
    return (vecenv_class,) if counterpart is None else (vecenv_class, counterpart)


def is_one_of(obj: Any, classes: tuple[type, ...]) -> bool:
    """``isinstance(obj, classes)``, without narrowing the type of ``obj`` (a walk down a stack keeps it ``Any``)."""
    return isinstance(obj, classes)


def unwrap_vec_wrapper(env: VecEnv, vec_wrapper_class: type[VecEnvWrapperT]) -> VecEnvWrapperT | None:
    """Return the outermost wrapper of type ``vec_wrapper_class`` in the stack of ``env`` (SB3 semantics).

    The walk goes through SB3's wrappers as well as vecenv's, and vecenv's classes also match their SB3
    counterparts (``unwrap_vec_wrapper(env, vecenv.VecNormalize)`` finds SB3's ``VecNormalize``), as SB3's
    helper, which sees vecenv's classes as its own, does the other way round.

    :param env: a vectorized environment, wrapped or not.
    :param vec_wrapper_class: the wrapper class to look for (subclasses match too).
    :return: the first matching wrapper walking down from ``env``, or None.
    """
    wrappers = stack_classes(VecEnvWrapper)
    targets = stack_classes(vec_wrapper_class)
    env_tmp: Any = env
    while is_one_of(env_tmp, wrappers):
        if is_one_of(env_tmp, targets):
            return cast(VecEnvWrapperT, env_tmp)
        env_tmp = env_tmp.venv
    return None


def is_vecenv_wrapped(env: VecEnv, vec_wrapper_class: type[VecEnvWrapper]) -> bool:
    """Whether ``env`` has a wrapper of type ``vec_wrapper_class`` anywhere in its stack (SB3 semantics)."""
    return unwrap_vec_wrapper(env, vec_wrapper_class) is not None
