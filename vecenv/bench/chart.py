"""The chart of ``vecenv bench``: env-steps/s and start-up time against the number of envs, as a PNG.

matplotlib (the ``bench`` extra) is imported when a chart is drawn, never when this module is imported; the
chart is drawn on matplotlib's ``Agg`` canvas without ``pyplot``.
"""

from __future__ import annotations

import os
from typing import Any

from vecenv.optional import require_bench

__all__ = ["plot"]

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
