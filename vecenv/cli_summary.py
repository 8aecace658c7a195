"""The summary that ``vecenv run`` prints after a run: the statistics of the episodes that finished
(:class:`EpisodeStats`), the lines of the options that wrote or read files or checked the run
(:func:`option_summary`), and the aligned ``key: value`` lines (:func:`summary_lines`).
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["EpisodeStats", "option_summary", "plural", "summary_lines"]


@dataclass
class EpisodeStats:
    """Returns and lengths of the episodes that finished during a run, computed from rewards and dones."""

    num_envs: int
    returns: list[float] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._return = np.zeros(self.num_envs, dtype=np.float64)
        self._length = np.zeros(self.num_envs, dtype=np.int64)

    def update(self, rewards: np.ndarray, dones: np.ndarray, acted: np.ndarray | None = None) -> None:
        """Account one vector step: ``rewards`` float ``(num_envs,)``, ``dones`` bool ``(num_envs,)``.

        :param acted: bool ``(num_envs,)``, for the rows of a PettingZoo env (``AgentVecEnv.row_active``): whether
            the row's agent acted in the step. As in :class:`~vecenv.VecMonitor`, an episode's length counts only
            those steps, and a row done without one (its agent had left, or never joined) ends no episode.
        """
        self._return += rewards
        self._length += 1 if acted is None else acted
        if dones.any():
            ended = dones if acted is None else dones & (self._length > 0)
            self.returns.extend(self._return[ended].tolist())
            self.lengths.extend(self._length[ended].tolist())
            self._return[dones] = 0.0
            self._length[dones] = 0


def summary_lines(values: dict[str, Any]) -> list[str]:
    width = max(len(key) for key in values)
    return [f"{key + ':':<{width + 1}} {value}" for key, value in values.items()]


def plural(count: int, noun: str) -> str:
    """``"1 worker"``, ``"2 workers"``."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _brace_range(folder: str, n: int) -> str:
    """``"4 files, DIR/{0..3}.monitor.csv"``: the monitor files of ``n`` envs in ``folder``."""
    if n == 1:
        return f"1 file, {os.path.join(folder, '0.monitor.csv')}"
    return f"{n} files, {os.path.join(folder, '{0..' + str(n - 1) + '}.monitor.csv')}"


def option_summary(args: argparse.Namespace, n: int, video_paths: list[str]) -> dict[str, str]:
    """The summary lines of the options that write or read files, or check the run."""
    lines: dict[str, str] = {}
    if args.monitor is not None:
        lines["monitor"] = _brace_range(args.monitor, n)
    if args.normalize or args.load_normalize is not None or args.save_normalize is not None:
        done = []
        if args.load_normalize is not None:
            done.append(f"loaded from {args.load_normalize}")
        if args.save_normalize is not None:
            done.append(f"saved to {args.save_normalize}")
        lines["normalize"] = "on" + (f", statistics {' and '.join(done)}" if done else "")
    if args.video is not None:
        lines["video"] = ", ".join(video_paths) if video_paths else "no video written"
    if args.check_nan:
        lines["check_nan"] = "on, no NaN or infinity found"
    return lines
