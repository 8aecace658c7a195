"""The state every vector env over workers holds: the batch buffers, which worker owns which env, what the vector
env is waiting for, and the seeds / options staged for the envs' next resets."""

from __future__ import annotations

import contextlib
import enum
import multiprocessing.util
import os
import time
import weakref
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

from vecenv.actions import make_action_writer, make_actions_checker
from vecenv.base import VecEnv, VecEnvObs, VecEnvStepReturn, check_open
from vecenv.engine.obs_slots import ObsSlots, default_obs_slots
from vecenv.engine.replies import wait_ready
from vecenv.errors import AlreadyPendingCallError
from vecenv.interrupts import GUARD
from vecenv.protocol import Command
from vecenv.spaces import (
    batch_copy,
    batch_slice,
    check_for_nested_spaces,
    create_batch_buffer,
)
from vecenv.stats import StepClock
from vecenv.workers import Worker, shutdown_workers
from vecenv.workers.subproc import OWN_STARTS

__all__ = ["AsyncState", "CallRequests", "EngineCore", "ResetRequests"]


class AsyncState(enum.Enum):
    """What a vector env is waiting for."""

    IDLE = "idle"
    WAITING_STEP = "waiting_step"
    #: partial batches in flight or received but not yet returned by ``recv()``
    PARTIAL = "partial"
    #: a reset started by :meth:`WorkerVecEnv.start_reset` and not finished yet
    WAITING_RESET = "waiting_reset"
    #: a call started by :meth:`WorkerVecEnv.start_call` and not finished yet
    WAITING_CALL = "waiting_call"


#: the RESET requests :meth:`WorkerVecEnv.start_reset` sent: ``(worker, local env ids or None for all, payload)``
ResetRequests = list[tuple[int, list[int] | None, Any]]
#: a call :meth:`WorkerVecEnv.start_call` started: ``(command, number of envs, [(worker, payload, [(position,
#: local env id)])])``
CallRequests = tuple[Command, int, list[tuple[int, Any, list[tuple[int, int]]]]]


