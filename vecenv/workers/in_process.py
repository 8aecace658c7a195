"""The in-process worker used by :class:`~vecenv.DummyVecEnv`: the EnvGroup runs in the calling thread."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
from gymnasium.vector import AutoresetMode

from vecenv.env_group import EnvGroup
from vecenv.interrupts import ENVS_WAIT_OWNERS, GUARD
from vecenv.protocol import Command
from vecenv.workers.base import Worker


class InProcessWorker(Worker):
    """Runs an :class:`EnvGroup` in this process; the group writes straight into the vector env's buffers.

    :meth:`send` only records the request and :meth:`recv` executes it, so ``step_async`` is free and
    the envs step inside ``step_wait`` (as in Stable-Baselines3's DummyVecEnv). Env errors propagate
    unchanged, with a note naming the env index.

    :param env_fns: factories of the group's envs.
    :param env_indices: their global indices.
    :param autoreset_mode: the group's :class:`gymnasium.vector.AutoresetMode` (see :class:`EnvGroup`).
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env]],
        env_indices: Sequence[int],
        autoreset_mode: AutoresetMode = AutoresetMode.SAME_STEP,
    ) -> None:
        super().__init__(env_indices)
        self.group = EnvGroup(env_fns, env_indices, autoreset_mode=autoreset_mode)
        self.autoreset_mode = self.group.autoreset_mode
        self._handler: Callable[[Any], Any] | None = None
        self._command: Command | None = None
        self._payload: Any = None

    def attach(self, obs_buffer: Any, rewards: Any, dones: Any, terminations: Any, truncations: Any) -> None:
        # the group writes straight into the vector env's buffers: nothing is ever copied between them
        group = self.group
        group.obs, group.rewards, group.dones = obs_buffer, rewards, dones
        group.terminations, group.truncations = terminations, truncations
        group.forget_flags()  # new arrays: let the next step clear them

    supports_obs_slots = True
    copyable = True

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_handler"] = None  # (a bound method of the group: found again from the command)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if self._command is not None:
            self._handler = self.group.handlers[self._command]

    def use_obs_rows(self, obs_rows: Any) -> None:
        self.group.obs = obs_rows

    def shutdown_finish(self, deadline: float) -> None:
        """Drop the group's views of the vector env's buffers: with ``parent_envs``, they map the shared block,
        which closing the vector env must release (arrays handed out keep their own mapping)."""
        self.group.drop_buffers()

    #: recv() runs the request: it never waits for a reply
    blocks = False

    @property
    def pending(self) -> Command | None:
        return self._command

    def send(self, command: Command, payload: Any) -> None:
        self._handler = self.group.handlers[command]
        self._command = command
        self._payload = payload

    def recv(self) -> Any:
        handler, payload = self._handler, self._payload
        self._handler = self._payload = self._command = None
        assert handler is not None, "recv() without send()"
        waiting = GUARD.envs_begin()  # the envs' own code runs here: Ctrl-C is raised there at once
        try:
            return handler(payload)
        finally:
            GUARD.envs_end(waiting)

    def take_partial_step(self) -> tuple[list[int], list[dict[str, Any]], list[dict[str, Any]]] | None:
        partial = self.group.take_partial_step()
        if partial is None:
            return None
        return partial[0], partial[1], list(self.group.reset_infos)

    def shutdown_begin(self) -> None:
        self._handler = self._payload = self._command = None

    def shutdown_end(self, deadline: float) -> BaseException | None:
        try:
            self.group.close()
        except Exception as exc:
            return exc
        return None


ENVS_WAIT_OWNERS.add(InProcessWorker.recv.__code__)
