"""The messages between a vector env and a group of envs served elsewhere: a worker process, a Ray actor.

Transport-neutral: :class:`~vecenv.workers.group_server.GroupServer` (in its own module, the group's side) turns
a request message into a reply message for one :class:`~vecenv.env_group.EnvGroup`, wherever it runs;
:class:`MessageWorker` is the parent's side of the same protocol (requests out, replies decoded into the vector
env's buffers and infos) and leaves only moving the bytes to its subclasses
(:class:`~vecenv.workers.subproc.SubprocWorker` over pipes, :class:`~vecenv.workers.ray_actors.RayWorker` through
Ray).

Protocol (every request gets exactly one reply; the first byte says what a message is):

==============================  =============================================================
parent -> group                 meaning
==============================  =============================================================
``b"S"``                        STEP every env of the group, actions already in shared memory
``b"P" + pickle(indices)``      STEP the envs at these local indices (partial batch), shared actions
``b"s" + pickle((a, indices))`` STEP with pickled actions (no shared action buffer)
``b"C" + pickle((cmd, arg))``   any other :class:`~vecenv.protocol.Command` (cloudpickled)
==============================  =============================================================

====================================  ===========================================================
group -> parent                       meaning
====================================  ===========================================================
``b"\\x00"``                           STEP done, no env done; every info is
                                      ``{"TimeLimit.truncated": False}``, arrays in shared memory
``b"\\x03"``                           STEP done, some envs done (see the shared dones); no info
                                      or reset info beyond what the parent rebuilds from the
                                      shared arrays
``b"\\x01" + pickle(payload)``         success with a payload (sparse infos, arrays that are not
                                      shared, results, ...)
``b"\\x02" + pickle((error, part))``   the command raised: a
                                      :class:`~vecenv.errors.PackedException`; for STEP, ``part``
                                      holds what the envs that finished before the error
                                      returned (they keep their results), else None
====================================  ===========================================================
"""

from __future__ import annotations

import pickle
import time
from abc import abstractmethod
from collections.abc import Callable, Sequence
from itertools import repeat
from time import perf_counter
from typing import Any

from gymnasium.vector import AutoresetMode

from vecenv.base import any_set
from vecenv.errors import (
    PackedException,
    WorkerDiedError,
    dumps_keeping_file_names,
)
from vecenv.protocol import Command
from vecenv.spaces import batch_assign
from vecenv.workers.base import Worker

__all__ = ["MessageWorker", "dumps", "label"]

# The first byte of every message says what it is (its tag). Requests: step every env, actions in shared memory
# (the whole message); step some envs, actions in shared memory (+ pickled local ids); step with pickled
# ``(actions, local ids)``; any other command (+ cloudpickled ``(command, payload)``). Replies: a step whose
# results are all in shared memory, without / with an episode end (the whole message); success (+ pickled
# result); failure (+ pickled ``(PackedException, partial step)``).
STEP_SHARED = ord("S")
STEP_SHARED_PARTIAL = ord("P")
STEP_PICKLED = ord("s")
CALL = ord("C")
OK_EMPTY = 0
OK = 1
FAILED = 2
OK_EMPTY_DONE = 3
# the one-byte messages, encoded once
STEP_SHARED_MESSAGE = bytes([STEP_SHARED])
OK_EMPTY_MESSAGE = bytes([OK_EMPTY])
OK_EMPTY_DONE_MESSAGE = bytes([OK_EMPTY_DONE])
DEFAULT_INFO_KEY = "TimeLimit.truncated"
# the info of an env whose step reported nothing else, copied for each such env (dict.copy in a C loop)
_DEFAULT_INFO = {DEFAULT_INFO_KEY: False}


def _default_info_list(n: int) -> list[dict[str, Any]]:
    """``n`` fresh copies of the default info (``dict.copy`` in a C loop)."""
    return list(map(dict.copy, repeat(_DEFAULT_INFO, n)))


def label(doing: Command | str) -> str:
    """The name of what a worker was doing, for messages: a command's label (``"step"``) or a phase."""
    return doing.label if isinstance(doing, Command) else doing


