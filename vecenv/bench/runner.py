"""The benchmark loop of ``vecenv bench``: which cases to run, running them, and the run's outcome.

A *case* is one (workload, number of envs, backend). :func:`run_case` (:mod:`vecenv.bench.case`) measures
one case in the calling process; :func:`run_benchmark` runs every case, by default each in a fresh Python
process (``python -m vecenv.bench.runner``, :mod:`vecenv.bench.isolated`) so that start-up time, memory
and throughput do not depend on the cases run before it (imports, a running forkserver, garbage), and a
backend that crashes or hangs costs one case, not the run. The backends are in
:mod:`vecenv.bench.backends` and :mod:`vecenv.bench.adapters`; this module also re-exports their names.

How a case is measured:

1. *Start-up*: the backend is built (envs created, worker processes started) and reset; the wall time of
   both is the start-up time. Imports of the backend's library by this process are done before and not
   counted; imports in worker processes are counted.
2. *Warm-up*: vector steps in doubling chunks until ``warmup_seconds`` have passed; the last chunk's rate
   sets the number of vector steps per repeat, so that a repeat lasts about ``seconds``.
3. *Repeats*: ``repeats`` timed loops of that many vector steps. Actions are sampled before (a pool of
   batches, cycled), so the timed loop only steps. The result is the median env-steps/s over repeats
   (an env-step is one step of one env: ``num_envs`` per vector step).
4. *Memory*: the RSS of this process and all its descendants is sampled in a background thread during
   start-up and warm-up, and at checkpoints between repeats (the sampler is paused while timing); the
   peak of the sum is reported, and the PSS of the tree after the last repeat.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from vecenv import vec_env
from vecenv.bench.adapters import BenchBackend, EnvFn, GymVectorAdapter, PlainLoop, VecEnvAdapter
from vecenv.bench.backends import (
    BACKENDS,
    DEFAULT_BACKENDS,
    DEFAULT_N_WORKERS,
    SB3_COLD_WORKER_MIB,
    BackendSpec,
    backend_spec,
    default_backend_names,
    parent_share,
)
from vecenv.bench.case import ACTION_POOL, Case, run_case, time_steps, warm_up
from vecenv.bench.isolated import case_main, run_case_isolated
from vecenv.bench.machine import load_average, machine_info, mem_available_mib
from vecenv.bench.workloads import WORKLOADS, calibrate_cpu_iterations
from vecenv.optional import SB3_INSTALL_HINT

# with the names this module defines, those of the modules it was split into, which callers import from here
__all__ = [
    "ACTION_POOL",
    "BACKENDS",
    "DEFAULT_BACKENDS",
    "DEFAULT_N_WORKERS",
    "SB3_COLD_WORKER_MIB",
    "SB3_INSTALL_HINT",
    "BackendSpec",
    "BenchBackend",
    "BenchConfig",
    "BenchRun",
    "Case",
    "EnvFn",
    "GymVectorAdapter",
    "PlainLoop",
    "VecEnvAdapter",
    "backend_spec",
    "case_main",
    "default_backend_names",
    "iter_results",
    "parent_share",
    "plan_cases",
    "run_benchmark",
    "run_case",
    "run_case_isolated",
    "time_steps",
    "warm_up",
]


@dataclass
class BenchConfig:
    """Settings of a benchmark run (see ``vecenv bench --help``)."""

    workloads: list[str] = field(default_factory=lambda: list(WORKLOADS))
    num_envs: list[int] = field(default_factory=lambda: [1, 4, 16, 64])
    #: Backend names; None: every available one.
    backends: list[str] | None = None
    n_workers: list[int] = field(default_factory=lambda: list(DEFAULT_N_WORKERS))
    repeats: int = 5
    seconds: float = 0.5
    warmup_seconds: float = 0.2
    cpu_us: float = 200.0
    isolate: bool = True
    preload: bool = True
    case_timeout: float = 300.0
    seed: int = 0


@dataclass
class BenchRun:
    """The outcome of :func:`run_benchmark`: result records, machine description, settings and notes."""

    records: list[dict[str, Any]]
    machine: dict[str, Any]
    settings: dict[str, Any]
    notes: list[str]
    wall_s: float


def plan_cases(config: BenchConfig, cpu_iterations: int | None) -> tuple[list[Case], list[str]]:
    """The cases to run for ``config`` and notes on the backends and cases left out.

    A ``vecenv-subproc-w<K>`` variant is left out (unless named in ``config.backends``) where ``K > N``, and where
    it is the default layout, ``min(N, cores)`` with ``cores`` the default ``n_workers`` of ``SubprocVecEnv``
    (:func:`vecenv.vec_env.default_n_workers`: the cores this process may run on).

    :raises KeyError: for an unknown backend name.
    """
    explicit = config.backends is not None
    names = list(config.backends) if config.backends is not None else default_backend_names(config.n_workers)
    specs = [backend_spec(name) for name in names]
    notes: list[str] = []
    available = []
    for spec in specs:
        reason = spec.unavailable_reason()
        if reason is None:
            available.append(spec)
        else:
            notes.append(f"{spec.name} skipped: {reason}")
    cores = vec_env.default_n_workers()  # SubprocVecEnv's default n_workers: the usable cores (CPU affinity)
    mem_mib = mem_available_mib()
    cases: list[Case] = []
    for workload in config.workloads:
        for n in config.num_envs:
            for spec in available:
                if spec.workloads is not None and workload not in spec.workloads:
                    continue  # e.g. EnvPool: only its own envs
                k = spec.n_workers
                if k is not None and not explicit and (k > n or k == min(cores, n)):
                    continue  # the same layout as another variant or as the default
                if spec.name == "vecenv-subproc-parent" and parent_share(n) == 0:
                    continue  # no share for this process: the default layout
                if (
                    spec.name == "sb3-subproc"
                    and not config.preload
                    and mem_mib is not None
                    and n * SB3_COLD_WORKER_MIB > mem_mib / 2
                ):
                    notes.append(
                        f"sb3-subproc skipped for {workload} N={n}: without --preload each of its workers imports "
                        f"torch (~{SB3_COLD_WORKER_MIB} MiB each), more than half of the {mem_mib:.0f} MiB available"
                    )
                    continue
                cases.append(
                    Case(
                        workload=workload,
                        num_envs=n,
                        backend=spec.name,
                        repeats=config.repeats,
                        seconds=config.seconds,
                        warmup_seconds=config.warmup_seconds,
                        cpu_iterations=cpu_iterations if workload == "cpu" else None,
                        seed=config.seed,
                        preload=config.preload,
                    )
                )
    for spec in available:
        if spec.workloads is not None and set(config.workloads) - set(spec.workloads):
            notes.append(f"{spec.name} runs only the {', '.join(spec.workloads)} workload(s)")
    if any(spec.name == "vecenv-subproc-parent" for spec in available):
        notes.append("vecenv-subproc-parent runs only where N >= the number of cores (else this process gets no env)")
    variants = [spec.name for spec in available if spec.n_workers is not None]
    if variants and not explicit:
        notes.append(
            f"{', '.join(variants)} (n_workers=K) run only where K <= N and K differs from the default "
            f"layout (min(N, cores), {cores} usable cores here)"
        )
    return cases, notes


def _case_label(case: Case) -> str:
    return f"{case.workload} N={case.num_envs} {case.backend}"


def iter_results(
    cases: Sequence[Case], config: BenchConfig, progress: bool = True
) -> Iterator[tuple[Case, dict[str, Any]]]:
    """Run ``cases`` one after the other with a progress bar on stderr, yielding each record."""
    from tqdm import tqdm

    bar = tqdm(
        total=len(cases),
        unit="case",
        disable=not progress or sys.stderr is None or None,
        file=sys.stderr,
        dynamic_ncols=True,
    )
    log_lines = progress and bar.disable and sys.stderr is not None  # no terminal: one line per case instead
    try:
        for i, case in enumerate(cases):
            bar.set_description_str(_case_label(case))
            record = run_case_isolated(case, config.case_timeout) if config.isolate else run_case(case)
            record.pop("traceback", None)
            if record["status"] == "ok":
                outcome = f"{record['env_steps_per_s']:,.0f} steps/s"
            else:
                outcome = f"ERROR {record['error']}"
            if log_lines:
                print(f"[{i + 1}/{len(cases)}] {_case_label(case)}: {outcome}", file=sys.stderr, flush=True)
            bar.set_postfix_str(outcome[:60])
            bar.update(1)
            yield case, record
    finally:
        bar.close()


def run_benchmark(config: BenchConfig, progress: bool = True) -> BenchRun:
    """Run every case of ``config`` (see :func:`plan_cases`) and collect the records.

    :param config: the settings.
    :param progress: show a progress bar (or, without a terminal, one line per case) on stderr.
    :raises KeyError: for an unknown workload or backend name.
    """
    for workload in config.workloads:
        if workload not in WORKLOADS:
            raise KeyError(workload)
    start = time.perf_counter()
    cpu_iterations = None
    if "cpu" in config.workloads:
        cpu_iterations = calibrate_cpu_iterations(config.cpu_us)
    cases, notes = plan_cases(config, cpu_iterations)
    machine = machine_info()
    settings = asdict(config)
    settings["cpu_iterations"] = cpu_iterations
    records = [record for _, record in iter_results(cases, config, progress)]
    machine["load_average_end"] = load_average()
    return BenchRun(records, machine, settings, notes, time.perf_counter() - start)


if __name__ == "__main__":
    sys.exit(case_main())
