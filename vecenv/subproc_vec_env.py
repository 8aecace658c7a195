"""SB3's ``SubprocVecEnv``: groups of envs in worker processes, with shared memory, timeouts and restarts."""

from __future__ import annotations

import contextlib
import errno
import multiprocessing as mp
import resource
from collections.abc import Callable
from operator import methodcaller
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from numpy.typing import DTypeLike

from vecenv.engine.checks import (
    check_env_fns,
    checked_autoreset_mode,
    checked_batch_size,
    checked_max_restarts,
    checked_n_workers,
    checked_obs_slots,
    checked_parent_envs,
    checked_rewards_dtype,
    checked_timeout,
)
from vecenv.engine.obs_slots import default_obs_slots
from vecenv.engine.replies import call_all
from vecenv.env_group import check_same_spaces
from vecenv.errors import add_note
from vecenv.interrupts import GUARD
from vecenv.shared_memory import SharedBatch, SharedFd
from vecenv.spaces import (
    create_batch_buffer,
)
from vecenv.worker_vec_env import WorkerVecEnv
from vecenv.workers import InProcessWorker, SubprocWorker, Worker, shutdown_workers, split_groups
from vecenv.workers.spin import SPIN_LIMIT, BetweenSteps, Spinner, checked_wait_mode, usable_cores, who_spins

__all__ = ["SubprocVecEnv", "default_n_workers", "split_groups"]


def default_n_workers(parent_envs: int = 0) -> int:
    """The default number of worker processes: the CPU cores this process may use (its affinity, at most its
    cgroup's CPU limit: :func:`~vecenv.workers.spin.usable_cores`), minus the one it uses itself when it steps
    envs (``parent_envs``), at least one."""
    return max(1, usable_cores() - (1 if parent_envs else 0))


