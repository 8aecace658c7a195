"""Gymnasium's vector API on vecenv's machinery: drop-ins for ``gymnasium.vector.SyncVectorEnv`` / ``AsyncVectorEnv``.

:class:`SyncVectorEnv` and :class:`AsyncVectorEnv` are :class:`gymnasium.vector.VectorEnv` subclasses with the
constructors, methods, return values and errors of Gymnasium 1.x's classes of the same names (change
``gymnasium.vector.AsyncVectorEnv`` to ``vecenv.gymnasium.AsyncVectorEnv``, keep your code). Underneath, the
envs run in vecenv's :class:`~vecenv.DummyVecEnv` (in the calling process) and :class:`~vecenv.SubprocVecEnv`
(several envs per worker process, observations, rewards, flags and actions in shared memory), with
Gymnasium's float64 rewards and nested Dict / Tuple spaces, in any :class:`gymnasium.vector.AutoresetMode`.

Besides Gymnasium's API both classes offer vecenv's :meth:`~SyncVectorEnv.seed` and
:meth:`~SyncVectorEnv.set_options`: seeds / options for each env's NEXT reset, also honoured when that reset is
an automatic one. See ``docs/gymnasium-api.md`` for the rules, what is refused, and the differences from Gymnasium.
"""

from __future__ import annotations

import contextlib
import copy as copy_module
import multiprocessing
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import logger, spaces
from gymnasium.core import RenderFrame
from gymnasium.error import CustomSpaceError
from gymnasium.spaces.utils import is_space_dtype_shape_equiv
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.async_vector_env import AsyncState
from gymnasium.vector.utils import batch_differing_spaces, batch_space, create_shared_memory, iterate

from vecenv.errors import AlreadyPendingCallError, ClosedVecEnvError, NoAsyncCallError
from vecenv.protocol import Command
from vecenv.vec_env import DummyVecEnv, SubprocVecEnv, WorkerVecEnv, default_n_workers

__all__ = ["AsyncVectorEnv", "SyncVectorEnv"]

#: keys vecenv adds to every step info (Gymnasium has terminations / truncations / final_obs instead)
_VECENV_INFO_KEYS = frozenset({"TimeLimit.truncated", "terminal_observation"})
#: spaces Gymnasium batches as one array with the env axis first (the others, except Dict / Tuple, as a tuple)
_ARRAY_SPACES = (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)
#: names Gymnasium's AsyncVectorEnv refuses in ``call`` (its worker commands)
_ASYNC_RESERVED_CALLS = ("reset", "step", "close", "_setattr", "_check_spaces")
_NOT_CALLABLE = re.compile(r"object is not callable$")
_SPACES_DIFFER = "All sub-envs must share the same spaces"


class _GymDummyVecEnv(DummyVecEnv):
    """The in-process backend of :class:`SyncVectorEnv`: float64 rewards, nested spaces allowed."""

    rewards_dtype = np.float64
    nested_spaces = True
    gymnasium_resets = True


class _GymSubprocVecEnv(SubprocVecEnv):
    """The worker-process backend of :class:`AsyncVectorEnv`: float64 rewards, nested spaces allowed."""

    rewards_dtype = np.float64
    nested_spaces = True
    gymnasium_resets = True


# --- observation spaces: "same", "different" or (batched, single) ---------------------------------------


class _ObservationSpaceOverride(gym.Wrapper):
    """Shows vecenv the vector env's single observation space instead of the env's own (equivalent) one.

    Used with ``observation_mode="different"`` or a tuple of spaces, where the envs' spaces may differ in
    bounds but share shape and dtype: vecenv batches envs of one space. ``get_wrapper_attr`` /
    ``set_wrapper_attr`` of ``observation_space`` reach the env's own space, so ``call`` / ``get_attr`` /
    ``set_attr`` see the env as Gymnasium's classes do.
    """

    def __init__(self, env: gym.Env, observation_space: spaces.Space) -> None:
        super().__init__(env)
        self.observation_space = observation_space

    def get_wrapper_attr(self, name: str) -> Any:
        if name == "observation_space":
            return self.env.get_wrapper_attr(name)
        return super().get_wrapper_attr(name)

    def set_wrapper_attr(self, name: str, value: Any, *, force: bool = True) -> bool:
        if name == "observation_space":
            return self.env.set_wrapper_attr(name, value, force=force)
        return super().set_wrapper_attr(name, value, force=force)


class _SpaceHolder:
    """The spaces every env must match: set from the first env built, or given (picklable)."""

    def __init__(self, observation_space: spaces.Space | None = None, action_space: spaces.Space | None = None) -> None:
        self.observation_space = observation_space
        self.action_space = action_space


