"""``VecMonitor``: episode statistics for a whole vector env (Stable-Baselines3's ``vec_monitor``)."""

from __future__ import annotations

import os
import time
import warnings
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode

from vecenv.base import VecEnv, VecEnvObs, VecEnvStepReturn, done_indices
from vecenv.monitor import Monitor, ResultsWriter
from vecenv.wrappers.base import VecEnvWrapper, autoreset_mode_of, resets_next

__all__ = ["VecMonitor"]


class VecMonitor(VecEnvWrapper):
    """Records each episode's return, length and end time, for every env of a vector env.

    The vectorized counterpart of :class:`~vecenv.Monitor`, for vector envs whose envs you cannot wrap one
    by one; semantics follow SB3's ``VecMonitor``. When env ``i`` finishes an episode, ``infos[i]`` is
    replaced by a copy holding ``"episode": {"r": return (np.float32), "l": length (np.int32),
    "t": seconds since this wrapper was created, rounded to 6 decimals}`` plus the ``info_keywords`` copied
    from that info. With a ``filename`` each episode is also written as a row of a monitor CSV file (see
    :class:`~vecenv.monitor.ResultsWriter` for the format and naming rules); the header's ``env_id`` is
    ``venv.spec.id`` if the venv has a ``spec``, else ``"None"``. :meth:`reset` discards the episodes in
    progress.

    Right in every autoreset mode of ``venv.autoreset_mode`` (SB3's ``SAME_STEP`` for vector envs that do not
    say): with ``NEXT_STEP``, the step after an episode end resets the env instead of stepping it, and is not
    counted in the next episode (its reward is 0); with ``DISABLED``, an episode ends at its done step, and the
    caller resets the env (counting starts again at :meth:`reset`). A worker restart (``infos[i]
    ["vecenv.restarted"]``) ends the episode in progress. Over a :class:`vecenv.pettingzoo.AgentVecEnv` (one row per
    agent), a row's length counts only the steps where its agent acted (``infos[i]["active"]``), and a row done
    without any such step (its agent had left earlier, or never joined, and the env's episode ends) records no
    episode.

    :param venv: the vector env to monitor. Warns (``UserWarning``) if its envs are already wrapped with
        :class:`~vecenv.Monitor`, whose statistics this wrapper then overwrites in the infos.
    :param filename: where to write the monitor file; None or ``""``: no file.
    :param info_keywords: keys of the final step's info to log with each episode.
    """

    def __init__(
        self,
        venv: VecEnv,
        filename: str | os.PathLike[str] | None = None,
        info_keywords: tuple[str, ...] = (),
    ) -> None:
        try:
            is_wrapped_with_monitor = venv.env_is_wrapped(Monitor)[0]
        except AttributeError:
            # vector envs that do not implement env_is_wrapped
            is_wrapped_with_monitor = False
        if is_wrapped_with_monitor:
            warnings.warn(
                "The environment is already wrapped with a `Monitor` wrapper "
                "but you are wrapping it with a `VecMonitor` wrapper, the `Monitor` statistics will be "
                "overwritten by the `VecMonitor` ones.",
                UserWarning,
                stacklevel=2,
            )
        super().__init__(venv)
        self.episode_count = 0
        self.t_start = time.time()
        env_id = None
        if hasattr(venv, "spec") and venv.spec is not None:
            env_id = venv.spec.id
        self.results_writer: ResultsWriter | None = None
        if filename:
            self.results_writer = ResultsWriter(
                filename, header={"t_start": self.t_start, "env_id": str(env_id)}, extra_keys=info_keywords
            )
        self.info_keywords = info_keywords
        #: return so far of each env's current episode, float32 ``(num_envs,)``
        self.episode_returns = np.zeros(self.num_envs, dtype=np.float32)
        #: steps so far in each env's current episode, int32 ``(num_envs,)``
        self.episode_lengths = np.zeros(self.num_envs, dtype=np.int32)
        self._next_step = autoreset_mode_of(venv) is AutoresetMode.NEXT_STEP
        # NEXT_STEP: the envs whose next step resets them (it belongs to no episode)
        self._resetting = np.zeros(self.num_envs, dtype=bool)
        # over an AgentVecEnv: which rows' agents acted in the last step (only those steps count)
        try:
            unwrapped = venv.unwrapped
        except AttributeError:  # a vector env that imitates SB3's API without ``unwrapped`` (SB3 accepts it)
            unwrapped = venv
        self._agent_rows: Any = unwrapped if getattr(unwrapped, "marks_inactive_rows", False) else None

    def reset(self) -> VecEnvObs:
        obs = self.venv.reset()
        self.episode_returns = np.zeros(self.num_envs, dtype=np.float32)
        self.episode_lengths = np.zeros(self.num_envs, dtype=np.int32)
        self._resetting = np.zeros(self.num_envs, dtype=bool)
        return obs

    def step_wait(self) -> VecEnvStepReturn:
        obs, rewards, dones, infos = self.venv.step_wait()
        if self._next_step:
            counted = ~self._resetting
            self.episode_returns += np.where(counted, rewards, 0)
            self.episode_lengths += counted
            self._resetting = resets_next(dones, infos)
        elif self._agent_rows is not None:
            self.episode_returns += rewards
            self.episode_lengths += self._agent_rows.row_active
        else:
            self.episode_returns += rewards
            self.episode_lengths += 1
        new_infos = list(infos)
        for i in done_indices(dones):
            if self._agent_rows is not None and self.episode_lengths[i] == 0:
                self.episode_returns[i] = 0  # an agent that did not act: no episode
                continue
            info = infos[i].copy()
            episode_info: dict[str, Any] = {
                "r": self.episode_returns[i],
                "l": self.episode_lengths[i],
                "t": round(time.time() - self.t_start, 6),
            }
            for key in self.info_keywords:
                episode_info[key] = info[key]
            info["episode"] = episode_info
            self.episode_count += 1
            self.episode_returns[i] = 0
            self.episode_lengths[i] = 0
            if self.results_writer is not None:
                self.results_writer.write_row(episode_info)
            new_infos[i] = info
        return obs, rewards, dones, new_infos

    def close(self) -> None:
        """Close the monitor file, then the vector env."""
        if self.results_writer is not None:
            self.results_writer.close()
        return self.venv.close()
