"""Adapters between vecenv's Stable-Baselines3-style :class:`~vecenv.VecEnv` and Gymnasium's ``VectorEnv``.

- :func:`to_gymnasium` / :class:`VecEnvToGymnasium`: a vecenv ``VecEnv`` (any backend, any wrapper
  stack) seen as a ``gymnasium.vector.VectorEnv`` in ``AutoresetMode.SAME_STEP``.
- :func:`from_gymnasium` / :class:`GymnasiumToVecEnv`: a Gymnasium ``VectorEnv`` (in any autoreset mode)
  or an EnvPool gymnasium-style pool seen as a vecenv ``VecEnv`` with SB3's semantics, so that vecenv's
  wrappers and SB3's algorithms apply.

See ``docs/adapters.md`` for the rules and the limitations.
"""

from __future__ import annotations

import copy
import inspect
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array

from vecenv.base import VecEnv, VecEnvIndices, VecEnvObs, VecEnvStepReturn
from vecenv.env_group import is_wrapped
from vecenv.errors import AlreadyPendingCallError, ClosedVecEnvError, NoAsyncCallError
from vecenv.spaces import num_actions, split_actions

__all__ = ["GymnasiumToVecEnv", "VecEnvToGymnasium", "from_gymnasium", "to_gymnasium"]

#: Info keys vecenv adds to every step info (they become Gymnasium's terminations / truncations / final_obs).
_VECENV_INFO_KEYS = ("terminal_observation", "TimeLimit.truncated")
#: Methods and attributes ``to_gymnasium`` needs from a vector env (checked by duck typing).
_VECENV_API = ("num_envs", "observation_space", "action_space", "reset", "step", "seed", "set_options")


# --- batches: Gymnasium's layout <-> vecenv's layout --------------------------------------------------
#
# Both libraries batch Box / Discrete / MultiDiscrete / MultiBinary observations as arrays with the env
# axis first, and Dict / Tuple spaces as dicts / tuples of such arrays. They differ for spaces without
# a fixed-size dtype (Text, Sequence, Graph, OneOf): Gymnasium batches them as a tuple of per-env
# values, vecenv as an object array (num_envs,).