def _not_equivalent(owner: str, single: spaces.Space, space: spaces.Space) -> RuntimeError:
    """Gymnasium's error for an env whose observation space does not share the single space's shape and dtype."""
    if owner == "AsyncVectorEnv":
        return RuntimeError(
            "AsyncVectorEnv(..., observation_mode='different' or custom space) however the sub-environment's "
            "observation spaces do not share a common shape and dtype."
        )
    return RuntimeError(
        f"{owner}(..., observation_mode='different' or custom space) however the sub-environments observation spaces "
        f"do not share a common shape and dtype, single_observation_space={single}, sub-environment observation "
        f"space={space}"
    )


class _CheckedFactory:
    """Builds an env and checks its spaces as Gymnasium's vector envs do, raising their ``RuntimeError``.

    :param env_fn: the user's factory.
    :param holder: the spaces to match; the first env built fills what is not set (in-process use only).
    :param mode: ``"same"``: the observation spaces must be equal; ``"equiv"``: they must share shape and dtype;
        ``"defer"``: not checked here (the caller checks once every env is built). With ``"equiv"`` and
        ``"defer"`` an env whose space differs is shown to vecenv with the holder's space (see
        :class:`_ObservationSpaceOverride`).
    :param owner: ``"SyncVectorEnv"`` or ``"AsyncVectorEnv"``, for the messages.
    """

    def __init__(self, env_fn: Callable[[], gym.Env], holder: _SpaceHolder, mode: str, owner: str) -> None:
        self.env_fn = env_fn
        self.holder = holder
        self.mode = mode
        self.owner = owner

    def __call__(self) -> gym.Env:
        env = self.env_fn()
        holder = self.holder
        if not isinstance(env, gym.Env):
            return env  # vecenv refuses it with its own TypeError
        if holder.observation_space is None:
            holder.observation_space = env.observation_space
        if holder.action_space is None:
            holder.action_space = env.action_space
        single = holder.observation_space
        if self.mode == "same":
            if env.observation_space != single:
                env.close()
                raise RuntimeError(
                    f"{self.owner}(..., observation_mode='same') however the sub-environments observation spaces are "
                    f"not equivalent. single_observation_space={single}, sub-environment "
                    f"observation_space={env.observation_space}. If this is intentional, use "
                    "`observation_mode='different'` instead."
                )
        elif env.observation_space != single:
            if self.mode == "equiv" and not is_space_dtype_shape_equiv(env.observation_space, single):
                env.close()
                raise _not_equivalent(self.owner, single, env.observation_space)
            env = _ObservationSpaceOverride(env, single)
        if env.action_space != holder.action_space:
            env.close()
            raise RuntimeError(
                "Sub-environment action space doesn't make the `single_action_space`, "
                f"action_space={env.action_space}, single_action_space={holder.action_space}"
            )
        return env


def _check_observation_mode(observation_mode: Any) -> tuple[spaces.Space, spaces.Space] | None:
    """``(batched, single)`` for a tuple of spaces, None for ``"same"`` / ``"different"``; Gymnasium's errors."""
    if isinstance(observation_mode, tuple) and len(observation_mode) == 2:
        if not isinstance(observation_mode[0], spaces.Space) or not isinstance(observation_mode[1], spaces.Space):
            raise TypeError(
                f"Expected both elements of observation_mode to be Spaces, got {type(observation_mode[0])} and "
                f"{type(observation_mode[1])}"
            )
        return observation_mode[0], observation_mode[1]
    if isinstance(observation_mode, str) and observation_mode in ("same", "different"):
        return None
    raise ValueError(
        "Invalid `observation_mode`, expected: 'same' or 'different' or tuple of single and batch observation space, "
        f"actual got {observation_mode}"
    )


def _inner(env: gym.Env) -> gym.Env:
    return env.env if isinstance(env, _ObservationSpaceOverride) else env


# --- batches: vecenv's layout -> Gymnasium's -----------------------------------------------------------


def _identity(batch: Any) -> Any:
    return batch


def _obs_converter(space: spaces.Space, deep: bool) -> Callable[[Any], Any]:
    """``convert(vecenv_batch) -> gymnasium_batch`` for single-env space ``space`` (built once).

    Both libraries batch Box / Discrete / MultiDiscrete / MultiBinary as an array with the env axis first and
    Dict / Tuple as a dict / tuple of batches; every other space (Text, Sequence, Graph, OneOf, custom spaces)
    is an object array ``(n,)`` for vecenv and a tuple of the envs' values for Gymnasium.

    :param deep: deep-copy the values of tuple-batched spaces (the envs' own objects with in-process envs).
    """
    if isinstance(space, _ARRAY_SPACES):
        return _identity  # vecenv's batch is already a fresh array
    if isinstance(space, spaces.Dict):
        items = [(key, _obs_converter(sub, deep)) for key, sub in space.spaces.items()]
        return lambda batch: {key: convert(batch[key]) for key, convert in items}
    if isinstance(space, spaces.Tuple):
        parts = [_obs_converter(sub, deep) for sub in space.spaces]
        return lambda batch: tuple(convert(part) for convert, part in zip(parts, batch, strict=True))
    if deep:
        return lambda batch: tuple(copy_module.deepcopy(value) for value in batch)
    return tuple


