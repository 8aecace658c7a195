"""Per-env episode statistics and the monitor CSV files (Stable-Baselines3's ``common.monitor``).

:class:`Monitor` wraps ONE ``gymnasium.Env``; :class:`~vecenv.VecMonitor` does the same job for a whole
vector env. Both write their finished episodes through a :class:`ResultsWriter`, in SB3's file format, so
files written by SB3 and by vecenv are interchangeable::

    #{"t_start": 1718443269.123, "env_id": "CartPole-v1"}
    r,l,t
    21.0,21,0.012345

Line 1 is ``#`` and a JSON header (``t_start``: the Unix time the wrapper was created; ``env_id``), line 2
the CSV column names (``r`` episode return, ``l`` episode length in steps, ``t`` seconds since
``t_start``, then any extra keys), then one row per finished episode, flushed as soon as it is written.
:func:`load_results` reads a folder of such files into one ``pandas.DataFrame``.

This module imports neither pandas nor matplotlib: :func:`load_results` imports pandas when called (the
``plot`` extra) and raises :class:`MissingExtraError` if it is not installed.
"""

from __future__ import annotations

import csv
import json
import os
import time
from glob import escape, glob
from typing import TYPE_CHECKING, Any, SupportsFloat

import gymnasium as gym
from gymnasium.core import ActType, ObsType

# MissingExtraError, import_optional and install_hint live in vecenv.optional; users import them from here
from vecenv.optional import MissingExtraError, import_optional, install_hint

if TYPE_CHECKING:
    # pandas ships no type information; this import is only for the annotations
    import pandas as pd  # type: ignore[import-untyped,unused-ignore]

__all__ = [
    "LoadMonitorResultsError",
    "MissingExtraError",
    "Monitor",
    "ResultsWriter",
    "get_monitor_files",
    "import_optional",
    "install_hint",
    "load_results",
]

#: Every monitor file name ends with this suffix.
MONITOR_EXT = "monitor.csv"


class LoadMonitorResultsError(Exception):
    """No monitor file was found, or a file is not in the monitor CSV format."""


class ResultsWriter:
    """Writes finished episodes to a monitor CSV file (SB3's format; see the module docstring).

    File name rules (SB3's): a ``filename`` ending with ``monitor.csv`` is used as is; otherwise an
    existing directory gets ``<dir>/monitor.csv`` and anything else ``<filename>.monitor.csv``. The path is
    made absolute (``os.path.realpath``) and its parent directories are created.

    The header lines are written at once (so even a run without finished episodes leaves a readable file)
    and every row is flushed as soon as it is written.

    :param filename: where to write (see the naming rules above).
    :param header: the JSON header, normally ``{"t_start": <Unix time>, "env_id": "<id>"}``.
    :param extra_keys: columns after ``r, l, t`` (e.g. a wrapper's ``reset_keywords + info_keywords``).
    :param override_existing: True: truncate the file and write the header. False: append to it; the
        header is then written only if the file is new or empty (SB3 writes none at all, which leaves a
        new file unreadable).
    """

    def __init__(
        self,
        filename: str | os.PathLike[str] = "",
        header: dict[str, float | str] | None = None,
        extra_keys: tuple[str, ...] = (),
        override_existing: bool = True,
    ) -> None:
        self.filename = monitor_file_path(filename)
        os.makedirs(os.path.dirname(self.filename), exist_ok=True)
        write_header = override_existing or not os.path.exists(self.filename) or os.path.getsize(self.filename) == 0
        # newline="\n": no newline translation, so the bytes are SB3's on every platform: "\n" after the
        # JSON line, csv's default "\r\n" after the column names and each row
        self.file_handler = open(self.filename, "w" if override_existing else "a", newline="\n")  # noqa: SIM115
        self.logger = csv.DictWriter(self.file_handler, fieldnames=("r", "l", "t", *extra_keys))
        if write_header:
            self.file_handler.write(f"#{json.dumps(header or {})}\n")
            self.logger.writeheader()
        self.file_handler.flush()

    def write_row(self, epinfo: dict[str, Any]) -> None:
        """Append one finished episode and flush it to disk.

        :param epinfo: ``{"r": return, "l": length, "t": seconds since t_start, **extra keys}``.
        :raises ValueError: if ``epinfo`` has a key that is not a column of the file.
        """
        self.logger.writerow(epinfo)
        self.file_handler.flush()

    def close(self) -> None:
        """Close the file (idempotent)."""
        self.file_handler.close()


def monitor_file_path(filename: str | os.PathLike[str]) -> str:
    """The absolute path of the monitor file that ``filename`` designates (SB3's naming rules).

    :param filename: a path ending with ``monitor.csv``, a directory, or a path prefix.
    :return: ``filename`` itself, ``<dir>/monitor.csv`` or ``<filename>.monitor.csv``, made absolute.

    >>> import os
    >>> os.path.basename(monitor_file_path("logs/0"))
    '0.monitor.csv'
    >>> os.path.basename(monitor_file_path("logs/train.monitor.csv"))
    'train.monitor.csv'
    """
    path = os.fspath(filename)
    if not path.endswith(MONITOR_EXT):
        path = os.path.join(path, MONITOR_EXT) if os.path.isdir(path) else f"{path}.{MONITOR_EXT}"
    return os.path.realpath(path)


