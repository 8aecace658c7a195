"""The common step of a vector env over worker processes, a step of every env with the actions in shared memory:
every request written, then every reply read and decoded as it arrives, in one loop each.

The general path (:meth:`SubprocWorker.send <vecenv.workers.subproc.SubprocWorker.send>` for each worker, then
:func:`vecenv.engine.replies.call_all` over :meth:`SubprocWorker.recv <vecenv.workers.subproc.SubprocWorker.recv>`)
builds a poll set for each wait and passes each request and each reply through about a dozen Python calls: with
16 worker processes, that fixed cost per worker and step is most of what the calling process does for cheap envs.
:class:`CommonStep` does the same work for the common step: it writes each worker's one-byte request and counts it
for a worker that spins, then watches every reply pipe and process sentinel with one poll set built once (a
reply pipe is readable only while its one reply waits in it, so the set never changes while the worker processes
live). Where the calling process spins (``wait_mode``), it spins on the reply counters of the workers not in yet
before each poll, as :meth:`SubprocWorker.wait_any <vecenv.workers.subproc.SubprocWorker.wait_any>` does.

Anything else ends a loop, and the workers it did not serve go through the general path, which raises,
restarts or times out as it always does:

- sending: a worker lost, still waiting for a reply, reading its actions from a message, or whose pipe broke
  (the general path finds it dead);
- collecting: a process sentinel (the worker died) or a pipe closed without a reply; no reply before the
  earliest reply deadline (``step_timeout``); a reply of a step that raised, or one whose decoding raised (its
  bytes are handed back to the worker, :meth:`~vecenv.workers.subproc.SubprocWorker.hand_back`, whose ``recv``
  decodes them again there); a worker lost or not waiting for a STEP reply.
"""

from __future__ import annotations

import itertools
import os
import select
from collections.abc import Sequence
from time import monotonic, perf_counter
from typing import TYPE_CHECKING, Any

from vecenv.interrupts import GUARD
from vecenv.protocol import Command
from vecenv.workers.messages import FAILED
from vecenv.workers.pipes import STEP_SHARED_FRAME, read_reply, without_sigpipe
from vecenv.workers.spin import REPLIES, REQUESTS

if TYPE_CHECKING:
    from vecenv.stats import StepClock
    from vecenv.workers.spin import Spinner
    from vecenv.workers.subproc import SubprocWorker

__all__ = ["CommonStep"]

_POLLIN = select.POLLIN
_DESCRIPTOR_CHANGES = itertools.count(1)
_STEP = Command.STEP


