"""One vector-env implementation over pluggable workers: :class:`WorkerVecEnv`.

It holds the batch buffers, the async state and the index bookkeeping (global env index -> worker, local
index), steps and resets through the :class:`~vecenv.workers.Worker` interface, keeps the results of a step that
raised, restarts dead workers within ``max_restarts``, runs partial batches, and offers the engine API that
vecenv's Gymnasium layer and adapters build on. :class:`~vecenv.DummyVecEnv` and :class:`~vecenv.SubprocVecEnv`
only decide where the workers run; every worker steps its envs with the same :class:`~vecenv.env_group.EnvGroup`.
"""

from __future__ import annotations

import contextlib
import enum
import math
import time
import warnings
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from operator import methodcaller
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

from vecenv.base import VecEnv, VecEnvIndices, VecEnvObs, VecEnvStepReturn
from vecenv.errors import AlreadyPendingCallError, ClosedVecEnvError, NoAsyncCallError, WorkerDiedError
from vecenv.protocol import Command
from vecenv.sb3_compat import wrapper_target
from vecenv.spaces import (
    batch_copy,
    batch_slice,
    batch_take,
    check_for_nested_spaces,
    create_batch_buffer,
    fits_action_buffer,
    make_action_writer,
    make_actions_checker,
    num_actions,
    split_actions,
    write_actions,
)
from vecenv.workers import Worker, shutdown_workers

__all__ = [
    "AsyncState",
    "CallRequests",
    "ResetRequests",
    "WorkerVecEnv",
    "call_all",
    "check_env_fns",
    "checked_autoreset_mode",
    "checked_batch_size",
    "gather",
]


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

# the STEP payload when actions travel through shared memory: no pickled actions, every env of the worker
_SHARED_STEP = (None, None)


def _wait_ready(workers: Sequence[Worker], timeout: float | None) -> list[int]:
    """The positions of ``workers`` (each with a request pending) whose reply is ready or that ended, waiting up
    to ``timeout`` seconds for one; empty when the timeout passed. Each transport waits its own way
    (:meth:`Worker.wait_any`); workers of different transports are polled."""
    waits = {type(worker).wait_any for worker in workers}
    wait = waits.pop() if len(waits) == 1 else Worker.wait_any
    return wait(workers, timeout)


def _ready_order(workers: Sequence[Worker]) -> Iterator[int]:
    """The positions ``0..len(workers)-1`` in the order the workers' replies become ready to collect.

    Workers that never block (in-process, or nothing pending) come first, in order; then the others as their
    replies arrive or they end, so a worker that died is seen at once even while another one is still inside a
    long env step. When nothing arrives before the earliest reply deadline (``step_timeout`` /
    ``reset_timeout``), that worker comes next: its ``recv`` enforces the timeout.
    """
    waiting: list[int] = []
    for k, worker in enumerate(workers):
        if worker.pending is None or not worker.blocks:
            yield k
        else:
            waiting.append(k)
    while len(waiting) > 1:
        deadlines = [d for d in (workers[k].reply_deadline for k in waiting) if d is not None]
        timeout = None if not deadlines else max(0.0, min(deadlines) - time.monotonic())
        ready = _wait_ready([workers[k] for k in waiting], timeout)
        if not ready:  # the earliest deadline passed: that worker's recv times out now
            ready = [min(range(len(waiting)), key=lambda p: workers[waiting[p]].reply_deadline or math.inf)]
        chosen = [waiting[p] for p in ready]
        waiting = [k for k in waiting if k not in chosen]
        yield from chosen
    yield from waiting


def call_all(fn: Callable[[Any], Any], items: Sequence[Any], workers: Sequence[Worker]) -> list[Any]:
    """``fn(item)`` for every item, in the order their workers' replies arrive (``workers[k]`` answers
    ``items[k]``), even if some fail (so every worker's reply is drained), then raise the first error; results
    are in the order of ``items``.

    A :class:`~vecenv.errors.WorkerDiedError` propagates at once, without waiting for the other workers (one
    of them may be stuck in a long env step): their replies are collected or discarded by the next request.
    So do KeyboardInterrupt and SystemExit.
    """
    results: list[Any] = [None] * len(items)
    first_error: BaseException | None = None
    for k in _ready_order(workers):
        try:
            results[k] = fn(items[k])
        except WorkerDiedError:
            raise
        except Exception as exc:
            first_error = first_error or exc
    if first_error is not None:
        raise first_error
    return results


def gather(workers: Sequence[Worker]) -> list[Any]:
    """``recv()`` from every worker; if some fail, the others are still drained, then the first error is raised."""
    return call_all(methodcaller("recv"), workers, workers)


