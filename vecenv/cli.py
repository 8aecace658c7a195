"""The ``vecenv`` command (also ``python -m vecenv``).

``vecenv run`` steps a registered Gymnasium env (after importing the modules that register it:
:func:`vecenv.cli_args.resolve_env_id`), or a PettingZoo env given by its module (``mpe2.simple_spread_v3``:
:func:`vecenv.cli_args.is_env_module_path`), with random actions through a vector env and prints a summary;
``vecenv plot`` draws a learning curve from monitor files; ``vecenv bench`` is in :mod:`vecenv.bench.cli`.
User errors (unknown env id, bad option value or path, missing optional dependency) print one line
``vecenv <command>: error: ...`` naming the argument, what was expected and what was given, and exit with
status 2, without a traceback. An option of another backend than the one chosen (:data:`BACKEND_OPTIONS`)
is such an error: no option is silently ignored.

Output paths follow one rule: missing folders are created (the folder of an output file, or an output
folder and its parents); a path is refused, before anything runs, when that folder cannot be created or
written to, when an output file is an existing folder, or when an output folder is an existing file
(:func:`~vecenv.cli_args.check_output_path`; :mod:`vecenv.cli_args` holds what this command and
``vecenv bench`` share).

This module declares the commands and their options (:func:`build_parser`) and runs them (:func:`main`); what
``vecenv run`` does is in :mod:`vecenv.cli_run` (its summary in :mod:`vecenv.cli_summary`, ``--compare`` in
:mod:`vecenv.cli_compare`), ``vecenv plot`` in :mod:`vecenv.cli_plot`. Their public names are re-exported here.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys
from collections.abc import Sequence
from typing import Any

import gymnasium as gym

from vecenv.bench.cli import add_bench_parser
from vecenv.cli_args import (
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    UsageError,
    json_object,
    non_negative_int,
    positive_int,
)
from vecenv.cli_plot import MONITOR_CSV, cmd_plot
from vecenv.cli_run import (
    BACKEND_OPTIONS,
    BACKENDS,
    DEFAULT_PETTINGZOO_STEPS,
    DEFAULT_STEPS,
    DEFAULT_VIDEO_LENGTH,
    STATISTICS_FILE,
    cmd_run,
)
from vecenv.cli_summary import EpisodeStats
from vecenv.version import __version__

__all__ = [
    "BACKENDS",
    "BACKEND_OPTIONS",
    "DEFAULT_PETTINGZOO_STEPS",
    "DEFAULT_STEPS",
    "MONITOR_CSV",
    "STATISTICS_FILE",
    "EpisodeStats",
    "build_parser",
    "cmd_plot",
    "cmd_run",
    "main",
]


class _CommandParser(argparse.ArgumentParser):
    """The parser of a sub-command: an unknown option is reported with the sub-command's own usage.

    (A sub-parser of plain argparse hands unknown options to the top-level parser, which reports them
    with the usage of ``vecenv`` itself.)
    """

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        assert parsed is not None
        return parsed, extras


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``vecenv`` command: ``--version`` and the sub-commands run, plot and bench."""
    parser = argparse.ArgumentParser(
        prog="vecenv",
        description="Fast, robust vectorized RL environments.",
        epilog="vecenv bench --autotune ENV_ID times the vector-env layouts of one env (DummyVecEnv, SubprocVecEnv "
        "with each number of workers, RayVecEnv) and prints the constructor of the fastest. "
        "Each command's options: vecenv COMMAND --help.",
    )
    parser.add_argument("--version", action="version", version=f"vecenv {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_CommandParser)
    _add_run_parser(sub)
    _add_plot_parser(sub)
    add_bench_parser(sub)
    return parser


def _add_run_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``run`` sub-command to the ``vecenv`` command's sub-parsers; returns its parser."""
    run: argparse.ArgumentParser = subparsers.add_parser(
        "run",
        help="step a Gymnasium or PettingZoo env with random actions through a vector env and print a summary",
        description="Step ENV_ID with actions sampled from its action space through a vector env, "
        "then print env-steps/s and episode statistics.",
    )
    _add_run_env_arguments(run)
    _add_run_wrapper_arguments(run)
    run.set_defaults(handler=cmd_run, prog=run.prog)
    return run


def _add_run_env_arguments(parser: argparse.ArgumentParser) -> None:
    """``vecenv run``'s env, its vector env and the steps: ENV_ID, -n, -b, -s, --seed, --env-kwargs, the
    subproc backend's --start-method, --parent-envs and --wait-mode, --n-workers (subproc and ray) and --ray-address."""
    parser.add_argument(
        "env_id",
        nargs="?",
        default="CartPole-v1",
        metavar="ENV_ID",
        help="registered Gymnasium env id (ALE/... ids import ale-py's envs; MODULE:ENV_ID imports MODULE first, "
        "e.g. ale_py:ALE/Pong-v5), or a PettingZoo env module with a parallel_env function, as a dotted "
        "module path (e.g. mpe2.simple_spread_v3: N copies of the env, one row per agent) (default: %(default)s)",
    )
    parser.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE",
        help="import MODULE before making the env, in this process and in each worker: a package that registers "
        "Gymnasium envs when imported (repeatable)",
    )
    parser.add_argument(
        "--num-envs", "-n", type=positive_int, default=8, metavar="N", help="number of envs (default: %(default)s)"
    )
    parser.add_argument(
        "--backend",
        "-b",
        choices=BACKENDS,
        default="subproc",
        help="dummy: in this process; subproc: worker processes; ray: Ray actors, on this machine or the cluster of "
        "--ray-address (needs the ray extra) (default: %(default)s)",
    )
    parser.add_argument(
        "--steps",
        "-s",
        type=positive_int,
        default=None,
        metavar="S",
        help=f"total env-steps, rounded up to a multiple of N (default: {DEFAULT_STEPS}, or "
        f"{DEFAULT_PETTINGZOO_STEPS} for a PettingZoo env module, whose env-step steps all its agents)",
    )
    parser.add_argument(
        "--seed", type=non_negative_int, default=0, metavar="K", help="seed of envs and actions (default: %(default)s)"
    )
    parser.add_argument(
        "--env-kwargs",
        type=json_object,
        default=None,
        metavar="JSON",
        help="keyword arguments for gymnasium.make (PettingZoo: for parallel_env), as a JSON object",
    )
    parser.add_argument(
        "--start-method",
        choices=mp.get_all_start_methods(),
        default=None,
        help="multiprocessing start method for the subproc backend (default: forkserver, else spawn)",
    )
    parser.add_argument(
        "--n-workers",
        type=positive_int,
        default=None,
        metavar="W",
        help="worker processes for the subproc backend (default: one per CPU core; a W above the N - K envs in "
        "workers is said on stderr, and N - K are used), or actors for the ray backend (default: one per CPU of "
        "the Ray cluster, at most N)",
    )
    parser.add_argument(
        "--ray-address",
        default=None,
        metavar="ADDR",
        help="with --backend ray: the Ray cluster to connect to (ray.init(address=ADDR), e.g. auto or "
        "ray://head:10001; default: start a local Ray)",
    )
    parser.add_argument(
        "--parent-envs",
        type=non_negative_int,
        default=None,
        metavar="K",
        help="envs the calling process steps itself with the subproc backend (SubprocVecEnv(parent_envs=K); "
        "default: 0, every env in a worker process); must be below N",
    )
    parser.add_argument(
        "--wait-mode",
        choices=("auto", "spin", "block"),
        default=None,
        help="how the calling process and the subproc backend's workers wait for each other (SubprocVecEnv("
        "wait_mode=...)): spin on shared memory before blocking, block at once, or auto: spin only in "
        "processes that have a core of their own (default: auto)",
    )


