"""The ``vecenv bench`` command (also ``python benchmarks/run_bench.py`` and ``python -m vecenv.bench``).

:func:`add_bench_parser` adds the ``bench`` sub-command to the ``vecenv`` parser and :func:`cmd_bench` runs
it; :func:`main` is a stand-alone entry point with the same options. User errors (missing pandas /
matplotlib, an unknown backend, an ``--output-dir`` that cannot be created) print one line
``vecenv bench: error: ...`` and exit with status 2, before any case runs; the exit status is 1 when a
case failed, else 0.

``vecenv bench --autotune ENV_ID`` (:mod:`vecenv.bench.autotune`) instead measures the vector-env layouts
of one env side by side within ``--budget`` seconds and prints them ranked; its user errors (unknown env
id, an env that cannot be created, a budget too small, options of the benchmark run) exit with status 2
the same way, and it exits with status 1 when a layout failed.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from vecenv.bench.autotune import DEFAULT_BUDGET, DEFAULT_NUM_ENVS, AutotuneError, autotune, check_budget
from vecenv.bench.report import OUTPUT_FILES, write_outputs
from vecenv.bench.runner import (
    DEFAULT_N_WORKERS,
    BenchConfig,
    backend_spec,
    default_backend_names,
    run_benchmark,
)
from vecenv.bench.workloads import WORKLOADS
from vecenv.cli_args import (
    EXIT_CASE_FAILED,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    OUTPUT_FILE,
    OUTPUT_FOLDER,
    UsageError,
    check_output_path,
    comma_list,
    json_object,
    non_negative_float,
    os_reason,
    path_error,
    positive_float,
    positive_int,
)
from vecenv.optional import BenchDependencyError, require_bench

__all__ = ["Terminated", "add_arguments", "add_bench_parser", "build_parser", "cmd_bench", "main"]

DEFAULT_OUTPUT_DIR = "benchmarks/results"
DEFAULT_CPU_US = 200.0
DEFAULT_CASE_TIMEOUT = 300.0
#: Settings of a normal run and of ``--quick`` (used for options not given on the command line).
NORMAL = {"num_envs": [1, 4, 16, 64], "repeats": 5, "seconds": 0.5, "warmup": 0.2}
QUICK = {"num_envs": [1, 4], "repeats": 2, "seconds": 0.05, "warmup": 0.02}
#: Defaults of the other options of the benchmark run, whose parsed value is None when not given (so that
#: ``--autotune`` can tell an option given at its default value from one not given).
DEFAULTS: dict[str, Any] = {
    "workloads": list(WORKLOADS),
    "n_workers": list(DEFAULT_N_WORKERS),
    "output_dir": DEFAULT_OUTPUT_DIR,
    "cpu_us": DEFAULT_CPU_US,
    "case_timeout": DEFAULT_CASE_TIMEOUT,
}
#: The signals that end ``vecenv bench`` through :class:`Terminated` (where their action is the default one).
TERMINATING_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))

DESCRIPTION = """\
Measure env-steps/s, start-up time and memory of vecenv's DummyVecEnv and SubprocVecEnv against
Stable-Baselines3's and Gymnasium's vector envs and a plain in-process loop, on three workloads
(cartpole: CartPole-v1; image: 84x84x4 uint8 observations, cheap step; cpu: ~200 us of Python CPU per
step). Prints a Markdown table and writes bench.json, bench.md, bench.png (every backend against N) and
bench-speedup.png (a few backends over the plain loop at the largest N) to the output directory.
Each case runs in a fresh Python process. SB3 backends need stable-baselines3 and torch, and are
skipped (with a note) without them.