def checked_batch_size(value: Any, num_envs: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 1 <= value <= num_envs:
        raise ValueError(f"batch_size must be an integer in 1..{num_envs} (num_envs), got {value!r}")
    return int(value)


def checked_autoreset_mode(value: Any) -> AutoresetMode:
    try:
        return AutoresetMode(value)
    except ValueError:
        raise ValueError(
            f"autoreset_mode must be a gymnasium.vector.AutoresetMode or one of "
            f"{[mode.value for mode in AutoresetMode]}, got {value!r}"
        ) from None


def check_env_fns(env_fns: Sequence[Callable[[], gym.Env]]) -> list[Callable[[], gym.Env]]:
    if isinstance(env_fns, (str, bytes)) or not isinstance(env_fns, Sequence):
        raise TypeError(
            f"env_fns must be a list of callables that each return a gymnasium.Env, got {type(env_fns).__name__}"
        )
    env_fns = list(env_fns)
    if not env_fns:
        raise ValueError("env_fns must contain at least one env factory, got an empty list")
    for i, env_fn in enumerate(env_fns):
        if not callable(env_fn):
            raise TypeError(
                f"env_fns[{i}] must be a callable returning a gymnasium.Env, got {type(env_fn).__name__}: {env_fn!r}. "
                "Pass e.g. `lambda: gymnasium.make('CartPole-v1')`, not the env itself."
            )
    return env_fns


class WorkerVecEnv(VecEnv):
    """A :class:`~vecenv.VecEnv` whose sub-envs live in :class:`~vecenv.workers.Worker` groups.

    Subclasses build the workers; this class does everything else. Observations of worker ``w`` occupy
    rows ``start_w:stop_w`` of the batch buffers.

    :param workers: the workers, in env order; each owns a contiguous block of env indices.
    :param observation_space: the single-env observation space.
    :param action_space: the single-env action space.
    :param buffers: ``(obs_buffer, rewards, dones, terminations, truncations)`` for all envs, or None to
        allocate them (rewards in :attr:`rewards_dtype`).
    :param action_buffer: a batch buffer the workers read actions from (shared memory), or None to send
        each worker its actions with the STEP request.
    """

    #: dtype of the rewards buffer: float32 as SB3 (vecenv.gymnasium's classes use Gymnasium's float64)
    rewards_dtype: Any = np.float32
    #: whether nested Dict / Tuple observation spaces are accepted (SB3 refuses them; vecenv.gymnasium not)
    nested_spaces: bool = False
    #: how envs' ``reset`` is called by :meth:`reset` (and by automatic resets with a pending seed / options):
    #: False (SB3's vector envs) ``env.reset(seed=seed)``, plus ``options=options`` only when options are set;
    #: True (Gymnasium's vector envs: vecenv.gymnasium's classes, :func:`vecenv.adapters.to_gymnasium`)
    #: ``env.reset(seed=seed, options=options)``, both keywords always. Automatic resets with nothing pending
    #: are ``env.reset()`` either way, as in both libraries.
    gymnasium_resets: bool = False

    def __init__(
        self,
        workers: Sequence[Worker],
        observation_space: gym.Space,
        action_space: gym.Space,
        buffers: tuple[Any, np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None,
        action_buffer: Any = None,
    ) -> None:
        self._workers = list(workers)
        self.autoreset_mode: AutoresetMode = getattr(self._workers[0], "autoreset_mode", AutoresetMode.SAME_STEP)
        self._pending_seeds_or_options = False
        #: opt-in restarts of dead / timed-out workers (SubprocVecEnv's max_restarts) and how many happened
        self.max_restarts = 0
        self.restarts = 0
        self._dead: dict[int, BaseException] = {}  # worker -> why it must be restarted at the next step_wait
        # close the workers at garbage collection and at interpreter exit, whatever happens next
        self._finalizer = weakref.finalize(self, shutdown_workers, self._workers)
        self._closed = False
        self._state = AsyncState.IDLE
        self._action_buffer = action_buffer
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
            self._slices: list[tuple[int, int]] = []
            self._owner: list[tuple[int, int]] = []  # env index -> (worker index, local index)
            for w, worker in enumerate(self._workers):
                start, stop = worker.env_indices[0], worker.env_indices[-1] + 1
                self._slices.append((start, stop))
                self._owner.extend((w, j) for j in range(stop - start))
                worker.attach(
                    batch_slice(self._obs_buffer, start, stop),
                    self._rewards[start:stop],
                    self._dones[start:stop],
                    self._terminations[start:stop],
                    self._truncations[start:stop],
                )
            self._last_infos: list[dict[str, Any]] = [{} for _ in range(num_envs)]
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
            # step results received during the current collection, by worker (held if the step fails)
            self._received: dict[int, tuple[list[dict[str, Any]], list[dict[str, Any]]]] = {}
            self._write_action = make_action_writer(action_space)
            self._check_actions = make_actions_checker(action_space)
            self._composite_actions = isinstance(action_space, (gym.spaces.Dict, gym.spaces.Tuple))
            self.actions: Any = None
            super().__init__(num_envs, observation_space, action_space)
        except BaseException:
            self._closed = True
            with contextlib.suppress(Exception):
                self._finalizer()
            raise

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
        if self._closed:
            raise ClosedVecEnvError(f"Cannot call {what}() on a closed {type(self).__name__}; create a new one.")

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

    # --- stepping -----------------------------------------------------------------------------------

    def step_async(self, actions: np.ndarray) -> None:
        """Start stepping every env; env ``i`` receives ``actions[i]``: the caller's row, in the caller's dtype,
        as SB3's and Gymnasium's vector envs deliver it (shared memory carries the batch when it has the action
        space's dtype and shape; any other batch travels pickled).

        After a step that raised, the envs that had finished stepping in it are not stepped: the step started
        here returns their results from then, and their actions are ignored (see docs/reliability.md).

        :param actions: ``(num_envs, *action_shape)`` array, a list with one action per env, or for
            Dict / Tuple action spaces a dict / tuple of batched arrays.
        :raises AlreadyPendingCallError: if a step is already pending.
        :raises ValueError: if ``actions`` does not hold exactly ``num_envs`` actions, has the wrong shape or
            dtype, or (Discrete, MultiDiscrete, MultiBinary) holds values outside the action space; checked
            before anything reaches an env (see :func:`vecenv.spaces.make_actions_checker`).
        """
        self._begin_step(actions)
        buffer = self._action_buffer
        shared = buffer is not None and fits_action_buffer(buffer, actions, self.num_envs)
        if shared:
            write_actions(self.action_space, buffer, actions)
        self._send_steps(actions, shared)
        self.actions = actions
        self._state = AsyncState.WAITING_STEP

    def step_wait(self) -> VecEnvStepReturn:
        """Collect the step started by :meth:`step_async`.

        :return: ``(obs, rewards, dones, infos)``: obs ``(num_envs, *obs_shape)`` in the space's dtype
            (dict / tuple of arrays for Dict / Tuple spaces), rewards float32 ``(num_envs,)``, dones bool
            ``(num_envs,)``, infos a list of ``num_envs`` dicts. Returned arrays are the caller's to keep.
        :raises NoAsyncCallError: if no step is pending.
        :raises Exception: an env's exception (with a note naming the env); the envs that finished stepping
            keep their results for the next step (see :meth:`step_async`).
        """
        self._take_pending_step()
        return self._collect_steps()

    def _begin_step(self, actions: Any) -> None:
        """:meth:`step_async`'s checks, before anything reaches an env: idle, one valid action per env; then the
        replies an interrupted step left unread are collected, and the seeds / options set since the last step
        are handed to the envs."""
        if self._state is not AsyncState.IDLE or self._closed:
            self._check_idle("step_async")
        # (isinstance on Dict / Tuple spaces goes through ABCMeta: decided once, in __init__)
        if (num_actions(self.action_space, actions) if self._composite_actions else len(actions)) != self.num_envs:
            raise ValueError(
                f"actions must hold one action per env: expected {self.num_envs} actions, got "
                f"{num_actions(self.action_space, actions)} (type {type(actions).__name__}"
                f"{', shape ' + str(actions.shape) if isinstance(actions, np.ndarray) else ''})"
            )
        self._check_actions(actions, self.num_envs)
        if self._unsettled:
            self._settle()
        if self._pending_seeds_or_options:
            self._push_pending()

    def _send_steps(self, actions: Any, shared: bool = False) -> None:
        """Send STEP to the workers: every env, except those holding the result of a step that raised (they are
        not stepped; :meth:`_collect_steps` returns what they hold). ``shared``: the actions are in the shared
        action buffer (workers that read it get no actions in the request)."""
        space, slices, workers = self.action_space, self._slices, self._workers
        plan = self._plan_around_held() if self._held else None
        self._plan = plan
        try:
            for w, local_ids in self._full_plan if plan is None else plan:
                worker = workers[w]
                if shared and worker.reads_shared_actions:
                    payload: tuple[Any, Any] = _SHARED_STEP if local_ids is None else (None, local_ids)
                else:
                    start, stop = slices[w]
                    payload = (split_actions(space, actions, start, stop), local_ids)
                try:
                    worker.send(Command.STEP, payload)
                except WorkerDiedError as exc:
                    if not self._may_restart():
                        raise
                    self._dead[w] = exc  # restarted by step_wait
        except BaseException:
            # the workers sent to will step: their results are collected by the next call
            self._unsettled = any(worker.pending is Command.STEP for worker in workers)
            raise

    def _plan_around_held(self) -> list[tuple[int, list[int] | None]]:
        """``(worker, local ids to step, None for all)`` for each worker with an env that holds no result."""
        held = self._held
        plan: list[tuple[int, list[int] | None]] = []
        for w, (start, stop) in enumerate(self._slices):
            local_ids = [j for j in range(stop - start) if start + j not in held]
            if len(local_ids) == stop - start:
                plan.append((w, None))
            elif local_ids:
                plan.append((w, local_ids))
        return plan

    def _collect_steps(self) -> VecEnvStepReturn:
        """The results of the STEPs sent by :meth:`_send_steps`, merged with the results held from a failed step.

        If a worker's step raised (or the wait is interrupted), the results of every env that did step are
        held for the next step (:meth:`_hold_received`, :meth:`_hold_partial`), then the error propagates.
        """
        plan = self._plan
        self._received = {}
        try:
            stepped = self._all_workers if plan is None else [w for w, _ in plan]
            results = call_all(self._recv_step, stepped, [self._workers[w] for w in stepped])
        except BaseException:
            self._hold_received(plan)
            # a worker not waited for yet (KeyboardInterrupt) still steps: collected by the next call
            self._unsettled = any(worker.pending is Command.STEP for worker in self._workers)
            raise
        if plan is not None:  # some envs hold results of a failed step: merge per env
            self._hold_received(plan)
            held = self._held
            return self._step_result([held.pop(i) for i in range(self.num_envs)])
        reset_infos = self.reset_infos
        if len(results) == 1:  # one group: its infos list is fresh, hand it out as is
            infos, reset_infos[:] = results[0]
        else:
            infos = []
            for (part_infos, part_reset_infos), (start, stop) in zip(results, self._slices, strict=True):
                infos += part_infos
                reset_infos[start:stop] = part_reset_infos
        return self._step_result(infos)

    def _take_pending_step(self) -> None:
        """:meth:`step_wait`'s entry: a step must be pending; it is no longer once collection starts.

        :raises NoAsyncCallError: if no step is pending.
        """
        if self._state is not AsyncState.WAITING_STEP or self._closed:
            self._check_open("step_wait")
            raise NoAsyncCallError("step_wait() called without a pending step: call step_async(actions) first.")
        self._state = AsyncState.IDLE

    def _discard_pending_step(self) -> None:
        """``reset()`` with a step (or a started reset / call) pending: collect the workers' replies and drop
        them."""
        self._state = AsyncState.IDLE
        with contextlib.suppress(Exception):
            gather([worker for worker in self._workers if worker.pending is not None])

    def _step_result(self, infos: list[dict[str, Any]]) -> VecEnvStepReturn:
        """``(obs, rewards, dones, infos)`` of the step just collected, as copies the caller may keep."""
        self._last_infos = infos
        obs = self._obs_buffer
        return (
            obs.copy() if type(obs) is np.ndarray else batch_copy(obs),
            self._rewards.copy(),
            self._dones.copy(),
            infos,
        )

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

    # --- results held after a failure -----------------------------------------------------------------
    #
    # A step that raises (an env's exception, an interruption, a dead worker beyond the restart budget) has
    # no return value, yet some envs did step in it: their observations, rewards and flags are in the
    # buffers, and their infos are kept in self._held (env id -> info) until a step returns them. Such an
    # env is not stepped again until then (its action in that step is ignored), so every env reports each
    # of its steps exactly once. A reset of the env drops what it holds.

    def _hold_partial(self, w: int) -> None:
        """Hold what worker ``w``'s failed step completed (the envs that finished before the error)."""
        partial = self._workers[w].take_partial_step()
        if partial is None:
            return
        local_ids, infos, reset_infos = partial
        start, stop = self._slices[w]
        self.reset_infos[start:stop] = reset_infos
        for j, info in zip(local_ids, infos, strict=True):
            self._held[start + j] = info

    def _hold_received(self, plan: list[tuple[int, list[int] | None]] | None) -> None:
        """Hold the step results received from the workers in :attr:`_received` (stepped as ``plan`` says)."""
        ids_of = {} if plan is None else dict(plan)
        for w, (part_infos, part_reset_infos) in self._received.items():
            start, stop = self._slices[w]
            self.reset_infos[start:stop] = part_reset_infos
            local_ids = ids_of.get(w)
            if local_ids is None or len(part_infos) == stop - start:  # every env (a restart reports all)
                local_ids = list(range(stop - start))
            for j, info in zip(local_ids, part_infos, strict=True):
                self._held[start + j] = info
        self._received = {}

    def _settle(self) -> None:
        """Collect the STEP replies an interrupted step left unread; their envs hold those results."""
        plan = self._plan
        self._received = {}
        waiting = [
            w for w, worker in enumerate(self._workers) if worker.pending is Command.STEP and w not in self._in_flight
        ]
        try:
            call_all(self._recv_step, waiting, [self._workers[w] for w in waiting])
        finally:
            self._hold_received(plan)
            self._unsettled = any(
                worker.pending is Command.STEP and w not in self._in_flight for w, worker in enumerate(self._workers)
            )

    def _forget_results(self) -> None:
        """Every env is about to be reset: drop held results (replies still unread are dropped by the reset)."""
        self._held.clear()
        self._unsettled = False
        self._dead.clear()  # a dead worker is found again by the reset, which applies the restart rule
        self._plan = None

    # --- worker restarts (opt-in: max_restarts) ---------------------------------------------------------
    #
    # Every request that reaches a dead worker (or a worker that dies or times out while answering it) goes
    # through one rule: within the budget, the worker is restarted (_restart) and its envs report the cut
    # episode (dones=True, TimeLimit.truncated, vecenv.restarted) at the next step; over it, the error rises.

    def _may_restart(self) -> bool:
        return self.restarts < self.max_restarts

    def _restartable(self, w: int, error: BaseException) -> bool:
        """Whether ``error`` from worker ``w`` means it is gone and the budget allows a restart (an env's own
        TimeoutError from a live worker is the env's error, not a reason to restart)."""
        return isinstance(error, Exception) and not self._workers[w].usable and self._may_restart()

    def _recv_step(self, w: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Worker ``w``'s step result; a dead or timed-out worker is restarted while the budget lasts. The
        result is also kept in :attr:`_received` until the whole step is collected."""
        exc = self._dead.pop(w, None)
        if exc is None:
            try:
                result: tuple[list[dict[str, Any]], list[dict[str, Any]]] = self._workers[w].recv()
            except BaseException as error:
                if not self._restartable(w, error):
                    self._hold_partial(w)
                    raise
                exc = error
            else:
                self._received[w] = result
                return result
        result = self._restart(w, exc)
        self._received[w] = result
        return result

    def _restart(
        self,
        w: int,
        cause: BaseException,
        seeds: Sequence[int | None] | None = None,
        options: Sequence[dict[str, Any] | None] | None = None,
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Restart worker ``w`` after ``cause``, resetting its envs with ``seeds`` / ``options`` (default: those
        still pending for them, which are then used up); its envs report a truncated episode end (see docs).

        :return: ``(infos, reset_infos)`` of the worker's envs; their rows of the buffers are written.
        """
        worker = self._workers[w]
        self.restarts += 1
        warnings.warn(
            f"vecenv: restarting the worker of envs {worker.env_indices} (restart {self.restarts} of "
            f"max_restarts={self.max_restarts}) after: {type(cause).__name__}: {cause}",
            RuntimeWarning,
            stacklevel=3,
        )
        start, stop = self._slices[w]
        if seeds is None and options is None:
            seeds, options = self._take_pending(start, stop)
        reset_infos = worker.restart(seeds, options)
        for env_id in range(start, stop):  # the restart supersedes what its envs held
            self._held.pop(env_id, None)
        self._rewards[start:stop] = 0.0
        self._dones[start:stop] = True
        self._terminations[start:stop] = False
        self._truncations[start:stop] = True
        cause_text = f"{type(cause).__name__}: {cause}"
        infos = [
            {"TimeLimit.truncated": True, "vecenv.restarted": True, "vecenv.restart_cause": cause_text}
            for _ in worker.env_indices
        ]
        return infos, reset_infos

    def _restart_and_hold(
        self,
        w: int,
        cause: BaseException,
        seeds: Sequence[int | None] | None = None,
        options: Sequence[dict[str, Any] | None] | None = None,
    ) -> None:
        """Restart worker ``w`` outside a step: its envs hold the restart report, returned by their next step."""
        infos, reset_infos = self._restart(w, cause, seeds, options)
        start, stop = self._slices[w]
        self.reset_infos[start:stop] = reset_infos
        for j, info in enumerate(infos):
            self._held[start + j] = info

    def _reset_by_restart(self, w: int, cause: BaseException, payload: tuple[Any, Any, list[int] | None, bool]) -> None:
        """A RESET ``payload`` ``(seeds, options, local ids, gymnasium_resets)`` met a dead worker: its restart,
        with those seeds / options, is the reset; envs of the worker outside ``local ids`` report the restart at
        their next step."""
        seeds, options, local_ids, _ = payload
        self._restart_and_hold(w, cause, seeds, options)
        start, stop = self._slices[w]
        for j in range(stop - start) if local_ids is None else local_ids:
            self._held.pop(start + j, None)
            self._rewards[start + j] = 0.0
            self._dones[start + j] = self._terminations[start + j] = self._truncations[start + j] = False

    def _send_to(self, w: int, command: Command, payload: Any) -> None:
        """Send ``command`` to worker ``w``; a dead worker is restarted (budget allowing) and sent it again."""
        while True:
            try:
                self._workers[w].send(command, payload)
                return
            except WorkerDiedError as exc:
                if not self._may_restart():
                    raise
                self._restart_and_hold(w, exc)

    def _recv_from(self, w: int, command: Command, payload: Any) -> Any:
        """Worker ``w``'s reply to ``command``; if it died answering, it is restarted (budget allowing) and asked
        again."""
        while True:
            try:
                return self._workers[w].recv()
            except BaseException as error:
                if not self._restartable(w, error):
                    raise
                self._restart_and_hold(w, error)
                self._send_to(w, command, payload)

    # --- reset, seeds and options ------------------------------------------------------------------------

    def reset(self) -> VecEnvObs:
        """Reset every env (with the seeds / options set by :meth:`seed` / :meth:`set_options`, then forgotten).

        A pending step is collected and discarded first, and so are results held from a step that raised.

        :return: the first observations, ``(num_envs, *obs_shape)`` (dict / tuple of arrays for Dict / Tuple).
        """
        self._check_open("reset")
        if self._state in (AsyncState.WAITING_STEP, AsyncState.WAITING_RESET, AsyncState.WAITING_CALL):
            self._discard_pending_step()
        self._drain_partial()
        self.reset_envs(None)
        return batch_copy(self._obs_buffer)

    # --- the engine API: what vecenv's Gymnasium layer and adapters build on ---------------------------------
    #
    # Resets and calls in two halves (the state machine knows each request in flight), waiting with a
    # timeout, and the seeds / options staged by seed() / set_options() for the envs' next resets.

    def reset_envs(self, env_ids: Sequence[int] | None) -> None:
        """Reset the envs ``env_ids`` (all if None) with the staged seeds / options, which are then forgotten.

        :raises AlreadyPendingCallError: if a step, a partial batch, a reset or a call is in flight.
        """
        self.finish_reset(self.start_reset(env_ids))

    def prepare_reset(self, env_ids: Sequence[int] | None) -> None:
        """Before resetting ``env_ids`` (all if None): what those envs hold is dropped; the others keep theirs."""
        if env_ids is None:
            self._forget_results()
            return
        if self._unsettled:
            self._settle()
        for env_id in env_ids:
            self._held.pop(env_id, None)

    def start_reset(self, env_ids: Sequence[int] | None) -> ResetRequests:
        """First half of :meth:`reset_envs`: send the RESET requests with the staged seeds / options, which are then
        forgotten (a dead worker is restarted, budget allowing, which resets its envs with the same ones). The
        vector env then waits for :meth:`finish_reset`.

        :return: the requests ``(worker, local ids or None, payload)`` to pass to :meth:`finish_reset`.
        :raises AlreadyPendingCallError: if a step, a partial batch, a reset or a call is in flight.
        """
        self._check_idle("reset")
        self._check_seeds_and_options()
        self.prepare_reset(env_ids)
        workers, slices = self._workers, self._slices
        requests: list[tuple[int, list[int] | None]]
        if env_ids is None:
            requests = [(w, None) for w in range(len(workers))]
        else:
            by_worker: dict[int, list[int]] = {}
            for env_id in env_ids:
                w, local = self._owner[env_id]
                by_worker.setdefault(w, []).append(local)
            requests = list(by_worker.items())
        sent: list[tuple[int, list[int] | None, Any]] = []
        try:
            for w, local_ids in requests:
                start, stop = slices[w]
                payload = (self._seeds[start:stop], self._options[start:stop], local_ids, self.gymnasium_resets)
                try:
                    workers[w].send(Command.RESET, payload)
                except WorkerDiedError as exc:
                    if not self._may_restart():
                        raise
                    self._reset_by_restart(w, exc, payload)
                    continue
                sent.append((w, local_ids, payload))
        finally:
            self.clear_staged()
        if sent:  # a request that failed to go out leaves the vector env idle (its siblings' replies are dropped)
            self._state = AsyncState.WAITING_RESET
        return sent

    def finish_reset(self, requests: ResetRequests) -> None:
        """Second half of :meth:`reset_envs`: wait for the replies and store the reset infos (a worker that died
        resetting is restarted, budget allowing, with the same seeds / options). The vector env is idle again,
        whether this returns or raises.
        """
        if self._state is AsyncState.WAITING_RESET:
            self._state = AsyncState.IDLE
        reset_infos = self.reset_infos

        def collect(request: tuple[int, list[int] | None, Any]) -> None:
            w, _, payload = request
            try:
                part_reset_infos = self._workers[w].recv()
            except BaseException as error:
                if not self._restartable(w, error):
                    raise
                self._reset_by_restart(w, error, payload)
                return
            start, stop = self._slices[w]
            reset_infos[start:stop] = part_reset_infos

        call_all(collect, requests, [self._workers[w] for w, _, _ in requests])

    def _has_pending(self) -> bool:
        return any(seed is not None for seed in self._seeds) or any(self._options)

    def _take_pending(self, start: int, stop: int) -> tuple[list[int | None], list[dict[str, Any]]]:
        """The seeds / options pending for envs ``start..stop-1``, which are no longer pending here."""
        seeds, options = self._seeds[start:stop], self._options[start:stop]
        # new lists: seed() returned the old one to its caller
        self._seeds = [*self._seeds[:start], *([None] * (stop - start)), *self._seeds[stop:]]
        self._options = [*self._options[:start], *({} for _ in range(stop - start)), *self._options[stop:]]
        self._pending_seeds_or_options = self._has_pending()
        return seeds, options

    def _push_pending(self, targets: Iterable[int] | None = None) -> None:
        """Hand the seeds / options set by :meth:`seed` / :meth:`set_options` to the envs' next resets, so an
        autoreset honours them too (each is used once by whichever reset comes first).

        :param targets: the workers to hand them to (all if None; each must be idle); the others' stay here
            until a request goes to them. A dead worker is restarted (budget allowing) with them.
        """
        self._check_seeds_and_options()
        workers, slices = self._workers, self._slices
        sent = []
        for w in range(len(workers)) if targets is None else targets:
            start, stop = slices[w]
            seeds, options = self._seeds[start:stop], self._options[start:stop]
            if all(seed is None for seed in seeds) and not any(options):
                continue
            try:
                workers[w].send(Command.SET_PENDING, (seeds, options))
            except WorkerDiedError as exc:
                if not self._may_restart():
                    raise
                self._restart_and_hold(w, exc)  # whose reset takes these seeds / options
                continue
            sent.append(w)

        def collect(w: int) -> None:
            try:
                workers[w].recv()
            except BaseException as error:
                if not self._restartable(w, error):
                    raise
                self._restart_and_hold(w, error)
                return
            self._take_pending(*slices[w])

        call_all(collect, sent, [workers[w] for w in sent])

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
        self._pending_seeds_or_options = True
        return seeds

    def set_options(self, options: list[dict] | dict | None = None) -> None:
        """Set the ``options`` of each env's NEXT reset (caller's or autoreset; see :meth:`seed`)."""
        super().set_options(options)
        self._pending_seeds_or_options = True

    @property
    def staged_seeds(self) -> list[int | None]:
        """The seeds :meth:`seed` set that no env has received yet, one per env (None: none for that env)."""
        return list(self._seeds) if self._pending_seeds_or_options else [None] * self.num_envs

    @property
    def staged_options(self) -> list[dict[str, Any]]:
        """The options :meth:`set_options` set that no env has received yet, one dict per env (empty: none)."""
        if not self._pending_seeds_or_options:
            return [{} for _ in range(self.num_envs)]
        return [dict(o) for o in self._options]

    def clear_staged(self) -> None:
        """Forget the seeds / options staged by :meth:`seed` / :meth:`set_options`."""
        self._reset_seeds()
        self._reset_options()
        self._pending_seeds_or_options = False

    def push_staged(self) -> None:
        """Hand the staged seeds / options to the envs now, for their next reset, whichever comes first (the
        caller's or an automatic one); nothing to do when none are staged."""
        if self._pending_seeds_or_options:
            self._push_pending()

    def current_obs(self) -> VecEnvObs:
        """A copy of the observations the envs returned last, ``(num_envs, *obs_shape)``."""
        return batch_copy(self._obs_buffer)

    # --- partial batches (EnvPool's send / recv contract) --------------------------------------------

    @property
    def batch_size(self) -> int:
        """Minimum number of envs :meth:`recv` returns (EnvPool's ``batch_size``); ``1..num_envs``."""
        return self._batch_size

    @batch_size.setter
    def batch_size(self, value: int) -> None:
        self._batch_size = checked_batch_size(value, self.num_envs)

    def async_reset(self) -> None:
        """Start resetting every env; collect first observations with :meth:`recv` (EnvPool's ``async_reset``).

        Seeds and options set by :meth:`seed` / :meth:`set_options` are used, then forgotten.

        :raises AlreadyPendingCallError: if a full-batch step is pending.
        """
        self._check_open("async_reset")
        if self._state is AsyncState.WAITING_STEP:
            raise AlreadyPendingCallError("Cannot call async_reset() while a step is pending: call step_wait() first.")
        self._drain_partial()
        self._check_seeds_and_options()
        self._forget_results()
        try:
            for w, (worker, (start, stop)) in enumerate(zip(self._workers, self._slices, strict=True)):
                payload = (self._seeds[start:stop], self._options[start:stop], None, self.gymnasium_resets)
                try:
                    worker.send(Command.RESET, payload)
                except WorkerDiedError as exc:
                    if not self._may_restart():
                        raise
                    self._reset_by_restart(w, exc, payload)
                    self._ready.update((i, self.reset_infos[i]) for i in range(start, stop))
                    continue
                self._in_flight[w] = (Command.RESET, list(range(start, stop)), payload)
        finally:
            self._state = AsyncState.PARTIAL if self._in_flight or self._ready else AsyncState.IDLE
            self.clear_staged()

    def send(self, actions: Any, env_ids: VecEnvIndices) -> None:
        """Start stepping only the envs ``env_ids``; env ``env_ids[k]`` receives ``actions[k]`` (EnvPool's ``send``).

        A worker process steps its envs as one group, so while any env of a worker is in flight the
        other envs of that worker cannot be sent; :meth:`recv` always returns whole groups. An env that holds
        the result of a step that raised is not stepped: :meth:`recv` returns that result (its action here
        is ignored). A refused call (the errors below) changes nothing.

        :param actions: one action per id in ``env_ids`` (same layouts as :meth:`step_async`).
        :param env_ids: the env indices to step (each must be idle: its last result received).
        :raises AlreadyPendingCallError: if an env is still in flight, its worker is busy, or its last
            result has not been returned by :meth:`recv` yet.
        :raises ValueError: on duplicate ids or a number of actions that differs from the number of ids.
        """
        self._check_open("send")
        if self._state is AsyncState.WAITING_STEP:
            raise AlreadyPendingCallError("Cannot call send() while a step is pending: call step_wait() first.")
        ids = self._normalize_indices(env_ids)
        if len(set(ids)) != len(ids):
            raise ValueError(f"env_ids must not repeat an env, got {ids}")
        space = self.action_space
        if num_actions(space, actions) != len(ids):
            raise ValueError(
                f"send() needs one action per env id: {len(ids)} env ids, {num_actions(space, actions)} actions"
            )
        self._check_actions(actions, len(ids))
        by_worker: dict[int, list[tuple[int, int]]] = {}
        for position, env_id in enumerate(ids):
            if env_id in self._ready:
                raise AlreadyPendingCallError(f"env {env_id} has a result that recv() has not returned yet")
            w, local = self._owner[env_id]
            by_worker.setdefault(w, []).append((position, local))
        busy = [env_id for w in by_worker if w in self._in_flight for env_id in self._workers[w].env_indices]
        if busy:
            raise AlreadyPendingCallError(
                f"the workers running envs {busy} are still stepping envs sent earlier: recv() them before sending"
            )
        per_env = split_actions(space, actions, 0, len(ids))
        buffer = self._action_buffer
        shared = buffer is not None and fits_action_buffer(buffer, actions, len(ids))
        # place every action first (a bad one raises before anything is sent), then send
        requests: list[tuple[int, Any, list[int]]] = []
        for w, items in by_worker.items():
            start = self._slices[w][0]
            locals_ = [local for _, local in items]
            group_actions: list[Any] | None = None
            if shared and self._workers[w].reads_shared_actions:
                for position, local in items:
                    try:
                        self._write_action(self._action_buffer, start + local, per_env[position])
                    except (ValueError, TypeError, KeyError, IndexError) as exc:
                        raise ValueError(f"action {position} (env {ids[position]}): {exc}") from None
            else:
                group_actions = [None] * len(self._workers[w].env_indices)
                for position, local in items:
                    group_actions[local] = per_env[position]
            requests.append((w, group_actions, locals_))
        # nothing is refused from here on
        if self._unsettled:
            self._settle()
        if self._pending_seeds_or_options:
            self._push_pending(list(by_worker))
        held, ready = self._held, self._ready
        for w, group_actions, locals_ in requests:
            start = self._slices[w][0]
            for local in locals_:  # results held from a step that raised are returned instead of stepping
                if start + local in held:
                    ready[start + local] = held.pop(start + local)
            to_step = [local for local in locals_ if start + local not in ready]
            if not to_step:
                continue
            try:
                self._workers[w].send(Command.STEP, (group_actions, to_step))
            except WorkerDiedError as exc:
                if not self._may_restart():
                    raise
                self._restart_and_hold(w, exc)
                for local in to_step:
                    ready[start + local] = held.pop(start + local)
                continue
            self._in_flight[w] = (Command.STEP, [start + local for local in to_step], None)
        if self._in_flight or ready:
            self._state = AsyncState.PARTIAL

    def recv(self) -> tuple[VecEnvObs, np.ndarray, np.ndarray, list[dict[str, Any]], np.ndarray]:
        """Wait until at least :attr:`batch_size` envs have results (or all envs in flight), return them.

        If a worker's step raises, its error propagates and the envs that did step in it are returned by the
        next call; a worker that died is restarted if ``max_restarts`` allows (its envs report the restart).

        :return: ``(obs, rewards, dones, infos, env_ids)`` for the finished envs in increasing ``env_ids``
            order: obs ``(len(env_ids), *obs_shape)``, float32 rewards and bool dones ``(len(env_ids),)``,
            one info dict per env (the reset info for envs coming back from :meth:`async_reset`, whose
            rewards are 0 and dones False), ``env_ids`` an int64 array. Same autoreset rules as :meth:`step`.
        :raises NoAsyncCallError: if nothing was sent.
        """
        self._check_open("recv")
        if self._state is not AsyncState.PARTIAL:
            raise NoAsyncCallError("recv() called with nothing in flight: call async_reset() or send() first.")
        in_flight = sum(len(ids) for _, ids, _ in self._in_flight.values())
        ready, held = self._ready, self._held
        target = min(self.batch_size, len(ready) + in_flight)
        while len(ready) < target:
            w = self._wait_any()
            command, ids, payload = self._in_flight.pop(w)
            worker = self._workers[w]
            start, stop = self._slices[w]
            try:
                result = worker.recv()
            except BaseException as error:
                if self._restartable(w, error):
                    if command is Command.RESET:
                        self._reset_by_restart(w, error, payload)
                        ready.update((i, self.reset_infos[i]) for i in ids)
                    else:
                        self._restart_and_hold(w, error)
                        ready.update((i, held.pop(i)) for i in ids)
                    continue
                self._hold_partial(w)
                ready.update((i, held.pop(i)) for i in ids if i in held)
                if worker.pending is not None:  # interrupted before its reply arrived: still in flight
                    self._in_flight[w] = (command, ids, payload)
                if not self._in_flight and not ready:
                    self._state = AsyncState.IDLE
                raise
            if command is Command.RESET:
                self.reset_infos[start:stop] = result
                self._rewards[start:stop] = 0.0
                self._dones[start:stop] = False
                ready.update(zip(ids, result, strict=True))
            else:
                infos, reset_infos = result
                self.reset_infos[start:stop] = reset_infos
                ready.update(zip(ids, infos, strict=True))
        env_ids = sorted(ready)
        infos = [ready.pop(env_id) for env_id in env_ids]
        if not self._in_flight and not ready:
            self._state = AsyncState.IDLE
        index = np.asarray(env_ids, dtype=np.int64)
        return batch_take(self._obs_buffer, index), self._rewards[index], self._dones[index], infos, index

    def wait_until_ready(self, timeout: float | None) -> bool:
        """Wait up to ``timeout`` seconds (None: forever) until every worker has its reply ready (or died).

        Nothing is consumed: the replies are collected afterwards as usual. In-process workers are always
        ready (they run the request when it is collected).

        :return: whether everything was ready in time.
        """
        waiting = [w for w, worker in enumerate(self._workers) if worker.pending is not None and worker.blocks]
        deadline = None if timeout is None else time.monotonic() + timeout
        while waiting:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready = _wait_ready([self._workers[w] for w in waiting], remaining)
            if not ready:
                return False
            if any(self._workers[waiting[p]].has_ended() for p in ready):
                return True  # a worker died: collecting raises at once, whatever the others do
            waiting = [w for p, w in enumerate(waiting) if p not in ready]
        return True

    def _wait_any(self) -> int:
        """Index of a worker in flight whose reply is ready (or that died)."""
        in_flight = list(self._in_flight)
        for w in in_flight:
            if not self._workers[w].blocks:  # in-process: executes when asked
                return w
        return in_flight[_wait_ready([self._workers[w] for w in in_flight], None)[0]]

    def _drain_partial(self) -> None:
        """Collect and drop every partial result in flight (used by reset)."""
        for w in list(self._in_flight):
            del self._in_flight[w]
            with contextlib.suppress(Exception):
                self._workers[w].recv()
        self._ready.clear()
        if self._state is AsyncState.PARTIAL:
            self._state = AsyncState.IDLE

    def _check_seeds_and_options(self) -> None:
        if len(self._seeds) != self.num_envs or len(self._options) != self.num_envs:
            raise ValueError(
                f"seed() / set_options() must give one entry per env: expected {self.num_envs}, got "
                f"{len(self._seeds)} seeds and {len(self._options)} options"
            )

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
        try:
            self._finalizer()
        finally:
            # drop the batch buffers: for worker processes they map shared memory, released with them
            self._obs_buffer = None
            self._action_buffer = None
            self._rewards = self._dones = self._terminations = self._truncations = np.zeros((0,))

    # --- calls on sub-envs --------------------------------------------------------------------------

    def _call(self, command: Command, indices: VecEnvIndices, *args: Any) -> list[Any]:
        """Run ``command`` with payload ``(*args, local_indices)`` on the workers owning ``indices``."""
        return self.finish_call(self.start_call(command, indices, *args))

    def start_call(self, command: Command, indices: VecEnvIndices, *args: Any) -> CallRequests:
        """First half of a call on sub-envs (``get_attr``, ``env_method``, ...): send ``command`` with payload
        ``(*args, local_indices)`` to the workers owning ``indices`` (a dead worker goes through the restart
        rule). The vector env then waits for :meth:`finish_call`.

        :return: what :meth:`finish_call` needs.
        :raises AlreadyPendingCallError: if a step, a partial batch, a reset or a call is in flight.
        """
        self._check_idle(command.label)
        if self._unsettled:
            self._settle()
        targets = self._normalize_indices(indices)
        by_worker: dict[int, list[tuple[int, int]]] = {}
        for position, env_index in enumerate(targets):
            w, local = self._owner[env_index]
            by_worker.setdefault(w, []).append((position, local))
        requests = [(w, (*args, [local for _, local in items]), items) for w, items in by_worker.items()]
        for w, payload, _ in requests:
            self._send_to(w, command, payload)
        self._state = AsyncState.WAITING_CALL
        return command, len(targets), requests

    def finish_call(self, call: CallRequests) -> list[Any]:
        """Second half of a call: collect every reply (a worker that died answering is restarted, budget allowing,
        and asked again), then raise the first error if any. The vector env is idle again either way.

        :return: one value per addressed env, in the order of the indices given to :meth:`start_call`.
        """
        if self._state is AsyncState.WAITING_CALL:
            self._state = AsyncState.IDLE
        command, n, requests = call
        results: list[Any] = [None] * n

        def collect(request: tuple[int, Any, list[tuple[int, int]]]) -> None:
            w, payload, items = request
            values = self._recv_from(w, command, payload)
            if values is not None:
                for (position, _), value in zip(items, values, strict=True):
                    results[position] = value

        call_all(collect, requests, [self._workers[w] for w, _, _ in requests])
        return results

    def _normalize_indices(self, indices: VecEnvIndices) -> list[int]:
        n = self.num_envs
        normalized = []
        for index in self._get_indices(indices):
            if not isinstance(index, (int, np.integer)) or isinstance(index, bool):
                raise TypeError(f"indices must be None, an int or an iterable of ints, got element {index!r}")
            if not -n <= index < n:
                raise IndexError(f"env index {index} is out of range for a vector env with num_envs={n}")
            normalized.append(int(index) % n)
        return normalized

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        """See :meth:`VecEnv.get_attr`; looked up with ``env.get_wrapper_attr`` (through gymnasium wrappers)."""
        return self._call(Command.GET_ATTR, indices, attr_name)

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        """See :meth:`VecEnv.set_attr`; set with ``setattr`` on the outermost gymnasium wrapper (as SB3)."""
        self._call(Command.SET_ATTR, indices, attr_name, value)

    def has_attr(self, attr_name: str) -> bool:
        """See :meth:`VecEnv.has_attr` (one round trip; never raises :class:`AttributeError`)."""
        return all(self._call(Command.HAS_ATTR, None, attr_name))

    def env_method(
        self, method_name: str, *method_args: Any, indices: VecEnvIndices = None, **method_kwargs: Any
    ) -> list[Any]:
        """See :meth:`VecEnv.env_method`."""
        return self._call(Command.ENV_METHOD, indices, method_name, method_args, method_kwargs)

    def env_is_wrapped(self, wrapper_class: type[gym.Wrapper], indices: VecEnvIndices = None) -> list[bool]:
        """See :meth:`VecEnv.env_is_wrapped` (SB3's ``Monitor`` and vecenv's stand for each other)."""
        # the workers get class names for the wrappers vecenv replaces: they need not import SB3 to answer
        return self._call(Command.IS_WRAPPED, indices, wrapper_target(wrapper_class))

    def get_images(self) -> Sequence[np.ndarray | None]:
        """One ``(H, W, 3)`` uint8 frame per env.

        Warns and returns ``[None] * num_envs`` unless ``render_mode`` is ``rgb_array`` (as SB3).
        """
        if self.render_mode != "rgb_array":
            warnings.warn(
                f"The render mode is {self.render_mode}, but this method assumes it is `rgb_array` to obtain images.",
                stacklevel=2,
            )
            return [None for _ in range(self.num_envs)]
        return self._call(Command.RENDER, None)
