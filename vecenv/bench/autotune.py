"""``vecenv bench --autotune``: which vector-env layout steps a given env fastest on this machine.

:func:`autotune` builds every layout that makes sense for the env and the machine (:func:`plan_layouts`),
each once, side by side in this process, and times them in interleaved rounds within one time budget:

1. *Start-up*: each layout is built and reset (its start-up time), then warmed up; the RSS it adds to this
   process tree is its memory. Building stops once half of the budget is used.
2. *Rounds*: every round steps each layout for about the same time (a *slot*, set from each layout's
   warm-up rate and the time left), in a rotating order, so that noise from the machine (other
   processes, frequency changes) hits all layouts alike. Actions are sampled once, before timing.
3. *Result*: the median env-steps/s over the rounds, ranked, with the ratio to the plain in-process loop
   (the reference, not a vector env). Rounds stop when the budget, less a reserve for closing, is used.

The layouts tried (``C`` usable cores, ``N`` envs):

- ``DummyVecEnv``: every env in this process.
- ``SubprocVecEnv(n_workers=K)`` for ``K`` in ``1 .. min(C, N)``.
- ``SubprocVecEnv(n_workers=C, wait_mode="block")`` (on :data:`~vecenv.bench.autotune_layouts.BLOCK_MIN_CORES`
  cores or more, with ``N >= C``): the default layout, whose workers spin for requests, with nobody spinning.
- ``SubprocVecEnv(n_workers=C - 1, parent_envs=N // C)`` (on two or more cores, with ``N >= C``): this
  process steps one share of the envs while the workers step the rest
  (:func:`~vecenv.bench.backends.parent_share`).
- ``SubprocVecEnv(n_workers=min(C, N), shared_memory=False)`` when one observation is larger than
  :data:`LARGE_OBS_BYTES`: the two transports differ only in how observations cross the process boundary,
  which is a negligible part of a step for small observations.
- ``RayVecEnv`` when ray is installed and the budget is at least :data:`RAY_MIN_BUDGET` (Ray's own start
  and shutdown take several seconds). A Ray of its own (``ray.init(address="local", num_cpus=C,
  include_dashboard=False, log_to_driver=False)``: a new local instance, even where another Ray runs on the
  machine) is started and shut down here, unless Ray is already initialised in this process, whose cluster
  is then used as it is. Ray's start (import and ``ray.init``) counts in its start-up time.

Start-up time and memory leave out the forkserver process that :class:`~vecenv.SubprocVecEnv` starts its
workers from: a program starts it once, so it is started before any layout is built.

``vecenv run --compare`` times three of these layouts the same way (:func:`compared_layouts`: the plain loop,
``DummyVecEnv`` and one ``SubprocVecEnv``) within :data:`COMPARE_BUDGET`. Both print
:meth:`AutotuneResult.advice`: which layout to use, and why, from the rates measured.

This module holds the search: checking the env, building, timing and closing the layouts. The layouts are in
:mod:`vecenv.bench.autotune_layouts` and the result and its report in :mod:`vecenv.bench.autotune_report`, whose
names this module re-exports.
"""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import math
import multiprocessing as mp
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from vecenv.bench.adapters import BenchBackend
from vecenv.bench.autotune_layouts import (
    LARGE_OBS_BYTES,
    PLAIN,
    Layout,
    _cores,
    compared_layouts,
    observation_bytes,
    plan_layouts,
)
from vecenv.bench.autotune_report import _TIE, AutotuneResult, AutotuneRow
from vecenv.bench.case import ACTION_POOL, time_steps, warm_up
from vecenv.bench.memory import tree_rss_kib
from vecenv.bench.tables import is_number
from vecenv.bench.workloads import WorkloadFactory
from vecenv.cli_args import UsageError, resolve_env_id
from vecenv.optional import install_hint, is_installed

__all__ = [
    "COMPARE_BUDGET",
    "DEFAULT_BUDGET",
    "DEFAULT_NUM_ENVS",
    "LARGE_OBS_BYTES",
    "MIN_BUDGET",
    "RAY_MIN_BUDGET",
    "AutotuneError",
    "AutotuneResult",
    "AutotuneRow",
    "Layout",
    "autotune",
    "check_budget",
    "compared_layouts",
    "observation_bytes",
    "plan_layouts",
]

