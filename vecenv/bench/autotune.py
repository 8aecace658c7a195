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
"""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import math
import multiprocessing as mp
import os
import statistics
import sys
import textwrap
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from vecenv.bench.adapters import BenchBackend, EnvFn, PlainLoop, VecEnvAdapter
from vecenv.bench.backends import parent_share
from vecenv.bench.case import ACTION_POOL, time_steps, warm_up
from vecenv.bench.machine import cpu_model, cpus_usable, load_1m
from vecenv.bench.memory import tree_rss_kib
from vecenv.bench.tables import is_number, render_markdown
from vecenv.bench.workloads import WorkloadFactory
from vecenv.cli_args import UsageError, resolve_env_id
from vecenv.optional import install_hint, is_installed
from vecenv.spaces import buffer_leaves, create_batch_buffer
from vecenv.subproc_vec_env import default_n_workers

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
#: One observation larger than this (bytes) also tries ``SubprocVecEnv(shared_memory=False)``.
LARGE_OBS_BYTES = 16 * 1024
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
#: Two layouts whose rates differ by less than this share are called a tie in the report.
_TIE = 0.05
#: Columns the advice of the report is wrapped to.
_ADVICE_WIDTH = 100

PLAIN = "plain loop"


class AutotuneError(ValueError):
    """What :func:`autotune` cannot do: an unknown env id, an env that cannot be created, a budget too small."""


@dataclass(frozen=True)
class Layout:
    """One way to run the envs: a vector-env class and its keyword arguments, or the plain loop.

    :param cls: ``"DummyVecEnv"``, ``"SubprocVecEnv"``, ``"RayVecEnv"`` or :data:`PLAIN`.
    :param kwargs: the constructor's keyword arguments, in the order they are shown.
    """

    cls: str
    kwargs: tuple[tuple[str, Any], ...] = ()

    @property
    def is_reference(self) -> bool:
        """Whether this is the plain loop (the reference of the ratio; not a vector env, never the best)."""
        return self.cls == PLAIN

    @property
    def label(self) -> str:
        """The layout as the table shows it, e.g. ``SubprocVecEnv(n_workers=1, parent_envs=4)``."""
        if self.is_reference:
            return f"{PLAIN} (reference)"
        args = ", ".join(f"{key}={value!r}" for key, value in self.kwargs)
        return f"{self.cls}({args})" if args else self.cls

    @property
    def constructor(self) -> str:
        """The constructor call to paste, e.g. ``SubprocVecEnv(env_fns, n_workers=2)``."""
        if self.is_reference:
            return "[env_fn() for env_fn in env_fns]"
        args = "".join(f", {key}={value!r}" for key, value in self.kwargs)
        return f"{self.cls}(env_fns{args})"

    @property
    def has_processes(self) -> bool:
        """Whether the layout starts processes (workers or Ray), which take longer to close."""
        return self.cls in ("SubprocVecEnv", "RayVecEnv")

    def build(self, env_fns: Sequence[EnvFn], seed: int) -> BenchBackend:
        """Build the layout over ``env_fns`` (not reset); a ``RayVecEnv`` needs Ray initialised."""
        if self.is_reference:
            return PlainLoop(env_fns, seed)
        import vecenv

        venv_cls = getattr(vecenv, self.cls)
        return VecEnvAdapter(venv_cls(list(env_fns), **dict(self.kwargs)), seed)


def plan_layouts(num_envs: int, obs_bytes: int, with_ray: bool) -> list[Layout]:
    """The layouts :func:`autotune` tries on this machine, the plain loop first and Ray last (the rules are in
    the module's description).

    :param num_envs: envs per layout.
    :param obs_bytes: bytes of one env's observation (:func:`observation_bytes`).
    :param with_ray: whether to try ``RayVecEnv``.
    :return: the layouts, in build order.
    """
    cores = _cores()
    most = min(cores, num_envs)
    layouts = [Layout(PLAIN), Layout("DummyVecEnv")]
    layouts += [Layout("SubprocVecEnv", (("n_workers", k),)) for k in range(1, most + 1)]
    share = parent_share(num_envs)
    if share > 0:
        in_workers = min(cores - 1, num_envs - share)
        layouts.append(Layout("SubprocVecEnv", (("n_workers", in_workers), ("parent_envs", share))))
    if obs_bytes > LARGE_OBS_BYTES:
        layouts.append(Layout("SubprocVecEnv", (("n_workers", most), ("shared_memory", False))))
    if with_ray:
        layouts.append(Layout("RayVecEnv"))
    return layouts


def compared_layouts(num_envs: int, subproc_kwargs: dict[str, Any] | None = None) -> list[Layout]:
    """The layouts ``vecenv run --compare`` times: the plain loop (the reference), ``DummyVecEnv`` and one
    ``SubprocVecEnv``.

    :param num_envs: envs per layout.
    :param subproc_kwargs: the ``SubprocVecEnv``'s keyword arguments (e.g. ``parent_envs``). Its ``n_workers``
        is SubprocVecEnv's default when not given (one per usable core, less one with ``parent_envs``), and at
        most the envs in worker processes, as SubprocVecEnv uses; the label shows the number.
    :return: the three layouts, in build order.
    """
    kwargs = dict(subproc_kwargs or {})
    parent_envs = int(kwargs.get("parent_envs") or 0)
    n_workers = kwargs.pop("n_workers", None) or default_n_workers(parent_envs)
    shown = {"n_workers": max(1, min(n_workers, num_envs - parent_envs)), **kwargs}
    return [Layout(PLAIN), Layout("DummyVecEnv"), Layout("SubprocVecEnv", tuple(shown.items()))]


def _cores() -> int:
    """The CPU cores this process may run on."""
    return max(1, cpus_usable() or os.cpu_count() or 1)


def observation_bytes(space: gym.Space) -> int:
    """Bytes of one observation of ``space`` (every array of a Dict / Tuple space added up)."""
    return sum(int(leaf.nbytes) for leaf in buffer_leaves(create_batch_buffer(space, 1)))


def check_budget(budget: float, name: str = "budget") -> None:
    """Refuse a budget below :data:`MIN_BUDGET`.

    :param budget: seconds.
    :param name: the parameter's name in the message (e.g. ``"argument --budget"``).
    :raises AutotuneError: if ``budget`` is too small (or not a number).
    """
    if not (is_number(budget) and budget >= MIN_BUDGET):
        given = format(budget, "g") if is_number(budget) else repr(budget)
        raise AutotuneError(
            f"{name}: {given} s is too small to measure anything: the minimum is {MIN_BUDGET:g} s (start-up of "
            "every layout, a few timed rounds each, and closing)"
        )


@dataclass
class AutotuneRow:
    """One layout's measurements.

    :param layout: the layout.
    :param status: ``"ok"``, ``"error"`` (``error`` says why) or ``"not built"`` (the budget ran out first).
    :param rates: env-steps/s of each round.
    :param startup_s: construction and first reset, in seconds.
    :param memory_mib: the RSS the layout added to this process tree (its processes and this process's
        growth), in MiB.
    :param x_plain: :attr:`env_steps_per_s` over the plain loop's.
    """

    layout: Layout
    status: str = "ok"
    error: str | None = None
    rates: list[float] = field(default_factory=list)
    startup_s: float | None = None
    memory_mib: float | None = None
    x_plain: float | None = None

    @property
    def env_steps_per_s(self) -> float | None:
        """The median of :attr:`rates` (None without a rate)."""
        return statistics.median(self.rates) if self.status == "ok" and self.rates else None


#: (header, right-aligned) of the table.
_HEADERS = [
    ("#", True),
    ("layout", False),
    ("env-steps/s", True),
    ("x plain", True),
    ("start-up s", True),
    ("memory MiB", True),
]


def _cell(value: float | None, spec: str) -> str:
    return format(value, spec) if is_number(value) else ""


@dataclass
class AutotuneResult:
    """What :func:`autotune` measured.

    :param env_id: the env.
    :param num_envs: envs per layout.
    :param budget: the time budget, in seconds.
    :param rows: every layout, ranked: the measured ones by env-steps/s (fastest first), then those that
        failed or were not built. The plain loop is among them as the reference.
    :param rounds: complete rounds of timing.
    :param wall_s: the wall time of the whole autotune, closing included.
    :param cores: usable cores.
    :param notes: remarks on the run (layouts left out, ties, errors).
    """

    env_id: str
    num_envs: int
    budget: float
    rows: list[AutotuneRow]
    rounds: int
    wall_s: float
    cores: int
    notes: list[str] = field(default_factory=list)

    @property
    def best(self) -> AutotuneRow | None:
        """The fastest vector-env layout (the plain loop is not one), or None if none was measured."""
        return next((row for row in self.rows if row.env_steps_per_s is not None and not row.layout.is_reference), None)

    @property
    def plain(self) -> AutotuneRow | None:
        """The plain loop's row."""
        return next((row for row in self.rows if row.layout.is_reference), None)

    def table(self) -> str:
        """The ranked table (Markdown, readable as text): layout, env-steps/s, ratio to the plain loop, start-up,
        memory; ``#`` is the rank among the vector-env layouts (``ref`` for the plain loop)."""
        lines, rank = [], 0
        for row in self.rows:
            rate = row.env_steps_per_s
            if row.layout.is_reference:
                number = "ref"
            elif rate is not None:
                rank += 1
                number = str(rank)
            else:
                number = "-"
            lines.append(
                [
                    number,
                    row.layout.label,
                    _cell(rate, ",.0f") if rate is not None else row.status,
                    _cell(row.x_plain, ".2f"),
                    _cell(row.startup_s, ".2f"),
                    _cell(row.memory_mib, ",.0f"),
                ]
            )
        return render_markdown([h for h, _ in _HEADERS], lines, [r for _, r in _HEADERS])

    def _measured(self, cls: str) -> list[AutotuneRow]:
        """The rows of the layouts of ``cls`` that have a rate, fastest first."""
        return [row for row in self.rows if row.layout.cls == cls and row.env_steps_per_s is not None]

    def advice(self) -> str | None:
        """Which layout to use, and why, in words a newcomer reads; None without a rate for the plain loop, for
        ``DummyVecEnv`` and for a layout with processes.

        From the rates measured: one env step's time in the plain loop; ``DummyVecEnv`` when it is the fastest
        vector env or within 5% of it (it starts no processes), with the ratio of the fastest layout with
        processes to it and, from the fastest ``SubprocVecEnv`` with two or more workers and no ``parent_envs``,
        the step time above which worker processes would pay on this machine (:meth:`_break_even_us`); else the
        fastest layout, with its ratio to ``DummyVecEnv``.

        :return: the advice, one or two sentences (the last without its period), or None.
        """
        plain, best, dummies = self.plain, self.best, self._measured("DummyVecEnv")
        plain_rate = None if plain is None else plain.env_steps_per_s
        others = [row for row in self.rows if row.layout.has_processes and row.env_steps_per_s is not None]
        if plain_rate is None or best is None or not dummies or not others:
            return None
        dummy_rate, best_rate = dummies[0].env_steps_per_s or 0.0, best.env_steps_per_s or 0.0
        if dummy_rate <= 0 or best_rate <= 0:
            return None
        step_us = 1e6 / plain_rate
        env = f"one {self.env_id} step takes {step_us:.1f} us here (in the plain loop)"
        if dummy_rate < (1 - _TIE) * best_rate:
            workers = "Ray actors" if best.layout.cls == "RayVecEnv" else "worker processes"
            return (
                f"use {best.layout.label}: {env}, enough work for {workers} stepping the envs in parallel to gain "
                f"more than passing every step between processes costs: {best_rate / dummy_rate:.2f}x DummyVecEnv's "
                "rate"
            )
        fastest = others[0]  # the rows are ranked
        if best.layout.cls == "DummyVecEnv":
            text = (
                f"use DummyVecEnv: {env}, too little work for worker processes to pay off, since every vector step "
                f"passes actions and results between processes and wakes them up: {fastest.layout.label} reached "
                f"{(fastest.env_steps_per_s or 0.0) / dummy_rate:.2f}x DummyVecEnv's rate"
            )
        else:
            text = (
                f"use DummyVecEnv: {env}, and {best.layout.label} was only {best_rate / dummy_rate - 1:.0%} faster, "
                "within the noise of a shared machine, while DummyVecEnv starts no processes"
            )
        pays = self._break_even_us(step_us)
        if pays is not None:
            text += (
                f". Worker processes pay for envs whose step takes more than about {float(f'{pays:.2g}'):,.0f} us "
                "on this machine (estimated from these rates), such as physics simulators, emulators or image "
                "processing"
            )
        return text

    def _break_even_us(self, step_us: float) -> float | None:
        """The env step time (us) above which the fastest ``SubprocVecEnv`` with ``W >= 2`` workers and no
        ``parent_envs`` would outrun ``DummyVecEnv``, or None without one: its time per vector step ``N / rate``
        less the env work spread over its workers ``N x step / W`` is taken as a fixed cost ``F``, and ``N x t =
        N x t / W + F`` gives ``t = F / (N (1 - 1 / W))``."""
        for row in self._measured("SubprocVecEnv"):
            kwargs = dict(row.layout.kwargs)
            workers = int(kwargs.get("n_workers") or 0)
            if workers < 2 or kwargs.get("parent_envs"):
                continue
            n = self.num_envs
            fixed_us = n * 1e6 / (row.env_steps_per_s or math.inf) - n * step_us / workers
            return fixed_us / (n * (1 - 1 / workers)) if fixed_us > 0 else None
        return None

    def machine_line(self) -> str:
        """The machine in one line: usable cores, CPU model, load average."""
        load = load_1m()
        return f"machine: {self.cores} usable cores (of {os.cpu_count()}), {cpu_model() or 'unknown CPU model'}" + (
            f", load average {load:.2f}" if load is not None else ""
        )

    def report(self) -> str:
        """What ``vecenv bench --autotune`` prints: a header line, the table, the constructor of the fastest
        layout, notes and the machine."""
        best = self.best
        lines = [
            f"{self.env_id}, {self.num_envs} envs: {self.rounds} rounds in {self.wall_s:.1f} s (budget "
            f"{self.budget:g} s); env-steps/s is the median over rounds",
            "",
            self.table(),
            "",
            f"fastest layout: {best.layout.constructor}" if best is not None else "fastest layout: none measured",
        ]
        advice = self.advice()
        if advice is not None:
            lines.append(
                textwrap.fill(f"advice: {advice}", width=_ADVICE_WIDTH, subsequent_indent="  ", break_on_hyphens=False)
            )
        lines += [f"note: {note}" for note in self.notes]
        lines.append(self.machine_line())
        return "\n".join(lines)


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

    def __init__(self, factory: WorkloadFactory, num_envs: int, action_space: gym.Space, cores: int, seed: int):
        self.env_fns = [factory] * num_envs
        self.num_envs = num_envs
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
            chunk, elapsed = warm_up(backend, pool, _WARMUP_S)
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
                elapsed = time_steps(running.backend, running.pool, running.iterations)
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
    :return: the ranked measurements; :attr:`AutotuneResult.best` is the fastest vector-env layout.
    :raises AutotuneError: for an unknown env id, an env that cannot be created, ``num_envs`` below 1 or a
        budget below :data:`MIN_BUDGET`, before anything is built.
    """
    start = time.perf_counter()
    num_envs = DEFAULT_NUM_ENVS if num_envs is None else num_envs
    if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
        raise AutotuneError(f"num_envs must be a positive integer, got {num_envs!r}")
    check_budget(budget)
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
    session = _Session(factory, num_envs, action_space, cores, seed)
    rounds = 0
    from tqdm import tqdm

    bar = tqdm(
        total=round(budget, 1),
        disable=not progress or None,
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
    return AutotuneResult(env_id, num_envs, budget, _ranked(rows), rounds, time.perf_counter() - start, cores, notes)


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
