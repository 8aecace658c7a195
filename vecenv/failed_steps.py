"""What a step of an :class:`~vecenv.env_group.EnvGroup` that raised keeps: the envs that finished stepping hold
their results (observations and flags in the buffers, rewards and infos kept here) for the vector env to return
at its next step, and the env that failed is named in the error."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from vecenv.errors import add_env_context, add_note, describe_dropped
from vecenv.protocol import Command
from vecenv.sub_envs import is_number, reward_error, scalar_rewards

__all__ = ["FailedSteps"]


class FailedSteps:
    """The part of :class:`~vecenv.env_group.EnvGroup` that keeps what a failed step completed (its attributes are
    the group's)."""

    env_indices: list[int]
    rewards: np.ndarray
    dones: np.ndarray
    terminations: np.ndarray
    truncations: np.ndarray
    ended: list[int]
    rich_infos: list[int]
    reset_by_last_step: list[int]
    _envs_with_flags: list[int] | None
    _unfinished: dict[int, tuple[Any, dict[str, Any], bool, bool, bool]]
    _partial_step: tuple[list[int], list[dict[str, Any]]] | None
    _uncopyable: list[tuple[int, str, Any, str, str]]

    def _fail(self, exc: BaseException, local_index: int, command: Command) -> None:
        add_env_context(exc, self.env_indices[local_index], command.label)

    def _keep_partial_step(
        self,
        exc: BaseException,
        stepped: Sequence[int],
        infos: list[dict[str, Any]],
        step_rewards: list[Any],
        autoreset: tuple[Any, dict[str, Any], bool, bool, bool] | None,
    ) -> None:
        """A step raised (or was interrupted) after ``len(infos)`` envs of ``stepped`` had finished stepping.

        Those envs keep their results: observations and flags are in the buffers already, their rewards are
        written now, and :meth:`take_partial_step` hands out their infos (:attr:`ended`, :attr:`rich_infos` and
        :attr:`reset_by_last_step` describe them alone). The env that raised keeps no flag; if its episode had
        ended and its automatic reset raised (``autoreset``: what its step returned), its next step finishes
        that reset and reports the episode end. Flags are cleared in full by the next step. Info values left out
        because they could not be copied are named in a note on ``exc`` (unless ``exc`` is the error naming them).
        """
        self._note_uncopyable(exc)
        done = len(infos)
        completed = list(stepped[:done])
        if done < len(stepped):
            failed = stepped[done]
            if isinstance(exc, Exception):
                self._fail(exc, failed, Command.STEP)
            self.dones[failed] = self.terminations[failed] = self.truncations[failed] = False
            if self.ended and self.ended[-1] == failed:
                self.ended.pop()
            if autoreset is not None:
                self._unfinished[failed] = autoreset
        while self.rich_infos and self.rich_infos[-1] >= done:
            self.rich_infos.pop()
        self._envs_with_flags = None
        if self._keep_completed(completed, infos, step_rewards[:done]) is None:
            self._partial_step = (completed, infos)

    def _note_uncopyable(self, exc: BaseException) -> None:
        if self._uncopyable:
            dropped, self._uncopyable = self._uncopyable, []
            add_note(exc, f"vecenv: this step also left out info values it could not copy: {describe_dropped(dropped)}")

    def take_partial_step(self) -> tuple[list[int], list[dict[str, Any]]] | None:
        """What the last :meth:`step` that raised completed: ``(local indices, their infos)``, or None; once.

        The rows of those envs in the buffers hold their results (see :meth:`_keep_partial_step`).
        """
        partial, self._partial_step = self._partial_step, None
        return partial

    def _store_odd_rewards(self, stepped: Sequence[int], infos: list[Any], step_rewards: list[Any]) -> Any:
        """Rewards numpy could not store as one number per env: stored if each is one number or an array of one
        (:func:`~vecenv.sub_envs.scalar_rewards`). Else every env whose reward is a number keeps its step
        (:meth:`take_partial_step`), the others are stepped again, and the error naming the first is returned."""
        first = self._keep_completed(stepped, infos, step_rewards)
        if first is None:
            return None
        reward = scalar_rewards(step_rewards)[0][first]
        error = reward_error(self.env_indices[stepped[first]], reward)
        self._fail(error, stepped[first], Command.STEP)
        self._note_uncopyable(error)
        return error

    def _keep_completed(self, stepped: Sequence[int], infos: list[Any], step_rewards: list[Any]) -> int | None:
        """Store the rewards of the envs ``stepped``, which finished their step, read as SB3's ``DummyVecEnv`` stores
        them (:func:`~vecenv.sub_envs.scalar_rewards`). If one is still not one number, only the envs whose reward
        is keep their step (:meth:`take_partial_step`); the others lose their flags and are stepped again.

        :return: the position in ``stepped`` of the first reward that is not one number, or None.
        """
        rewards, first = scalar_rewards(step_rewards)
        if first is None:
            if len(stepped):
                self.rewards[list(stepped)] = rewards
            return None
        kept = [p for p, reward in enumerate(rewards) if is_number(reward)]
        completed = [stepped[p] for p in kept]
        self.rewards[completed] = [rewards[p] for p in kept]
        for p in set(range(len(stepped))) - set(kept):  # (their flags go: they are stepped again)
            self.dones[stepped[p]] = self.terminations[stepped[p]] = self.truncations[stepped[p]] = False
        self.ended[:] = [j for j in self.ended if j in completed]
        self.reset_by_last_step[:] = [j for j in self.reset_by_last_step if j in completed]
        self.rich_infos[:] = [kept.index(p) for p in self.rich_infos if p in kept]
        self._envs_with_flags = None
        self._partial_step = (completed, [infos[p] for p in kept])
        return first
