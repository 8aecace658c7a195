"""``vecenv bench --autotune``: it ranks the faster layout first on envs with opposite needs, keeps to its budget,
prints the table, the constructor to paste and the advice (checked on fixed rates), and refuses what it cannot do
in one line with exit status 2; ``vecenv run --compare`` (what ``make demo`` runs) prints three of its layouts.

The envs are the benchmark's own CPU-bound env (``vecenv/Cpu200us-v0``, registered by
:mod:`vecenv.bench.workloads`, whose factory re-registers it in every worker process) with two amounts of
work per step: none (a cheap env with 8 float32 observations, where the vector env's own cost decides) and a
few milliseconds of pure Python (where running envs in parallel decides). Ray is left out (its start alone
takes several seconds); the whole file takes about half a minute on two cores.

The rankings are timing results on a machine that may be shared: the cheap env's margin is several times, the
busy env's at most the two cores' 2x. Where the busy env's ranking is upset, the test checks that two processes
still run twice as fast as one (other sessions' processes can take a core from this whole process tree: the
scheduler shares the CPUs between sessions); it is skipped when they do not, else measured once more.
"""

from __future__ import annotations

import math
import multiprocessing as mp
import re
import time
from typing import Any, NamedTuple

import pytest

from tests.test_cli import _assert_one_line_error, _run_main
from vecenv.bench import autotune_layouts
from vecenv.bench.autotune import (
    LARGE_OBS_BYTES,
    MIN_BUDGET,
    PLAIN,
    RAY_MIN_BUDGET,
    AutotuneError,
    AutotuneResult,
    AutotuneRow,
    Layout,
    autotune,
    check_budget,
    compared_layouts,
    observation_bytes,
    plan_layouts,
)
from vecenv.bench.workloads import CPU_ENV_ID, ImageEnv, burn, calibrate_cpu_iterations
from vecenv.cli import main
from vecenv.workers.spin import usable_cores

#: Seconds over its budget that an autotune may take: the reserve for closing is an estimate.
CLOSE_TOLERANCE_S = 1.0
#: Pure-Python CPU time of one step of the busy env, in microseconds.
BUSY_STEP_US = 3000.0
NUM_ENVS = 4
#: Below this, other processes leave this test fewer than two cores, and the busy env's ranking is not tested.
MIN_PARALLEL_SPEEDUP = 1.5
CORES = usable_cores()
TABLE_HEADER = re.compile(r"^\| +# \| layout +\| env-steps/s \| x plain \| start-up s \| memory MiB \|$", re.MULTILINE)


class Run(NamedTuple):
    """An autotune of the test env, its wall time, and the processes it started that were still alive after it."""

    result: AutotuneResult
    wall_s: float
    left_alive: set[Any]


def _timed_autotune(env_kwargs: dict[str, Any], budget: float) -> Run:
    before = set(mp.active_children())
    start = time.perf_counter()
    result = autotune(
        CPU_ENV_ID, env_kwargs=env_kwargs, num_envs=NUM_ENVS, budget=budget, progress=False, include_ray=False
    )
    return Run(result, time.perf_counter() - start, set(mp.active_children()) - before)


def _rank(result: AutotuneResult, label: str) -> int:
    """The place of ``label`` in the ranking; it must have been measured."""
    labels = [row.layout.label for row in result.rows]
    assert label in labels, labels
    assert result.rows[labels.index(label)].status == "ok", result.report()
    return labels.index(label)


def _check_statuses(result: AutotuneResult) -> None:
    """No layout failed; the last ones may not have been built when start-up took half of the budget (a slow or
    busy machine)."""
    assert all(row.status in ("ok", "not built") for row in result.rows), result.report()


def _busy_ranking(result: AutotuneResult) -> tuple[int, int]:
    return _rank(result, "SubprocVecEnv(n_workers=2)"), _rank(result, "DummyVecEnv")


def _rates(result: AutotuneResult) -> str:
    return ", ".join(f"{row.layout.label}: {row.env_steps_per_s or 0:,.0f}" for row in result.rows)


