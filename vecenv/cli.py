"""The ``vecenv`` command (also ``python -m vecenv``).

``vecenv run`` steps a registered Gymnasium env with random actions through a vector env and prints a
summary. User errors (unknown env id, bad option value, missing optional dependency) print one line
``vecenv: error: ...`` and exit with status 2.
"""

from __future__ import annotations

import argparse
import difflib
import json
import math
import multiprocessing as mp
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from vecenv.version import __version__

EXIT_USAGE = 2
BACKENDS = ("dummy", "subproc")


class UsageError(Exception):
    """A problem with the user's input: printed as one line, exit status 2."""


def _positive_int(text: str) -> int:
    try:
        value = int(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}")
    return value


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(
            f"expected a JSON object such as '{{\"max_episode_steps\": 100}}': {exc}"
        ) from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object (a dict of keyword arguments), got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``vecenv`` command."""
    parser = argparse.ArgumentParser(prog="vecenv", description="Fast, robust vectorized RL environments.")
    parser.add_argument("--version", action="version", version=f"vecenv {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    run = sub.add_parser(
        "run",
        help="step a Gymnasium env with random actions through a vector env and print a summary",
        description="Step ENV_ID with actions sampled from its action space through a vector env, "
        "then print env-steps/s and episode statistics.",
    )
    run.add_argument(
        "env_id",
        nargs="?",
        default="CartPole-v1",
        metavar="ENV_ID",
        help="registered Gymnasium env id (default: %(default)s)",
    )
    run.add_argument(
        "--num-envs", "-n", type=_positive_int, default=8, metavar="N", help="number of envs (default: %(default)s)"
    )
    run.add_argument(
        "--backend",
        "-b",
        choices=BACKENDS,
        default="subproc",
        help="dummy: in this process; subproc: worker processes (default: %(default)s)",
    )
    run.add_argument(
        "--steps",
        "-s",
        type=_positive_int,
        default=100_000,
        metavar="S",
        help="total env-steps, rounded up to a multiple of N (default: %(default)s)",
    )
    run.add_argument(
        "--seed", type=_non_negative_int, default=0, metavar="K", help="seed of envs and actions (default: %(default)s)"
    )
    run.add_argument(
        "--env-kwargs",
        type=_json_object,
        default=None,
        metavar="JSON",
        help="keyword arguments for gymnasium.make, as a JSON object",
    )
    run.add_argument(
        "--start-method",
        choices=mp.get_all_start_methods(),
        default=None,
        help="multiprocessing start method for the subproc backend (default: forkserver, else spawn)",
    )
    run.add_argument(
        "--n-workers",
        type=_positive_int,
        default=None,
        metavar="W",
        help="worker processes for the subproc backend (default: one per CPU core, at most N)",
    )
    run.add_argument(
        "--parent-envs",
        type=_non_negative_int,
        default=0,
        metavar="K",
        help="envs the calling process steps itself with the subproc backend (SubprocVecEnv(parent_envs=K); "
        "default: 0, every env in a worker process); must be below N",
    )
    run.add_argument(
        "--monitor",
        metavar="DIR",
        default=None,
        help="write one SB3-format monitor CSV per env into DIR (make_vec_env(monitor_dir=DIR))",
    )
    run.add_argument(
        "--normalize", action="store_true", help="wrap the envs in VecNormalize (observations and rewards)"
    )
    run.add_argument(
        "--save-normalize",
        metavar="PATH",
        default=None,
        help="save the VecNormalize statistics to PATH after the run (implies --normalize)",
    )
    run.add_argument(
        "--load-normalize",
        metavar="PATH",
        default=None,
        help="start from VecNormalize statistics saved in PATH (implies --normalize)",
    )
    run.add_argument(
        "--video",
        metavar="DIR",
        default=None,
        help="record a video of the first --video-length steps into DIR (VecVideoRecorder, MP4 via OpenCV)",
    )
    run.add_argument(
        "--video-length",
        type=_positive_int,
        default=200,
        metavar="N",
        help="steps per video; the video holds N+1 frames, as SB3's (default: %(default)s)",
    )
    run.add_argument(
        "--check-nan", action="store_true", help="raise at the first NaN/inf in actions, observations or rewards"
    )
    run.set_defaults(handler=cmd_run)

    plot = sub.add_parser(
        "plot",
        help="plot episode returns from monitor files against env-steps",
        description="Draw the episode returns found in MONITOR_DIR_OR_CSV (and a rolling mean) against "
        "cumulative env-steps, and save the figure. Needs the plot extra: pip install 'vecenv[plot]'.",
    )
    plot.add_argument("path", metavar="MONITOR_DIR_OR_CSV", help="a folder of *monitor.csv files, or one such file")
    plot.add_argument(
        "-o",
        "--output",
        default=None,
        metavar="FILE",
        help="image to write (default: monitor.png in the folder, or the CSV's name with .png)",
    )
    plot.add_argument(
        "--window", type=_positive_int, default=100, metavar="N", help="rolling-mean window (default: %(default)s)"
    )
    plot.add_argument("--title", default=None, help="figure title")
    plot.set_defaults(handler=cmd_plot)

    from vecenv.bench.cli import add_bench_parser  # light: imports pandas/matplotlib only when run

    add_bench_parser(sub)
    return parser


def _check_env_id(env_id: str) -> None:
    try:
        gym.spec(env_id)
    except gym.error.NamespaceNotFound:
        namespace = env_id.split("/", 1)[0]
        raise UsageError(
            f"unknown env id {env_id!r}: no env of namespace {namespace!r} is registered; install the package that "
            "provides it (e.g. ale-py for ALE/...) and check gymnasium.pprint_registry()"
        ) from None
    except gym.error.Error as exc:
        close = difflib.get_close_matches(env_id, list(gym.registry.keys()), n=5, cutoff=0.5)
        hint = f"; did you mean: {', '.join(close)}?" if close else "; see gymnasium.pprint_registry() for the ids"
        raise UsageError(f"unknown env id {env_id!r} ({type(exc).__name__}){hint}") from None


@dataclass
class EpisodeStats:
    """Returns and lengths of the episodes that finished during a run, computed from rewards and dones."""

    num_envs: int
    returns: list[float] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._return = np.zeros(self.num_envs, dtype=np.float64)
        self._length = np.zeros(self.num_envs, dtype=np.int64)

    def update(self, rewards: np.ndarray, dones: np.ndarray) -> None:
        """Account one vector step: ``rewards`` float ``(num_envs,)``, ``dones`` bool ``(num_envs,)``."""
        self._return += rewards
        self._length += 1
        if dones.any():
            self.returns.extend(self._return[dones].tolist())
            self.lengths.extend(self._length[dones].tolist())
            self._return[dones] = 0.0
            self._length[dones] = 0


def _summary_lines(values: dict[str, Any]) -> list[str]:
    width = max(len(key) for key in values)
    return [f"{key + ':':<{width + 1}} {value}" for key, value in values.items()]


def _wrap_for_run(venv: Any, args: argparse.Namespace) -> Any:
    """Apply the wrappers ``vecenv run``'s options ask for (video recorder inside, NaN check outermost)."""
    from vecenv.wrappers.vec_check_nan import VecCheckNan
    from vecenv.wrappers.vec_normalize import VecNormalize
    from vecenv.wrappers.vec_video_recorder import VecVideoRecorder

    if args.load_normalize is not None:
        venv = VecNormalize.load(args.load_normalize, venv)
    elif args.normalize or args.save_normalize is not None:
        venv = VecNormalize(venv)
    if args.video is not None:
        venv = VecVideoRecorder(
            venv, args.video, record_video_trigger=lambda step: step == 0, video_length=args.video_length
        )
    if args.check_nan:
        # outermost: bad actions are caught before the envs or the recorder see them
        venv = VecCheckNan(venv, raise_exception=True)
    return venv


