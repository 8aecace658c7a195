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
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import multiprocessing as mp
import os
import sys
import textwrap
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from vecenv.bench.cli import add_bench_parser
from vecenv.cli_args import (
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    OUTPUT_FILE,
    OUTPUT_FOLDER,
    UsageError,
    check_output_path,
    import_env_module,
    is_env_module_path,
    json_object,
    make_output_folder,
    non_negative_int,
    os_reason,
    path_error,
    pettingzoo_env_module,
    positive_int,
    resolve_env_id,
)
from vecenv.env_util import make_vec_env
from vecenv.monitor import LoadMonitorResultsError, get_monitor_files
from vecenv.optional import MissingExtraError, import_optional
from vecenv.plotting import plot_results
from vecenv.ray_vec_env import RayVecEnv
from vecenv.vec_env import DummyVecEnv, SubprocVecEnv
from vecenv.version import __version__
from vecenv.wrappers.vec_check_nan import VecCheckNan
from vecenv.wrappers.vec_normalize import VecNormalize
from vecenv.wrappers.vec_video_recorder import VecVideoRecorder

BACKENDS = ("dummy", "subproc", "ray")
#: ``vecenv run``'s default ``--steps``: env-steps of a Gymnasium env, and of a PettingZoo env module, whose every
#: env-step steps all its agents (a few seconds either way with a classic-control env or an MPE env).
DEFAULT_STEPS, DEFAULT_PETTINGZOO_STEPS = 100_000, 10_000
#: What ``--load-normalize`` reads.
STATISTICS_FILE = "a statistics file saved by --save-normalize (VecNormalize.save)"
#: The options of ``vecenv run`` that only some backends take; any other backend refuses them (exit status 2).
BACKEND_OPTIONS = {
    "--start-method": ("subproc",),
    "--parent-envs": ("subproc",),
    "--wait-mode": ("subproc",),
    "--n-workers": ("subproc", "ray"),
    "--ray-address": ("ray",),
}
#: Why a backend has no use for the options of the others (the end of that error).
_BACKEND_DOES = {
    "dummy": "which steps every env in this process",
    "subproc": "which starts its worker processes on this machine",
    "ray": "whose actors Ray starts, none of them in this process",
}


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
        default=200,
        metavar="N",
        help="steps per video; the video holds N+1 frames, as SB3's (default: %(default)s)",
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


@dataclass
class EpisodeStats:
    """Returns and lengths of the episodes that finished during a run, computed from rewards and dones."""

    num_envs: int
    returns: list[float] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._return = np.zeros(self.num_envs, dtype=np.float64)
        self._length = np.zeros(self.num_envs, dtype=np.int64)

    def update(self, rewards: np.ndarray, dones: np.ndarray, acted: np.ndarray | None = None) -> None:
        """Account one vector step: ``rewards`` float ``(num_envs,)``, ``dones`` bool ``(num_envs,)``.

        :param acted: bool ``(num_envs,)``, for the rows of a PettingZoo env (``AgentVecEnv.row_active``): whether
            the row's agent acted in the step. As in :class:`~vecenv.VecMonitor`, an episode's length counts only
            those steps, and a row done without one (its agent had left, or never joined) ends no episode.
        """
        self._return += rewards
        self._length += 1 if acted is None else acted
        if dones.any():
            ended = dones if acted is None else dones & (self._length > 0)
            self.returns.extend(self._return[ended].tolist())
            self.lengths.extend(self._length[ended].tolist())
            self._return[dones] = 0.0
            self._length[dones] = 0


def _summary_lines(values: dict[str, Any]) -> list[str]:
    width = max(len(key) for key in values)
    return [f"{key + ':':<{width + 1}} {value}" for key, value in values.items()]


# --- rendering ------------------------------------------------------------------------------------------


@contextlib.contextmanager
def _headless_rendering() -> Iterator[None]:
    """Render with SDL's dummy video and audio drivers, unless the user chose drivers (``SDL_*DRIVER``).

    pygame (which draws Gymnasium's classic-control and Box2D envs) initializes SDL's video subsystem even
    for ``rgb_array`` frames; without a desktop session SDL's Wayland driver then prints ``error:
    XDG_RUNTIME_DIR is invalid or not set in the environment.`` once per rendering process, and audio
    initialization prints ALSA errors. ``rgb_array`` frames need neither a display nor sound. The
    variables are set in this process before the envs and their worker processes start (which inherit
    them), and removed afterwards.
    """
    added = [name for name in ("SDL_VIDEODRIVER", "SDL_AUDIODRIVER") if name not in os.environ]
    for name in added:
        os.environ[name] = "dummy"
    try:
        yield
    finally:
        for name in added:
            os.environ.pop(name, None)


