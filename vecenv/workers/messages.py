"""The messages between a vector env and a group of envs served elsewhere: a worker process, a Ray actor.

Transport-neutral: :class:`GroupServer` turns a request message into a reply message for one
:class:`~vecenv.env_group.EnvGroup`, wherever it runs; :class:`MessageWorker` is the parent's side of the same
protocol (requests out, replies decoded into the vector env's buffers and infos) and leaves only moving the
bytes to its subclasses (:class:`~vecenv.workers.subproc.SubprocWorker` over pipes,
:class:`~vecenv.workers.ray_actors.RayWorker` through Ray).

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
import threading
import time
import traceback
from abc import abstractmethod
from collections.abc import Callable, Sequence
from itertools import repeat
from time import perf_counter
from typing import Any

import cloudpickle
import gymnasium as gym
from gymnasium.vector import AutoresetMode

from vecenv.base import any_set
from vecenv.errors import (
    PackedException,
    UncopyableInfoError,
    WorkerDiedError,
    add_env_context,
    add_note,
    describe_dropped,
    drop_uncopyable,
)
from vecenv.protocol import Command
from vecenv.spaces import batch_assign
from vecenv.stats import thread_run_queue_seconds
from vecenv.workers.base import Worker

__all__ = ["GroupServer", "MessageWorker", "build_group", "dumps", "label"]

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
    """``obj`` pickled (cloudpickle for what pickle refuses: lambdas, local classes; it loads with pickle)."""
    try:
        return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:
        return cloudpickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)


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
        # the last observations of finished episodes, if they live in shared memory (EnvGroup.terminal_obs)
        self._terminal_obs: Any = None
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
            data = bytes([CALL]) + cloudpickle.dumps((command, payload))
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
            terminal_obs = self._terminal_obs if same_step else None
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
                if terminal_obs is not None and "terminal_observation" not in info:
                    info["terminal_observation"] = terminal_obs[j, ...].copy()  # 0-d rows stay arrays
        for j, reset_info in sparse_resets:
            reset_infos[j] = reset_info
        return infos