class SubprocVecEnv(WorkerVecEnv):
    """Runs the envs in worker processes, several envs per process (Stable-Baselines3's ``SubprocVecEnv``).

    Envs are split into ``n_workers`` contiguous groups; each worker process steps its group with the
    same code as :class:`DummyVecEnv`, writing observations, rewards and dones in place into shared
    memory, so a step costs one small message each way per worker and no pickling of arrays.
    Results are identical to :class:`DummyVecEnv` for the same env factories, seeds and actions.

    Worker processes ignore SIGINT, die with the parent, and are ended by :meth:`close`, at garbage
    collection or at interpreter exit. An exception raised by an env is re-raised here with its own
    type and message, a note naming the env index, and the worker's traceback chained as cause.

    .. warning:: With the ``forkserver`` and ``spawn`` start methods, scripts must guard their entry
        point with ``if __name__ == "__main__":`` and env factories must be picklable by cloudpickle.

    :param env_fns: callables that each return a new ``gymnasium.Env``.
    :param start_method: a method from :func:`multiprocessing.get_all_start_methods`; None picks
        ``"forkserver"`` where available, else ``"spawn"`` (as SB3).
    :param n_workers: number of worker processes (None: one per CPU core available to this process, its
        affinity, at most its cgroup's CPU limit rounded up; never more than ``len(env_fns) - parent_envs``).
        ``n_workers=len(env_fns)`` gives SB3's one process per env.
    :param shared_memory: move observations, rewards, dones and actions through shared memory (default).
        Observations of spaces with no fixed-size dtype (e.g. Text) are pickled through the pipe
        automatically; ``False`` pickles everything (for debugging).
    :param batch_size: minimum number of envs :meth:`recv` returns in the partial-batch API
        (:meth:`async_reset` / :meth:`send` / :meth:`recv`); None: all envs. Results come back per worker
        group, so one env per worker (``n_workers=len(env_fns)``) gives EnvPool's exact batches.
    :param autoreset_mode: what happens when an episode ends (:class:`gymnasium.vector.AutoresetMode`):
        ``SAME_STEP`` (SB3's rule, default), ``NEXT_STEP`` or ``DISABLED``; see docs/semantics.md (step and
        reset) and docs/gymnasium-api.md (autoreset modes).
    :param step_timeout: seconds a worker may take to step its envs; a worker that does not answer in time
        is killed and :class:`TimeoutError` names its envs (None: wait forever, still watching for death).
    :param reset_timeout: the same for resets.
    :param parent_envs: how many envs (the first ones, ``0..parent_envs-1``) this process steps itself,
        in ``step_wait``, while the worker processes step the rest (default 0: every env in a worker). The
        calling process otherwise sleeps through the step, so on a machine with as many cores as worker
        processes this uses its core and saves one wake-up per step: e.g. on 2 cores ``n_workers=1,
        parent_envs=num_envs // 2`` (measurements in docs/performance.md). The parent's envs are not
        isolated: their exceptions are raised as from
        :class:`DummyVecEnv`, ``step_timeout``, ``reset_timeout`` and ``max_restarts`` do not cover them, and
        a crash or hang in one of them is the caller's. ``n_workers=None`` then means one worker process per
        core minus one. Must be below ``len(env_fns)``.
    :param max_restarts: how many times (in total) a dead or timed-out worker is restarted from its env
        factories instead of raising, whichever request meets it (step, reset, seeds handed on, calls,
        partial batches): its envs are reset (with the seeds / options still pending for them) and return
        a fresh first observation with ``dones=True``, ``infos[i]["TimeLimit.truncated"] = True`` and
        ``infos[i]["vecenv.restarted"] = True`` (and the cause in ``infos[i]["vecenv.restart_cause"]``) at
        that step or their next one, and a :class:`RuntimeWarning` names the cause. Over the budget the
        error is raised as without restarts; a worker that died or was killed is never used again. See
        docs/reliability.md.
    :param wait_mode: how this process and the worker processes wait for each other's messages. ``"block"``: in the
        kernel (``poll(2)`` / ``read(2)``), which costs a wake-up (tens of microseconds on a VM) per message.
        ``"spin"``: first spin (up to 1 ms, yielding the core to any process that needs it) on a counter the other
        side bumps in shared memory, then block as above: this process for every step's replies, each worker for
        every request. ``"auto"`` (default): only processes that have a core of their own among those this process
        may use (:func:`~vecenv.workers.spin.usable_cores`) spin: this process and the workers if ``n_workers + 1``
        fit the cores, the workers alone (this process blocks) if ``n_workers`` do and are 2 or more, else nobody (on
        one core, nobody); each spin lasts about 1.5 times the waits it has been seeing, none while those are longer
        than 1 ms, and the workers block instead while this process spends over 50 us or over 1.5 busy cores between
        steps (a trainer's work, which needs the cores), unless its busy cores, at least one, fit in the cores the
        spinning workers leave free (e.g. a single-threaded trainer beside 8 workers on 16 cores). Dead workers,
        timeouts, restarts and Ctrl-C are handled the same in every mode. Spinning needs ``shared_memory=True``
        (without it every mode blocks). ``step_stats()`` says which mode is in use and the time spent spinning;
        measurements in docs/performance.md.
    :param rewards_dtype: dtype of the rewards ``(num_envs,)`` that ``step`` returns: ``np.float32`` (None, the
        default: as SB3's ``DummyVecEnv``, and as vecenv's :class:`DummyVecEnv`) or ``np.float64``: what SB3's
        ``SubprocVecEnv`` returns for envs whose rewards are Python floats (``np.stack`` of them), the envs'
        rewards unrounded. Choose float64 to get the rewards of SB3's ``SubprocVecEnv`` bit for bit:
        :class:`~vecenv.VecNormalize` accumulates returns in float64, so with rewards that float32 rounds
        (non-integer ones) the default gives statistics that differ from an SB3 ``SubprocVecEnv`` run in the
        last bits (docs/migrating-from-sb3.md). Their ``np.dtype`` and names (``"float32"``, ``"float64"``) are accepted
        too.
    :param obs_slots: how many observation batch buffers ("slots") the workers write into, in turn, so that
        ``step()`` and ``reset()`` hand out the observations without copying them
        (:mod:`vecenv.engine.obs_slots`). None (default): up to 4, within 256 MiB in all, for a batch of 64 KiB
        or more (a copy of a smaller batch costs less than the slots' bookkeeping); 0 or 1: one buffer, and
        every call returns a copy of it. Either way the arrays returned are the caller's to keep: a slot is
        written again only once no array of it is alive, and when the caller holds all but one, the next
        batch is a copy (``step_stats().obs_copied`` counts them). Spaces without a fixed-size dtype always copy.
    :raises ValueError: for an unknown ``start_method`` (from :func:`multiprocessing.get_context`), an
        ``n_workers`` below 1, a ``batch_size`` outside ``1..len(env_fns)``, a ``parent_envs`` outside
        ``0..len(env_fns)-1``, a ``wait_mode`` other than ``"auto"``, ``"spin"`` and ``"block"``,
        ``wait_mode="spin"`` with ``shared_memory=False``, a ``rewards_dtype`` other than float32 and float64, an
        ``obs_slots`` that is not a non-negative integer, a ``step_timeout`` / ``reset_timeout`` that is not a
        positive number (or None), a ``max_restarts`` that is not a non-negative integer, or an unknown
        ``autoreset_mode`` (all before any process starts); or if the envs' spaces differ.
    :raises TypeError: if ``env_fns`` is not a list of callables, or one returns something that is not a
        ``gymnasium.Env`` (the message names the index).
    """

    def __init__(
        self,
        env_fns: list[Callable[[], gym.Env]],
        start_method: str | None = None,
        n_workers: int | None = None,
        shared_memory: bool = True,
        batch_size: int | None = None,
        autoreset_mode: AutoresetMode | str = AutoresetMode.SAME_STEP,
        step_timeout: float | None = None,
        reset_timeout: float | None = None,
        max_restarts: int = 0,
        parent_envs: int = 0,
        wait_mode: str = "auto",
        rewards_dtype: DTypeLike | None = None,
        obs_slots: int | None = None,
    ) -> None:
        env_fns = check_env_fns(env_fns)
        obs_slots = checked_obs_slots(obs_slots)
        #: the numpy type of the rewards ``step`` returns (``np.float32`` or ``np.float64``)
        self.rewards_dtype = checked_rewards_dtype(rewards_dtype, type(self).rewards_dtype)
        wait_mode = checked_wait_mode(wait_mode)
        if wait_mode == "spin" and not shared_memory:
            raise ValueError(
                "wait_mode='spin' needs shared_memory=True: the spin watches counters in the shared block "
                "(got shared_memory=False)"
            )
        mode = checked_autoreset_mode(autoreset_mode)
        parent_envs = checked_parent_envs(parent_envs, len(env_fns))
        step_timeout = checked_timeout("step_timeout", step_timeout)
        reset_timeout = checked_timeout("reset_timeout", reset_timeout)
        max_restarts = checked_max_restarts(max_restarts)
        if n_workers is None:  # one process per core; with parent_envs, this process takes one of them
            n_workers = default_n_workers(parent_envs)
        n_workers = min(checked_n_workers(n_workers), len(env_fns) - parent_envs)
        if batch_size is not None:
            batch_size = checked_batch_size(batch_size, len(env_fns))  # before any process starts
        if start_method is None:
            start_method = "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"
        ctx = mp.get_context(start_method)
        self.start_method = start_method
        self.n_workers = n_workers
        #: how many envs (``0..parent_envs-1``) this process steps itself (see the ``parent_envs`` parameter)
        self.parent_envs = parent_envs
        #: the ``wait_mode`` asked for (``step_stats().wait_mode`` says whether this process spins)
        self.wait_mode = wait_mode
        parent_spins, workers_spin = who_spins(wait_mode, n_workers) if shared_memory else (False, False)
        adaptive = wait_mode == "auto"
        spinner = Spinner(SPIN_LIMIT, adaptive) if parent_spins else None
        worker_spin = (SPIN_LIMIT, adaptive) if workers_spin else None
        workers: list[Worker] = []
        buffers = None
        action_buffer = None
        shared = None
        try:
            # (a Ctrl-C while a process starts is raised once it is in ``workers``: the except below ends it)
            subprocs = GUARD.run_deferring(
                _start_subprocs, ctx, env_fns, parent_envs, n_workers, mode, step_timeout, reset_timeout, workers
            )
            for subproc in subprocs:
                subproc.use_spinner(spinner, worker_spin)
            observation_space, action_space = _spaces_of(env_fns, parent_envs, mode, workers, subprocs)
            if shared_memory:
                buffers, action_buffer, shared = _share_memory(
                    observation_space,
                    action_space,
                    len(env_fns),
                    self.rewards_dtype,
                    subprocs,
                    obs_slots,
                )
        except BaseException:
            with contextlib.suppress(Exception):
                shutdown_workers(workers)
            raise
        slots: int | list[Any] | None = obs_slots
        if shared is not None:  # the slots live in the shared block (0: observations that do not, or none asked)
            slots = shared.obs_slots if len(shared.obs_slots) > 1 else 0
        super().__init__(workers, observation_space, action_space, buffers, action_buffer, slots)
        if shared is not None and self._slots is not None:
            self._slot_cell = shared.obs_slot
        self._clock.spinner = spinner
        if spinner is not None:
            spinner.restart_accounts()
        if worker_spin is not None and adaptive and buffers is not None:
            self._clock.between = BetweenSteps([subproc.signals for subproc in subprocs])
        self.shared_memory = shared_memory
        if batch_size is not None:
            self.batch_size = int(batch_size)
        self.max_restarts = max_restarts
        self.step_timeout, self.reset_timeout = step_timeout, reset_timeout

    @property
    def processes(self) -> list[Any]:
        """The worker processes (``multiprocessing.Process``), one per worker group (SB3 attribute)."""
        return [worker.process for worker in self._workers if isinstance(worker, SubprocWorker)]

    @property
    def remotes(self) -> list[Any]:
        """The parent's reading ends of the worker pipes, one read-only ``multiprocessing.Connection`` per worker
        (SB3 attribute; vecenv's workers do not speak SB3's ``(cmd, data)`` protocol, so use the VecEnv
        methods rather than sending on these)."""
        return [worker.conn for worker in self._workers if isinstance(worker, SubprocWorker)]


