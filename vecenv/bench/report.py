"""Reports of ``vecenv bench``: derived columns, the targets, the table, JSON, Markdown and the chart.

pandas and matplotlib (the ``bench`` extra) are imported by the functions that need them, never when
this module is imported. The chart is drawn on matplotlib's ``Agg`` canvas without ``pyplot``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import importlib
import importlib.metadata
import json
import math
import multiprocessing as mp
import os
import platform
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from vecenv.monitor import install_hint

if TYPE_CHECKING:
    from vecenv.bench.runner import BenchRun

__all__ = [
    "COLUMNS",
    "BenchDependencyError",
    "TargetResult",
    "add_derived",
    "check_targets",
    "load_results",
    "machine_info",
    "markdown_table",
    "plot",
    "require",
    "results_frame",
    "write_outputs",
]

BENCH_EXTRA_HINT = install_hint("bench")
#: Columns of every results table, in order (derived ones last).
COLUMNS = [
    "workload",
    "num_envs",
    "backend",
    "library",
    "in_process",
    "n_workers",
    "status",
    "error",
    "env_steps_per_s",
    "env_steps_per_s_min",
    "env_steps_per_s_max",
    "rates",
    "repeats",
    "steps_per_repeat",
    "startup_s",
    "close_s",
    "peak_rss_mib",
    "pss_mib",
    "processes",
    "wall_s",
    "load_avg_1m",
    "spread_pct",
    "x_sb3_subproc",
    "x_plain",
    "overhead_us",
]
#: The backend that the ``x_sb3_subproc`` ratio divides by, and the baseline of ``x_plain`` / ``overhead_us``.
SB3_REFERENCE = "sb3-subproc"
PLAIN = "plain"


class BenchDependencyError(ImportError):
    """pandas or matplotlib (the ``bench`` extra) is missing."""


def require(module: str) -> Any:
    """Import ``module`` from the ``bench`` extra, or raise :class:`BenchDependencyError` saying how to get it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        top = module.split(".", maxsplit=1)[0]
        raise BenchDependencyError(
            f"vecenv bench needs {top}, which is not installed. {BENCH_EXTRA_HINT} "
            "(stable-baselines3 and torch too for the SB3 backends)"
        ) from None


# --- machine --------------------------------------------------------------------------------------


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.lower().startswith(("model name", "hardware", "processor\t: ")) and ":" in line:
                    value = line.split(":", 1)[1].strip()
                    if value and not value.isdigit():
                        return value
    except OSError:
        pass
    return platform.processor() or None


def _mem_total_mib() -> float | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) / 1024)
    except OSError:
        pass
    return None


