"""The interface every backend's worker implements, how envs are split into workers' groups, and a bounded
shutdown for a set of workers.

A worker owns a contiguous group of sub-envs (global indices ``env_indices``) and the views of the
vector env's batch buffers that belong to them. The vector env talks to it with
:meth:`Worker.send` (never blocks on the env) and :meth:`Worker.recv` (returns the reply or raises
the env's error). STEP and RESET replies fill the buffer views in place.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

from vecenv.protocol import Command
from vecenv.stats import StepClock


class Worker(ABC):
    """One backend's handle on a group of sub-envs.

    :param env_indices: global indices of the group's envs, contiguous and increasing.
    """

    #: whether the worker reads its STEP actions from the vector env's shared action buffer (the STEP
    #: payload then carries none); False: the actions travel with the request
    reads_shared_actions: bool = False

    def __init__(self, env_indices: Sequence[int]) -> None:
        self.env_indices = list(env_indices)

    @abstractmethod
    def send(self, command: Command, payload: Any) -> None:
        """Start ``command`` on the group (payloads: see :class:`~vecenv.env_group.EnvGroup` handlers)."""

    @abstractmethod
    def recv(self) -> Any:
        """Wait for the reply to the last :meth:`send` and return it, or raise the error it produced.

        After a STEP that raised, :meth:`take_partial_step` tells which envs had finished stepping.
        """

    @property
    def location(self) -> str:
        """Where the group runs, e.g. ``"calling process"``, ``"worker process 1234"`` (for tables and messages)."""
        return "calling process"

    @property
    def usable(self) -> bool:
        """False once the worker died or was killed: every later request raises (see :meth:`restart`)."""
        return True

    @property
    def pending(self) -> Command | None:
        """The command sent whose reply :meth:`recv` has not collected yet, or None."""
        return None

    def take_partial_step(self) -> tuple[list[int], list[dict[str, Any]], list[dict[str, Any]]] | None:
        """After :meth:`recv` raised for a STEP: ``(local indices, infos, reset infos)`` of the envs that finished
        stepping before the error (their rows of the buffers hold their results; the reset infos are the
        group's), or None if none did. Returned once.
        """
        return None

    #: the vector env's time accounts (:class:`vecenv.stats.StepClock`): a worker that waits for replies adds the
    #: time it waited for a STEP reply to its ``wait``; set by the vector env
    clock: StepClock | None = None

    #: False for a worker whose :meth:`recv` runs the request itself and so never waits for a reply (the
    #: in-process worker): the vector env collects such workers first, while the others work
    blocks: bool = True

    def reply_ready(self) -> bool:
        """Whether :meth:`recv` would return at once: the reply to the last :meth:`send` has arrived, or the
        worker has ended (then :meth:`recv` raises). Never waits."""
        return True

    def has_ended(self) -> bool:
        """Whether the worker is gone (its process ended, its actor died): its reply will never come."""
        return not self.usable

    @classmethod
    def wait_any(cls, workers: Sequence[Worker], timeout: float | None) -> list[int]:
        """Wait until the reply of at least one of ``workers`` (instances of this class, each with a request
        pending) is ready or its worker ended, or ``timeout`` seconds (None: no limit) passed.

        Each transport waits its own way (file descriptors, object references, events); this default polls
        :meth:`reply_ready` every millisecond.

        :return: the positions in ``workers`` that are ready (empty when the timeout passed first).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            ready = [k for k, worker in enumerate(workers) if worker.reply_ready()]
            if ready or (deadline is not None and time.monotonic() >= deadline):
                return ready
            time.sleep(0.001)

    @classmethod
    def common_step(cls, workers: Sequence[Worker]) -> Any:
        """What sends the common step (every env, actions in shared memory) to ``workers`` (a vector env's workers,
        all of this class) and collects its replies faster than :meth:`send` and :meth:`recv` on each, or None
        (the default) when the transport has nothing faster. Its ``send()`` returns how many workers, from the
        first, got their request (the others are sent to one by one); its ``collect(received, clock)`` puts each
        worker's reply, decoded as :meth:`recv` returns it, into ``received[position]`` and returns whether every
        reply is there (see :class:`vecenv.workers.common_step.CommonStep`)."""
        return None

    @property
    def reply_deadline(self) -> float | None:
        """When :meth:`recv` stops waiting for the pending reply (a :func:`time.monotonic` value: the request's
        timeout runs from :meth:`send`), or None if it waits as long as it takes."""
        return None

    @abstractmethod
    def attach(self, obs_buffer: Any, rewards: Any, dones: Any, terminations: Any, truncations: Any) -> None:
        """Give the worker the views of the batch buffers that hold its envs (filled by STEP and RESET)."""

    #: whether a vector env over this worker can be copied (``copy.deepcopy``) and pickled: only where the envs
    #: live in the calling process (worker processes and Ray actors cannot be copied with it)
    copyable = False
    #: where the envs of such a worker run, for messages
    runs_in = "worker processes"

    #: whether :meth:`use_obs_rows` is implemented: a vector env hands out observations without a copy
    #: (:mod:`vecenv.engine.obs_slots`) only if every worker can write into another slot
    supports_obs_slots = False

    def use_obs_rows(self, obs_rows: Any) -> None:
        """From the next request on, write the envs' observations into ``obs_rows``: the worker's rows of another
        observation slot (:mod:`vecenv.engine.obs_slots`), same structure as the rows given to :meth:`attach`.

        :raises NotImplementedError: unless :attr:`supports_obs_slots`.
        """
        raise NotImplementedError(f"{type(self).__name__} cannot write observations into another slot")

    def restart(
        self, seeds: Sequence[int | None] | None = None, options: Sequence[dict[str, Any] | None] | None = None
    ) -> list[dict[str, Any]]:
        """Replace the group with a fresh one built from its env factories and reset it (worker processes only).

        :param seeds: one seed (or None) per env of the group for that reset; None: no seeds.
        :param options: one options dict (or None) per env; None: no options.
        :return: the reset infos of the group.
        :raises NotImplementedError: for backends that cannot restart (the in-process worker).
        """
        raise NotImplementedError(f"{type(self).__name__} cannot restart its envs")

    @abstractmethod
    def shutdown_begin(self) -> None:
        """Ask the group to close its envs, without waiting for anything (every worker is asked before any is
        waited for, so the shutdown takes one timeout however many workers there are)."""

    @abstractmethod
    def shutdown_end(self, deadline: float) -> BaseException | None:
        """Wait until ``deadline`` (a :func:`time.monotonic` value) at most for the group to close its envs; if it
        has not ended by then, start ending it forcibly (e.g. SIGTERM) without waiting for that.

        :return: the error raised by an env's ``close``, if any.
        """

    def forget_after_fork(self) -> None:
        """In a process forked from the parent of this worker: forget the worker's process (it is the parent's
        child, not this process's). Nothing to do by default."""
        return None

    def shutdown_finish(self, deadline: float) -> None:
        """Make sure the group has ended, waiting until ``deadline`` at most for :meth:`shutdown_end`'s forcible
        end before using the last resort (e.g. SIGKILL), and release what the worker holds. Nothing to do by
        default."""
        return None


def split_groups(num_envs: int, n_workers: int) -> list[list[int]]:
    """Split env indices ``0..num_envs-1`` into ``n_workers`` contiguous groups whose sizes differ by at most one.

    >>> split_groups(5, 2)
    [[0, 1, 2], [3, 4]]
    """
    base, extra = divmod(num_envs, n_workers)
    groups, start = [], 0
    for w in range(n_workers):
        stop = start + base + (1 if w < extra else 0)
        groups.append(list(range(start, stop)))
        start = stop
    return groups


#: seconds ``close()`` waits for the workers to close their envs, all against the same deadline
CLOSE_TIMEOUT = 5.0
#: seconds after that deadline a worker still running is given to end on SIGTERM before it is killed (SIGKILL)
TERMINATE_TIMEOUT = 1.0


def shutdown_workers(workers: Sequence[Worker], timeout: float | None = None) -> None:
    """Close every worker, then raise the first env ``close`` error, if any.

    Every worker is asked to close before any is waited for, and all are waited for against one deadline,
    ``timeout`` seconds away (:data:`CLOSE_TIMEOUT` if None); those still running then are terminated together
    and given :data:`TERMINATE_TIMEOUT` more seconds before they are killed. So the shutdown is bounded by
    ``timeout + TERMINATE_TIMEOUT``, however many workers there are.

    Used by ``close()`` and, through :func:`weakref.finalize`, at garbage collection and interpreter exit.
    """
    deadline = time.monotonic() + (CLOSE_TIMEOUT if timeout is None else timeout)
    errors: list[BaseException | None] = []
    try:
        for worker in workers:
            worker.shutdown_begin()
        errors = [worker.shutdown_end(deadline) for worker in workers]
    finally:
        for worker in workers:
            worker.shutdown_finish(deadline + TERMINATE_TIMEOUT)
    first = next((error for error in errors if error is not None), None)
    if first is not None:
        raise first