# --- the constructor's steps -----------------------------------------------------------------------------------


def _start_subprocs(
    ctx: Any,
    env_fns: list[Callable[[], gym.Env]],
    parent_envs: int,
    n_workers: int,
    mode: AutoresetMode,
    step_timeout: float | None,
    reset_timeout: float | None,
    workers: list[Worker],
) -> list[SubprocWorker]:
    """Start the worker processes for envs ``parent_envs..`` in ``n_workers`` groups (they build their envs while
    this process goes on); each is appended to ``workers`` as soon as it exists, so a failure can end it."""
    subprocs: list[SubprocWorker] = []
    for group in split_groups(len(env_fns) - parent_envs, n_workers):
        indices = [parent_envs + i for i in group]
        try:
            subproc = SubprocWorker(ctx, [env_fns[i] for i in indices], indices, mode)
        except OSError as exc:
            if exc.errno == errno.EMFILE:
                _note_descriptor_limit(exc, len(subprocs), n_workers)
            raise
        subproc.step_timeout, subproc.reset_timeout = step_timeout, reset_timeout
        subprocs.append(subproc)
        workers.append(subproc)
    return subprocs


#: file descriptors of this process that a worker process takes while it starts: its request and reply pipes, the
#: socket that hands it the shared block, and multiprocessing's sentinel and start pipe
DESCRIPTORS_PER_WORKER = 5


