"""``make_vec_env``: build a vector env from an env id or factory (Stable-Baselines3's ``env_util``)."""

from __future__ import annotations

import importlib
import numbers
import os
from collections.abc import Callable
from typing import Any

import gymnasium as gym

from vecenv.base import VecEnv
from vecenv.monitor import Monitor
from vecenv.ray_vec_env import RayVecEnv
from vecenv.vec_env import DummyVecEnv, SubprocVecEnv

__all__ = ["make_vec_env"]


def _make_env_fn(
    env_id: str | Callable[..., gym.Env],
    rank: int,
    seed: int | None,
    monitor_dir: str | None,
    wrapper_class: Callable[..., gym.Env] | None,
    env_kwargs: dict[str, Any],
    monitor_kwargs: dict[str, Any],
    wrapper_kwargs: dict[str, Any],
    monitor_class: Callable[..., gym.Env] = Monitor,
) -> Callable[[], gym.Env]:
    def _init() -> gym.Env:
        if isinstance(env_id, str):
            # render_mode defaults to rgb_array (SB3); the user's env_kwargs win
            kwargs: dict[str, Any] = {"render_mode": "rgb_array", **env_kwargs}
            try:
                env = gym.make(env_id, **kwargs)
            except TypeError:
                env = gym.make(env_id, **env_kwargs)
        else:
            env = env_id(**env_kwargs)
            if not isinstance(env, gym.Env):
                raise TypeError(
                    f"make_vec_env: env_id(**env_kwargs) must return a gymnasium.Env, got {type(env).__name__}"
                )
        if seed is not None:
            # only the action space is seeded here; the env itself is seeded at the first reset
            env.action_space.seed(seed + rank)
        # always monitored, as in SB3 (info["episode"] at episode end); a file only with monitor_dir
        monitor_path = None
        if monitor_dir is not None:
            os.makedirs(monitor_dir, exist_ok=True)
            monitor_path = os.path.join(monitor_dir, str(rank))
        env = monitor_class(env, filename=monitor_path, **monitor_kwargs)
        if wrapper_class is not None:
            env = wrapper_class(env, **wrapper_kwargs)
        return env

    return _init


def _is_sb3_class(cls: Any) -> bool:
    """Whether ``cls`` is one of Stable-Baselines3's own classes (its vector envs test wrappers with isinstance)."""
    return any(klass.__module__.startswith("stable_baselines3.") for klass in getattr(cls, "__mro__", ()))


def _sb3_monitor() -> Callable[..., gym.Env]:
    """SB3's ``Monitor`` (SB3 is installed: its vector env class was given)."""
    sb3_monitor: Callable[..., gym.Env] = importlib.import_module("stable_baselines3.common.monitor").Monitor
    return sb3_monitor


def make_vec_env(
    env_id: str | Callable[..., gym.Env],
    n_envs: int = 1,
    seed: int | None = None,
    start_index: int = 0,
    monitor_dir: str | None = None,
    wrapper_class: Callable[[gym.Env], gym.Env] | None = None,
    env_kwargs: dict[str, Any] | None = None,
    vec_env_cls: type[DummyVecEnv | SubprocVecEnv | RayVecEnv] | None = None,
    vec_env_kwargs: dict[str, Any] | None = None,
    monitor_kwargs: dict[str, Any] | None = None,
    wrapper_kwargs: dict[str, Any] | None = None,
) -> VecEnv:
    """Create ``n_envs`` copies of an env as one vector env (Stable-Baselines3's ``make_vec_env``).

    Env ``i`` has rank ``start_index + i``. A string ``env_id`` is built with
    ``gymnasium.make(env_id, render_mode="rgb_array", **env_kwargs)`` (retried without ``render_mode`` if
    the env does not accept it); a callable with ``env_id(**env_kwargs)``. With a ``seed``, each env's
    action space is seeded with ``seed + rank`` and ``vec_env.seed(seed)`` makes the first reset use
    ``seed + i``; with ``seed=None`` the envs still get distinct random seeds.

    Every env is wrapped with :class:`~vecenv.Monitor` (so infos get ``"episode"`` statistics at episode
    end), then with ``wrapper_class`` if given. With one of SB3's own vector env classes as ``vec_env_cls``,
    the envs are wrapped with SB3's ``Monitor`` instead, which SB3's ``env_is_wrapped`` (an ``isinstance``
    test) and so its ``evaluate_policy`` and ``EvalCallback`` recognise; vecenv's vector envs take either.
    With ``monitor_dir`` the env of rank ``r`` writes ``<monitor_dir>/<r>.monitor.csv`` (the folder is
    created); read them with :func:`~vecenv.load_results`.

    >>> venv = make_vec_env("CartPole-v1", n_envs=2, seed=0)
    >>> venv.env_is_wrapped(Monitor)
    [True, True]
    >>> venv.close()

    :param env_id: a registered Gymnasium env id, or a callable returning a ``gymnasium.Env``.
    :param n_envs: number of envs.
    :param seed: base seed, or None.
    :param start_index: rank of the first env.
    :param monitor_dir: folder for the per-env monitor CSV files, or None (envs are monitored, no file).
    :param wrapper_class: a ``gymnasium.Wrapper`` (or any callable ``env -> env``) applied to each env,
        outside the ``Monitor`` (so e.g. a ``TimeLimit`` given here is not seen by the Monitor, as in SB3).
    :param env_kwargs: keyword arguments for the env constructor.
    :param vec_env_cls: the vector env class (default :class:`~vecenv.DummyVecEnv`; also
        :class:`~vecenv.SubprocVecEnv`, :class:`~vecenv.RayVecEnv`).
    :param vec_env_kwargs: keyword arguments for ``vec_env_cls`` (e.g. ``start_method``, or
        ``rewards_dtype=np.float64`` for the float64 rewards of SB3's ``SubprocVecEnv``).
    :param monitor_kwargs: keyword arguments for :class:`~vecenv.Monitor` (e.g. ``info_keywords``).
    :param wrapper_kwargs: keyword arguments for ``wrapper_class``.
    :return: the vector env, seeded for its first reset.
    :raises TypeError: if ``n_envs`` is not an integer (as SB3).
    :raises ValueError: if ``n_envs`` is below 1, or a bool.
    """
    if isinstance(n_envs, bool) or (isinstance(n_envs, numbers.Integral) and n_envs < 1):
        raise ValueError(f"n_envs must be a positive integer, got {n_envs!r}")
    if not isinstance(n_envs, numbers.Integral):  # (SB3's range(n_envs) raises TypeError)
        raise TypeError(f"n_envs must be a positive integer, got {n_envs!r}")
    n_envs = int(n_envs)
    env_kwargs = env_kwargs or {}
    vec_env_kwargs = vec_env_kwargs or {}
    monitor_kwargs = monitor_kwargs or {}
    wrapper_kwargs = wrapper_kwargs or {}
    if vec_env_cls is None:
        vec_env_cls = DummyVecEnv
    monitor_class = _sb3_monitor() if _is_sb3_class(vec_env_cls) else Monitor
    env_fns = [
        _make_env_fn(
            env_id,
            i + start_index,
            seed,
            monitor_dir,
            wrapper_class,
            env_kwargs,
            monitor_kwargs,
            wrapper_kwargs,
            monitor_class,
        )
        for i in range(n_envs)
    ]
    vec_env = vec_env_cls(env_fns, **vec_env_kwargs)
    vec_env.seed(seed)
    return vec_env
