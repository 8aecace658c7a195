"""What :func:`vecenv.bench.autotune.autotune` measured, and how it is reported: one row per layout
(:class:`AutotuneRow`), the ranked result (:class:`AutotuneResult`) with its table, the advice (which layout to
use, and why, from the rates measured) and the report that ``vecenv bench --autotune`` and ``vecenv run
--compare`` print.
"""

from __future__ import annotations

import math
import os
import statistics
import textwrap
from dataclasses import dataclass, field

from vecenv.bench.autotune_layouts import Layout
from vecenv.bench.machine import cpu_model, load_1m
from vecenv.bench.tables import is_number, render_markdown

__all__ = ["AutotuneResult", "AutotuneRow"]

#: Two layouts whose rates differ by less than this share are called a tie in the report.
_TIE = 0.05
#: Columns the advice of the report is wrapped to.
_ADVICE_WIDTH = 100


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
    """What :func:`~vecenv.bench.autotune.autotune` measured.

    :param env_id: the env.
    :param num_envs: envs per layout.
    :param budget: the time budget, in seconds.
    :param rows: every layout, ranked: the measured ones by env-steps/s (fastest first), then those that
        failed or were not built. The plain loop is among them as the reference.
    :param rounds: complete rounds of timing.
    :param wall_s: the wall time of the whole autotune, closing included.
    :param cores: usable cores.
    :param notes: remarks on the run (layouts left out, ties, errors).
    :param trainer_us: microseconds of a trainer's work after each vector step, in every layout's timing (the
        rates count it: env-steps per second of stepping and that work together).
    """

    env_id: str
    num_envs: int
    budget: float
    rows: list[AutotuneRow]
    rounds: int
    wall_s: float
    cores: int
    notes: list[str] = field(default_factory=list)
    trainer_us: float = 0.0

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
        step_us = max(0.0, 1e6 / plain_rate - self.trainer_us / self.num_envs)  # the trainer's share left out
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
        less the trainer's work and the env work spread over its workers ``N x step / W`` is taken as a fixed cost
        ``F``, and ``N x t = N x t / W + F`` gives ``t = F / (N (1 - 1 / W))``."""
        for row in self._measured("SubprocVecEnv"):
            kwargs = dict(row.layout.kwargs)
            workers = int(kwargs.get("n_workers") or 0)
            if workers < 2 or kwargs.get("parent_envs"):
                continue
            n = self.num_envs
            fixed_us = n * 1e6 / (row.env_steps_per_s or math.inf) - self.trainer_us - n * step_us / workers
            return fixed_us / (n * (1 - 1 / workers)) if fixed_us > 0 else None
        return None

    def machine_line(self) -> str:
        """The machine in one line: usable cores, CPU model, load average."""
        load = load_1m()
        cores = f"{self.cores} usable core{'' if self.cores == 1 else 's'} (of {os.cpu_count()})"
        return f"machine: {cores}, {cpu_model() or 'unknown CPU model'}" + (
            f", load average {load:.2f}" if load is not None else ""
        )

    def report(self) -> str:
        """What ``vecenv bench --autotune`` prints: a header line, the table, the constructor of the fastest
        layout, notes and the machine."""
        best = self.best
        trainer = (
            f", with {self.trainer_us:g} us of a trainer's work (one busy core) after each vector step"
            if self.trainer_us
            else ""
        )
        lines = [
            f"{self.env_id}, {self.num_envs} envs: {self.rounds} rounds in {self.wall_s:.1f} s (budget "
            f"{self.budget:g} s); env-steps/s is the median over rounds{trainer}",
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