def _note_descriptor_limit(exc: OSError, started: int, n_workers: int) -> None:
    """``exc`` (EMFILE) was raised starting worker ``started`` of ``n_workers``: say what the limit allows."""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if started > 1:
        change = f"Use fewer workers (n_workers={started - 1}: each steps several envs), or raise the limit"
    else:
        change = "Raise the limit"
    add_note(
        exc,
        f"vecenv: this process may have {soft} file descriptors open (RLIMIT_NOFILE); each worker process takes "
        f"about {DESCRIPTORS_PER_WORKER} while it starts, and {started} of the {n_workers} workers were started. "
        f"{change} (ulimit -n; resource.setrlimit(resource.RLIMIT_NOFILE, ...)).",
    )


def _spaces_of(
    env_fns: list[Callable[[], gym.Env]],
    parent_envs: int,
    mode: AutoresetMode,
    workers: list[Worker],
    subprocs: list[SubprocWorker],
) -> tuple[gym.Space, gym.Space]:
    """Build the parent's envs (``0..parent_envs-1``, inserted first in ``workers``) while the worker processes
    start, then wait for each process's handshake.

    :return: the envs' ``(observation_space, action_space)``.
    :raises ValueError: if a worker's spaces differ from the first worker's.
    """
    all_spaces = []
    if parent_envs:
        parent = InProcessWorker(env_fns[:parent_envs], range(parent_envs), mode)
        workers.insert(0, parent)
        all_spaces.append((parent.group.observation_space, parent.group.action_space))
    all_spaces += call_all(methodcaller("handshake"), subprocs, subprocs)
    observation_space, action_space = all_spaces[0]
    for worker, (obs_space, act_space) in zip(workers[1:], all_spaces[1:], strict=True):
        check_same_spaces(worker.env_indices[0], obs_space, act_space, observation_space, action_space)
    return observation_space, action_space