--autotune ENV_ID instead times the vector-env layouts of one env (DummyVecEnv, SubprocVecEnv with each
number of workers and with parent_envs, RayVecEnv with a large enough budget) side by side within
--budget seconds, and prints them ranked with the constructor of the fastest."""


def _workload(text: str) -> str:
    if text not in WORKLOADS:
        raise ValueError(f"unknown workload {text!r} (choose from {', '.join(WORKLOADS)})")
    return text


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the options of ``vecenv bench`` to ``parser``."""
    parser.add_argument(
        "--workloads",
        "-w",
        type=comma_list(_workload, "workloads"),
        default=None,
        metavar="LIST",
        help=f"comma-separated workloads among {','.join(WORKLOADS)} (default: all)",
    )
    parser.add_argument(
        "--num-envs",
        "-n",
        type=comma_list(positive_int, "positive integers"),
        default=None,
        metavar="LIST",
        help=f"comma-separated numbers of envs (default: 1,4,16,64; --quick: 1,4; --autotune: one number, default "
        f"{DEFAULT_NUM_ENVS})",
    )
    parser.add_argument(
        "--backends",
        "-b",
        type=comma_list(str, "backend names"),
        default=None,
        metavar="LIST",
        help="comma-separated backends (default: every available one; see --list-backends)",
    )
    parser.add_argument(
        "--n-workers",
        type=comma_list(positive_int, "positive integers"),
        default=None,
        metavar="LIST",
        help="n_workers of the extra vecenv-subproc-w<K> variants, when SubprocVecEnv supports it (default: "
        f"{','.join(map(str, DEFAULT_N_WORKERS))})",
    )
    parser.add_argument(
        "--repeats",
        "-r",
        type=positive_int,
        default=None,
        metavar="R",
        help="timed repeats per case; the median is reported (default: 5; --quick: 2)",
    )
    parser.add_argument(
        "--seconds",
        "-s",
        type=positive_float,
        default=None,
        metavar="S",
        help="target duration of one repeat, in seconds (default: 0.5; --quick: 0.05)",
    )
    parser.add_argument(
        "--warmup",
        type=positive_float,
        default=None,
        metavar="S",
        help="warm-up before timing, in seconds (default: 0.2; --quick: 0.02)",
    )
    parser.add_argument(
        "--output-dir",
        "-o",
        default=None,
        metavar="DIR",
        help=f"where to write bench.json, bench.md and the charts; created if missing (default: {DEFAULT_OUTPUT_DIR})",
    )
    parser.add_argument("--quick", action="store_true", help="tiny settings (N=1,4, short repeats), for smoke tests")
    parser.add_argument(
        "--cpu-us",
        type=positive_float,
        default=None,
        metavar="US",
        help=f"CPU time per step of the cpu workload, in microseconds (default: {DEFAULT_CPU_US:g})",
    )
    parser.add_argument(
        "--case-timeout",
        type=positive_float,
        default=None,
        metavar="S",
        help=f"kill a case that takes longer than this, in seconds (default: {DEFAULT_CASE_TIMEOUT:g})",
    )
    parser.add_argument(
        "--no-preload",
        dest="preload",
        action="store_false",
        help="do not preload the backend's library in the forkserver: every worker imports it itself "
        "(SB3 workers then each import torch; sb3-subproc is skipped where that would not fit in memory)",
    )
    parser.add_argument(
        "--in-process",
        dest="isolate",
        action="store_false",
        help="run every case in this process instead of a fresh process per case (faster, less isolated)",
    )
    parser.add_argument("--list-backends", action="store_true", help="list the backends and whether they can run")
    group = parser.add_argument_group(
        "autotune", "time the vector-env layouts of one env side by side (also takes --num-envs N)"
    )
    group.add_argument(
        "--autotune",
        metavar="ENV_ID",
        default=None,
        help="the registered Gymnasium env id to find the fastest layout for (gymnasium.make(ENV_ID, "
        "**ENV_KWARGS)); ALE/... ids import ale-py's envs, MODULE:ENV_ID imports MODULE first",
    )
    group.add_argument(
        "--env-kwargs",
        default=None,  # parsed by _cmd_autotune, so that bad JSON is a one-line error
        metavar="JSON",
        help="with --autotune: keyword arguments for gymnasium.make, as a JSON object",
    )
    group.add_argument(
        "--budget",
        type=positive_float,
        default=None,
        metavar="SECONDS",
        help=f"with --autotune: seconds the whole run may take, closing included (default: {DEFAULT_BUDGET:g})",
    )
    group.add_argument(
        "--trainer-us",
        type=non_negative_float,
        default=None,
        metavar="US",
        help="with --autotune: microseconds of a trainer's own work after each vector step (a busy loop on one "
        "core, as a single-threaded policy and update), to rank the layouts as they would step inside that "
        "trainer (default: 0)",
    )
    parser.set_defaults(handler=cmd_bench, prog=parser.prog)


def add_bench_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``bench`` sub-command to the ``vecenv`` command's sub-parsers; returns its parser."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "bench",
        help="benchmark vecenv against Stable-Baselines3, Gymnasium and a plain loop, or find the fastest vector "
        "env for one env (--autotune ENV_ID)",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(parser)
    return parser


