"""What a failure leaves behind, made right: the results of a step that raised are held until a step returns
them, and dead workers are restarted within ``max_restarts``.

Results held after a failure: a step that raises (an env's exception, an interruption, a dead worker beyond the
restart budget) has no return value, yet some envs did step in it: their observations, rewards and flags are in
the buffers, and their infos are kept in ``_held`` (env id -> info) until a step returns them. Such an env is
not stepped again until then (its action in that step is ignored), so every env reports each of its steps
exactly once. A reset of the env drops what it holds.

Worker restarts (opt-in: ``max_restarts``): every request that reaches a dead worker (or a worker that dies or
times out while answering it) goes through one rule: within the budget, the worker is restarted
(:meth:`Recovery._restart`) and its envs report the cut episode (dones=True, ``TimeLimit.truncated``,
``vecenv.restarted``) at the next step; over it, the error rises. The budget is a total for the vector env and is
counted by :meth:`Recovery._restart` itself, one restart at a time: when one request meets several dead workers
(a full-batch step finds them all when it is sent, and restarts them when it is collected), the restarts the
budget allows happen, then the next dead worker's error rises; what the other workers did in that request is
held as after any failed step.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterable, Sequence
from typing import Any

from vecenv.engine.core import EngineCore
from vecenv.engine.replies import call_all
from vecenv.errors import WorkerDiedError, add_note, program_stacklevel
from vecenv.interrupts import GUARD, guarded
from vecenv.protocol import Command

__all__ = ["Recovery"]


class Recovery(EngineCore):
    """Held results and worker restarts (see the module docstring)."""

    # --- results held after a failure ------------------------------------------------------------------

    def _hold_partial(self, w: int) -> None:
        """Hold what worker ``w``'s failed step completed (the envs that finished before the error)."""
        partial = self._workers[w].take_partial_step()
        if partial is None:
            return
        local_ids, infos, reset_infos = partial
        start, stop = self._env_ranges[w]
        self.reset_infos[start:stop] = reset_infos
        for j, info in zip(local_ids, infos, strict=True):
            self._held[start + j] = info

    def _hold_received(self, plan: list[tuple[int, list[int] | None]] | None) -> None:
        """Hold the step results received from the workers in :attr:`_received` (stepped as ``plan`` says)."""
        ids_of = {} if plan is None else dict(plan)
        for w, (part_infos, part_reset_infos) in self._received.items():
            start, stop = self._env_ranges[w]
            self.reset_infos[start:stop] = part_reset_infos
            local_ids = ids_of.get(w)
            if local_ids is None or len(part_infos) == stop - start:  # every env (a restart reports all)
                local_ids = list(range(stop - start))
            for j, info in zip(local_ids, part_infos, strict=True):
                self._held[start + j] = info
        self._received = {}

    def _hold_step_result(self, result: tuple[Any, Any, Any, list[dict[str, Any]]]) -> None:
        """A Ctrl-C was deferred while the step that returned ``result`` was collected: every env holds its result
        (the buffers still have them), so the next step returns it instead of stepping again; then the interrupt
        is raised (:mod:`vecenv.interrupts`). A program's own SIGINT handler may return instead of raising: the
        step then returns its results as usual, and nothing is held."""
        held = self._held
        for env_id, info in enumerate(result[3]):
            held[env_id] = info
        GUARD.raise_deferred()
        held.clear()

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

    # --- worker restarts ---------------------------------------------------------------------------------

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
        result = self._restart(w, exc)  # raises exc once the budget is spent (several dead workers in one step)
        self._received[w] = result
        self._warn_restarted(w, exc)
        return result

    def _restart(
        self,
        w: int,
        cause: BaseException,
        seeds: Sequence[int | None] | None = None,
        options: Sequence[dict[str, Any] | None] | None = None,
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Restart worker ``w`` after ``cause``, resetting its envs with ``seeds`` / ``options`` (default: those
        still staged for them, which are then used up); its envs report a truncated episode end (see docs). The
        caller keeps the result, then warns (:meth:`_warn_restarted`): a warning that is an error (``-W error``)
        then raises with nothing of the restart lost.

        :return: ``(infos, reset_infos)`` of the worker's envs; their rows of the buffers are written.
        :raises BaseException: ``cause`` itself, if ``max_restarts`` is spent (checked here, at each restart).
        """
        if not self._may_restart():
            raise cause
        worker = self._workers[w]
        self.restarts += 1
        start, stop = self._env_ranges[w]
        if seeds is None and options is None:
            seeds, options = self._take_staged(start, stop)
        self._prepare_obs_write(keep_rows=True)  # (the caller may hold the current observations)
        for handed in (self._handed, self._seeds_replaced, self._options_replaced):
            handed.discard(w)  # (what the dead process held is lost with it)
        try:
            reset_infos = worker.restart(seeds, options)
        except Exception as exc:
            add_note(
                exc,
                f"vecenv: raised while restarting the worker of envs {worker.env_indices} (restart {self.restarts} "
                f"of max_restarts={self.max_restarts}); the new worker was ended, and the next call that needs it "
                f"restarts it again while max_restarts allows. The restart's cause: {type(cause).__name__}: {cause}",
            )
            with contextlib.suppress(Warning):  # (a warning turned into an error does not hide the restart's)
                self._warn_restarted(w, cause)
            raise
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
        warn: bool = True,
    ) -> None:
        """Restart worker ``w`` outside a step: its envs hold the restart report, returned by their next step.

        :param warn: issue the restart's warning here; False: the caller does, once its own bookkeeping is done
            (:meth:`_warn_restarted`: the warning may be an error).
        """
        infos, reset_infos = self._restart(w, cause, seeds, options)
        start, stop = self._env_ranges[w]
        self.reset_infos[start:stop] = reset_infos
        for j, info in enumerate(infos):
            self._held[start + j] = info
        if warn:
            self._warn_restarted(w, cause)

    def _warn_restarts(self, restarted: list[tuple[int, BaseException]], raising: bool) -> None:
        """The warnings of the ``(worker, cause)`` restarts a call made, at its end; where the call is ``raising``
        an error of its own, a warning turned into an error (``-W error``) does not replace it."""
        for w, cause in restarted:
            if raising:
                with contextlib.suppress(Warning):
                    self._warn_restarted(w, cause)
            else:
                self._warn_restarted(w, cause)

    def _warn_restarted(self, w: int, cause: BaseException) -> None:
        """The ``RuntimeWarning`` of worker ``w``'s restart after ``cause`` (once its result is kept, or as the
        restart failed), naming the program's line that made the call."""
        warnings.warn(
            f"vecenv: restarting the worker of envs {self._workers[w].env_indices} (restart {self.restarts} of "
            f"max_restarts={self.max_restarts}) after: {type(cause).__name__}: {cause}",
            RuntimeWarning,
            stacklevel=program_stacklevel(),
        )

    def _reset_by_restart(
        self, w: int, cause: BaseException, payload: tuple[Any, Any, list[int] | None, bool], warn: bool = True
    ) -> None:
        """A RESET ``payload`` ``(seeds, options, local ids, gymnasium_resets)`` met a dead worker: its restart,
        with those seeds / options, is the reset; envs of the worker outside ``local ids`` report the restart at
        their next step. ``warn``: as for :meth:`_restart_and_hold`."""
        seeds, options, local_ids, _ = payload
        self._restart_and_hold(w, cause, seeds, options, warn=False)
        start, stop = self._env_ranges[w]
        for j in range(stop - start) if local_ids is None else local_ids:
            self._held.pop(start + j, None)
            self._rewards[start + j] = 0.0
            self._dones[start + j] = self._terminations[start + j] = self._truncations[start + j] = False
        if warn:
            self._warn_restarted(w, cause)

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

    # --- staged seeds / options reach the workers (a dead worker is restarted with them) --------------------

    def _push_replacements(self) -> None:
        """Before a reset: where :meth:`seed` / :meth:`set_options` replaced what a worker's envs already hold (a
        seed set to None, options cleared), replace it there first (SB3's rule: the reset uses the latest)."""
        replaced = self._seeds_replaced | self._options_replaced
        if replaced:
            self._push_staged_to(sorted(replaced))

    def _push_staged_to(self, targets: Iterable[int] | None = None) -> None:
        """Hand the seeds / options set by :meth:`seed` / :meth:`set_options` to the envs' next resets, so an
        autoreset honours them too (each is used once by whichever reset comes first).

        :param targets: the workers to hand them to (all if None; each must be idle); the others' stay here
            until a request goes to them. A dead worker is restarted (budget allowing) with them.
        """
        self._check_seeds_and_options()
        workers, slices = self._workers, self._env_ranges
        sent = []
        for w in range(len(workers)) if targets is None else targets:
            start, stop = slices[w]
            seeds, options = self._seeds[start:stop], self._options[start:stop]
            replace = (w in self._seeds_replaced, w in self._options_replaced)
            if all(seed is None for seed in seeds) and not any(options) and not any(replace):
                continue
            try:
                workers[w].send(Command.SET_NEXT_RESET, (seeds, options, *replace))
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
            self._handed.add(w)
            self._seeds_replaced.discard(w)
            self._options_replaced.discard(w)
            self._take_staged(*slices[w])

        call_all(collect, sent, [workers[w] for w in sent])

    @guarded()
    def push_staged(self) -> None:
        """Hand the staged seeds / options to the envs now, for their next reset, whichever comes first (the
        caller's or an automatic one); nothing to do when none are staged."""
        if self._seeds_or_options_staged:
            self._push_staged_to()
