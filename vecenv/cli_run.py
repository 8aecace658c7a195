"""``vecenv run``: check the options, build the vector env (a Gymnasium env with :func:`vecenv.make_vec_env`, a
PettingZoo env module with :func:`vecenv.pettingzoo.make_vec_env`) and its wrappers, step it with random actions,
and print the summary (:mod:`vecenv.cli_summary`), the profile with ``--profile`` and the comparison with
``--compare`` (:mod:`vecenv.cli_compare`). The command's options are declared in :mod:`vecenv.cli`.

Every option of another backend than the one chosen (:data:`BACKEND_OPTIONS`) is refused before anything runs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from vecenv.cli_args import (
    OUTPUT_FILE,
    OUTPUT_FOLDER,
    UsageError,
    check_output_path,
    import_env_module,
    is_env_module_path,
    make_output_folder,
    os_reason,
    path_error,
    pettingzoo_env_module,
    resolve_env_id,
)
from vecenv.cli_compare import compare_layouts
from vecenv.cli_summary import EpisodeStats, option_summary, plural, summary_lines
from vecenv.env_util import make_vec_env
from vecenv.optional import MissingExtraError
from vecenv.ray_vec_env import RayVecEnv
from vecenv.vec_env import DummyVecEnv, SubprocVecEnv
from vecenv.wrappers.vec_check_nan import VecCheckNan
from vecenv.wrappers.vec_normalize import VecNormalize
from vecenv.wrappers.vec_video_recorder import VecVideoRecorder

__all__ = [
    "BACKENDS",
    "BACKEND_OPTIONS",
    "DEFAULT_PETTINGZOO_STEPS",
    "DEFAULT_STEPS",
    "DEFAULT_VIDEO_LENGTH",
    "STATISTICS_FILE",
    "cmd_run",
]

BACKENDS = ("dummy", "subproc", "ray")
#: ``vecenv run``'s default ``--steps``: env-steps of a Gymnasium env, and of a PettingZoo env module, whose every
#: env-step steps all its agents (a few seconds either way with a classic-control env or an MPE env).
DEFAULT_STEPS, DEFAULT_PETTINGZOO_STEPS = 100_000, 10_000
#: ``--video-length``'s default: steps per video (SB3's ``VecVideoRecorder`` default)
DEFAULT_VIDEO_LENGTH = 200
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


# --- rendering ------------------------------------------------------------------------------------------


@contextlib.contextmanager
def _headless_rendering() -> Iterator[None]:
    """Render with SDL's offscreen video driver and dummy audio driver, unless the user chose drivers
    (``SDL_*DRIVER``). Not the dummy video driver: some envs (highway-env) read it as "rendering disabled" and
    return blank frames.

    pygame (which draws Gymnasium's classic-control and Box2D envs) initializes SDL's video subsystem even
    for ``rgb_array`` frames; without a desktop session SDL's Wayland driver then prints ``error:
    XDG_RUNTIME_DIR is invalid or not set in the environment.`` once per rendering process, and audio
    initialization prints ALSA errors. ``rgb_array`` frames need neither a display nor sound. The
    variables are set in this process before the envs and their worker processes start (which inherit
    them), and removed afterwards.
    """
    drivers = {"SDL_VIDEODRIVER": "offscreen", "SDL_AUDIODRIVER": "dummy"}
    added = [name for name in drivers if name not in os.environ]
    for name in added:
        os.environ[name] = drivers[name]
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

    :raises UsageError: if ``--load-normalize``, ``--normalize`` / ``--save-normalize`` (observations that are not
        numeric arrays) or ``--video`` cannot be applied (``venv`` is then not closed).
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
        try:
            wrapped.normalize = VecNormalize(venv)
        except ValueError as exc:  # observations VecNormalize cannot normalize (not a Box; a Dict of other spaces)
            option = "--normalize" if args.normalize else "--save-normalize"
            advice = (
                "this command normalizes every entry: pick the Box entries with VecNormalize(venv, "
                "norm_obs_keys=[...]) in a script"
                if isinstance(venv.observation_space, gym.spaces.Dict)
                else f"leave {option} out"
            )
            raise UsageError(
                f"argument {option}: cannot normalize the observations of {args.env_id}: {exc}; {advice}"
            ) from None
    if wrapped.normalize is not None:
        venv = wrapped.normalize
    if args.video is not None:
        try:
            venv = wrapped.recorder = VecVideoRecorder(
                venv,
                args.video,
                record_video_trigger=lambda step: step == 0,
                video_length=DEFAULT_VIDEO_LENGTH if args.video_length is None else args.video_length,
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
    if args.video_length is not None and args.video is None:
        raise UsageError("argument --video-length: goes with --video DIR (without it no video is recorded)")
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


def _warn(args: argparse.Namespace, message: str) -> None:
    print(f"{args.prog}: {message}", file=sys.stderr)


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
        workers = plural(in_workers, "actor" if args.backend == "ray" else "worker")
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
    except ImportError as exc:  # (ModuleNotFoundError: a package the env imports, e.g. jax for phys2d/...)
        raise UsageError(f"{args.env_id} needs a package that is not installed: {exc}") from None
    except (ConnectionError, TimeoutError) as exc:
        if args.backend == "ray":
            address = "" if args.ray_address is None else f" --ray-address {args.ray_address}"
            raise UsageError(f"--backend ray{address}: {exc}") from None
        raise UsageError(f"cannot create {args.env_id}: {type(exc).__name__}: {exc}") from None
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
        with tqdm(total=iterations * n, unit="step", unit_scale=True, disable=_no_terminal(), file=sys.stderr) as bar:
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
        in_parent = f", {plural(inner.parent_envs, 'env')} in this process" if inner.parent_envs else ""
        backend += f" ({inner.start_method}, {plural(inner.n_workers, 'worker')}{in_parent})"
    elif isinstance(inner, RayVecEnv):
        backend += f" ({plural(inner.n_workers, 'actor')} on {plural(len(set(inner.node_ids)), 'node')})"
    summary: dict[str, Any] = {"env_id": args.env_id, "backend": backend, "num_envs": n}
    if args.parallel_env is not None:
        agents = list(base.possible_agents)
        summary["agents"] = f"{len(agents)} ({', '.join(map(str, agents))})"
        summary["rows"] = f"{rows} ({plural(n, 'env')} x {plural(len(agents), 'agent')})"
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
    summary |= option_summary(args, n, video_paths)
    print("\n".join(summary_lines(summary)))
    if args.profile:
        assert profile is not None
        print(f"\n{profile.table()}")
    if args.compare:
        compare_layouts(args)
    return 0


def _no_terminal() -> bool | None:
    """tqdm's ``disable``: None (a bar only on a terminal), True where there is no stderr at all (a daemon's
    closed descriptor 2: ``sys.stderr`` is None)."""
    return True if sys.stderr is None else None