@pytest.fixture(scope="module")
def cheap() -> Run:
    """A trivial step and 32-byte observations: the vector env's own cost per step decides."""
    return _timed_autotune({"iterations": 0}, budget=8.0)


@pytest.fixture(scope="module")
def busy() -> Run:
    """A few milliseconds of pure-Python CPU per step: running envs on both cores decides."""
    return _timed_autotune({"iterations": _busy_iterations()}, budget=10.0)


def _busy_iterations() -> int:
    return calibrate_cpu_iterations(BUSY_STEP_US, trials=3)


def _burn_in_processes(count: int, iterations: int) -> float:
    """Wall time of ``count`` processes that each burn ``iterations`` rounds of CPU at the same time."""
    ctx = mp.get_context("forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn")
    processes = [ctx.Process(target=burn, args=(iterations,)) for _ in range(count)]
    start = time.perf_counter()
    for process in processes:
        process.start()
    for process in processes:
        process.join()
    return time.perf_counter() - start


def _parallel_speedup() -> float:
    """How much more CPU two processes get than one, now: about 2 on two idle cores."""
    iterations = 100 * _busy_iterations()  # about 0.3 s
    return 2 * _burn_in_processes(1, iterations) / _burn_in_processes(2, iterations)


def test_cheap_env_ranks_dummy_above_every_subproc_layout(cheap: Run) -> None:
    result = cheap.result
    _check_statuses(result)
    dummy = _rank(result, "DummyVecEnv")
    subproc = [i for i, row in enumerate(result.rows) if row.layout.cls == "SubprocVecEnv" and row.status == "ok"]
    assert subproc and all(dummy < i for i in subproc), _rates(result)
    assert result.best is not None and result.best.layout.label == "DummyVecEnv"


@pytest.mark.skipif(CORES < 2, reason="needs two usable cores")
def test_cpu_heavy_env_ranks_two_workers_above_dummy(busy: Run) -> None:
    result = busy.result
    _check_statuses(result)
    two_workers, dummy = _busy_ranking(result)
    if two_workers > dummy:  # upset by other processes?
        first = _rates(result)
        speedup = _parallel_speedup()
        if speedup < MIN_PARALLEL_SPEEDUP:
            pytest.skip(f"two processes run only {speedup:.2f}x as fast as one here now (busy machine); got {first}")
        result = _timed_autotune({"iterations": _busy_iterations()}, budget=10.0).result
        two_workers, dummy = _busy_ranking(result)
        assert two_workers < dummy, f"first: {first}; second: {_rates(result)}; two processes: {speedup:.2f}x"
    assert result.best is not None and result.best.layout.cls == "SubprocVecEnv", _rates(result)


@pytest.mark.parametrize("which", ["cheap", "busy"])
def test_finishes_within_its_budget_and_leaves_no_process(which: str, request: pytest.FixtureRequest) -> None:
    """The whole call (probe, start-up, rounds, closing) takes at most its budget plus CLOSE_TOLERANCE_S, and every
    worker process it started has ended when it returns."""
    result, wall, left_alive = request.getfixturevalue(which)
    assert wall <= result.budget + CLOSE_TOLERANCE_S, (wall, result.report())
    assert result.wall_s <= wall
    assert result.rounds >= 3, result.report()
    assert not left_alive


def test_rows_have_every_measurement(cheap: Run) -> None:
    result = cheap.result
    plain = result.plain
    assert plain is not None and plain.x_plain == pytest.approx(1.0)
    for row in result.rows:
        if row.status == "not built":
            continue
        assert row.status == "ok" and len(row.rates) >= result.rounds
        assert row.env_steps_per_s is not None and row.env_steps_per_s > 0
        assert row.startup_s is not None and row.startup_s >= 0
        assert row.memory_mib is not None and row.memory_mib >= 0
    rates = [row.env_steps_per_s or 0.0 for row in result.rows]
    assert rates == sorted(rates, reverse=True)


