"""The results table of ``vecenv bench``: records as a DataFrame with derived ratios, and as Markdown.

pandas (the ``bench`` extra) is imported by the functions that need it, never when this module is imported.
"""

from __future__ import annotations

import importlib
import json
import math
import os
from collections.abc import Sequence
from typing import Any

from vecenv.optional import require_bench

__all__ = [
    "COLUMNS",
    "PLAIN",
    "SB3_REFERENCE",
    "TABLE_COLUMNS",
    "add_derived",
    "is_number",
    "load_results",
    "markdown_table",
    "render_markdown",
    "results_frame",
]

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


def results_frame(records: Sequence[dict[str, Any]]) -> Any:
    """The records of a run as a pandas DataFrame with every column of :data:`COLUMNS` (derived ones added)."""
    pd = require_bench("pandas")
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
    pd = require_bench("pandas")
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
    pd = require_bench("pandas")
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    return pd.DataFrame(data["results"], columns=COLUMNS)


def is_number(value: Any) -> bool:
    """Whether ``value`` is a finite int or float (not a bool, NaN, None or text)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _fmt(value: Any, spec: str) -> str:
    return format(value, spec) if is_number(value) else ""


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


def render_markdown(headers: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[bool]) -> str:
    """A Markdown table of text cells, columns padded to their width; ``right[i]``: column ``i`` right-aligned."""
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
    return render_markdown([header for header, _, _ in TABLE_COLUMNS], rows, right)
