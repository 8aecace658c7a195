"""Learning curves from monitor CSV files (needs the ``plot`` extra: pandas and matplotlib; see README.md).

pandas and matplotlib are imported when :func:`plot_results` is called, never when this module is
imported. The figure is drawn on matplotlib's ``Agg`` canvas without touching ``pyplot``, so it needs no
display and leaves pyplot's global state (and your notebook's current figure) alone.
"""

from __future__ import annotations

import contextlib
import io
import json
import numbers
import os
from typing import TYPE_CHECKING

from vecenv.atomic import atomic_write_bytes
from vecenv.monitor import MissingExtraError, get_monitor_files, import_optional, load_results

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["DEFAULT_WINDOW", "MissingExtraError", "plot_results"]

#: Episodes in the rolling mean by default (SB3's ``results_plotter`` uses 100 too).
DEFAULT_WINDOW = 100


def plot_results(
    path: str | os.PathLike[str],
    output: str | os.PathLike[str] | None = None,
    window: int = DEFAULT_WINDOW,
    title: str | None = None,
) -> Figure:
    """Plot episode returns against environment steps, from the monitor files of a run.

    All monitor files under ``path`` are combined into ONE curve, as :func:`~vecenv.load_results` combines
    them: episodes are ordered by end time and the x axis is the cumulative sum of their lengths, i.e. the
    number of env steps (all envs together) in finished episodes when each episode ended. Each episode's
    return is drawn as a faint dot, and the mean over the last ``window`` episodes as a line (over all
    episodes so far while there are fewer than ``window``).

    :param path: a folder of ``*monitor.csv`` files (e.g. ``make_vec_env``'s ``monitor_dir``), or one monitor
        CSV file.
    :param output: if given, the figure is saved there (format from the extension: ``.png``, ``.pdf``,
        ``.svg``...; PNG if there is none), atomically: the file appears complete or not at all.
    :param window: number of episodes in the rolling mean, >= 1.
    :param title: figure title (default: the env id(s) from the files' headers and the path).
    :return: the matplotlib ``Figure`` (not registered with pyplot; show it in a notebook by evaluating it).
    :raises ValueError: if ``window`` is not a positive integer.
    :raises LoadMonitorResultsError: if no monitor file is found under ``path`` or one is malformed.
    :raises MissingExtraError: if pandas or matplotlib (the ``plot`` extra) is not installed.
    """
    if isinstance(window, bool) or not isinstance(window, numbers.Integral) or window < 1:
        raise ValueError(f"window must be a positive number of episodes, got {window!r}")
    figure_module = import_optional("matplotlib.figure", "plot_results")
    data = load_results(path)
    episode_steps = data["l"].cumsum().to_numpy()
    returns = data["r"].to_numpy()

    figure = figure_module.Figure(figsize=(8, 4.5), dpi=100, layout="constrained")
    axes = figure.add_subplot()
    if len(data):
        axes.scatter(episode_steps, returns, s=6, alpha=0.3, linewidths=0, label="episode return")
        rolling_mean = data["r"].rolling(int(window), min_periods=1).mean().to_numpy()
        axes.plot(episode_steps, rolling_mean, linewidth=2, label=f"mean of last {window} episodes")
        axes.legend(loc="best")
    else:
        axes.text(0.5, 0.5, "no finished episode yet", ha="center", va="center", transform=axes.transAxes)
    axes.set_xlabel("environment steps (all envs)")
    axes.set_ylabel("episode return")
    axes.grid(alpha=0.3)
    axes.set_title(title if title is not None else _default_title(path, len(data)))
    if output is not None:
        _save_figure(figure, output)
    return figure


def _default_title(path: str | os.PathLike[str], n_episodes: int) -> str:
    """``"<env ids> — <n> episodes (<path>)"``, the env ids read from the files' JSON headers."""
    env_ids: list[str] = []
    for file_name in get_monitor_files(path):
        with open(file_name) as file_handler, contextlib.suppress(ValueError, AttributeError):
            env_id = str(json.loads(file_handler.readline()[1:]).get("env_id"))
            if env_id not in env_ids and env_id != "None":
                env_ids.append(env_id)
    name = ", ".join(env_ids) if env_ids else "episode returns"
    return f"{name} — {n_episodes} episodes ({os.fspath(path)})"


def _save_figure(figure: Figure, output: str | os.PathLike[str]) -> None:
    """Render ``figure`` in the format named by the extension of ``output`` and write it there atomically."""
    output = os.path.abspath(os.fspath(output))
    file_format = os.path.splitext(output)[1].lstrip(".").lower() or "png"
    os.makedirs(os.path.dirname(output), exist_ok=True)
    rendered = io.BytesIO()
    figure.savefig(rendered, format=file_format)  # an unknown format fails here, before any file is touched
    atomic_write_bytes(output, rendered.getvalue())