def test_plan_follows_the_cores_the_observation_size_and_ray() -> None:
    labels = [layout.label for layout in plan_layouts(8, 32, with_ray=False)]
    expected = ["plain loop (reference)", "DummyVecEnv"]
    expected += [f"SubprocVecEnv(n_workers={k})" for k in range(1, min(CORES, 8) + 1)]
    if 4 <= CORES <= 8:  # one worker per core, nobody spinning
        expected.append(f"SubprocVecEnv(n_workers={CORES}, wait_mode='block')")
    if CORES > 1:
        expected.append(f"SubprocVecEnv(n_workers={CORES - 1}, parent_envs={8 // CORES})")
    assert labels == expected
    # no more workers than envs, no parent share without an env for this process per core
    assert [layout.label for layout in plan_layouts(1, 32, with_ray=False)] == [
        "plain loop (reference)",
        "DummyVecEnv",
        "SubprocVecEnv(n_workers=1)",
    ]
    large = plan_layouts(8, LARGE_OBS_BYTES + 1, with_ray=True)
    assert large[-2].label == f"SubprocVecEnv(n_workers={min(CORES, 8)}, shared_memory=False)"
    assert large[-1].constructor == "RayVecEnv(env_fns)"
    assert observation_bytes(ImageEnv().observation_space) == 84 * 84 * 4 > LARGE_OBS_BYTES


@pytest.mark.parametrize(("cores", "envs", "blocking"), [(16, 64, True), (4, 8, True), (16, 8, False), (2, 8, False)])
def test_plan_tries_one_worker_per_core_without_spinning_on_4_cores_or_more(
    monkeypatch: pytest.MonkeyPatch, cores: int, envs: int, blocking: bool
) -> None:
    monkeypatch.setattr(autotune_layouts, "_cores", lambda: cores)
    layouts = plan_layouts(envs, 32, with_ray=False)
    block = [layout for layout in layouts if ("wait_mode", "block") in layout.kwargs]
    if blocking:  # the default layout (one worker per core), its workers blocking for requests
        assert [layout.kwargs for layout in block] == [(("n_workers", cores), ("wait_mode", "block"))]
        assert block[0].constructor == f"SubprocVecEnv(env_fns, n_workers={cores}, wait_mode='block')"
    else:  # fewer envs than cores: the default layout's workers and this process spin, not the workers alone
        assert block == []
    assert [layout.kwargs for layout in layouts if layout.cls == "SubprocVecEnv"][: min(cores, envs)] == [
        (("n_workers", k),) for k in range(1, min(cores, envs) + 1)
    ]


def test_budget_and_env_are_checked_before_anything_starts() -> None:
    before = set(mp.active_children())
    check_budget(MIN_BUDGET)
    assert RAY_MIN_BUDGET > MIN_BUDGET
    with pytest.raises(AutotuneError, match=f"the minimum is {MIN_BUDGET:g} s"):
        autotune("CartPole-v1", budget=MIN_BUDGET - 1, progress=False)
    with pytest.raises(AutotuneError, match=r"budget: expected a finite number of seconds \(at least 5\), got inf"):
        check_budget(math.inf)
    with pytest.raises(AutotuneError, match="unknown env id 'NoSuchEnv-v0'"):
        autotune("NoSuchEnv-v0", budget=MIN_BUDGET, progress=False)
    with pytest.raises(AutotuneError, match="cannot create CartPole-v1"):
        autotune("CartPole-v1", env_kwargs={"foo": 1}, budget=MIN_BUDGET, progress=False)
    for bad in (-1.0, math.nan, math.inf, True):
        with pytest.raises(AutotuneError, match="trainer_us must be a finite number of microseconds >= 0"):
            autotune("CartPole-v1", budget=MIN_BUDGET, progress=False, trainer_us=bad)
    assert set(mp.active_children()) == before


# --- the command --------------------------------------------------------------------------------------


