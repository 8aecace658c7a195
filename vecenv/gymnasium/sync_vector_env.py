"""``vecenv.gymnasium.SyncVectorEnv``: Gymnasium's ``SyncVectorEnv`` on vecenv's :class:`~vecenv.DummyVecEnv`."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.core import ActType, ObsType
from gymnasium.spaces.utils import is_space_dtype_shape_equiv
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_differing_spaces, batch_space

from vecenv.gymnasium.observation_modes import (
    CheckedFactory,
    SpaceHolder,
    check_observation_mode,
    not_equivalent_error,
    unwrap_space_override,
)
from vecenv.gymnasium.vector_env import VecenvVectorEnv, values_per_env
from vecenv.interrupts import guarded
from vecenv.vec_env import DummyVecEnv

__all__ = ["GymDummyVecEnv", "SyncVectorEnv"]


class GymDummyVecEnv(DummyVecEnv):
    """The in-process backend of :class:`SyncVectorEnv`: float64 rewards, nested spaces allowed."""

    rewards_dtype = np.float64
    nested_spaces = True
    gymnasium_resets = True
    mixed_render_modes = True


# Gymnasium's VectorEnv is listed as a direct base (it is VecenvVectorEnv's base too, so the MRO is unchanged):
# libraries that recognise a Gymnasium vector env by a class's direct bases (skrl's wrap_env) see one
class SyncVectorEnv(VecenvVectorEnv[ObsType, ActType], VectorEnv[ObsType, ActType, np.ndarray]):
    """``gymnasium.vector.SyncVectorEnv`` on vecenv's :class:`~vecenv.DummyVecEnv`: the envs step in sequence
    in the calling process.

    Same constructor, methods and return values as Gymnasium's class: ``reset(seed=, options=) -> (obs,
    infos)``, ``step(actions) -> (obs, rewards, terminations, truncations, infos)`` with observations in the
    batched :attr:`observation_space`, float64 rewards ``(num_envs,)``, bool terminations / truncations
    ``(num_envs,)`` and infos as a dict of arrays with ``_key`` masks (``final_obs`` / ``final_info`` in
    ``SAME_STEP`` mode). ``options={"reset_mask": mask}`` resets only the envs where the bool array ``mask``
    ``(num_envs,)`` is True.

    :param env_fns: callables that each build a new ``gymnasium.Env``.
    :param copy: deep-copy observations of spaces Gymnasium batches as tuples (Text, Sequence, ...) before
        returning them; array observations are always fresh arrays.
    :param observation_mode: ``"same"`` (every env has the same observation space), ``"different"`` (same
        shape and dtype, other bounds; the batched space joins them) or ``(observation_space,
        single_observation_space)``.
    :param autoreset_mode: a :class:`gymnasium.vector.AutoresetMode` or its value (``NEXT_STEP`` by default).
    :raises RuntimeError: if the envs' spaces differ (Gymnasium's messages).
    :raises TypeError: if ``env_fns`` is not a list of callables returning ``gymnasium.Env`` objects, or a tuple
        ``observation_mode`` does not hold two spaces.
    :raises ValueError: for an unknown ``observation_mode`` or ``autoreset_mode``.
    """

    _venv: GymDummyVecEnv

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env]],
        copy: bool = True,
        observation_mode: str | tuple[spaces.Space, spaces.Space] = "same",
        autoreset_mode: str | AutoresetMode = AutoresetMode.NEXT_STEP,
    ) -> None:
        mode = autoreset_mode if isinstance(autoreset_mode, AutoresetMode) else AutoresetMode(autoreset_mode)
        given_spaces = check_observation_mode(observation_mode)
        if isinstance(env_fns, (str, bytes)) or not isinstance(env_fns, Iterable):
            raise TypeError(f"env_fns must be a list of callables returning a gymnasium.Env, got {env_fns!r}")
        holder = SpaceHolder(None if given_spaces is None else given_spaces[1])
        space_check = "same" if observation_mode == "same" else "defer"
        checked_fns: list[Callable[[], gym.Env]] = [
            CheckedFactory(fn, holder, space_check, "SyncVectorEnv") if callable(fn) else fn for fn in env_fns
        ]
        venv = GymDummyVecEnv(checked_fns, autoreset_mode=mode)
        try:
            envs = [unwrap_space_override(env) for env in venv.envs]
            if given_spaces is not None:
                observation_space, single = given_spaces
            else:
                single = envs[0].observation_space
                if observation_mode == "same":
                    observation_space = batch_space(single, len(envs))
                else:
                    observation_space = batch_differing_spaces([env.observation_space for env in envs])
            if observation_mode != "same":  # Gymnasium's checks, in its order, once every env is built
                for env in envs:
                    if not is_space_dtype_shape_equiv(env.observation_space, single):
                        raise not_equivalent_error("SyncVectorEnv", single, env.observation_space)
            self._setup(
                venv,
                env_fns,
                copy,
                observation_mode,
                mode,
                single,
                observation_space,
                dict(envs[0].metadata),
                envs[0].render_mode,
            )
        except BaseException:
            with contextlib.suppress(Exception):
                venv.close()
            raise

    @property
    def envs(self) -> list[gym.Env]:
        """The sub-envs, in order (as built by ``env_fns``)."""
        return [unwrap_space_override(env) for env in self._venv.envs]

    def reset(
        self,
        *,
        seed: int | list[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[ObsType, dict[str, Any]]:
        """Reset every env, or the envs of ``options["reset_mask"]``.

        :param seed: None (no seeds, or those set by :meth:`seed`), ``s`` (env ``i`` gets ``s + i``) or a list of
            ``num_envs`` seeds / Nones.
        :param options: passed to every env's ``reset`` (without ``reset_mask``); ``{"reset_mask": mask}`` with
            a bool array ``(num_envs,)`` resets only those envs.
        :return: ``(obs, infos)``: the batch of observations (rows of envs not reset keep their last
            observation) and the reset infos of the envs reset, as a dict of arrays with ``_key`` masks.
        :raises ValueError: if a seed list does not have ``num_envs`` entries, or ``reset_mask`` has the wrong
            shape or no True value (Gymnasium's messages).
        :raises TypeError: if ``reset_mask`` is not a bool numpy array.
        :raises gymnasium.error.ClosedEnvironmentError: after :meth:`close`.
        """
        self._assert_is_running()
        seeds = self._seed_list(seed)
        env_ids, options = self._split_options(options)
        self._load_reset_args(seeds, options, env_ids)
        try:
            self._venv.reset_envs(env_ids)
        finally:
            self._clear_reset_args()
        return self._reset_return(env_ids)

    @guarded(raise_at_end=False)
    def step(self, actions: ActType) -> tuple[ObsType, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Step every env with its action of the batch ``actions``.

        :param actions: an element of the batched :attr:`action_space`: an array ``(num_envs, *action_shape)``,
            a dict / tuple of such batches for Dict / Tuple spaces, a tuple of per-env actions for Text-like spaces.
        :return: ``(obs, rewards, terminations, truncations, infos)``: observations in the batched observation
            space, float64 rewards and bool terminations / truncations ``(num_envs,)``, infos as a dict of
            arrays with ``_key`` masks (``final_obs`` / ``final_info`` of the envs that reset in ``SAME_STEP`` mode).
        :raises AssertionError: in ``DISABLED`` mode, if an env whose episode ended has not been reset (as
            Gymnasium; nothing is stepped).
        :raises ValueError: if ``actions`` does not hold one valid action per env (checked before any env steps).
        :raises gymnasium.error.ClosedEnvironmentError: after :meth:`close`.
        """
        self._assert_is_running()
        venv_actions = self._convert_actions(actions)
        if self.autoreset_mode is AutoresetMode.DISABLED and self._autoreset_envs.any():
            raise AssertionError(
                f"envs {np.flatnonzero(self._autoreset_envs).tolist()} ended their episode and autoreset_mode is "
                "DISABLED: reset them (reset(options={'reset_mask': mask})) before stepping again; "
                f"self._autoreset_envs={self._autoreset_envs!r}"
            )
        venv = self._venv
        self._send_step(venv_actions)
        obs, rewards, dones, step_infos = venv.step_wait()
        return self._step_return(obs, rewards, dones, step_infos)

    def render(self) -> tuple[Any, ...]:
        """``env.render()`` of every env.

        :return: one frame per env (an ``(H, W, 3)`` uint8 array in ``rgb_array`` mode).
        """
        self._assert_is_running()
        return tuple(env.render() for env in self.envs)

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Call method ``name`` of every env (found through its wrappers); for an attribute, its value.

        :param name: method or attribute name.
        :return: one result per env.
        :raises AttributeError: if an env has no ``name``.
        """
        self._assert_is_running()
        results = []
        for env in self.envs:
            function = env.get_wrapper_attr(name)
            results.append(function(*args, **kwargs) if callable(function) else function)
        return tuple(results)

    def get_attr(self, name: str) -> tuple[Any, ...]:
        """Attribute ``name`` of every env (as Gymnasium: ``call(name)``, so a method is called).

        :param name: attribute name (found through each env's wrappers).
        :return: one value per env.
        """
        return self.call(name)

    def set_attr(self, name: str, values: list[Any] | tuple[Any, ...] | Any) -> None:
        """Set attribute ``name`` of the envs with ``env.set_wrapper_attr`` (Gymnasium's rule).

        :param name: attribute name.
        :param values: a list or tuple with one value per env, or one value for every env.
        :raises ValueError: if a list or tuple does not hold ``num_envs`` values (Gymnasium's message).
        """
        self._assert_is_running()
        values = values_per_env(values, self.num_envs)
        for env, value in zip(self.envs, values, strict=True):
            env.set_wrapper_attr(name, value)

    def close_extras(self, **kwargs: Any) -> None:
        """Close every env (called once by ``close()``).

        :raises Exception: the first error an env's ``close()`` raised.
        """
        # (a constructor that raised has nothing to close: Gymnasium < 1.3's __del__ calls close() on it too)
        if "_venv" not in vars(self):
            return
        self._venv.close()