# --- vecenv run -----------------------------------------------------------------------------------------


@dataclass
class _Wrapped:
    """The vector env of a run with its wrappers, and the wrappers the summary reports on."""

    venv: Any
    normalize: Any = None
    recorder: Any = None


def _wrap_for_run(venv: Any, args: argparse.Namespace) -> _Wrapped:
    """Apply the wrappers ``vecenv run``'s options ask for (video recorder inside, NaN check outermost).

    :raises UsageError: if ``--load-normalize`` or ``--video`` cannot be applied (``venv`` is then not closed).
    """
    wrapped = _Wrapped(venv)
    if args.load_normalize is not None:
        try:
            wrapped.normalize = VecNormalize.load(args.load_normalize, venv)
        except OSError as exc:
            raise path_error(
                "--load-normalize", args.load_normalize, STATISTICS_FILE, f"cannot read it: {os_reason(exc)}"
            ) from None
        except ValueError as exc:  # NormalizationFileError: not a statistics file, or not of these envs
            detail = str(exc) if args.load_normalize in str(exc) else f"cannot load {args.load_normalize!r}: {exc}"
            raise UsageError(f"argument --load-normalize: {detail}") from None
    elif args.normalize or args.save_normalize is not None:
        wrapped.normalize = VecNormalize(venv)
    if wrapped.normalize is not None:
        venv = wrapped.normalize
    if args.video is not None:
        try:
            venv = wrapped.recorder = VecVideoRecorder(
                venv, args.video, record_video_trigger=lambda step: step == 0, video_length=args.video_length
            )
        except OSError as exc:
            raise path_error("--video", args.video, OUTPUT_FOLDER, f"cannot create it: {os_reason(exc)}") from None
        except ValueError as exc:
            raise UsageError(f"argument --video: {exc}") from None
    if args.check_nan:
        # outermost: bad actions are caught before the envs or the recorder see them
        venv = VecCheckNan(venv, raise_exception=True)
    wrapped.venv = venv
    return wrapped


def _check_run_args(args: argparse.Namespace) -> None:
    """Checks of ``vecenv run``'s options that need no env: done before anything starts.

    :raises UsageError: for a bad combination of options or a path that cannot be used.
    """
    n = args.num_envs
    for option, backends in BACKEND_OPTIONS.items():
        if getattr(args, option[2:].replace("-", "_")) is not None and args.backend not in backends:
            raise UsageError(
                f"argument {option}: needs --backend {' or '.join(backends)} (got --backend {args.backend}, "
                f"{_BACKEND_DOES[args.backend]})"
            )
    if args.parent_envs is not None and args.parent_envs >= n:
        raise UsageError(
            f"--parent-envs {args.parent_envs} must be below --num-envs {n}: at least one env runs in a worker "
            "process (--backend dummy steps every env in this process)"
        )
    if args.load_normalize is not None:
        expected = STATISTICS_FILE
        if not os.path.exists(args.load_normalize):
            raise UsageError(
                f"argument --load-normalize: expected {expected}, got {args.load_normalize!r}, which does not exist"
            )
        if os.path.isdir(args.load_normalize):
            raise UsageError(
                f"argument --load-normalize: expected {expected}, got {args.load_normalize!r}, which is a folder"
            )
    render_mode = (args.env_kwargs or {}).get("render_mode", "rgb_array")
    if args.video is not None and render_mode != "rgb_array":
        raise UsageError(
            f"argument --video: needs envs that render rgb_array frames, got --env-kwargs render_mode={render_mode!r}"
            " (leave render_mode out: rgb_array is the default)"
        )
    if args.monitor is not None:
        check_output_path("--monitor", args.monitor, folder=True)
    if args.save_normalize is not None:
        check_output_path("--save-normalize", args.save_normalize, folder=False)
    if args.video is not None:
        check_output_path("--video", args.video, folder=True)


