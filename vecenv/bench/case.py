"""One case of ``vecenv bench`` measured in this process: start-up, warm-up, timed repeats and memory.

A *case* is one (workload, number of envs, backend); see :mod:`vecenv.bench.runner` for how it is
measured and :mod:`vecenv.bench.isolated` for running it in a fresh process.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import math
import multiprocessing as mp
import statistics
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from vecenv.bench.adapters import BenchBackend
from vecenv.bench.backends import backend_spec
from vecenv.bench.machine import load_1m
from vecenv.bench.memory import PeakRssSampler, process_tree, tree_pss_kib
from vecenv.bench.workloads import WORKLOADS

__all__ = ["ACTION_POOL", "Case", "case_fields", "run_case", "time_steps", "warm_up"]

#: Action batches sampled before timing; the timed loop cycles through them.
ACTION_POOL = 32


def time_steps(backend: BenchBackend, pool: Sequence[Any], iterations: int, trainer_s: float = 0.0) -> float:
    """Wall time of ``iterations`` vector steps, cycling through the prepared action batches ``pool``.

    :param trainer_s: seconds of a trainer's work after each step: a busy loop on the clock, which keeps this
        process's core busy as a single-threaded policy and update do (0: none).
    """
    step = backend.step
    size = len(pool)
    clock = time.perf_counter
    start = clock()
    if trainer_s <= 0.0:
        for i in range(iterations):
            step(pool[i % size])
    else:
        for i in range(iterations):
            step(pool[i % size])
            until = clock() + trainer_s
            while clock() < until:
                pass
    return clock() - start


def warm_up(backend: BenchBackend, pool: Sequence[Any], seconds: float, trainer_s: float = 0.0) -> tuple[int, float]:
    """Step in doubling chunks until ``seconds`` have passed (at least two chunks); ``trainer_s`` as
    :func:`time_steps`.

    :return: ``(iterations, wall time)`` of the last chunk: the best estimate of the steady rate.
    """
    chunk, total, rounds = 1, 0.0, 0
    last = (1, 0.0)
    while total < seconds or rounds < 2:
        elapsed = time_steps(backend, pool, chunk, trainer_s)
        last = (chunk, elapsed)
        total += elapsed
        rounds += 1
        chunk *= 2
    return last


@dataclass(frozen=True)
class Case:
    """One measurement: a workload, a number of envs and a backend, with the timing settings."""

    workload: str
    num_envs: int
    backend: str
    repeats: int = 5
    seconds: float = 0.5
    warmup_seconds: float = 0.2
    cpu_iterations: int | None = None
    seed: int = 0
    preload: bool = True


def case_fields(case: Case) -> dict[str, Any]:
    """The fields that open every record of ``case``: the case and its backend's library and layout."""
    spec = backend_spec(case.backend)
    return {
        "workload": case.workload,
        "num_envs": case.num_envs,
        "backend": case.backend,
        "library": spec.library,
        "in_process": spec.in_process,
        "n_workers": spec.n_workers,
    }


def _set_forkserver_preload(modules: Sequence[str]) -> None:
    if "forkserver" in mp.get_all_start_methods():
        mp.set_forkserver_preload(list(modules))


def _mib(kib: int | None) -> float | None:
    return None if kib is None else round(kib / 1024, 1)


def run_case(case: Case) -> dict[str, Any]:
    """Measure one case in this process.

    :return: a JSON-able record: the case, ``status`` (``"ok"`` or ``"error"`` with ``error``), and the
        measurements (``env_steps_per_s`` median and min / max over repeats, ``rates``, ``startup_s``,
        ``close_s``, ``peak_rss_mib``, ``pss_mib``, ``processes``, ``steps_per_repeat``).
    """
    spec = backend_spec(case.backend)
    record: dict[str, Any] = {**case_fields(case), "status": "ok", "error": None, "load_avg_1m": load_1m()}
    wall_start = time.perf_counter()
    backend: BenchBackend | None = None
    with PeakRssSampler() as sampler:
        try:
            for module in spec.imports:
                importlib.import_module(module)
            _set_forkserver_preload(spec.preload if case.preload else ())
            env_fn = WORKLOADS[case.workload].factory(case.cpu_iterations)
            env_fns = [env_fn] * case.num_envs
            gc.collect()
            start = time.perf_counter()
            backend = spec.build(env_fns, case.seed, spec.n_workers)
            backend.reset()
            record["startup_s"] = time.perf_counter() - start
            sampler.sample()

            batch_space = gym.vector.utils.batch_space(backend.action_space, case.num_envs)
            batch_space.seed(case.seed)
            pool = [backend.prepare(batch_space.sample()) for _ in range(ACTION_POOL)]
            chunk, elapsed = warm_up(backend, pool, case.warmup_seconds)
            iterations = max(1, math.ceil(case.seconds * chunk / max(elapsed, 1e-9)))
            sampler.sample()
            sampler.pause()
            rates = []
            for _ in range(case.repeats):
                gc.collect()
                elapsed = time_steps(backend, pool, iterations)
                rates.append(iterations * case.num_envs / elapsed)
                sampler.sample()
            record.update(
                steps_per_repeat=iterations,
                repeats=case.repeats,
                rates=rates,
                env_steps_per_s=statistics.median(rates),
                env_steps_per_s_min=min(rates),
                env_steps_per_s_max=max(rates),
            )
            record["pss_mib"] = _mib(tree_pss_kib())
            record["processes"] = _count_processes()
            close_start = time.perf_counter()
            to_close = backend
            backend = None
            to_close.close()
            record["close_s"] = time.perf_counter() - close_start
        except Exception as exc:
            record["status"] = "error"
            record["error"] = f"{type(exc).__name__}: {exc}".strip().splitlines()[0][:300]
            record["traceback"] = traceback.format_exc()
        finally:
            if backend is not None:
                with contextlib.suppress(Exception):
                    backend.close()
        record["peak_rss_mib"] = _mib(sampler.peak_kib)
    record["wall_s"] = time.perf_counter() - wall_start
    return record


def _count_processes() -> int | None:
    tree = process_tree()
    return None if tree is None else len(tree)