#: Envs per layout when none is given (the default of ``vecenv run``).
DEFAULT_NUM_ENVS = 8
#: Seconds the whole autotune may take when no budget is given.
DEFAULT_BUDGET = 60.0
#: The smallest budget, in seconds: start-up of the layouts, a few rounds each, and closing.
MIN_BUDGET = 5.0
#: The smallest budget, in seconds, that also tries ``RayVecEnv``: Ray's import and start (3 s on an idle
#: machine, up to about 15 s on a busy 2-core one) and its shutdown (about 2 s) then still leave at least
#: a third of it, and usually much more, to timing.
RAY_MIN_BUDGET = 30.0

#: Seconds that ``vecenv run --compare`` times its three layouts for, closing included.
COMPARE_BUDGET = 6.0

#: Share of the budget after which no further layout is built.
_BUILD_SHARE = 0.5
#: Rounds the slot length aims at, and the bounds of a slot (seconds).
_TARGET_ROUNDS = 15
_MIN_SLOT_S, _MAX_SLOT_S = 0.02, 0.5
_WARMUP_S = 0.1
#: Seconds kept for closing: a base, per layout with processes, and for Ray (actors, then ``ray.shutdown``).
_CLOSE_BASE_S, _CLOSE_PROCESS_S, _CLOSE_RAY_S = 0.5, 0.2, 4.0


class AutotuneError(ValueError):
    """What :func:`autotune` cannot do: an unknown env id, an env that cannot be created, a budget too small."""


def check_budget(budget: float, name: str = "budget") -> None:
    """Refuse a budget below :data:`MIN_BUDGET`.

    :param budget: seconds.
    :param name: the parameter's name in the message (e.g. ``"argument --budget"``).
    :raises AutotuneError: if ``budget`` is too small (or not a number).
    """
    if isinstance(budget, (int, float)) and not isinstance(budget, bool) and not math.isfinite(budget):
        raise AutotuneError(f"{name}: expected a finite number of seconds (at least {MIN_BUDGET:g}), got {budget}")
    if not (is_number(budget) and budget >= MIN_BUDGET):
        given = format(budget, "g") if is_number(budget) else repr(budget)
        raise AutotuneError(
            f"{name}: {given} s is too small to measure anything: the minimum is {MIN_BUDGET:g} s (start-up of "
            "every layout, a few timed rounds each, and closing)"
        )


# --- the env ------------------------------------------------------------------------------------------


def _env_factory(
    env_id: str, env_kwargs: dict[str, Any], imports: Sequence[str] = ()
) -> tuple[WorkloadFactory, gym.Env]:
    """The picklable factory of ``env_id`` and one env made by it (closed by the caller).

    :raises AutotuneError: for an unknown id or an env that cannot be created.
    """
    try:
        maker = resolve_env_id(env_id, imports, import_option="--import" if imports else None)
    except UsageError as exc:
        # an unknown id without namespace and import: the other errors say what to do
        plain = str(exc).startswith(f"unknown env id {env_id!r} (")
        hint = " (check the id, and that the package that registers it is installed)" if plain else ""
        raise AutotuneError(f"{exc}{hint}") from None
    factory = WorkloadFactory(maker.env_id, dict(env_kwargs), maker.imports)
    try:
        env = factory()
    except gym.error.DependencyNotInstalled as exc:
        raise AutotuneError(f"{env_id} needs an optional dependency that is not installed: {exc}") from None
    except ImportError as exc:  # (ModuleNotFoundError: a package the env imports, e.g. jax for phys2d/...)
        raise AutotuneError(f"{env_id} needs a package that is not installed: {exc}") from None
    except (TypeError, ValueError, gym.error.Error) as exc:
        given = f" with env kwargs {json.dumps(env_kwargs)}" if env_kwargs else ""
        raise AutotuneError(f"cannot create {env_id}{given}: {exc}") from None
    return factory, env


# --- measuring ----------------------------------------------------------------------------------------