class CommonStep:
    """Sends the common step's requests to ``workers`` (a vector env's worker processes, in its order) and
    collects their replies, in one loop each.

    :param workers: the vector env's workers, all :class:`~vecenv.workers.subproc.SubprocWorker`.
    """

    #: a new value each time a :class:`~vecenv.workers.subproc.SubprocWorker`'s reply pipe or process changes (a
    #: process started, its pipes closed): every poll set built before then is rebuilt before its next use
    descriptors_changed = 0

    @classmethod
    def forget_descriptors(cls) -> None:
        """A worker's reply pipe or process sentinel changed (called once they are set): every common step's poll
        set is stale. (Each call stores a value never stored before, so that no interleaving of calls from
        several threads can bring back a value a poll set was built at.)"""
        cls.descriptors_changed = next(_DESCRIPTOR_CHANGES)

    def __init__(self, workers: Sequence[SubprocWorker]) -> None:
        self._workers = list(workers)
        #: :attr:`descriptors_changed` when the poll set was built (-1: not built yet)
        self._fds_seen = -1
        self._poll: Any = None
        #: descriptor -> worker position, or ``~position`` for the worker's process sentinel
        self._owner: dict[int, int] = {}
        #: each worker's envs: ``(start, stop)`` in the vector env
        self._ranges = [(worker.env_indices[0], worker.env_indices[-1] + 1) for worker in self._workers]

    def _poll_set(self) -> Any:
        """The poll set over every worker's reply pipe and sentinel, rebuilt when a restart changed them."""
        changed = CommonStep.descriptors_changed
        if changed != self._fds_seen:
            poll = select.poll()
            owner: dict[int, int] = {}
            for w, worker in enumerate(self._workers):
                poll.register(worker._conn_fd, _POLLIN)
                poll.register(worker._sentinel, _POLLIN)
                owner[worker._conn_fd], owner[worker._sentinel] = w, ~w
            self._fds_seen, self._poll, self._owner = changed, poll, owner
        return self._poll

    def send(self) -> int:
        """Send STEP of every env, actions in the shared action buffer, to the workers in order.

        :return: how many workers, from the first, have their request; the others (all when one of them cannot
            be served here: see the module) are left to :meth:`SubprocWorker.send
            <vecenv.workers.subproc.SubprocWorker.send>`, which raises or records what stopped this loop.
        """
        return without_sigpipe(self._send)  # (where a write to a dead worker's pipe would end the process)

    def _send(self) -> int:
        workers = self._workers
        for worker in workers:
            if worker._pending is not None or worker._lost is not None or not worker.reads_shared_actions:
                return 0
        now = monotonic()
        sent = 0
        for worker in workers:
            worker._step_indices = None
            worker._deadline = None if worker.step_timeout is None else now + worker.step_timeout
            worker._reply_seen = False
            try:
                os.write(worker._send_fd, STEP_SHARED_FRAME)
            except OSError:  # the pipe broke: the worker is gone, which its own send reports
                return sent
            signals = worker._signals
            if signals is not None:  # a worker that spins for its requests sees them counted
                worker._requests += 1
                signals[REQUESTS] = worker._requests
            worker._pending = _STEP
            sent += 1
        return sent

    def prepare_infos(self) -> None:
        """Build every worker's default infos of the step just sent (:meth:`MessageWorker.prepare_infos
        <vecenv.workers.messages.MessageWorker.prepare_infos>`), while the workers step: work that the
        collection would otherwise do after the replies."""
        for worker in self._workers:
            worker.prepare_infos()

    def collect(
        self,
        received: dict[int, Any],
        clock: StepClock | None = None,
        infos: list[Any] | None = None,
        reset_infos: list[Any] | None = None,
    ) -> bool:
        """Read and decode the workers' STEP replies as they arrive, each into ``received[position]`` (what
        :meth:`~vecenv.workers.subproc.SubprocWorker.recv` returns for it: its envs' infos and reset infos).

        :param clock: the vector env's time accounts: the time spent polling and reading is added to its
            ``wait``, as :meth:`~vecenv.workers.subproc.SubprocWorker.recv` does.
        :param infos: ``(num_envs,)`` list, and ``reset_infos``: the vector env's reset infos: each worker's
            infos and reset infos are placed at its envs' positions as its reply arrives, so that nothing over
            the whole batch is left for after the last reply.
        :return: True when every worker's reply is in ``received``; False when the loop ended early (see the
            module): the workers whose reply is not in ``received`` still wait for it, to be collected by
            ``recv``.
        """
        workers = self._workers
        spinner = workers[0]._spinner
        deadline: float | None = None
        for worker in workers:
            if worker._pending is not _STEP or worker._lost is not None or worker._spinner is not spinner:
                return False
            if spinner is not None and worker._signals is None:
                return False
            if worker._deadline is not None and (deadline is None or worker._deadline < deadline):
                deadline = worker._deadline
        poll, owner = self._poll_set().poll, self._owner
        left = len(workers)
        waiting_for = list(range(left)) if spinner is not None else []
        while left:
            started = perf_counter()
            events = self._spin(spinner, waiting_for, deadline) if spinner is not None else None
            if not events:
                timeout = None if deadline is None else max(0, int((deadline - monotonic()) * 1000) + 1)
                waiting = GUARD.wait_begin()  # (a wait: Ctrl-C is raised here at once, nothing half done)
                try:
                    events = poll(timeout)
                finally:
                    GUARD.wait_end(waiting)
                if spinner is not None:
                    spinner.observe(perf_counter() - started)
            if not events:  # the earliest deadline passed: that worker's recv times out
                return False
            replies = []
            ended = False
            for fd, event in events:
                w = owner[fd]
                if w < 0 or not event & _POLLIN:  # a worker died (its sentinel, or its pipe closed empty)
                    ended = True
                    continue
                try:
                    replies.append((w, read_reply(fd)))  # (its one reply: nothing follows it)
                except (EOFError, OSError):  # the pipe closed within a reply: recv finds the worker dead
                    ended = True
            if clock is not None:
                clock.wait += perf_counter() - started
            for w, data in replies:
                worker = workers[w]
                if data[0] != FAILED:
                    try:
                        result = received[w] = worker._step_reply(data)
                    except Exception:
                        pass
                    else:
                        worker._pending = None
                        left -= 1
                        if infos is not None and reset_infos is not None:
                            start, stop = self._ranges[w]
                            infos[start:stop], reset_infos[start:stop] = result
                        continue
                worker.hand_back(data)  # decoded again, and raised, by the worker's recv
                ended = True
            if ended:
                return False
            if spinner is not None:
                waiting_for = [w for w in waiting_for if w not in received]
        return True

    def _spin(self, spinner: Spinner, waiting_for: list[int], deadline: float | None) -> list[tuple[int, int]]:
        """Spin on the reply counters of the workers at ``waiting_for`` (:meth:`Spinner.spin_any
        <vecenv.workers.spin.Spinner.spin_any>`, within its budget and the deadline): ``(reply pipe, POLLIN)`` of
        each whose reply is in its pipe, as ``poll(2)`` would report them; empty when none came in time."""
        workers = self._workers
        started = perf_counter()
        timeout = None if deadline is None else max(0.0, deadline - monotonic())
        watched = [(workers[w]._signals, workers[w]._requests) for w in waiting_for]
        waiting = GUARD.wait_begin()
        try:
            ready = spinner.spin_any(watched, REPLIES, spinner.budget(timeout))
        finally:
            GUARD.wait_end(waiting)
        if not ready:
            return []
        spinner.observe(perf_counter() - started)
        return [(workers[waiting_for[k]]._conn_fd, _POLLIN) for k in ready]