def _add_run_wrapper_arguments(parser: argparse.ArgumentParser) -> None:
    """``vecenv run``'s wrappers and the files they write or read: --monitor, --normalize, --save-normalize,
    --load-normalize, --video, --video-length, --check-nan."""
    parser.add_argument(
        "--monitor",
        metavar="DIR",
        default=None,
        help="write one SB3-format monitor CSV per env into DIR (make_vec_env(monitor_dir=DIR); created if missing)",
    )
    parser.add_argument(
        "--normalize", action="store_true", help="wrap the envs in VecNormalize (observations and rewards)"
    )
    parser.add_argument(
        "--save-normalize",
        metavar="PATH",
        default=None,
        help="save the VecNormalize statistics to PATH after the run (implies --normalize; its folder is created "
        "if missing)",
    )
    parser.add_argument(
        "--load-normalize",
        metavar="PATH",
        default=None,
        help="start from VecNormalize statistics saved in PATH by --save-normalize (implies --normalize)",
    )
    parser.add_argument(
        "--video",
        metavar="DIR",
        default=None,
        help="record a video of the first --video-length steps into DIR (VecVideoRecorder, MP4 via OpenCV; "
        "created if missing)",
    )
    parser.add_argument(
        "--video-length",
        type=positive_int,
        default=None,  # (None: not given, so that _check_run_args can refuse it without --video)
        metavar="N",
        help=f"with --video: steps per video; the video holds N+1 frames, as SB3's (default: {DEFAULT_VIDEO_LENGTH})",
    )
    parser.add_argument(
        "--check-nan", action="store_true", help="raise at the first NaN/inf in actions, observations or rewards"
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="after the summary, print where the time went (venv.step_stats()): the calling process's and each "
        "worker's time in env steps, moving data and waiting, in us per env-step and percent, and one line of "
        "advice when the numbers suggest a change",
    )
    parser.add_argument(
        "--compare",
        action="store_true",
        help="after the summary, time the same envs (without wrappers) in a plain loop, DummyVecEnv and "
        "SubprocVecEnv side by side for about 6 s, as vecenv bench --autotune does, and say which layout to use "
        "and why",
    )