def _is_array_batch(space: spaces.Space, actions: Any) -> bool:
    """Whether ``actions`` is a batch vecenv takes as is: arrays (nested in one dict / tuple level)."""
    if isinstance(space, spaces.Dict):
        return (
            isinstance(actions, Mapping)
            and all(isinstance(sub, _ARRAY_SPACES) for sub in space.spaces.values())
            and all(isinstance(actions.get(key), np.ndarray) for key in space.spaces)
        )
    if isinstance(space, spaces.Tuple):
        return (
            isinstance(actions, tuple)
            and len(actions) == len(space.spaces)
            and all(
                isinstance(sub, _ARRAY_SPACES)
                and isinstance(part, np.ndarray)
                and part.ndim == len(sub.shape or ()) + 1
                for sub, part in zip(space.spaces, actions, strict=True)
            )
        )
    return False


def _check_shared_memory_space(space: spaces.Space) -> None:
    """Raise what ``gymnasium.vector.AsyncVectorEnv(shared_memory=True)`` raises for observation space ``space``.

    Gymnasium keeps Box, Discrete, MultiDiscrete, MultiBinary, Text and OneOf observations (in Dict / Tuple
    too) in shared memory; Graph and Sequence raise its ``TypeError``; any other space its ``ValueError``
    caused by a :class:`gymnasium.error.CustomSpaceError`. vecenv itself could run them all (it pickles what
    does not fit in shared memory): the refusal is kept so that code behaves as with Gymnasium.
    """

    def walk(sub: spaces.Space) -> None:
        if isinstance(sub, spaces.Dict):
            for value in sub.spaces.values():
                walk(value)
        elif isinstance(sub, (spaces.Tuple, spaces.OneOf)):
            for value in sub.spaces:
                walk(value)
        elif isinstance(sub, (spaces.Graph, spaces.Sequence)) or create_shared_memory.dispatch(
            type(sub)
        ) is create_shared_memory.dispatch(object):
            create_shared_memory(sub, n=1)  # raises for these spaces, before allocating anything

    try:
        walk(space)
    except CustomSpaceError as e:
        raise ValueError(
            "Using `AsyncVector(..., shared_memory=True)` caused an error, you can disable this feature with "
            "`shared_memory=False` however this is slower."
        ) from e


# --- the common part ----------------------------------------------------------------------------------


