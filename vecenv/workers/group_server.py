"""The group's side of the byte protocol of :mod:`vecenv.workers.messages`, wherever the group runs (a worker
process, a Ray actor): :func:`build_group` builds the :class:`~vecenv.env_group.EnvGroup` and the handshake reply,
and :class:`GroupServer` turns each request message into its reply message.
"""

from __future__ import annotations

import pickle
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from time import perf_counter
from typing import Any

import gymnasium as gym
from gymnasium.vector import AutoresetMode

from vecenv.errors import (
    PackedException,
    UncopyableInfoError,
    add_env_context,
    add_note,
    describe_dropped,
    drop_uncopyable,
)
from vecenv.protocol import Command
from vecenv.stats import thread_run_queue_seconds
from vecenv.workers.messages import (
    FAILED,
    OK,
    OK_EMPTY_DONE_MESSAGE,
    OK_EMPTY_MESSAGE,
    STEP_PICKLED,
    STEP_SHARED_MESSAGE,
    STEP_SHARED_PARTIAL,
    dumps,
)

__all__ = ["GroupServer", "build_group"]


#: the requests whose payload starts with the name of an attribute or method of the envs
_NAMED_REQUESTS = frozenset({Command.GET_ATTR, Command.ENV_METHOD, Command.CALL})


def build_group(
    env_fns: Sequence[Callable[[], gym.Env]], env_indices: Sequence[int], autoreset_mode: AutoresetMode | str
) -> tuple[Any, bytes]:
    """Build the :class:`~vecenv.env_group.EnvGroup` of a served group.

    :return: ``(group, handshake reply)``: the reply carries ``(observation_space, action_space)``, or, with
        ``group`` None, the error building the envs raised (SystemExit & co. propagate).
    """
    from vecenv.env_group import EnvGroup

    try:
        group = EnvGroup(env_fns, env_indices, autoreset_mode=autoreset_mode)
    except Exception as exc:
        return None, bytes([FAILED]) + dumps((PackedException(exc, traceback.format_exc()), None))
    return group, bytes([OK]) + dumps((group.observation_space, group.action_space))