def test_command_prints_the_ranked_table_and_the_constructor(capsys: pytest.CaptureFixture[str]) -> None:
    before = set(mp.active_children())
    args = ["--autotune", CPU_ENV_ID, "--env-kwargs", '{"iterations": 0}', "-n", "2", "--budget", "5"]
    code, out, err = _run_main(capsys, "bench", *args)
    assert code == 0, err
    assert TABLE_HEADER.search(out), out
    assert re.search(r"^\| +ref \| plain loop \(reference\) +\| +[\d,]+ \| +1\.00 \|", out, re.MULTILINE), out
    assert re.search(r"^\| +1 \| DummyVecEnv +\|", out, re.MULTILINE), out
    assert re.search(r"^fastest layout: (DummyVecEnv|SubprocVecEnv|RayVecEnv)\(env_fns(, \w+=\w+)*\)$", out, re.M), out
    assert re.search(r"^machine: \d+ usable cores \(of \d+\), .+", out, re.MULTILINE), out
    assert out.startswith(f"{CPU_ENV_ID}, 2 envs: ")
    assert set(mp.active_children()) == before


def _one_line_error(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """Run ``vecenv bench ARGS``: exit status 2, nothing on stdout, one ``vecenv bench: error:`` line on stderr."""
    return _assert_one_line_error(*_run_main(capsys, "bench", *args), command="bench")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--autotune", "NoSuchEnv-v0"], "unknown env id 'NoSuchEnv-v0' (NameNotFound)"),
        (["--autotune", "CartPol-v1"], "did you mean: CartPole-v1"),
        (["--autotune", "Elsewhere/Pong-v5"], "no env of namespace 'Elsewhere' is registered; name the module that"),
        (["--autotune", "CartPole-v1", "--env-kwargs", "{bad"], "argument --env-kwargs: expected a JSON object"),
        (["--autotune", "CartPole-v1", "--env-kwargs", "[1]"], "argument --env-kwargs: expected a JSON object"),
        (["--autotune", "CartPole-v1", "--env-kwargs", '{"foo": 1}'], "cannot create CartPole-v1"),
        (["--autotune", "CartPole-v1", "--budget", "2"], f"the minimum is {MIN_BUDGET:g} s"),
        (["--autotune", "CartPole-v1", "-w", "cpu", "-b", "plain"], "--autotune does not take --workloads/-w, --back"),
        # options of the benchmark run given at their default values are refused too, not silently ignored (and
        # before the budget is checked: a budget too small stops a command that would ignore them)
        (["--autotune", "CartPole-v1", "--budget", "1", "-w", "cartpole,image,cpu"], "not take --workloads/-w (opt"),
        (["--autotune", "CartPole-v1", "--budget", "1", "-o", "benchmarks/results"], "not take --output-dir/-o (opt"),
        (["--autotune", "CartPole-v1", "--budget", "1", "--case-timeout", "300"], "not take --case-timeout (opt"),
        (["--autotune", "CartPole-v1", "--budget", "1", "--cpu-us", "200", "--n-workers", "1,4"], "--n-workers, --cpu"),
        (["--autotune", "CartPole-v1", "-n", "4,8"], "--autotune takes one number of envs, got 4,8"),
        (["--budget", "10"], "--env-kwargs, --budget and --trainer-us go with --autotune ENV_ID"),
        (["--trainer-us", "300"], "--env-kwargs, --budget and --trainer-us go with --autotune ENV_ID"),
    ],
)
def test_command_refuses_in_one_line(capsys: pytest.CaptureFixture[str], args: list[str], expected: str) -> None:
    line = _one_line_error(capsys, *args)
    assert expected in line, line


@pytest.mark.parametrize("value", ["-1", "inf", "nan", "x"])
def test_trainer_time_must_be_a_finite_number_of_microseconds(capsys: pytest.CaptureFixture[str], value: str) -> None:
    """argparse's ``vecenv bench: error:`` line naming the option, exit 2, no traceback."""
    with pytest.raises(SystemExit) as excinfo:
        main(["bench", "--autotune", "CartPole-v1", f"--trainer-us={value}"])
    assert excinfo.value.code == 2
    out, err = capsys.readouterr()
    assert out == "" and "Traceback" not in err
    assert (
        err.splitlines()[-1]
        == f"vecenv bench: error: argument --trainer-us: expected a finite number >= 0, got {value!r}"
    )


def test_unknown_env_id_suggests_checking_the_id_and_its_package(capsys: pytest.CaptureFixture[str]) -> None:
    line = _one_line_error(capsys, "--autotune", "NoSuchEnv-v0")
    assert line.endswith("(check the id, and that the package that registers it is installed)"), line


