#!/usr/bin/env python3
"""The charts of ``vecenv bench`` from one or more ``bench.json`` files, e.g. a full run split into one run per
workload.

The results of every file are put together (a case that appears in several files is kept from the last one),
then ``--grid`` gets :func:`vecenv.bench.chart.plot` (every backend, or those of ``--backends``, against N, one
row per workload) and ``--speedup`` gets :func:`vecenv.bench.chart.plot_speedup` (at ``--num-envs``, bars of
env-steps/s over the plain loop's: the plain loop, SB3's ``SubprocVecEnv``, Gymnasium's ``AsyncVectorEnv``,
vecenv's ``SubprocVecEnv`` with its defaults and vecenv's fastest layout). The charts' titles name the commit
of vecenv that ran (``vecenv bench`` records it). It prints the speed-ups it drew. Needs pandas and matplotlib
(the ``bench`` extra).

    python benchmarks/charts.py cartpole/bench.json image/bench.json cpu/bench.json \\
        --grid snapshots/DATE.png --speedup snapshots/DATE-speedup.png --num-envs 16
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from vecenv.bench.chart import Speedup, plot, plot_speedup, workload_labels
from vecenv.bench.tables import COLUMNS, add_derived
from vecenv.optional import require_bench


def load_runs(paths: Sequence[str]) -> tuple[Any, dict[str, Any]]:
    """The results of several ``bench.json`` files as one DataFrame (ratios recomputed over all of them), and
    the ``machine`` of the first file."""
    pd = require_bench("pandas")
    records: dict[tuple[str, int, str], dict[str, Any]] = {}
    machine: dict[str, Any] = {}
    for path in paths:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        machine = machine or data.get("machine", {})
        for record in data["results"]:
            records[record["workload"], int(record["num_envs"]), record["backend"]] = record
    df = pd.DataFrame(list(records.values()))
    for column in COLUMNS:
        if column not in df.columns:
            df[column] = None
    return add_derived(df[COLUMNS]), machine


def _cpu_us(paths: Sequence[str]) -> float | None:
    """The ``cpu_us`` setting of the run that measured the cpu workload (the first such file), or None."""
    for path in paths:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        if any(record["workload"] == "cpu" for record in data["results"]):
            return data.get("settings", {}).get("cpu_us")
    return None


def _title(machine: dict[str, Any], what: str) -> str:
    """``what``, the commit of vecenv that ran (where the run recorded it), the machine and the date."""
    date = str(machine.get("date", ""))[:10]
    commit = f" at {machine['vecenv_commit']}" if machine.get("vecenv_commit") else ""
    return f"{what}{commit}: {machine.get('cpu_count')} CPUs ({machine.get('cpu_model') or 'unknown model'}), {date}"


def main(argv: Sequence[str] | None = None) -> Speedup | None:
    """Parse ``argv``, draw the charts asked for, print the speed-ups; return what the speed-up chart drew."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", metavar="BENCH_JSON", help="bench.json files of vecenv bench")
    parser.add_argument("--grid", metavar="PNG", help="write the full grid here")
    parser.add_argument("--speedup", metavar="PNG", help="write the speed-up bars here")
    parser.add_argument("--num-envs", type=int, default=None, metavar="N", help="N of the speed-up bars")
    parser.add_argument(
        "--backends",
        type=lambda text: [name.strip() for name in text.split(",") if name.strip()],
        default=None,
        metavar="B1,B2,...",
        help="the backends of the grid, in legend order (default: every backend of the runs)",
    )
    args = parser.parse_args(argv)
    df, machine = load_runs(args.runs)
    names = workload_labels(_cpu_us(args.runs))
    if args.grid:
        plot(df, args.grid, title=_title(machine, "vecenv bench"), backends=args.backends, workload_names=names)
    if not args.speedup:
        return None
    cores = machine.get("cpus_usable") or machine.get("cpu_count")
    title = _title(machine, "vecenv bench")
    speedup = plot_speedup(df, args.speedup, num_envs=args.num_envs, title=title, cores=cores, workload_names=names)
    for label, values in speedup.series.items():
        print(f"{label:<34}" + "".join(f"{w} {v:5.2f}x  " for w, v in zip(speedup.workloads, values, strict=True)))
    fastest = zip(speedup.workloads, speedup.best_layouts, strict=True)
    print("fastest vecenv layout: " + ", ".join(f"{workload}: {layout}" for workload, layout in fastest))
    return speedup


if __name__ == "__main__":
    main(sys.argv[1:])
