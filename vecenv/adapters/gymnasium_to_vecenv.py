"""``from_gymnasium``: a Gymnasium ``VectorEnv`` (any autoreset mode) or an EnvPool gymnasium-style pool seen as a
vecenv :class:`~vecenv.VecEnv` with SB3's semantics, so that vecenv's wrappers and SB3's algorithms apply.

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
from gymnasium.vector.utils import concatenate, create_empty_array

from vecenv.actions import num_actions, split_actions
from vecenv.adapters.vecenv_to_gymnasium import VecEnvToGymnasium
from vecenv.base import VecEnv, VecEnvIndices, VecEnvObs, VecEnvStepReturn, check_open, is_int
from vecenv.env_group import is_wrapped
from vecenv.errors import ActionsWithoutEnvAxisError, AlreadyPendingCallError, NoAsyncCallError
from vecenv.gymnasium.conversions import gymnasium_batch_to_vecenv, per_env_infos
from vecenv.interrupts import GUARD
from vecenv.spaces import batch_assign, batch_slice

__all__ = ["GymnasiumToVecEnv", "from_gymnasium"]


def _same_options(a: Any, b: Any) -> bool:
    """Whether two envs' reset options hold the same values: dicts, lists and tuples compared item by item,
    arrays by dtype, shape and values (NaN equal to NaN), anything else with ``==``."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape):
            return False
        try:
            return bool(np.array_equal(a, b, equal_nan=True))
        except TypeError:  # (no NaN in non-numeric arrays)
            return bool(np.array_equal(a, b))
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_same_options(a[key], b[key]) for key in a)
    if isinstance(a, (list, tuple)) and type(a) is type(b):
        return len(a) == len(b) and all(_same_options(x, y) for x, y in zip(a, b, strict=True))
    try:
        return bool(a == b)
    except Exception:  # (a value whose == is not a truth value)
        return a is b


def _obs_row_copy(batch: Any, index: int) -> Any:
    """A copy of row ``index`` of a vecenv batch (the observation of one env)."""
    if isinstance(batch, dict):
        return {key: _obs_row_copy(value, index) for key, value in batch.items()}
    if isinstance(batch, tuple):
        return tuple(_obs_row_copy(value, index) for value in batch)
    value = batch[index]
    return copy.deepcopy(value) if isinstance(value, np.ndarray) or batch.dtype == object else value


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


def is_envpool(vector_env: Any, reset_params: Mapping[str, inspect.Parameter]) -> bool:
    """Whether ``vector_env`` is an EnvPool pool, told by its contract: ``reset(env_id=...)`` and a ``config``
    mapping with ``batch_size`` (EnvPool 1.x pools are also ``gymnasium.vector.VectorEnv`` subclasses)."""
    config = getattr(vector_env, "config", None)
    return "env_id" in reset_params and isinstance(config, Mapping) and "batch_size" in config


