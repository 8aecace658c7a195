"""``to_gymnasium``: a vecenv :class:`~vecenv.VecEnv` seen as a Gymnasium ``VectorEnv`` (``AutoresetMode.SAME_STEP``).

See ``docs/adapters.md`` for the rules and the limitations.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from vecenv.base import VecEnv, _step_is_vecenvs, check_open, is_int
from vecenv.gymnasium.conversions import (
    attribute_values_for_call,
    vecenv_batch_to_gymnasium,
    vector_reset_infos,
    vector_step_infos,
)
from vecenv.interrupts import GUARD
from vecenv.stats import StepStats

__all__ = ["VecEnvToGymnasium", "to_gymnasium"]

#: Methods and attributes ``to_gymnasium`` needs from a vector env (checked by duck typing).
_VECENV_API = ("num_envs", "observation_space", "action_space", "reset", "step", "seed", "set_options")


def _missing_final_obs(env_index: int, info: Mapping[str, Any]) -> RuntimeError:
    return RuntimeError(
        f"env {env_index} ended its episode but its info has no 'terminal_observation' "
        f"(keys: {sorted(info)}); to_gymnasium needs SB3's autoreset convention"
    )


class VecEnvToGymnasium(VectorEnv):
    """A vecenv :class:`~vecenv.VecEnv` seen as a ``gymnasium.vector.VectorEnv`` (same-step autoreset).

    Build it with :func:`to_gymnasium`. ``step`` returns what ``gymnasium.vector.SyncVectorEnv(...,
    autoreset_mode=AutoresetMode.SAME_STEP)`` returns for the same envs, seeds and actions: observations
    in the batched ``observation_space``, float64 rewards ``(num_envs,)``, bool terminations and
    truncations ``(num_envs,)``, and infos as a dict of arrays with ``_key`` masks, where an env whose
    episode ended has its last observation in ``infos["final_obs"][i]``, its last step info in
    ``infos["final_info"]`` and its reset info at the top level.

    :param venv: the vecenv vector env to expose (DummyVecEnv, SubprocVecEnv, any VecEnvWrapper stack).
    :raises TypeError: if ``venv`` lacks the VecEnv API (``num_envs``, spaces, ``reset``, ``step``, ``seed``,
        ``set_options``).
    """

    def __init__(self, venv: VecEnv) -> None:
        missing = [name for name in _VECENV_API if not hasattr(venv, name)]
        if missing:
            raise TypeError(
                f"to_gymnasium(venv): venv must be a vecenv VecEnv (DummyVecEnv, SubprocVecEnv or a VecEnvWrapper "
                f"stack), got {type(venv).__name__} without {', '.join(missing)}"
            )
        self.venv = venv
        self.num_envs = int(venv.num_envs)
        self.single_observation_space = venv.observation_space
        self.single_action_space = venv.action_space
        self.observation_space = batch_space(venv.observation_space, self.num_envs)
        self.action_space = batch_space(venv.action_space, self.num_envs)
        self.metadata = {**getattr(venv, "metadata", {}), "autoreset_mode": AutoresetMode.SAME_STEP}
        self.render_mode = getattr(venv, "render_mode", None)
        self.closed = False
        self._convert_obs = vecenv_batch_to_gymnasium(venv.observation_space)
        base = getattr(venv, "unwrapped", venv)
        if hasattr(base, "gymnasium_resets"):  # reset the envs as Gymnasium's vector envs do (both keywords)
            base.gymnasium_resets = True

    def _reset_infos(self) -> list[dict[str, Any]]:
        # VecEnvWrapper keeps a reset_infos list of its own that is never updated: read the base env's
        base = getattr(self.venv, "unwrapped", self.venv)
        return list(getattr(base, "reset_infos", None) or getattr(self.venv, "reset_infos", None) or [])

    def reset(
        self, *, seed: int | Sequence[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset every env (``venv.seed`` / ``venv.set_options`` then ``venv.reset()``).

        :param seed: None (no seeds), an int ``s`` (env ``i`` gets ``s + i``, as Gymnasium and vecenv), or a
            list of ``num_envs`` ints or Nones (one per env).
        :param options: one dict passed to every env's ``reset``, or None. ``options["reset_mask"]``
            (Gymnasium's partial reset) is not supported: finished envs already reset in the same step.
        :return: ``(obs, infos)``: observations ``(num_envs, *obs_shape)`` in the batched observation space,
            and the reset infos as a dict of arrays with ``_key`` masks.
        :raises TypeError: if ``seed`` or ``options`` has another type.
        :raises ValueError: if a seed list does not have ``num_envs`` entries, or ``options`` has ``reset_mask``.
        :raises ClosedVecEnvError: after :meth:`close`.
        """
        check_open(self, "reset")
        seeds = self._seed_list(seed)
        if options is not None:
            if not isinstance(options, dict):
                raise TypeError(f"reset(options=...) must be a dict or None, got {type(options).__name__}: {options!r}")
            if "reset_mask" in options:
                raise ValueError(
                    "reset(options={'reset_mask': ...}) is not supported by to_gymnasium: vecenv resets finished envs "
                    "in the same step (AutoresetMode.SAME_STEP), so there is nothing to reset; reset all envs instead"
                )
            self.venv.set_options(options)
        if seeds is not None:
            self._apply_seeds(seeds)
        obs = self.venv.reset()
        infos = vector_reset_infos(self._add_info, self._reset_infos())
        return self._convert_obs(obs), infos

    def _seed_list(self, seed: Any) -> list[int | None] | None:
        if seed is None:
            return None
        if is_int(seed):
            return [int(seed) + i for i in range(self.num_envs)]
        if isinstance(seed, (list, tuple)) and all(s is None or is_int(s) for s in seed):
            if len(seed) != self.num_envs:
                raise ValueError(
                    f"reset(seed=[...]) must have one seed per env: expected {self.num_envs} entries, got {len(seed)}"
                )
            return [None if s is None else int(s) for s in seed]
        raise TypeError(f"reset(seed=...) must be None, an int or a list of ints / None per env, got {seed!r}")

    def _apply_seeds(self, seeds: list[int | None]) -> None:
        """Seeds ``[s, s + 1, ...]`` go through ``venv.seed(s)`` (so a vector env whose rows are not its envs, such
        as :class:`~vecenv.pettingzoo.AgentVecEnv`, seeds its envs by its own rule); other lists, one seed (or
        None) per env, through ``venv.seed(seeds)``."""
        if all(s is None for s in seeds):
            return
        first = seeds[0]
        if first is not None and seeds == [first + i for i in range(len(seeds))]:
            self.venv.seed(first)
        else:
            self.venv.seed(seeds)

    def step_stats(self, reset: bool = False) -> StepStats:
        """The wrapped vector env's :meth:`~vecenv.VecEnv.step_stats` (not part of Gymnasium's API).

        :param reset: start the accounts again from zero once read.
        """
        stats: StepStats = self.venv.step_stats(reset)
        return stats

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Step every env (``venv.step(actions)``); finished envs reset in the same step.

        :param actions: a batch of the batched ``action_space``: an array ``(num_envs, *action_shape)``, or for
            Dict / Tuple action spaces a dict / tuple of such arrays.
        :return: ``(obs, rewards, terminations, truncations, infos)``: observations in the batched observation
            space, float64 rewards, bool terminations and truncations, all ``(num_envs,)`` on the env axis;
            infos as a dict of arrays with ``_key`` masks, with ``final_obs`` / ``final_info`` for the envs whose
            episode ended (``infos["final_obs"]`` is an object array ``(num_envs,)``).
        :raises RuntimeError: if the vecenv env reports an episode end without ``terminal_observation``.
        :raises ClosedVecEnvError: after :meth:`close`.
        """
        check_open(self, "step")
        if not _step_is_vecenvs(self.venv):  # (a step or step halves of the caller's: as SB3's, see VecEnv.step)
            return self._step(actions)
        counted = GUARD.enter()  # (one Ctrl-C section with the conversion: its interrupt is raised by the next call)
        try:
            return self._step(actions)
        finally:
            GUARD.leave(counted, raise_at_end=False)

    def _step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        obs, rewards, dones, step_infos = self.venv.step(actions)
        dones = np.asarray(dones, dtype=np.bool_).reshape(self.num_envs)
        terminations, truncations = self._flags(dones, step_infos)
        reset_infos = self._reset_infos() if dones.any() else []
        infos = vector_step_infos(self._add_info, step_infos, dones, reset_infos, _missing_final_obs)
        return (
            self._convert_obs(obs),
            np.asarray(rewards, dtype=np.float64).reshape(self.num_envs),
            terminations,
            truncations,
            infos,
        )

    def _flags(self, dones: np.ndarray, step_infos: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray]:
        """``(terminations, truncations)`` of the step just taken: the base vector env's own flags (vecenv's
        backends and adapters keep both, which may be set together), else SB3's ``TimeLimit.truncated``
        (``truncated and not terminated``) for a base that has none or whose wrappers changed the dones."""
        base = getattr(self.venv, "unwrapped", self.venv)
        terminations = getattr(base, "terminations", None)
        truncations = getattr(base, "truncations", None)
        if isinstance(terminations, np.ndarray) and isinstance(truncations, np.ndarray):
            terminations = terminations.reshape(self.num_envs).astype(np.bool_)
            truncations = truncations.reshape(self.num_envs).astype(np.bool_)
            if np.array_equal(terminations | truncations, dones):
                return terminations, truncations
        truncations = np.array([bool(info.get("TimeLimit.truncated", False)) for info in step_infos], dtype=np.bool_)
        truncations &= dones
        return dones & ~truncations, truncations

    def render(self) -> tuple[Any, ...] | None:
        """One frame per env: ``venv.get_images()`` in ``rgb_array`` mode, else each env's ``render()``.

        :return: a tuple of ``num_envs`` frames (``(H, W, 3)`` uint8 arrays in ``rgb_array`` mode).
        """
        check_open(self, "render")
        if self.render_mode == "rgb_array":
            return tuple(self.venv.get_images())
        return tuple(self.venv.env_method("render"))

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Call method ``name`` of every env (``venv.env_method``); for an attribute that is not callable, its value.

        :param name: method or attribute name (looked up through each env's wrapper chain).
        :return: one result per env.
        """
        check_open(self, "call")
        try:
            return tuple(self.venv.env_method(name, *args, **kwargs))
        except TypeError as error:
            return attribute_values_for_call(error, lambda: self.venv.get_attr(name), refuse=bool(args or kwargs))

    def get_attr(self, name: str) -> tuple[Any, ...]:
        """Attribute ``name`` of every env (``venv.get_attr``).

        :param name: attribute name (looked up through each env's wrapper chain).
        :return: one value per env.
        """
        check_open(self, "get_attr")
        return tuple(self.venv.get_attr(name))

    def set_attr(self, name: str, values: Any) -> None:
        """Set attribute ``name`` of every env (``venv.set_attr``, vecenv's rule: on the outermost wrapper).

        :param name: attribute name.
        :param values: a list or tuple of ``num_envs`` values (one per env), or one value for every env.
        :raises ValueError: if a list or tuple does not have ``num_envs`` values.
        """
        check_open(self, "set_attr")
        if not isinstance(values, (list, tuple)):
            self.venv.set_attr(name, values)
            return
        if len(values) != self.num_envs:
            raise ValueError(
                f"set_attr(name, values): values must have one entry per env ({self.num_envs}), got {len(values)}"
            )
        for i, value in enumerate(values):
            self.venv.set_attr(name, value, indices=i)

    def close_extras(self, **kwargs: Any) -> None:
        """Close the vecenv vector env (called once by ``close()``)."""
        self.venv.close()


def to_gymnasium(venv: VecEnv) -> VecEnvToGymnasium:
    """Expose a vecenv vector env as a ``gymnasium.vector.VectorEnv`` (``AutoresetMode.SAME_STEP``).

    :param venv: any vecenv VecEnv: DummyVecEnv, SubprocVecEnv or a VecEnvWrapper stack. From now on its
        envs are reset as Gymnasium's vector envs reset them: ``env.reset(seed=seed, options=options)``, both
        keywords always passed (its ``gymnasium_resets`` is set).
    :return: a :class:`VecEnvToGymnasium` that steps ``venv``; closing it closes ``venv``.
    :raises TypeError: if ``venv`` is not a vecenv VecEnv.

    >>> import gymnasium as gym
    >>> from vecenv import DummyVecEnv
    >>> envs = to_gymnasium(DummyVecEnv([lambda: gym.make("CartPole-v1")] * 2))
    >>> obs, infos = envs.reset(seed=0)
    >>> obs.shape, envs.metadata["autoreset_mode"]
    ((2, 4), <AutoresetMode.SAME_STEP: 'SameStep'>)
    >>> envs.close()
    """
    return VecEnvToGymnasium(venv)
