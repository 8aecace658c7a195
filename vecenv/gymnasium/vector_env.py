"""The base of :mod:`vecenv.gymnasium`'s vector envs: a vecenv vector env seen through Gymnasium's API."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Generic

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.core import ActType, ObsType
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space, iterate

from vecenv.actions import ARRAY_SPACES, with_valid_rows
from vecenv.base import checked_seed
from vecenv.errors import ClosedVecEnvError
from vecenv.gymnasium.conversions import (
    fresh_batch_to_gymnasium,
    is_array_batch,
    vector_reset_infos,
    vector_step_infos,
)
from vecenv.protocol import EmptyOptions
from vecenv.stats import StepStats
from vecenv.vec_env import DummyVecEnv, WorkerVecEnv

__all__ = ["VecenvVectorEnv", "values_per_env"]


def values_per_env(values: Any, num_envs: int) -> list[Any] | tuple[Any, ...]:
    """``set_attr``'s values: a list or tuple of ``num_envs`` values, or one value repeated (Gymnasium's rule).

    :raises ValueError: Gymnasium's message, if a list or tuple does not hold ``num_envs`` values.
    """
    if not isinstance(values, (list, tuple)):
        return [values for _ in range(num_envs)]
    if len(values) != num_envs:
        raise ValueError(
            "Values must be a list or tuple with length equal to the number of environments. "
            f"Got `{len(values)}` values for {num_envs} environments."
        )
    return values


def _key_orders(space: spaces.Space) -> Any:
    """The key order of every Dict in ``space`` (nested in Dicts and Tuples), as a comparable structure."""
    if isinstance(space, spaces.Dict):
        return [(key, _key_orders(sub)) for key, sub in space.spaces.items()]
    if isinstance(space, spaces.Tuple):
        return [_key_orders(sub) for sub in space.spaces]
    return None


def _missing_final_obs(env_index: int, info: Mapping[str, Any]) -> RuntimeError:
    return RuntimeError(f"vecenv reset env {env_index} at its episode end without its final observation")


class VecenvVectorEnv(VectorEnv[ObsType, ActType, np.ndarray], Generic[ObsType, ActType]):
    """What :class:`~vecenv.gymnasium.SyncVectorEnv` and :class:`~vecenv.gymnasium.AsyncVectorEnv` share: a vecenv
    vector env seen through Gymnasium's API (spaces, reset, step, infos, seeds / options of the next reset)."""

    _venv: WorkerVecEnv
    #: give a finished env's infos in the key order of Gymnasium's AsyncVectorEnv worker
    _final_info_first = False

    def _setup(
        self,
        venv: WorkerVecEnv,
        env_fns: Sequence[Callable[[], gym.Env]],
        copy: bool,
        observation_mode: Any,
        autoreset_mode: AutoresetMode,
        single_observation_space: spaces.Space,
        observation_space: spaces.Space,
        metadata: dict[str, Any],
        render_mode: str | None,
    ) -> None:
        self._venv = venv
        self.env_fns = env_fns
        self.copy = copy
        self.observation_mode = observation_mode
        self.autoreset_mode = autoreset_mode
        self.num_envs = venv.num_envs
        self.metadata = {**metadata, "autoreset_mode": autoreset_mode}
        self.render_mode = render_mode
        self.single_action_space = venv.action_space
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.single_observation_space = single_observation_space
        self.observation_space = observation_space
        # values of in-process envs are the envs' own objects: deep copies where the caller may keep them (a
        # SyncVectorEnv with copy=True), and always for the envs an AsyncVectorEnv steps in this process
        # (parent_envs), as the others' travel pickled
        in_process = copy and isinstance(venv, DummyVecEnv)
        self._deep_obs = in_process or getattr(venv, "parent_envs", 0) > 0
        self._convert_obs = fresh_batch_to_gymnasium(venv.observation_space, deep=self._deep_obs)
        self._actions_as_is = isinstance(self.single_action_space, ARRAY_SPACES)
        #: Gymnasium hands each env a Dict action with the keys in the batched space's order (batch_space sorts
        #: them): where that differs from the env's space, actions go through Gymnasium's iterate as its do
        self._iterate_actions = _key_orders(self.action_space) != _key_orders(self.single_action_space)
        #: the envs whose episode ended at the last step and were not reset since (Gymnasium's name): in NEXT_STEP
        #: mode the next step resets them; in DISABLED mode (SyncVectorEnv) they must be reset before a step
        self._autoreset_envs = np.zeros(self.num_envs, dtype=np.bool_)

    def __getstate__(self) -> dict[str, Any]:
        """``copy.deepcopy`` and ``pickle``, as Gymnasium's ``SyncVectorEnv``: see
        :meth:`vecenv.engine.core.EngineCore.__getstate__` (a :class:`TypeError` where envs run in worker processes)."""
        if not self._venv.copyable:
            raise self._venv.uncopyable_error(type(self).__name__)
        state = self.__dict__.copy()
        del state["_convert_obs"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._convert_obs = fresh_batch_to_gymnasium(self._venv.observation_space, deep=self._deep_obs)

    def step_stats(self, reset: bool = False) -> StepStats:
        """Where the time went (vecenv's :meth:`~vecenv.VecEnv.step_stats`; not part of Gymnasium's API): the
        vector env's side of ``step`` / ``reset`` and each worker's time in its envs, moving data and waiting.

        :param reset: start the accounts again from zero once read.
        """
        return self._venv.step_stats(reset)

    # --- helpers ------------------------------------------------------------------------------------

    def _assert_is_running(self) -> None:
        if self.closed:
            raise ClosedVecEnvError(f"Trying to operate on `{type(self).__name__}`, after a call to `close()`.")

    def _seed_list(self, seed: int | Sequence[int | None] | None) -> list[int | None]:
        """Gymnasium's rule: None -> no seeds, ``s`` -> ``s + i``, a list -> one seed (or None) per env."""
        n = self.num_envs
        if seed is None:
            return [None] * n
        if isinstance(seed, (int, np.integer)):
            return [int(seed) + i for i in range(n)]
        if isinstance(seed, (str, bytes)) or not isinstance(seed, Iterable):
            checked_seed(seed)  # (raises Gymnasium's error for a seed that is not an integer)
        seeds = list(seed)
        if len(seeds) != n:
            raise ValueError(
                f"If seeds are passed as a list the length must match num_envs={n} but got length={len(seeds)}."
            )
        return [checked_seed(s) for s in seeds]

    def _split_options(self, options: dict[str, Any] | None) -> tuple[list[int] | None, dict[str, Any] | None]:
        """``(env ids to reset or None for all, options for the envs)``, with Gymnasium's ``reset_mask`` checks.

        Unlike Gymnasium, the caller's dict is not modified (``reset_mask`` is not popped from it).
        """
        if options is None or "reset_mask" not in options:
            return None, options
        options = dict(options)
        reset_mask = options.pop("reset_mask")
        n = self.num_envs
        if not isinstance(reset_mask, np.ndarray):
            raise TypeError(f"`options['reset_mask']` must be a numpy array, got {type(reset_mask)}")
        if reset_mask.shape != (n,):
            raise ValueError(f"`options['reset_mask']` must have shape `({n},)`, got {reset_mask.shape}")
        if reset_mask.dtype != np.bool_:
            raise TypeError(f"`options['reset_mask']` must have `dtype=np.bool_`, got {reset_mask.dtype}")
        if not np.any(reset_mask):
            raise ValueError(
                "`options['reset_mask']` must contain a boolean array with at least one True value, got "
                f"reset_mask={reset_mask}"
            )
        return np.flatnonzero(reset_mask).tolist(), options

    def _load_reset_args(
        self, seeds: list[int | None], options: dict[str, Any] | None, env_ids: list[int] | None
    ) -> None:
        """Give the coming reset of ``env_ids`` (all if None) its seeds / options; seeds / options set earlier by
        :meth:`seed` / :meth:`set_options` first go to the envs as pending (used where the reset passes none).

        As Gymnasium, each env gets ``options=None`` when the caller gave None, else the caller's dict without
        ``reset_mask`` (``{}`` when nothing else is in it).
        """
        venv = self._venv
        venv.prepare_reset(env_ids)
        venv.push_staged()
        venv.seed(seeds)
        venv.set_options(EmptyOptions() if options is not None and not options else options)

    def _clear_reset_args(self) -> None:
        self._venv.clear_staged()

    def _reset_return(self, env_ids: list[int] | None) -> tuple[Any, dict[str, Any]]:
        venv = self._venv
        self._autoreset_envs[slice(None) if env_ids is None else env_ids] = False
        infos = vector_reset_infos(self._add_info, venv.reset_infos, env_ids)
        return self._convert_obs(venv.current_obs(hand_out=env_ids is None)), infos

    def _convert_actions(self, actions: Any) -> Any:
        """Gymnasium's batched actions in a layout vecenv takes (arrays as they are, else one action per env)."""
        if self._actions_as_is or (not self._iterate_actions and is_array_batch(self.single_action_space, actions)):
            return actions
        return list(iterate(self.action_space, actions))

    def _send_step(self, venv_actions: Any) -> None:
        """``step_async`` of the engine. In ``NEXT_STEP`` mode the actions of the envs this step resets are ignored,
        and Gymnasium does not check them: a batch refused for them alone is sent with valid actions there."""
        try:
            self._venv.step_async(venv_actions)
        except ValueError:
            resetting = self._autoreset_envs
            if self.autoreset_mode is not AutoresetMode.NEXT_STEP or not resetting.any():
                raise
            self._venv.step_async(with_valid_rows(self.single_action_space, venv_actions, resetting))

    def _step_return(
        self, obs: Any, rewards: np.ndarray, dones: np.ndarray, step_infos: list[dict[str, Any]]
    ) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        venv = self._venv
        mode = self.autoreset_mode
        infos = vector_step_infos(
            self._add_info,
            step_infos,
            dones if mode is AutoresetMode.SAME_STEP else None,
            venv.reset_infos,
            _missing_final_obs,
            final_info_first=self._final_info_first,
            reset_steps=self._autoreset_envs
            if mode is AutoresetMode.NEXT_STEP and self._autoreset_envs.any()
            else None,
        )
        self._autoreset_envs = np.array(dones, dtype=np.bool_)
        return self._convert_obs(obs), rewards, venv.terminations, venv.truncations, infos

    # --- seeds / options of the next reset (vecenv's) -------------------------------------------------

    def seed(self, seed: int | Sequence[int | None] | None = None) -> list[int | None]:
        """Set the seed of each env's NEXT reset, whether a call to :meth:`reset` or an automatic reset.

        Nothing is reset now. Each seed is used once, by the env's next reset, then forgotten; an env given None
        keeps the seed an earlier call gave it (if not used yet). A seed passed to :meth:`reset` itself takes
        precedence for the envs that call resets (their pending seed is then dropped). See docs/gymnasium-api.md.

        :param seed: ``s`` (env ``i`` gets ``s + i``), a list of ``num_envs`` seeds (None: no new seed for that
            env), or None (a random base ``s``, as vecenv's ``VecEnv.seed``).
        :return: the seeds given, one per env.
        :raises ValueError: if a list does not hold ``num_envs`` seeds.
        :raises gymnasium.error.Error: if a seed is not an integer or None (Gymnasium's error, as ``reset(seed=...)``).
        :raises gymnasium.error.ClosedEnvironmentError: after :meth:`close`.
        """
        self._assert_is_running()
        n = self.num_envs
        if seed is None:
            seed = int(np.random.randint(0, np.iinfo(np.uint32).max, dtype=np.uint32))
        if isinstance(seed, (int, np.integer)):
            seeds: list[int | None] = [int(seed) + i for i in range(n)]
        else:
            if isinstance(seed, (str, bytes)) or not isinstance(seed, Iterable):  # (not a list of seeds)
                checked_seed(seed)  # (raises Gymnasium's error for a seed that is not an integer)
            seeds = [checked_seed(s) for s in seed]
            if len(seeds) != n:
                raise ValueError(f"seed([...]) must give one seed (or None) per env: expected {n}, got {len(seeds)}")
        venv = self._venv
        earlier = venv.staged_seeds
        venv.seed([s if s is not None else e for s, e in zip(seeds, earlier, strict=True)])
        return seeds

    def set_options(self, options: dict[str, Any] | Sequence[dict[str, Any] | None] | None = None) -> None:
        """Set the ``options`` of each env's NEXT reset, whether a call to :meth:`reset` or an automatic reset.

        Same rule as :meth:`seed`: used once by the env's next reset; an env given None (or ``{}``) keeps the options
        an earlier call gave it; non-empty options passed to :meth:`reset` take precedence. Options are deep-copied.

        :param options: one dict for every env, a list of ``num_envs`` dicts (or None), or None (nothing new).
        :raises ValueError: if a list does not hold ``num_envs`` entries.
        :raises gymnasium.error.ClosedEnvironmentError: after :meth:`close`.
        """
        self._assert_is_running()
        n = self.num_envs
        if options is None:
            return
        entries = [options] * n if isinstance(options, dict) else list(options)
        if len(entries) != n:
            raise ValueError(
                f"set_options([...]) must give one dict (or None) per env: expected {n}, got {len(entries)}"
            )
        venv = self._venv
        earlier = venv.staged_options
        venv.set_options([dict(o) if o else dict(e) for o, e in zip(entries, earlier, strict=True)])

    # --- Gymnasium's attributes -------------------------------------------------------------------------

    @property
    def np_random_seed(self) -> tuple[int, ...]:  # type: ignore[override]
        """The ``np_random_seed`` of every env."""
        return tuple(self.get_attr("np_random_seed"))

    @property  # type: ignore[misc]
    def np_random(self) -> tuple[np.random.Generator, ...]:  # type: ignore[override]
        """The ``np_random`` generator of every env (copies, for :class:`AsyncVectorEnv`)."""
        return tuple(self.get_attr("np_random"))

    def get_attr(self, name: str) -> tuple[Any, ...]:
        """See :meth:`SyncVectorEnv.get_attr` / :meth:`AsyncVectorEnv.get_attr`."""
        raise NotImplementedError