def _plural(count: int, noun: str) -> str:
    """``"1 worker"``, ``"2 workers"``."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _warn(args: argparse.Namespace, message: str) -> None:
    print(f"{args.prog}: {message}", file=sys.stderr)


def _brace_range(folder: str, n: int) -> str:
    """``"4 files, DIR/{0..3}.monitor.csv"``: the monitor files of ``n`` envs in ``folder``."""
    if n == 1:
        return f"1 file, {os.path.join(folder, '0.monitor.csv')}"
    return f"{n} files, {os.path.join(folder, '{0..' + str(n - 1) + '}.monitor.csv')}"


def _option_summary(args: argparse.Namespace, n: int, video_paths: list[str]) -> dict[str, str]:
    """The summary lines of the options that write or read files, or check the run."""
    lines: dict[str, str] = {}
    if args.monitor is not None:
        lines["monitor"] = _brace_range(args.monitor, n)
    if args.normalize or args.load_normalize is not None or args.save_normalize is not None:
        done = []
        if args.load_normalize is not None:
            done.append(f"loaded from {args.load_normalize}")
        if args.save_normalize is not None:
            done.append(f"saved to {args.save_normalize}")
        lines["normalize"] = "on" + (f", statistics {' and '.join(done)}" if done else "")
    if args.video is not None:
        lines["video"] = ", ".join(video_paths) if video_paths else "no video written"
    if args.check_nan:
        lines["check_nan"] = "on, no NaN or infinity found"
    return lines


def _check_pettingzoo_args(args: argparse.Namespace) -> None:
    """Refuse the options that need one Gymnasium env per vector-env row (a PettingZoo env has one per agent), and
    ``--compare``, whose layouts make their envs with ``gymnasium.make``.

    :raises UsageError: for ``--monitor``, ``--video`` or ``--compare`` with a PettingZoo env module.
    """
    for option, value, why in (
        ("--monitor", args.monitor, "whose envs each write a Monitor file"),
        ("--video", args.video, "whose first env's frames VecVideoRecorder records"),
        ("--compare", args.compare or None, "whose envs the comparison makes with gymnasium.make"),
    ):
        if value is not None:
            raise UsageError(
                f"argument {option}: needs a Gymnasium env id, {why}; got the PettingZoo env module {args.env_id!r}"
            )


def cmd_run(args: argparse.Namespace) -> int:
    """``vecenv run``: build the vector env with :func:`~vecenv.make_vec_env` (a PettingZoo env module: with
    :func:`vecenv.pettingzoo.make_vec_env`), step it, print a summary."""
    args.parallel_env = None
    for module in args.imports:  # first: a module may register the id
        import_env_module(module, "argument --import:")
    if is_env_module_path(args.env_id):
        if args.imports:
            raise UsageError(
                f"argument --import: imports modules that register Gymnasium envs; got the PettingZoo env module "
                f"{args.env_id!r}, which imports what it needs itself (leave --import out)"
            )
        args.parallel_env = pettingzoo_env_module(args.env_id).parallel_env
        _check_pettingzoo_args(args)
    else:
        args.env_factory = resolve_env_id(args.env_id, args.imports).factory
    _check_run_args(args)
    n = args.num_envs
    parent_envs = args.parent_envs or 0
    if args.n_workers is not None and args.n_workers > n - parent_envs:
        in_workers = n - parent_envs
        limit = (
            f"the {in_workers} envs in worker processes (--num-envs {n}, --parent-envs {parent_envs})"
            if parent_envs
            else f"--num-envs {n}"
        )
        workers = _plural(in_workers, "actor" if args.backend == "ray" else "worker")
        _warn(args, f"--n-workers {args.n_workers} is more than {limit}; using {workers}")
    if args.video is None:
        return _run(args)
    with _headless_rendering():
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    n = args.num_envs
    steps = args.steps
    if steps is None:
        steps = DEFAULT_STEPS if args.parallel_env is None else DEFAULT_PETTINGZOO_STEPS
    iterations = math.ceil(steps / n)
    vec_env_kwargs: dict[str, Any] = {}
    if args.backend == "subproc":
        if args.start_method is not None:
            vec_env_kwargs["start_method"] = args.start_method
        if args.n_workers is not None:
            vec_env_kwargs["n_workers"] = args.n_workers
        if args.parent_envs:
            vec_env_kwargs["parent_envs"] = args.parent_envs
        if args.wait_mode is not None:
            vec_env_kwargs["wait_mode"] = args.wait_mode
    if args.backend == "ray":
        vec_env_kwargs["n_workers"] = args.n_workers
        # connecting to a cluster takes no local options; a local Ray needs no dashboard for one run
        local = {"include_dashboard": False, "log_to_driver": False}
        vec_env_kwargs["ray_init_kwargs"] = local if args.ray_address is None else {"address": args.ray_address}
    if args.monitor is not None:
        make_output_folder("--monitor", args.monitor, folder=True)
    vec_env_cls: type[DummyVecEnv | SubprocVecEnv | RayVecEnv] = DummyVecEnv
    if args.backend != "dummy":
        vec_env_cls = SubprocVecEnv if args.backend == "subproc" else RayVecEnv
    common: dict[str, Any] = {
        "n_envs": n,
        "seed": args.seed,
        "env_kwargs": args.env_kwargs,
        "vec_env_cls": vec_env_cls,
        "vec_env_kwargs": vec_env_kwargs,
    }
    try:
        if args.parallel_env is None:
            venv = make_vec_env(args.env_factory, monitor_dir=args.monitor, **common)
        else:
            from vecenv.pettingzoo import make_vec_env as make_agent_vec_env

            venv = make_agent_vec_env(args.parallel_env, **common)
    except gym.error.DependencyNotInstalled as exc:
        raise UsageError(f"{args.env_id} needs an optional dependency that is not installed: {exc}") from None
    except MissingExtraError as exc:
        raise UsageError(f"--backend {args.backend}: {exc}") from None
    except (TypeError, ValueError, gym.error.Error) as exc:
        given = f" with --env-kwargs {json.dumps(args.env_kwargs)}" if args.env_kwargs else ""
        raise UsageError(f"cannot create {args.env_id}{given}: {exc}") from None
    try:
        wrapped = _wrap_for_run(venv, args)
    except UsageError:
        venv.close()
        raise
    venv, normalize = wrapped.venv, wrapped.normalize
    base = venv.unwrapped
    # the vector env of the env copies: a PettingZoo env's AgentVecEnv keeps its own in .venv
    inner = base if args.parallel_env is None else base.venv
    rows = venv.num_envs  # n, or n x agents for a PettingZoo env
    try:
        actions = gym.vector.utils.batch_space(venv.action_space, rows)
        actions.seed(args.seed)
        stats = EpisodeStats(rows)
        start = time.perf_counter()
        venv.reset()
        with tqdm(total=iterations * n, unit="step", unit_scale=True, disable=None, file=sys.stderr) as bar:
            for _ in range(iterations):
                _, rewards, dones, _ = venv.step(actions.sample())
                # episode statistics always use the env's own rewards, never the normalized ones
                acted = None if args.parallel_env is None else base.row_active
                stats.update(rewards if normalize is None else normalize.get_original_reward(), dones, acted)
                bar.update(n)
        wall = time.perf_counter() - start
        # a PettingZoo env's summary counts the episodes of the env copies too, as the profile does
        profile = inner.step_stats() if args.profile or args.parallel_env is not None else None
        if args.save_normalize is not None:
            assert normalize is not None
            make_output_folder("--save-normalize", args.save_normalize, folder=False)
            try:
                normalize.save(args.save_normalize)
            except OSError as exc:
                raise path_error(
                    "--save-normalize", args.save_normalize, OUTPUT_FILE, f"cannot write it: {os_reason(exc)}"
                ) from None
    finally:
        venv.close()

    video_paths = []
    recorder = wrapped.recorder
    if recorder is not None and recorder.video_path is not None and os.path.exists(recorder.video_path):
        video_paths.append(os.path.join(args.video, recorder.video_name))
    backend = args.backend
    if isinstance(inner, SubprocVecEnv):
        in_parent = f", {_plural(inner.parent_envs, 'env')} in this process" if inner.parent_envs else ""
        backend += f" ({inner.start_method}, {_plural(inner.n_workers, 'worker')}{in_parent})"
    elif isinstance(inner, RayVecEnv):
        backend += f" ({_plural(inner.n_workers, 'actor')} on {_plural(len(set(inner.node_ids)), 'node')})"
    summary: dict[str, Any] = {"env_id": args.env_id, "backend": backend, "num_envs": n}
    if args.parallel_env is not None:
        agents = list(base.possible_agents)
        summary["agents"] = f"{len(agents)} ({', '.join(map(str, agents))})"
        summary["rows"] = f"{rows} ({_plural(n, 'env')} x {_plural(len(agents), 'agent')})"
    summary |= {
        "env_steps": iterations * n,
        "wall_time_s": f"{wall:.3f}",
        "steps_per_s": f"{iterations * n / wall:.0f}",
    }
    if args.parallel_env is not None:
        summary["agent_steps_per_s"] = f"{iterations * rows / wall:.0f}"
    if args.parallel_env is None:
        summary["episodes"] = len(stats.returns)
    else:  # the env copies' episodes (the profile's), and the agents' (those of the statistics below)
        assert profile is not None
        summary["env_episodes"] = profile.episodes
        summary["agent_episodes"] = len(stats.returns)
    for name, values, fmt in (("return", stats.returns, ".3f"), ("length", stats.lengths, "d")):
        if values:
            summary[f"episode_{name}_mean"] = f"{np.mean(values):.3f}"
            summary[f"episode_{name}_min"] = f"{values[int(np.argmin(values))]:{fmt}}"
            summary[f"episode_{name}_max"] = f"{values[int(np.argmax(values))]:{fmt}}"
        else:
            summary[f"episode_{name}_mean"] = summary[f"episode_{name}_min"] = summary[f"episode_{name}_max"] = "n/a"
    summary |= _option_summary(args, n, video_paths)
    print("\n".join(_summary_lines(summary)))
    if args.profile:
        assert profile is not None
        print(f"\n{profile.table()}")
    if args.compare:
        _compare_layouts(args)
    return 0


def _compare_layouts(args: argparse.Namespace) -> None:
    """``--compare``: time the run's envs in a plain loop, DummyVecEnv and SubprocVecEnv (with ``--backend
    subproc``, the run's options of that backend) with :func:`vecenv.bench.autotune.autotune`, and print its
    report with the advice."""
    from vecenv.bench.autotune import COMPARE_BUDGET, AutotuneError, autotune, compared_layouts

    options = ("n_workers", "parent_envs", "start_method", "wait_mode") if args.backend == "subproc" else ()
    subproc = {name: getattr(args, name) for name in options if getattr(args, name) is not None}
    header = (
        f"compare: the same {_plural(args.num_envs, 'env')}, without wrappers, in a plain loop, DummyVecEnv and "
        "SubprocVecEnv, timed side by side (vecenv bench --autotune ENV_ID times more layouts)"
    )
    print("\n" + textwrap.fill(header, width=100, subsequent_indent="  ", break_on_hyphens=False), flush=True)
    try:
        result = autotune(
            args.env_id,
            env_kwargs=args.env_kwargs,
            num_envs=args.num_envs,
            budget=COMPARE_BUDGET,
            seed=args.seed,
            layouts=compared_layouts(args.num_envs, subproc),
            imports=args.imports,
        )
    except AutotuneError as exc:
        raise UsageError(f"argument --compare: {exc}") from None
    print(result.report())


# --- vecenv plot ----------------------------------------------------------------------------------------

#: What ``vecenv plot`` reads.
MONITOR_CSV = "a monitor CSV written by vecenv's or SB3's Monitor (a '#{...}' JSON header line, then the columns r,l,t)"


def cmd_plot(args: argparse.Namespace) -> int:
    """``vecenv plot``: learning curve from monitor files, saved as an image."""
    try:
        import_optional("pandas", "load_results")
        import_optional("matplotlib.figure", "plot_results")
    except MissingExtraError as exc:
        raise UsageError(str(exc)) from None
    path = args.path
    expected = f"a folder of *monitor.csv files (e.g. a vecenv run --monitor folder) or {MONITOR_CSV}"
    if not os.path.exists(path):
        raise UsageError(f"argument MONITOR_DIR_OR_CSV: expected {expected}; got {path!r}, which does not exist")
    if os.path.isdir(path) and not get_monitor_files(path):
        raise UsageError(
            f"argument MONITOR_DIR_OR_CSV: expected {expected}; got {path!r}, a folder without *monitor.csv files"
        )
    output = args.output
    if output is None:
        output = os.path.join(path, "monitor.png") if os.path.isdir(path) else os.path.splitext(path)[0] + ".png"
    check_output_path("-o/--output", output, folder=False)
    _check_image_format(output)
    try:
        plot_results(path, output=output, window=args.window, title=args.title)
    except LoadMonitorResultsError as exc:
        raise UsageError(f"argument MONITOR_DIR_OR_CSV: expected {MONITOR_CSV}; got {path!r}: {exc}") from None
    except OSError as exc:
        raise path_error("-o/--output", output, OUTPUT_FILE, f"cannot write it: {os_reason(exc)}") from None
    print(f"wrote {output}")
    return 0


def _check_image_format(output: str) -> None:
    """Refuse an output file whose extension is not an image format of matplotlib (PNG without extension)."""
    from matplotlib.backend_bases import FigureCanvasBase

    extension = os.path.splitext(output)[1].lstrip(".").lower()
    formats = FigureCanvasBase.get_supported_filetypes()
    if extension and extension not in formats:
        raise UsageError(
            f"argument -o/--output: expected an image file name ending in one of "
            f"{', '.join('.' + name for name in sorted(formats))}, got {output!r}"
        )


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
