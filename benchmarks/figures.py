#!/usr/bin/env python3
"""Every figure of the documentation (its tables of measurements and its charts): the page and section that
show it, the commit of vecenv it measured, the snapshot files it was taken from, and the commands that
measure it again. ``make figures`` runs them all (``--only NAME,...`` some of them).

Each figure's commands are those that made the figures the docs show, with the same settings; they write
their results (Markdown tables, JSON, charts) to ``--out`` (default ``benchmarks/snapshots/``) under names
that start with ``--date`` (default: today), so a new run sits beside the old one; the docs then need their
figures, dates and commits updated from it. The runs take long (the benchmark scripts' own settings: from
about a minute for the PettingZoo comparison to tens of minutes for ``vecenv bench``) and need the ``bench``
and ``test`` extras (SB3, Ray, EnvPool, PettingZoo, SuperSuit; ``make figures`` installs them).

    python benchmarks/figures.py --list                # each figure: page, section, commit, snapshots
    python benchmarks/figures.py --dry-run             # the commands, as they would run
    python benchmarks/figures.py --smoke               # every command with tiny settings, into a temporary folder
    python benchmarks/figures.py --only pettingzoo     # measure one figure again

``--smoke`` checks that every command still runs and writes every file it should (seconds per command, not
minutes; the numbers mean nothing); commands whose packages are missing are reported and skipped.

On a machine lent for a few minutes, without internet access or the git history (``benchmarks/offline.py``
prepares the wheels and the baselines' trees there):

    python benchmarks/figures.py --only sixteen-again --trees .offline/trees --budget 540 --archive figures.tgz

``--trees`` reads each ``--baseline REV`` of ``revision_ab.py`` from ``TREES/REV`` instead of git; ``--budget``
stops the command running when the seconds are up (the process group is ended) and starts no other, and
reports them; ``--archive`` packs the results into one ``.tar.gz``; ``--programs goals.py,trainers.py`` runs only
the commands of those programs (the others are left out, not reported).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import importlib.util
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOTS = ROOT / "benchmarks" / "snapshots"

#: The backends of the performance page's tables, in their order: the grid chart draws the same.
PERFORMANCE_BACKENDS = (
    "plain,vecenv-dummy,vecenv-subproc,vecenv-subproc-w1,vecenv-subproc-w4,vecenv-subproc-parent,"
    "vecenv-gym-async,sb3-dummy,sb3-subproc,gym-async,envpool,vecenv-envpool"
)
# the smallest settings of ``vecenv bench`` for --smoke (backends that need no optional package)
_BENCH_SMOKE = ("--quick", "-n", "1", "-b", "plain,vecenv-dummy,vecenv-subproc")


@dataclass(frozen=True)
class Step:
    """One command of a figure.

    :param argv: the command; ``{python}`` is this interpreter, ``{out}`` the output folder, ``{work}`` a
        temporary folder for files that are not kept, ``{date}`` the date of the run.
    :param stdout: where to write the command's standard output (a path with the same fields), or None.
    :param copies: files to copy once the command is done: ``(from, to)``, paths with the same fields.
    :param smoke: arguments appended for ``--smoke`` (later options override earlier ones in argparse).
    :param needs: modules the command needs (``--smoke`` skips it where one is missing).
    """

    argv: tuple[str, ...]
    stdout: str | None = None
    copies: tuple[tuple[str, str], ...] = ()
    smoke: tuple[str, ...] = ()
    needs: tuple[str, ...] = ()


@dataclass(frozen=True)
class Figure:
    """A figure of the docs, or several shown together.

    :param name: the name for ``--only``.
    :param sections: ``(page, heading)`` of every section that shows it (page from the repository root; the
        heading line as written, e.g. ``"## How fast"``).
    :param commits: the commits of vecenv its shown figures measured; each section names them.
    :param snapshots: the files under ``benchmarks/snapshots/`` the shown figures come from (none where the
        figures were only written into the docs).
    :param steps: the commands that measure it again.
    :param outputs: the files the steps write under ``{out}``, with ``{date}``: what ``--smoke`` checks.
    :param changes_since: ``(commit, what)``: changes to vecenv after the measurement that change what it
        measured; each section names their commits (the figures predate them).
    """

    name: str
    sections: tuple[tuple[str, str], ...]
    commits: tuple[str, ...]
    snapshots: tuple[str, ...]
    steps: tuple[Step, ...]
    outputs: tuple[str, ...]
    changes_since: tuple[tuple[str, str], ...] = field(default=())


_VECENV = ("{python}", "-m", "vecenv")
_WORKLOADS = ("cartpole", "image", "cpu")
_SLOTS = ("f8877b7", "observations handed over without a copy (observation slots)")
_STEP_REPLIES = ("a7e5770", "a full step's replies collected in one loop over one poll set")
_READ_REPLY = ("9ec0533", "each reply read with one read(2); no default infos under a reply's own")
_SPIN_ROOM = ("b16d6e1", "the workers go on spinning through a trainer's work where it has cores to spare beside them")

_CASES16 = "subproc-cartpole-1024,subproc-pong-64,subproc-image-128,subproc-cpu-128"
#: the layouts measured against the default one on 16 cores: name, (SubprocVecEnv keyword arguments, cases)
_LAYOUTS16 = (
    ("w15", ('{"n_workers": 15}', _CASES16)),
    ("block", ('{"wait_mode": "block"}', _CASES16)),
    ("w15-block", ('{"n_workers": 15, "wait_mode": "block"}', _CASES16)),
    ("w8", ('{"n_workers": 8}', "subproc-cartpole-1024,subproc-image-128")),
)

#: the profiles of docs/profiling.md: name, env id, envs, steps, further ``vecenv run`` options
_PROFILES: tuple[tuple[str, str, str, str, tuple[str, ...]], ...] = (
    ("cartpole", "CartPole-v1", "64", "200000", ()),
    ("image", "vecenv/Image84-v0", "16", "40000", ()),
    ("cpu", "vecenv/Cpu200us-v0", "16", "20000", ("--env-kwargs", '{"iterations": 2000}')),
    ("cartpole-dummy", "CartPole-v1", "64", "200000", ("--backend", "dummy")),
    ("cartpole-parent", "CartPole-v1", "64", "200000", ("--parent-envs", "32", "--n-workers", "1")),
    ("cartpole-16", "CartPole-v1", "16", "100000", ()),
    ("image-dummy", "vecenv/Image84-v0", "16", "40000", ("--backend", "dummy")),
    ("cpu-dummy", "vecenv/Cpu200us-v0", "16", "20000", ("--env-kwargs", '{"iterations": 2000}', "--backend", "dummy")),
)

FIGURES: tuple[Figure, ...] = (
    Figure(
        name="bench",
        sections=(
            ("docs/performance.md", "## The results"),
            ("docs/performance.md", "## Memory and start-up"),
            ("docs/index.md", "## How fast"),
            ("README.md", "## Performance"),
        ),
        commits=("f5a01c4",),
        snapshots=(
            *(f"2026-11-29-{w}.{ext}" for w in _WORKLOADS for ext in ("json", "md")),
            "2026-11-29.png",
            "2026-11-29-speedup.png",
        ),
        steps=(
            *(
                Step(
                    (*_VECENV, "bench", "-w", w, "-o", f"{{work}}/bench-{w}"),
                    copies=(
                        (f"{{work}}/bench-{w}/bench.json", f"{{out}}/{{date}}-{w}.json"),
                        (f"{{work}}/bench-{w}/bench.md", f"{{out}}/{{date}}-{w}.md"),
                    ),
                    smoke=_BENCH_SMOKE,
                )
                for w in _WORKLOADS
            ),
            Step(
                (
                    "{python}",
                    "benchmarks/charts.py",
                    *(f"{{out}}/{{date}}-{w}.json" for w in _WORKLOADS),
                    "--grid",
                    "{out}/{date}.png",
                    "--speedup",
                    "{out}/{date}-speedup.png",
                    "--num-envs",
                    "16",
                    "--backends",
                    PERFORMANCE_BACKENDS,
                ),
                smoke=("--num-envs", "1"),
                needs=("pandas", "matplotlib"),
            ),
        ),
        outputs=(
            *(f"{{date}}-{w}.{ext}" for w in _WORKLOADS for ext in ("json", "md")),
            "{date}.png",
            "{date}-speedup.png",
        ),
    ),
    Figure(
        name="scaling",
        sections=(("docs/performance.md", "## Scaling to more workers and cores"),),
        commits=("f5a01c4",),
        snapshots=tuple(f"2026-11-29-scaling-{w}.md" for w in ("cartpole", "cpu", "image")),
        steps=tuple(
            Step(
                (
                    "{python}",
                    "benchmarks/scaling.py",
                    "--workloads",
                    w,
                    "--seconds",
                    seconds,
                    *(("--capacity-rounds", "8") if w == "cpu" else ()),
                    "--wait-modes",
                    "block,spin",
                    "--output",
                    f"{{out}}/{{date}}-scaling-{w}.md",
                ),
                smoke=(
                    *("--workers", "1,2", "--contenders", "plain,vecenv", "--rounds", "1"),
                    *("--seconds", "0.02", "--capacity-rounds", "0"),
                ),
            )
            for w, seconds in (("cartpole", "0.2"), ("cpu", "0.3"), ("image", "0.2"))
        ),
        outputs=tuple(f"{{date}}-scaling-{w}.md" for w in ("cartpole", "cpu", "image")),
    ),
    Figure(
        name="pettingzoo",
        sections=(("docs/pettingzoo.md", "## How fast"),),
        commits=("42ee373",),
        snapshots=("2026-11-28-pettingzoo.md",),
        steps=(
            Step(
                (
                    "{python}",
                    "benchmarks/pettingzoo_bench.py",
                    "--rounds",
                    "15",
                    "--output",
                    "{out}/{date}-pettingzoo.md",
                ),
                smoke=("--num-envs", "2", "--rounds", "1", "--seconds", "0.05", "--warmup", "0.05"),
                needs=("pettingzoo", "mpe2", "supersuit"),
            ),
        ),
        outputs=("{date}-pettingzoo.md",),
    ),
    Figure(
        name="autotune-layouts",
        sections=(("docs/backends.md", '### Why the defaults are one worker per core and `"auto"`'),),
        commits=("7dbace1",),
        snapshots=(),
        steps=tuple(
            Step(
                (*_VECENV, "bench", "--autotune", env_id, "-n", n, "--budget", "40"),
                stdout=f"{{out}}/{{date}}-autotune-{name}.md",
                smoke=("-n", "2", "--budget", "5"),
            )
            for name, env_id, n in (
                ("cartpole", "CartPole-v1", "64"),
                ("image", "vecenv/Image84-v0", "16"),
                ("cpu", "vecenv/Cpu200us-v0", "16"),
            )
        ),
        outputs=tuple(f"{{date}}-autotune-{name}.md" for name in ("cartpole", "image", "cpu")),
    ),
    Figure(
        name="profiles",
        sections=(("docs/profiling.md", "## What each layout costs"),),
        commits=("f5a01c4",),
        snapshots=tuple(f"2026-11-29-profile-{name}.txt" for name, *_ in _PROFILES),
        steps=tuple(
            Step(
                (
                    *_VECENV,
                    "run",
                    env_id,
                    "--num-envs",
                    n,
                    "--backend",
                    "subproc",
                    "--steps",
                    steps,
                    *extra,
                    "--profile",
                ),
                stdout=f"{{out}}/{{date}}-profile-{name}.txt",
                smoke=("--steps", "200"),
            )
            for name, env_id, n, steps, extra in _PROFILES
        ),
        outputs=tuple(f"{{date}}-profile-{name}.txt" for name, *_ in _PROFILES),
    ),
    Figure(
        name="gymnasium-api",
        sections=(("docs/gymnasium-api.md", "## Performance"),),
        commits=("f5a01c4",),
        snapshots=("2026-11-29-gymnasium-api.json", "2026-11-29-gymnasium-api.md"),
        steps=(
            Step(
                (
                    *_VECENV,
                    "bench",
                    "-w",
                    "cartpole,image",
                    "-n",
                    "16",
                    "-b",
                    "gym-async,vecenv-gym-async",
                    "--repeats",
                    "3",
                    "-o",
                    "{work}/gymnasium-api",
                ),
                copies=(
                    ("{work}/gymnasium-api/bench.json", "{out}/{date}-gymnasium-api.json"),
                    ("{work}/gymnasium-api/bench.md", "{out}/{date}-gymnasium-api.md"),
                ),
                smoke=("--quick", "-n", "1"),
            ),
        ),
        outputs=("{date}-gymnasium-api.json", "{date}-gymnasium-api.md"),
    ),
    Figure(
        name="ray",
        sections=(("docs/ray.md", "## When it pays off: measured"),),
        commits=("afab44c",),
        snapshots=(),
        steps=(
            Step(
                ("{python}", "benchmarks/ray_layouts.py", "--output", "{out}/{date}-ray-local.md"),
                smoke=("--workloads", "cartpole", "--num-envs", "2", "--rounds", "1", "--seconds", "0.1"),
                needs=("ray",),
            ),
            Step(
                ("{python}", "benchmarks/ray_layouts.py", "--cluster", "--output", "{out}/{date}-ray-cluster.md"),
                smoke=("--workloads", "cartpole", "--num-envs", "2", "--rounds", "1", "--seconds", "0.1"),
                needs=("ray",),
            ),
        ),
        outputs=("{date}-ray-local.md", "{date}-ray-cluster.md"),
    ),
    Figure(
        name="envpool-adapter",
        sections=(("docs/adapters.md", "## EnvPool"),),
        commits=("19218ce",),
        snapshots=(),
        steps=(
            Step(
                ("{python}", "benchmarks/envpool_adapter.py", "--output", "{out}/{date}-envpool-adapter.md"),
                smoke=("--num-envs", "2", "--rounds", "1", "--seconds", "0.05"),
                needs=("envpool",),
            ),
        ),
        outputs=("{date}-envpool-adapter.md",),
    ),
    Figure(
        name="soak",
        sections=(("docs/reliability.md", "## Soak test"),),
        commits=("d3c3d70",),
        snapshots=("soak-2026-11-22.json",),
        steps=(
            Step(
                (
                    "{python}",
                    "benchmarks/soak.py",
                    "--env-steps",
                    "3000000",
                    "--crash-prob",
                    "1e-5",
                    "--output",
                    "{out}/soak-{date}.json",
                ),
                smoke=("--num-envs", "4", "--env-steps", "400", "--crash-prob", "0.01", "--sample-every", "20"),
            ),
        ),
        outputs=("soak-{date}.json",),
    ),
    Figure(
        name="scaling-16",
        sections=(("docs/performance.md", "### Measured on 16 cores"),),
        commits=("1df1f6c",),
        snapshots=(),
        steps=(
            Step(
                (
                    "{python}",
                    "benchmarks/scaling.py",
                    "--workers",
                    "16",
                    "--contenders",
                    "plain,vecenv,sb3,gym-async,envpool",
                    "--output",
                    "{out}/{date}-scaling-16.md",
                ),
                smoke=(
                    *("--workers", "1", "--contenders", "plain,vecenv", "--rounds", "1"),
                    *("--seconds", "0.02", "--capacity-rounds", "0", "--workloads", "cartpole"),
                ),
            ),
            Step(
                (
                    "{python}",
                    "benchmarks/revision_ab.py",
                    "--baseline",
                    "1df1f6c",
                    "--cases",
                    "subproc-cartpole-1024,subproc-image-128,subproc-cpu-128,subproc-pong-64",
                    "--output",
                    "{out}/{date}-ab-16.md",
                ),
                smoke=("--cases", "subproc-cartpole-64", "--rounds", "1", "--seconds", "0.05", "--warmup", "0.05"),
            ),
        ),
        outputs=("{date}-scaling-16.md", "{date}-ab-16.md"),
        changes_since=(_SLOTS,),
    ),
    Figure(
        name="slots",
        sections=(("docs/performance.md", "## Observations without a copy, measured"),),
        commits=("04af837", "7a59a73", "bee5adc"),
        snapshots=(
            "2026-11-28-ab-slots.md",
            "2026-11-28-scaling2-slots.md",
            "2026-11-28-goals-slots.md",
            "2026-11-28-goals-common-step.md",
        ),
        steps=(
            Step(
                (
                    "{python}",
                    "benchmarks/revision_ab.py",
                    "--baseline",
                    "7a59a73",
                    "--cases",
                    "dummy-cartpole-16,dummy-image-16,subproc-cartpole-64,subproc-image-16,subproc-cpu-16,subproc-pong-8",
                    "--rounds",
                    "10",
                    "--seconds",
                    "0.4",
                    "--output",
                    "{out}/{date}-ab-slots.md",
                ),
                smoke=("--cases", "dummy-cartpole-16", "--rounds", "1", "--seconds", "0.05", "--warmup", "0.05"),
            ),
            Step(
                (
                    "{python}",
                    "benchmarks/scaling.py",
                    "--workloads",
                    "cartpole,image,cpu",
                    "--workers",
                    "2",
                    "--contenders",
                    "plain,vecenv",
                    "--rounds",
                    "6",
                    "--seconds",
                    "0.4",
                    "--capacity-rounds",
                    "0",
                    "--output",
                    "{out}/{date}-scaling2-slots.md",
                ),
                smoke=("--rounds", "1", "--seconds", "0.02", "--workloads", "cartpole"),
            ),
            Step(
                ("{python}", "benchmarks/goals.py", "--rounds", "10", "--output", "{out}/{date}-goals-slots.md"),
                smoke=("--cases", "cartpole-64", "--rounds", "1", "--seconds", "0.02"),
            ),
            Step(
                ("{python}", "benchmarks/goals.py", "--rounds", "10", "--output", "{out}/{date}-goals-common-step.md"),
                smoke=("--cases", "cartpole-64", "--rounds", "1", "--seconds", "0.02"),
            ),
        ),
        outputs=(
            "{date}-ab-slots.md",
            "{date}-scaling2-slots.md",
            "{date}-goals-slots.md",
            "{date}-goals-common-step.md",
        ),
    ),
    Figure(
        name="autotune-trainer",
        sections=(("docs/performance.md", "## Which layout to choose"),),
        commits=("ab58cf6",),
        snapshots=("2026-11-29-autotune-cartpole8-trainer.txt", "2026-11-29-autotune-cartpole8.txt"),
        steps=(
            Step(
                (*_VECENV, "bench", "--autotune", "CartPole-v1", "-n", "8", "--trainer-us", "330", "--budget", "60"),
                stdout="{out}/{date}-autotune-cartpole8-trainer.txt",
                smoke=("--budget", "5"),
            ),
            Step(
                (*_VECENV, "bench", "--autotune", "CartPole-v1", "-n", "8", "--budget", "60"),
                stdout="{out}/{date}-autotune-cartpole8.txt",
                smoke=("--budget", "5"),
            ),
        ),
        outputs=("{date}-autotune-cartpole8-trainer.txt", "{date}-autotune-cartpole8.txt"),
    ),
    Figure(
        name="sixteen",
        sections=(("docs/performance.md", "### 16 cores, with the observation slots"),),
        commits=("8349a17", "fa4f4a1", "7a59a73"),
        snapshots=(
            "2026-11-28-ab16-slots.md",
            "2026-11-28-ab16-cpu.md",
            "2026-11-28-ab16-hint.md",
            "2026-11-28-scaling16-busy.md",
            "2026-11-28-goals16.md",
            "2026-11-28-goals16-capacity.md",
            "2026-11-28-pettingzoo16.md",
        ),
        steps=(
            Step(
                (
                    *("{python}", "benchmarks/revision_ab.py", "--baseline", "7a59a73", "--cases"),
                    "subproc-cartpole-1024,subproc-image-128,subproc-cpu-128,subproc-pong-64",
                    *("--rounds", "5", "--seconds", "0.3", "--output", "{out}/{date}-ab16-slots.md"),
                ),
                smoke=("--cases", "subproc-cartpole-64", "--rounds", "1", "--seconds", "0.05", "--warmup", "0.05"),
            ),
            Step(
                (
                    *("{python}", "benchmarks/revision_ab.py", "--baseline", "7a59a73", "--cases", "subproc-cpu-128"),
                    *("--rounds", "10", "--seconds", "0.3", "--output", "{out}/{date}-ab16-cpu.md"),
                ),
                smoke=("--cases", "subproc-cpu-16", "--rounds", "1", "--seconds", "0.05", "--warmup", "0.05"),
            ),
            Step(
                (
                    *("{python}", "benchmarks/revision_ab.py", "--baseline", "8349a17", "--cases"),
                    "subproc-cartpole-1024,subproc-image-128,subproc-pong-64",
                    *("--rounds", "6", "--seconds", "0.3", "--output", "{out}/{date}-ab16-hint.md"),
                ),
                smoke=("--cases", "subproc-cartpole-64", "--rounds", "1", "--seconds", "0.05", "--warmup", "0.05"),
            ),
            Step(
                (
                    *("{python}", "benchmarks/scaling.py", "--workloads", "cartpole,image", "--workers", "16"),
                    *("--contenders", "plain,vecenv", "--rounds", "2", "--seconds", "0.3", "--capacity-rounds", "0"),
                    *("--output", "{out}/{date}-scaling16-busy.md"),
                ),
                smoke=("--workers", "1", "--rounds", "1", "--seconds", "0.02", "--workloads", "cartpole"),
            ),
            Step(
                (
                    *("{python}", "benchmarks/goals.py", "--cases", "sixteen", "--rounds", "4", "--seconds", "0.4"),
                    *("--output", "{out}/{date}-goals16.md"),
                ),
                smoke=("--cases", "cartpole-64", "--rounds", "1", "--seconds", "0.02"),
            ),
            Step(
                (
                    *("{python}", "benchmarks/goals.py", "--cases", "sixteen", "--rounds", "4", "--seconds", "0.4"),
                    *("--workload-capacity", "--output", "{out}/{date}-goals16-capacity.md"),
                ),
                smoke=("--cases", "cartpole-64", "--rounds", "1", "--seconds", "0.02", "--capacity-procs", "2"),
            ),
            Step(
                (
                    *("{python}", "benchmarks/pettingzoo_bench.py", "-n", "64", "--contenders"),
                    *("plain,supersuit-16cpu,vecenv-subproc", "--baseline", "supersuit-16cpu"),
                    *("--rounds", "4", "--seconds", "0.4", "--output", "{out}/{date}-pettingzoo16.md"),
                ),
                smoke=("-n", "2", "--rounds", "1", "--seconds", "0.02", "--warmup", "0.02"),
                needs=("supersuit", "mpe2"),
            ),
        ),
        outputs=(
            "{date}-ab16-slots.md",
            "{date}-ab16-cpu.md",
            "{date}-ab16-hint.md",
            "{date}-scaling16-busy.md",
            "{date}-goals16.md",
            "{date}-goals16-capacity.md",
            "{date}-pettingzoo16.md",
        ),
        changes_since=(
            ("d98d581", "a reply's done envs read from the flags' bytes, not with ndarray.any()"),
            ("2956570", "PettingZoo: one prebuilt info per row, its two flags set only where they differ"),
            _STEP_REPLIES,
            _READ_REPLY,
        ),
    ),
    Figure(
        name="sixteen-again",
        sections=(("docs/performance.md", "### 16 cores, a third machine: the goals, the layouts, the trainers"),),
        commits=("051a853", "3aea034"),
        snapshots=(
            "2026-11-28-goals16-again.md",
            "2026-11-28-ab16-common-step.md",
            "2026-11-28-profile16-cartpole.txt",
            "2026-11-28-pettingzoo16-again.md",
            "2026-11-28-wakeups16.md",
            *(f"2026-11-28-layouts16-{name}.md" for name, _ in _LAYOUTS16),
            "2026-11-28-trainers16-layouts.md",
            "2026-11-28-trainers16-layouts.json",
        ),
        steps=(
            Step(
                (
                    *("{python}", "benchmarks/goals.py", "--cases", "sixteen", "--rounds", "4", "--seconds", "0.4"),
                    *("--output", "{out}/{date}-goals16-again.md"),
                ),
                smoke=("--cases", "cartpole-64", "--rounds", "1", "--seconds", "0.02"),
            ),
            Step(
                (
                    *("{python}", "benchmarks/revision_ab.py", "--baseline", "3aea034", "--cases"),
                    "subproc-cartpole-1024,subproc-pong-64,collect-pong-64,collect-cartpole-1024",
                    *("--rounds", "5", "--seconds", "0.3", "--warmup", "0.2"),
                    *("--output", "{out}/{date}-ab16-common-step.md"),
                ),
                smoke=("--cases", "collect-cartpole-1024", "--rounds", "1", "--seconds", "0.05", "--warmup", "0.05"),
            ),
            Step(
                (*_VECENV, "run", "CartPole-v1", "--num-envs", "1024", "--steps", "200000", "--profile"),
                stdout="{out}/{date}-profile16-cartpole.txt",
                smoke=("--num-envs", "16", "--steps", "200"),
            ),
            Step(
                (
                    *("{python}", "benchmarks/pettingzoo_bench.py", "-n", "64", "--contenders"),
                    *("plain,supersuit-16cpu,vecenv-subproc", "--baseline", "supersuit-16cpu", "--warmup", "0.3"),
                    *("--rounds", "4", "--seconds", "0.4", "--output", "{out}/{date}-pettingzoo16-again.md"),
                ),
                smoke=("-n", "2", "--rounds", "1", "--seconds", "0.02", "--warmup", "0.02"),
                needs=("supersuit", "mpe2"),
            ),
            Step(
                (
                    *("{python}", "benchmarks/wakeups.py", "--workers", "4,16", "--rounds", "10", "--wakes", "200"),
                    *("--output", "{out}/{date}-wakeups16.md"),
                ),
                smoke=("--workers", "2", "--rounds", "1", "--wakes", "5"),
            ),
            *(
                Step(
                    (
                        *("{python}", "benchmarks/revision_ab.py", "--baseline-tree", ".", "--cases", cases),
                        *("--candidate-kwargs", kwargs, "--rounds", "4", "--seconds", "0.3", "--warmup", "0.2"),
                        *("--output", f"{{out}}/{{date}}-layouts16-{name}.md"),
                    ),
                    smoke=("--cases", "subproc-image-16", "--rounds", "1", "--seconds", "0.05", "--warmup", "0.05"),
                )
                for name, (kwargs, cases) in _LAYOUTS16
            ),
            Step(
                (
                    *("{python}", "benchmarks/trainers.py", "--cases", "cartpole-8,cartpole-64", "--rounds", "4"),
                    *("--timesteps", "16384", "--vec-envs", "vecenv-dummy,vecenv-subproc", "--layouts"),
                    '{"w4": {"n_workers": 4}, "w8": {"n_workers": 8}, "spin": {"wait_mode": "spin"}, '
                    '"block": {"wait_mode": "block"}}',
                    *("--markdown", "{out}/{date}-trainers16-layouts.md"),
                    *("--json", "{out}/{date}-trainers16-layouts.json"),
                ),
                smoke=("--cases", "cartpole-8", "--rounds", "1", "--timesteps", "1024"),
                needs=("torch", "stable_baselines3"),
            ),
        ),
        outputs=(
            "{date}-goals16-again.md",
            "{date}-ab16-common-step.md",
            "{date}-profile16-cartpole.txt",
            "{date}-pettingzoo16-again.md",
            "{date}-wakeups16.md",
            *(f"{{date}}-layouts16-{name}.md" for name, _ in _LAYOUTS16),
            "{date}-trainers16-layouts.md",
            "{date}-trainers16-layouts.json",
        ),
        changes_since=(
            ("8d38932", "each worker's default infos built while the workers step, not after their replies"),
            _SPIN_ROOM,
        ),
    ),
    Figure(
        name="infos-while-stepping",
        sections=(("docs/performance.md", "### 16 cores, a third machine: the goals, the layouts, the trainers"),),
        commits=("8d38932", "346de13"),
        snapshots=("2026-11-28-ab-infos.md",),
        steps=(
            Step(
                (
                    *("{python}", "benchmarks/revision_ab.py", "--baseline", "346de13", "--cases"),
                    "collect-cartpole-1024,send-cartpole-1024,subproc-cartpole-64,subproc-cartpole-1024,"
                    "subproc-image-16,subproc-pong-8",
                    *("--rounds", "10", "--seconds", "0.4", "--output", "{out}/{date}-ab-infos.md"),
                ),
                smoke=("--cases", "collect-cartpole-1024", "--rounds", "1", "--seconds", "0.05", "--warmup", "0.05"),
            ),
        ),
        outputs=("{date}-ab-infos.md",),
    ),
    Figure(
        name="wrappers",
        sections=(("docs/performance.md", "### The wrappers, against SB3's"),),
        commits=("fb08ade",),
        snapshots=("2026-11-28-wrappers.md", "2026-11-28-wrappers.json"),
        steps=(
            Step(
                (
                    *("{python}", "benchmarks/wrappers.py", "--rounds", "11"),
                    *("--output", "{out}/{date}-wrappers.md", "--json", "{out}/{date}-wrappers.json"),
                ),
                smoke=("--rounds", "1", "--steps", "20", "--cases", "VecMonitor"),
                needs=("stable_baselines3",),
            ),
        ),
        outputs=("{date}-wrappers.md", "{date}-wrappers.json"),
    ),
    Figure(
        name="trainers-16",
        sections=(("docs/performance.md", "### On 16 cores, with the policy on a GPU"),),
        commits=("8349a17",),
        snapshots=(
            "2026-11-28-trainers16-pong.md",
            "2026-11-28-trainers16-pong.json",
            "2026-11-28-trainers16-cartpole.md",
            "2026-11-28-trainers16-cartpole.json",
        ),
        steps=(
            Step(
                (
                    *("{python}", "benchmarks/trainers.py", "--cases", "pong-16", "--device", "cuda"),
                    *("--rounds", "3", "--timesteps", "pong-16=8192", "--vec-envs", "sb3-subproc,vecenv-subproc"),
                    *("--markdown", "{out}/{date}-trainers16-pong.md", "--json", "{out}/{date}-trainers16-pong.json"),
                ),
                smoke=("--device", "cpu", "--rounds", "1", "--timesteps", "pong-16=2048"),
                needs=("torch", "stable_baselines3", "ale_py"),
            ),
            Step(
                (
                    *("{python}", "benchmarks/trainers.py", "--cases", "cartpole-8,cartpole-64", "--rounds", "2"),
                    *("--timesteps", "8192", "--vec-envs", "sb3-subproc,vecenv-dummy,vecenv-subproc"),
                    *("--markdown", "{out}/{date}-trainers16-cartpole.md"),
                    *("--json", "{out}/{date}-trainers16-cartpole.json"),
                ),
                smoke=("--cases", "cartpole-8", "--rounds", "1", "--timesteps", "1024"),
                needs=("torch", "stable_baselines3"),
            ),
        ),
        outputs=(
            "{date}-trainers16-pong.md",
            "{date}-trainers16-pong.json",
            "{date}-trainers16-cartpole.md",
            "{date}-trainers16-cartpole.json",
        ),
        changes_since=(_SPIN_ROOM,),
    ),
    Figure(
        name="trainers",
        sections=(("docs/performance.md", "## In a trainer"),),
        commits=("336a5c2", "f7558d4", "a1dee31"),
        snapshots=(
            "2026-11-29-trainers.md",
            "2026-11-29-trainers.json",
            "2026-11-28-trainers.md",
            "2026-11-28-trainers.json",
            "2026-11-28-trainers-dummy8.md",
            "2026-11-28-trainers-dummy8.json",
            "2026-11-28-trainers-pong8.md",
            "2026-11-28-trainers-pong8.json",
        ),
        steps=(
            Step(
                (
                    "{python}",
                    "benchmarks/trainers.py",
                    "--cases",
                    "cartpole-8,cartpole-64,cleanrl-8",
                    "--rounds",
                    "6",
                    "--timesteps",
                    "32768",
                    "--markdown",
                    "{out}/{date}-trainers.md",
                    "--json",
                    "{out}/{date}-trainers.json",
                ),
                smoke=("--cases", "cartpole-8", "--rounds", "1", "--timesteps", "1024"),
                needs=("torch", "stable_baselines3"),
            ),
            Step(
                (
                    *("{python}", "benchmarks/trainers.py", "--cases", "cartpole-8", "--vec-envs", "vecenv-dummy"),
                    *("--rounds", "16", "--timesteps", "8192", "--markdown", "{out}/{date}-trainers-dummy8.md"),
                    *("--json", "{out}/{date}-trainers-dummy8.json"),
                ),
                smoke=("--rounds", "1", "--timesteps", "1024"),
                needs=("torch", "stable_baselines3"),
            ),
            Step(
                (
                    *("{python}", "benchmarks/trainers.py", "--cases", "pong-8", "--rounds", "4"),
                    *("--markdown", "{out}/{date}-trainers-pong8.md", "--json", "{out}/{date}-trainers-pong8.json"),
                ),
                smoke=("--rounds", "1", "--timesteps", "1024"),
                needs=("torch", "stable_baselines3", "ale_py"),
            ),
        ),
        outputs=(
            "{date}-trainers.md",
            "{date}-trainers.json",
            "{date}-trainers-dummy8.md",
            "{date}-trainers-dummy8.json",
            "{date}-trainers-pong8.md",
            "{date}-trainers-pong8.json",
        ),
    ),
)


def figure_named(name: str) -> Figure:
    """The figure called ``name``.

    :raises KeyError: naming the figures there are.
    """
    for figure in FIGURES:
        if figure.name == name:
            return figure
    raise KeyError(f"no figure named {name!r}; the figures: {', '.join(f.name for f in FIGURES)}")


def expand(text: str, fields: dict[str, str]) -> str:
    """``text`` with its ``{python}``, ``{out}``, ``{work}`` and ``{date}`` fields filled in (other braces, as
    in a JSON argument, are left alone)."""
    for name, value in fields.items():
        text = text.replace(f"{{{name}}}", value)
    return text


def commands(figure: Figure, fields: dict[str, str], smoke: bool = False) -> list[list[str]]:
    """The argv of each step of ``figure``, filled in (with the smoke arguments where ``smoke``)."""
    return [[expand(a, fields) for a in (*step.argv, *(step.smoke if smoke else ()))] for step in figure.steps]


def _compares_revisions(argv: Sequence[str]) -> bool:
    """Whether ``argv`` runs ``revision_ab.py``, whose ``--baseline`` is a git revision (other scripts' name a
    contender)."""
    return len(argv) > 1 and os.path.basename(argv[1]) == "revision_ab.py"


def baselines(figure: Figure) -> list[str]:
    """The git revisions that ``figure``'s ``revision_ab.py`` runs compare against (each ``--baseline REV``)."""
    return [
        step.argv[i + 1]
        for step in figure.steps
        if _compares_revisions(step.argv)
        for i, arg in enumerate(step.argv[:-1])
        if arg == "--baseline"
    ]


