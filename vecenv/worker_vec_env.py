"""One vector-env implementation over pluggable workers: :class:`WorkerVecEnv`.

It holds the batch buffers, the async state and the index bookkeeping (global env index -> worker, local
index), steps and resets through the :class:`~vecenv.workers.Worker` interface, keeps the results of a step that
raised, restarts dead workers within ``max_restarts``, runs partial batches, and offers the engine API that
vecenv's Gymnasium layer and adapters build on. :class:`~vecenv.DummyVecEnv` and :class:`~vecenv.SubprocVecEnv`
only decide where the workers run; every worker steps its envs with the same :class:`~vecenv.env_group.EnvGroup`.
The class is assembled from the layers in :mod:`vecenv.engine`; this module adds full-batch steps and resets.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from vecenv.actions import fits_action_buffer, num_actions, split_actions, write_actions
from vecenv.base import VecEnvObs, VecEnvStepReturn
from vecenv.engine.calls import SubEnvCalls
from vecenv.engine.checks import check_env_fns, checked_autoreset_mode, checked_batch_size
from vecenv.engine.core import AsyncState, CallRequests, ResetRequests
from vecenv.engine.partial_batches import PartialBatches
from vecenv.engine.replies import call_all, gather
from vecenv.errors import ActionsWithoutEnvAxisError, ClosedVecEnvError, NoAsyncCallError, WorkerDiedError
from vecenv.interrupts import GUARD, guarded
from vecenv.protocol import Command

#: what ``step`` / ``step_async`` accept: an array ``(num_envs, *action_shape)``, a list with one action per env, or
#: for Dict / Tuple action spaces a dict / tuple of such batches
BatchActions = np.ndarray | Sequence[Any] | dict[str, Any]

__all__ = [
    "AsyncState",
    "BatchActions",
    "CallRequests",
    "ResetRequests",
    "WorkerVecEnv",
    "call_all",
    "check_env_fns",
    "checked_autoreset_mode",
    "checked_batch_size",
    "gather",
]

# the STEP payload when actions travel through shared memory: no pickled actions, every env of the worker
_SHARED_STEP = (None, None)


class WorkerVecEnv(PartialBatches, SubEnvCalls):
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

    # --- stepping -----------------------------------------------------------------------------------

    def step_async(self, actions: BatchActions) -> None:
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
            before anything reaches an env (see :func:`vecenv.actions.make_actions_checker`).
        """
        counted = GUARD.enter()
        try:
            self._step_async(actions)
        finally:
            GUARD.leave(counted, raise_at_end=False)

    def step_wait(self) -> VecEnvStepReturn:
        """Collect the step started by :meth:`step_async`.

        :return: ``(obs, rewards, dones, infos)``: obs ``(num_envs, *obs_shape)`` in the space's dtype
            (dict / tuple of arrays for Dict / Tuple spaces), rewards ``(num_envs,)`` in ``rewards_dtype``
            (float32 by default), dones bool ``(num_envs,)``, infos a list of ``num_envs`` dicts. Returned arrays
            are the caller's to keep.
        :raises NoAsyncCallError: if no step is pending.
        :raises Exception: an env's exception (with a note naming the env); the envs that finished stepping
            keep their results for the next step (see :meth:`step_async`).
        """
        counted = GUARD.enter()
        try:
            return self._step_wait(counted)
        except Exception as exc:
            self._raise_if_closed_meanwhile(exc)
            raise
        finally:
            GUARD.leave(counted, raise_at_end=False)

    def _raise_if_closed_meanwhile(self, exc: Exception) -> None:
        """A call failed: if another thread closed the vector env while it ran (its workers' pipes closed under
        it), say so instead of the failure that caused.

        :raises ClosedVecEnvError: from ``exc``, if the vector env is closed.
        """
        if self._closed and not isinstance(exc, ClosedVecEnvError):
            raise ClosedVecEnvError(
                "the vector env was closed (by another thread) while this call waited for its envs"
            ) from exc

    def step(self, actions: BatchActions) -> VecEnvStepReturn:
        """Step every env: :meth:`step_async` then :meth:`step_wait` (as one call: a Ctrl-C never lands between
        them, see :mod:`vecenv.interrupts`).

        :param actions: as :meth:`step_async`.
        :return: as :meth:`step_wait`.
        """
        halves = type(self)
        own = self.__dict__
        if (
            halves.step_async is _STEP_ASYNC
            and halves.step_wait is _STEP_WAIT
            and "step_async" not in own
            and "step_wait" not in own
        ):
            counted = GUARD.enter()
            try:
                self._step_async(actions)
                return self._step_wait(counted)
            except Exception as exc:
                self._raise_if_closed_meanwhile(exc)
                raise
            finally:
                GUARD.leave(counted, raise_at_end=False)
        # a subclass's, a mixin's or a patched step_async / step_wait: stepped through them, as SB3's VecEnv.step
        return super().step(actions)  # type: ignore[arg-type]

    def _step_async(self, actions: Any) -> None:
        """:meth:`step_async` inside its section."""
        clock = self._clock
        started = clock.enter()
        try:
            self._begin_step(actions)
            buffer = self._action_buffer
            shared = buffer is not None and fits_action_buffer(buffer, actions, self.num_envs)
            if shared:
                write_actions(self.action_space, buffer, actions)
            self._send_steps(actions, shared)
            self.actions = actions
            self._state = AsyncState.WAITING_STEP
        finally:
            clock.send += clock.leave(started)

    def _step_wait(self, counted: bool) -> VecEnvStepReturn:
        """:meth:`step_wait` inside its section (``counted``: see :meth:`vecenv.interrupts.InterruptGuard.enter`)."""
        clock = self._clock
        started, waited = clock.enter(), clock.wait
        try:
            self._start_collecting_step()
            result = self._collect_steps()
            if counted and GUARD.deferred is not None:
                self._hold_step_result(result)
        finally:
            clock.collect += clock.leave(started) - (clock.wait - waited)
            if clock.between is not None:
                clock.between.left()
        clock.steps += 1
        return result

    def _begin_step(self, actions: Any) -> None:
        """:meth:`step_async`'s checks, before anything reaches an env: idle, one valid action per env; then the
        replies an interrupted step left unread are collected, and the seeds / options set since the last step
        are handed to the envs."""
        if self._state is not AsyncState.IDLE or self._closed:
            self._check_idle("step_async")
        # (isinstance on Dict / Tuple spaces goes through ABCMeta: decided once, in __init__)
        try:
            count = num_actions(self.action_space, actions) if self._composite_actions else len(actions)
        except TypeError:  # no env axis: a scalar, a 0-d array, a dict of scalars
            raise ActionsWithoutEnvAxisError.for_batch(self.action_space, actions, self.num_envs) from None
        if count != self.num_envs:
            raise ValueError(
                f"actions must hold one action per env: expected {self.num_envs} actions, got "
                f"{num_actions(self.action_space, actions)} (type {type(actions).__name__}"
                f"{', shape ' + str(actions.shape) if isinstance(actions, np.ndarray) else ''})"
            )
        self._check_actions(actions, self.num_envs)
        if self._unsettled:
            self._settle()
        if self._seeds_or_options_staged:
            self._push_staged_to()

    def _send_steps(self, actions: Any, shared: bool = False) -> None:
        """Send STEP to the workers: every env, except those holding the result of a step that raised (they are
        not stepped; :meth:`_collect_steps` returns what they hold). ``shared``: the actions are in the shared
        action buffer (workers that read it get no actions in the request)."""
        space, slices, workers = self.action_space, self._env_ranges, self._workers
        plan = self._plan_around_held() if self._held else None
        self._plan = plan
        self._prepare_obs_write(keep_rows=plan is not None)  # (envs that hold results keep their rows)
        try:
            if plan is not None:
                requests = plan
            elif shared and self._common_step is not None:
                # the common step's requests in one loop; the workers it did not serve go one by one below
                requests = self._full_plan[self._common_step.send() :]
            else:
                requests = self._full_plan
            for w, local_ids in requests:
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
            if plan is None and self._common_step is not None:
                # while the workers step: free the infos of two steps ago (when the caller dropped them too),
                # then build this step's default infos, so that neither waits for the last reply
                self._retired_infos = None
                self._common_step.prepare_infos()
        except BaseException:
            # the workers sent to will step: their results are collected by the next call; a dead worker is found
            # again by the next request that needs it
            self._unsettled = any(worker.pending is Command.STEP for worker in workers)
            self._dead.clear()
            raise

    def _plan_around_held(self) -> list[tuple[int, list[int] | None]]:
        """``(worker, local ids to step, None for all)`` for each worker with an env that holds no result."""
        held = self._held
        plan: list[tuple[int, list[int] | None]] = []
        for w, (start, stop) in enumerate(self._env_ranges):
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
        infos: list[Any] | None = None  # the step's infos, when the common step's loop placed them as they came
        try:
            stepped = self._all_workers if plan is None else [w for w, _ in plan]
            collector = self._common_step if plan is None and not self._dead else None
            if collector is None:
                results = call_all(self._recv_step, stepped, [self._workers[w] for w in stepped], self._clock)
            else:
                received = self._received
                infos = [None] * self.num_envs
                if not collector.collect(received, self._clock, infos, self.reset_infos):
                    infos = None  # the others through the general path
                    left = [w for w in stepped if w not in received]
                    call_all(self._recv_step, left, [self._workers[w] for w in left], self._clock)
                    results = [received[w] for w in stepped]
        except BaseException:
            self._hold_received(plan)
            # a worker not waited for yet (KeyboardInterrupt) still steps: collected by the next call; a dead worker
            # not restarted (over the budget) is found again by the next request that needs it
            self._unsettled = any(worker.pending is Command.STEP for worker in self._workers)
            self._dead.clear()
            raise
        if plan is not None:  # some envs hold results of a failed step: merge per env
            self._hold_received(plan)
            held = self._held
            return self._step_result([held.pop(i) for i in range(self.num_envs)])
        if infos is not None:
            # the previous step's infos are freed once the next requests are out (see _send_steps), not here
            self._retired_infos = self._last_infos
            return self._step_result(infos)
        reset_infos = self.reset_infos
        if len(results) == 1:  # one group: its infos list is fresh, hand it out as is
            infos, reset_infos[:] = results[0]
        else:
            infos = []
            for (part_infos, part_reset_infos), (start, stop) in zip(results, self._env_ranges, strict=True):
                infos += part_infos
                reset_infos[start:stop] = part_reset_infos
        return self._step_result(infos)

    def _start_collecting_step(self) -> None:
        """:meth:`step_wait`'s entry: a step must be pending; it is no longer once collection starts.

        :raises NoAsyncCallError: if no step is pending.
        """
        if self._state is not AsyncState.WAITING_STEP or self._closed:
            self._check_open("step_wait")
            raise NoAsyncCallError("step_wait() called without a pending step: call step_async(actions) first.")
        self._state = AsyncState.IDLE

    def _discard_requests_in_flight(self) -> None:
        """``reset()`` with a step (or a started reset / call) pending: collect the workers' replies and drop
        them."""
        self._state = AsyncState.IDLE
        with contextlib.suppress(Exception):
            gather([worker for worker in self._workers if worker.pending is not None])

    # --- resets ----------------------------------------------------------------------------------------

    @guarded()
    def reset(self) -> VecEnvObs:
        """Reset every env (with the seeds / options set by :meth:`seed` / :meth:`set_options`, then forgotten).

        A pending step is collected and discarded first, and so are results held from a step that raised.

        :return: the first observations, ``(num_envs, *obs_shape)`` (dict / tuple of arrays for Dict / Tuple).
        """
        self._check_open("reset")
        if self._state in (AsyncState.WAITING_STEP, AsyncState.WAITING_RESET, AsyncState.WAITING_CALL):
            self._discard_requests_in_flight()
        self._drain_partial()
        self.reset_envs(None)
        return self._hand_out_obs()

    # --- the engine API: what vecenv's Gymnasium layer and adapters build on ---------------------------------
    #
    # Resets and calls in two halves (the state machine knows each request in flight), waiting with a
    # timeout, and the seeds / options staged by seed() / set_options() for the envs' next resets.

    @guarded()
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

    @guarded(raise_at_end=False)
    def start_reset(self, env_ids: Sequence[int] | None) -> ResetRequests:
        """First half of :meth:`reset_envs`: send the RESET requests with the staged seeds / options, which are then
        forgotten (a dead worker is restarted, budget allowing, which resets its envs with the same ones). The
        vector env then waits for :meth:`finish_reset`.

        :return: the requests ``(worker, local ids or None, payload)`` to pass to :meth:`finish_reset`.
        :raises AlreadyPendingCallError: if a step, a partial batch, a reset or a call is in flight.
        """
        with self._clock.timing("reset"):
            self._check_idle("reset")
            self._check_seeds_and_options()
            self._push_replacements()
            self.prepare_reset(env_ids)
            self._prepare_obs_write(keep_rows=env_ids is not None)
            workers, slices = self._workers, self._env_ranges
            requests: list[tuple[int, list[int] | None]]
            if env_ids is None:
                requests = [(w, None) for w in range(len(workers))]
            else:
                by_worker: dict[int, list[int]] = {}
                for env_id in env_ids:
                    w, local = self._env_location[env_id]
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

    @guarded()
    def finish_reset(self, requests: ResetRequests) -> None:
        """Second half of :meth:`reset_envs`: wait for the replies and store the reset infos (a worker that died
        resetting is restarted, budget allowing, with the same seeds / options). The vector env is idle again,
        whether this returns or raises.
        """
        with self._clock.timing("reset"):
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
                start, stop = self._env_ranges[w]
                reset_infos[start:stop] = part_reset_infos

            call_all(collect, requests, [self._workers[w] for w, _, _ in requests])


#: the step halves :meth:`WorkerVecEnv.step` runs as one section (not a subclass's, a mixin's or a patched pair)
_STEP_ASYNC = WorkerVecEnv.step_async
_STEP_WAIT = WorkerVecEnv.step_wait
