"""The charts of ``vecenv bench``, as PNGs.

- :func:`plot`: env-steps/s and start-up time of every backend against the number of envs, one column per
  workload (the full grid).
- :func:`plot_speedup`: at one number of envs, a few backends as bars of env-steps/s over the plain loop's,
  one group per workload: how much faster than a plain loop, SB3's ``SubprocVecEnv`` or Gymnasium's
  ``AsyncVectorEnv`` vecenv steps each workload (:func:`speedup_data` computes what it draws).

matplotlib (the ``bench`` extra) is imported when a chart is drawn, never when this module is imported; the
charts are drawn on matplotlib's ``Agg`` canvas without ``pyplot``.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from typing import Any

from vecenv.optional import require_bench

__all__ = [
    "SPEEDUP_SERIES",
    "VECENV_LAYOUTS",
    "WORKLOAD_NAMES",
    "Speedup",
    "layout_label",
    "plot",
    "plot_speedup",
    "speedup_data",
]

_STYLES: dict[str, dict[str, Any]] = {
    "plain": {"color": "black", "linestyle": "--", "marker": "", "linewidth": 1.5},
    "vecenv-dummy": {"color": "tab:blue", "marker": "o", "linewidth": 2.2},
    "vecenv-subproc": {"color": "tab:red", "marker": "s", "linewidth": 2.2},
    "vecenv-subproc-parent": {"color": "darkred", "marker": "D", "linewidth": 2.2, "linestyle": "--"},
    "sb3-dummy": {"color": "tab:cyan", "marker": "o", "linewidth": 1.2, "linestyle": ":"},
    "sb3-subproc": {"color": "tab:orange", "marker": "s", "linewidth": 1.2, "linestyle": ":"},
    "gym-sync": {"color": "tab:green", "marker": "^", "linewidth": 1.2, "linestyle": "-."},
    "gym-async": {"color": "tab:olive", "marker": "v", "linewidth": 1.2, "linestyle": "-."},
    "vecenv-gym-sync": {"color": "tab:blue", "marker": "^", "linewidth": 1.8, "linestyle": "--"},
    "vecenv-gym-async": {"color": "tab:red", "marker": "v", "linewidth": 1.8, "linestyle": "--"},
}
_VARIANT_COLORS = ["tab:purple", "tab:brown", "tab:pink", "tab:gray"]


def _style(backend: str, variants: list[str]) -> dict[str, Any]:
    if backend in _STYLES:
        return _STYLES[backend]
    if backend not in variants:
        variants.append(backend)
    color = _VARIANT_COLORS[(variants.index(backend)) % len(_VARIANT_COLORS)]
    return {"color": color, "marker": "d", "linewidth": 1.5}


def plot(df: Any, path: str | os.PathLike[str], title: str | None = None) -> None:
    """Draw env-steps/s (top) and start-up time (bottom) against N, one column per workload, as a PNG."""
    require_bench("matplotlib")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    ok = df[df["status"] == "ok"]
    workloads = list(dict.fromkeys(df["workload"]))
    backends = list(dict.fromkeys(df["backend"]))
    fig = Figure(figsize=(4.6 * max(1, len(workloads)), 7.5), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(2, max(1, len(workloads)), squeeze=False)
    variants: list[str] = []
    handles: dict[str, Any] = {}
    panels = [("env_steps_per_s", "env-steps/s (median)"), ("startup_s", "start-up s (build + reset)")]
    for col, workload in enumerate(workloads):
        for row, (column, ylabel) in enumerate(panels):
            ax = axes[row][col]
            rows = ok[ok["workload"] == workload]
            ns = sorted({int(n) for n in df[df["workload"] == workload]["num_envs"]})
            for backend in backends:
                data = rows[rows["backend"] == backend].sort_values("num_envs")
                values = data[column].astype(float)
                if data.empty or not values.notna().any():
                    continue
                (line,) = ax.plot(data["num_envs"], values, label=backend, **_style(backend, variants))
                handles.setdefault(backend, line)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            if ns:
                ax.set_xticks(ns, [str(n) for n in ns])
            ax.grid(True, which="both", alpha=0.3)
            ax.set_xlabel("N (number of envs)")
            if col == 0:
                ax.set_ylabel(ylabel)
            if row == 0:
                ax.set_title(workload)
    if handles:
        names = [backend for backend in backends if backend in handles]
        artists, ncol = [handles[name] for name in names], min(5, len(names))
        try:
            fig.legend(artists, names, loc="outside lower center", ncol=ncol)
        except ValueError:  # matplotlib < 3.7: no "outside" locations
            fig.legend(artists, names, loc="lower center", ncol=ncol, bbox_to_anchor=(0.5, -0.08))
    if title:
        fig.suptitle(title)
    fig.savefig(os.fspath(path), dpi=110, bbox_inches="tight")


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
#: Workload names under the bars of :func:`plot_speedup`.
WORKLOAD_NAMES = {"cartpole": "CartPole-v1", "image": "84x84x4 image", "cpu": "~200 us of CPU per step"}
_SPEEDUP_COLORS = {
    "plain": "0.6",
    "sb3-subproc": "tab:orange",
    "gym-async": "tab:olive",
    "vecenv-subproc": "tab:red",
    "vecenv-best": "darkred",
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
    ``title`` where one is given.

    :param df: results with ``x_plain`` (:func:`vecenv.bench.tables.results_frame`).
    :param num_envs: N to compare at (default: the largest N of the plain loop).
    :param title: a line above the chart's title (the machine, the date).
    :param cores: the run's default ``n_workers``, to name the ``parent_envs`` share.
    :param workload_names: display names of the workloads (default: :data:`WORKLOAD_NAMES`, else the names in
        the results).
    :return: what was drawn (:class:`Speedup`).
    :raises ValueError: as :func:`speedup_data`.
    """
    require_bench("matplotlib")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    data = speedup_data(df, num_envs, cores)
    names = WORKLOAD_NAMES if workload_names is None else workload_names
    fig = Figure(figsize=(2.9 * len(data.workloads) + 1.6, 4.4), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    width = 0.8 / len(data.series)
    colors = {label: _SPEEDUP_COLORS[backend] for backend, label in SPEEDUP_SERIES}
    top = max((v for values in data.series.values() for v in values if _finite(v)), default=1.0)
    for i, (label, values) in enumerate(data.series.items()):
        xs = [w + (i - (len(data.series) - 1) / 2) * width for w in range(len(data.workloads))]
        heights = [v if _finite(v) else 0.0 for v in values]
        bars = ax.bar(xs, heights, width * 0.92, label=label, color=colors[label])
        texts = [f"{v:.2f}x" if _finite(v) else "n/a" for v in values]
        ax.bar_label(bars, texts, padding=2, fontsize=8)
        if label == dict(SPEEDUP_SERIES)["vecenv-best"]:
            for x, layout in zip(xs, data.best_layouts, strict=True):
                ax.annotate(
                    layout.replace("(", "\n(", 1),
                    (x, 0),
                    xytext=(0, -4),
                    textcoords="offset points",
                    ha="center",
                    va="top",
                    fontsize=7,
                    color=colors[label],
                    annotation_clip=False,
                )
    ax.axhline(1.0, color="black", linestyle="--", linewidth=1)
    ax.set_xticks(range(len(data.workloads)), [names.get(w, w) for w in data.workloads])
    ax.tick_params(axis="x", pad=30, length=0)
    ax.set_ylim(0, top * 1.18)
    ax.set_ylabel("env-steps/s over the plain loop's")
    ax.grid(True, axis="y", alpha=0.3)
    try:
        fig.legend(loc="outside lower center", ncol=len(data.series), fontsize=8, frameon=False)
    except ValueError:  # matplotlib < 3.7: no "outside" locations
        fig.legend(loc="lower center", ncol=len(data.series), fontsize=8, bbox_to_anchor=(0.5, -0.08))
    heading = f"env-steps/s over a plain loop, {data.num_envs} envs"
    ax.set_title(f"{title}\n{heading}" if title else heading)
    fig.savefig(os.fspath(path), dpi=110, bbox_inches="tight")
    return data
