"""Calls on sub-envs: ``get_attr``, ``set_attr``, ``has_attr``, ``env_method``, ``env_is_wrapped``,
``get_images``, each as one request per worker owning the addressed envs, in two halves for the engine API; and
``step_stats``, which asks every worker for its time accounts."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from vecenv.base import VecEnvIndices
from vecenv.engine.core import AsyncState, CallRequests
from vecenv.engine.recovery import Recovery
from vecenv.engine.replies import call_all
from vecenv.interrupts import guarded
from vecenv.protocol import Command
from vecenv.sb3_compat import wrapper_target
from vecenv.stats import StepStats, WorkerStats

__all__ = ["SubEnvCalls"]


#: the method the caller called, for the commands whose name is not that method's
_CALLED = {Command.IS_WRAPPED: "env_is_wrapped", Command.RENDER: "get_images"}


class SubEnvCalls(Recovery):
    """Calls on sub-envs (see the module docstring)."""

    @guarded()
    def _call(self, command: Command, indices: VecEnvIndices, *args: Any) -> list[Any]:
        """Run ``command`` with payload ``(*args, local_indices)`` on the workers owning ``indices``."""
        return self.finish_call(self.start_call(command, indices, *args))

    @guarded(raise_at_end=False)
    def start_call(self, command: Command, indices: VecEnvIndices, *args: Any) -> CallRequests:
        """First half of a call on sub-envs (``get_attr``, ``env_method``, ...): send ``command`` with payload
        ``(*args, local_indices)`` to the workers owning ``indices`` (a dead worker goes through the restart
        rule). The vector env then waits for :meth:`finish_call`.

        :return: what :meth:`finish_call` needs.
        :raises AlreadyPendingCallError: if a step, a partial batch, a reset or a call is in flight.
        """
        self._check_idle(_CALLED.get(command, command.label))
        if self._unsettled:
            self._settle()
        targets = self._normalize_indices(indices)
        by_worker: dict[int, list[tuple[int, int]]] = {}
        for position, env_index in enumerate(targets):
            w, local = self._env_location[env_index]
            by_worker.setdefault(w, []).append((position, local))
        requests = [(w, (*args, [local for _, local in items]), items) for w, items in by_worker.items()]
        for w, payload, _ in requests:
            self._send_to(w, command, payload)
        self._state = AsyncState.WAITING_CALL
        return command, len(targets), requests

    @guarded()
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

    # --- where the time goes --------------------------------------------------------------------------

    def step_stats(self, reset: bool = False) -> StepStats:
        """Where this vector env's time went since it was built (or since the last ``step_stats(reset=True)``):
        the calling process's side of ``step_async`` / ``step_wait`` / ``reset`` and each worker's time in its
        envs, in moving data and waiting for requests (:mod:`vecenv.stats`). Asks every worker for its accounts
        (one round trip each). A dead worker is restarted as by any other request when ``max_restarts`` allows
        (its envs report the restart at their next step; its accounts start again from zero).

        :param reset: start every account again from zero once read.
        :return: the accounts; ``print(venv.step_stats())`` prints them as a table, in microseconds per env-step.
        :raises AlreadyPendingCallError: if a step, a partial batch, a reset or a call is in flight.
        :raises ClosedVecEnvError: if the vector env is closed.
        :raises WorkerDiedError: if a worker is dead and ``max_restarts`` does not allow restarting it.
        """
        self._check_idle("step_stats")
        if self._unsettled:
            self._settle()
        every = self._all_workers
        for w in every:  # a dead worker goes through the restart rule, as for any other request
            self._send_to(w, Command.STATS, reset)
        accounts = call_all(lambda w: self._recv_from(w, Command.STATS, reset), every, self._workers)
        clock = self._clock
        workers, parent_env = [], 0.0
        for worker, account in zip(self._workers, accounts, strict=True):
            indices = tuple(worker.env_indices)
            env = account["env_seconds"]
            if "served_seconds" in account:  # a group served elsewhere: its own clock
                wall, idle, data = account["wall_seconds"], account["idle_seconds"], account["served_seconds"] - env
            else:  # the calling process's own envs: busy inside this process's calls
                wall = clock.elapsed()
                data = account["busy_seconds"] - env
                idle = max(0.0, wall - account["busy_seconds"])
                parent_env += env - account["requested_reset_env_seconds"]
            workers.append(
                WorkerStats(
                    where=worker.location,
                    env_indices=indices,
                    wall_seconds=wall,
                    env_seconds=env,
                    data_seconds=max(0.0, data),
                    idle_seconds=idle,
                    env_steps=account["env_steps"],
                    resets=account["resets"],
                    episodes=account["episodes"],
                    cpu_seconds=account.get("cpu_seconds"),
                    run_queue_seconds=account.get("run_queue_seconds"),
                    wait_mode=account.get("wait_mode", "block"),
                    spin_seconds=account.get("spin_seconds", 0.0),
                    spin_waits=account.get("spin_waits", 0),
                    spin_hits=account.get("spin_hits", 0),
                )
            )
        stats = clock.summary(tuple(workers), parent_env)
        if reset:
            clock.restart()
        return stats