# --- the advice, and vecenv run --compare ------------------------------------------------------------------


def _result(rates: dict[Layout, float | None], num_envs: int = 8) -> AutotuneResult:
    """A result with these median rates (None: the layout failed), ranked as autotune ranks them."""
    rows = [
        AutotuneRow(layout, rates=[] if rate is None else [rate], status="ok" if rate is not None else "error")
        for layout, rate in sorted(rates.items(), key=lambda item: -(item[1] or 0.0))
    ]
    return AutotuneResult("Env-v0", num_envs, 10.0, rows, rounds=1, wall_s=10.0, cores=2)


PLAIN_LOOP, DUMMY = Layout(PLAIN), Layout("DummyVecEnv")
TWO_WORKERS, ONE_WORKER = Layout("SubprocVecEnv", (("n_workers", 2),)), Layout("SubprocVecEnv", (("n_workers", 1),))


def test_advice_for_a_cheap_env_is_dummy_with_the_step_time_where_workers_pay() -> None:
    """Plain loop 100,000 env-steps/s: 10 us a step. Two workers: 8 envs in 400 us per vector step, of which
    8 x 10 / 2 = 40 us of env work each, so 360 us of fixed cost; they pay once 8 x t > 8 x t / 2 + 360: t > 90 us."""
    result = _result({PLAIN_LOOP: 100_000, DUMMY: 80_000, TWO_WORKERS: 20_000, ONE_WORKER: 15_000})
    assert result.advice() == (
        "use DummyVecEnv: one Env-v0 step takes 10.0 us here (in the plain loop), too little work for worker "
        "processes to pay off, since every vector step passes actions and results between processes and wakes them "
        "up: SubprocVecEnv(n_workers=2) reached 0.25x DummyVecEnv's rate. Worker processes pay for envs whose step "
        "takes more than about 90 us on this machine (estimated from these rates), such as physics simulators, "
        "emulators or image processing"
    )
    report = result.report().splitlines()
    start = next(i for i, line in enumerate(report) if line.startswith("advice: "))
    assert report[start - 1] == "fastest layout: DummyVecEnv(env_fns)"
    paragraph = [report[start], *(line for line in report[start + 1 :] if line.startswith("  "))]
    assert all(len(line) <= 100 for line in paragraph)
    assert " ".join(line.strip() for line in paragraph) == f"advice: {result.advice()}"


def test_a_trainers_work_is_left_out_of_the_step_time_and_the_fixed_cost() -> None:
    """With 400 us of a trainer's work after each vector step of 8 envs: the plain loop's 8 steps of 10 us and
    the trainer's 400 us make 480 us a vector step (16,667 env-steps/s), and the two workers' 400 us + 400 us
    (10,000 env-steps/s) leave the same 360 us of fixed cost as without a trainer: the same advice."""
    result = _result({PLAIN_LOOP: 8e6 / 480, DUMMY: 8e6 / 500, TWO_WORKERS: 8e6 / 800})
    result.trainer_us = 400.0
    advice = result.advice() or ""
    assert advice.startswith("use DummyVecEnv: one Env-v0 step takes 10.0 us here (in the plain loop)"), advice
    assert "more than about 90 us on this machine" in advice, advice
    assert result.report().startswith(
        "Env-v0, 8 envs: 1 rounds in 10.0 s (budget 10 s); env-steps/s is the median over rounds, with 400 us of "
        "a trainer's work (one busy core) after each vector step\n"
    )


def test_advice_for_an_expensive_env_is_the_fastest_layout_with_processes() -> None:
    result = _result({PLAIN_LOOP: 1_000, DUMMY: 950, TWO_WORKERS: 1_800, ONE_WORKER: 900})
    assert result.advice() == (
        "use SubprocVecEnv(n_workers=2): one Env-v0 step takes 1000.0 us here (in the plain loop), enough work for "
        "worker processes stepping the envs in parallel to gain more than passing every step between processes "
        "costs: 1.89x DummyVecEnv's rate"
    )


