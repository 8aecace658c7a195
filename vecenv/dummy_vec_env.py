"""SB3's ``DummyVecEnv``: every env in the calling process, stepped one after another in ``step_wait``."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from numpy.typing import DTypeLike

from vecenv.actions import split_actions
from vecenv.base import VecEnvStepReturn
from vecenv.engine.checks import check_env_fns, checked_autoreset_mode, checked_obs_slots, checked_rewards_dtype
from vecenv.engine.core import AsyncState
from vecenv.interrupts import ENVS_WAIT_OWNERS, GUARD
from vecenv.spaces import (
    buffer_as_obs_dict,
    obs_space_info,
)
from vecenv.worker_vec_env import WorkerVecEnv
from vecenv.workers import InProcessWorker

__all__ = ["DummyVecEnv"]

#: what ``buf_obs`` / ``buf_infos`` hold until a subclass assigns its own
_NOT_REPLACED = object()


class DummyVecEnv(WorkerVecEnv):
    """Steps every env in sequence in the calling process (Stable-Baselines3's ``DummyVecEnv``).

    Best for cheap envs, where inter-process communication costs more than the env itself.

    :param env_fns: callables that each return a new ``gymnasium.Env``.
    :param autoreset_mode: what happens when an episode ends (:class:`gymnasium.vector.AutoresetMode`):
        ``SAME_STEP`` (SB3's rule, default), ``NEXT_STEP`` or ``DISABLED``; see docs/semantics.md (step and
        reset) and docs/gymnasium-api.md (autoreset modes).
    :param rewards_dtype: dtype of the rewards ``(num_envs,)`` that ``step`` returns: ``np.float32`` (None, the
        default, as SB3's ``DummyVecEnv``) or ``np.float64`` (as SB3's ``SubprocVecEnv`` for envs that return
        Python floats: the envs' rewards unrounded, so :class:`~vecenv.VecNormalize`'s statistics are those of
        an SB3 ``SubprocVecEnv`` run; see docs/migrating-from-sb3.md). Their ``np.dtype`` and names
        (``"float32"``, ``"float64"``) are accepted too.
    :param obs_slots: how many observation batch buffers the envs write into, in turn, so that ``step()`` and
        ``reset()`` return the batch without copying it again (as :class:`SubprocVecEnv`'s ``obs_slots``; None,
        the default: up to 4 within 256 MiB for a batch of 64 KiB or more, else none; 0 or 1: every call returns a
        copy). The arrays returned are the
        caller's to keep either way.
    :raises TypeError: if ``env_fns`` is not a list of callables, or one returns something that is not a
        ``gymnasium.Env`` (the message names the index).
    :raises ValueError: if two callables return the same env instance, the envs' spaces differ,
        ``autoreset_mode`` is unknown, ``rewards_dtype`` is neither float32 nor float64, or ``obs_slots`` is not a
        non-negative integer (before any env is built).
    """

    def __init__(
        self,
        env_fns: list[Callable[[], gym.Env]],
        autoreset_mode: AutoresetMode | str = AutoresetMode.SAME_STEP,
        rewards_dtype: DTypeLike | None = None,
        obs_slots: int | None = None,
    ) -> None:
        env_fns = check_env_fns(env_fns)
        obs_slots = checked_obs_slots(obs_slots)
        #: the numpy type of the rewards ``step`` returns (``np.float32`` or ``np.float64``)
        self.rewards_dtype = checked_rewards_dtype(rewards_dtype, type(self).rewards_dtype)
        worker = InProcessWorker(env_fns, range(len(env_fns)), checked_autoreset_mode(autoreset_mode))
        group = worker.group
        rewards = np.zeros((len(env_fns),), dtype=self.rewards_dtype)
        buffers = (group.obs, rewards, group.dones, group.terminations, group.truncations)
        super().__init__([worker], group.observation_space, group.action_space, buffers, None, obs_slots)
        self._group = group
        self.envs = group.envs
        if not self.nested_spaces:  # SB3's attributes (defined for SB3's non-nested spaces)
            self.keys, _, _ = obs_space_info(self.observation_space)
        self.buf_rews = self._rewards
        self.buf_dones = self._dones
        self.metadata = self.envs[0].metadata

    # the one group steps in the calling thread: step_async / step_wait call it directly, without going
    # through the worker interface (less work per step: docs/performance.md)

    def _step_async(self, actions: Any) -> None:
        """Check and record the actions; the envs step in :meth:`step_wait` (as in SB3's DummyVecEnv).

        :param actions: as :meth:`WorkerVecEnv.step_async`.
        :raises AlreadyPendingCallError: if a step is already pending.
        :raises ValueError: as :meth:`WorkerVecEnv.step_async`, before anything reaches an env.
        """
        clock = self._clock
        started = clock.enter()
        try:
            self._begin_step(actions)
            self.actions = actions
            self._state = AsyncState.WAITING_STEP
        finally:
            clock.send += clock.leave(started)

    def _step_wait(self, counted: bool) -> VecEnvStepReturn:
        """Step every env with the actions given to :meth:`step_async`.

        :return: as :meth:`WorkerVecEnv.step_wait`.
        :raises NoAsyncCallError: if no step is pending.
        :raises BaseException: an env's exception, with a note naming the env, or an interruption (Ctrl-C). The
            envs before it have stepped: the next step returns their results instead of stepping them again;
            it steps the env that raised and those after it (see docs/reliability.md).
        """
        clock = self._clock
        started = clock.enter()
        try:
            self._start_collecting_step()
            actions = self.actions
            if self._held:  # a step raised before: the envs that hold its results are not stepped again
                self._send_steps(actions)
                result = self._collect_steps()
            else:
                if self._composite_actions:
                    actions = split_actions(self.action_space, actions, 0, self.num_envs)
                self._prepare_obs_write(keep_rows=False)
                try:
                    waiting = GUARD.envs_begin()  # the envs' own code: Ctrl-C is raised there at once
                    try:
                        infos, reset_infos = self._group.step(actions)
                    finally:
                        GUARD.envs_end(waiting)
                except BaseException:
                    self._hold_partial(0)
                    raise
                self.reset_infos[:] = reset_infos
                result = self._step_result(infos)
            if counted and GUARD.deferred is not None:
                self._hold_step_result(result)
        finally:
            clock.collect += clock.leave(started)
        clock.steps += 1
        return result

    def _discard_requests_in_flight(self) -> None:
        # the envs have not stepped yet: the recorded actions are dropped (SB3's DummyVecEnv)
        self._state = AsyncState.IDLE

    @property
    def buf_obs(self) -> OrderedDict[Any, np.ndarray]:
        """SB3's view of the observation buffer the envs wrote last: an ``OrderedDict`` of ``(num_envs, *shape)``
        arrays keyed as SB3's ``obs_space_info`` (``None`` for a non-Dict space); not defined for nested spaces.

        A subclass may assign its own (as SB3's allows, e.g. one that steps a batched model in its own ``step``):
        from then on this attribute is that object, which vecenv's own steps do not write into."""
        replaced = self.__dict__.get("_replaced_buf_obs", _NOT_REPLACED)
        if replaced is not _NOT_REPLACED:
            return replaced
        if self.nested_spaces or self._obs_buffer is None:
            raise AttributeError("buf_obs")
        return buffer_as_obs_dict(self.observation_space, self._obs_buffer)

    @buf_obs.setter
    def buf_obs(self, value: Any) -> None:
        self.__dict__["_replaced_buf_obs"] = value

    @property
    def buf_infos(self) -> list[dict[str, Any]]:
        """The infos returned by the last step (SB3 attribute); a subclass may assign its own, as ``buf_obs``."""
        replaced = self.__dict__.get("_replaced_buf_infos", _NOT_REPLACED)
        if replaced is not _NOT_REPLACED:
            return replaced
        return self._last_infos

    @buf_infos.setter
    def buf_infos(self, value: Any) -> None:
        self.__dict__["_replaced_buf_infos"] = value


ENVS_WAIT_OWNERS.add(DummyVecEnv._step_wait.__code__)