def _add_plot_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``plot`` sub-command to the ``vecenv`` command's sub-parsers; returns its parser."""
    plot: argparse.ArgumentParser = subparsers.add_parser(
        "plot",
        help="plot episode returns from monitor files against env-steps",
        description="Draw the episode returns found in MONITOR_DIR_OR_CSV (and a rolling mean) against "
        "cumulative env-steps, and save the figure. Needs the plot extra (pandas and matplotlib).",
    )
    plot.add_argument("path", metavar="MONITOR_DIR_OR_CSV", help="a folder of *monitor.csv files, or one such file")
    plot.add_argument(
        "-o",
        "--output",
        default=None,
        metavar="FILE",
        help="image to write, format from the extension; its folder is created if missing (default: monitor.png "
        "in the folder, or the CSV's name with .png)",
    )
    plot.add_argument(
        "--window", type=positive_int, default=100, metavar="N", help="rolling-mean window (default: %(default)s)"
    )
    plot.add_argument("--title", default=None, help="figure title")
    plot.set_defaults(handler=cmd_plot, prog=plot.prog)
    return plot


# --- main -----------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``vecenv`` command; return the exit status (2 for user errors)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    prefix = f"{getattr(args, 'prog', parser.prog)}: error:"
    try:
        return int(args.handler(args))
    except UsageError as exc:
        print(f"{prefix} {exc}", file=sys.stderr)
        return EXIT_USAGE
    except gym.error.DependencyNotInstalled as exc:  # e.g. pygame for rendering frames with --video
        print(f"{prefix} an optional dependency is not installed: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("vecenv: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # the reader of our output went away (e.g. `vecenv run | head`): not an error of ours
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silences the flush at interpreter exit
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