class _Ray:
    """The Ray that the ``RayVecEnv`` layout runs on: started here (and shut down by :meth:`shutdown`) only
    if Ray was not initialised already."""

    def __init__(self, cores: int) -> None:
        self.cores = cores
        self.started = False

    def ensure(self) -> None:
        import ray

        if not ray.is_initialized():
            # address="local": a Ray of its own, even where another runs on this machine (ray.init() would join it)
            ray.init(
                address="local",
                num_cpus=self.cores,
                include_dashboard=False,
                log_to_driver=False,
                logging_level=logging.WARNING,
            )
            self.started = True

    def shutdown(self) -> None:
        if self.started:
            import ray

            with contextlib.suppress(Exception):
                ray.shutdown()
            self.started = False


def _error_text(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip().splitlines()
    return text[0][:200] if text else type(exc).__name__


@dataclass
class _Running:
    """A built layout during the rounds: its backend, its prepared actions and vector steps per slot."""

    row: AutotuneRow
    backend: BenchBackend
    pool: list[Any]
    iterations: int = 1
    slot_s: float = 0.0  # the last slot's wall time


class _Session:
    """Builds, times and closes the layouts of one :func:`autotune` within its deadline."""

    def __init__(
        self,
        factory: WorkloadFactory,
        num_envs: int,
        action_space: gym.Space,
        cores: int,
        seed: int,
        trainer_s: float = 0.0,
    ):
        self.env_fns = [factory] * num_envs
        self.num_envs = num_envs
        self.trainer_s = trainer_s
        self.cores = cores
        self.seed = seed
        self.batches = gym.vector.utils.batch_space(action_space, num_envs)
        self.batches.seed(seed)
        self.actions = [self.batches.sample() for _ in range(ACTION_POOL)]
        self.running: list[_Running] = []
        self.ray = _Ray(cores)

    def build(self, row: AutotuneRow) -> None:
        """Build, reset and warm up one layout; record start-up time and memory (or the error)."""
        gc.collect()
        before = tree_rss_kib()
        backend: BenchBackend | None = None
        try:
            start = time.perf_counter()
            if row.layout.cls == "RayVecEnv":
                self.ray.ensure()
            backend = row.layout.build(self.env_fns, self.seed)
            backend.reset()
            row.startup_s = time.perf_counter() - start
            pool = [backend.prepare(actions) for actions in self.actions]
            chunk, elapsed = warm_up(backend, pool, _WARMUP_S, self.trainer_s)
        except Exception as exc:
            row.status, row.error = "error", _error_text(exc)
            if backend is not None:
                with contextlib.suppress(Exception):
                    backend.close()
            return
        after = tree_rss_kib()
        if before is not None and after is not None:
            row.memory_mib = max(0.0, (after - before) / 1024)
        running = _Running(row, backend, pool, slot_s=elapsed)
        running.iterations = chunk  # rate estimate until the slots are sized
        self.running.append(running)

    def size_slots(self, seconds: float) -> None:
        """Set each layout's vector steps per slot so that one slot lasts about ``seconds``."""
        for running in self.running:
            rate = running.iterations / max(running.slot_s, 1e-9)  # vector steps/s of the warm-up's last chunk
            running.iterations = max(1, math.ceil(seconds * rate))
            running.slot_s = running.iterations / rate

    def round(self, index: int, deadline: float) -> bool:
        """One slot per layout, starting at a rotating layout; False if the deadline cut it short."""
        gc.collect()
        order = self.running[index % len(self.running) :] + self.running[: index % len(self.running)]
        for running in order:
            if time.perf_counter() + running.slot_s > deadline:
                return False
            try:
                elapsed = time_steps(running.backend, running.pool, running.iterations, self.trainer_s)
            except Exception as exc:
                running.row.status, running.row.error = "error", _error_text(exc)
                self.running.remove(running)
                self._close(running.backend)
                continue
            running.slot_s = elapsed
            running.row.rates.append(running.iterations * self.num_envs / elapsed)
        return True

    def round_s(self) -> float:
        """The expected wall time of the next round."""
        return sum(running.slot_s for running in self.running)

    @staticmethod
    def _close(backend: BenchBackend) -> None:
        with contextlib.suppress(Exception):
            backend.close()

    def close(self) -> None:
        """Close every layout (last built first), then Ray if it was started here."""
        try:
            while self.running:
                self._close(self.running.pop().backend)
        finally:
            self.ray.shutdown()


def _close_reserve(layouts: Sequence[Layout]) -> float:
    processes = sum(layout.has_processes for layout in layouts)
    ray = any(layout.cls == "RayVecEnv" for layout in layouts)
    return _CLOSE_BASE_S + _CLOSE_PROCESS_S * processes + (_CLOSE_RAY_S if ray else 0.0)


def _start_forkserver() -> None:
    """Start the forkserver that :class:`~vecenv.SubprocVecEnv` (default start method) starts its workers from,
    and wait until it has started a first (empty) process: it has then imported what it preloads, so that no
    layout's start-up time or memory includes it."""
    if "forkserver" in mp.get_all_start_methods():
        process = mp.get_context("forkserver").Process(target=os.getpid, daemon=True)
        process.start()
        process.join()


def autotune(
    env_id: str,
    env_kwargs: dict[str, Any] | None = None,
    num_envs: int | None = None,
    budget: float = DEFAULT_BUDGET,
    progress: bool = True,
    include_ray: bool | None = None,
    seed: int = 0,
    layouts: Sequence[Layout] | None = None,
    imports: Sequence[str] = (),
    trainer_us: float = 0.0,
) -> AutotuneResult:
    """Find the fastest vector-env layout for ``env_id`` on this machine, within ``budget`` seconds.

    Every layout of :func:`plan_layouts` is built once in this process and timed in interleaved rounds (see
    the module's description); everything is closed before this returns, also on an error or Ctrl-C.

    :param env_id: a registered Gymnasium env id (``gymnasium.make(env_id, **env_kwargs)``), or ``module:EnvId``
        (``module`` imported first, in every process that makes an env), checked as ``vecenv run`` checks its
        ``ENV_ID`` (an ``ALE/...`` id imports ale-py's envs).
    :param env_kwargs: keyword arguments for ``gymnasium.make``.
    :param num_envs: envs per layout (default :data:`DEFAULT_NUM_ENVS`).
    :param budget: seconds the whole call may take, closing included (at least :data:`MIN_BUDGET`).
    :param progress: show a progress bar on stderr (when it is a terminal).
    :param include_ray: try ``RayVecEnv`` (None: when ray is installed and ``budget >= RAY_MIN_BUDGET``).
    :param seed: seed of the envs' first reset and of the actions.
    :param layouts: the layouts to time instead of :func:`plan_layouts`'s (e.g. :func:`compared_layouts`); the
        plain loop, the reference of the ratios, is added first when missing, and ``include_ray`` is not used.
    :param imports: modules that register the env when imported (``vecenv run --import``), imported first here
        and in every process that makes an env.
    :param trainer_us: microseconds of a trainer's own work after each vector step, in every layout and the
        plain loop alike: a busy loop on one core, as a single-threaded policy's forward pass and update (the
        layouts are then ranked as they would step inside that trainer; a trainer's time per step is what
        ``step_stats()`` counts outside the vector env's calls, ``outside_seconds / steps``). 0: none.
    :return: the ranked measurements; :attr:`AutotuneResult.best` is the fastest vector-env layout.
    :raises AutotuneError: for an unknown env id, an env that cannot be created, ``num_envs`` below 1, a budget
        below :data:`MIN_BUDGET` or a ``trainer_us`` that is negative or not finite, before anything is built.
    """
    start = time.perf_counter()
    num_envs = DEFAULT_NUM_ENVS if num_envs is None else num_envs
    if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
        raise AutotuneError(f"num_envs must be a positive integer, got {num_envs!r}")
    check_budget(budget)
    if isinstance(trainer_us, bool) or not isinstance(trainer_us, (int, float)) or not 0 <= trainer_us < math.inf:
        raise AutotuneError(f"trainer_us must be a finite number of microseconds >= 0, got {trainer_us!r}")
    env_kwargs = dict(env_kwargs or {})
    factory, env = _env_factory(env_id, env_kwargs, imports)
    try:
        obs_bytes = observation_bytes(env.observation_space)
        action_space = env.action_space
        # a first reset and step import and allocate what every env's first step does, so that the first layout
        # built (the plain loop) is not charged for it
        env.reset(seed=seed)
        env.step(action_space.sample())
    finally:
        env.close()
    cores = _cores()
    notes: list[str] = []
    if layouts is not None:
        layouts = list(layouts)
        if not any(layout.is_reference for layout in layouts):
            layouts.insert(0, Layout(PLAIN))
    elif include_ray is None:
        include_ray = is_installed("ray") and budget >= RAY_MIN_BUDGET
        if not is_installed("ray"):
            notes.append(f"RayVecEnv not tried: ray is not installed ({install_hint('ray')})")
        elif not include_ray:
            notes.append(f"RayVecEnv not tried: it needs a budget of at least {RAY_MIN_BUDGET:g} s")
    if layouts is None:
        layouts = plan_layouts(num_envs, obs_bytes, bool(include_ray))
    rows = [AutotuneRow(layout) for layout in layouts]
    session = _Session(factory, num_envs, action_space, cores, seed, trainer_us * 1e-6)
    rounds = 0
    from tqdm import tqdm

    bar = tqdm(
        total=round(budget, 1),
        disable=not progress or sys.stderr is None or None,
        file=sys.stderr,
        dynamic_ncols=True,
        bar_format="{desc} {bar} {n:.0f}/{total:.0f} s",
    )

    def tick(description: str) -> None:
        bar.set_description_str(description)
        bar.update(min(time.perf_counter() - start, budget) - bar.n)

    try:
        _start_forkserver()
        built: list[Layout] = []
        for row in rows:
            if time.perf_counter() - start > _BUILD_SHARE * budget:
                row.status = "not built"
                continue
            tick(f"building {row.layout.label}")
            session.build(row)
            built.append(row.layout)
        deadline = start + budget - _close_reserve(built)
        left = deadline - time.perf_counter()
        if session.running:
            slot = min(_MAX_SLOT_S, max(_MIN_SLOT_S, left / (_TARGET_ROUNDS * len(session.running))))
            session.size_slots(slot)
        while session.running and time.perf_counter() + session.round_s() <= deadline:
            tick(f"round {rounds + 1}")
            if not session.round(rounds, deadline):
                break
            rounds += 1
        tick("closing")
    finally:
        try:
            session.close()
        finally:
            bar.close()
    _finish(rows, notes, rounds)
    wall_s = time.perf_counter() - start
    return AutotuneResult(env_id, num_envs, budget, _ranked(rows), rounds, wall_s, cores, notes, float(trainer_us))


def _ranked(rows: list[AutotuneRow]) -> list[AutotuneRow]:
    measured = sorted((row for row in rows if row.env_steps_per_s is not None), key=lambda r: -(r.env_steps_per_s or 0))
    return measured + [row for row in rows if row.env_steps_per_s is None]


def _finish(rows: list[AutotuneRow], notes: list[str], rounds: int) -> None:
    """Set the ratios to the plain loop and add the notes on what went wrong or is too close to call."""
    plain = next((row.env_steps_per_s for row in rows if row.layout.is_reference), None)
    for row in rows:
        rate = row.env_steps_per_s
        if row.status == "ok" and not row.rates:
            row.status = "not timed"
        if rate is not None and plain:
            row.x_plain = rate / plain
        if row.status == "error":
            notes.append(f"{row.layout.label} failed: {row.error}")
    if any(row.status == "not built" for row in rows):
        notes.append("some layouts were not built: start-up used half of the budget first; give a larger budget")
    if rounds == 0:
        notes.append("no round fit in the budget: give a larger budget")
    ranked = [row for row in _ranked(rows) if not row.layout.is_reference and row.env_steps_per_s is not None]
    if len(ranked) >= 2:
        first, second = (row.env_steps_per_s or 0.0 for row in ranked[:2])
        if first and (first - second) / first < _TIE:
            notes.append(
                f"the two fastest layouts are within {_TIE:.0%} of each other, which is within the noise of a "
                "shared machine: either will do"
            )