def _share_memory(
    observation_space: gym.Space,
    action_space: gym.Space,
    num_envs: int,
    rewards_dtype: Any,
    subprocs: list[SubprocWorker],
    obs_slots: int | None,
) -> tuple[tuple[Any, np.ndarray, np.ndarray, np.ndarray, np.ndarray], Any, SharedBatch]:
    """Create the shared batch block and map it in every worker process. The block's fd stays open, to set up
    restarted workers (``max_restarts`` may be set after construction too); it is closed with the workers.

    :param obs_slots: the observation slots asked for (None: :func:`default_obs_slots`); the block holds them
        when there are at least two and the observations live in shared memory.
    :return: ``(buffers, action_buffer, shared)``: the buffers for :class:`~vecenv.worker_vec_env.WorkerVecEnv`
        (observations of a space with no fixed-size dtype live in an ordinary buffer: they travel pickled),
        and the block.
    """
    obs_in_shm = SharedBatch.supports(observation_space)
    if obs_slots is None:
        obs_slots = default_obs_slots(observation_space, num_envs)
    slots = obs_slots if obs_in_shm and obs_slots >= 2 else 1
    shared, raw_fd = SharedBatch.create(observation_space, action_space, num_envs, rewards_dtype, slots)
    fd = SharedFd(raw_fd)
    try:
        for worker in subprocs:
            worker.setup_shared(shared, fd, obs_in_shm)
    except BaseException:  # (the vector env is not built: its workers are shut down, the block is closed here)
        fd.close()
        raise
    obs_buffer = shared.obs if obs_in_shm else create_batch_buffer(observation_space, num_envs)
    buffers = (obs_buffer, shared.rewards, shared.dones, shared.terminations, shared.truncations)
    return buffers, shared.actions, shared
