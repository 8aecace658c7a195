"""The backends of ``vecenv bench`` by name: how each is built, what it needs, and which run by default.

A backend is a :class:`BackendSpec` in :data:`BACKENDS` (report order), or a ``vecenv-subproc-w<K>``
variant (``SubprocVecEnv(n_workers=K)``) made by :func:`backend_spec`. Each builder imports its library
when called, so that a case process imports only its own backend's library (``BackendSpec.imports``,
before the start-up timer).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from vecenv import vec_env
from vecenv.bench.adapters import BenchBackend, EnvFn, EnvPoolAdapter, GymVectorAdapter, PlainLoop, VecEnvAdapter
from vecenv.optional import SB3_INSTALL_HINT, install_hint, is_installed

__all__ = [
    "BACKENDS",
    "DEFAULT_BACKENDS",
    "DEFAULT_N_WORKERS",
    "SB3_COLD_WORKER_MIB",
    "BackendSpec",
    "backend_spec",
    "default_backend_names",
    "parent_share",
]

#: Estimated memory of one Stable-Baselines3 worker that imports torch itself (used with ``preload=False``).
SB3_COLD_WORKER_MIB = 350


def _build_plain(env_fns: Sequence[EnvFn], seed: int, n_workers: int | None) -> BenchBackend:
    return PlainLoop(env_fns, seed)


def _build_vecenv_dummy(env_fns: Sequence[EnvFn], seed: int, n_workers: int | None) -> BenchBackend:
    from vecenv import DummyVecEnv

    return VecEnvAdapter(DummyVecEnv(list(env_fns)), seed)


def _build_vecenv_subproc(env_fns: Sequence[EnvFn], seed: int, n_workers: int | None) -> BenchBackend:
    from vecenv import SubprocVecEnv

    kwargs: dict[str, Any] = {} if n_workers is None else {"n_workers": n_workers}
    return VecEnvAdapter(SubprocVecEnv(list(env_fns), **kwargs), seed)


def _build_vecenv_ray(env_fns: Sequence[EnvFn], seed: int, n_workers: int | None) -> BenchBackend:
    from vecenv import RayVecEnv

    # a local Ray of this case's own (started here, shut down by close): one actor per core by default
    ray_init_kwargs = {"include_dashboard": False, "log_to_driver": False}
    return VecEnvAdapter(RayVecEnv(list(env_fns), n_workers=n_workers, ray_init_kwargs=ray_init_kwargs), seed)


def _envpool_pool(env_fns: Sequence[EnvFn], seed: int) -> Any:
    """EnvPool's own pool of the workload's env (made from the factory's env id; seeded by ``envpool.make``)."""
    envpool = importlib.import_module("envpool")
    env_id = getattr(env_fns[0], "env_id", None)
    return envpool.make(env_id, env_type="gymnasium", num_envs=len(env_fns), seed=seed)


def _build_envpool(env_fns: Sequence[EnvFn], seed: int, n_workers: int | None) -> BenchBackend:
    pool = _envpool_pool(env_fns, seed)
    return EnvPoolAdapter(pool, pool.single_action_space)


def _build_vecenv_envpool(env_fns: Sequence[EnvFn], seed: int, n_workers: int | None) -> BenchBackend:
    from vecenv import VecMonitor, VecNormalize
    from vecenv.adapters import from_gymnasium

    venv = VecNormalize(VecMonitor(from_gymnasium(_envpool_pool(env_fns, seed))))
    return EnvPoolAdapter(venv, venv.action_space)


def parent_share(num_envs: int) -> int:
    """``parent_envs`` of the ``vecenv-subproc-parent`` backend: an equal share per core (the calling process
    takes one core, the default ``n_workers`` the others); 0 below 2 cores or when ``num_envs`` is below the
    number of cores (the backend is then not run)."""
    cores = vec_env.default_n_workers()
    return num_envs // cores if cores > 1 else 0


def _build_vecenv_subproc_parent(env_fns: Sequence[EnvFn], seed: int, n_workers: int | None) -> BenchBackend:
    from vecenv import SubprocVecEnv

    return VecEnvAdapter(SubprocVecEnv(list(env_fns), parent_envs=parent_share(len(env_fns))), seed)


def _build_sb3_dummy(env_fns: Sequence[EnvFn], seed: int, n_workers: int | None) -> BenchBackend:
    sb3_vec_env = importlib.import_module("stable_baselines3.common.vec_env")
    return VecEnvAdapter(sb3_vec_env.DummyVecEnv(list(env_fns)), seed)


def _build_sb3_subproc(env_fns: Sequence[EnvFn], seed: int, n_workers: int | None) -> BenchBackend:
    sb3_vec_env = importlib.import_module("stable_baselines3.common.vec_env")
    return VecEnvAdapter(sb3_vec_env.SubprocVecEnv(list(env_fns)), seed)


def _build_gym_sync(env_fns: Sequence[EnvFn], seed: int, n_workers: int | None) -> BenchBackend:
    return GymVectorAdapter(gym.vector.SyncVectorEnv(list(env_fns)), seed)


def _build_gym_async(env_fns: Sequence[EnvFn], seed: int, n_workers: int | None) -> BenchBackend:
    return GymVectorAdapter(gym.vector.AsyncVectorEnv(list(env_fns), shared_memory=True), seed)


def _build_vecenv_gym_sync(env_fns: Sequence[EnvFn], seed: int, n_workers: int | None) -> BenchBackend:
    from vecenv.gymnasium import SyncVectorEnv

    return GymVectorAdapter(SyncVectorEnv(list(env_fns)), seed)


def _build_vecenv_gym_async(env_fns: Sequence[EnvFn], seed: int, n_workers: int | None) -> BenchBackend:
    from vecenv.gymnasium import AsyncVectorEnv

    kwargs: dict[str, Any] = {} if n_workers is None else {"n_workers": n_workers}
    return GymVectorAdapter(AsyncVectorEnv(list(env_fns), shared_memory=True, **kwargs), seed)


@dataclass(frozen=True)
class BackendSpec:
    """A backend of the benchmark.

    :param name: name on the command line and in reports.
    :param label: one-line description.
    :param library: the library it comes from (``"-"`` for the plain loop).
    :param in_process: whether the envs run in the calling process (the per-step overhead over the
        plain loop is reported for these).
    :param build: ``build(env_fns, seed, n_workers)`` returns the wrapped backend.
    :param requires: modules that must be importable.
    :param imports: modules imported before the start-up timer (the library, as a user script would).
    :param preload: modules the forkserver imports once, so that workers start from them (as when a script
        imports its vector-env library at top level and the forkserver preloads ``__main__``).
    :param n_workers: ``SubprocVecEnv(n_workers=...)`` for the vecenv variants.
    :param workloads: the workloads it can run (None: all); EnvPool has only its own C++ envs.
    """

    name: str
    label: str
    library: str
    in_process: bool
    build: Callable[[Sequence[EnvFn], int, int | None], BenchBackend]
    requires: tuple[str, ...] = ()
    imports: tuple[str, ...] = ()
    preload: tuple[str, ...] = ()
    n_workers: int | None = None
    workloads: tuple[str, ...] | None = None

    def unavailable_reason(self) -> str | None:
        """Why this backend cannot run here (a missing package), or None."""
        for module in self.requires:
            if not is_installed(module):
                hint = f" (install it: {SB3_INSTALL_HINT})" if self.library == "stable-baselines3" else ""
                if module == "ray":
                    hint = f" ({install_hint('ray')})"
                return f"{module} is not installed{hint}"
        return None


_VECENV_PRELOAD = ("vecenv", "vecenv.bench.workloads")
_SB3_PRELOAD = ("stable_baselines3.common.vec_env", "vecenv.bench.workloads")

#: The fixed backends, in report order (``vecenv-subproc-w<K>`` variants are made by :func:`backend_spec`).
BACKENDS: dict[str, BackendSpec] = {
    spec.name: spec
    for spec in (
        BackendSpec("plain", "plain in-process loop over gym envs (baseline)", "-", True, _build_plain),
        BackendSpec("vecenv-dummy", "vecenv.DummyVecEnv", "vecenv", True, _build_vecenv_dummy, imports=("vecenv",)),
        BackendSpec(
            "vecenv-subproc",
            "vecenv.SubprocVecEnv (default n_workers)",
            "vecenv",
            False,
            _build_vecenv_subproc,
            imports=("vecenv",),
            preload=_VECENV_PRELOAD,
        ),
        BackendSpec(
            "vecenv-subproc-parent",
            "vecenv.SubprocVecEnv(parent_envs=N // cores): this process steps one share, cores - 1 workers the rest",
            "vecenv",
            False,
            _build_vecenv_subproc_parent,
            imports=("vecenv",),
            preload=_VECENV_PRELOAD,
        ),
        BackendSpec(
            "vecenv-ray",
            "vecenv.RayVecEnv on a local Ray (one actor per core, 1 CPU each)",
            "vecenv",
            False,
            _build_vecenv_ray,
            requires=("ray",),
            imports=("vecenv", "ray"),
        ),
        BackendSpec(
            "envpool",
            "EnvPool's own C++ pool (envpool.make, gymnasium API; CartPole only)",
            "envpool",
            False,
            _build_envpool,
            requires=("envpool",),
            imports=("envpool",),
            workloads=("cartpole",),
        ),
        BackendSpec(
            "vecenv-envpool",
            "VecNormalize(VecMonitor(from_gymnasium(EnvPool pool))): vecenv's adapter and wrappers over EnvPool",
            "vecenv",
            False,
            _build_vecenv_envpool,
            requires=("envpool",),
            imports=("vecenv", "envpool"),
            workloads=("cartpole",),
        ),
        BackendSpec(
            "sb3-dummy",
            "stable_baselines3 DummyVecEnv",
            "stable-baselines3",
            True,
            _build_sb3_dummy,
            requires=("stable_baselines3", "torch"),
            imports=("stable_baselines3.common.vec_env",),
        ),
        BackendSpec(
            "sb3-subproc",
            "stable_baselines3 SubprocVecEnv (forkserver)",
            "stable-baselines3",
            False,
            _build_sb3_subproc,
            requires=("stable_baselines3", "torch"),
            imports=("stable_baselines3.common.vec_env",),
            preload=_SB3_PRELOAD,
        ),
        BackendSpec("gym-sync", "gymnasium SyncVectorEnv", "gymnasium", True, _build_gym_sync),
        BackendSpec(
            "gym-async",
            "gymnasium AsyncVectorEnv(shared_memory=True)",
            "gymnasium",
            False,
            _build_gym_async,
        ),
        BackendSpec(
            "vecenv-gym-sync",
            "vecenv.gymnasium.SyncVectorEnv (Gymnasium's API, next-step autoreset)",
            "vecenv",
            True,
            _build_vecenv_gym_sync,
            imports=("vecenv.gymnasium",),
        ),
        BackendSpec(
            "vecenv-gym-async",
            "vecenv.gymnasium.AsyncVectorEnv (Gymnasium's API, default n_workers)",
            "vecenv",
            False,
            _build_vecenv_gym_async,
            imports=("vecenv.gymnasium",),
            preload=("vecenv.gymnasium", "vecenv.bench.workloads"),
        ),
    )
}
#: ``SubprocVecEnv(n_workers=K)`` variants run by default (besides the default ``n_workers``).
DEFAULT_N_WORKERS = (1, 4)
_VARIANT = re.compile(r"vecenv-subproc-w([1-9][0-9]*)")


def backend_spec(name: str) -> BackendSpec:
    """The backend called ``name``: one of :data:`BACKENDS` or ``vecenv-subproc-w<K>``.

    :raises KeyError: for an unknown name.
    """
    if name in BACKENDS:
        return BACKENDS[name]
    match = _VARIANT.fullmatch(name)
    if match is None:
        raise KeyError(name)
    k = int(match.group(1))
    base = BACKENDS["vecenv-subproc"]
    return BackendSpec(
        name,
        f"vecenv.SubprocVecEnv(n_workers={k})",
        base.library,
        False,
        base.build,
        imports=base.imports,
        preload=base.preload,
        n_workers=k,
    )


def default_backend_names(n_workers: Sequence[int] = DEFAULT_N_WORKERS) -> list[str]:
    """Every backend in report order, with a ``vecenv-subproc-w<K>`` variant for each ``n_workers``."""
    names = list(BACKENDS)
    at = names.index("vecenv-subproc") + 1
    names[at:at] = [f"vecenv-subproc-w{k}" for k in n_workers]
    return names


DEFAULT_BACKENDS = default_backend_names()
