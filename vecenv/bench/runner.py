"""Backends, timing and the benchmark loop of ``vecenv bench``.

A *case* is one (workload, number of envs, backend). :func:`run_case` measures one case in the calling
process; :func:`run_benchmark` runs every case, by default each in a fresh Python process
(``python -m vecenv.bench.runner``) so that start-up time, memory and throughput do not depend on the
cases run before it (imports, a running forkserver, garbage), and a backend that crashes or hangs costs
one case, not the run.

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

import argparse
import contextlib
import gc
import importlib
import importlib.util
import inspect
import json
import math
import multiprocessing as mp
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import gymnasium as gym
import numpy as np

from vecenv.bench.memory import PeakRssSampler, tree_pss_kib
from vecenv.bench.workloads import WORKLOADS

__all__ = [
    "BACKENDS",
    "DEFAULT_BACKENDS",
    "BackendSpec",
    "BenchBackend",
    "BenchConfig",
    "BenchRun",
    "Case",
    "GymVectorAdapter",
    "PlainLoop",
    "VecEnvAdapter",
    "backend_spec",
    "run_benchmark",
    "run_case",
    "time_steps",
]

EnvFn = Callable[[], gym.Env]
#: Action batches sampled before timing; the timed loop cycles through them.
ACTION_POOL = 32
#: Estimated memory of one Stable-Baselines3 worker that imports torch itself (used with ``preload=False``).
SB3_COLD_WORKER_MIB = 350
SB3_INSTALL_HINT = "pip install torch==2.13.0 && pip install stable-baselines3 (torch first: its CPU build)"


# --- backends ---------------------------------------------------------------------------------------


class BenchBackend(Protocol):
    """What the timing loop needs from a backend: every backend is wrapped to this interface."""

    #: The action space of one env.
    action_space: gym.Space

    def reset(self) -> None:
        """Reset every env (seeded)."""

    def prepare(self, actions: np.ndarray) -> Any:
        """Turn a batch of actions ``(num_envs, ...)`` into what :meth:`step` takes (done before timing)."""

    def step(self, actions: Any) -> None:
        """Step every env once; finished envs are reset (by the backend or by this call)."""

    def close(self) -> None:
        """Release the envs and any worker processes."""


class PlainLoop:
    """The baseline: a list of envs stepped in a plain Python loop, no vector env at all.

    :param env_fns: env factories, called here.
    :param seed: env ``i`` is reset with ``seed + i`` by :meth:`reset`.
    """

    def __init__(self, env_fns: Sequence[EnvFn], seed: int = 0) -> None:
        self.envs = [env_fn() for env_fn in env_fns]
        self.action_space = self.envs[0].action_space
        self.seed = seed

    def reset(self) -> None:
        """Reset env ``i`` with seed ``seed + i``."""
        for i, env in enumerate(self.envs):
            env.reset(seed=self.seed + i)

    def prepare(self, actions: np.ndarray) -> list[Any]:
        """One action per env, as the elements of the batch (the same objects a vector env passes on)."""
        return list(actions)

    def step(self, actions: Sequence[Any]) -> None:
        """``obs, r, term, trunc, info = env.step(a)`` for every env; reset it when its episode ends."""
        for env, action in zip(self.envs, actions, strict=False):
            _obs, _reward, terminated, truncated, _info = env.step(action)
            if terminated or truncated:
                env.reset()

    def close(self) -> None:
        """Close every env."""
        for env in self.envs:
            env.close()


class VecEnvAdapter:
    """A vecenv or Stable-Baselines3 ``VecEnv`` (``obs = reset()``, ``obs, r, done, info = step(a)``).

    :param venv: the vector env.
    :param seed: passed to ``venv.seed`` before the reset (env ``i`` gets ``seed + i``).
    """

    def __init__(self, venv: Any, seed: int = 0) -> None:
        self.venv = venv
        self.action_space = venv.action_space
        self.seed = seed

    def reset(self) -> None:
        """Seed, then reset."""
        self.venv.seed(self.seed)
        self.venv.reset()

    def prepare(self, actions: np.ndarray) -> np.ndarray:
        """The batch as is."""
        return actions

    def step(self, actions: np.ndarray) -> None:
        """One vector step (envs reset themselves)."""
        self.venv.step(actions)

    def close(self) -> None:
        """Close the vector env."""
        self.venv.close()


class GymVectorAdapter:
    """A Gymnasium ``VectorEnv`` (``obs, info = reset(seed=)``, 5-tuple ``step``, its own autoreset mode).

    :param venv: the vector env.
    :param seed: ``reset(seed=seed)`` seeds env ``i`` with ``seed + i``.
    """

    def __init__(self, venv: Any, seed: int = 0) -> None:
        self.venv = venv
        self.action_space = venv.single_action_space
        self.seed = seed

    def reset(self) -> None:
        """Reset every env."""
        self.venv.reset(seed=self.seed)

    def prepare(self, actions: np.ndarray) -> np.ndarray:
        """The batch as is."""
        return actions

    def step(self, actions: np.ndarray) -> None:
        """One vector step (Gymnasium's default next-step autoreset)."""
        self.venv.step(actions)

    def close(self) -> None:
        """Close the vector env."""
        self.venv.close()


def _build_plain(env_fns: Sequence[EnvFn], seed: int, n_workers: int | None) -> BenchBackend:
    return PlainLoop(env_fns, seed)


def _build_vecenv_dummy(env_fns: Sequence[EnvFn], seed: int, n_workers: int | None) -> BenchBackend:
    from vecenv import DummyVecEnv

    return VecEnvAdapter(DummyVecEnv(list(env_fns)), seed)


def _build_vecenv_subproc(env_fns: Sequence[EnvFn], seed: int, n_workers: int | None) -> BenchBackend:
    from vecenv import SubprocVecEnv

    kwargs: dict[str, Any] = {} if n_workers is None else {"n_workers": n_workers}
    return VecEnvAdapter(SubprocVecEnv(list(env_fns), **kwargs), seed)


def parent_share(num_envs: int) -> int:
    """``parent_envs`` of the ``vecenv-subproc-parent`` backend: an equal share per core (the calling process
    takes one core, the default ``n_workers`` the others); 0 below 2 cores or when ``num_envs`` is below the
    number of cores (the backend is then not run)."""
    from vecenv.vec_env import default_n_workers

    cores = default_n_workers()
    return num_envs // cores if cores > 1 else 0


def _build_vecenv_subproc_parent(env_fns: Sequence[EnvFn], seed: int, n_workers: int | None) -> BenchBackend:
    from vecenv import SubprocVecEnv

    return VecEnvAdapter(SubprocVecEnv(list(env_fns), parent_envs=parent_share(len(env_fns))), seed)


def _build_sb3_dummy(env_fns: Sequence[EnvFn], seed: int, n_workers: int | None) -> BenchBackend:
    sb3_vec_env = importlib.import_module("stable_baselines3.common.vec_env")
    return VecEnvAdapter(sb3_vec_env.DummyVecEnv(list(env_fns)), seed)


def _build_sb3_subproc(env_fns: Sequence[EnvFn], seed: int, n_workers: int | None) -> BenchBackend:
    sb3_vec_env = importlib.import_module("stable_baselines3.common.vec_env")
    return VecEnvAdapter(sb3_vec_env.SubprocVecEnv(list(env_fns)), seed)


def _build_gym_sync(env_fns: Sequence[EnvFn], seed: int, n_workers: int | None) -> BenchBackend:
    return GymVectorAdapter(gym.vector.SyncVectorEnv(list(env_fns)), seed)


def _build_gym_async(env_fns: Sequence[EnvFn], seed: int, n_workers: int | None) -> BenchBackend:
    return GymVectorAdapter(gym.vector.AsyncVectorEnv(list(env_fns), shared_memory=True), seed)


def _build_vecenv_gym_sync(env_fns: Sequence[EnvFn], seed: int, n_workers: int | None) -> BenchBackend:
    from vecenv.gymnasium import SyncVectorEnv

    return GymVectorAdapter(SyncVectorEnv(list(env_fns)), seed)


def _build_vecenv_gym_async(env_fns: Sequence[EnvFn], seed: int, n_workers: int | None) -> BenchBackend:
    from vecenv.gymnasium import AsyncVectorEnv

    kwargs: dict[str, Any] = {} if n_workers is None else {"n_workers": n_workers}
    return GymVectorAdapter(AsyncVectorEnv(list(env_fns), shared_memory=True, **kwargs), seed)


@dataclass(frozen=True)
class BackendSpec:
    """A backend of the benchmark.

    :param name: name on the command line and in reports.
    :param label: one-line description.
    :param library: the library it comes from (``"-"`` for the plain loop).
    :param in_process: whether the envs run in the calling process (the per-step overhead over the
        plain loop is reported for these).
    :param build: ``build(env_fns, seed, n_workers)`` returns the wrapped backend.
    :param requires: modules that must be importable.
    :param imports: modules imported before the start-up timer (the library, as a user script would).
    :param preload: modules the forkserver imports once, so that workers start from them (as when a script
        imports its vector-env library at top level and the forkserver preloads ``__main__``).
    :param n_workers: ``SubprocVecEnv(n_workers=...)`` for the vecenv variants.
    """

    name: str
    label: str
    library: str
    in_process: bool
    build: Callable[[Sequence[EnvFn], int, int | None], BenchBackend]
    requires: tuple[str, ...] = ()
    imports: tuple[str, ...] = ()
    preload: tuple[str, ...] = ()
    n_workers: int | None = None
    #: ``SubprocVecEnv`` parameters the backend needs (absent in older vecenv versions)
    subproc_parameters: tuple[str, ...] = ()

    def unavailable_reason(self) -> str | None:
        """Why this backend cannot run here (a missing package, an unsupported parameter), or None."""
        for module in self.requires:
            try:
                found = importlib.util.find_spec(module) is not None
            except (ImportError, ValueError):
                found = False
            if not found:
                hint = f" (install it: {SB3_INSTALL_HINT})" if self.library == "stable-baselines3" else ""
                return f"{module} is not installed{hint}"
        if self.n_workers is not None and not vecenv_supports_n_workers():
            return "vecenv.SubprocVecEnv has no n_workers parameter in this version"
        for parameter in self.subproc_parameters:
            if not vecenv_supports(parameter):
                return f"vecenv.SubprocVecEnv has no {parameter} parameter in this version"
        return None


_VECENV_PRELOAD = ("vecenv", "vecenv.bench.workloads")
_SB3_PRELOAD = ("stable_baselines3.common.vec_env", "vecenv.bench.workloads")

#: The fixed backends, in report order (``vecenv-subproc-w<K>`` variants are made by :func:`backend_spec`).
BACKENDS: dict[str, BackendSpec] = {
    spec.name: spec
    for spec in (
        BackendSpec("plain", "plain in-process loop over gym envs (baseline)", "-", True, _build_plain),
        BackendSpec("vecenv-dummy", "vecenv.DummyVecEnv", "vecenv", True, _build_vecenv_dummy, imports=("vecenv",)),
        BackendSpec(
            "vecenv-subproc",
            "vecenv.SubprocVecEnv (default n_workers)",
            "vecenv",
            False,
            _build_vecenv_subproc,
            imports=("vecenv",),
            preload=_VECENV_PRELOAD,
        ),
        BackendSpec(
            "vecenv-subproc-parent",
            "vecenv.SubprocVecEnv(parent_envs=N // cores): this process steps one share, cores - 1 workers the rest",
            "vecenv",
            False,
            _build_vecenv_subproc_parent,
            imports=("vecenv",),
            preload=_VECENV_PRELOAD,
            subproc_parameters=("parent_envs",),
        ),
        BackendSpec(
            "sb3-dummy",
            "stable_baselines3 DummyVecEnv",
            "stable-baselines3",
            True,
            _build_sb3_dummy,
            requires=("stable_baselines3", "torch"),
            imports=("stable_baselines3.common.vec_env",),
        ),
        BackendSpec(
            "sb3-subproc",
            "stable_baselines3 SubprocVecEnv (forkserver)",
            "stable-baselines3",
            False,
            _build_sb3_subproc,
            requires=("stable_baselines3", "torch"),
            imports=("stable_baselines3.common.vec_env",),
            preload=_SB3_PRELOAD,
        ),
        BackendSpec("gym-sync", "gymnasium SyncVectorEnv", "gymnasium", True, _build_gym_sync),
        BackendSpec(
            "gym-async",
            "gymnasium AsyncVectorEnv(shared_memory=True)",
            "gymnasium",
            False,
            _build_gym_async,
        ),
        BackendSpec(
            "vecenv-gym-sync",
            "vecenv.gymnasium.SyncVectorEnv (Gymnasium's API, next-step autoreset)",
            "vecenv",
            True,
            _build_vecenv_gym_sync,
            imports=("vecenv.gymnasium",),
        ),
        BackendSpec(
            "vecenv-gym-async",
            "vecenv.gymnasium.AsyncVectorEnv (Gymnasium's API, default n_workers)",
            "vecenv",
            False,
            _build_vecenv_gym_async,
            imports=("vecenv.gymnasium",),
            preload=("vecenv.gymnasium", "vecenv.bench.workloads"),
        ),
    )
}
#: ``SubprocVecEnv(n_workers=K)`` variants run by default (besides the default ``n_workers``).
DEFAULT_N_WORKERS = (1, 4)
_VARIANT = re.compile(r"vecenv-subproc-w([1-9][0-9]*)")


def vecenv_supports(parameter: str) -> bool:
    """Whether this vecenv's ``SubprocVecEnv`` takes ``parameter``."""
    from vecenv import SubprocVecEnv

    return parameter in inspect.signature(SubprocVecEnv).parameters


def vecenv_supports_n_workers() -> bool:
    """Whether this vecenv's ``SubprocVecEnv`` takes ``n_workers`` (several envs per worker process)."""
    return vecenv_supports("n_workers")


def backend_spec(name: str) -> BackendSpec:
    """The backend called ``name``: one of :data:`BACKENDS` or ``vecenv-subproc-w<K>``.

    :raises KeyError: for an unknown name.
    """
    if name in BACKENDS:
        return BACKENDS[name]
    match = _VARIANT.fullmatch(name)
    if match is None:
        raise KeyError(name)
    k = int(match.group(1))
    base = BACKENDS["vecenv-subproc"]
    return BackendSpec(
        name,
        f"vecenv.SubprocVecEnv(n_workers={k})",
        base.library,
        False,
        base.build,
        imports=base.imports,
        preload=base.preload,
        n_workers=k,
    )


def default_backend_names(n_workers: Sequence[int] = DEFAULT_N_WORKERS) -> list[str]:
    """Every backend in report order, with a ``vecenv-subproc-w<K>`` variant for each ``n_workers``."""
    names = list(BACKENDS)
    at = names.index("vecenv-subproc") + 1
    names[at:at] = [f"vecenv-subproc-w{k}" for k in n_workers]
    return names


DEFAULT_BACKENDS = default_backend_names()


# --- timing ----------------------------------------------------------------------------------------


def time_steps(backend: BenchBackend, pool: Sequence[Any], iterations: int) -> float:
    """Wall time of ``iterations`` vector steps, cycling through the prepared action batches ``pool``."""
    step = backend.step
    size = len(pool)
    start = time.perf_counter()
    for i in range(iterations):
        step(pool[i % size])
    return time.perf_counter() - start


def warm_up(backend: BenchBackend, pool: Sequence[Any], seconds: float) -> tuple[int, float]:
    """Step in doubling chunks until ``seconds`` have passed (at least two chunks).

    :return: ``(iterations, wall time)`` of the last chunk: the best estimate of the steady rate.
    """
    chunk, total, rounds = 1, 0.0, 0
    last = (1, 0.0)
    while total < seconds or rounds < 2:
        elapsed = time_steps(backend, pool, chunk)
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
    record: dict[str, Any] = {
        "workload": case.workload,
        "num_envs": case.num_envs,
        "backend": case.backend,
        "library": spec.library,
        "in_process": spec.in_process,
        "n_workers": spec.n_workers,
        "status": "ok",
        "error": None,
        "load_avg_1m": _load_1m(),
    }
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
    from vecenv.bench.memory import process_tree

    tree = process_tree()
    return None if tree is None else len(tree)


# --- a case in a fresh process ---------------------------------------------------------------------


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    """End the case process and everything it started (its own session)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, sig)
        try:
            process.wait(timeout=3)
            return
        except subprocess.TimeoutExpired:
            continue


def run_case_isolated(case: Case, timeout: float) -> dict[str, Any]:
    """Measure one case in a fresh Python process (``python -m vecenv.bench.runner``).

    The process runs in its own session; on a time-out (or Ctrl-C here) it and all its descendants are
    ended. A case that crashes or times out gives a record with ``status="error"``.
    """
    with tempfile.TemporaryDirectory(prefix="vecenv-bench-") as tmp:
        result_path = os.path.join(tmp, "result.json")
        command = [
            sys.executable,
            "-m",
            "vecenv.bench.runner",
            "--case",
            json.dumps(asdict(case)),
            "--result",
            result_path,
        ]
        process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
        )
        try:
            _, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(process)
            return _error_record(case, f"timed out after {timeout:g} s (the case process was killed)")
        except BaseException:
            _kill_group(process)
            raise
        if os.path.exists(result_path):
            with open(result_path, encoding="utf-8") as f:
                record: dict[str, Any] = json.load(f)
            return record
        lines = [line for line in stderr.decode(errors="replace").splitlines() if line.strip()]
        last = lines[-1] if lines else "no output"
        return _error_record(case, f"the case process exited with status {process.returncode}: {last}")


def _error_record(case: Case, error: str) -> dict[str, Any]:
    spec = backend_spec(case.backend)
    return {
        "workload": case.workload,
        "num_envs": case.num_envs,
        "backend": case.backend,
        "library": spec.library,
        "in_process": spec.in_process,
        "n_workers": spec.n_workers,
        "status": "error",
        "error": error,
    }


def case_main(argv: Sequence[str] | None = None) -> int:
    """Entry point of a case process: run the case given as JSON, write its record as JSON."""
    parser = argparse.ArgumentParser(prog="python -m vecenv.bench.runner", description="Run one benchmark case.")
    parser.add_argument("--case", required=True, help="the Case as a JSON object")
    parser.add_argument("--result", required=True, help="file to write the result record to")
    args = parser.parse_args(argv)
    case = Case(**json.loads(args.case))
    record = run_case(case)
    if record.get("traceback"):
        print(record["traceback"], file=sys.stderr)
    with open(args.result, "w", encoding="utf-8") as f:
        json.dump(record, f)
    return 0


# --- the whole benchmark ---------------------------------------------------------------------------


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


def _mem_available_mib() -> float | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def plan_cases(config: BenchConfig, cpu_iterations: int | None) -> tuple[list[Case], list[str]]:
    """The cases to run for ``config`` and notes on the backends and cases left out.

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
    cpu_count = os.cpu_count() or 1
    mem_mib = _mem_available_mib()
    cases: list[Case] = []
    for workload in config.workloads:
        for n in config.num_envs:
            for spec in available:
                k = spec.n_workers
                if k is not None and not explicit and (k > n or k == min(cpu_count, n)):
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
    if any(spec.name == "vecenv-subproc-parent" for spec in available):
        notes.append("vecenv-subproc-parent runs only where N >= the number of cores (else this process gets no env)")
    variants = [spec.name for spec in available if spec.n_workers is not None]
    if variants and not explicit:
        notes.append(
            f"{', '.join(variants)} (n_workers=K) run only where K <= N and K differs from the default "
            f"layout (min(N, cores), {cpu_count} cores here)"
        )
    return cases, notes


def _case_label(case: Case) -> str:
    return f"{case.workload} N={case.num_envs} {case.backend}"


def iter_results(
    cases: Sequence[Case], config: BenchConfig, progress: bool = True
) -> Iterator[tuple[Case, dict[str, Any]]]:
    """Run ``cases`` one after the other with a progress bar on stderr, yielding each record."""
    from tqdm import tqdm

    bar = tqdm(total=len(cases), unit="case", disable=not progress or None, file=sys.stderr, dynamic_ncols=True)
    log_lines = progress and bar.disable  # no terminal: one line per case instead of a bar
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
    from vecenv.bench.report import machine_info

    for workload in config.workloads:
        if workload not in WORKLOADS:
            raise KeyError(workload)
    start = time.perf_counter()
    cpu_iterations = None
    if "cpu" in config.workloads:
        from vecenv.bench.workloads import calibrate_cpu_iterations

        cpu_iterations = calibrate_cpu_iterations(config.cpu_us)
    cases, notes = plan_cases(config, cpu_iterations)
    machine = machine_info()
    settings = asdict(config)
    settings["cpu_iterations"] = cpu_iterations
    records = [record for _, record in iter_results(cases, config, progress)]
    machine["load_average_end"] = _load_average()
    return BenchRun(records, machine, settings, notes, time.perf_counter() - start)


def _load_1m() -> float | None:
    load = _load_average()
    return None if load is None else load[0]


def _load_average() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


if __name__ == "__main__":
    sys.exit(case_main())