class _VecenvVectorEnv(VectorEnv):
    """What :class:`SyncVectorEnv` and :class:`AsyncVectorEnv` share: a vecenv vector env seen through
    Gymnasium's API (spaces, reset, step, infos, seeds / options of the next reset, close)."""

    _venv: WorkerVecEnv
    #: AsyncVectorEnv orders the keys of a finished env's infos as Gymnasium's worker does
    _async_info_order = False

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
        self._convert_obs = _obs_converter(venv.observation_space, deep=copy and isinstance(venv, DummyVecEnv))
        self._actions_as_is = isinstance(self.single_action_space, _ARRAY_SPACES)

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
        seeds = list(seed)
        if len(seeds) != n:
            raise ValueError(
                f"If seeds are passed as a list the length must match num_envs={n} but got length={len(seeds)}."
            )
        return seeds

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
        :meth:`seed` / :meth:`set_options` first go to the envs as pending (used where the reset passes none)."""
        venv = self._venv
        venv.prepare_reset(env_ids)
        venv.push_staged()
        venv.seed(seeds)
        venv.set_options(options)

    def _clear_reset_args(self) -> None:
        self._venv.clear_staged()

    def _reset_return(self, env_ids: list[int] | None) -> tuple[Any, dict[str, Any]]:
        venv = self._venv
        infos: dict[str, Any] = {}
        reset_infos = venv.reset_infos
        for i in range(self.num_envs) if env_ids is None else env_ids:
            infos = self._add_info(infos, reset_infos[i], i)
        return self._convert_obs(venv.current_obs()), infos

    def _convert_actions(self, actions: Any) -> Any:
        """Gymnasium's batched actions in a layout vecenv takes (arrays as they are, else one action per env)."""
        if self._actions_as_is or _is_array_batch(self.single_action_space, actions):
            return actions
        return list(iterate(self.action_space, actions))

    def _step_return(
        self, obs: Any, rewards: np.ndarray, dones: np.ndarray, step_infos: list[dict[str, Any]]
    ) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        venv = self._venv
        terminations = venv.terminations
        truncations = venv.truncations
        return self._convert_obs(obs), rewards, terminations, truncations, self._step_infos(step_infos, dones)

    def _step_infos(self, step_infos: list[dict[str, Any]], dones: np.ndarray) -> dict[str, Any]:
        """Gymnasium's infos (dict of arrays with ``_key`` masks) from vecenv's per-env infos."""
        infos: dict[str, Any] = {}
        same_step = self.autoreset_mode is AutoresetMode.SAME_STEP
        reset_infos = self._venv.reset_infos
        add = self._add_info
        for i, info in enumerate(step_infos):
            if len(info) == 1 and "TimeLimit.truncated" in info:
                continue  # the common case: the env's info was empty and the env did not reset
            env_info = {key: value for key, value in info.items() if key not in _VECENV_INFO_KEYS}
            if same_step and dones[i]:
                if "terminal_observation" not in info:
                    raise RuntimeError(f"vecenv reset env {i} at its episode end without its final observation")
                final_obs = info["terminal_observation"]
                if self._async_info_order:
                    infos = add(infos, {"final_info": env_info, "final_obs": final_obs, **reset_infos[i]}, i)
                else:
                    infos = add(infos, {"final_obs": final_obs, "final_info": env_info}, i)
                    infos = add(infos, reset_infos[i], i)
            elif env_info:
                infos = add(infos, env_info, i)
        return infos

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
        :raises gymnasium.error.ClosedEnvironmentError: after :meth:`close`.
        """
        self._assert_is_running()
        n = self.num_envs
        if seed is None:
            seed = int(np.random.randint(0, np.iinfo(np.uint32).max, dtype=np.uint32))
        if isinstance(seed, (int, np.integer)):
            seeds: list[int | None] = [int(seed) + i for i in range(n)]
        else:
            seeds = [None if s is None else int(s) for s in seed]
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


# --- SyncVectorEnv ------------------------------------------------------------------------------------


def _values_per_env(values: Any, num_envs: int) -> list[Any] | tuple[Any, ...]:
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


class SyncVectorEnv(_VecenvVectorEnv):
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

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env]],
        copy: bool = True,
        observation_mode: str | tuple[spaces.Space, spaces.Space] = "same",
        autoreset_mode: str | AutoresetMode = AutoresetMode.NEXT_STEP,
    ) -> None:
        mode = autoreset_mode if isinstance(autoreset_mode, AutoresetMode) else AutoresetMode(autoreset_mode)
        given = _check_observation_mode(observation_mode)
        if isinstance(env_fns, (str, bytes)) or not isinstance(env_fns, Iterable):
            raise TypeError(f"env_fns must be a list of callables returning a gymnasium.Env, got {env_fns!r}")
        fns = list(env_fns)
        holder = _SpaceHolder(None if given is None else given[1])
        check = "same" if observation_mode == "same" else "defer"
        checked: list[Callable[[], gym.Env]] = [
            _CheckedFactory(fn, holder, check, "SyncVectorEnv") if callable(fn) else fn for fn in fns
        ]
        venv = _GymDummyVecEnv(checked, autoreset_mode=mode)
        try:
            envs = [_inner(env) for env in venv.envs]
            if given is not None:
                observation_space, single = given
            else:
                single = envs[0].observation_space
                if observation_mode == "same":
                    observation_space = batch_space(single, len(envs))
                else:
                    observation_space = batch_differing_spaces([env.observation_space for env in envs])
            if observation_mode != "same":  # Gymnasium's checks, in its order, once every env is built
                for env in envs:
                    if not is_space_dtype_shape_equiv(env.observation_space, single):
                        raise _not_equivalent("SyncVectorEnv", single, env.observation_space)
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
        self._autoreset_envs = np.zeros((self.num_envs,), dtype=np.bool_)

    @property
    def envs(self) -> list[gym.Env]:
        """The sub-envs, in order (as built by ``env_fns``)."""
        return [_inner(env) for env in self._venv.envs]  # type: ignore[attr-defined]

    def reset(
        self,
        *,
        seed: int | list[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[Any, dict[str, Any]]:
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
        if env_ids is None:
            self._autoreset_envs[:] = False
        else:
            self._autoreset_envs[env_ids] = False
        return self._reset_return(env_ids)

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
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
        venv.step_async(venv_actions)
        obs, rewards, dones, step_infos = venv.step_wait()
        self._autoreset_envs = dones
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
        values = _values_per_env(values, self.num_envs)
        for env, value in zip(self.envs, values, strict=True):
            env.set_wrapper_attr(name, value)

    def close_extras(self, **kwargs: Any) -> None:
        """Close every env (called once by ``close()``).

        :raises Exception: the first error an env's ``close()`` raised.
        """
        self._venv.close()


# --- AsyncVectorEnv -----------------------------------------------------------------------------------


class AsyncVectorEnv(_VecenvVectorEnv):
    """``gymnasium.vector.AsyncVectorEnv`` on vecenv's :class:`~vecenv.SubprocVecEnv`: several envs per worker
    process, observations, rewards, flags and actions in shared memory, one small message per worker per step.

    Same constructor, methods, return values and errors as Gymnasium's class (see :class:`SyncVectorEnv` for
    ``reset`` / ``step``), including ``reset_async`` / ``reset_wait``, ``step_async`` / ``step_wait``,
    ``call_async`` / ``call_wait`` with ``timeout``. An exception raised by an env reaches you with its own type,
    a note naming the env, and the worker's traceback chained; the vector env stays usable.

    .. warning:: With the ``forkserver`` (vecenv's default) and ``spawn`` contexts, scripts must guard their
        entry point with ``if __name__ == "__main__":``; env factories are sent to the workers with cloudpickle.

    :param env_fns: callables that each build a new ``gymnasium.Env``.
    :param shared_memory: which observation spaces are accepted, as Gymnasium: with True, spaces Gymnasium
        cannot share are refused (Graph, Sequence: ``TypeError``; custom spaces: ``ValueError`` from a
        ``CustomSpaceError``); False accepts every space. Either way vecenv keeps rewards, flags, actions and
        fixed-size observations in shared memory and pickles the rest (Text, Sequence, ...).
    :param copy: as :class:`SyncVectorEnv` (observations are always fresh objects here).
    :param context: the multiprocessing start method (``"fork"``, ``"forkserver"``, ``"spawn"``); None: vecenv's
        default, ``"forkserver"`` where available, else ``"spawn"``.
    :param daemon: must be True (worker processes are daemonic and end with the parent).
    :param worker: must be None (custom Gymnasium worker functions do not apply to vecenv's workers).
    :param observation_mode: as :class:`SyncVectorEnv`. ``"different"`` builds every env once in this process to
        read its space (as Gymnasium does), then closes it.
    :param autoreset_mode: a :class:`gymnasium.vector.AutoresetMode` or its value (``NEXT_STEP`` by default).
    :param max_concurrency: at most this many envs run ``step`` / ``reset`` at a time: caps the number of
        worker processes (each steps its envs in sequence; with ``parent_envs`` this process counts as one).
        None: no cap.
    :param n_workers: number of worker processes (vecenv's; None: one per CPU core available, at most
        ``len(env_fns)``). ``n_workers=len(env_fns)`` gives Gymnasium's one process per env.
    :param parent_envs: vecenv's: how many envs (the first ones) this process steps itself, in
        :meth:`step_wait`, while the workers step the rest (default 0; with it, ``n_workers=None`` means one
        worker per core minus one). See :class:`vecenv.SubprocVecEnv`: the parent's envs are not isolated, and a
        ``timeout`` of :meth:`step_wait` / :meth:`reset_wait` / :meth:`call_wait` waits for the workers only,
        before this process steps its own envs (so with a timeout the two no longer overlap).
    :raises ValueError: for ``worker`` not None, ``daemon=False``, an invalid ``max_concurrency``, ``context``,
        ``observation_mode``, ``autoreset_mode`` or ``parent_envs``, and spaces shared memory cannot hold (see
        above).
    :raises RuntimeError: if the envs' spaces differ (Gymnasium's messages, vecenv's details chained).
    """

    _async_info_order = True

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env]],
        shared_memory: bool = True,
        copy: bool = True,
        context: str | None = None,
        daemon: bool = True,
        worker: Callable[..., None] | None = None,
        observation_mode: str | tuple[spaces.Space, spaces.Space] = "same",
        autoreset_mode: str | AutoresetMode = AutoresetMode.NEXT_STEP,
        max_concurrency: int | None = None,
        n_workers: int | None = None,
        parent_envs: int = 0,
    ) -> None:
        mode = autoreset_mode if isinstance(autoreset_mode, AutoresetMode) else AutoresetMode(autoreset_mode)
        if max_concurrency is not None:
            if not isinstance(max_concurrency, (int, np.integer)):
                raise ValueError(f"`max_concurrency` must be an integer or None, got {type(max_concurrency)}.")
            if max_concurrency < 1:
                raise ValueError(f"`max_concurrency` must be a positive or None, got {max_concurrency}.")
        if worker is not None:
            raise ValueError(
                "vecenv.gymnasium.AsyncVectorEnv does not take a custom `worker`: its worker processes run several "
                "envs each and speak vecenv's protocol. Use gymnasium.vector.AsyncVectorEnv for a custom worker."
            )
        if not daemon:
            raise ValueError(
                "vecenv.gymnasium.AsyncVectorEnv(daemon=False) is not supported: vecenv's worker processes are always "
                "daemonic (they end with the parent), so envs in them cannot start processes of their own. Use "
                "gymnasium.vector.AsyncVectorEnv(daemon=False) for such envs."
            )
        given = _check_observation_mode(observation_mode)
        if isinstance(env_fns, (str, bytes)) or not isinstance(env_fns, Iterable):
            raise TypeError(f"env_fns must be a list of callables returning a gymnasium.Env, got {env_fns!r}")
        fns = list(env_fns)
        differing: list[spaces.Space] | None = None
        if given is None and observation_mode == "different":
            differing = []
            for fn in fns:  # Gymnasium builds every env in the parent process to read its space, so do we
                env = fn()
                differing.append(env.observation_space)
                env.close()
            given = (batch_differing_spaces(differing), differing[0])
            if not all(is_space_dtype_shape_equiv(space, differing[0]) for space in differing):
                raise _not_equivalent("AsyncVectorEnv", differing[0], differing[0])
        if given is not None:
            if shared_memory:
                _check_shared_memory_space(given[1])
            holder = _SpaceHolder(given[1])
            fns = [_CheckedFactory(fn, holder, "equiv", "AsyncVectorEnv") if callable(fn) else fn for fn in fns]
        workers: Any = n_workers  # None: SubprocVecEnv's default
        if max_concurrency is not None:
            if workers is None:
                workers = default_n_workers(parent_envs)
            if parent_envs and max_concurrency < 2:
                raise ValueError(
                    f"`max_concurrency` must be at least 2 with parent_envs={parent_envs!r} (this process steps its "
                    f"envs while at least one worker steps the others), got {max_concurrency}."
                )
            if isinstance(workers, (int, np.integer)):  # this process is one of the concurrent steppers
                workers = min(int(workers), int(max_concurrency) - (1 if parent_envs else 0))
        try:
            # always vecenv's shared memory: it pickles only what cannot live there (Text, Sequence, ...), and
            # keeps the float64 rewards exact (SubprocVecEnv(shared_memory=False) rounds them to float32)
            venv = _GymSubprocVecEnv(
                fns,
                start_method=context,
                n_workers=workers,
                shared_memory=True,
                autoreset_mode=mode,
                parent_envs=parent_envs,
            )
        except ValueError as exc:
            if not str(exc).startswith(_SPACES_DIFFER):
                raise
            if "has action_space" in str(exc):
                raise RuntimeError(
                    "Some environments have an action space different from the first env's. In order to batch "
                    f"actions, the action spaces from all environments must be equal. ({exc})"
                ) from exc
            raise RuntimeError(
                "AsyncVectorEnv(..., observation_mode='same') however some of the sub-environments observation spaces "
                "are not equivalent. If this is intentional, use `observation_mode='different'` instead. "
                f"({exc})"
            ) from exc
        try:
            if given is None:
                single = venv.observation_space
                if shared_memory:
                    _check_shared_memory_space(single)
                observation_space = batch_space(single, venv.num_envs)
            else:
                observation_space, single = given
            metadata = venv.get_attr("metadata", indices=0)[0]
            self._setup(
                venv, env_fns, copy, observation_mode, mode, single, observation_space, dict(metadata), venv.render_mode
            )
        except BaseException:
            with contextlib.suppress(Exception):
                venv.close()
            raise
        self._sub: _GymSubprocVecEnv = venv
        self.shared_memory = shared_memory
        self.context = context
        self.daemon = daemon
        self.worker = worker
        self.max_concurrency = max_concurrency
        self.n_workers = venv.n_workers
        self._state = AsyncState.DEFAULT
        self._reset_requests: list[tuple[int, list[int] | None, Any]] = []
        self._reset_ids: list[int] | None = None
        self._call_request: tuple[str, tuple[Any, ...], dict[str, Any]] = ("", (), {})
        self._call_token: tuple[Any, ...] = ()
        self._call_error: Exception | None = None

    @property
    def processes(self) -> list[multiprocessing.process.BaseProcess]:
        """The worker processes (one per group of envs)."""
        return list(self._sub.processes)

    def _check_default(self, what: str, period: str = ".") -> None:
        if self._state != AsyncState.DEFAULT:
            raise AlreadyPendingCallError(
                f"Calling `{what}` while waiting for a pending call to `{self._state.value}` to complete{period}",
                str(self._state.value),
            )

    def _expect_pending(self, state: AsyncState, what: str, started_by: str) -> None:
        """Raise Gymnasium's errors unless the env is open and ``state`` is pending (``what`` collects it)."""
        self._assert_is_running()
        if self._state != state:
            raise NoAsyncCallError(f"Calling `{what}` without any prior call to `{started_by}`.", state.value)

    def _wait(self, timeout: float | None, what: str) -> None:
        """Wait up to ``timeout`` s for every worker's reply, then leave the pending state; on time-out the call
        stays pending."""
        if timeout is not None and not self._venv.wait_until_ready(timeout):
            raise multiprocessing.TimeoutError(f"The call to `{what}` has timed out after {timeout} second(s).")
        self._state = AsyncState.DEFAULT

    # --- reset ----------------------------------------------------------------------------------------

    def reset(
        self,
        *,
        seed: int | list[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[Any, dict[str, Any]]:
        """Reset every env, or those of ``options["reset_mask"]``: :meth:`reset_async` then :meth:`reset_wait`.

        See :meth:`SyncVectorEnv.reset` for the arguments and the return value.

        :raises gymnasium.error.AlreadyPendingCallError: if another call is pending.
        """
        self.reset_async(seed=seed, options=options)
        return self.reset_wait()

    def reset_async(self, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None) -> None:
        """Start resetting every env, or those of ``options["reset_mask"]``; collect with :meth:`reset_wait`.

        :param seed: as :meth:`SyncVectorEnv.reset`.
        :param options: as :meth:`SyncVectorEnv.reset`.
        :raises ValueError: if a seed list does not have ``num_envs`` entries, or for a bad ``reset_mask``.
        :raises TypeError: if ``reset_mask`` is not a bool numpy array.
        :raises gymnasium.error.AlreadyPendingCallError: if another call is pending.
        :raises gymnasium.error.ClosedEnvironmentError: after :meth:`close`.
        """
        self._assert_is_running()
        seeds = self._seed_list(seed)
        self._check_default("reset_async", period="")
        env_ids, options = self._split_options(options)
        venv = self._venv
        self._load_reset_args(seeds, options, env_ids)
        try:
            requests = venv.start_reset(env_ids)
        finally:
            self._clear_reset_args()
        self._reset_requests, self._reset_ids = requests, env_ids
        self._state = AsyncState.WAITING_RESET

    def reset_wait(self, timeout: float | None = None) -> tuple[Any, dict[str, Any]]:
        """Collect the reset started by :meth:`reset_async`.

        :param timeout: seconds to wait at most (None: no limit).
        :return: ``(obs, infos)`` as :meth:`SyncVectorEnv.reset`.
        :raises gymnasium.error.NoAsyncCallError: without a pending :meth:`reset_async`.
        :raises multiprocessing.TimeoutError: if the envs did not finish within ``timeout`` (the reset stays
            pending: call :meth:`reset_wait` again).
        :raises Exception: the exception an env raised, with its own type.
        """
        self._expect_pending(AsyncState.WAITING_RESET, "reset_wait", "reset_async")
        self._wait(timeout, "reset_wait")
        self._venv.finish_reset(self._reset_requests)
        return self._reset_return(self._reset_ids)

    # --- step -----------------------------------------------------------------------------------------

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Step every env: :meth:`step_async` then :meth:`step_wait`.

        :param actions: an element of the batched :attr:`action_space` (see :meth:`SyncVectorEnv.step`).
        :return: ``(obs, rewards, terminations, truncations, infos)`` as :meth:`SyncVectorEnv.step`.
        :raises gymnasium.error.AlreadyPendingCallError: if another call is pending.
        :raises Exception: the exception an env raised, with its own type.
        """
        self.step_async(actions)
        return self.step_wait()

    def step_async(self, actions: Any) -> None:
        """Start stepping every env with its action of the batch ``actions``; collect with :meth:`step_wait`.

        :param actions: an element of the batched :attr:`action_space` (see :meth:`SyncVectorEnv.step`).
        :raises gymnasium.error.AlreadyPendingCallError: if another call is pending.
        :raises ValueError: if ``actions`` does not hold one valid action per env (checked before anything is sent).
        :raises gymnasium.error.ClosedEnvironmentError: after :meth:`close`.
        """
        self._assert_is_running()
        self._check_default("step_async")
        self._venv.step_async(self._convert_actions(actions))
        self._state = AsyncState.WAITING_STEP

    def step_wait(self, timeout: float | None = None) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Collect the step started by :meth:`step_async`.

        :param timeout: seconds to wait at most (None: no limit).
        :return: ``(obs, rewards, terminations, truncations, infos)`` as :meth:`SyncVectorEnv.step`.
        :raises gymnasium.error.NoAsyncCallError: without a pending :meth:`step_async`.
        :raises multiprocessing.TimeoutError: if the envs did not finish within ``timeout`` (the step stays
            pending: call :meth:`step_wait` again).
        :raises Exception: the exception an env raised, with its own type.
        """
        self._expect_pending(AsyncState.WAITING_STEP, "step_wait", "step_async")
        self._wait(timeout, "step_wait")
        obs, rewards, dones, step_infos = self._venv.step_wait()
        return self._step_return(obs, rewards, dones, step_infos)

    # --- calls into the envs ----------------------------------------------------------------------------

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Call method ``name`` of every env; for an attribute, its value: :meth:`call_async` then :meth:`call_wait`.

        :param name: method or attribute name (found through each env's wrappers).
        :return: one result per env (copies: results travel pickled).
        """
        self.call_async(name, *args, **kwargs)
        return self.call_wait()

    def call_async(self, name: str, /, *args: Any, **kwargs: Any) -> None:
        """Start calling method ``name(*args, **kwargs)`` of every env; collect with :meth:`call_wait`.

        :param name: method or attribute name (found through each env's wrappers).
        :param args: positional arguments of the call.
        :param kwargs: keyword arguments of the call.
        :raises gymnasium.error.AlreadyPendingCallError: if another call is pending.
        :raises gymnasium.error.ClosedEnvironmentError: after :meth:`close`.
        """
        self._assert_is_running()
        self._check_default("call_async")
        self._call_request = (name, args, kwargs)
        self._call_error = None
        if name in _ASYNC_RESERVED_CALLS:
            self._call_error = ValueError(
                f"Trying to call function `{name}` with `call`, use `{name}` directly instead."
            )
        else:
            self._call_token = self._venv.start_call(Command.ENV_METHOD, None, name, args, kwargs)
        self._state = AsyncState.WAITING_CALL

    def call_wait(self, timeout: float | None = None) -> tuple[Any, ...]:
        """Collect the call started by :meth:`call_async`.

        :param timeout: seconds to wait at most (None: no limit).
        :return: one result per env.
        :raises gymnasium.error.NoAsyncCallError: without a pending :meth:`call_async`.
        :raises multiprocessing.TimeoutError: if the envs did not answer within ``timeout`` (the call stays
            pending: call :meth:`call_wait` again).
        :raises ValueError: for ``reset``, ``step``, ``close`` (use those methods), as Gymnasium.
        :raises Exception: the exception an env raised (e.g. :class:`AttributeError`), with its own type.
        """
        self._expect_pending(AsyncState.WAITING_CALL, "call_wait", "call_async")
        if self._call_error is not None:
            self._state = AsyncState.DEFAULT
            raise self._call_error
        self._wait(timeout, "call_wait")
        try:
            values = self._venv.finish_call(self._call_token)
        except TypeError as error:
            # Gymnasium's call() returns an attribute that is not callable
            if not _NOT_CALLABLE.search(str(error)):
                raise
            try:
                values = self._venv.get_attr(self._call_request[0])
            except Exception:
                raise error from None
            if any(callable(value) for value in values):
                raise
            return tuple(values)
        return tuple(values)

    def get_attr(self, name: str) -> tuple[Any, ...]:
        """Attribute ``name`` of every env (found through its wrappers); a method is called, as Gymnasium's
        ``get_attr`` (which is ``call``) does.

        :param name: attribute name.
        :return: one value per env (copies: values travel pickled).
        :raises gymnasium.error.AlreadyPendingCallError: if another call is pending.
        """
        self._assert_is_running()
        self._check_default("call_async")
        try:
            values = self._venv.get_attr(name)
        except AttributeError:
            raise
        except Exception:
            return self.call(name)  # e.g. a method whose env cannot be pickled: call it instead
        if any(callable(value) for value in values):
            return self.call(name)
        return tuple(values)

    def set_attr(self, name: str, values: list[Any] | tuple[Any, ...] | object) -> None:
        """Set attribute ``name`` of the envs with ``env.set_wrapper_attr`` (Gymnasium's rule).

        :param name: attribute name.
        :param values: a list or tuple with one value per env, or one value for every env.
        :raises ValueError: if a list or tuple does not hold ``num_envs`` values (Gymnasium's message).
        :raises gymnasium.error.AlreadyPendingCallError: if another call is pending.
        """
        self._assert_is_running()
        values = _values_per_env(values, self.num_envs)
        self._check_default("set_attr")
        venv = self._venv
        if all(value is values[0] for value in values):
            venv.env_method("set_wrapper_attr", name, values[0])
        else:
            for i, value in enumerate(values):
                venv.env_method("set_wrapper_attr", name, value, indices=i)

    def render(self) -> tuple[RenderFrame, ...] | None:
        """``call("render")``: every env's ``render()``.

        :return: one frame per env (an ``(H, W, 3)`` uint8 array in ``rgb_array`` mode).
        """
        return self.call("render")

    def close_extras(self, timeout: float | None = None, terminate: bool = False) -> None:
        """End the worker processes (called once by ``close(timeout=..., terminate=...)``).

        A pending call is collected first (up to ``timeout`` seconds, with a warning, as Gymnasium); if it times
        out, or with ``terminate=True``, the workers are terminated without closing their envs. Otherwise every
        env is closed (vecenv waits about 5 s at most, then terminates the workers).

        :param timeout: seconds to wait for a pending call (None: no limit).
        :param terminate: terminate the workers at once.
        :raises Exception: the first error an env's ``close()`` raised.
        """
        timeout = 0 if terminate else timeout
        if self._state != AsyncState.DEFAULT:
            logger.warn(f"Calling `close` while waiting for a pending call to `{self._state.value}` to complete.")
            try:
                getattr(self, f"{self._state.value}_wait")(timeout)
            except multiprocessing.TimeoutError:
                terminate = True
            except Exception:  # the pending call's own error: we are closing anyway
                pass
            self._state = AsyncState.DEFAULT
        if terminate:
            for process in self._sub.processes:
                if process.is_alive():
                    process.terminate()
        self._venv.close()