def _num_envs(vector_env: Any) -> int:
    n = getattr(vector_env, "num_envs", None)
    if n is None:  # EnvPool: config["num_envs"] / len(pool)
        config = getattr(vector_env, "config", None)
        n = config.get("num_envs") if isinstance(config, Mapping) else None
    if n is None and hasattr(vector_env, "__len__"):
        n = len(vector_env)
    if not is_int(n) or int(n) < 1:  # type: ignore[arg-type]
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
        #: whether the vector env is an EnvPool pool (:func:`is_envpool`): finished envs are reset with
        #: ``reset(env_id=ids)``, and seeds belong to ``envpool.make``
        self.is_envpool = is_envpool(vector_env, self._reset_params)
        if self.is_envpool:
            self._partial_reset: str | None = "env_id"
        else:
            takes_env_id = "env_id" in self._reset_params
            self._partial_reset = "reset_mask" if is_gym_vector else "env_id" if takes_env_id else None
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
        config: Mapping[str, Any] = getattr(vector_env, "config", None) or {}
        if self.is_envpool and config.get("batch_size", 0) not in (0, num_envs):
            raise ValueError(
                f"from_gymnasium(vector_env): this EnvPool pool is asynchronous (batch_size="
                f"{config.get('batch_size')!r} < num_envs={num_envs}): each step returns only some envs, which a "
                "VecEnv's step cannot express. "
                f"Make it synchronous with envpool.make(..., num_envs={num_envs}) (batch_size defaults to num_envs); "
                "for asynchronous stepping of Python envs, vecenv's SubprocVecEnv offers send() / recv() by env_ids"
            )
        self._closed = False
        self._convert_obs = gymnasium_batch_to_vecenv(observation_space)
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
        check_open(self, "reset")
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
            if not all(_same_options(options, first) for options in self._options[1:]):
                raise ValueError(
                    "set_options(options): a Gymnasium vector env passes ONE options dict to every env's reset, got "
                    f"different options per env: {self._options!r}"
                )
            kwargs["options"] = copy.deepcopy(first)
        for name in kwargs:
            if self.is_envpool:
                why = (
                    "seeds are fixed by envpool.make(..., seed=s) (each env gets its own seed derived from s)"
                    if name == "seed"
                    else "its envs take no reset options"
                )
                what = "seeds" if name == "seed" else "options"
                raise ValueError(
                    f"{type(self.vector_env).__name__} is an EnvPool pool, whose reset ignores {what}: {why}; do not "
                    f"call {'seed()' if name == 'seed' else 'set_options()'} on it"
                )
            if name not in self._reset_params and not self._reset_takes_kwargs:
                raise ValueError(
                    f"{type(self.vector_env).__name__}.reset() takes no {name!r} argument, but {name}s were set with "
                    f"{'seed()' if name == 'seed' else 'set_options()'} (EnvPool: pass seed= to envpool.make)"
                )
        self._reset_seeds()
        self._reset_options()
        obs, infos = GUARD.run_waiting(self.vector_env.reset, **kwargs)
        self.reset_infos = per_env_infos(infos, n)
        return self._convert_obs(obs)

    def step_async(self, actions: np.ndarray) -> None:
        """Record the actions of the next :meth:`step_wait` (the vector env steps in :meth:`step_wait`).

        :param actions: one action per env: an array ``(num_envs, *action_shape)``, a list with one action per
            env, or for Dict / Tuple action spaces a dict / tuple of batched arrays.
        :raises AlreadyPendingCallError: if a step is already pending.
        :raises ValueError: if ``actions`` does not hold exactly ``num_envs`` actions
            (:class:`~vecenv.errors.ActionsWithoutEnvAxisError`, also a ``TypeError``, for actions without an env
            axis).
        :raises ClosedVecEnvError: after :meth:`close`.
        """
        check_open(self, "step_async")
        if self._waiting:
            raise AlreadyPendingCallError(
                "Cannot call step_async() while a step is pending: call step_wait() first to collect it."
            )
        try:
            count = num_actions(self.action_space, actions)
        except TypeError:  # no env axis: a scalar, a 0-d array, a dict of scalars
            raise ActionsWithoutEnvAxisError.for_batch(self.action_space, actions, self.num_envs) from None
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
        check_open(self, "step_wait")
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
        obs, rewards, terminated, truncated, vector_infos = GUARD.run_waiting(self.vector_env.step, actions)
        obs = self._convert_obs(obs)
        terminated = np.asarray(terminated, dtype=np.bool_).reshape(n)
        truncated = np.asarray(truncated, dtype=np.bool_).reshape(n)
        dones = terminated | truncated
        self._terminations, self._truncations = terminated.copy(), truncated.copy()
        rewards = np.array(rewards, dtype=np.float32).reshape(n)
        infos = per_env_infos(vector_infos, n)
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
                infos[i]["terminal_observation"] = _obs_row_copy(obs, i)
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
            new_obs, vector_infos = GUARD.run_waiting(self.vector_env.reset, options={"reset_mask": to_reset.copy()})
            new_obs = self._convert_obs(new_obs)
            reset_infos = per_env_infos(vector_infos, self.num_envs)
            for i in np.flatnonzero(to_reset).tolist():
                batch_assign(batch_slice(obs, i, i + 1), batch_slice(new_obs, i, i + 1))
                self.reset_infos[i] = reset_infos[i]
            to_reset[:] = False
        else:  # EnvPool: reset(env_id=ids) resets those envs (and cancels their own next-step autoreset)
            ids = np.flatnonzero(to_reset)
            new_obs, vector_infos = GUARD.run_waiting(self.vector_env.reset, env_id=ids.astype(np.int32))
            new_obs = self._convert_obs(new_obs)
            reset_infos = per_env_infos(vector_infos, len(ids))
            # rows in the order of the returned env ids (EnvPool reports them in infos["env_id"])
            returned = ids
            if isinstance(vector_infos, dict) and "env_id" in vector_infos:
                returned = np.asarray(vector_infos["env_id"]).reshape(-1)
            for row, i in enumerate(returned.tolist()):
                batch_assign(batch_slice(obs, i, i + 1), batch_slice(new_obs, row, row + 1))
                self.reset_infos[i] = reset_infos[row]
                to_reset[i] = False

    # --- calls into the sub-envs ------------------------------------------------------------------

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
            hint = (
                ": an EnvPool pool's envs are C++ objects without Python attributes or methods (its settings are in "
                "venv.vector_env.config)"
                if self.is_envpool
                else ""
            )
            raise AttributeError(f"{type(self.vector_env).__name__} has no {name}(): cannot reach its sub-envs{hint}")
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
        check_open(self, "get_attr")
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
        check_open(self, "set_attr")
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
        check_open(self, "env_method")
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
        check_open(self, "env_is_wrapped")
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
        check_open(self, "get_images")
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