class Monitor(gym.Wrapper[ObsType, ActType, ObsType, ActType]):
    """Records each episode's return, length and duration (Stable-Baselines3's ``Monitor``).

    At the end of an episode (terminated or truncated) the step's info gets
    ``info["episode"] = {"r": return rounded to 6 decimals, "l": length, "t": seconds since the wrapper
    was created, rounded to 6 decimals}``, plus the ``info_keywords`` copied from that info and the
    ``reset_keywords`` of the episode; with a ``filename`` the same dict is written as a row of a monitor
    CSV file (see :class:`ResultsWriter` for the naming rules). The info dict is modified in place.

    :param env: the env to monitor.
    :param filename: where to write the monitor file, or None for no file.
    :param allow_early_resets: allow :meth:`reset` before the episode is over.
    :param reset_keywords: keyword arguments that :meth:`reset` requires; their values are logged with
        the episode (the env's ``reset`` must accept them too).
    :param info_keywords: keys of the final step's info to log with the episode.
    :param override_existing: True: overwrite an existing file; False: append to it.
    """

    EXT = MONITOR_EXT

    def __init__(
        self,
        env: gym.Env[ObsType, ActType],
        filename: str | os.PathLike[str] | None = None,
        allow_early_resets: bool = True,
        reset_keywords: tuple[str, ...] = (),
        info_keywords: tuple[str, ...] = (),
        override_existing: bool = True,
    ) -> None:
        super().__init__(env)
        self.t_start = time.time()
        self.results_writer: ResultsWriter | None = None
        if filename is not None:
            env_id = env.spec.id if env.spec is not None else None
            self.results_writer = ResultsWriter(
                filename,
                header={"t_start": self.t_start, "env_id": str(env_id)},
                extra_keys=reset_keywords + info_keywords,
                override_existing=override_existing,
            )
        self.reset_keywords = reset_keywords
        self.info_keywords = info_keywords
        self.allow_early_resets = allow_early_resets
        #: rewards of the current episode
        self.rewards: list[float] = []
        self.needs_reset = True
        self.episode_returns: list[float] = []
        self.episode_lengths: list[int] = []
        self.episode_times: list[float] = []
        self.total_steps = 0
        #: the ``reset_keywords`` values passed to the last reset
        self.current_reset_info: dict[str, Any] = {}

    def reset(self, **kwargs: Any) -> tuple[ObsType, dict[str, Any]]:
        """Reset the env and start a new episode.

        :param kwargs: passed to the env's ``reset``; must include every ``reset_keywords`` key.
        :return: the env's ``(observation, info)``.
        :raises RuntimeError: if the episode is not over and ``allow_early_resets`` is False.
        :raises ValueError: if a ``reset_keywords`` key is missing (or None).
        """
        if not self.allow_early_resets and not self.needs_reset:
            raise RuntimeError(
                "Tried to reset an environment before done. If you want to allow early resets, "
                "wrap your env with Monitor(env, path, allow_early_resets=True)"
            )
        self.rewards = []
        self.needs_reset = False
        for key in self.reset_keywords:
            value = kwargs.get(key)
            if value is None:
                raise ValueError(f"Expected you to pass keyword argument {key} into reset")
            self.current_reset_info[key] = value
        return self.env.reset(**kwargs)

    def step(self, action: ActType) -> tuple[ObsType, SupportsFloat, bool, bool, dict[str, Any]]:
        """Step the env; at episode end add ``info["episode"]`` and write the row.

        :param action: the action.
        :return: the env's ``(observation, reward, terminated, truncated, info)``.
        :raises RuntimeError: if the episode is over and :meth:`reset` was not called.
        """
        if self.needs_reset:
            raise RuntimeError("Tried to step environment that needs reset")
        observation, reward, terminated, truncated, info = self.env.step(action)
        self.rewards.append(float(reward))
        if terminated or truncated:
            self.needs_reset = True
            ep_rew = sum(self.rewards)
            ep_len = len(self.rewards)
            ep_info: dict[str, Any] = {"r": round(ep_rew, 6), "l": ep_len, "t": round(time.time() - self.t_start, 6)}
            for key in self.info_keywords:
                ep_info[key] = info[key]
            self.episode_returns.append(ep_rew)
            self.episode_lengths.append(ep_len)
            self.episode_times.append(time.time() - self.t_start)
            ep_info.update(self.current_reset_info)
            if self.results_writer is not None:
                self.results_writer.write_row(ep_info)
            info["episode"] = ep_info
        self.total_steps += 1
        return observation, reward, terminated, truncated, info

    def close(self) -> None:
        """Close the env, then the monitor file."""
        super().close()
        if self.results_writer is not None:
            self.results_writer.close()

    def get_total_steps(self) -> int:
        """:return: the number of steps taken, over all episodes."""
        return self.total_steps

    def get_episode_rewards(self) -> list[float]:
        """:return: the return (sum of rewards, unrounded) of each finished episode."""
        return self.episode_returns

    def get_episode_lengths(self) -> list[int]:
        """:return: the length in steps of each finished episode."""
        return self.episode_lengths

    def get_episode_times(self) -> list[float]:
        """:return: for each finished episode, the seconds between the wrapper's creation and its end."""
        return self.episode_times


