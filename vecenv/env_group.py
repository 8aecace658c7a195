"""EnvGroup: the only code in vecenv that calls ``env.step`` and ``env.reset``.

Every backend runs its sub-envs through an :class:`EnvGroup`: :class:`~vecenv.DummyVecEnv` holds one
group with all envs in the calling process, :class:`~vecenv.SubprocVecEnv` one group per worker
process. The episode-end rule therefore exists exactly once and backends cannot drift apart.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from copy import deepcopy
from time import perf_counter
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

from vecenv.errors import (
    UncopyableInfoError,
    drop_uncopyable,
)
from vecenv.failed_steps import FailedSteps
from vecenv.group_accounts import GroupAccounts
from vecenv.protocol import Command, EmptyOptions
from vecenv.spaces import create_batch_buffer, make_obs_writer, make_row_writer
from vecenv.sub_envs import (
    SubEnvRequests,
    build_env,
    check_distinct_envs,
    check_same_spaces,
    copy_info,
    copy_observation,
    is_wrapped,
)

__all__ = ["EnvGroup", "check_same_spaces", "is_wrapped"]


# stands for every default info {"TimeLimit.truncated": False} when infos are not dense (never handed out)
_PLACEHOLDER_INFO: dict[str, Any] = {"TimeLimit.truncated": False}


class EnvGroup(GroupAccounts, FailedSteps, SubEnvRequests):
    """Owns ``k`` sub-envs and steps them into preallocated batch buffers with Stable-Baselines3's rules.

    Episode end: ``done = terminated or truncated`` and ``info["TimeLimit.truncated"] = truncated and not
    terminated`` (SB3); the raw flags are kept in :attr:`terminations` / :attr:`truncations`. What happens
    next depends on ``autoreset_mode`` (Gymnasium's modes, one implementation for every backend):

    * ``SAME_STEP`` (SB3's rule, the default): the last observation is copied to
      ``info["terminal_observation"]``, the env is reset at once, the reset info is kept in
      :attr:`reset_infos` and the first observation of the new episode is written to the buffer.
    * ``NEXT_STEP`` (Gymnasium's default): the buffer holds the last observation; the env's next step
      ignores its action and resets it instead (reward 0, not done, the info is the reset info).
    * ``DISABLED``: nothing; the caller resets finished envs (``reset`` with ``indices``).

    Seeds and options: :meth:`set_next_reset` stores a seed / options for an env's NEXT reset, whoever triggers
    it (the caller's ``reset`` or an autoreset); they are used once, then forgotten. A seed or options
    passed with a caller's ``reset`` take precedence over stored ones (which are then dropped too).

    :param env_fns: factories of the group's envs.
    :param env_indices: global index of each env in the vector env (used in error messages).
    :param autoreset_mode: a :class:`gymnasium.vector.AutoresetMode` (or its value); ``SAME_STEP`` by default.
    :raises TypeError: if a factory is not callable or does not return a ``gymnasium.Env``.
    :raises ValueError: if two factories return the same instance or the envs' spaces differ.
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env]],
        env_indices: Sequence[int],
        autoreset_mode: AutoresetMode | str = AutoresetMode.SAME_STEP,
    ) -> None:
        self.env_indices = list(env_indices)
        self.autoreset_mode = AutoresetMode(autoreset_mode)
        #: call envs' ``reset`` as Gymnasium's vector envs do (``seed=`` and ``options=`` always) instead of as
        #: SB3's do (``options=`` only when set); set by the RESET requests of the vector env (see :meth:`reset`)
        self.gymnasium_resets = False
        self.envs: list[gym.Env] = []
        try:
            for env_fn, env_index in zip(env_fns, self.env_indices, strict=True):
                self.envs.append(build_env(env_fn, env_index))
            check_distinct_envs(self.envs)
            first = self.envs[0]
            self.observation_space: gym.Space = first.observation_space
            self.action_space: gym.Space = first.action_space
            for env, env_index in zip(self.envs[1:], self.env_indices[1:], strict=True):
                check_same_spaces(
                    env_index, env.observation_space, env.action_space, self.observation_space, self.action_space
                )
            n = len(self.envs)
            #: the observation batch buffer ``(k, *obs_shape)``; a worker may swap in its rows of shared memory
            self.obs = create_batch_buffer(self.observation_space, n)
        except BaseException:
            self.close_quietly()
            raise
        # float64 (until a worker swaps in the vector env's buffers): a worker without shared memory sends these to
        # the parent, whose buffer has the vector env's rewards_dtype (float64 for vecenv.gymnasium; float32
        # casts identically)
        self.rewards = np.zeros((n,), dtype=np.float64)
        self.dones = np.zeros((n,), dtype=bool)
        #: bool ``(k,)``: the ``terminated`` / ``truncated`` flags of each env's last step (both may be set)
        self.terminations = np.zeros((n,), dtype=bool)
        self.truncations = np.zeros((n,), dtype=bool)
        #: NEXT_STEP mode: envs whose episode ended at their last step (reset by their next step)
        self.needs_reset = [False] * n
        # local indices of the envs whose dones / terminations / truncations may hold a True (cleared by
        # the next step); None: unknown, clear all
        self._envs_with_flags: list[int] | None = None
        #: whether :meth:`step` returns a fresh info dict for every env (False in worker processes, which
        #: send only :attr:`rich_infos`: the others are placeholders, to be rebuilt by the parent)
        self.dense_infos = True
        #: seed / options for each env's next reset (see :meth:`set_next_reset`); None: none stored
        self.next_reset_seeds: list[int | None] = [None] * n
        self.next_reset_options: list[dict[str, Any] | None] = [None] * n
        #: NEXT_STEP mode: local indices of the envs the last :meth:`step` reset (instead of stepping them)
        self.reset_by_last_step: list[int] = []
        # SAME_STEP mode: envs whose episode ended in a step whose automatic reset raised -> what that step
        # returned (reward, info, whether the info travels, terminated, truncated); their next step resets them
        self._unfinished: dict[int, tuple[Any, dict[str, Any], bool, bool, bool]] = {}
        # what a step whose automatic reset raised returned for that env (see _end_episode), until the step's
        # error handler takes it
        self._failed_autoreset: tuple[Any, dict[str, Any], bool, bool, bool] | None = None
        # what the last step that raised completed (see take_partial_step)
        self._partial_step: tuple[list[int], list[dict[str, Any]]] | None = None
        # the info values the current step could not copy: (env index, "info", key, type name, reason) each; the
        # step raises UncopyableInfoError once every env has stepped (see _copy_info_dropping)
        self._uncopyable: list[tuple[int, str, Any, str, str]] = []
        #: if set (a batch buffer of ``k`` rows, by worker processes whose observations live in shared memory), the
        #: last observation of a finished episode is written there instead of into ``info["terminal_observation"]``
        #: when a row holds exactly that value (:func:`vecenv.spaces.make_row_writer`: arrays of the row's dtype and
        #: shape, dicts in the space's key order); the worker's parent puts it back into the info (see
        #: :mod:`vecenv.workers.messages`)
        self.terminal_obs: Any = None
        self._write_terminal_row = make_row_writer(self.observation_space)
        self.reset_infos: list[dict[str, Any]] = [{} for _ in range(n)]
        self._write_obs = make_obs_writer(self.observation_space)
        #: local indices of the envs whose episode ended at the last :meth:`step`
        self.ended: list[int] = []
        #: positions (among the stepped envs) of the last step's infos holding more than
        #: ``"TimeLimit.truncated"`` (worker processes send only these to their parent)
        self.rich_infos: list[int] = []
        self._rows_buffer: Any = None
        self._rows: list[np.ndarray] = []
        # the rows of each buffer used lately (observation slots rotate: vecenv.engine.obs_slots), by id()
        self._rows_cache: dict[int, tuple[Any, list[np.ndarray]]] = {}
        self._row_shape: tuple[int, ...] = ()
        self._row_dtype: Any = None
        self.restart_accounts()
        self.handlers = self._make_handlers()

    def _make_handlers(self) -> dict[Command, Callable[[Any], Any]]:
        """The group's handler of each request (what a worker runs for it)."""
        return {
            Command.STEP: lambda payload: self.step(*payload),
            Command.RESET: self.reset,
            Command.SET_NEXT_RESET: self.set_next_reset,
            Command.GET_ATTR: self.get_attr,
            Command.SET_ATTR: self.set_attr,
            Command.HAS_ATTR: self.has_attr,
            Command.ENV_METHOD: self.env_method,
            Command.CALL: self.call,
            Command.IS_WRAPPED: self.is_wrapped,
            Command.RENDER: self.render,
            Command.CLOSE: self.close,
            Command.STATS: self.accounts,
        }

    def __len__(self) -> int:
        return len(self.envs)

    def __getstate__(self) -> dict[str, Any]:
        """For copies (DummyVecEnv's): the state without what derives from the spaces and buffers (rebuilt by
        :meth:`__setstate__`; the copied vector env attaches its buffers)."""
        state = self.__dict__.copy()
        for name in ("handlers", "_write_terminal_row", "_write_obs"):
            del state[name]
        state.update(_rows_buffer=None, _rows=[], _rows_cache={})
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._write_terminal_row = make_row_writer(self.observation_space)
        self._write_obs = make_obs_writer(self.observation_space)
        self.handlers = self._make_handlers()

    # --- stepping ---------------------------------------------------------------------------------

    def step(
        self, actions: Any, indices: Sequence[int] | None = None
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Step the envs with ``actions[j]`` and write their obs, rewards and dones into the buffers.

        :param actions: indexable by local env index (``actions[j]`` is env ``j``'s action).
        :param indices: local indices of the envs to step (a partial batch), or None for all.
        :return: ``(infos, reset_infos)``: fresh info dicts of the stepped envs (in ``indices`` order), and
            :attr:`reset_infos` of all envs (updated for the envs that reset).
        :raises BaseException: whatever an env raised (with a note naming it), or an interruption. The envs
            that finished stepping before it keep their results (:meth:`take_partial_step`); the env that
            raised and those after it have not stepped (an env whose automatic reset raised finishes it at its
            next step, see :meth:`_keep_partial_step`).
        :raises UncopyableInfoError: after every env stepped (automatic resets included), if an info held a value
            that cannot be deep-copied; every env keeps its result (:meth:`take_partial_step`), that value
            removed from its info (see :meth:`_copy_info_dropping`).
        """
        # hot path: locals only; an observation of exactly the row's shape and dtype is stored through a
        # prebuilt row view (half the cost of buffer[j] = obs), anything else goes through the checking
        # writer (which refuses what does not fit); rewards gathered in a list and the (rare) episode ends
        # as index lists, each written once per call
        perf = perf_counter
        started = perf()
        env_time = 0.0
        obs_buffer, envs, reset_infos = self.obs, self.envs, self.reset_infos
        write = self._write_obs
        rows = self._rows if self._rows_buffer is obs_buffer else self._make_rows()
        row_shape, row_dtype = self._row_shape, self._row_dtype
        dense, placeholder = self.dense_infos, _PLACEHOLDER_INFO
        next_step = self.autoreset_mode is AutoresetMode.NEXT_STEP
        needs_reset = self.needs_reset
        dones, terminations, truncations = self.dones, self.terminations, self.truncations
        stepped = range(len(envs)) if indices is None else indices
        # clear the flags of the last step first: only the envs that set one (element writes: cheaper
        # than whole-array operations), everything if unknown (new buffers, partial batches, restarts)
        flagged = self._envs_with_flags
        if indices is not None:
            dones[stepped] = terminations[stepped] = truncations[stepped] = False
            self._envs_with_flags = None  # other envs' flags stay: the next full step clears all
        elif flagged is None:
            dones.fill(False)
            terminations.fill(False)
            truncations.fill(False)
        else:
            for j in flagged:
                dones[j] = terminations[j] = truncations[j] = False
        infos: list[dict[str, Any]] = []
        step_rewards: list[Any] = []
        add_reward, add_info, ndarray = step_rewards.append, infos.append, np.ndarray
        ended: list[int] = []
        rich_infos: list[int] = []
        self.ended, self.rich_infos, self.reset_by_last_step = ended, rich_infos, []
        unfinished = self._unfinished or None
        odd = None  # (a reward that is not one number: the error, which keeps what the step completed itself)
        try:
            for j in stepped:
                if next_step and needs_reset[j]:
                    obs, info = self._reset_at_next_step(j, len(infos))
                    reward: Any = 0.0
                elif unfinished is not None and j in unfinished:
                    obs, reward, info = self._finish_autoreset(j, len(infos))
                else:
                    before = perf()
                    obs, reward, terminated, truncated, env_info = envs[j].step(actions[j])
                    env_time += perf() - before
                    # the caller keeps the infos: copy them, deeply only if a value is mutable (as SB3's deepcopy)
                    if env_info:
                        try:
                            info = copy_info(env_info)
                        except Exception:
                            info = self._copy_info_dropping(j, env_info)
                        info["TimeLimit.truncated"] = False
                        rich_infos.append(len(infos))
                    else:
                        info = {"TimeLimit.truncated": False} if dense else placeholder
                    if terminated or truncated:
                        rich = bool(env_info)
                        obs, info = self._end_episode(j, len(infos), obs, reward, info, rich, terminated, truncated)
                # (dtype identity: builtin dtypes are singletons; an equal but distinct dtype takes the writer)
                if type(obs) is ndarray and obs.dtype is row_dtype and obs.shape == row_shape:
                    rows[j][...] = obs
                else:
                    write(obs_buffer, j, obs)
                add_reward(reward)
                add_info(info)
            try:
                if indices is None:
                    self.rewards[:] = step_rewards
                else:
                    self.rewards[stepped] = step_rewards
            except (TypeError, ValueError) as exc:
                odd = self._store_odd_rewards(stepped, infos, step_rewards)
                if odd is not None:
                    raise odd from exc
            if indices is None:
                self._envs_with_flags = ended
            if self._uncopyable:
                raise self._uncopyable_error()
        except BaseException as exc:
            autoreset, self._failed_autoreset = self._failed_autoreset, None
            if exc is not odd:
                self._keep_partial_step(exc, stepped, infos, step_rewards, autoreset)
            raise
        finally:
            self.env_seconds += env_time
            self.env_steps += len(infos)
            self.episodes += len(ended)
            self.busy_seconds += perf() - started
        return infos, reset_infos

    # --- the rare paths of a step, out of its loop ------------------------------------------------------

    def _reset_at_next_step(self, j: int, position: int) -> tuple[Any, dict[str, Any]]:
        """Gymnasium's NEXT_STEP: this step resets env ``j`` (its action is ignored); ``position``: its place among
        the step's infos. :return: ``(obs, info)``, the info being a copy of the reset info."""
        obs, self.reset_infos[j] = self._reset_one(j, None, None)
        self._check_first_obs(j, obs)  # (refused: the reset failed, and the next step tries it again)
        self.needs_reset[j] = False
        self.reset_by_last_step.append(j)
        try:
            info = copy_info(self.reset_infos[j])
        except Exception:
            info = self._copy_info_dropping(j, self.reset_infos[j])
        info["TimeLimit.truncated"] = False
        if len(info) > 1:
            self.rich_infos.append(position)
        return obs, info

    def _copy_info_dropping(self, j: int, env_info: dict[str, Any]) -> dict[str, Any]:
        """Env ``j`` returned an info that cannot be deep-copied (a lock, a generator, ...): copy it value by value,
        leaving out each value that cannot be copied (named in ``info["vecenv.uncopyable_info"]``). Env ``j``'s step
        goes on (its episode end and automatic reset included); the step raises :class:`UncopyableInfoError` once
        every env has stepped, and they all keep their results (the next step returns them)."""
        info, dropped = drop_uncopyable(env_info, deepcopy, self.nests_agent_infos(j))
        env_index = self.env_indices[j]
        self._uncopyable += [(env_index, "info", key, type_name, reason) for key, type_name, reason in dropped]
        return info

    def nests_agent_infos(self, j: int) -> bool:
        """Whether env ``j`` (unwrapped) is an agent stack (:class:`vecenv.pettingzoo.AgentStackEnv`), whose info
        holds each agent's info under an int key: values that cannot be copied are then left out of the agent's
        info, not the whole agent's info (see :func:`~vecenv.errors.drop_uncopyable`)."""
        env = self.envs[j]
        return getattr(getattr(env, "unwrapped", env), "nests_agent_infos", False) is True

    def _uncopyable_error(self) -> UncopyableInfoError:
        """The error naming the info values the current step left out (which are then forgotten)."""
        dropped, self._uncopyable = self._uncopyable, []
        return UncopyableInfoError.from_dropped(dropped)

    def _finish_autoreset(self, j: int, position: int) -> tuple[Any, Any, dict[str, Any]]:
        """Env ``j``'s episode ended in a step that raised in its automatic reset: reset it now (its action is
        ignored) and report that episode end. :return: ``(obs, reward, info)`` of that step."""
        reward, info, rich, terminated, truncated = self._unfinished[j]
        obs, self.reset_infos[j] = self._reset_one(j, None, None)
        self._check_first_obs(j, obs)  # (refused: the reset failed again, and the next step tries it again)
        del self._unfinished[j]
        self.ended.append(j)
        self.dones[j], self.terminations[j], self.truncations[j] = True, terminated, truncated
        if rich:
            self.rich_infos.append(position)
        return obs, reward, info

    def _check_first_obs(self, j: int, obs: Any) -> None:
        """Inside an automatic reset of env ``j``: raise :class:`ValueError` now if its first observation does not
        fit, so that the reset fails. An array of the row's dtype and shape is only looked at (:meth:`step` stores
        it next); anything else goes through the checking writer (which raises, or stores it)."""
        if type(obs) is not np.ndarray or obs.dtype is not self._row_dtype or obs.shape != self._row_shape:
            self._write_obs(self.obs, j, obs)

    def _end_episode(
        self,
        j: int,
        position: int,
        obs: Any,
        reward: Any,
        info: dict[str, Any],
        rich: bool,
        terminated: bool,
        truncated: bool,
    ) -> tuple[Any, dict[str, Any]]:
        """Env ``j``'s step ended its episode: set its flags and SB3's ``TimeLimit.truncated``; in SAME_STEP mode
        keep the last observation (shared terminal row or ``info["terminal_observation"]``) and reset the env, in
        NEXT_STEP mode mark it for a reset at its next step. ``position``: its place among the step's infos; ``rich``:
        the env returned a non-empty info (already counted in :attr:`rich_infos`).

        :return: ``(obs, info)`` to report: the reset observation in SAME_STEP mode, else ``obs``.
        :raises BaseException: what the automatic reset raised; what the step returned is then kept in
            ``_failed_autoreset`` for :meth:`_keep_partial_step`.
        """
        self.ended.append(j)
        self.dones[j] = True
        if info is _PLACEHOLDER_INFO:
            info = {"TimeLimit.truncated": False}
        if terminated:
            self.terminations[j] = True
        if truncated:
            self.truncations[j] = True
            if not terminated:
                info["TimeLimit.truncated"] = True
        if self.autoreset_mode is AutoresetMode.SAME_STEP:
            terminal_obs = self.terminal_obs
            in_info = terminal_obs is None or not self._write_terminal_row(terminal_obs, j, obs)
            if in_info:
                info["terminal_observation"] = obs  # (the env's own until copied below: kept if the copy fails)
                if not rich:
                    rich = True
                    self.rich_infos.append(position)
            elif "terminal_observation" in info:  # the env's own key: the parent puts the row there instead
                del info["terminal_observation"]
            try:
                if in_info:
                    info["terminal_observation"] = copy_observation(obs)
                obs, self.reset_infos[j] = self._reset_one(j, None, None)
                self._check_first_obs(j, obs)  # (a first observation that does not fit fails the reset)
            except BaseException:
                self._failed_autoreset = (reward, info, rich, bool(terminated), bool(truncated))
                raise
        elif self.autoreset_mode is AutoresetMode.NEXT_STEP:
            self.needs_reset[j] = True
        return obs, info

    def drop_buffers(self) -> None:
        """Closing: drop the buffers the group writes into and their row views (``parent_envs``: the shared block)."""
        self.obs = None
        self.rewards = np.zeros(0)
        self.dones, self.terminations, self.truncations = (np.zeros(0, dtype=bool) for _ in range(3))
        self._rows_buffer, self._rows = None, []
        self._rows_cache.clear()

    def forget_flags(self) -> None:
        """The flag arrays were replaced or written by someone else: the next step clears them all."""
        self._envs_with_flags = None

    def _make_rows(self) -> list[np.ndarray]:
        """Views of the rows of the observation buffer (none for dict / tuple buffers), for each buffer swapped in
        (worker processes swap in their shared-memory slice; observation slots rotate), kept for the few
        buffers used lately."""
        obs_buffer = self.obs
        self._rows_buffer = obs_buffer
        cached = self._rows_cache.get(id(obs_buffer))
        if cached is not None and cached[0] is obs_buffer:
            self._rows = cached[1]
        elif isinstance(obs_buffer, np.ndarray):
            self._rows = [obs_buffer[j, ...] for j in range(len(obs_buffer))]  # views, also of 0-d rows
            if len(self._rows_cache) >= 8:
                self._rows_cache.clear()
            self._rows_cache[id(obs_buffer)] = (obs_buffer, self._rows)
        else:
            self._rows = []
        if isinstance(obs_buffer, np.ndarray):
            self._row_shape, self._row_dtype = obs_buffer.shape[1:], obs_buffer.dtype
        else:
            self._row_dtype = None  # no array is of dtype None: every observation takes the writer
        return self._rows

    def _reset_one(
        self, j: int, seed: int | None, options: dict[str, Any] | None, explicit: bool = False
    ) -> tuple[Any, dict[str, Any]]:
        """Reset env ``j`` with ``seed`` / ``options``, else its stored ones (:meth:`set_next_reset`), which are
        consumed (either way) once the reset succeeded: a reset that raised leaves them for the next one.

        The call follows the caller's library. An automatic reset with nothing stored is ``env.reset()`` (as SB3's
        and Gymnasium's vector envs make it). A reset the caller asked for (``explicit``), or one with a stored
        seed / options, is SB3's ``env.reset(seed=seed)`` plus ``options=`` only when there are options, or, once
        :attr:`gymnasium_resets` is set, Gymnasium's ``env.reset(seed=seed, options=options)`` with both keywords
        always passed (None when not given; ``{}`` for an :class:`~vecenv.protocol.EmptyOptions`, as Gymnasium
        passes the empty dict its caller gave).
        """
        if seed is None:
            seed = self.next_reset_seeds[j]
        no_options: dict[str, Any] | None = {} if isinstance(options, EmptyOptions) else None
        if not options:
            options = self.next_reset_options[j]
        started = perf_counter()
        try:
            if options or (self.gymnasium_resets and (explicit or seed is not None)):
                result = self.envs[j].reset(seed=seed, options=options or no_options)
            elif explicit or seed is not None:
                result = self.envs[j].reset(seed=seed)
            else:
                result = self.envs[j].reset()
        finally:
            self.env_seconds += perf_counter() - started
            self.resets += 1
        self.next_reset_seeds[j] = None
        self.next_reset_options[j] = None
        return result

    def reset(self, payload: tuple[Any, ...]) -> list[dict[str, Any]]:
        """Reset envs, env ``j`` with ``seed=seeds[j]`` and ``options=options[j]`` (or its stored ones).

        :param payload: ``(seeds, options)``, ``(seeds, options, indices)`` or ``(seeds, options, indices,
            gymnasium_resets)``: one seed (or None) and one options dict (empty: none) per env of the group;
            ``indices`` (local) limits the reset to those envs (Gymnasium's ``reset_mask``), None resets all;
            ``gymnasium_resets`` sets :attr:`gymnasium_resets` (how envs' ``reset`` is called from now on).
        :return: the reset infos of all envs (also stored in :attr:`reset_infos`).
        """
        started, env_before = perf_counter(), self.env_seconds
        seeds, options = payload[0], payload[1]
        indices = payload[2] if len(payload) > 2 and payload[2] is not None else range(len(self.envs))
        if len(payload) > 3:
            self.gymnasium_resets = bool(payload[3])
        try:
            for j in indices:
                try:
                    obs, self.reset_infos[j] = self._reset_one(j, seeds[j], options[j], explicit=True)
                    self.needs_reset[j] = False
                    self._unfinished.pop(j, None)
                    self.dones[j] = self.terminations[j] = self.truncations[j] = False
                    self._write_obs(self.obs, j, obs)
                except Exception as exc:
                    self._fail(exc, j, Command.RESET)
                    raise
        finally:
            self.requested_reset_env_seconds += self.env_seconds - env_before
            self.busy_seconds += perf_counter() - started
        return list(self.reset_infos)

    def set_next_reset(self, payload: tuple[Any, ...]) -> None:
        """``(seeds, options[, replace_seeds, replace_options])``, one entry per env of the group: store each
        non-None seed / non-empty options for that env's next reset, whether the caller or an autoreset triggers
        it; for a kind to replace, store every entry, so that None / empty options clear what was stored."""
        seeds, options = payload[0], payload[1]
        replace_seeds, replace_options = payload[2:4] if len(payload) > 2 else (False, False)
        for j, (seed, env_options) in enumerate(zip(seeds, options, strict=True)):
            if seed is not None or replace_seeds:
                self.next_reset_seeds[j] = seed
            if env_options or replace_options:
                self.next_reset_options[j] = env_options or None

    def close(self, payload: Any = None) -> None:
        """Close every env; the first error is raised after all envs had their turn."""
        first_error: BaseException | None = None
        for j, env in enumerate(self.envs):
            try:
                env.close()
            except Exception as exc:
                self._fail(exc, j, Command.CLOSE)
                first_error = first_error or exc
        if first_error is not None:
            raise first_error

    def close_quietly(self) -> None:
        """Close every env, ignoring errors (used while unwinding a failed construction)."""
        for env in self.envs:
            with contextlib.suppress(Exception):
                env.close()