class GroupServer:
    """The group's side: answers request messages for one :class:`~vecenv.env_group.EnvGroup` (:meth:`handle`).

    Observations and flags travel in the replies unless a transport puts them in shared memory
    (``obs_in_shm`` / ``arrays_in_shm``, set by the worker process's SETUP).
    """

    def __init__(self, group: Any) -> None:
        self.group = group
        group.dense_infos = False  # only the rich infos travel (see step)
        self.obs_in_shm = False
        self.arrays_in_shm = False
        # a step that completed but whose reply could not be pickled as it was: (local ids, picklable payload)
        self._completed_step: tuple[list[int], tuple[Any, ...]] | None = None
        self._restart_accounts()

    # --- the accounts of vecenv.stats: the transport calls received() / replied() around each request --------

    def _restart_accounts(self) -> None:
        """Start the accounts again from zero; they run from the next request on."""
        self.accounts_start: float | None = None
        self.cpu_start = 0.0
        #: the serving thread and its run-queue time at the start (None where the system does not say)
        self.run_queue_start: tuple[int, float | None] = (0, None)
        #: when the last request arrived and when the last reply was sent (the accounts end at the later one)
        self.last_received = self.last_reply = 0.0
        #: seconds waiting for requests, and from a request's arrival until its reply was sent
        self.idle_seconds = self.served_seconds = 0.0

    def received(self) -> float:
        """A request arrived: the time since the last reply was idle. :return: now (pass it to :meth:`replied`)."""
        now = perf_counter()
        if self.accounts_start is None:
            self.accounts_start = self.last_reply = now
            self.cpu_start = time.process_time()
            self.run_queue_start = (threading.get_ident(), thread_run_queue_seconds())
        self.idle_seconds += now - self.last_reply
        self.last_received = now
        return now

    def replied(self, received: float) -> None:
        """The reply to the request that arrived at ``received`` is sent."""
        self.last_reply = now = perf_counter()
        if self.accounts_start is not None:  # (None: the request restarted the accounts)
            self.served_seconds += now - received

    def accounts(self, restart: bool) -> dict[str, Any]:
        """The group's accounts (:meth:`~vecenv.env_group.EnvGroup.accounts`) plus the server's: ``wall_seconds``,
        ``idle_seconds``, ``served_seconds``, ``cpu_seconds`` (the process's CPU time), ``run_queue_seconds``
        (the serving thread's time waiting for a free core, None where unknown); restarted too if ``restart``."""
        accounts = self.group.accounts(restart)
        start = self.accounts_start
        accounts.update(
            # (up to the arrival of the request being answered, if any: idle and served time cover exactly that)
            wall_seconds=0.0 if start is None else max(self.last_received, self.last_reply) - start,
            cpu_seconds=0.0 if start is None else time.process_time() - self.cpu_start,
            idle_seconds=self.idle_seconds,
            served_seconds=self.served_seconds,
        )
        thread, queued_before = self.run_queue_start
        queued_now = thread_run_queue_seconds() if thread == threading.get_ident() else None
        accounts["run_queue_seconds"] = (
            None if queued_now is None or queued_before is None else max(0.0, queued_now - queued_before)
        )
        if restart:
            self._restart_accounts()
        return accounts

    def shared_actions(self) -> Any:
        """This step's actions from the shared action buffer (transports with one override this)."""
        raise RuntimeError("this group has no shared action buffer: actions must travel with the STEP request")

    def handle(self, message: bytes) -> tuple[bytes, Command]:
        """Run the request ``message`` on the group.

        :return: ``(reply message, the request's command)``; an error of the group is in the reply, never raised.
        """
        command = Command.STEP
        try:
            if message == STEP_SHARED_MESSAGE:
                reply = self.step(self.shared_actions(), None)
            elif message[0] == STEP_SHARED_PARTIAL:
                reply = self.step(self.shared_actions(), pickle.loads(message[1:]))
            elif message[0] == STEP_PICKLED:
                reply = self.step(*pickle.loads(message[1:]))
            else:
                command, arg = pickle.loads(message[1:])
                reply = bytes([OK]) + self._dumps_result(command, arg, self.call(command, arg))
        except Exception as exc:
            partial = None
            if command is Command.STEP:
                partial, exc = self._partial_step_payload(exc)
            reply = bytes([FAILED]) + dumps((PackedException(exc, traceback.format_exc()), partial))
        return reply, command

    def _dumps_result(self, command: Command, arg: Any, result: Any) -> bytes:
        """``dumps(result)``. A result that cannot be pickled (an env attribute holding a lock, ...) raises the
        pickling error with a note naming the request (e.g. ``call('lock')``) and, for a request on the envs'
        attributes, marked as raised by the first env whose value cannot be pickled."""
        try:
            return dumps(result)
        except Exception as exc:
            if command not in _NAMED_REQUESTS:
                raise
            for local, value in zip(arg[-1], result, strict=True):  # the payload ends with the local indices
                try:
                    dumps(value)
                except Exception:
                    add_env_context(exc, self.group.env_indices[local], command.label)
                    break
            request = f"{command.label}({arg[0]!r})"
            add_note(exc, f"vecenv: the result of {request} cannot be pickled, so it cannot leave the worker")
            raise

    def call(self, command: Command, arg: Any) -> Any:
        """The result of a request other than STEP (a RESET also returns the arrays that do not travel shared)."""
        if command is Command.RESET:
            reset_infos = self.group.handlers[command](arg)
            return (*self._arrays(), reset_infos)
        if command is Command.STATS:
            return self.accounts(bool(arg))
        return self.group.handlers[command](arg)

    def _arrays(self) -> tuple[Any, Any]:
        group = self.group
        obs = None if self.obs_in_shm else group.obs
        rewards_dones = (
            None if self.arrays_in_shm else (group.rewards, group.dones, group.terminations, group.truncations)
        )
        return obs, rewards_dones

    def step(self, actions: Any, indices: list[int] | None) -> bytes:
        """Step the group; the reply message.

        :raises UncopyableInfoError: if an info or reset info cannot be pickled; the step is complete and its
            results travel as a failed step's completed part (see :meth:`_partial_step_payload`).
        """
        group = self.group
        infos, reset_infos = group.step(actions, indices)
        payload = self._step_payload(infos, reset_infos)
        if payload is None:
            return OK_EMPTY_DONE_MESSAGE if group.ended else OK_EMPTY_MESSAGE
        try:
            return bytes([OK]) + dumps(payload)
        except Exception as error:
            stepped = list(range(len(group)) if indices is None else indices)
            picklable, dropped = self._picklable_payload(payload, stepped)
            if not dropped:  # not an info (an observation, ...): the step reports the pickling error
                raise
            self._completed_step = (stepped, picklable)
            raise UncopyableInfoError.from_dropped(dropped) from error

    def _step_payload(self, infos: list[dict[str, Any]], reset_infos: list[dict[str, Any]]) -> tuple[Any, ...] | None:
        """``(obs, rewards_dones, sparse_infos, sparse_resets)`` of the envs the last step completed, or None if
        the parent can rebuild everything from the shared arrays. ``sparse_infos`` is ``(position, info)`` pairs
        in increasing order of position (:attr:`EnvGroup.rich_infos <vecenv.env_group.EnvGroup.rich_infos>`)."""
        # infos by position among the stepped envs; reset infos by local env index. An info holding
        # only "TimeLimit.truncated" is rebuilt by the parent from the dones and truncations arrays
        # (and the terminal observation from shared memory), so it need not travel.
        group = self.group
        ended = group.ended
        sparse_infos = [(pos, infos[pos]) for pos in group.rich_infos]
        if group.autoreset_mode is AutoresetMode.SAME_STEP:
            # the parent knows which envs reset (the done ones) and assumes empty reset infos for them
            sparse_resets = [(j, reset_infos[j]) for j in ended if reset_infos[j]]
        else:
            # NEXT_STEP: the envs reset by this step are the ones that were done before it: name them all
            sparse_resets = [(j, reset_infos[j]) for j in group.reset_by_last_step]
        if not sparse_infos and not sparse_resets and self.obs_in_shm and self.arrays_in_shm:
            return None
        return (*self._arrays(), sparse_infos, sparse_resets)

    def _partial_step_payload(self, exc: Exception) -> tuple[tuple[Any, ...] | None, Exception]:
        """After a step that raised ``exc``: ``(completed local indices, obs, rewards_dones, sparse_infos,
        sparse_resets)`` of the envs that finished stepping before the error (they keep their results), or None;
        and the error to report: ``exc``, naming also the info values left out because pickle refused them."""
        completed_step, self._completed_step = self._completed_step, None
        if completed_step is not None:
            completed, payload = completed_step
            return (completed, *payload), exc
        partial = self.group.take_partial_step()
        if partial is None:
            return None, exc
        completed, infos = partial
        payload = self._step_payload(infos, self.group.reset_infos) or (None, None, [], [])
        try:
            dumps(payload)
        except Exception:
            payload, dropped = self._picklable_payload(payload, completed)
            if dropped:
                if isinstance(exc, UncopyableInfoError):
                    exc.entries += [(env_index, key, type_name) for env_index, _, key, type_name, _ in dropped]
                note = describe_dropped(dropped)
                add_note(exc, f"vecenv: this step also left out info values it could not pickle: {note}")
        return (completed, *payload), exc

    def _picklable_payload(
        self, payload: tuple[Any, ...], stepped: Sequence[int]
    ) -> tuple[tuple[Any, ...], list[tuple[int, str, Any, str, str]]]:
        """A step ``payload`` (:meth:`_step_payload`) of the envs at local indices ``stepped`` whose infos and reset
        infos lost the values pickle refuses. :return: ``(payload, [(env index, "info" or "reset info", key,
        type name, reason)] of the values removed)``."""
        obs, rewards_dones, sparse_infos, sparse_resets = payload
        env_indices = self.group.env_indices
        dropped: list[tuple[int, str, Any, str, str]] = []

        def picklable(value: Any) -> Any:
            dumps(value)
            return value

        def clean(pairs: list[tuple[int, dict[str, Any]]], what: str, local: Sequence[int] | None) -> list[Any]:
            cleaned = []
            for p, info in pairs:
                try:
                    dumps(info)
                except Exception:
                    j = p if local is None else local[p]
                    kept, removed = drop_uncopyable(info, picklable, self.group.nests_agent_infos(j))
                    env_index = env_indices[j]
                    dropped.extend((env_index, what, key, type_name, reason) for key, type_name, reason in removed)
                    cleaned.append((p, kept))
                else:
                    cleaned.append((p, info))
            return cleaned

        cleaned = (clean(sparse_infos, "info", stepped), clean(sparse_resets, "reset info", None))
        return (obs, rewards_dones, *cleaned), dropped