def cmd_run(args: argparse.Namespace) -> int:
    """``vecenv run``: build the vector env with :func:`~vecenv.make_vec_env`, step it, print a summary."""
    from tqdm import tqdm

    from vecenv.env_util import make_vec_env
    from vecenv.vec_env import DummyVecEnv, SubprocVecEnv
    from vecenv.wrappers.vec_normalize import unwrap_vec_normalize

    _check_env_id(args.env_id)
    n = args.num_envs
    iterations = math.ceil(args.steps / n)
    vec_env_kwargs: dict[str, Any] = {}
    if args.backend == "subproc" and args.start_method is not None:
        vec_env_kwargs["start_method"] = args.start_method
    if args.backend == "subproc" and args.n_workers is not None:
        vec_env_kwargs["n_workers"] = args.n_workers
    if args.backend == "subproc" and args.parent_envs:
        if args.parent_envs >= n:
            raise UsageError(
                f"--parent-envs {args.parent_envs} must be below --num-envs {n}: at least one env runs in a worker "
                "process (--backend dummy steps every env in this process)"
            )
        vec_env_kwargs["parent_envs"] = args.parent_envs
    if args.save_normalize is not None:
        folder = os.path.dirname(os.path.abspath(args.save_normalize))
        if not os.path.isdir(folder):
            raise UsageError(f"--save-normalize {args.save_normalize!r}: folder {folder!r} does not exist")
    vec_env_cls = SubprocVecEnv if args.backend == "subproc" else DummyVecEnv
    try:
        venv = make_vec_env(
            args.env_id,
            n_envs=n,
            seed=args.seed,
            env_kwargs=args.env_kwargs,
            vec_env_cls=vec_env_cls,
            vec_env_kwargs=vec_env_kwargs,
            monitor_dir=args.monitor,
        )
    except gym.error.DependencyNotInstalled as exc:
        raise UsageError(f"{args.env_id} needs an optional dependency that is not installed: {exc}") from None
    except (TypeError, ValueError, gym.error.Error) as exc:
        given = f" with --env-kwargs {json.dumps(args.env_kwargs)}" if args.env_kwargs else ""
        raise UsageError(f"cannot create {args.env_id}{given}: {exc}") from None
    try:
        venv = _wrap_for_run(venv, args)
    except (ValueError, OSError) as exc:  # NormalizationFileError is a ValueError
        venv.close()
        raise UsageError(str(exc)) from None
    normalize = unwrap_vec_normalize(venv)
    try:
        actions = gym.vector.utils.batch_space(venv.action_space, n)
        actions.seed(args.seed)
        stats = EpisodeStats(n)
        start = time.perf_counter()
        venv.reset()
        with tqdm(total=iterations * n, unit="step", unit_scale=True, disable=None, file=sys.stderr) as bar:
            for _ in range(iterations):
                _, rewards, dones, _ = venv.step(actions.sample())
                # episode statistics always use the env's own rewards, never the normalized ones
                stats.update(rewards if normalize is None else normalize.get_original_reward(), dones)
                bar.update(n)
        wall = time.perf_counter() - start
        if args.save_normalize is not None:
            assert normalize is not None
            try:
                normalize.save(args.save_normalize)
            except OSError as exc:
                raise UsageError(f"cannot save --save-normalize {args.save_normalize!r}: {exc}") from None
    finally:
        venv.close()

    base = venv.unwrapped
    backend = args.backend
    if isinstance(base, SubprocVecEnv):
        in_parent = f", {base.parent_envs} envs in this process" if base.parent_envs else ""
        backend += f" ({base.start_method}, {base.n_workers} workers{in_parent})"
    summary: dict[str, Any] = {
        "env_id": args.env_id,
        "backend": backend,
        "num_envs": n,
        "env_steps": iterations * n,
        "wall_time_s": f"{wall:.3f}",
        "steps_per_s": f"{iterations * n / wall:.0f}",
        "episodes": len(stats.returns),
    }
    for name, values, fmt in (("return", stats.returns, ".3f"), ("length", stats.lengths, "d")):
        if values:
            summary[f"episode_{name}_mean"] = f"{np.mean(values):.3f}"
            summary[f"episode_{name}_min"] = f"{values[int(np.argmin(values))]:{fmt}}"
            summary[f"episode_{name}_max"] = f"{values[int(np.argmax(values))]:{fmt}}"
        else:
            summary[f"episode_{name}_mean"] = summary[f"episode_{name}_min"] = summary[f"episode_{name}_max"] = "n/a"
    print("\n".join(_summary_lines(summary)))
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    """``vecenv plot``: learning curve from monitor files, saved as an image."""
    from vecenv.monitor import LoadMonitorResultsError, MissingExtraError
    from vecenv.plotting import plot_results

    output = args.output
    if output is None:
        output = (
            os.path.join(args.path, "monitor.png")
            if os.path.isdir(args.path)
            else os.path.splitext(args.path)[0] + ".png"
        )
    try:
        plot_results(args.path, output=output, window=args.window, title=args.title)
    except MissingExtraError as exc:
        raise UsageError(str(exc)) from None
    except (LoadMonitorResultsError, ValueError, OSError) as exc:
        raise UsageError(f"cannot plot {args.path!r}: {exc}") from None
    print(f"wrote {output}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``vecenv`` command; return the exit status (2 for user errors)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args))
    except UsageError as exc:
        print(f"vecenv: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except gym.error.DependencyNotInstalled as exc:  # e.g. pygame for rendering frames with --video
        print(f"vecenv: error: an optional dependency is not installed: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("vecenv: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader of our output went away (e.g. `vecenv run | head`): not an error of ours
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silences the flush at interpreter exit
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