def test_advice_prefers_dummy_within_five_percent_and_needs_the_rates() -> None:
    tie = _result({PLAIN_LOOP: 100_000, DUMMY: 80_000, TWO_WORKERS: 82_000})
    advice = tie.advice() or ""
    assert tie.best is not None and tie.best.layout == TWO_WORKERS
    assert advice.startswith(
        "use DummyVecEnv: one Env-v0 step takes 10.0 us here (in the plain loop), and SubprocVecEnv(n_workers=2) was "
        "only 2% faster, within the noise of a shared machine, while DummyVecEnv starts no processes. "
    ), advice
    # one worker (one core) tells nothing about when several pay
    assert "Worker processes pay" not in (
        _result({PLAIN_LOOP: 100_000, DUMMY: 80_000, ONE_WORKER: 20_000}).advice() or ""
    )
    assert _result({PLAIN_LOOP: 100_000, DUMMY: None, TWO_WORKERS: 20_000}).advice() is None
    assert _result({PLAIN_LOOP: 100_000, DUMMY: 80_000}).advice() is None
    assert _result({PLAIN_LOOP: None, DUMMY: 80_000, TWO_WORKERS: 20_000}).advice() is None


def test_compared_layouts_follow_the_run() -> None:
    labels = [layout.label for layout in compared_layouts(8)]
    assert labels == ["plain loop (reference)", "DummyVecEnv", f"SubprocVecEnv(n_workers={min(CORES, 8)})"]
    assert compared_layouts(2, {"n_workers": 3})[2].label == "SubprocVecEnv(n_workers=2)"
    parent = compared_layouts(4, {"parent_envs": 2, "wait_mode": "block"})[2]
    assert parent.label == f"SubprocVecEnv(n_workers={max(1, min(CORES - 1, 2))}, parent_envs=2, wait_mode='block')"


def test_run_compare_prints_the_three_layouts_and_the_advice(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``vecenv run ... --compare`` (what ``make demo`` runs): after the summary, the three layouts on the run's envs
    (the subproc one with the run's options), ranked, the fastest, and the advice naming one of them."""
    import vecenv.bench.autotune as autotune_module

    monkeypatch.setattr(autotune_module, "COMPARE_BUDGET", MIN_BUDGET)
    before = set(mp.active_children())
    args = ["run", "CartPole-v1", "-n", "2", "--steps", "20", "-b", "subproc", "--n-workers", "1", "--compare"]
    code, out, err = _run_main(capsys, *args)
    assert code == 0, err
    summary, compare = out.split("\n\ncompare: ", 1)
    assert summary.startswith("env_id:") and "env_steps:           20" in summary
    assert compare.startswith("the same 2 envs, without wrappers, in a plain loop, DummyVecEnv and SubprocVecEnv")
    assert re.search(r"^CartPole-v1, 2 envs: \d+ rounds in [\d.]+ s \(budget 5 s\)", compare, re.MULTILINE), compare
    assert TABLE_HEADER.search(compare), compare
    rows = re.findall(r"^\| +(ref|\d) \| (\S[^|]*?) +\| +([\d,]+) \|", compare, re.MULTILINE)
    assert sorted(label for _, label, _ in rows) == [
        "DummyVecEnv",
        "SubprocVecEnv(n_workers=1)",
        "plain loop (reference)",
    ]
    assert sorted(rank for rank, _, _ in rows) == ["1", "2", "ref"]
    fastest = next(label for rank, label, _ in rows if rank == "1")
    constructors = {
        "DummyVecEnv": "DummyVecEnv(env_fns)",
        "SubprocVecEnv(n_workers=1)": "SubprocVecEnv(env_fns, n_workers=1)",
    }
    assert f"\nfastest layout: {constructors[fastest]}\n" in compare, compare
    advice = re.search(r"^advice: (.*?)\nmachine: ", compare, re.MULTILINE | re.DOTALL)
    assert advice is not None, compare
    text = " ".join(advice.group(1).split())
    assert re.match(r"use (DummyVecEnv|SubprocVecEnv\(n_workers=1\)): one CartPole-v1 step takes [\d.]+ us here", text)
    assert set(mp.active_children()) == before
