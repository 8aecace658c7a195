""":class:`RayVecEnv`: the same vector env with its envs in Ray actors, across the machines of a Ray cluster.

``import vecenv`` does not import ray: it is imported when a :class:`RayVecEnv` is built (the ``ray`` extra).
"""

from __future__ import annotations

import contextlib
import math
import numbers
import os
import warnings
import weakref
from collections.abc import Callable
from operator import methodcaller
from typing import Any

import gymnasium as gym
from gymnasium.vector import AutoresetMode
from numpy.typing import DTypeLike

from vecenv.engine.checks import (
    check_env_fns,
    checked_autoreset_mode,
    checked_batch_size,
    checked_max_restarts,
    checked_n_workers,
    checked_obs_slots,
    checked_rewards_dtype,
    checked_timeout,
)
from vecenv.engine.replies import call_all
from vecenv.env_group import check_same_spaces
from vecenv.worker_vec_env import WorkerVecEnv
from vecenv.workers import Worker, shutdown_workers, split_groups
from vecenv.workers.ray_actors import (
    DEFAULT_CONNECT_TIMEOUT,
    RESERVED_ACTOR_OPTIONS,
    BoundedCall,
    RayWorker,
    call_bounded,
    import_ray,
    init_ray,
    ray_address,
    ray_timeout_message,
)

__all__ = ["DEFAULT_ACTOR_OPTIONS", "DEFAULT_CONNECT_TIMEOUT", "RayVecEnv", "default_ray_workers"]

#: the actor options :class:`RayVecEnv` uses where ``actor_options`` does not set them: one CPU per actor,
#: actors spread over the cluster's nodes
DEFAULT_ACTOR_OPTIONS: dict[str, Any] = {"num_cpus": 1, "scheduling_strategy": "SPREAD"}


def default_ray_workers(num_envs: int, cluster_cpus: float, cpus_per_actor: float) -> int:
    """How many actors :class:`RayVecEnv` makes when ``n_workers`` is None: as many as the cluster's CPUs hold
    (one per CPU for actors that use no CPU of their own), at most one per env, at least one."""
    fit = cluster_cpus / cpus_per_actor if cpus_per_actor > 0 else cluster_cpus
    return max(1, min(num_envs, math.floor(fit + 1e-9)))


def _checked_actor_options(actor_options: Any) -> dict[str, Any]:
    if actor_options is None:
        return dict(DEFAULT_ACTOR_OPTIONS)
    if not isinstance(actor_options, dict):
        raise TypeError(
            f"actor_options must be a dict of Ray actor options (e.g. {{'num_cpus': 1}}), got "
            f"{type(actor_options).__name__}"
        )
    reserved = sorted(set(actor_options) & set(RESERVED_ACTOR_OPTIONS))
    if reserved:
        raise ValueError(
            f"actor_options must not set {reserved}: vecenv names its actors and never lets Ray restart them or "
            "retry a call (a retried step would run again on a fresh actor); use RayVecEnv(max_restarts=...) to "
            "have vecenv rebuild dead actors"
        )
    return {**DEFAULT_ACTOR_OPTIONS, **actor_options}


