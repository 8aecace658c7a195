"""Partial batches, EnvPool's contract: :meth:`~PartialBatches.send` steps some envs, :meth:`~PartialBatches.recv`
returns at least ``batch_size`` finished ones, :meth:`~PartialBatches.async_reset` starts resetting all."""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np

from vecenv.actions import fits_action_buffer, num_actions, split_actions
from vecenv.base import VecEnvIndices, VecEnvObs
from vecenv.engine.checks import checked_batch_size
from vecenv.engine.core import AsyncState
from vecenv.engine.recovery import Recovery
from vecenv.engine.replies import next_ready
from vecenv.errors import AlreadyPendingCallError, NoAsyncCallError, WorkerDiedError
from vecenv.interrupts import guarded
from vecenv.protocol import Command
from vecenv.spaces import batch_take

__all__ = ["PartialBatches"]


class PartialBatches(Recovery):
    """EnvPool's ``send`` / ``recv`` / ``async_reset`` over the workers (see the module docstring)."""

    @property
    def batch_size(self) -> int:
        """Minimum number of envs :meth:`recv` returns (EnvPool's ``batch_size``); ``1..num_envs``."""
        return self._batch_size

    @batch_size.setter
    def batch_size(self, value: int) -> None:
        self._batch_size = checked_batch_size(value, self.num_envs)

    @guarded(raise_at_end=False)
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
        self._push_replacements()
        self._forget_results()
        self._prepare_obs_write(keep_rows=False)
        restarted: list[tuple[int, BaseException]] = []  # (warned last: a warning may be an error)
        try:
            for w, (worker, (start, stop)) in enumerate(zip(self._workers, self._env_ranges, strict=True)):
                payload = (self._seeds[start:stop], self._options[start:stop], None, self.gymnasium_resets)
                try:
                    worker.send(Command.RESET, payload)
                except WorkerDiedError as exc:
                    if not self._may_restart():
                        raise
                    self._reset_by_restart(w, exc, payload, warn=False)
                    self._ready.update((i, self.reset_infos[i]) for i in range(start, stop))
                    restarted.append((w, exc))
                    continue
                self._in_flight[w] = (Command.RESET, list(range(start, stop)), payload)
        except BaseException:
            self._warn_restarts(restarted, raising=True)
            raise
        finally:
            self._state = AsyncState.PARTIAL if self._in_flight or self._ready else AsyncState.IDLE
            self.clear_staged()
        self._warn_restarts(restarted, raising=False)

    @guarded(raise_at_end=False)
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
        with self._clock.timing("send"):
            self._send_batch(actions, env_ids)

    def _send_batch(self, actions: Any, env_ids: VecEnvIndices) -> None:
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
            w, local = self._env_location[env_id]
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
            start = self._env_ranges[w][0]
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
        self._prepare_obs_write(keep_rows=True)
        if self._seeds_or_options_staged:
            self._push_staged_to(list(by_worker))
        held, ready = self._held, self._ready
        restarted: list[tuple[int, BaseException]] = []  # (warned last: a warning may be an error)
        try:
            for w, group_actions, locals_ in requests:
                start = self._env_ranges[w][0]
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
                    self._restart_and_hold(w, exc, warn=False)
                    for local in to_step:
                        ready[start + local] = held.pop(start + local)
                    restarted.append((w, exc))
                    continue
                self._in_flight[w] = (Command.STEP, [start + local for local in to_step], None)
        except BaseException:
            self._warn_restarts(restarted, raising=True)
            raise
        finally:
            if self._in_flight or ready:  # (also when a later worker's send raised: these must be collected)
                self._state = AsyncState.PARTIAL
        self._warn_restarts(restarted, raising=False)

    @guarded(raise_at_end=False)
    def recv(self) -> tuple[VecEnvObs, np.ndarray, np.ndarray, list[dict[str, Any]], np.ndarray]:
        """Wait until at least :attr:`batch_size` envs have results (or all envs in flight), return them.

        If a worker's step raises, its error propagates and the envs that did step in it are returned by the
        next call; a worker that died is restarted if ``max_restarts`` allows (its envs report the restart).

        :return: ``(obs, rewards, dones, infos, env_ids)`` for the finished envs in increasing ``env_ids``
            order: obs ``(len(env_ids), *obs_shape)``, rewards in ``rewards_dtype`` and bool dones
            ``(len(env_ids),)``, one info dict per env (the reset info for envs coming back from
            :meth:`async_reset`, whose rewards are 0 and dones False), ``env_ids`` an int64 array. Same autoreset
            rules as :meth:`step`.
        :raises NoAsyncCallError: if nothing was sent.
        """
        clock = self._clock
        with clock.timing("collect"):
            result = self._recv_batch()
        if clock.between is not None:
            clock.between.left()
        clock.steps += 1
        return result

    def _recv_batch(self) -> tuple[VecEnvObs, np.ndarray, np.ndarray, list[dict[str, Any]], np.ndarray]:
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
            start, stop = self._env_ranges[w]
            try:
                result = worker.recv()
            except BaseException as error:
                if self._restartable(w, error):
                    if command is Command.RESET:
                        self._reset_by_restart(w, error, payload, warn=False)
                        ready.update((i, self.reset_infos[i]) for i in ids)
                    else:
                        self._restart_and_hold(w, error, warn=False)
                        ready.update((i, held.pop(i)) for i in ids)
                    self._warn_restarted(w, error)  # (the restart's report is ready: a later recv returns it)
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

    def _wait_any(self) -> int:
        """Index of a worker in flight whose reply is ready (or that died), or whose reply deadline passed first
        (its ``recv`` then raises the timeout)."""
        in_flight = list(self._in_flight)
        for w in in_flight:
            if not self._workers[w].blocks:  # in-process: executes when asked
                return w
        return in_flight[next_ready([self._workers[w] for w in in_flight], self._clock)[0]]

    def _drain_partial(self) -> None:
        """Collect and drop every partial result in flight (used by reset)."""
        for w in list(self._in_flight):
            del self._in_flight[w]
            with contextlib.suppress(Exception):
                self._workers[w].recv()
        self._ready.clear()
        if self._state is AsyncState.PARTIAL:
            self._state = AsyncState.IDLE