class EngineCore(VecEnv):
    """The state of a vector env whose sub-envs live in :class:`~vecenv.workers.Worker` groups (see
    :class:`~vecenv.worker_vec_env.WorkerVecEnv`, which documents the parameters): buffers, index bookkeeping,
    async state checks, staged seeds / options, closing."""

    #: dtype of the rewards buffer: float32 as SB3 (vecenv.gymnasium's classes use Gymnasium's float64)
    rewards_dtype: Any = np.float32
    #: whether nested Dict / Tuple observation spaces are accepted (SB3 refuses them; vecenv.gymnasium not)
    nested_spaces: bool = False
    #: how envs' ``reset`` is called by :meth:`reset` (and by automatic resets with a staged seed / options):
    #: False (SB3's vector envs) ``env.reset(seed=seed)``, plus ``options=options`` only when options are set;
    #: True (Gymnasium's vector envs: vecenv.gymnasium's classes, :func:`vecenv.adapters.to_gymnasium`)
    #: ``env.reset(seed=seed, options=options)``, both keywords always. Automatic resets with nothing staged
    #: are ``env.reset()`` either way, as in both libraries.
    gymnasium_resets: bool = False
    #: the observation slots' pool, or None (hand-outs are copies); slot -> worker -> that worker's rows of the slot
    _slots: ObsSlots | None
    _slot_rows: list[list[Any]]

    @property
    def replaces_pending(self) -> bool:
        """Whether :meth:`seed` / :meth:`set_options` replace what an earlier call set, also where it was already
        handed to the workers and not used yet (a None seed or empty options clear it): SB3's rule, for the
        SB3-style classes. vecenv.gymnasium's keep an earlier value where the new one is None
        (:attr:`gymnasium_resets` is set there and by :func:`vecenv.adapters.to_gymnasium`)."""
        return not self.gymnasium_resets

    def __init__(
        self,
        workers: Sequence[Worker],
        observation_space: gym.Space,
        action_space: gym.Space,
        buffers: tuple[Any, np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None,
        action_buffer: Any = None,
        obs_slots: int | Sequence[Any] | None = None,
    ) -> None:
        self._workers = list(workers)
        self.autoreset_mode: AutoresetMode = getattr(self._workers[0], "autoreset_mode", AutoresetMode.SAME_STEP)
        self._seeds_or_options_staged = False
        #: the workers handed seeds / options for their envs' next resets (they may hold some not used yet), and,
        #: per kind, those whose pending values a later seed() / set_options() replaced: the next hand-over
        #: replaces them there too, None and {} included (see replaces_pending)
        self._handed: set[int] = set()
        self._seeds_replaced: set[int] = set()
        self._options_replaced: set[int] = set()
        #: opt-in restarts of dead / timed-out workers (SubprocVecEnv's max_restarts) and how many happened
        self.max_restarts = 0
        self.restarts = 0
        self._dead: dict[int, BaseException] = {}  # worker -> why it must be restarted at the next step_wait
        self._watch_life()
        self._closed = False
        self._state = AsyncState.IDLE
        self._action_buffer = action_buffer
        #: the calling process's time accounts (see step_stats)
        self._clock = StepClock()
        for worker in self._workers:
            worker.clock = self._clock
        try:
            if not self.nested_spaces:
                check_for_nested_spaces(observation_space)
            num_envs = sum(len(worker.env_indices) for worker in self._workers)
            if buffers is None:
                buffers = (
                    create_batch_buffer(observation_space, num_envs),
                    np.zeros((num_envs,), dtype=self.rewards_dtype),
                    np.zeros((num_envs,), dtype=bool),
                    np.zeros((num_envs,), dtype=bool),
                    np.zeros((num_envs,), dtype=bool),
                )
            self._obs_buffer: Any = buffers[0]
            self._rewards, self._dones, self._terminations, self._truncations = buffers[1:5]
            self._env_ranges: list[tuple[int, int]] = []
            self._env_location: list[tuple[int, int]] = []  # env index -> (worker index, local index)
            for w, worker in enumerate(self._workers):
                start, stop = worker.env_indices[0], worker.env_indices[-1] + 1
                self._env_ranges.append((start, stop))
                self._env_location.extend((w, j) for j in range(stop - start))
            self._attach_workers()
            self._setup_obs_slots(observation_space, num_envs, obs_slots)
            self._last_infos: list[dict[str, Any]] = [{} for _ in range(num_envs)]
            # the infos of the step before the last, kept until the next requests are out (WorkerVecEnv._send_steps)
            self._retired_infos: list[dict[str, Any]] | None = None
            self._batch_size = num_envs
            # partial batches: worker -> (command, env ids, RESET payload); env id -> info not returned yet
            self._in_flight: dict[int, tuple[Command, list[int], Any]] = {}
            self._ready: dict[int, dict[str, Any]] = {}
            # after a failure: env id -> info of a step result not returned yet (see _hold_partial)
            self._held: dict[int, dict[str, Any]] = {}
            # whether a failed step left STEP replies unread (collected by _settle before the next request)
            self._unsettled = False
            # the last step's (worker, local ids or None for all) when some envs were held; None: every env
            self._plan: list[tuple[int, list[int] | None]] | None = None
            self._full_plan: list[tuple[int, list[int] | None]] = [(w, None) for w in range(len(self._workers))]
            self._all_workers = list(range(len(self._workers)))
            self._make_step_helpers(action_space)
            # step results received during the current collection, by worker (held if the step fails)
            self._received: dict[int, tuple[list[dict[str, Any]], list[dict[str, Any]]]] = {}
            self._composite_actions = isinstance(action_space, (gym.spaces.Dict, gym.spaces.Tuple))
            self.actions: Any = None
            super().__init__(num_envs, observation_space, action_space)
            GUARD.acquire()  # (Ctrl-C is deferred inside the vector env's bookkeeping: vecenv.interrupts)
            self._guard_release: Any = weakref.finalize(self, GUARD.release)
        except BaseException:
            self._closed = True
            with contextlib.suppress(Exception):
                self._finalizer()
            raise

    def _watch_life(self) -> None:
        """Close the workers (and the envs, which the workers close) at garbage collection and at the exit of the
        process, whatever happens next.

        At exit, multiprocessing's own exit handler runs this first, before it ends its daemon children (the worker
        processes), whatever order the exit hooks were registered in; in a multiprocessing child process, which
        ends without running the other exit hooks, only then does it run at all. A process forked from this one
        (``os.fork()``, multiprocessing's ``fork``) inherits the vector env but not its life: see
        :func:`_forget_inherited`.
        """
        self._finalizer: Any = weakref.finalize(self, shutdown_workers, self._workers)
        self._exit_finalizer = multiprocessing.util.Finalize(
            self, _finalize_at_exit, args=(weakref.ref(self),), exitpriority=10
        )
        _OPEN.add(self)

    def _forget_after_fork(self) -> None:
        """In a process forked from the one that built the vector env (see :func:`_forget_inherited`)."""
        self._finalizer.detach()
        self._exit_finalizer.cancel()
        with contextlib.suppress(AttributeError):  # (a vector env still under construction holds none yet)
            self._guard_release.detach()
        if all(worker.copyable for worker in self._workers):
            return  # the child's own copies of in-process envs: usable there, closed there only by close()
        for worker in self._workers:
            worker.forget_after_fork()
        self._closed = True  # the workers are the parent's: the child neither uses nor closes them

    def _attach_workers(self) -> None:
        """Give each worker the views of the batch buffers that hold its envs."""
        for worker, (start, stop) in zip(self._workers, self._env_ranges, strict=True):
            worker.attach(
                batch_slice(self._obs_buffer, start, stop),
                self._rewards[start:stop],
                self._dones[start:stop],
                self._terminations[start:stop],
                self._truncations[start:stop],
            )

    def _make_step_helpers(self, action_space: gym.Space) -> None:
        """The functions a step uses, built from the spaces and the workers (not copied with the vector env)."""
        # the full step's replies collected in one loop, where the workers' transport has one
        kinds = {type(worker) for worker in self._workers}
        self._common_step: Any = kinds.pop().common_step(self._workers) if len(kinds) == 1 else None
        self._write_action = make_action_writer(action_space)
        self._check_actions = make_actions_checker(action_space)

    # --- copies --------------------------------------------------------------------------------------

    def __getstate__(self) -> dict[str, Any]:
        """``copy.deepcopy`` and ``pickle`` of a vector env whose envs run in the calling process
        (:class:`~vecenv.DummyVecEnv`, :class:`vecenv.gymnasium.SyncVectorEnv`), as with SB3's ``DummyVecEnv`` and
        Gymnasium's ``SyncVectorEnv``: the copy holds copies of the envs, as they were, and steps them on its own
        (the envs must be picklable to pickle it).

        :raises TypeError: where envs run in worker processes or Ray actors, which a copy cannot take along
            (SB3's ``SubprocVecEnv`` and Gymnasium's ``AsyncVectorEnv`` refuse too); the original is unchanged.
        """
        if not self.copyable:
            raise self.uncopyable_error(type(self).__name__)
        state = self.__dict__.copy()
        for name in _NOT_COPIED:
            del state[name]
        return state

    @property
    def copyable(self) -> bool:
        """Whether ``copy.deepcopy`` and ``pickle`` take this vector env: its envs run in the calling process."""
        return all(worker.copyable for worker in self._workers)

    def uncopyable_error(self, name: str) -> TypeError:
        """The error of a copy of this vector env (not :attr:`copyable`), as the caller's class ``name``."""
        where = next(worker.runs_in for worker in self._workers if not worker.copyable)
        return TypeError(
            f"{name} cannot be copied or pickled: its envs run in {where}. Build another one from the same "
            "env_fns instead."
        )

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._make_step_helpers(self.action_space)
        self._slot_rows = [] if self._slots is None else self._rows_of(self._slots.buffers)
        self._watch_life()
        if self._closed:  # a copy of a closed vector env is closed: nothing to attach or release
            self._finalizer.detach()
            self._exit_finalizer.cancel()
            self._guard_release = self._finalizer
            return
        # the copy's workers write into the copy's buffers (copying made each worker's views arrays of their own)
        self._attach_workers()
        GUARD.acquire()
        self._guard_release = weakref.finalize(self, GUARD.release)

    # --- state --------------------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has been called."""
        return self._closed

    @property
    def waiting(self) -> bool:
        """Whether a step started by :meth:`step_async` has not been collected by :meth:`step_wait` yet."""
        return self._state is AsyncState.WAITING_STEP

    def _check_open(self, what: str) -> None:
        check_open(self, what)

    def _check_idle(self, what: str) -> None:
        self._check_open(what)
        if self._state is AsyncState.WAITING_STEP:
            raise AlreadyPendingCallError(
                f"Cannot call {what}() while a step is pending: call step_wait() first to collect it."
            )
        if self._state is AsyncState.PARTIAL:
            raise AlreadyPendingCallError(
                f"Cannot call {what}() while partial batches are in flight: recv() them first (or reset())."
            )
        if self._state is not AsyncState.IDLE:
            request = "reset" if self._state is AsyncState.WAITING_RESET else "call"
            raise AlreadyPendingCallError(
                f"Cannot call {what}() while a {request} is in flight: finish it first (finish_{request}())."
            )

    def wait_until_ready(self, timeout: float | None) -> bool:
        """Wait up to ``timeout`` seconds (None: forever) until every worker has its reply ready (or died).

        Nothing is consumed: the replies are collected afterwards as usual. In-process workers are always
        ready (they run the request when it is collected).

        :return: whether everything was ready in time.
        """
        waiting = [w for w, worker in enumerate(self._workers) if worker.pending is not None and worker.blocks]
        deadline = None if timeout is None else time.monotonic() + timeout
        clock = self._clock if self._state is AsyncState.WAITING_STEP else None
        started = clock.enter() if clock is not None else 0.0
        try:
            while waiting:
                remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
                ready = wait_ready([self._workers[w] for w in waiting], remaining)
                if not ready:
                    return False
                if any(self._workers[waiting[p]].has_ended() for p in ready):
                    return True  # a worker died: collecting raises at once, whatever the others do
                waiting = [w for p, w in enumerate(waiting) if p not in ready]
            return True
        finally:
            if clock is not None:
                clock.wait += clock.leave(started)

    @property
    def terminations(self) -> np.ndarray:
        """bool ``(num_envs,)``: whether each env's last step ended its episode by termination (a copy).

        With :attr:`truncations`, the raw flags behind ``dones`` (both may be True, as Gymnasium reports them;
        ``infos[i]["TimeLimit.truncated"]`` is SB3's ``truncated and not terminated``).
        """
        return self._terminations.copy()

    @property
    def truncations(self) -> np.ndarray:
        """bool ``(num_envs,)``: whether each env's last step ended its episode by truncation (a copy)."""
        return self._truncations.copy()

    def current_obs(self, hand_out: bool = False) -> VecEnvObs:
        """The observations the envs returned last, ``(num_envs, *obs_shape)``, the caller's to keep: a copy, or
        with ``hand_out`` arrays over the current observation slot where there is one free (as :meth:`reset`
        returns them); counted in :meth:`step_stats` either way."""
        if hand_out:
            return self._hand_out_obs()
        self._clock.obs_copied += 1
        return batch_copy(self._obs_buffer)

    # --- observations handed to the caller (vecenv.engine.obs_slots) -------------------------------------

    def _setup_obs_slots(
        self, observation_space: gym.Space, num_envs: int, obs_slots: int | Sequence[Any] | None
    ) -> None:
        """Set up the observation slots: ``obs_slots`` is how many (None: :func:`default_obs_slots`; 0 or 1: none,
        every hand-out is a copy), or the slot buffers themselves (shared memory; the first is the obs buffer)."""
        self._slots = None
        self._slot_rows = []
        #: a one-element int64 array the worker processes read the current slot from (None: no such process)
        self._slot_cell: Any = None
        if not all(worker.supports_obs_slots for worker in self._workers):
            return
        if obs_slots is None:
            obs_slots = default_obs_slots(observation_space, num_envs)
        if isinstance(obs_slots, int):
            if obs_slots < 2:
                return
            buffers = [self._obs_buffer]
            buffers += [create_batch_buffer(observation_space, num_envs) for _ in range(obs_slots - 1)]
        else:
            buffers = list(obs_slots)
        self._slots = ObsSlots(buffers, shared=not isinstance(obs_slots, int))
        self._slot_rows = self._rows_of(buffers)

    def _rows_of(self, buffers: Sequence[Any]) -> list[list[Any]]:
        """Slot -> worker -> that worker's rows of the slot."""
        return [[batch_slice(buffer, start, stop) for start, stop in self._env_ranges] for buffer in buffers]

    def _prepare_obs_write(self, keep_rows: bool) -> None:
        """Before a request that writes observations: if the caller holds the current slot, the envs write into a
        free one from now on (holding the current rows first if ``keep_rows``: the write covers some envs only)."""
        slots = self._slots
        if slots is None or slots.held[slots.current] == 0:
            return
        # (a slot is handed out only when nothing is in flight, and a switch follows at once: no worker still
        # writes into the old slot)
        assert not self._in_flight, "vecenv: observation slot switched while partial batches are in flight"
        target = slots.free_slot(keep_rows)
        if target is None:
            return
        self._obs_buffer = slots.buffers[target]
        if self._slot_cell is not None:
            self._slot_cell[0] = target
        for worker, rows in zip(self._workers, self._slot_rows[target], strict=True):
            worker.use_obs_rows(rows)

    def _hand_out_obs(self) -> VecEnvObs:
        """The latest observations, the caller's to keep: arrays over the current slot, or a copy."""
        slots = self._slots
        if slots is None:
            self._clock.obs_copied += 1
            obs = self._obs_buffer
            return obs.copy() if type(obs) is np.ndarray else batch_copy(obs)
        obs, copied = slots.hand_out()
        if copied:
            self._clock.obs_copied += 1
        else:
            self._clock.obs_shared += 1
        return obs

    def _step_result(self, infos: list[dict[str, Any]]) -> VecEnvStepReturn:
        """``(obs, rewards, dones, infos)`` of the step just collected, the caller's to keep."""
        self._last_infos = infos
        return self._hand_out_obs(), self._rewards.copy(), self._dones.copy(), infos

    def close(self) -> None:
        """Close every env and end every worker process (bounded; idempotent; also runs at garbage collection).

        :raises Exception: the first error an env's ``close()`` raised, after everything was released.
        """
        if self._closed:
            return
        self._closed = True
        self._state = AsyncState.IDLE
        self._in_flight.clear()
        self._ready.clear()
        self._held.clear()
        self._unsettled = False
        self._exit_finalizer.cancel()
        try:
            self._finalizer()
        finally:
            # drop the batch buffers: for worker processes they map shared memory, released with them
            self._obs_buffer = None
            # (arrays handed out keep their slot's memory: mapped until the last of them is gone)
            self._slots, self._slot_rows, self._slot_cell = None, [], None
            self._action_buffer = None
            self._retired_infos = None
            self._rewards = self._dones = self._terminations = self._truncations = np.zeros((0,))
            self._clock.between = None  # (it holds the workers' rows of the shared signals)
            # last: putting the program's SIGINT handler back raises an interrupt held over from a wrapper's
            # bookkeeping, which must not keep anything above from being released
            self._guard_release()

    # --- seeds and options staged for the envs' next resets ------------------------------------------------

    def seed(self, seed: int | Sequence[int | None] | None = None) -> Sequence[int | None]:
        """Set the seed of each env's NEXT reset, whether :meth:`reset` or an autoreset triggers it.

        ``seed(s)`` gives env ``i`` the seed ``s + i`` (SB3); a sequence gives one seed (or None) per env;
        ``None`` draws a random base (as SB3). Unlike SB3, a seed is not lost when an episode ends first:
        the autoreset uses it (then it is forgotten, so the following :meth:`reset` does not reuse it).
        For an env whose step is in flight (partial batches), it applies from the first reset after that step.

        :return: the per-env seeds.
        :raises ValueError: if a sequence does not hold ``num_envs`` seeds.
        """
        seeds = super().seed(seed)
        self._seeds_or_options_staged = True
        if self.replaces_pending:
            self._seeds_replaced |= self._handed
        return seeds

    def set_options(self, options: list[dict] | dict | None = None) -> None:
        """Set the ``options`` of each env's NEXT reset (caller's or autoreset; see :meth:`seed`).

        :raises ValueError: if a list does not hold ``num_envs`` dicts.
        """
        super().set_options(options)
        self._seeds_or_options_staged = True
        if self.replaces_pending:
            self._options_replaced |= self._handed

    @property
    def staged_seeds(self) -> list[int | None]:
        """The seeds :meth:`seed` set that no env has received yet, one per env (None: none for that env)."""
        return list(self._seeds) if self._seeds_or_options_staged else [None] * self.num_envs

    @property
    def staged_options(self) -> list[dict[str, Any]]:
        """The options :meth:`set_options` set that no env has received yet, one dict per env (empty: none)."""
        if not self._seeds_or_options_staged:
            return [{} for _ in range(self.num_envs)]
        return [dict(o) for o in self._options]

    def clear_staged(self) -> None:
        """Forget the seeds / options staged by :meth:`seed` / :meth:`set_options`."""
        self._reset_seeds()
        self._reset_options()
        self._seeds_or_options_staged = False

    def _any_staged(self) -> bool:
        return any(seed is not None for seed in self._seeds) or any(self._options)

    def _take_staged(self, start: int, stop: int) -> tuple[list[int | None], list[dict[str, Any]]]:
        """The seeds / options staged for envs ``start..stop-1``, which are no longer staged here."""
        seeds, options = self._seeds[start:stop], self._options[start:stop]
        # new lists: seed() returned the old one to its caller
        self._seeds = [*self._seeds[:start], *([None] * (stop - start)), *self._seeds[stop:]]
        self._options = [*self._options[:start], *({} for _ in range(stop - start)), *self._options[stop:]]
        self._seeds_or_options_staged = self._any_staged() or bool(self._seeds_replaced or self._options_replaced)
        return seeds, options

    def _check_seeds_and_options(self) -> None:
        if len(self._seeds) != self.num_envs or len(self._options) != self.num_envs:
            raise ValueError(
                f"seed() / set_options() must give one entry per env: expected {self.num_envs}, got "
                f"{len(self._seeds)} seeds and {len(self._options)} options"
            )


#: what a copy of a vector env does not take along (rebuilt by :meth:`EngineCore.__setstate__`): its life's
#: finalizers, the functions built from its spaces and workers, the views of its buffers
_NOT_COPIED = (
    "_finalizer",
    "_exit_finalizer",
    "_guard_release",
    "_common_step",
    "_write_action",
    "_check_actions",
    "_slot_rows",
)

#: the vector envs of this process that are not garbage yet (see :func:`_forget_inherited`)
_OPEN: weakref.WeakSet[EngineCore] = weakref.WeakSet()


def _finalize_at_exit(ref: weakref.ref[EngineCore]) -> None:
    """multiprocessing's exit handler's call: close the vector env if it is still alive (and not closed)."""
    venv = ref()
    if venv is not None:
        venv._finalizer()


def _forget_inherited() -> None:
    """In a child forked from this process: the vector envs it inherits are the parent's. Their worker processes
    are the parent's children, which the child must not end (multiprocessing's exit handler would end them, as
    its own children, when the child exits normally), nor message (closing them would end the parent's workers).
    So the child forgets them: it does not close them at its exit, and their ``close()`` there does nothing.
    Vector envs of in-process envs (``DummyVecEnv``) stay usable in the child, as its own copies."""
    for venv in list(_OPEN):
        venv._forget_after_fork()


def _retire_handed_out_slots() -> None:
    """Before this process forks: the observation slots in shared memory that the caller holds arrays of are
    never written again (:meth:`ObsSlots.retire_handed_out`): the child's copies of those arrays share them."""
    if OWN_STARTS[0]:  # (vecenv's own worker process: it reads none of the caller's arrays)
        return
    for venv in list(_OPEN):
        slots = getattr(venv, "_slots", None)
        if slots is not None:
            slots.retire_handed_out()


os.register_at_fork(before=_retire_handed_out_slots, after_in_child=_forget_inherited)