def get_monitor_files(path: str | os.PathLike[str]) -> list[str]:
    """The monitor files in a folder: the files matching ``<path>/*monitor.csv``, sorted.

    vecenv extension: ``path`` may also be one existing file, which is then returned alone.

    :param path: a folder (or one monitor file).
    :return: the file paths (empty if there are none).
    """
    path = os.fspath(path)
    if os.path.isfile(path):
        return [path]
    # escaped: a folder named like "run[1]" is a folder, not a pattern
    return sorted(glob(os.path.join(escape(path), "*" + MONITOR_EXT)))


def _read_monitor_file(pandas: Any, file_name: str) -> tuple[dict[str, Any], pd.DataFrame]:
    """Parse one monitor file into its JSON header and its rows (``t`` made absolute)."""
    with open(file_name) as file_handler:
        try:
            first_line = file_handler.readline()
        except UnicodeDecodeError as exc:
            raise LoadMonitorResultsError(
                f"{file_name} is not a monitor file: it is not {exc.encoding} text (a binary file?)"
            ) from exc
        if not first_line.startswith("#"):
            raise LoadMonitorResultsError(
                f"{file_name} is not a monitor file: its first line should be '#' followed by a JSON header "
                f'like {{"t_start": ..., "env_id": ...}}, got {first_line[:80]!r}'
            )
        try:
            header = json.loads(first_line[1:])
            t_start = float(header["t_start"])
        except (ValueError, KeyError, TypeError) as exc:
            raise LoadMonitorResultsError(
                f"{file_name}: the header line must be '#' followed by a JSON object with a numeric 't_start', "
                f"got {first_line[:80]!r}"
            ) from exc
        try:
            data_frame = pandas.read_csv(file_handler, index_col=None)
        except UnicodeDecodeError as exc:
            raise LoadMonitorResultsError(
                f"{file_name} is not a monitor file: after its header line, it is not {exc.encoding} text"
            ) from exc
        except (pandas.errors.EmptyDataError, pandas.errors.ParserError) as exc:
            raise LoadMonitorResultsError(
                f"{file_name}: after the header line, expected CSV rows under the columns r,l,t: {exc}"
            ) from exc
    missing = {"r", "l", "t"} - set(data_frame.columns)
    if missing:
        raise LoadMonitorResultsError(
            f"{file_name}: the second line must name the columns r,l,t (and any extra keys); "
            f"missing {sorted(missing)}, got {list(data_frame.columns)}"
        )
    for column in ("r", "l", "t"):  # (pandas reads a column with a value that is not a number as text)
        if len(data_frame) and not pandas.api.types.is_numeric_dtype(data_frame[column]):
            bad = pandas.to_numeric(data_frame[column], errors="coerce").isna() & data_frame[column].notna()
            row = int(bad.idxmax()) if bad.any() else 0
            raise LoadMonitorResultsError(
                f"{file_name}: column {column!r} must hold numbers; row {row + 1} holds "
                f"{data_frame[column].iloc[row]!r} (a damaged or hand-edited file?)"
            )
    data_frame["t"] += t_start
    return header, data_frame


def load_results(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Read every monitor file of a folder into one table (Stable-Baselines3's ``load_results``).

    The files' rows are concatenated, ``t`` is made relative to the EARLIEST ``t_start`` of all files (so
    episodes of different envs share one clock), and the rows are sorted by ``t``. As in SB3 the result
    keeps an ``index`` column (each row's position in its own file) and has a fresh ``0..n-1`` index.

    :param path: a folder holding ``*monitor.csv`` files (or, vecenv extension, one monitor file).
    :return: columns ``index, r, l, t`` plus any extra keys; no rows if no episode has finished yet.
    :raises LoadMonitorResultsError: if no monitor file is found, or a file is not a monitor file.
    :raises MissingExtraError: if pandas is not installed.
    """
    pandas = import_optional("pandas", "load_results")
    monitor_files = get_monitor_files(path)
    if not monitor_files:
        raise LoadMonitorResultsError(
            f"No monitor files of the form *{MONITOR_EXT} found in {os.fspath(path)!r}. Monitor files are "
            "written by Monitor(env, filename=...), VecMonitor(venv, filename=...) or "
            "make_vec_env(..., monitor_dir=...)."
        )
    headers, data_frames = [], []
    for file_name in monitor_files:
        header, data_frame = _read_monitor_file(pandas, file_name)
        headers.append(header)
        data_frames.append(data_frame)
    data_frames = [data_frame for data_frame in data_frames if not data_frame.empty]
    if not data_frames:
        return pandas.DataFrame(columns=["r", "l", "t"]).reset_index()
    result = pandas.concat(data_frames).sort_values("t", kind="stable").reset_index()
    result["t"] -= min(float(header["t_start"]) for header in headers)
    return result