def with_trees(argv: Sequence[str], trees: str | None) -> list[str]:
    """``argv`` with each ``--baseline REV`` of a ``revision_ab.py`` run turned into ``--baseline-tree
    TREES/REV`` (the baseline's ``vecenv/`` read there instead of from git); unchanged where ``trees`` is None."""
    out = list(argv)
    if trees is not None and _compares_revisions(out):
        for i in range(len(out) - 1):
            if out[i] == "--baseline":
                out[i], out[i + 1] = "--baseline-tree", os.path.join(trees, out[i + 1])
    return out


def _missing(step: Step) -> list[str]:
    return [module for module in step.needs if importlib.util.find_spec(module) is None]


#: the least time left in ``--budget`` for a command to be started (seconds)
MIN_STEP_SECONDS = 10.0


def _end_group(process: subprocess.Popen[bytes]) -> None:
    """End ``process`` and its process group: SIGTERM, up to 5 s for the command to exit, then SIGKILL to
    whatever of the group is left."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(5.0)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def _run_step(argv: list[str], env: dict[str, str], stdout: str | None, deadline: float | None) -> int | None:
    """Run one command in a process group of its own; its exit status, or None when ``deadline`` (a
    ``time.monotonic()`` value) came first. The group (the command's worker processes too) is ended at the
    deadline, or when this process is interrupted."""
    sink = open(stdout, "w", encoding="utf-8") if stdout else None  # noqa: SIM115 (closed below)
    try:
        process = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=sink, start_new_session=True)
        try:
            return process.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _end_group(process)
            return None
        except BaseException:
            _end_group(process)
            raise
    finally:
        if sink is not None:
            sink.close()


def program(step: Step) -> str:
    """The program a step runs: a script's file name (``goals.py``), or ``vecenv`` for ``python -m vecenv``."""
    if step.argv[1:3] == ("-m", "vecenv"):
        return "vecenv"
    return os.path.basename(step.argv[1]) if len(step.argv) > 1 else step.argv[0]


def _chosen(step: Step, programs: Sequence[str] | None) -> bool:
    """Whether ``step`` runs one of ``programs`` (None: every program)."""
    return programs is None or program(step) in programs


def step_outputs(figure: Figure, step: Step) -> list[str]:
    """The outputs of ``figure`` that ``step`` writes: those its command, standard output or copies name."""
    named = [*step.argv, step.stdout or "", *(target for _, target in step.copies)]
    return [output for output in figure.outputs if any(output in text for text in named)]


def run_figure(
    figure: Figure,
    fields: dict[str, str],
    smoke: bool = False,
    trees: str | None = None,
    deadline: float | None = None,
    programs: Sequence[str] | None = None,
) -> list[str]:
    """Run the steps of ``figure``; return what went wrong (a failed command, a file not written).

    A step whose modules are missing is skipped with a note under ``smoke`` and is an error otherwise. Each
    command that ran must write its outputs (:func:`step_outputs`).

    :param trees: a folder with each baseline revision's tree (see :func:`with_trees`), or None to use git.
    :param deadline: ``time.monotonic()`` by which every command must be done (None: no limit); a command still
        running then is ended, and none is started with less than :data:`MIN_STEP_SECONDS` left.
    :param programs: run only the steps of these programs (:func:`program`); None: every step.
    """
    problems: list[str] = []
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    for step, filled in zip(figure.steps, commands(figure, fields, smoke), strict=True):
        if not _chosen(step, programs):
            continue
        argv = with_trees(filled, trees)
        missing = _missing(step)
        if missing:
            problems.append(f"{figure.name}: skipped {' '.join(argv[1:3])}: {', '.join(missing)} not installed")
            continue
        if deadline is not None and deadline - time.monotonic() < MIN_STEP_SECONDS:
            problems.append(f"{figure.name}: not run, out of the budget: {shlex.join(argv)}")
            continue
        print("$", shlex.join(argv), flush=True)
        status = _run_step(argv, env, expand(step.stdout, fields) if step.stdout else None, deadline)
        if status is None:
            problems.append(f"{figure.name}: ended at the end of the budget: {shlex.join(argv)}")
            continue
        if status not in (0, 1):  # vecenv bench exits 1 when a case failed: its table says which
            problems.append(f"{figure.name}: {shlex.join(argv)} exited with status {status}")
            continue
        for source, target in step.copies:
            shutil.copyfile(expand(source, fields), expand(target, fields))
        for output in step_outputs(figure, step):
            path = Path(fields["out"]) / expand(output, fields)
            if not path.is_file():
                problems.append(f"{figure.name}: {path} was not written")
    return problems


def write_archive(folder: str, archive: str, problems: Sequence[str]) -> None:
    """Pack ``folder``'s files into the ``.tar.gz`` ``archive`` (written atomically), with ``problems.txt``:
    one line per problem (empty when every command ran)."""
    with open(os.path.join(folder, "problems.txt"), "w", encoding="utf-8") as f:
        f.writelines(f"{problem}\n" for problem in problems)
    partial = f"{archive}.partial"
    with tarfile.open(partial, "w:gz") as tar:
        for name in sorted(os.listdir(folder)):
            tar.add(os.path.join(folder, name), arcname=name)
    os.replace(partial, archive)


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` and list, print or run the figures' commands; return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", metavar="NAME,...", help="these figures only (default: all)")
    parser.add_argument("--date", default=dt.date.today().isoformat(), help="prefix of the files (default: today)")
    parser.add_argument("--out", default=str(SNAPSHOTS), help="where the results go (default: %(default)s)")
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--list", action="store_true", help="list the figures and where they are shown")
    what.add_argument("--dry-run", action="store_true", help="print the commands instead of running them")
    what.add_argument("--smoke", action="store_true", help="run every command with tiny settings (a check)")
    parser.add_argument("--trees", help="each --baseline REV's vecenv/ from TREES/REV, not git (offline.py makes them)")
    parser.add_argument(
        "--budget", type=float, metavar="SECONDS", help="end the command running when the seconds are up, start none"
    )
    parser.add_argument("--archive", help="also pack the results (and problems.txt) into this .tar.gz")
    parser.add_argument(
        "--programs",
        metavar="NAME,...",
        help="only the commands of these programs: script names (goals.py, trainers.py, ...) or vecenv",
    )
    args = parser.parse_args(argv)
    if args.budget is not None and args.budget <= 0:
        parser.error(f"--budget must be a positive number of seconds, got {args.budget}")
    programs = None if args.programs is None else [name.strip() for name in args.programs.split(",") if name.strip()]
    try:
        chosen = [figure_named(n.strip()) for n in args.only.split(",") if n.strip()] or list(FIGURES)
    except KeyError as error:
        parser.error(str(error.args[0]))
    if args.list:
        for figure in chosen:
            shown = "; ".join(f"{page} {heading!r}" for page, heading in figure.sections)
            print(f"{figure.name}: vecenv at {', '.join(figure.commits)}; shown in {shown}")
            print(f"    snapshots: {', '.join(figure.snapshots) or '(none: the figures are in the page)'}")
            for commit, change in figure.changes_since:
                print(f"    measured before {commit}: {change}")
        return 0
    with tempfile.TemporaryDirectory(prefix="vecenv-figures-") as work:
        out = os.path.join(work, "out") if args.smoke else args.out
        os.makedirs(out, exist_ok=True)
        fields = {"python": sys.executable, "out": out, "work": work, "date": args.date}
        if args.dry_run:
            fields["work"] = "$WORK"
            print("# WORK: a temporary folder")
            for figure in chosen:
                print(f"# {figure.name}")
                for step, argv_ in zip(figure.steps, commands(figure, fields), strict=True):
                    if not _chosen(step, programs):
                        continue
                    redirect = f" > {expand(step.stdout, fields)}" if step.stdout else ""
                    print(shlex.join(with_trees(argv_, args.trees)) + redirect)
                    for source, target in step.copies:
                        print(f"cp {expand(source, fields)} {expand(target, fields)}")
            return 0
        status = 0
        deadline = None if args.budget is None else time.monotonic() + args.budget
        problems: list[str] = []
        for figure in chosen:
            found = run_figure(figure, fields, args.smoke, args.trees, deadline, programs)
            for problem in found:
                print(problem, file=sys.stderr)
                problems.append(problem)
                if not (args.smoke and ": skipped " in problem):
                    status = 1
        if args.archive:
            write_archive(out, args.archive, problems)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
