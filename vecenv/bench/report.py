"""Reports of ``vecenv bench``: ``bench.json``, ``bench.md``, ``bench.png`` and ``bench-speedup.png`` of a run.

The parts are in their own modules, whose names this module re-exports: :mod:`vecenv.bench.tables` (the
results with derived columns, the Markdown table), :mod:`vecenv.bench.targets` (the performance targets),
:mod:`vecenv.bench.chart` (the PNGs) and :mod:`vecenv.bench.machine` (the host). pandas and matplotlib (the
``bench`` extra) are imported by the functions that need them, never when this module is imported.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import sys
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from vecenv.atomic import atomic_write_bytes
from vecenv.bench.chart import DPI, grid_figure, plot, speedup_figure, workload_labels
from vecenv.bench.machine import machine_info
from vecenv.bench.runner import BenchRun
from vecenv.bench.tables import (
    COLUMNS,
    PLAIN,
    SB3_REFERENCE,
    TABLE_COLUMNS,
    add_derived,
    load_results,
    markdown_table,
    render_markdown,
    results_frame,
)
from vecenv.bench.targets import TargetResult, check_targets, targets_markdown
from vecenv.optional import BenchDependencyError, install_hint
from vecenv.optional import require_bench as require

# with the names this module defines, those of the modules it was split into, which callers import from here
__all__ = [
    "BENCH_EXTRA_HINT",
    "COLUMNS",
    "OUTPUT_FILES",
    "PLAIN",
    "SB3_REFERENCE",
    "TABLE_COLUMNS",
    "BenchDependencyError",
    "TargetResult",
    "add_derived",
    "check_targets",
    "load_results",
    "machine_info",
    "machine_summary",
    "markdown_table",
    "plot",
    "report_markdown",
    "require",
    "results_frame",
    "targets_markdown",
    "write_outputs",
]

BENCH_EXTRA_HINT = install_hint("bench")
#: The files :func:`write_outputs` writes in the output folder, in the order it writes them.
OUTPUT_FILES = ("bench.png", "bench-speedup.png", "bench.md", "bench.json")
#: The Markdown table of text cells (scripts in benchmarks/ import it under this name).
_markdown = render_markdown


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


def _png(figure: Any) -> bytes:
    """A matplotlib figure as the bytes of a PNG file, at the charts' :data:`~vecenv.bench.chart.DPI`."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI)
    return buffer.getvalue()


def write_outputs(run: BenchRun, output_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """Write ``bench.png``, ``bench-speedup.png``, ``bench.md`` and ``bench.json`` to ``output_dir`` (created if
    needed). ``bench-speedup.png`` (:func:`~vecenv.bench.chart.speedup_figure`, at the largest N of the plain loop)
    is written only where the plain loop ran; where it did not, the ``bench-speedup.png`` of an earlier run is
    removed. The charts name the cpu workload with the run's ``cpu_us``
    (:func:`~vecenv.bench.chart.workload_labels`).

    Every file is rendered first, then each is replaced atomically (:func:`~vecenv.atomic.atomic_write_bytes`: a
    reader sees the earlier file or the whole new one), in the order of :data:`OUTPUT_FILES`, ``bench.json`` last:
    a new ``bench.json`` comes with the new charts and ``bench.md`` of its run.

    :return: ``{"json": path, "markdown": path, "png": path, "speedup_png": path or None, "frame": DataFrame,
        "targets": [...], "table": the Markdown results table, "targets_table": the Markdown targets table}``.
    :raises OSError: if a file cannot be written or the stale ``bench-speedup.png`` removed (its ``filename`` is
        that file's path), or the folder cannot be created.
    """
    df = results_frame(run.records)
    targets = check_targets(df)
    png_path, speedup_path, md_path, json_path = (os.path.join(output_dir, name) for name in OUTPUT_FILES)
    data = {
        "machine": run.machine,
        "settings": run.settings,
        "wall_s": run.wall_s,
        "results": df.to_dict(orient="records"),
        "targets": [{**asdict(t), "verdict": t.verdict} for t in targets],
        "notes": run.notes,
        "command": sys.argv,
    }
    json_bytes = (json.dumps(_clean(data), indent=1) + "\n").encode("utf-8")
    md_bytes = report_markdown(run, df, targets).encode("utf-8")
    machine = run.machine
    commit = f" at {machine['vecenv_commit']}" if machine.get("vecenv_commit") else ""  # the commit it measured
    cpus = f"{machine.get('cpu_count')} CPUs, {machine.get('cpu_model') or ''}"
    title = f"vecenv bench{commit}: {cpus}, {machine.get('date')}"
    names = workload_labels(run.settings.get("cpu_us"))
    png_bytes = _png(grid_figure(df, title, workload_names=names))
    speedup_bytes: bytes | None
    try:
        cores = machine.get("cpus_usable") or machine.get("cpu_count")
        speedup_bytes = _png(speedup_figure(df, title=title, cores=cores, workload_names=names)[0])
    except ValueError:  # the plain loop did not run: there is no reference to draw the ratios to
        speedup_bytes = None
    os.makedirs(output_dir, exist_ok=True)
    atomic_write_bytes(png_path, png_bytes)
    if speedup_bytes is not None:
        atomic_write_bytes(speedup_path, speedup_bytes)
    elif os.path.lexists(speedup_path) and not os.path.isdir(speedup_path):
        os.remove(speedup_path)  # an earlier run's, which would be taken for this run's
    atomic_write_bytes(md_path, md_bytes)
    atomic_write_bytes(json_path, json_bytes)
    return {
        "json": json_path,
        "markdown": md_path,
        "png": png_path,
        "speedup_png": speedup_path if speedup_bytes is not None else None,
        "frame": df,
        "targets": targets,
        "table": markdown_table(df),
        "targets_table": targets_markdown(targets),
    }
