"""The performance targets of vecenv, checked against the results of a ``vecenv bench`` run."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from vecenv.bench.tables import PLAIN, SB3_REFERENCE, is_number, render_markdown

__all__ = ["TargetResult", "check_targets", "targets_markdown"]


@dataclass(frozen=True)
class TargetResult:
    """One performance target and what this run measured for it.

    :param target: what is required.
    :param measured: the measured value(s), as text.
    :param passed: True / False, or None when the run did not measure it.
    """

    target: str
    measured: str
    passed: bool | None

    @property
    def verdict(self) -> str:
        """``PASS``, ``FAIL`` or ``n/a``."""
        return "n/a" if self.passed is None else ("PASS" if self.passed else "FAIL")


def _value(df: Any, workload: str, n: int, backend: str, column: str) -> float | None:
    rows = df[(df["workload"] == workload) & (df["num_envs"] == n) & (df["backend"] == backend)]
    rows = rows[rows["status"] == "ok"]
    if rows.empty:
        return None
    value = rows.iloc[0][column]
    return float(value) if is_number(value) else None


def _ratio_target(df: Any, workload: str, n: int, backend: str, reference: str, minimum: float) -> TargetResult:
    label = f"{workload} N={n}: {backend} >= {minimum:g}x {reference}"
    mine = _value(df, workload, n, backend, "env_steps_per_s")
    theirs = _value(df, workload, n, reference, "env_steps_per_s")
    if mine is None or theirs is None:
        return TargetResult(label, "not measured", None)
    ratio = mine / theirs
    return TargetResult(label, f"{ratio:.2f}x ({mine:,.0f} vs {theirs:,.0f} env-steps/s)", ratio >= minimum)


def _limit_target(df: Any, workload: str, n: int, backend: str, column: str, maximum: float, unit: str) -> TargetResult:
    label = f"{workload} N={n}: {backend} {column} < {maximum:g} {unit}"
    value = _value(df, workload, n, backend, column)
    if value is None:
        return TargetResult(label, "not measured", None)
    return TargetResult(label, f"{value:.3g} {unit}", value < maximum)


def _overhead_targets(
    df: Any, workload: str, mine: str, theirs: str, limit: float, limit_from: int
) -> list[TargetResult]:
    ns = sorted({int(n) for n in df[df["workload"] == workload]["num_envs"]})
    pairs = [
        (n, _value(df, workload, n, mine, "overhead_us"), _value(df, workload, n, theirs, "overhead_us")) for n in ns
    ]
    compared = [(n, a, b) for n, a, b in pairs if a is not None and b is not None]
    label = f"{workload}, every N: {mine} overhead < {theirs} overhead"
    if compared:
        text = ", ".join(f"N={n}: {a:.2f} vs {b:.2f}" for n, a, b in compared) + " us"
        below = TargetResult(label, text, all(a < b for _, a, b in compared))
    else:
        below = TargetResult(label, "not measured", None)
    label = f"{workload}, N >= {limit_from}: {mine} overhead < {limit:g} us"
    large = [(n, a) for n, a, _ in pairs if n >= limit_from and a is not None]
    if large:
        text = ", ".join(f"N={n}: {a:.2f}" for n, a in large) + " us"
        under = TargetResult(label, text, all(a < limit for _, a in large))
    else:
        under = TargetResult(label, "not measured", None)
    return [below, under]


def check_targets(df: Any) -> list[TargetResult]:
    """The performance targets of vecenv, checked against a results DataFrame with derived columns.

    "SubprocVecEnv" is ``vecenv-subproc`` (the default ``n_workers``); the throughput targets are also
    checked for ``vecenv-subproc-parent`` (``parent_envs``, opt-in). Targets whose cases were not run are
    reported as not measured.
    """
    subproc = "vecenv-subproc"
    results = [
        target
        for backend in (subproc, "vecenv-subproc-parent")
        for target in (
            _ratio_target(df, "cartpole", 64, backend, SB3_REFERENCE, 20),
            _ratio_target(df, "cartpole", 64, backend, PLAIN, 1.25),
            _ratio_target(df, "cpu", 16, backend, PLAIN, 1.5),
            _ratio_target(df, "image", 16, backend, "gym-async", 5),
        )
    ]
    # vecenv.gymnasium.AsyncVectorEnv must beat Gymnasium's own AsyncVectorEnv
    results.extend(
        _ratio_target(df, workload, 16, "vecenv-gym-async", "gym-async", 1) for workload in ("cartpole", "image", "cpu")
    )
    for workload in dict.fromkeys(df["workload"]):
        results.extend(_overhead_targets(df, str(workload), "vecenv-dummy", "sb3-dummy", 1.5, 16))
    results.append(_limit_target(df, "cartpole", 64, subproc, "startup_s", 2.0, "s"))
    results.append(_limit_target(df, "cartpole", 64, subproc, "peak_rss_mib", 1024, "MiB"))
    return results


def targets_markdown(targets: Sequence[TargetResult]) -> str:
    """The targets as a Markdown table."""
    rows = [[t.target, t.measured, t.verdict] for t in targets]
    return render_markdown(["target", "measured", "result"], rows, [False, False, False])