def _git_commit() -> str | None:
    """The commit of the vecenv source tree (``+dirty`` with local changes), if it is a git checkout."""
    import vecenv

    root = os.path.dirname(os.path.dirname(os.path.abspath(vecenv.__file__)))
    if not os.path.exists(os.path.join(root, ".git")):
        return None
    try:
        commit = subprocess.run(
            ["git", "-C", root, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=5, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", root, "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return commit + ("+dirty" if dirty else "")


def machine_info() -> dict[str, Any]:
    """The machine and software a run measured: CPUs, memory, versions, date, load (no torch import)."""
    import inspect

    from vecenv import SubprocVecEnv

    try:
        affinity: int | None = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = None
    try:
        load: list[float] | None = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = None
    return {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "cpu_count": os.cpu_count(),
        "cpus_usable": affinity,
        "cpu_model": _cpu_model(),
        "mem_total_mib": _mem_total_mib(),
        "platform": platform.platform(),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "vecenv": _version("vecenv"),
        "vecenv_commit": _git_commit(),
        "vecenv_subproc_params": list(inspect.signature(SubprocVecEnv).parameters),
        "numpy": _version("numpy"),
        "gymnasium": _version("gymnasium"),
        "stable_baselines3": _version("stable-baselines3"),
        "torch": _version("torch"),
        "pandas": _version("pandas"),
        "matplotlib": _version("matplotlib"),
        "default_start_method": mp.get_start_method(allow_none=True) or mp.get_all_start_methods()[0],
        "load_average_start": load,
    }


# --- tables ---------------------------------------------------------------------------------------


def results_frame(records: Sequence[dict[str, Any]]) -> Any:
    """The records of a run as a pandas DataFrame with every column of :data:`COLUMNS` (derived ones added)."""
    pd = require("pandas")
    df = pd.DataFrame(list(records))
    for column in COLUMNS:
        if column not in df.columns:
            df[column] = None
    return add_derived(df)[COLUMNS + [c for c in df.columns if c not in COLUMNS]]


def add_derived(df: Any) -> Any:
    """Add ``spread_pct``, ``x_sb3_subproc``, ``x_plain`` and ``overhead_us`` to a results DataFrame.

    - ``spread_pct``: (max - min) / median of the repeats' rates, in percent (a noise indicator).
    - ``x_sb3_subproc``: env-steps/s over Stable-Baselines3 SubprocVecEnv's, same workload and N.
    - ``x_plain``: env-steps/s over the plain loop's, same workload and N.
    - ``overhead_us``: for in-process backends, ``1e6 / rate - 1e6 / plain_rate``, the microseconds that
      the backend adds to each env-step over the plain loop (NaN for backends with worker processes).

    Rows whose ``status`` is not ``"ok"`` get NaN. Returns a new DataFrame.
    """
    pd = require("pandas")
    np = importlib.import_module("numpy")
    df = df.copy()
    ok = df["status"] == "ok"
    rate = pd.to_numeric(df["env_steps_per_s"], errors="coerce").where(ok)
    keys = list(zip(df["workload"], df["num_envs"], strict=True))

    def reference(backend: str) -> Any:
        rows = df[ok & (df["backend"] == backend)]
        lookup = dict(zip(zip(rows["workload"], rows["num_envs"], strict=True), rows["env_steps_per_s"], strict=True))
        return pd.Series([lookup.get(key, np.nan) for key in keys], index=df.index, dtype=float)

    plain = reference(PLAIN)
    sb3 = reference(SB3_REFERENCE)
    low = pd.to_numeric(df["env_steps_per_s_min"], errors="coerce")
    high = pd.to_numeric(df["env_steps_per_s_max"], errors="coerce")
    df["spread_pct"] = ((high - low) / rate * 100).where(ok)
    df["x_sb3_subproc"] = rate / sb3
    df["x_plain"] = rate / plain
    in_process = df["in_process"].astype(bool)
    df["overhead_us"] = (1e6 / rate - 1e6 / plain).where(in_process & ok)
    return df


def load_results(path: str | os.PathLike[str]) -> Any:
    """The ``results`` of a ``bench.json`` file as a DataFrame (columns of :data:`COLUMNS`)."""
    pd = require("pandas")
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    return pd.DataFrame(data["results"], columns=COLUMNS)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _fmt(value: Any, spec: str) -> str:
    return format(value, spec) if _is_number(value) else ""


#: (header, column, format) of the printed / Markdown table.
TABLE_COLUMNS: list[tuple[str, str, str]] = [
    ("workload", "workload", ""),
    ("N", "num_envs", "d"),
    ("backend", "backend", ""),
    ("env-steps/s", "env_steps_per_s", ",.0f"),
    ("± %", "spread_pct", ".0f"),
    ("x SB3 subproc", "x_sb3_subproc", ".2f"),
    ("x plain", "x_plain", ".2f"),
    ("overhead us/step", "overhead_us", ".2f"),
    ("startup s", "startup_s", ".3f"),
    ("peak RSS MiB", "peak_rss_mib", ",.0f"),
    ("PSS MiB", "pss_mib", ",.0f"),
]


def _markdown(headers: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[bool]) -> str:
    widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        padded = [
            cell.rjust(width) if r else cell.ljust(width) for cell, width, r in zip(cells, widths, right, strict=True)
        ]
        return "| " + " | ".join(padded) + " |"

    rule = "|" + "|".join(("-" * (w + 1) + ":") if r else ("-" * (w + 2)) for w, r in zip(widths, right, strict=True))
    return "\n".join([line(headers), rule + "|", *(line(row) for row in rows)])


def markdown_table(df: Any) -> str:
    """The results as a Markdown table (also readable as plain text): one row per case."""
    rows = []
    for record in df.to_dict(orient="records"):
        cells = []
        for _, column, spec in TABLE_COLUMNS:
            value = record.get(column)
            if column == "env_steps_per_s" and record.get("status") != "ok":
                cells.append(str(record.get("status", "error")))
            elif spec:
                cells.append(_fmt(value, spec))
            else:
                cells.append("" if value is None else str(value))
        rows.append(cells)
    right = [bool(spec) for _, _, spec in TABLE_COLUMNS]
    return _markdown([header for header, _, _ in TABLE_COLUMNS], rows, right)


# --- targets --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TargetResult:
    """One performance target and what this run measured for it.

    :param target: what is required.
    :param measured: the measured value(s), as text.
    :param passed: True / False, or None when the run did not measure it.
    """

    target: str
    measured: str
    passed: bool | None

    @property
    def verdict(self) -> str:
        """``PASS``, ``FAIL`` or ``n/a``."""
        return "n/a" if self.passed is None else ("PASS" if self.passed else "FAIL")


def _value(df: Any, workload: str, n: int, backend: str, column: str) -> float | None:
    rows = df[(df["workload"] == workload) & (df["num_envs"] == n) & (df["backend"] == backend)]
    rows = rows[rows["status"] == "ok"]
    if rows.empty:
        return None
    value = rows.iloc[0][column]
    return float(value) if _is_number(value) else None


def _ratio_target(df: Any, workload: str, n: int, backend: str, reference: str, minimum: float) -> TargetResult:
    label = f"{workload} N={n}: {backend} >= {minimum:g}x {reference}"
    mine = _value(df, workload, n, backend, "env_steps_per_s")
    theirs = _value(df, workload, n, reference, "env_steps_per_s")
    if mine is None or theirs is None:
        return TargetResult(label, "not measured", None)
    ratio = mine / theirs
    return TargetResult(label, f"{ratio:.2f}x ({mine:,.0f} vs {theirs:,.0f} env-steps/s)", ratio >= minimum)


def _limit_target(df: Any, workload: str, n: int, backend: str, column: str, maximum: float, unit: str) -> TargetResult:
    label = f"{workload} N={n}: {backend} {column} < {maximum:g} {unit}"
    value = _value(df, workload, n, backend, column)
    if value is None:
        return TargetResult(label, "not measured", None)
    return TargetResult(label, f"{value:.3g} {unit}", value < maximum)


def _overhead_targets(
    df: Any, workload: str, mine: str, theirs: str, limit: float, limit_from: int
) -> list[TargetResult]:
    ns = sorted({int(n) for n in df[df["workload"] == workload]["num_envs"]})
    pairs = [
        (n, _value(df, workload, n, mine, "overhead_us"), _value(df, workload, n, theirs, "overhead_us")) for n in ns
    ]
    compared = [(n, a, b) for n, a, b in pairs if a is not None and b is not None]
    label = f"{workload}, every N: {mine} overhead < {theirs} overhead"
    if compared:
        text = ", ".join(f"N={n}: {a:.2f} vs {b:.2f}" for n, a, b in compared) + " us"
        below = TargetResult(label, text, all(a < b for _, a, b in compared))
    else:
        below = TargetResult(label, "not measured", None)
    label = f"{workload}, N >= {limit_from}: {mine} overhead < {limit:g} us"
    large = [(n, a) for n, a, _ in pairs if n >= limit_from and a is not None]
    if large:
        text = ", ".join(f"N={n}: {a:.2f}" for n, a in large) + " us"
        under = TargetResult(label, text, all(a < limit for _, a in large))
    else:
        under = TargetResult(label, "not measured", None)
    return [below, under]


def check_targets(df: Any) -> list[TargetResult]:
    """The performance targets of vecenv, checked against a results DataFrame with derived columns.

    "SubprocVecEnv" is ``vecenv-subproc`` (the default ``n_workers``); the throughput targets are also
    checked for ``vecenv-subproc-parent`` (``parent_envs``, opt-in). Targets whose cases were not run are
    reported as not measured.
    """
    subproc = "vecenv-subproc"
    results = [
        target
        for backend in (subproc, "vecenv-subproc-parent")
        for target in (
            _ratio_target(df, "cartpole", 64, backend, SB3_REFERENCE, 20),
            _ratio_target(df, "cartpole", 64, backend, PLAIN, 1.25),
            _ratio_target(df, "cpu", 16, backend, PLAIN, 1.5),
            _ratio_target(df, "image", 16, backend, "gym-async", 5),
        )
    ]
    # vecenv.gymnasium.AsyncVectorEnv must beat Gymnasium's own AsyncVectorEnv
    results.extend(
        _ratio_target(df, workload, 16, "vecenv-gym-async", "gym-async", 1) for workload in ("cartpole", "image", "cpu")
    )
    for workload in dict.fromkeys(df["workload"]):
        results.extend(_overhead_targets(df, str(workload), "vecenv-dummy", "sb3-dummy", 1.5, 16))
    results.append(_limit_target(df, "cartpole", 64, subproc, "startup_s", 2.0, "s"))
    results.append(_limit_target(df, "cartpole", 64, subproc, "peak_rss_mib", 1024, "MiB"))
    return results


def targets_markdown(targets: Sequence[TargetResult]) -> str:
    """The targets as a Markdown table."""
    rows = [[t.target, t.measured, t.verdict] for t in targets]
    return _markdown(["target", "measured", "result"], rows, [False, False, False])


# --- chart ----------------------------------------------------------------------------------------

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
    require("matplotlib")
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


# --- outputs --------------------------------------------------------------------------------------


def _clean(value: Any) -> Any:
    """JSON-safe: NaN / inf -> None, numpy scalars -> Python."""
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        with contextlib.suppress(ValueError, TypeError):
            value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def machine_summary(machine: dict[str, Any]) -> str:
    """One line describing the machine and versions."""
    parts = [
        f"{machine.get('cpu_count')} CPUs ({machine.get('cpu_model') or 'unknown model'})",
        f"{machine.get('python')}",
        f"vecenv {machine.get('vecenv')}" + (f" @ {machine['vecenv_commit']}" if machine.get("vecenv_commit") else ""),
        f"numpy {machine.get('numpy')}",
        f"gymnasium {machine.get('gymnasium')}",
        f"SB3 {machine.get('stable_baselines3') or '-'}",
        f"torch {machine.get('torch') or '-'}",
        f"{machine.get('date')}",
    ]
    return "; ".join(parts)


def report_markdown(run: BenchRun, df: Any, targets: Sequence[TargetResult]) -> str:
    """The whole report as Markdown: machine, settings, results table, targets, notes."""
    s = run.settings
    load = f"load average {run.machine.get('load_average_start')} -> {run.machine.get('load_average_end')}"
    # calibrated by run_benchmark only when the cpu workload runs (None otherwise)
    cpu = s.get("cpu_iterations")
    cpu_text = f"cpu workload {cpu} busy-loop iterations per step (~{s['cpu_us']:g} us); " if cpu is not None else ""
    lines = [
        "# vecenv benchmark",
        "",
        f"Machine: {machine_summary(run.machine)}; {load}.",
        "",
        f"Settings: {s['repeats']} repeats of ~{s['seconds']} s per case (median reported), warm-up "
        f"{s['warmup_seconds']} s; {cpu_text}"
        f"{'one fresh process per case' if s['isolate'] else 'all cases in one process'}"
        f"; forkserver preload {'on' if s['preload'] else 'off'}; run took {run.wall_s:.0f} s.",
        "",
        markdown_table(df),
        "",
        "env-steps/s: median over repeats of num_envs x vector steps / s. ± %: (max - min) / median of the "
        "repeats. x SB3 subproc / x plain: ratio to stable-baselines3 SubprocVecEnv / to the plain loop at the "
        "same workload and N. overhead us/step: 1e6/rate - 1e6/plain_rate, in-process backends only. startup s: "
        "build + first reset. peak RSS: peak of the summed VmRSS of the process and its workers (counts shared "
        "pages once per process); PSS: proportional set size summed after the last repeat (shared pages split).",
        "",
        "## Targets",
        "",
        targets_markdown(targets),
    ]
    if run.notes:
        lines += ["", "## Notes", "", *(f"- {note}" for note in run.notes)]
    errors = df[df["status"] != "ok"]
    if not errors.empty:
        lines += ["", "## Errors", ""]
        lines += [f"- {r.workload} N={r.num_envs} {r.backend}: {r.error}" for r in errors.itertuples()]
    return "\n".join(lines) + "\n"


def write_outputs(run: BenchRun, output_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """Write ``bench.json``, ``bench.md`` and ``bench.png`` to ``output_dir`` (created if needed).

    :return: ``{"json": path, "markdown": path, "png": path, "frame": DataFrame, "targets": [...],
        "table": the Markdown results table, "targets_table": the Markdown targets table}``.
    """
    os.makedirs(output_dir, exist_ok=True)
    df = results_frame(run.records)
    targets = check_targets(df)
    json_path = os.path.join(output_dir, "bench.json")
    md_path = os.path.join(output_dir, "bench.md")
    png_path = os.path.join(output_dir, "bench.png")
    data = {
        "machine": run.machine,
        "settings": run.settings,
        "wall_s": run.wall_s,
        "results": df.to_dict(orient="records"),
        "targets": [{**asdict(t), "verdict": t.verdict} for t in targets],
        "notes": run.notes,
        "command": sys.argv,
    }
    with open(json_path, "w", encoding="utf-8") as f:
        json.dump(_clean(data), f, indent=1)
        f.write("\n")
    with open(md_path, "w", encoding="utf-8") as f:
        f.write(report_markdown(run, df, targets))
    machine = run.machine
    title = f"vecenv bench: {machine.get('cpu_count')} CPUs, {machine.get('cpu_model') or ''}, {machine.get('date')}"
    plot(df, png_path, title=title)
    return {
        "json": json_path,
        "markdown": md_path,
        "png": png_path,
        "frame": df,
        "targets": targets,
        "table": markdown_table(df),
        "targets_table": targets_markdown(targets),
    }