def dumps(obj: Any) -> bytes:
    """``obj`` pickled (cloudpickle for what pickle refuses: lambdas, local classes, the main script's classes;
    it loads with pickle). What cloudpickle pickles by value keeps its file name
    (:func:`~vecenv.errors.dumps_keeping_file_names`): loading a class of the main script by value replaces the
    code of the class the other process already has (cloudpickle tracks it), which would otherwise name its file
    ``<dynamic-code>`` from then on, in that process's tracebacks and in what it pickles later."""
    try:
        return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:
        return dumps_keeping_file_names(obj)


class MessageWorker(Worker):
    """The parent's side of the protocol, for a group served elsewhere: builds the request messages, decodes the
    replies into the vector env's buffers (rows this worker was given by :meth:`attach`) and infos, rebuilds
    the group's errors with their own type, and keeps the partial result of a STEP that raised.

    A transport subclass moves the bytes: :meth:`_send_bytes`, :meth:`_recv_raw` (applying
    :attr:`step_timeout` / :attr:`reset_timeout` from :attr:`reply_deadline`), :meth:`_where`, plus the waiting,
    restart and shutdown methods of :class:`~vecenv.workers.Worker`.

    :param env_indices: global indices of the group's envs (contiguous).
    :param autoreset_mode: the group's :class:`gymnasium.vector.AutoresetMode`.
    """

    def __init__(self, env_indices: Sequence[int], autoreset_mode: AutoresetMode | str) -> None:
        super().__init__(env_indices)
        self.autoreset_mode = AutoresetMode(autoreset_mode)
        #: seconds to wait for a STEP / RESET reply before the worker is killed (None: forever)
        self.step_timeout: float | None = None
        self.reset_timeout: float | None = None
        self._pending: Command | None = None
        # when recv() gives up on the pending STEP / RESET reply (monotonic seconds; None: never)
        self._deadline: float | None = None
        # how the envs' reset is called (EnvGroup.gymnasium_resets), as the last RESET request said
        self._gymnasium_resets = False
        #: why this worker cannot be used any more (it was killed or died): every later call raises it
        self._lost: str | None = None
        # what the last STEP that raised completed (see take_partial_step)
        self._partial: tuple[list[int], list[dict[str, Any]], list[dict[str, Any]]] | None = None
        self._step_indices: Sequence[int] | None = None
        # views of the vec env's (obs, rewards, dones, terminations, truncations) rows of this group
        self._buffers: tuple[Any, Any, Any, Any, Any] | None = None
        # a copy of row j of the last observations of finished episodes, if they live in shared memory
        # (EnvGroup.terminal_obs; vecenv.spaces.make_row_reader)
        self._terminal_row: Callable[[int], Any] | None = None
        self._reset_infos: list[dict[str, Any]] = [{} for _ in self.env_indices]
        # the default infos of the group's next full step, built while its envs step (see prepare_infos)
        self._fresh_infos: list[dict[str, Any]] | None = None

    # --- what a transport provides ---------------------------------------------------------------------

    @abstractmethod
    def _send_bytes(self, data: bytes, doing: Command | str) -> None:
        """Send a request message; raise :class:`~vecenv.errors.WorkerDiedError` if the group is gone."""

    @abstractmethod
    def _recv_raw(self, doing: Command | str) -> bytes:
        """Wait for the reply message to the pending request (until :attr:`reply_deadline`, then kill the worker
        and raise :class:`TimeoutError`); raise :class:`~vecenv.errors.WorkerDiedError` if the group is gone."""

    @abstractmethod
    def _where(self) -> str:
        """Where the group runs, for error notes (e.g. ``"worker process 123 (envs [0, 1])"``)."""

    # --- the Worker interface ------------------------------------------------------------------------

    @property
    def pending(self) -> Command | None:
        return self._pending

    @property
    def usable(self) -> bool:
        return self._lost is None

    @property
    def reply_deadline(self) -> float | None:
        return self._deadline

    def attach(self, obs_buffer: Any, rewards: Any, dones: Any, terminations: Any, truncations: Any) -> None:
        self._buffers = (obs_buffer, rewards, dones, terminations, truncations)

    supports_obs_slots = True

    def use_obs_rows(self, obs_rows: Any) -> None:
        # (a group whose observations live in shared memory reads the slot from there: see SubprocWorker)
        assert self._buffers is not None, "attach() must be called before use_obs_rows()"
        self._buffers = (obs_rows, *self._buffers[1:])

    def take_partial_step(self) -> tuple[list[int], list[dict[str, Any]], list[dict[str, Any]]] | None:
        partial, self._partial = self._partial, None
        return partial

    def _check_usable(self) -> None:
        if self._lost is not None:
            raise WorkerDiedError(self._lost)

    def send(self, command: Command, payload: Any) -> None:
        self._check_usable()
        if self._pending is not None:
            # a reply was never collected (e.g. KeyboardInterrupt in the middle of a step): drop it
            try:
                self.recv()
            except WorkerDiedError:
                raise
            except Exception:
                pass
            self._partial = None
        if command is Command.RESET and len(payload) > 3:
            self._gymnasium_resets = bool(payload[3])  # a restart resets the new envs the same way
        if command is Command.STEP:
            actions, indices = payload
            self._step_indices = indices
            if actions is not None:
                data = bytes([STEP_PICKLED]) + dumps(payload)
            elif indices is None:
                data = STEP_SHARED_MESSAGE
            else:
                data = bytes([STEP_SHARED_PARTIAL]) + dumps(list(indices))
        else:
            data = bytes([CALL]) + dumps_keeping_file_names((command, payload))
        timeout = (
            self.step_timeout if command is Command.STEP else self.reset_timeout if command is Command.RESET else None
        )
        self._deadline = None if timeout is None else time.monotonic() + timeout
        self._send_bytes(data, command)
        self._pending = command

    def recv(self) -> Any:
        self._check_usable()
        command = self._pending
        assert command is not None, "recv() without send()"
        if command is Command.STEP and self.clock is not None:
            started = perf_counter()
            try:
                data = self._recv_raw(command)
            finally:
                self.clock.wait += perf_counter() - started
        else:
            data = self._recv_raw(command)
        self._pending = None
        if command is Command.STEP:
            return self._step_reply(data)
        result = self._reply(data)
        if command is Command.RESET:
            obs, rewards_dones, reset_infos = result
            self._store_arrays(obs, rewards_dones)
            self._reset_infos = list(reset_infos)
            return self._reset_infos
        return result

    def _end_failed_restart(self, stage: str, error: BaseException) -> None:
        """A restart failed during ``stage`` (its env construction, setup or reset) with ``error``: end the new
        process or actor, which is never used half built; every later call raises a WorkerDiedError naming
        ``error`` (unless the failure already recorded a more precise reason, such as a timeout)."""
        self.kill(
            f"The {self._where()}, started to replace a dead one, failed during its {stage} and was ended: "
            f"{type(error).__name__}: {error}"
        )

    @abstractmethod
    def kill(self, reason: str | None = None) -> None:
        """End the group's process or actor at once; every later request raises WorkerDiedError with ``reason``."""

    def _reset_after_restart(
        self, seeds: Sequence[int | None] | None, options: Sequence[dict[str, Any] | None] | None
    ) -> list[dict[str, Any]]:
        """Reset every env of a freshly built group, env ``j`` with ``seeds[j]`` / ``options[j]`` if given, the way
        the last RESET request said (:attr:`~vecenv.env_group.EnvGroup.gymnasium_resets`).

        :return: the reset infos of the group.
        """
        n = len(self.env_indices)
        seeds_list, options_list = list(seeds or [None] * n), [o or {} for o in (options or [None] * n)]
        self.send(Command.RESET, (seeds_list, options_list, None, self._gymnasium_resets))
        reset_infos: list[dict[str, Any]] = self.recv()
        return reset_infos

    # --- decoding replies ------------------------------------------------------------------------------

    def _reply(self, data: bytes) -> Any:
        status = data[0]
        payload: Any = pickle.loads(memoryview(data)[1:]) if len(data) > 1 else None
        if status == FAILED:
            packed, partial = payload
            assert isinstance(packed, PackedException)
            if partial is not None:  # a STEP that raised: the envs that finished before keep their results
                completed, obs, rewards_dones, sparse_infos, sparse_resets = partial
                self._store_arrays(obs, rewards_dones)
                infos = self._rebuild_infos(completed, sparse_infos, sparse_resets)
                self._partial = (list(completed), infos, list(self._reset_infos))
            raise packed.rebuild(self._where())
        return payload

    def _store_arrays(self, obs: Any, rewards_dones: Any) -> None:
        assert self._buffers is not None, "attach() must be called before stepping"
        if obs is not None:
            batch_assign(self._buffers[0], obs)
        if rewards_dones is not None:
            for view, values in zip(self._buffers[1:], rewards_dones, strict=True):
                view[:] = values

    def prepare_infos(self) -> None:
        """Build the default infos (``{"TimeLimit.truncated": False}``, one fresh dict per env) of the group's next
        full step now, while its envs step: the reply then only fills in what differs. Called by the vector env
        once its requests are out; a prepared list is used once, by a step of every env of the group."""
        if self._fresh_infos is None:
            self._fresh_infos = _default_info_list(len(self.env_indices))

    def _default_infos(self, n: int) -> list[dict[str, Any]]:
        """``n`` fresh default infos: the prepared ones if they are for ``n`` envs, else new ones."""
        fresh = self._fresh_infos
        if fresh is not None and len(fresh) == n:
            self._fresh_infos = None
            return fresh
        return _default_info_list(n)

    def _step_reply(self, data: bytes) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Rebuild the stepped envs' infos (SB3's layout) from the reply and the shared arrays."""
        if data == OK_EMPTY_MESSAGE:  # the common step: nothing else to rebuild
            n = len(self.env_indices) if self._step_indices is None else len(self._step_indices)
            return self._default_infos(n), self._reset_infos
        if data == OK_EMPTY_DONE_MESSAGE:
            return self._rebuild_infos(self._step_indices, [], [], any_done=True), self._reset_infos
        obs, rewards_dones, sparse_infos, sparse_resets = self._reply(data)
        self._store_arrays(obs, rewards_dones)
        return self._rebuild_infos(self._step_indices, sparse_infos, sparse_resets), self._reset_infos

    def _rebuild_infos(
        self,
        step_indices: Sequence[int] | None,
        sparse_infos: list[tuple[int, dict[str, Any]]],
        sparse_resets: list[tuple[int, dict[str, Any]]],
        any_done: bool | None = None,
    ) -> list[dict[str, Any]]:
        """The infos of the envs at ``step_indices`` (local; None: all), from the infos that travelled and the
        shared flags and terminal observations; the reset infos are updated in :attr:`_reset_infos`.

        :param any_done: whether some env of the group is done (None: look at the shared dones).
        """
        stepped = range(len(self.env_indices)) if step_indices is None else step_indices
        infos: list[dict[str, Any]]
        if len(sparse_infos) == len(stepped):  # every env's info travelled (positions in increasing order)
            infos = [info for _, info in sparse_infos]
        else:
            infos = self._default_infos(len(stepped))
            for pos, info in sparse_infos:
                infos[pos] = info
        reset_infos = self._reset_infos
        assert self._buffers is not None
        dones = self._buffers[2]
        if any_done or (any_done is None and any_set(dones)):
            terminations, truncations = self._buffers[3], self._buffers[4]
            same_step = self.autoreset_mode is AutoresetMode.SAME_STEP
            # terminal observations exist in SAME_STEP mode only (the other modes do not reset on done)
            terminal_row = self._terminal_row if same_step else None
            if step_indices is None:
                finished = [(j, j) for j in dones.nonzero()[0].tolist()]
            else:
                finished = [(pos, j) for pos, j in enumerate(stepped) if dones[j]]
            for pos, j in finished:
                if same_step:
                    reset_infos[j] = {}  # the reset of a done env; non-empty ones are in sparse_resets
                info = infos[pos]
                if truncations[j] and not terminations[j]:
                    info[DEFAULT_INFO_KEY] = True
                # an info that already holds it got an observation that did not fit the shared array
                if terminal_row is not None and "terminal_observation" not in info:
                    info["terminal_observation"] = terminal_row(j)
        for j, reset_info in sparse_resets:
            reset_infos[j] = reset_info
        return infos