def build_parser(prog: str = "vecenv bench") -> argparse.ArgumentParser:
    """A stand-alone parser with the options of ``vecenv bench``."""
    parser = argparse.ArgumentParser(
        prog=prog, description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_arguments(parser)
    return parser


def _pick(args: argparse.Namespace, name: str) -> Any:
    """The value of option ``name``: as given, else its default (of ``--quick`` where it has one)."""
    value = getattr(args, name, None)
    if value is not None:
        return value
    if name in DEFAULTS:
        return DEFAULTS[name]
    return (QUICK if args.quick else NORMAL)[name]


def _list_backends(n_workers: Sequence[int]) -> int:
    for name in default_backend_names(n_workers):
        spec = backend_spec(name)
        reason = spec.unavailable_reason()
        status = "available" if reason is None else f"unavailable: {reason}"
        print(f"{name:<22} {spec.label} [{status}]")
    return 0


def _config(args: argparse.Namespace) -> BenchConfig:
    backends = args.backends
    n_workers = _pick(args, "n_workers")
    if backends is not None:
        if backends == ["all"]:
            backends = None
        elif "all" in backends:
            raise UsageError(
                f"argument --backends/-b: 'all' (every available backend) must be given alone, got "
                f"{','.join(backends)!r}"
            )
        else:
            for name in backends:
                try:
                    backend_spec(name)
                except KeyError:
                    known = ", ".join(default_backend_names(n_workers))
                    raise UsageError(
                        f"unknown backend {name!r}: choose from {known}, vecenv-subproc-w<K>, or all"
                    ) from None
    return BenchConfig(
        workloads=list(dict.fromkeys(_pick(args, "workloads"))),
        num_envs=sorted(set(_pick(args, "num_envs"))),
        backends=list(dict.fromkeys(backends)) if backends is not None else None,
        n_workers=list(dict.fromkeys(n_workers)),
        repeats=_pick(args, "repeats"),
        seconds=_pick(args, "seconds"),
        warmup_seconds=_pick(args, "warmup"),
        cpu_us=_pick(args, "cpu_us"),
        isolate=args.isolate,
        preload=args.preload,
        case_timeout=_pick(args, "case_timeout"),
    )


class Terminated(SystemExit):
    """Raised in ``vecenv bench``'s main thread when the command receives SIGTERM or SIGHUP, so that what a run
    started is ended on the way out (a case process and its temporary folder) as on Ctrl-C; its ``code`` is
    ``128 + the signal's number``, the exit status of a process ended by that signal."""

    @property
    def signal_name(self) -> str:
        """The signal's name, e.g. ``"SIGTERM"``."""
        return signal.Signals(int(self.code or 0) - 128).name


@contextlib.contextmanager
def _terminate_by_exception() -> Iterator[None]:
    """While in the block, SIGTERM and SIGHUP raise :class:`Terminated` in the main thread (once; a repeated signal
    is ignored while the first one's clean-up runs). Only signals whose action is the default one (ending the
    process at once) are changed, and only in the main thread; their actions are restored on the way out."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    raised = False

    def handler(signum: int, frame: object) -> None:
        nonlocal raised
        if not raised:
            raised = True
            raise Terminated(128 + signum)

    previous = {}
    try:
        for sig in TERMINATING_SIGNALS:
            if signal.getsignal(sig) is signal.SIG_DFL:
                previous[sig] = signal.signal(sig, handler)
        yield
    finally:
        for sig, action in previous.items():
            signal.signal(sig, action)


def cmd_bench(args: argparse.Namespace) -> int:
    """Run ``vecenv bench`` with parsed ``args``; print the table; return the exit status.

    SIGTERM and SIGHUP end the command as Ctrl-C does, through :class:`Terminated`: the running case process
    is ended and the temporary files are removed; it then prints ``vecenv: terminated by SIGTERM`` and returns
    ``128 + the signal's number`` (143 for SIGTERM).

    :return: 0, 1 if a case failed, 2 for a usage error or a missing dependency (one line on stderr), 128 + N
        after signal N (SIGTERM, SIGHUP).
    """
    try:
        with _terminate_by_exception():
            return _cmd_bench(args)
    except Terminated as exc:
        print(f"vecenv: terminated by {exc.signal_name}", file=sys.stderr)
        return int(exc.code or 0)


def _output_files(output_dir: str) -> list[str]:
    """The paths of the files ``vecenv bench`` writes in ``output_dir``."""
    return [os.path.join(output_dir, name) for name in OUTPUT_FILES]


def _cmd_bench(args: argparse.Namespace) -> int:
    """:func:`cmd_bench` without its signal handling."""
    prefix = f"{getattr(args, 'prog', 'vecenv bench')}: error:"
    if getattr(args, "autotune", None) is not None:
        return _cmd_autotune(args, prefix)
    if any(getattr(args, name, None) is not None for name in ("env_kwargs", "budget", "trainer_us")):
        print(f"{prefix} --env-kwargs, --budget and --trainer-us go with --autotune ENV_ID", file=sys.stderr)
        return EXIT_USAGE
    if args.list_backends:
        return _list_backends(_pick(args, "n_workers"))
    output_dir = _pick(args, "output_dir")
    try:
        require_bench("pandas")
        require_bench("matplotlib")
        config = _config(args)
        check_output_path("--output-dir/-o", output_dir, folder=True)
        for path in _output_files(output_dir):  # (an output file that is an existing folder, say)
            check_output_path("--output-dir/-o", path, folder=False)
    except (BenchDependencyError, UsageError) as exc:
        print(f"{prefix} {exc}", file=sys.stderr)
        return EXIT_USAGE

    run = run_benchmark(config)
    try:
        outputs = write_outputs(run, output_dir)
    except OSError as exc:
        if exc.filename is not None and os.fsdecode(exc.filename) in _output_files(output_dir):
            name = os.fsdecode(exc.filename)
            error = path_error("--output-dir/-o", name, OUTPUT_FILE, f"cannot write it: {os_reason(exc)}")
        else:
            error = path_error("--output-dir/-o", output_dir, OUTPUT_FOLDER, f"cannot write in it: {os_reason(exc)}")
        print(f"{prefix} {error}", file=sys.stderr)
        return EXIT_USAGE
    print(outputs["table"])
    print()
    print(outputs["targets_table"])
    for note in run.notes:
        print(f"note: {note}")
    failed = [r for r in run.records if r.get("status") != "ok"]
    for record in failed:
        print(f"error: {record['workload']} N={record['num_envs']} {record['backend']}: {record.get('error')}")
    written = [outputs["json"], outputs["markdown"], outputs["png"], outputs["speedup_png"]]
    paths = [path for path in written if path is not None]
    print(f"wrote {', '.join(paths[:-1])} and {paths[-1]} ({run.wall_s:.0f} s)")
    return EXIT_CASE_FAILED if failed else 0


def _autotune_conflicts(args: argparse.Namespace) -> list[str]:
    """The options of the benchmark run given with ``--autotune``: those whose value is not the parser's default
    (None for an option that takes a value, so that one given at its documented default value counts too)."""
    parser = build_parser()
    defaults = parser.parse_args([])
    own = {"autotune", "env_kwargs", "budget", "trainer_us", "num_envs", "help", "handler", "prog"}
    return [
        "/".join(action.option_strings)
        for action in parser._actions
        if action.dest not in own and getattr(args, action.dest, None) != getattr(defaults, action.dest, None)
    ]


def _cmd_autotune(args: argparse.Namespace, prefix: str) -> int:
    """``vecenv bench --autotune ENV_ID``: check the options, run :func:`~vecenv.bench.autotune.autotune`, print
    its report; 2 for a user error, 1 if a layout failed, else 0."""
    budget = DEFAULT_BUDGET if args.budget is None else args.budget
    try:
        conflicts = _autotune_conflicts(args)
        if conflicts:
            raise UsageError(
                f"--autotune does not take {', '.join(conflicts)} (options of the benchmark run); it takes "
                "--num-envs N, --env-kwargs JSON, --budget SECONDS and --trainer-us US"
            )
        if args.num_envs is not None and len(args.num_envs) != 1:
            raise UsageError(
                f"argument --num-envs/-n: --autotune takes one number of envs, got {','.join(map(str, args.num_envs))}"
            )
        check_budget(budget, "argument --budget")
        try:
            env_kwargs = None if args.env_kwargs is None else json_object(args.env_kwargs)
        except argparse.ArgumentTypeError as exc:
            raise UsageError(f"argument --env-kwargs: {exc}") from None
        result = autotune(
            args.autotune,
            env_kwargs=env_kwargs,
            num_envs=None if args.num_envs is None else args.num_envs[0],
            budget=budget,
            trainer_us=args.trainer_us or 0.0,
        )
    except (AutotuneError, UsageError) as exc:
        print(f"{prefix} {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(result.report())
    return EXIT_CASE_FAILED if any(row.status == "error" for row in result.rows) else 0


def main(argv: Sequence[str] | None = None, prog: str = "vecenv bench") -> int:
    """Stand-alone ``vecenv bench``: parse ``argv``, run, return the exit status (130 on Ctrl-C)."""
    args = build_parser(prog).parse_args(argv)
    try:
        return cmd_bench(args)
    except KeyboardInterrupt:
        print("vecenv: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