def _to_gym_batch(space: spaces.Space, batch: Any) -> Any:
    """A copy of vecenv batch ``batch`` of single-env space ``space`` in Gymnasium's layout."""
    if isinstance(space, spaces.Dict):
        return {key: _to_gym_batch(sub, batch[key]) for key, sub in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(_to_gym_batch(sub, part) for sub, part in zip(space.spaces, batch, strict=True))
    if isinstance(batch, np.ndarray) and batch.dtype == object:
        return tuple(copy.deepcopy(value) for value in batch)
    return np.array(batch, copy=True)


def _to_vec_batch(space: spaces.Space, batch: Any) -> Any:
    """A copy of Gymnasium batch ``batch`` of single-env space ``space`` in vecenv's layout."""
    if isinstance(space, spaces.Dict):
        return {key: _to_vec_batch(sub, batch[key]) for key, sub in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(_to_vec_batch(sub, part) for sub, part in zip(space.spaces, batch, strict=True))
    if isinstance(batch, np.ndarray):
        return batch.copy()
    values = list(batch)
    out = np.empty(len(values), dtype=object)
    for i, value in enumerate(values):
        out[i] = copy.deepcopy(value)
    return out


def _row(batch: Any, index: int) -> Any:
    """A copy of row ``index`` of a vecenv batch (the observation of one env)."""
    if isinstance(batch, dict):
        return {key: _row(value, index) for key, value in batch.items()}
    if isinstance(batch, tuple):
        return tuple(_row(value, index) for value in batch)
    value = batch[index]
    return copy.deepcopy(value) if isinstance(value, np.ndarray) or batch.dtype == object else value


def _assign_row(dst: Any, index: int, src: Any, src_index: int) -> None:
    """``dst[index] = src[src_index]`` for vecenv batches of the same structure, in place."""
    if isinstance(dst, dict):
        for key, value in dst.items():
            _assign_row(value, index, src[key], src_index)
    elif isinstance(dst, tuple):
        for part, src_part in zip(dst, src, strict=True):
            _assign_row(part, index, src_part, src_index)
    else:
        dst[index] = src[src_index]


def _unbatch_infos(vector_infos: Mapping[str, Any], n: int) -> list[dict[str, Any]]:
    """Gymnasium's dict-of-arrays infos to one dict per env (the inverse of ``VectorEnv._add_info``).

    A key ``k`` with a mask ``_k`` is given to the envs whose mask is True; a nested dict is unbatched
    recursively; an array whose first axis has length ``n`` gives element ``i`` to env ``i``. Any other
    value (e.g. an EnvPool entry that is not per env) is given as is to every env.
    """
    per_env: list[dict[str, Any]] = [{} for _ in range(n)]
    for key, value in vector_infos.items():
        if key.startswith("_") and key[1:] in vector_infos:
            continue  # the mask of key[1:]
        mask = vector_infos.get(f"_{key}")
        if isinstance(value, Mapping):
            values: list[Any] = _unbatch_infos(value, n)
        elif isinstance(value, np.ndarray) and value.ndim >= 1 and len(value) == n:
            values = [value[i].copy() if isinstance(value[i], np.ndarray) else value[i] for i in range(n)]
        else:
            values = [value] * n
        for i in range(n):
            if mask is None or mask[i]:
                per_env[i][key] = values[i]
    return per_env


def _check_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


# --- vecenv -> Gymnasium --------------------------------------------------------------------------


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
        base = getattr(venv, "unwrapped", venv)
        if hasattr(base, "gymnasium_resets"):  # reset the envs as Gymnasium's vector envs do (both keywords)
            base.gymnasium_resets = True

    def _check_open(self, what: str) -> None:
        if self.closed:
            raise ClosedVecEnvError(f"Cannot call {what}() on a closed {type(self).__name__}; create a new one.")

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
        self._check_open("reset")
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
        infos: dict[str, Any] = {}
        for i, info in enumerate(self._reset_infos()):
            infos = self._add_info(infos, info, i)
        return _to_gym_batch(self.single_observation_space, obs), infos

    def _seed_list(self, seed: Any) -> list[int | None] | None:
        if seed is None:
            return None
        if _check_int(seed):
            return [int(seed) + i for i in range(self.num_envs)]
        if isinstance(seed, (list, tuple)) and all(s is None or _check_int(s) for s in seed):
            if len(seed) != self.num_envs:
                raise ValueError(
                    f"reset(seed=[...]) must have one seed per env: expected {self.num_envs} entries, got {len(seed)}"
                )
            return [None if s is None else int(s) for s in seed]
        raise TypeError(f"reset(seed=...) must be None, an int or a list of ints / None per env, got {seed!r}")

    def _apply_seeds(self, seeds: list[int | None]) -> None:
        if all(s is None for s in seeds):
            return
        self.venv.seed(seeds)  # vecenv's seed() takes one seed (or None) per env

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
        self._check_open("step")
        obs, rewards, dones, step_infos = self.venv.step(actions)
        dones = np.asarray(dones, dtype=np.bool_).reshape(self.num_envs)
        terminations, truncations = self._flags(dones, step_infos)
        reset_infos = self._reset_infos() if dones.any() else []
        infos: dict[str, Any] = {}
        for i, info in enumerate(step_infos):
            env_info = {key: value for key, value in info.items() if key not in _VECENV_INFO_KEYS}
            if dones[i]:
                if "terminal_observation" not in info:
                    raise RuntimeError(
                        f"env {i} ended its episode but its info has no 'terminal_observation' "
                        f"(keys: {sorted(info)}); to_gymnasium needs SB3's autoreset convention"
                    )
                infos = self._add_info(infos, {"final_obs": info["terminal_observation"], "final_info": env_info}, i)
                env_info = reset_infos[i]
            infos = self._add_info(infos, env_info, i)
        return (
            _to_gym_batch(self.single_observation_space, obs),
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
        self._check_open("render")
        if self.render_mode == "rgb_array":
            return tuple(self.venv.get_images())
        return tuple(self.venv.env_method("render"))

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Call method ``name`` of every env (``venv.env_method``); for an attribute that is not callable, its value.

        :param name: method or attribute name (looked up through each env's wrapper chain).
        :return: one result per env.
        """
        self._check_open("call")
        try:
            return tuple(self.venv.env_method(name, *args, **kwargs))
        except TypeError as error:
            # Gymnasium's call() returns attributes that are not callable
            try:
                values = self.venv.get_attr(name)
            except Exception:
                raise error from None
            if args or kwargs or any(callable(value) for value in values):
                raise
            return tuple(values)

    def get_attr(self, name: str) -> tuple[Any, ...]:
        """Attribute ``name`` of every env (``venv.get_attr``).

        :param name: attribute name (looked up through each env's wrapper chain).
        :return: one value per env.
        """
        self._check_open("get_attr")
        return tuple(self.venv.get_attr(name))

    def set_attr(self, name: str, values: Any) -> None:
        """Set attribute ``name`` of every env (``venv.set_attr``, vecenv's rule: on the outermost wrapper).

        :param name: attribute name.
        :param values: a list or tuple of ``num_envs`` values (one per env), or one value for every env.
        :raises ValueError: if a list or tuple does not have ``num_envs`` values.
        """
        self._check_open("set_attr")
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


# --- Gymnasium -> vecenv --------------------------------------------------------------------------


def _autoreset_mode(vector_env: Any) -> AutoresetMode:
    value = (getattr(vector_env, "metadata", None) or {}).get("autoreset_mode", AutoresetMode.NEXT_STEP)
    if isinstance(value, AutoresetMode):
        return value
    try:
        return AutoresetMode(value)
    except ValueError:
        raise ValueError(
            f"from_gymnasium(vector_env): vector_env.metadata['autoreset_mode'] must be a gymnasium "
            f"AutoresetMode (or its value), got {value!r}"
        ) from None


def _num_envs(vector_env: Any) -> int:
    n = getattr(vector_env, "num_envs", None)
    if n is None:  # EnvPool: config["num_envs"] / len(pool)
        config = getattr(vector_env, "config", None)
        n = config.get("num_envs") if isinstance(config, Mapping) else None
    if n is None and hasattr(vector_env, "__len__"):
        n = len(vector_env)
    if not _check_int(n) or int(n) < 1:  # type: ignore[arg-type]
        raise TypeError(
            f"from_gymnasium(vector_env): vector_env must be a gymnasium.vector.VectorEnv (or an EnvPool pool) with a "
            f"positive num_envs, got {type(vector_env).__name__} with num_envs={n!r}"
        )
    return int(n)  # type: ignore[arg-type]


class GymnasiumToVecEnv(VecEnv):
    """A Gymnasium ``VectorEnv`` (or an EnvPool gymnasium-style pool) seen as a vecenv :class:`~vecenv.VecEnv`.

    Build it with :func:`from_gymnasium`. It follows SB3's rules whatever the vector env's autoreset mode
    (``vector_env.metadata["autoreset_mode"]``, NEXT_STEP if absent): ``step`` returns observations
    ``(num_envs, *obs_shape)``, float32 rewards and bool dones ``(num_envs,)`` and a list of ``num_envs`` info
    dicts; an env whose episode ended has been reset in the same call, its last observation is in
    ``infos[i]["terminal_observation"]`` and ``infos[i]["TimeLimit.truncated"]`` is ``truncated and not
    terminated``.

    - ``SAME_STEP``: the vector env resets finished envs itself; their last observation and step info come
      from ``infos["final_obs"]`` / ``infos["final_info"]``.
    - ``NEXT_STEP`` and ``DISABLED``: the finished envs are reset right after the step, with
      ``vector_env.reset(options={"reset_mask": dones})`` (Gymnasium's Sync/AsyncVectorEnv, in every mode),
      or ``vector_env.reset(env_id=np.array([i]))`` for each finished env (EnvPool). So no env is ever left
      for the vector env to reset on the next step, and every action reaches its env.

    :param vector_env: the vector env to adapt; closing the adapter closes it.
    :raises TypeError: if ``vector_env`` has no ``num_envs`` / spaces / ``reset`` / ``step``, or in NEXT_STEP or
        DISABLED mode cannot reset some envs only.
    :raises ValueError: for an unknown autoreset mode, an AsyncVectorEnv(shared_memory=False) in NEXT_STEP mode
        (Gymnasium 1.x does not clear its pending autoreset on a masked reset, so the next action would be
        lost), or an EnvPool pool whose ``batch_size`` is not ``num_envs``.
    """

    def __init__(self, vector_env: Any) -> None:
        for name in ("reset", "step", "observation_space", "action_space"):
            if not hasattr(vector_env, name):
                raise TypeError(
                    f"from_gymnasium(vector_env): vector_env must be a gymnasium.vector.VectorEnv (or an EnvPool "
                    f"pool), got {type(vector_env).__name__} without {name!r}"
                )
        num_envs = _num_envs(vector_env)
        self.vector_env = vector_env
        #: The vector env's autoreset mode (how the adapter reads its results).
        self.vector_env_autoreset_mode = _autoreset_mode(vector_env)
        #: The rule of this adapter's own steps: always SB3's same-step autoreset, whatever the vector env's mode
        #: (what vecenv's wrappers read to know how episodes end).
        self.autoreset_mode = AutoresetMode.SAME_STEP
        is_gym_vector = isinstance(vector_env, VectorEnv)
        observation_space = vector_env.single_observation_space if is_gym_vector else vector_env.observation_space
        action_space = vector_env.single_action_space if is_gym_vector else vector_env.action_space
        self._reset_params: Mapping[str, inspect.Parameter]
        try:
            self._reset_params = inspect.signature(vector_env.reset).parameters
        except (TypeError, ValueError):  # pragma: no cover - builtins without a signature
            self._reset_params = {}
        self._reset_takes_kwargs = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in self._reset_params.values())
        self._partial_reset = "reset_mask" if is_gym_vector else "env_id" if "env_id" in self._reset_params else None
        if self.vector_env_autoreset_mode is not AutoresetMode.SAME_STEP:
            if self._partial_reset is None:
                raise TypeError(
                    f"from_gymnasium(vector_env): in autoreset mode {self.vector_env_autoreset_mode.name} the adapter "
                    "must reset "
                    f"finished envs only, with reset(options={{'reset_mask': mask}}) (gymnasium.vector.VectorEnv) or "
                    f"reset(env_id=ids) (EnvPool); {type(vector_env).__name__} offers neither"
                )
            base = vector_env.unwrapped if is_gym_vector else vector_env
            if (
                self.vector_env_autoreset_mode is AutoresetMode.NEXT_STEP
                and isinstance(base, AsyncVectorEnv)
                and not base.shared_memory
            ):
                raise ValueError(
                    "from_gymnasium(vector_env): AsyncVectorEnv(shared_memory=False) in NEXT_STEP mode is not "
                    "supported: its workers keep their pending autoreset after reset(options={'reset_mask': ...}), "
                    "so the next action of a finished env would be lost. Use shared_memory=True, or autoreset_mode "
                    "SAME_STEP or DISABLED"
                )
        config = getattr(vector_env, "config", None)
        if not is_gym_vector and isinstance(config, Mapping) and config.get("batch_size", 0) not in (0, num_envs):
            raise ValueError(
                f"from_gymnasium(vector_env): an EnvPool pool must step all envs at once (batch_size == num_envs == "
                f"{num_envs}), got batch_size={config.get('batch_size')!r}"
            )
        self._closed = False
        self._waiting = False
        self._actions: Any = None
        self._terminations = np.zeros((num_envs,), dtype=np.bool_)
        self._truncations = np.zeros((num_envs,), dtype=np.bool_)
        # a step whose reset of finished envs raised: (obs, rewards, dones, infos, envs left to reset)
        self._unfinished: tuple[Any, np.ndarray, np.ndarray, list[dict[str, Any]], np.ndarray] | None = None
        super().__init__(num_envs, observation_space, action_space)

    # --- state ------------------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has been called."""
        return self._closed

    @property
    def waiting(self) -> bool:
        """Whether :meth:`step_async` has been called and :meth:`step_wait` not yet."""
        return self._waiting

    def _check_open(self, what: str) -> None:
        if self._closed:
            raise ClosedVecEnvError(f"Cannot call {what}() on a closed {type(self).__name__}; create a new one.")

    @property
    def terminations(self) -> np.ndarray:
        """bool ``(num_envs,)``: the vector env's ``terminated`` flags of the last step (a copy)."""
        return self._terminations.copy()

    @property
    def truncations(self) -> np.ndarray:
        """bool ``(num_envs,)``: the vector env's ``truncated`` flags of the last step (a copy; both flags may be
        True for one env, as Gymnasium reports them)."""
        return self._truncations.copy()

    # --- reset and step ---------------------------------------------------------------------------

    def reset(self) -> VecEnvObs:
        """Reset every env, with the seeds / options set by :meth:`seed` / :meth:`set_options` (then forgotten).

        A step started by :meth:`step_async` and not collected is discarded (it has not run).

        :return: observations ``(num_envs, *obs_shape)`` (a dict / tuple of such arrays for Dict / Tuple spaces).
        :raises ValueError: if the options differ between envs (a Gymnasium vector env passes one ``options``
            dict to every env), or seeds / options are set for a vector env whose ``reset`` does not take them.
        :raises ClosedVecEnvError: after :meth:`close`.
        """
        self._check_open("reset")
        self._waiting, self._actions = False, None
        self._unfinished = None
        n = self.num_envs
        if len(self._seeds) != n or len(self._options) != n:
            raise ValueError(
                f"seed() / set_options() must give one entry per env: expected {n}, got "
                f"{len(self._seeds)} seeds and {len(self._options)} options"
            )
        kwargs: dict[str, Any] = {}
        if any(seed is not None for seed in self._seeds):
            kwargs["seed"] = list(self._seeds)
        if any(self._options):
            first = self._options[0]
            if any(options != first for options in self._options[1:]):
                raise ValueError(
                    "set_options(options): a Gymnasium vector env passes ONE options dict to every env's reset, got "
                    f"different options per env: {self._options!r}"
                )
            kwargs["options"] = copy.deepcopy(first)
        for name in kwargs:
            if name not in self._reset_params and not self._reset_takes_kwargs:
                raise ValueError(
                    f"{type(self.vector_env).__name__}.reset() takes no {name!r} argument, but {name}s were set with "
                    f"{'seed()' if name == 'seed' else 'set_options()'} (EnvPool: pass seed= to envpool.make)"
                )
        self._reset_seeds()
        self._reset_options()
        obs, infos = self.vector_env.reset(**kwargs)
        self.reset_infos = _unbatch_infos(infos, n)
        return _to_vec_batch(self.observation_space, obs)

    def step_async(self, actions: np.ndarray) -> None:
        """Record the actions of the next :meth:`step_wait` (the vector env steps in :meth:`step_wait`).

        :param actions: one action per env: an array ``(num_envs, *action_shape)``, a list with one action per
            env, or for Dict / Tuple action spaces a dict / tuple of batched arrays.
        :raises AlreadyPendingCallError: if a step is already pending.
        :raises ValueError: if ``actions`` does not hold exactly ``num_envs`` actions.
        :raises ClosedVecEnvError: after :meth:`close`.
        """
        self._check_open("step_async")
        if self._waiting:
            raise AlreadyPendingCallError(
                "Cannot call step_async() while a step is pending: call step_wait() first to collect it."
            )
        count = num_actions(self.action_space, actions)
        if count != self.num_envs:
            raise ValueError(
                f"actions must hold one action per env: expected {self.num_envs} actions, got {count} "
                f"(type {type(actions).__name__}"
                f"{', shape ' + str(actions.shape) if isinstance(actions, np.ndarray) else ''})"
            )
        space = self.action_space
        if isinstance(actions, np.ndarray) and not isinstance(space, (spaces.Dict, spaces.Tuple)):
            self._actions = actions
        else:  # to Gymnasium's batched layout (dict / tuple of arrays, tuple for Text-like spaces)
            per_env = split_actions(space, actions, 0, self.num_envs)
            self._actions = concatenate(space, per_env, create_empty_array(space, self.num_envs))  # type: ignore[arg-type]
        self._waiting = True

    def step_wait(self) -> VecEnvStepReturn:
        """Step the vector env with the actions of :meth:`step_async`, and reset the envs whose episode ended.

        :return: ``(obs, rewards, dones, infos)``: observations ``(num_envs, *obs_shape)``, float32 rewards and
            bool dones ``(num_envs,)``, one info dict per env (with ``TimeLimit.truncated``, and
            ``terminal_observation`` for the envs that were reset). :attr:`reset_infos` holds the reset infos.
        :raises NoAsyncCallError: if no step is pending.
        :raises RuntimeError: in SAME_STEP mode, if the vector env reports an episode end without ``final_obs``.
        :raises ClosedVecEnvError: after :meth:`close`.
        :raises Exception: what the vector env raised. If resetting the finished envs (NEXT_STEP / DISABLED mode)
            raised, the step did happen: the next ``step_wait`` resets them and returns that step (its own
            actions are ignored), so its episode ends are reported once.
        """
        self._check_open("step_wait")
        if not self._waiting:
            raise NoAsyncCallError("step_wait() called without a pending step: call step_async(actions) first.")
        self._waiting = False
        actions, self._actions = self._actions, None
        if self._unfinished is not None:  # the last step raised resetting its finished envs: finish it
            obs, rewards, dones, infos, to_reset = self._unfinished
            self._reset_finished(to_reset, obs)
            self._unfinished = None
            return obs, rewards, dones, infos
        n = self.num_envs
        obs, rewards, terminated, truncated, vector_infos = self.vector_env.step(actions)
        obs = _to_vec_batch(self.observation_space, obs)
        terminated = np.asarray(terminated, dtype=np.bool_).reshape(n)
        truncated = np.asarray(truncated, dtype=np.bool_).reshape(n)
        dones = terminated | truncated
        self._terminations, self._truncations = terminated.copy(), truncated.copy()
        rewards = np.array(rewards, dtype=np.float32).reshape(n)
        infos = _unbatch_infos(vector_infos, n)
        if self.vector_env_autoreset_mode is AutoresetMode.SAME_STEP:
            for i, info in enumerate(infos):
                if not dones[i]:
                    continue
                if "final_obs" not in info:
                    raise RuntimeError(
                        f"{type(self.vector_env).__name__} (autoreset_mode SAME_STEP) ended the episode of env {i} "
                        f"without infos['final_obs'][{i}]"
                    )
                terminal_obs = copy.deepcopy(info.pop("final_obs"))
                final_info = info.pop("final_info", {})
                self.reset_infos[i] = info  # the top-level info of a reset env is its reset info
                infos[i] = final_info = dict(final_info)
                final_info["terminal_observation"] = terminal_obs
        for i, info in enumerate(infos):
            info["TimeLimit.truncated"] = bool(truncated[i] and not terminated[i])
        if self.vector_env_autoreset_mode is not AutoresetMode.SAME_STEP and dones.any():
            for i in np.flatnonzero(dones).tolist():
                infos[i]["terminal_observation"] = _row(obs, i)
            to_reset = dones.copy()
            try:
                self._reset_finished(to_reset, obs)
            except BaseException:
                # the step happened: the next step_wait resets what is left and returns it (reported once)
                self._unfinished = (obs, rewards, dones, infos, to_reset)
                raise
        return obs, rewards, dones, infos

    def _reset_finished(self, to_reset: np.ndarray, obs: Any) -> None:
        """Reset the envs ``to_reset`` now: their first observations go into ``obs``, their infos into reset_infos;
        each env reset is cleared from ``to_reset`` (which tells what is left if a reset raises)."""
        if self._partial_reset == "reset_mask":
            new_obs, vector_infos = self.vector_env.reset(options={"reset_mask": to_reset.copy()})
            new_obs = _to_vec_batch(self.observation_space, new_obs)
            reset_infos = _unbatch_infos(vector_infos, self.num_envs)
            for i in np.flatnonzero(to_reset).tolist():
                _assign_row(obs, i, new_obs, i)
                self.reset_infos[i] = reset_infos[i]
            to_reset[:] = False
        else:  # EnvPool: one env at a time, as EnvPool's own SB3 adapter does
            for i in np.flatnonzero(to_reset).tolist():
                new_obs, vector_infos = self.vector_env.reset(env_id=np.array([i]))
                _assign_row(obs, i, _to_vec_batch(self.observation_space, new_obs), 0)
                self.reset_infos[i] = _unbatch_infos(vector_infos, 1)[0]
                to_reset[i] = False

    # --- calls into the sub-envs ------------------------------------------------------------------

    def _normalize_indices(self, indices: VecEnvIndices) -> list[int]:
        n = self.num_envs
        normalized = []
        for index in self._get_indices(indices):
            if not _check_int(index):
                raise TypeError(f"indices must be None, an int or an iterable of ints, got element {index!r}")
            if not -n <= index < n:
                raise IndexError(f"env index {index} is out of range for a vector env with num_envs={n}")
            normalized.append(int(index) % n)
        return normalized

    def _all_envs(self, what: str, indices: VecEnvIndices) -> list[int]:
        """The indices, which must address every env exactly once (Gymnasium's calls reach all envs)."""
        ids = self._normalize_indices(indices)
        if sorted(ids) != list(range(self.num_envs)):
            raise NotImplementedError(
                f"{what}(..., indices={indices!r}): a Gymnasium vector env calls every env at once, so from_gymnasium "
                f"supports only indices that address each of the {self.num_envs} envs once (e.g. None), got {ids}"
            )
        return ids

    def _sub_env_call(self, name: str) -> Any:
        """``get_attr`` / ``set_attr`` / ``call`` of the vector env, or of its base env below Gymnasium vector wrappers
        (``VectorWrapper`` does not forward them; the sub-envs are the same)."""
        for target in (self.vector_env, getattr(self.vector_env, "unwrapped", None)):
            method = getattr(target, name, None)
            if method is not None:
                return method
        return None

    def _require(self, name: str) -> Any:
        method = self._sub_env_call(name)
        if method is None:
            raise AttributeError(f"{type(self.vector_env).__name__} has no {name}(): cannot reach its sub-envs")
        return method

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        """Attribute ``attr_name`` of the envs at ``indices`` (``vector_env.get_attr``, which reads every env).

        :param attr_name: attribute name (Gymnasium looks it up through each env's wrapper chain; a callable
            attribute is called by Gymnasium's SyncVectorEnv).
        :param indices: envs to query (None: all); any ints in ``-num_envs..num_envs-1``, in the order given.
        :return: one value per addressed env.
        :raises AttributeError: if the vector env has no ``get_attr`` (EnvPool; except for ``render_mode``, the
            pool's) or an env lacks the attribute.
        """
        self._check_open("get_attr")
        ids = self._normalize_indices(indices)
        if attr_name == "render_mode" and self._sub_env_call("get_attr") is None:
            # EnvPool: no per-env attributes; its envs share the pool's render mode
            return [getattr(self.vector_env, "render_mode", None) for _ in ids]
        values = self._require("get_attr")(attr_name)
        return [values[i] for i in ids]

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        """Set attribute ``attr_name`` to ``value`` on every env (``vector_env.set_attr``, Gymnasium's rule).

        :param attr_name: attribute name.
        :param value: the value (the same object for every env).
        :param indices: must address every env once (None); Gymnasium sets all envs at once.
        :raises NotImplementedError: if ``indices`` addresses some envs only.
        :raises AttributeError: if the vector env has no ``set_attr`` (EnvPool).
        """
        self._check_open("set_attr")
        self._all_envs("set_attr", indices)
        self._require("set_attr")(attr_name, [value] * self.num_envs)

    def env_method(
        self, method_name: str, *method_args: Any, indices: VecEnvIndices = None, **method_kwargs: Any
    ) -> list[Any]:
        """Call ``method_name(*method_args, **method_kwargs)`` on every env (``vector_env.call``).

        :param method_name: method name (looked up through each env's wrapper chain).
        :param indices: must address every env once (None); results follow the order given.
        :return: one return value per addressed env.
        :raises NotImplementedError: if ``indices`` addresses some envs only (the others would be called too).
        :raises AttributeError: if the vector env has no ``call`` (EnvPool).
        """
        self._check_open("env_method")
        ids = self._all_envs("env_method", indices)
        values = self._require("call")(method_name, *method_args, **method_kwargs)
        return [values[i] for i in ids]

    def env_is_wrapped(self, wrapper_class: type[gym.Wrapper], indices: VecEnvIndices = None) -> list[bool]:
        """Whether each addressed env is wrapped with ``wrapper_class``.

        Answered for vector envs that hold their envs in the process (SyncVectorEnv: ``unwrapped.envs``) and for
        :func:`to_gymnasium` adapters (asked to the vecenv env).

        :param wrapper_class: a ``gymnasium.Wrapper`` subclass.
        :param indices: envs to check (None: all).
        :return: one bool per addressed env.
        :raises AttributeError: for other vector envs (AsyncVectorEnv, EnvPool), which cannot tell.
        """
        self._check_open("env_is_wrapped")
        ids = self._normalize_indices(indices)
        base = getattr(self.vector_env, "unwrapped", self.vector_env)
        if isinstance(base, VecEnvToGymnasium):
            return list(base.venv.env_is_wrapped(wrapper_class, indices=ids))
        envs = getattr(base, "envs", None)
        if isinstance(envs, list) and len(envs) == self.num_envs and all(isinstance(env, gym.Env) for env in envs):
            return [is_wrapped(envs[i], wrapper_class) for i in ids]
        raise AttributeError(
            f"env_is_wrapped: {type(base).__name__} does not expose its envs, so from_gymnasium cannot tell whether "
            "they are wrapped"
        )

    def get_images(self) -> Sequence[np.ndarray | None]:
        """One frame per env (``vector_env.render()``); warns and returns Nones unless ``render_mode`` is rgb_array."""
        self._check_open("get_images")
        if self.render_mode != "rgb_array":
            warnings.warn(
                f"The render mode is {self.render_mode}, but this method assumes it is `rgb_array` to obtain images.",
                stacklevel=2,
            )
            return [None for _ in range(self.num_envs)]
        frames = self.vector_env.render()
        return list(frames) if frames is not None else [None for _ in range(self.num_envs)]

    def close(self) -> None:
        """Close the vector env (once; later calls do nothing)."""
        if self._closed:
            return
        self._closed = True
        self._waiting, self._actions = False, None
        self.vector_env.close()


def from_gymnasium(vector_env: Any) -> GymnasiumToVecEnv:
    """Expose a Gymnasium ``VectorEnv`` (any autoreset mode) or an EnvPool pool as a vecenv VecEnv (SB3 semantics).

    :param vector_env: a ``gymnasium.vector.VectorEnv`` (SyncVectorEnv, AsyncVectorEnv, vector wrappers, a
        :func:`to_gymnasium` adapter) or an EnvPool pool made with ``env_type="gymnasium"``.
    :return: a :class:`GymnasiumToVecEnv`; vecenv's wrappers (VecNormalize, VecMonitor, ...) apply to it.
    :raises TypeError: if ``vector_env`` is not such a vector env (see :class:`GymnasiumToVecEnv`).
    :raises ValueError: for a configuration the adapter cannot run correctly (see :class:`GymnasiumToVecEnv`).

    >>> import gymnasium as gym
    >>> venv = from_gymnasium(gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")] * 2))
    >>> venv.seed(0)
    [0, 1]
    >>> venv.reset().shape
    (2, 4)
    >>> venv.close()
    """
    return GymnasiumToVecEnv(vector_env)
