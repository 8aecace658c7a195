"""The vector-env layouts that :func:`vecenv.bench.autotune.autotune` times: what a layout is (:class:`Layout`: a
vector-env class and its keyword arguments, or the plain loop, built over the env factories), the layouts tried
for an env on this machine (:func:`plan_layouts`, by the rules in :mod:`vecenv.bench.autotune`'s description)
and the three of ``vecenv run --compare`` (:func:`compared_layouts`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from vecenv.bench.adapters import BenchBackend, EnvFn, PlainLoop, VecEnvAdapter
from vecenv.bench.backends import parent_share
from vecenv.spaces import buffer_leaves, create_batch_buffer
from vecenv.subproc_vec_env import default_n_workers
from vecenv.workers.spin import usable_cores

__all__ = [
    "BLOCK_MIN_CORES",
    "LARGE_OBS_BYTES",
    "PLAIN",
    "Layout",
    "compared_layouts",
    "observation_bytes",
    "plan_layouts",
]

#: One observation larger than this (bytes) also tries ``SubprocVecEnv(shared_memory=False)``.
LARGE_OBS_BYTES = 16 * 1024
#: On this many cores or more, one worker per core also runs with ``wait_mode="block"``: whether the default's
#: spinning workers pay depends on the machine and the env there (on 2 cores they won on every cheap env; on 16
#: they went either way: docs/performance.md).
BLOCK_MIN_CORES = 4

PLAIN = "plain loop"


@dataclass(frozen=True)
class Layout:
    """One way to run the envs: a vector-env class and its keyword arguments, or the plain loop.

    :param cls: ``"DummyVecEnv"``, ``"SubprocVecEnv"``, ``"RayVecEnv"`` or :data:`PLAIN`.
    :param kwargs: the constructor's keyword arguments, in the order they are shown.
    """

    cls: str
    kwargs: tuple[tuple[str, Any], ...] = ()

    @property
    def is_reference(self) -> bool:
        """Whether this is the plain loop (the reference of the ratio; not a vector env, never the best)."""
        return self.cls == PLAIN

    @property
    def label(self) -> str:
        """The layout as the table shows it, e.g. ``SubprocVecEnv(n_workers=1, parent_envs=4)``."""
        if self.is_reference:
            return f"{PLAIN} (reference)"
        args = ", ".join(f"{key}={value!r}" for key, value in self.kwargs)
        return f"{self.cls}({args})" if args else self.cls

    @property
    def constructor(self) -> str:
        """The constructor call to paste, e.g. ``SubprocVecEnv(env_fns, n_workers=2)``."""
        if self.is_reference:
            return "[env_fn() for env_fn in env_fns]"
        args = "".join(f", {key}={value!r}" for key, value in self.kwargs)
        return f"{self.cls}(env_fns{args})"

    @property
    def has_processes(self) -> bool:
        """Whether the layout starts processes (workers or Ray), which take longer to close."""
        return self.cls in ("SubprocVecEnv", "RayVecEnv")

    def build(self, env_fns: Sequence[EnvFn], seed: int) -> BenchBackend:
        """Build the layout over ``env_fns`` (not reset); a ``RayVecEnv`` needs Ray initialised."""
        if self.is_reference:
            return PlainLoop(env_fns, seed)
        import vecenv

        venv_cls = getattr(vecenv, self.cls)
        return VecEnvAdapter(venv_cls(list(env_fns), **dict(self.kwargs)), seed)


def plan_layouts(num_envs: int, obs_bytes: int, with_ray: bool) -> list[Layout]:
    """The layouts :func:`~vecenv.bench.autotune.autotune` tries on this machine, the plain loop first and Ray last
    (the rules are in :mod:`vecenv.bench.autotune`'s description).

    :param num_envs: envs per layout.
    :param obs_bytes: bytes of one env's observation (:func:`observation_bytes`).
    :param with_ray: whether to try ``RayVecEnv``.
    :return: the layouts, in build order.
    """
    cores = _cores()
    most = min(cores, num_envs)
    layouts = [Layout(PLAIN), Layout("DummyVecEnv")]
    layouts += [Layout("SubprocVecEnv", (("n_workers", k),)) for k in range(1, most + 1)]
    if most == cores >= BLOCK_MIN_CORES:  # the default layout, whose workers spin, with nobody spinning
        layouts.append(Layout("SubprocVecEnv", (("n_workers", most), ("wait_mode", "block"))))
    share = parent_share(num_envs)
    if share > 0:
        in_workers = min(cores - 1, num_envs - share)
        layouts.append(Layout("SubprocVecEnv", (("n_workers", in_workers), ("parent_envs", share))))
    if obs_bytes > LARGE_OBS_BYTES:
        layouts.append(Layout("SubprocVecEnv", (("n_workers", most), ("shared_memory", False))))
    if with_ray:
        layouts.append(Layout("RayVecEnv"))
    return layouts


def compared_layouts(num_envs: int, subproc_kwargs: dict[str, Any] | None = None) -> list[Layout]:
    """The layouts ``vecenv run --compare`` times: the plain loop (the reference), ``DummyVecEnv`` and one
    ``SubprocVecEnv``.

    :param num_envs: envs per layout.
    :param subproc_kwargs: the ``SubprocVecEnv``'s keyword arguments (e.g. ``parent_envs``). Its ``n_workers``
        is SubprocVecEnv's default when not given (one per usable core, less one with ``parent_envs``), and at
        most the envs in worker processes, as SubprocVecEnv uses; the label shows the number.
    :return: the three layouts, in build order.
    """
    kwargs = dict(subproc_kwargs or {})
    parent_envs = int(kwargs.get("parent_envs") or 0)
    n_workers = kwargs.pop("n_workers", None) or default_n_workers(parent_envs)
    shown = {"n_workers": max(1, min(n_workers, num_envs - parent_envs)), **kwargs}
    return [Layout(PLAIN), Layout("DummyVecEnv"), Layout("SubprocVecEnv", tuple(shown.items()))]


def _cores() -> int:
    """The CPU cores this process may use (its affinity, at most its cgroup's CPU limit), as the defaults count."""
    return usable_cores()


def observation_bytes(space: gym.Space) -> int:
    """Bytes of one observation of ``space`` (every array of a Dict / Tuple space added up)."""
    return sum(int(leaf.nbytes) for leaf in buffer_leaves(create_batch_buffer(space, 1)))