def _checked_connect_timeout(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(
            f"connect_timeout must be a positive number of seconds or None (no limit), got {type(value).__name__} "
            f"{value!r}"
        )
    if not math.isfinite(value) or value <= 0:
        raise ValueError(
            f"connect_timeout must be a positive, finite number of seconds or None (no limit), got {value!r}"
        )
    return float(value)


def _shutdown(workers: list[Worker], ray: Any, started_ray: bool, connect_timeout: float | None = None) -> None:
    """Close every actor (their envs' ``close``), then shut Ray down if :class:`RayVecEnv` started it (waiting
    at most ``connect_timeout`` seconds for ``ray.shutdown``: a warning says when it did not return)."""
    try:
        shutdown_workers(workers)
    finally:
        if started_ray and ray.is_initialized():
            job = BoundedCall(ray.shutdown, name="vecenv-ray-shutdown")
            if job.wait(connect_timeout):
                with contextlib.suppress(Exception):
                    job.result()
            else:
                warnings.warn(
                    f"RayVecEnv: ray.shutdown() did not return within connect_timeout={connect_timeout:g} s; the "
                    "Ray processes started by this vector env may still run (`ray status`)",
                    RuntimeWarning,
                    stacklevel=2,
                )


class RayVecEnv(WorkerVecEnv):
    """Vectorized env whose sub-envs run in Ray actors, each actor stepping a group of envs, on one machine or
    across a Ray cluster; Stable-Baselines3's ``VecEnv`` contract, as :class:`~vecenv.SubprocVecEnv`.

    Each actor builds its envs from the cloudpickled factories (never in this process) and steps them with
    the same code as every backend. A step is one remote call per actor: its slice of the actions in; its
    observations, rewards, terminated / truncated flags and the infos that are not defaults out, copied into
    this process's buffers. ``step_async`` returns at once; ``step_wait`` waits with ``ray.wait``. The
    partial-batch API (:meth:`async_reset`, :meth:`send`, :meth:`recv`) works per actor.

    Ray is initialised here if it is not already (``ray.init(**ray_init_kwargs)``; on a cluster pass
    ``ray_init_kwargs={"address": "auto"}`` or the head's address, or call ``ray.init`` yourself first), and
    shut down by :meth:`close` only if it was started here. :meth:`close` also ends every actor (also at
    garbage collection and interpreter exit); the actors are named in the ``"vecenv"`` Ray namespace. A
    constructor that raises (a refused argument or space, an env factory's error) leaves nothing behind: the
    actors it made are ended, and Ray is shut down again if it was started here (a Ray that was already running
    is left running).

    :param env_fns: callables that each return a new ``gymnasium.Env`` (cloudpickled to the actors).
    :param n_workers: number of actors (None: as many as the cluster's CPUs hold with ``actor_options``'s
        ``num_cpus``, at most ``len(env_fns)``; see :func:`default_ray_workers`). Envs are split into
        contiguous groups whose sizes differ by at most one.
    :param actor_options: Ray's own actor options, passed through: ``num_cpus`` (default 1), ``num_gpus``,
        ``resources``, ``memory``, ``scheduling_strategy`` (default ``"SPREAD"``; e.g. a
        ``NodeAffinitySchedulingStrategy``), ``runtime_env``, ... Not ``max_restarts``, ``max_task_retries``,
        ``name``, ``namespace``, ``lifetime`` (vecenv sets them).
    :param ray_init_kwargs: keyword arguments of ``ray.init`` when Ray is not initialised yet (e.g.
        ``{"address": "ray://head:10001"}``, ``{"num_cpus": 8}``); ignored, with a warning, when it is.
    :param step_timeout: seconds an actor may take to step its envs; one that does not answer in time is
        killed and :class:`TimeoutError` names its envs (None: wait forever, still watching for its death).
    :param reset_timeout: the same for resets (and for building the envs).
    :param max_restarts: how many times (in total) a dead, lost or timed-out actor is replaced by a new one
        instead of raising: its envs are rebuilt, reset (with the seeds / options still staged for them) and
        report ``dones=True``, ``infos[i]["TimeLimit.truncated"] = True``, ``infos[i]["vecenv.restarted"] =
        True`` at that step or their next one, as with :class:`~vecenv.SubprocVecEnv` (docs/reliability.md).
    :param autoreset_mode: what happens when an episode ends (:class:`gymnasium.vector.AutoresetMode`), as
        :class:`~vecenv.SubprocVecEnv`.
    :param batch_size: minimum number of envs :meth:`recv` returns in the partial-batch API (None: all envs).
    :param rewards_dtype: dtype of the rewards ``step`` returns, ``np.float32`` (None, the default) or
        ``np.float64``, as :class:`~vecenv.SubprocVecEnv`'s ``rewards_dtype``.
    :param connect_timeout: seconds to wait for Ray itself (default :data:`DEFAULT_CONNECT_TIMEOUT`, 60; None:
        without limit), at each of these waits: ``ray.init`` starting or joining Ray, the query of the
        cluster's CPUs, the registration of each actor (and of each rebuilt one), and each actor's start on a node
        (a node with its ``actor_options``' resources free, its process started; not the building of its envs,
        which ``reset_timeout`` bounds). When it passes, :class:`TimeoutError` names Ray's address and what to
        check, and nothing is left behind. On a cluster whose autoscaler adds nodes for new actors, raise it.
    :param obs_slots: as :class:`~vecenv.SubprocVecEnv`'s ``obs_slots``: the batches the actors send are stored
        into one of these buffers, and ``step()`` / ``reset()`` return it without copying it again (None: up to 4
        within 256 MiB for a batch of 64 KiB or more, else none; 0 or 1: every call returns a copy).
    :raises MissingExtraError: if ray is not installed (install the ``ray`` extra).
    :raises TimeoutError: if Ray did not answer within ``connect_timeout`` (the message names Ray's address).
    :raises ValueError: for an ``n_workers`` below 1, a non-positive timeout, a negative ``max_restarts``, a
        ``batch_size`` outside ``1..len(env_fns)``, a ``rewards_dtype`` other than float32 and float64, an
        ``obs_slots`` that is not a non-negative integer, reserved or unsatisfiable ``actor_options``, or envs
        whose spaces differ.
    :raises TypeError: if ``env_fns`` is not a list of callables, ``actor_options`` not a dict, or
        ``connect_timeout`` not a number.
    :raises NotImplementedError: for a nested Dict / Tuple observation space (as Stable-Baselines3).
    :raises Exception: what an env factory raised, with its own type and message (and a note naming the actor).
    """

    def __init__(
        self,
        env_fns: list[Callable[[], gym.Env]],
        n_workers: int | None = None,
        actor_options: dict[str, Any] | None = None,
        ray_init_kwargs: dict[str, Any] | None = None,
        step_timeout: float | None = None,
        reset_timeout: float | None = None,
        max_restarts: int = 0,
        autoreset_mode: AutoresetMode | str = AutoresetMode.SAME_STEP,
        batch_size: int | None = None,
        rewards_dtype: DTypeLike | None = None,
        connect_timeout: float | None = DEFAULT_CONNECT_TIMEOUT,
        obs_slots: int | None = None,
    ) -> None:
        env_fns = check_env_fns(env_fns)
        obs_slots = checked_obs_slots(obs_slots)
        connect_timeout = _checked_connect_timeout(connect_timeout)
        #: the numpy type of the rewards ``step`` returns (``np.float32`` or ``np.float64``)
        self.rewards_dtype = checked_rewards_dtype(rewards_dtype, type(self).rewards_dtype)
        mode = checked_autoreset_mode(autoreset_mode)
        step_timeout = checked_timeout("step_timeout", step_timeout)
        reset_timeout = checked_timeout("reset_timeout", reset_timeout)
        max_restarts = checked_max_restarts(max_restarts)
        if n_workers is not None:
            n_workers = min(checked_n_workers(n_workers), len(env_fns))
        if batch_size is not None:
            batch_size = checked_batch_size(batch_size, len(env_fns))
        options = _checked_actor_options(actor_options)
        if ray_init_kwargs is not None and not isinstance(ray_init_kwargs, dict):
            raise TypeError(
                f"ray_init_kwargs must be a dict of ray.init arguments, got {type(ray_init_kwargs).__name__}"
            )
        ray = import_ray()
        started_ray = False
        if not ray.is_initialized():
            # (a ray.init that fails or times out leaves nothing behind: see init_ray)
            init_ray(ray, dict(ray_init_kwargs or {}), connect_timeout)
            started_ray = True
        elif ray_init_kwargs:
            warnings.warn(
                f"RayVecEnv: Ray is already initialised, so ray_init_kwargs={ray_init_kwargs!r} is ignored",
                RuntimeWarning,
                stacklevel=2,
            )
        workers: list[Worker] = []
        try:
            per_actor = float(options.get("num_cpus", 1) or 0)
            cpus = math.inf
            if n_workers is None or per_actor > 0:  # (actors that use no CPU always fit: nothing to ask)
                resources = call_bounded(
                    ray.cluster_resources,
                    connect_timeout,
                    lambda: ray_timeout_message(
                        "answer the query of the cluster's CPUs (ray.cluster_resources)",
                        connect_timeout or 0.0,
                        ray_address(ray),
                    ),
                )
                cpus = float(resources.get("CPU", 0.0))
            if n_workers is None:
                n_workers = default_ray_workers(len(env_fns), cpus, per_actor)
            if per_actor * n_workers > cpus + 1e-9:
                raise ValueError(
                    f"{n_workers} actors with num_cpus={per_actor:g} need {per_actor * n_workers:g} CPUs, but the Ray "
                    f"cluster has {cpus:g}: they could never all start. Use fewer actors (n_workers), a smaller "
                    "actor_options['num_cpus'] (0 lets actors share CPUs), or a larger cluster"
                )
            prefix = f"vecenv-{os.getpid()}-{id(self):x}"
            for w, group in enumerate(split_groups(len(env_fns), n_workers)):
                worker = RayWorker(
                    [env_fns[i] for i in group],
                    group,
                    mode,
                    options,
                    name=f"{prefix}-{w}",
                    connect_timeout=connect_timeout,
                )
                worker.step_timeout, worker.reset_timeout = step_timeout, reset_timeout
                workers.append(worker)
            all_spaces = call_all(methodcaller("handshake", reset_timeout), workers, workers)
            observation_space, action_space = all_spaces[0]
            for other, (obs_space, act_space) in zip(workers[1:], all_spaces[1:], strict=True):
                check_same_spaces(other.env_indices[0], obs_space, act_space, observation_space, action_space)
            # (refuses a nested observation space; it closes the workers itself when it raises)
            super().__init__(workers, observation_space, action_space, obs_slots=obs_slots)
        except BaseException:
            # every way out of here leaves nothing behind: the actors made so far, and Ray if it was started here
            with contextlib.suppress(Exception):
                _shutdown(workers, ray, started_ray, connect_timeout)
            raise
        # one finalizer closes the actors, then Ray if it was started here (close, garbage collection, exit)
        self._finalizer.detach()
        self._finalizer = weakref.finalize(self, _shutdown, self._workers, ray, started_ray, connect_timeout)
        self.n_workers = n_workers
        self.actor_options = options
        #: whether this vector env started Ray (and so shuts it down on :meth:`close`)
        self.started_ray = started_ray
        if batch_size is not None:
            self.batch_size = int(batch_size)
        self.max_restarts = max_restarts
        self.step_timeout, self.reset_timeout = step_timeout, reset_timeout
        #: seconds to wait for Ray itself (see the ``connect_timeout`` argument; None: without limit)
        self.connect_timeout = connect_timeout

    @property
    def actors(self) -> list[Any]:
        """The Ray actor handles, one per group of envs (a restarted actor's handle replaces the old one)."""
        return [worker.actor for worker in self._workers if isinstance(worker, RayWorker)]

    @property
    def node_ids(self) -> list[str | None]:
        """The Ray node each actor runs on, one per actor."""
        return [worker.node_id for worker in self._workers if isinstance(worker, RayWorker)]
