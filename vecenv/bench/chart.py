"""The charts of ``vecenv bench``, as PNGs, drawn to be read at the width of a documentation page.

- :func:`plot` (:func:`grid_figure`): env-steps/s and start-up time of every backend against the number of
  envs, one row per workload.
- :func:`plot_speedup` (:func:`speedup_figure`): at one number of envs, a few backends as bars of env-steps/s
  over the plain loop's, one group per workload: how much faster than a plain loop, SB3's ``SubprocVecEnv`` or
  Gymnasium's ``AsyncVectorEnv`` vecenv steps each workload (:func:`speedup_data` computes what it draws).

Both figures are :data:`FIGURE_WIDTH_IN` wide, about the width of a page's text column (a documentation site,
a README on GitHub), so that the page shows them at about their own size: no text in them is smaller than
:data:`MIN_FONT_PT` (about 12 px where a 736 px wide column shows them), and they are saved at :data:`DPI`, with
more pixels than the page shows. Each series has a colour and a marker (a hatch for bars) of its own, so that
the series stay apart without colour vision.

matplotlib (the ``bench`` extra) is imported when a chart is drawn, never when this module is imported; the
charts are drawn on matplotlib's ``Agg`` canvas without ``pyplot``.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from vecenv.optional import require_bench

__all__ = [
    "BACKEND_LABELS",
    "DPI",
    "FIGURE_WIDTH_IN",
    "MIN_FONT_PT",
    "SPEEDUP_SERIES",
    "VECENV_LAYOUTS",
    "WORKLOAD_NAMES",
    "Speedup",
    "backend_label",
    "grid_figure",
    "layout_label",
    "plot",
    "plot_speedup",
    "series_style",
    "speedup_data",
    "speedup_figure",
    "workload_labels",
]

#: Width of both figures, in inches: about a page's text column (736 px in the documentation site at a
#: 1280 px window, about 830 px in a README on GitHub), so that a page shows them at about 1:1.
FIGURE_WIDTH_IN = 8.0
#: Resolution of the saved PNGs: 1280 px wide, about 1.7x the pixels a page shows (sharp on dense screens).
DPI = 160
#: The smallest font size of any text in the figures (ticks, legend, bar labels), in points at
#: :data:`FIGURE_WIDTH_IN`.
MIN_FONT_PT = 9.5
_FONT = {"tick": 10.0, "label": 10.5, "legend": 10.0, "title": 11.5, "suptitle": 12.0, "bar": MIN_FONT_PT}

#: Legend labels of the backends of ``vecenv bench``, as the performance page names them.
BACKEND_LABELS = {
    "plain": "plain loop",
    "vecenv-dummy": "vecenv DummyVecEnv",
    "vecenv-subproc": "vecenv SubprocVecEnv()",
    "vecenv-subproc-parent": "vecenv parent_envs=N/cores",
    "vecenv-ray": "vecenv RayVecEnv",
    "vecenv-envpool": "EnvPool + vecenv wrappers",
    "envpool": "EnvPool's own pool",
    "sb3-dummy": "SB3 DummyVecEnv",
    "sb3-subproc": "SB3 SubprocVecEnv",
    "gym-sync": "Gymnasium SyncVectorEnv",
    "gym-async": "Gymnasium AsyncVectorEnv",
    "vecenv-gym-sync": "vecenv.gymnasium SyncVectorEnv",
    "vecenv-gym-async": "vecenv.gymnasium AsyncVectorEnv",
}

# Every default backend has a colour and a marker no other has (colours: matplotlib's tab10, black and four
# more far from them); vecenv's own series are solid, the other libraries' dashed or dotted, the plain loop
# black and dashed.
_STYLES: dict[str, dict[str, Any]] = {
    "plain": {"color": "black", "marker": "x", "linestyle": "--", "linewidth": 1.8},
    "vecenv-dummy": {"color": "tab:blue", "marker": "o", "linestyle": "-", "linewidth": 2.0},
    "vecenv-subproc": {"color": "tab:red", "marker": "s", "linestyle": "-", "linewidth": 2.4},
    "vecenv-subproc-w1": {"color": "tab:pink", "marker": "<", "linestyle": "-", "linewidth": 1.6},
    "vecenv-subproc-w4": {"color": "tab:purple", "marker": ">", "linestyle": "-", "linewidth": 1.6},
    "vecenv-subproc-parent": {"color": "tab:brown", "marker": "D", "linestyle": "-", "linewidth": 2.0},
    "vecenv-ray": {"color": "#637939", "marker": "h", "linestyle": "-", "linewidth": 1.6},
    "vecenv-envpool": {"color": "tab:olive", "marker": "P", "linestyle": "-", "linewidth": 1.6},
    "vecenv-gym-sync": {"color": "#ff9896", "marker": "d", "linestyle": "-", "linewidth": 1.6},
    "vecenv-gym-async": {"color": "navy", "marker": "v", "linestyle": "-", "linewidth": 1.6},
    "envpool": {"color": "tab:gray", "marker": "X", "linestyle": "--", "linewidth": 1.4},
    "sb3-dummy": {"color": "tab:cyan", "marker": "p", "linestyle": ":", "linewidth": 1.8},
    "sb3-subproc": {"color": "tab:orange", "marker": "*", "linestyle": ":", "linewidth": 1.8},
    "gym-sync": {"color": "#ffbb78", "marker": "8", "linestyle": "-.", "linewidth": 1.4},
    "gym-async": {"color": "tab:green", "marker": "^", "linestyle": "-.", "linewidth": 1.4},
}
# other ``vecenv-subproc-w<K>`` variants and unknown backends, in the order they appear
_EXTRA_STYLES = [
    {"color": c, "marker": m, "linestyle": "-", "linewidth": 1.4}
    for c, m in zip(["fuchsia", "blue", "deeppink", "blueviolet"], ["H", "1", "2", "3"], strict=True)
]


def backend_label(backend: str) -> str:
    """The legend label of a backend of ``vecenv bench`` (:data:`BACKEND_LABELS`; ``vecenv n_workers=K`` for
    ``vecenv-subproc-w<K>``; else the name itself)."""
    if backend in BACKEND_LABELS:
        return BACKEND_LABELS[backend]
    match = re.fullmatch(r"vecenv-subproc-w(\d+)", backend)
    return f"vecenv n_workers={match.group(1)}" if match else backend


def series_style(backend: str, others: list[str] | None = None) -> dict[str, Any]:
    """The line style (``color``, ``marker``, ``linestyle``, ``linewidth``) of a backend in :func:`grid_figure`.

    :param backend: a backend name of ``vecenv bench``.
    :param others: the backends without a style of their own met so far in one figure (appended to): each
        gets the next of a few more styles, in order.
    """
    if backend in _STYLES:
        return dict(_STYLES[backend])
    others = [] if others is None else others
    if backend not in others:
        others.append(backend)
    return dict(_EXTRA_STYLES[others.index(backend) % len(_EXTRA_STYLES)])


def _figure(height_in: float) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(FIGURE_WIDTH_IN, height_in), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _compact(value: float) -> str:
    """A tick label: 0.001, 0.5, 20, 3k, 100k, 1.5M."""
    if value >= 1e6:
        return f"{value / 1e6:g}M"
    if value >= 1e3:
        return f"{value / 1e3:g}k"
    return f"{value:g}"


def _log_tick_labels(axis: Any) -> None:
    """Label a log axis with plain numbers (:func:`_compact`) where matplotlib would label it."""
    from matplotlib.ticker import LogFormatterSciNotation

    class Compact(LogFormatterSciNotation):
        def __call__(self, x: float, pos: int | None = None) -> str:
            return _compact(x) if super().__call__(x, pos) else ""

    axis.set_major_formatter(Compact())
    axis.set_minor_formatter(Compact(labelOnlyBase=False, minor_thresholds=(1, 0.6)))


def grid_figure(
    df: Any,
    title: str | None = None,
    backends: Sequence[str] | None = None,
    workload_names: dict[str, str] | None = None,
) -> Any:
    """The figure of :func:`plot`: one row per workload, env-steps/s (left) and start-up time (right) against
    N, both on log scales, one line per backend, the legend above the rows.

    :param df: results (:func:`vecenv.bench.tables.results_frame`); failed cases are left out.
    :param title: the figure's title (the machine, the date, the commit).
    :param backends: the backends to draw, in legend order (default: every backend of the results, in their
        order); a backend without results is left out.
    :param workload_names: display names of the workloads, in the rows' titles (default: :data:`WORKLOAD_NAMES`,
        else the names in the results; :func:`workload_labels` gives those of a run).
    :return: the matplotlib ``Figure`` (on an ``Agg`` canvas).
    """
    require_bench("matplotlib")
    row_titles = WORKLOAD_NAMES if workload_names is None else workload_names
    ok = df[df["status"] == "ok"]
    workloads = list(dict.fromkeys(df["workload"])) or [""]
    drawn = list(dict.fromkeys(df["backend"])) if backends is None else list(backends)
    shown = [b for b in drawn if not ok[ok["backend"] == b].empty]
    legend_rows = max(1, math.ceil(len(shown) / 3))
    legend_in = 0.3 + 0.24 * legend_rows
    fig = _figure(0.45 + legend_in + 3.0 * len(workloads))
    parts = fig.subfigures(1 + len(workloads), 1, height_ratios=[legend_in] + [3.0] * len(workloads))
    others: list[str] = []
    handles: dict[str, Any] = {}
    panels = [("env_steps_per_s", "env-steps/s (median)"), ("startup_s", "start-up s (build + reset)")]
    for row, workload in enumerate(workloads):
        part = parts[row + 1]
        part.suptitle(row_titles.get(workload, workload), fontsize=_FONT["title"], fontweight="bold")
        axes = part.subplots(1, 2, gridspec_kw={"width_ratios": [3, 2]})
        rows = ok[ok["workload"] == workload]
        ns = sorted({int(n) for n in df[df["workload"] == workload]["num_envs"]})
        for ax, (column, ylabel) in zip(axes, panels, strict=True):
            for backend in drawn:
                data = rows[rows["backend"] == backend].sort_values("num_envs")
                values = data[column].astype(float)
                if data.empty or not values.notna().any():
                    continue
                style = series_style(backend, others)
                (line,) = ax.plot(data["num_envs"], values, label=backend_label(backend), markersize=6, **style)
                handles.setdefault(backend, line)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            _log_tick_labels(ax.yaxis)
            if ns:
                ax.set_xticks(ns, [str(n) for n in ns])
                ax.set_xticks([], minor=True)
            ax.grid(True, which="major", alpha=0.35)
            ax.grid(True, which="minor", alpha=0.12)
            ax.tick_params(which="both", labelsize=_FONT["tick"])
            ax.set_ylabel(ylabel, fontsize=_FONT["label"])
            ax.set_xlabel("N (number of envs)", fontsize=_FONT["label"])
    if handles:
        names = [backend for backend in drawn if backend in handles]
        parts[0].legend(
            [handles[name] for name in names],
            [backend_label(name) for name in names],
            loc="center",
            ncol=3,
            fontsize=_FONT["legend"],
            frameon=False,
            handlelength=2.2,
            handletextpad=0.5,
            columnspacing=1.0,
        )
    if title:
        fig.suptitle(title, fontsize=_FONT["suptitle"])
    return fig


def plot(
    df: Any,
    path: str | os.PathLike[str],
    title: str | None = None,
    backends: Sequence[str] | None = None,
    workload_names: dict[str, str] | None = None,
) -> None:
    """Draw :func:`grid_figure` (env-steps/s and start-up time against N, one row per workload) as a PNG.

    :param df: results (:func:`vecenv.bench.tables.results_frame`).
    :param path: the PNG to write.
    :param title: the figure's title.
    :param backends: the backends to draw, in order (default: all of the results).
    :param workload_names: display names of the workloads (default: :data:`WORKLOAD_NAMES`).
    """
    grid_figure(df, title, backends, workload_names).savefig(os.fspath(path), dpi=DPI)


#: The series of :func:`plot_speedup`: (backend, label); ``"vecenv-best"`` is the fastest of
#: :data:`VECENV_LAYOUTS` for each workload.
SPEEDUP_SERIES: list[tuple[str, str]] = [
    ("plain", "plain loop"),
    ("sb3-subproc", "SB3 SubprocVecEnv"),
    ("gym-async", "Gymnasium AsyncVectorEnv"),
    ("vecenv-subproc", "vecenv SubprocVecEnv (defaults)"),
    ("vecenv-best", "vecenv, fastest layout"),
]
#: The backends among which ``"vecenv-best"`` picks: vecenv's own layouts of Python envs (not its
#: Gymnasium-API classes, which run the same engine, nor its adapter over EnvPool).
VECENV_LAYOUTS = re.compile(r"vecenv-(dummy|subproc|subproc-w\d+|subproc-parent)")
#: Workload names in the charts' titles and under the bars of :func:`plot_speedup`, for the default ``--cpu-us``
#: (:func:`workload_labels` gives those of another).
WORKLOAD_NAMES = {"cartpole": "CartPole-v1", "image": "84x84x4 image", "cpu": "~200 us of CPU per step"}


def workload_labels(cpu_us: float | None = None) -> dict[str, str]:
    """The workload names of the charts of a run whose cpu workload takes ``cpu_us`` microseconds of CPU per step
    (``vecenv bench --cpu-us``): :data:`WORKLOAD_NAMES` with the cpu workload's ``~{cpu_us} us of CPU per step``.

    :param cpu_us: the run's ``cpu_us`` setting; None: :data:`WORKLOAD_NAMES` as they are.
    """
    names = dict(WORKLOAD_NAMES)
    if cpu_us is not None:
        names["cpu"] = f"~{cpu_us:g} us of CPU per step"
    return names


# a colour and a hatch per series of :func:`speedup_figure`, the colours those of the grid's lines
_SPEEDUP_STYLES: dict[str, dict[str, Any]] = {
    "plain": {"color": "0.55", "hatch": ""},
    "sb3-subproc": {"color": "tab:orange", "hatch": "//"},
    "gym-async": {"color": "tab:green", "hatch": "\\\\"},
    "vecenv-subproc": {"color": "tab:red", "hatch": ".."},
    "vecenv-best": {"color": "tab:brown", "hatch": "xx"},
}


def layout_label(backend: str, num_envs: int, cores: int | None = None) -> str:
    """The vecenv constructor a backend name of ``vecenv bench`` stands for, e.g. ``SubprocVecEnv(n_workers=1)``.

    :param backend: a name matching :data:`VECENV_LAYOUTS`.
    :param num_envs: N of the case (``vecenv-subproc-parent`` steps ``N // cores`` envs in the calling process).
    :param cores: the default ``n_workers`` of the run's machine; without it the parent share is not named.
    """
    if backend == "vecenv-dummy":
        return "DummyVecEnv"
    if backend == "vecenv-subproc":
        return "SubprocVecEnv"
    if backend == "vecenv-subproc-parent":
        share = f"{num_envs // cores}" if cores else "N // cores"
        return f"SubprocVecEnv(parent_envs={share})"
    match = re.fullmatch(r"vecenv-subproc-w(\d+)", backend)
    if match:
        return f"SubprocVecEnv(n_workers={match.group(1)})"
    return backend


@dataclass
class Speedup:
    """What :func:`plot_speedup` draws: env-steps/s over the plain loop's at one N.

    :ivar num_envs: N of the cases compared.
    :ivar workloads: the workloads, in the order of the results.
    :ivar series: label of :data:`SPEEDUP_SERIES` -> one ratio per workload (NaN where the case did not run
        or failed); only series with at least one ratio.
    :ivar best_layouts: for each workload, the constructor of vecenv's fastest layout (``""`` if none ran).
    """

    num_envs: int
    workloads: list[str]
    series: dict[str, list[float]] = field(default_factory=dict)
    best_layouts: list[str] = field(default_factory=list)


def speedup_data(df: Any, num_envs: int | None = None, cores: int | None = None) -> Speedup:
    """The ratios :func:`plot_speedup` draws, from a results DataFrame with ``x_plain`` (see
    :func:`vecenv.bench.tables.results_frame`).

    :param num_envs: N to compare at; default: the largest N at which the plain loop ran.
    :param cores: passed to :func:`layout_label`.
    :raises ValueError: if the plain loop has no successful case at that N (nothing to divide by).
    """
    ok = df[(df["status"] == "ok") & (df["backend"] == "plain")]
    if num_envs is None:
        if ok.empty:
            raise ValueError("the results have no successful plain-loop case: no reference for the speed-ups")
        num_envs = int(ok["num_envs"].max())
    at_n = df[(df["num_envs"] == num_envs) & (df["status"] == "ok")]
    plain_at_n = set(at_n[at_n["backend"] == "plain"]["workload"])
    workloads = [w for w in dict.fromkeys(df["workload"]) if w in plain_at_n]
    if not workloads:
        raise ValueError(f"the plain loop has no successful case at N={num_envs}: no reference for the speed-ups")
    result = Speedup(num_envs=num_envs, workloads=workloads)
    ratios: dict[str, list[float]] = {backend: [] for backend, _ in SPEEDUP_SERIES}
    for workload in workloads:
        rows = at_n[at_n["workload"] == workload]
        x_plain = {b: float(x) for b, x in zip(rows["backend"], rows["x_plain"], strict=True) if _finite(x)}
        for backend, _ in SPEEDUP_SERIES[:-1]:
            ratios[backend].append(x_plain.get(backend, math.nan))
        layouts = {b: x for b, x in x_plain.items() if VECENV_LAYOUTS.fullmatch(b)}
        best = max(layouts, key=layouts.__getitem__) if layouts else None
        ratios["vecenv-best"].append(layouts[best] if best else math.nan)
        result.best_layouts.append(layout_label(best, num_envs, cores) if best else "")
    labels = dict(SPEEDUP_SERIES)
    result.series = {labels[b]: values for b, values in ratios.items() if any(_finite(v) for v in values)}
    return result


def _finite(value: Any) -> bool:
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def speedup_figure(
    df: Any,
    num_envs: int | None = None,
    title: str | None = None,
    cores: int | None = None,
    workload_names: dict[str, str] | None = None,
) -> tuple[Any, Speedup]:
    """The figure of :func:`plot_speedup` and what it draws.

    :param df: results with ``x_plain`` (:func:`vecenv.bench.tables.results_frame`).
    :param num_envs: N to compare at (default: the largest N of the plain loop).
    :param title: a line above the chart's title (the machine, the date, the commit).
    :param cores: the run's default ``n_workers``, to name the ``parent_envs`` share.
    :param workload_names: display names of the workloads (default: :data:`WORKLOAD_NAMES`, else the names in
        the results).
    :return: the matplotlib ``Figure`` (on an ``Agg`` canvas) and the :class:`Speedup` it draws.
    :raises ValueError: as :func:`speedup_data`.
    """
    require_bench("matplotlib")
    data = speedup_data(df, num_envs, cores)
    names = WORKLOAD_NAMES if workload_names is None else workload_names
    fig = _figure(5.0)
    ax = fig.subplots()
    width = 0.84 / len(data.series)
    styles = {label: _SPEEDUP_STYLES[backend] for backend, label in SPEEDUP_SERIES}
    best_label = dict(SPEEDUP_SERIES)["vecenv-best"]
    top = max((v for values in data.series.values() for v in values if _finite(v)), default=1.0)
    for i, (label, values) in enumerate(data.series.items()):
        xs = [w + (i - (len(data.series) - 1) / 2) * width for w in range(len(data.workloads))]
        heights = [v if _finite(v) else 0.0 for v in values]
        style = styles[label]
        bars = ax.bar(
            xs, heights, width * 0.92, label=label, color=style["color"], hatch=style["hatch"], edgecolor="white"
        )
        texts = [f"{v:.2f}x" if _finite(v) else "n/a" for v in values]
        ax.bar_label(bars, texts, padding=2, fontsize=_FONT["bar"])
        if label == best_label:
            for x, layout in zip(xs, data.best_layouts, strict=True):
                ax.annotate(
                    layout.replace("(", "\n(", 1),
                    (x, 0),
                    xytext=(0, -4),
                    textcoords="offset points",
                    ha="center",
                    va="top",
                    fontsize=_FONT["bar"],
                    color="black",
                    annotation_clip=False,
                )
    ax.axhline(1.0, color="black", linestyle="--", linewidth=1)
    ax.set_xticks(range(len(data.workloads)), [names.get(w, w) for w in data.workloads])
    ax.tick_params(axis="x", pad=34, length=0, labelsize=_FONT["label"])
    ax.tick_params(axis="y", labelsize=_FONT["tick"])
    ax.set_ylim(0, top * 1.15)
    ax.set_ylabel("env-steps/s over the plain loop's", fontsize=_FONT["label"])
    ax.grid(True, axis="y", alpha=0.3)
    kwargs = {"ncol": 3, "fontsize": _FONT["legend"], "frameon": False}
    try:
        fig.legend(loc="outside lower center", **kwargs)
    except ValueError:  # matplotlib < 3.7: no "outside" locations
        fig.legend(loc="lower center", bbox_to_anchor=(0.5, -0.12), **kwargs)
    heading = f"env-steps/s over a plain loop, {data.num_envs} envs"
    ax.set_title(f"{title}\n{heading}" if title else heading, fontsize=_FONT["title"])
    return fig, data


def plot_speedup(
    df: Any,
    path: str | os.PathLike[str],
    num_envs: int | None = None,
    title: str | None = None,
    cores: int | None = None,
    workload_names: dict[str, str] | None = None,
) -> Speedup:
    """Draw env-steps/s over the plain loop's at one N as grouped bars, one group per workload, as a PNG.

    The plain loop's bar is 1 and a dashed line marks it; each bar carries its ratio, and vecenv's fastest
    layout is named under its bar. The chart's title is ``"env-steps/s over a plain loop, N envs"``, below
    ``title`` where one is given (:func:`speedup_figure` draws it).

    :param df: results with ``x_plain`` (:func:`vecenv.bench.tables.results_frame`).
    :param path: the PNG to write.
    :param num_envs: N to compare at (default: the largest N of the plain loop).
    :param title: a line above the chart's title (the machine, the date, the commit).
    :param cores: the run's default ``n_workers``, to name the ``parent_envs`` share.
    :param workload_names: display names of the workloads (default: :data:`WORKLOAD_NAMES`, else the names in
        the results).
    :return: what was drawn (:class:`Speedup`).
    :raises ValueError: as :func:`speedup_data`.
    """
    fig, data = speedup_figure(df, num_envs, title, cores, workload_names)
    fig.savefig(os.fspath(path), dpi=DPI)
    return data
