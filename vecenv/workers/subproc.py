"""Worker processes for :class:`~vecenv.SubprocVecEnv`: the worker loop and the parent-side handle.

Each worker process owns a group of envs (an :class:`~vecenv.env_group.EnvGroup`). Observations,
rewards, dones and actions live in a :class:`~vecenv.shared_memory.SharedBatch` that both sides map;
the group writes its rows in place, so a step costs one small message each way per worker.

Channels: requests travel through one one-way pipe, replies through another (waking a process blocked on a
pipe is cheaper than on the Unix socket a duplex ``multiprocessing.Pipe()`` is; measurements in
docs/performance.md); a socket pair serves once, to pass the shared block's file descriptor.
Messages use ``multiprocessing.Connection``'s framing (a 4-byte length, then the bytes), read with
:func:`read_message`, which gets a 1-byte message in a single ``read(2)``.

Protocol (every request gets exactly one reply):

==============================  =============================================================
parent -> worker                meaning
==============================  =============================================================
``b"S"``                        STEP every env of the group, actions already in shared memory
``b"P" + pickle(indices)``      STEP the envs at these local indices (partial batch), shared actions
``b"s" + pickle((a, indices))`` STEP with pickled actions (action spaces that cannot be shared)
``b"C" + pickle((cmd, arg))``   any other :class:`~vecenv.protocol.Command` (cloudpickled)
==============================  =============================================================

====================================  ===========================================================
worker -> parent                      meaning
====================================  ===========================================================
``b"\\x00"``                           STEP done, no env done; every info is
                                      ``{"TimeLimit.truncated": False}``
``b"\\x03"``                           STEP done, some envs done (see the shared dones); no info
                                      or reset info beyond what the parent rebuilds from the
                                      shared arrays
``b"\\x01" + pickle(payload)``         success with a payload (sparse infos, results, ...)
``b"\\x02" + pickle((error, part))``   the command raised: a
                                      :class:`~vecenv.errors.PackedException`; for STEP, ``part``
                                      holds what the envs that finished before the error
                                      returned (they keep their results), else None
====================================  ===========================================================

The parent never blocks on a pipe without also watching the worker's process sentinel, so a dead
worker is an error, not a hang.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import re
import select
import signal
import struct
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from multiprocessing import reduction
from multiprocessing.connection import Connection, wait
from typing import Any

import cloudpickle
import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

from vecenv.base import CloudpickleWrapper
from vecenv.errors import PackedException, WorkerDiedError
from vecenv.protocol import Command
from vecenv.shared_memory import SharedBatch
from vecenv.spaces import batch_assign, batch_copy, batch_slice, split_actions
from vecenv.workers.base import Worker

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
_DEFAULT_INFO_KEY = "TimeLimit.truncated"


# multiprocessing.Connection's framing (so its recv_bytes / send_bytes interoperate): a 4-byte big-endian
# length, or -1 and an 8-byte length for messages over 2 GiB, then the bytes
_SIZE = struct.Struct("!i")
_BIG_SIZE = struct.Struct("!Q")
_ONE_BYTE_HEADER = _SIZE.pack(1)
_STEP_SHARED_FRAME = _ONE_BYTE_HEADER + STEP_SHARED_MESSAGE


def _read_exactly(fd: int, size: int) -> bytes:
    data = os.read(fd, size)
    if len(data) == size:
        return data
    if not data:
        raise EOFError
    chunks = [data]
    remaining = size - len(data)
    while remaining:
        chunk = os.read(fd, remaining)
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def read_message(fd: int) -> bytes:
    """Read one framed message from a pipe; a 1-byte message (every step request and most replies) costs
    one ``read(2)`` where ``Connection.recv_bytes`` makes two. Never reads past the message, which is why
    messages are never empty (:func:`frame` refuses them): the first read asks for a header and one byte.

    :raises EOFError: if the pipe's other end is closed.
    """
    head = os.read(fd, 5)
    if head[:4] == _ONE_BYTE_HEADER and len(head) == 5:
        return head[4:]
    if len(head) < 4:
        if not head:
            raise EOFError
        head += _read_exactly(fd, 4 - len(head))
    (size,) = _SIZE.unpack(head[:4])
    if size == -1:
        extra = head[4:] + _read_exactly(fd, _BIG_SIZE.size - len(head[4:]))
        (size,) = _BIG_SIZE.unpack(extra[: _BIG_SIZE.size])
        body = extra[_BIG_SIZE.size :]
    else:
        body = head[4:]
    return body + _read_exactly(fd, size - len(body)) if len(body) < size else body


def frame(data: bytes) -> bytes:
    """``data`` with its length header (see :func:`read_message`).

    :raises ValueError: if ``data`` is empty (every message of the protocol has at least a status byte).
    """
    if not data:
        raise ValueError("worker pipe messages are never empty")
    if len(data) > 0x7FFFFFFF:
        return _SIZE.pack(-1) + _BIG_SIZE.pack(len(data)) + data
    return _SIZE.pack(len(data)) + data


def write_message(fd: int, data: bytes) -> None:
    """Write ``frame(data)`` to a pipe (all of it: large messages take several ``write(2)`` calls)."""
    view = memoryview(frame(data))
    while view:
        view = view[os.write(fd, view) :]


def _dumps(obj: Any) -> bytes:
    try:
        return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # lambdas, local classes...: cloudpickle output loads with pickle.loads
        return cloudpickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)


def _exit_when_parent_dies() -> None:
    """Start a daemon thread that ends this worker as soon as its parent process is gone."""
    import multiprocessing

    parent = multiprocessing.parent_process()
    if parent is None or parent.sentinel is None:  # pragma: no cover - always set for our workers
        return

    def watch() -> None:
        wait([parent.sentinel])
        os._exit(0)

    threading.Thread(target=watch, name="vecenv-parent-watch", daemon=True).start()


class _WorkerLoop:
    """The worker side: serves requests for one :class:`EnvGroup` until CLOSE or the pipe closes."""

    def __init__(self, conn_in: Connection, conn_out: Connection, fd_conn: Connection, group: Any) -> None:
        self.conn_in, self.conn_out, self.fd_conn = conn_in, conn_out, fd_conn
        self.group = group
        group.dense_infos = False  # only the rich infos travel (see step)
        self.shared: SharedBatch | None = None
        self.action_view: Any = None
        self.obs_in_shm = False
        self.arrays_in_shm = False

    def setup(self, arg: tuple[int, int, int, int, bool, str]) -> None:
        """Map the shared batch (its fd follows this message) and write the group's rows there from now on."""
        size, num_envs, start, stop, obs_in_shm, rewards_dtype = arg
        fd = reduction.recv_handle(self.fd_conn)
        self.fd_conn.close()  # one block per worker process: the socket has done its job
        try:
            group = self.group
            self.shared = shared = SharedBatch.attach(
                group.observation_space, group.action_space, num_envs, fd, size, rewards_dtype
            )
        finally:
            os.close(fd)
        group.rewards = shared.rewards[start:stop]
        group.dones = shared.dones[start:stop]
        group.terminations = shared.terminations[start:stop]
        group.truncations = shared.truncations[start:stop]
        group.forget_flags()  # new arrays: let the next step clear them
        self.arrays_in_shm = True
        if obs_in_shm:
            group.obs = batch_slice(shared.obs, start, stop)
            self.obs_in_shm = True
            if shared.terminal_obs is not None:
                group.terminal_obs = shared.terminal_obs[start:stop]
        if shared.actions is not None:
            self.action_view = batch_slice(shared.actions, start, stop)

    def _arrays(self) -> tuple[Any, Any]:
        group = self.group
        obs = None if self.obs_in_shm else group.obs
        rewards_dones = (
            None if self.arrays_in_shm else (group.rewards, group.dones, group.terminations, group.truncations)
        )
        return obs, rewards_dones

    def step(self, actions: Any, indices: list[int] | None) -> bytes:
        group = self.group
        infos, reset_infos = group.step(actions, indices)
        payload = self._step_payload(infos, reset_infos)
        if payload is None:
            return OK_EMPTY_DONE_MESSAGE if group.ended else OK_EMPTY_MESSAGE
        return bytes([OK]) + _dumps(payload)

    def _step_payload(self, infos: list[dict[str, Any]], reset_infos: list[dict[str, Any]]) -> tuple[Any, ...] | None:
        """``(obs, rewards_dones, sparse_infos, sparse_resets)`` of the envs the last step completed, or None if
        the parent can rebuild everything from the shared arrays."""
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

    def _partial_step_payload(self) -> tuple[Any, ...] | None:
        """After a step that raised: ``(completed local indices, obs, rewards_dones, sparse_infos, sparse_resets)``
        of the envs that finished stepping before the error (they keep their results), or None."""
        partial = self.group.take_partial_step()
        if partial is None:
            return None
        completed, infos = partial
        payload = self._step_payload(infos, self.group.reset_infos)
        return (completed, *(payload if payload is not None else (None, None, [], [])))

    def _shared_actions(self, space: gym.Space, n_local: int) -> Any:
        """This step's actions, copied out of shared memory: an env may keep its action (a Box action is
        a row of the batch), and the parent overwrites the buffer at the next step."""
        actions = self.action_view
        if type(actions) is np.ndarray:
            return actions.copy()
        return split_actions(space, batch_copy(actions), 0, n_local)

    def serve(self) -> None:
        fd_in, fd_out, group = self.conn_in.fileno(), self.conn_out.fileno(), self.group
        handlers = group.handlers
        space = group.action_space
        n_local = len(group)
        while True:
            try:
                message = read_message(fd_in)
            except (EOFError, OSError):
                return
            command = Command.STEP
            try:
                if message == STEP_SHARED_MESSAGE:
                    reply = self.step(self._shared_actions(space, n_local), None)
                elif message[0] == STEP_SHARED_PARTIAL:
                    indices = pickle.loads(message[1:])
                    reply = self.step(self._shared_actions(space, n_local), indices)
                elif message[0] == STEP_PICKLED:
                    reply = self.step(*pickle.loads(message[1:]))
                else:
                    command, arg = pickle.loads(message[1:])
                    if command is Command.SETUP:
                        self.setup(arg)
                        result: Any = None
                    elif command is Command.RESET:
                        reset_infos = handlers[command](arg)
                        result = (*self._arrays(), reset_infos)
                    else:
                        result = handlers[command](arg)
                    reply = bytes([OK]) + _dumps(result)
            except Exception as exc:
                partial = self._partial_step_payload() if command is Command.STEP else None
                reply = bytes([FAILED]) + _dumps((PackedException(exc, traceback.format_exc()), partial))
            write_message(fd_out, reply)
            if command is Command.CLOSE:
                return


def worker_main(
    conns: tuple[Connection, Connection, Connection],
    parent_conns: tuple[Connection, ...],
    env_fns: CloudpickleWrapper,
    env_indices: list[int],
    autoreset_mode: str = AutoresetMode.SAME_STEP.value,
) -> None:
    """Entry point of a worker process: build the :class:`EnvGroup`, then serve requests until CLOSE or EOF.

    :param conns: ``(conn_in, conn_out, fd_conn)``: the read end of the parent's request pipe, the write
        end of the reply pipe, and a socket the shared block's file descriptor arrives on.
    :param parent_conns: the parent's ends of the same channels (inherited under fork: closed at once).
    """
    from vecenv.env_group import EnvGroup

    # Ctrl-C is the parent's business: it shuts the workers down cleanly.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for parent_conn in parent_conns:
        parent_conn.close()
    conn_in, conn_out, fd_conn = conns
    _exit_when_parent_dies()
    try:
        group = EnvGroup(env_fns.var, env_indices, autoreset_mode=autoreset_mode)
    except Exception as exc:  # SystemExit & co. end the worker, as in step: the parent reports the exit code
        conn_out.send_bytes(bytes([FAILED]) + _dumps((PackedException(exc, traceback.format_exc()), None)))
        conn_out.close()
        return
    conn_out.send_bytes(bytes([OK]) + _dumps((group.observation_space, group.action_space)))
    _WorkerLoop(conn_in, conn_out, fd_conn, group).serve()
    for conn in conns:
        conn.close()


class SharedFd:
    """The shared block's file descriptor, kept open so restarted workers can map the block; closed once."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def _label(doing: Command | str) -> str:
    return doing.label if isinstance(doing, Command) else doing


_MAIN_GUARD = re.compile(r"""__name__\s*==\s*['"]__main__['"]|['"]__main__['"]\s*==\s*__name__""")


def _script_without_main_guard() -> str | None:
    """The path of the main script if it has no ``if __name__ == "__main__":`` test, else None (also when the
    program is not a script: an interactive session, ``python -c``, a notebook)."""
    path = getattr(sys.modules.get("__main__"), "__file__", None)
    if not isinstance(path, str) or not path.endswith(".py"):
        return None
    try:
        with open(path, encoding="utf-8") as file:
            source = file.read()
    except (OSError, UnicodeDecodeError):
        return None
    return None if _MAIN_GUARD.search(source) else path


_POLLIN = select.POLLIN


def _describe_exit(exitcode: int | None) -> str:
    if exitcode is None:
        return "is unresponsive"
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        hint = " (most often the out-of-memory killer)" if -exitcode == signal.SIGKILL else ""
        return f"was killed by {name}{hint}"
    return f"exited with code {exitcode}"


class SubprocWorker(Worker):
    """Parent-side handle of one worker process running a group of envs.

    :param ctx: a multiprocessing context (fork, forkserver or spawn).
    :param env_fns: factories of the group's envs (cloudpickled to the worker).
    :param env_indices: their global indices (contiguous).
    :param autoreset_mode: the group's :class:`gymnasium.vector.AutoresetMode` (see :class:`EnvGroup`).
    """

    def __init__(
        self,
        ctx: Any,
        env_fns: Sequence[Callable[[], gym.Env]],
        env_indices: Sequence[int],
        autoreset_mode: AutoresetMode = AutoresetMode.SAME_STEP,
    ) -> None:
        super().__init__(env_indices)
        self.autoreset_mode = AutoresetMode(autoreset_mode)
        self._ctx = ctx
        self._env_fns = CloudpickleWrapper(list(env_fns))
        #: seconds to wait for a STEP / RESET reply before the worker is killed (None: forever)
        self.step_timeout: float | None = None
        self.reset_timeout: float | None = None
        #: kept for :meth:`restart`: the shared block (fd stays open until shutdown) and its arguments
        self._shared: tuple[SharedBatch, SharedFd, bool] | None = None
        self._start_process()
        self._pending: Command | None = None
        # late replies of an abandoned request that shutdown must skip before the CLOSE reply
        self._stale_replies = 0
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

    def _start_process(self) -> None:
        ctx = self._ctx
        # requests and replies travel through two one-way pipes: on this kind of machine (VMs with few
        # vCPUs) waking a process blocked on a pipe is measurably cheaper than on a Unix socket, which is
        # what a duplex multiprocessing.Pipe() is (docs/performance.md); a socket pair is kept only to
        # pass the shared block's file descriptor (SCM_RIGHTS) once
        child_in, self._send_conn = ctx.Pipe(duplex=False)
        self.conn, child_out = ctx.Pipe(duplex=False)
        self._fd_conn, child_fd = ctx.Pipe()
        child_conns = (child_in, child_out, child_fd)
        self.process = ctx.Process(
            target=worker_main,
            args=(
                child_conns,
                (self._send_conn, self.conn, self._fd_conn),
                self._env_fns,
                self.env_indices,
                self.autoreset_mode.value,
            ),
            daemon=True,  # if the parent exits without closing, multiprocessing terminates the worker
            name=f"vecenv-worker-{self.env_indices[0]}",
        )
        self.process.start()
        for conn in child_conns:
            conn.close()
        # one prebuilt poll set per worker: waiting costs a single poll(2) call, and a dead worker
        # (its sentinel becomes readable) is noticed even if it never writes to the pipe
        self._conn_fd = self.conn.fileno()
        self._send_fd = self._send_conn.fileno()
        self._poller: Any = select.poll()
        self._poller.register(self._conn_fd, select.POLLIN)
        self._poller.register(self.process.sentinel, select.POLLIN)

    def handshake(self) -> tuple[gym.Space, gym.Space]:
        """Wait for the worker to build its envs; return ``(observation_space, action_space)``."""
        spaces: tuple[gym.Space, gym.Space] = self._reply(self._recv_raw("env construction"))
        return spaces

    def setup_shared(self, shared: SharedBatch, fd: SharedFd, obs_in_shm: bool) -> None:
        """Send the shared batch's fd; from now on the worker writes its rows of ``shared`` in place."""
        self._shared = (shared, fd, obs_in_shm)
        start, stop = self.env_indices[0], self.env_indices[-1] + 1
        arg = (shared.size, shared.num_envs, start, stop, obs_in_shm, shared.rewards.dtype.str)
        self._send_bytes(bytes([CALL]) + cloudpickle.dumps((Command.SETUP, arg)), "setup")
        try:
            reduction.send_handle(self._fd_conn, fd.fd, self.process.pid)
        except OSError as exc:
            raise self._died("setup") from exc
        finally:
            self._fd_conn.close()
        self._reply(self._recv_raw("setup"))
        self.reads_shared_actions = shared.actions is not None
        if obs_in_shm and shared.terminal_obs is not None:
            self._terminal_obs = shared.terminal_obs[start:stop]

    def reply_ready(self) -> bool:
        if self._lost is not None or self._poller is None:
            return True
        return bool(self._poller.poll(0))

    def has_ended(self) -> bool:
        return self._lost is not None or not self.process.is_alive()

    @classmethod
    def wait_any(cls, workers: Sequence[Worker], timeout: float | None) -> list[int]:
        """One ``poll(2)`` over every worker's reply pipe and process sentinel (a worker that died is ready)."""
        poller = select.poll()
        owner: dict[int, int] = {}
        ready: set[int] = set()
        for k, worker in enumerate(workers):
            assert isinstance(worker, SubprocWorker)
            if worker._lost is not None or worker._poller is None:
                ready.add(k)  # killed or found dead: recv() raises at once
                continue
            for fd in (worker._conn_fd, worker.process.sentinel):
                poller.register(fd, _POLLIN)
                owner[fd] = k
        if ready:
            return sorted(ready)
        wait_ms = None if timeout is None else max(0, int(timeout * 1000) + 1)
        return sorted({owner[fd] for fd, _ in poller.poll(wait_ms)})

    @property
    def reply_deadline(self) -> float | None:
        return self._deadline

    def attach(self, obs_buffer: Any, rewards: Any, dones: Any, terminations: Any, truncations: Any) -> None:
        self._buffers = (obs_buffer, rewards, dones, terminations, truncations)

    def _where(self) -> str:
        return f"worker process {self.process.pid} (envs {self.env_indices})"

    @property
    def pending(self) -> Command | None:
        return self._pending

    @property
    def usable(self) -> bool:
        return self._lost is None

    def take_partial_step(self) -> tuple[list[int], list[dict[str, Any]], list[dict[str, Any]]] | None:
        partial, self._partial = self._partial, None
        return partial

    def _check_usable(self) -> None:
        if self._lost is not None:
            raise WorkerDiedError(self._lost)

    def _send_bytes(self, data: bytes, doing: Command | str) -> None:
        try:
            if data is STEP_SHARED_MESSAGE:
                os.write(self._send_fd, _STEP_SHARED_FRAME)
            else:
                write_message(self._send_fd, data)
        except (OSError, EOFError) as exc:  # broken pipe or reset: the worker is gone
            raise self._died(doing) from exc

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
                data = bytes([STEP_PICKLED]) + _dumps(payload)
            elif indices is None:
                data = STEP_SHARED_MESSAGE
            else:
                data = bytes([STEP_SHARED_PARTIAL]) + _dumps(list(indices))
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

    def _step_reply(self, data: bytes) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Rebuild the stepped envs' infos (SB3's layout) from the reply and the shared arrays."""
        if data == OK_EMPTY_MESSAGE:  # the common step: nothing else to rebuild
            n = len(self.env_indices) if self._step_indices is None else len(self._step_indices)
            return [{_DEFAULT_INFO_KEY: False} for _ in range(n)], self._reset_infos
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
        infos: list[dict[str, Any]] = [{_DEFAULT_INFO_KEY: False} for _ in stepped]
        reset_infos = self._reset_infos
        for pos, info in sparse_infos:
            infos[pos] = info
        assert self._buffers is not None
        dones = self._buffers[2]
        if any_done or (any_done is None and dones.any()):
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
                    info[_DEFAULT_INFO_KEY] = True
                # an info that already holds it got an observation that did not fit the shared array
                if terminal_obs is not None and "terminal_observation" not in info:
                    info["terminal_observation"] = terminal_obs[j, ...].copy()  # 0-d rows stay arrays
        for j, reset_info in sparse_resets:
            reset_infos[j] = reset_info
        return infos

    def _recv_raw(self, doing: Command | str) -> bytes:
        deadline = self._deadline if self._pending is not None else None
        assert self._poller is not None
        ready = self._poller.poll(None if deadline is None else max(0, int((deadline - time.monotonic()) * 1000) + 1))
        if not ready:
            self._pending = None
            pid = self.process.pid
            setting = "reset_timeout" if doing is Command.RESET else "step_timeout"
            timeout = self.reset_timeout if doing is Command.RESET else self.step_timeout
            self.kill(
                f"The worker process {pid} running envs {self.env_indices} was killed by vecenv during "
                f"{_label(doing)}: it did not finish within {setting}={timeout} s. It cannot be used again: create "
                "a new vector env, or set max_restarts to have such workers restarted."
            )
            raise TimeoutError(
                f"envs {self.env_indices} did not finish {_label(doing)} within {timeout} s (step_timeout / "
                f"reset_timeout): their worker process {pid} was killed. Raise the timeout, or set "
                "max_restarts to restart the worker and go on."
            )
        if not any(fd == self._conn_fd for fd, _ in ready):
            # the poll set woke up for the sentinel alone: the worker is gone
            self._pending = None
            raise self._died(doing)
        try:
            return read_message(self._conn_fd)
        except (EOFError, OSError) as exc:
            self._pending = None
            raise self._died(doing) from exc

    def _died(self, doing: Command | str) -> WorkerDiedError:
        """The error for a worker found dead while ``doing`` (a command, or a phase such as ``"setup"``); every
        later call raises it again (see :meth:`kill`)."""
        self.process.join(timeout=1.0)
        method = self._ctx.get_start_method()
        script = _script_without_main_guard() if doing == "env construction" and method != "fork" else None
        if script is not None and self.process.exitcode == 1:
            # it ended before vecenv's worker code ran: most often it re-ran the caller's script and failed there
            message = (
                f"The worker process {self.process.pid} running envs {self.env_indices} exited with code 1 while "
                f"starting, most likely because the script {script} has no `if __name__ == \"__main__\":` guard. "
                f"With the {method} start method every worker process imports the main script, so code at its top "
                "level (building the vector env) runs again in the worker and fails. Move that code under "
                "`if __name__ == \"__main__\":` (or use start_method=\"fork\"); the worker's own error is printed "
                "above on stderr."
            )
        else:
            message = (
                f"The worker process {self.process.pid} running envs {self.env_indices} "
                f"{_describe_exit(self.process.exitcode)} during {_label(doing)}. If an env crashes the interpreter "
                "(native code, os._exit), run it under DummyVecEnv to see the error directly."
            )
        self.kill(message)
        return WorkerDiedError(message)

    # --- restarts -------------------------------------------------------------------------------

    def kill(self, reason: str | None = None) -> None:
        """End the worker process at once (SIGKILL) and release its pipes; the handle can :meth:`restart`.

        The pipes' descriptors are closed and forgotten (their numbers may belong to the caller's files next),
        and every later :meth:`send` / :meth:`recv` raises :class:`~vecenv.errors.WorkerDiedError` with
        ``reason`` (a message saying what happened to the worker).
        """
        if self.process.is_alive():
            self.process.kill()
        self.process.join(timeout=5.0)
        self._close_conns()
        self._pending = None
        self._partial = None
        if self._lost is None:
            self._lost = reason or (
                f"The worker process {self.process.pid} running envs {self.env_indices} was killed by vecenv "
                "and cannot be used again."
            )

    def _close_conns(self) -> None:
        for conn in (self._send_conn, self.conn, self._fd_conn):
            conn.close()
        self._conn_fd = self._send_fd = -1
        self._poller = None

    def restart(
        self, seeds: Sequence[int | None] | None = None, options: Sequence[dict[str, Any] | None] | None = None
    ) -> list[dict[str, Any]]:
        """Replace a dead (or killed) worker process: rebuild its envs from their factories, map the shared
        block again and reset every env, env ``j`` with ``seeds[j]`` / ``options[j]`` if given. The envs' first
        observations are in the buffers.

        :return: the reset infos of the group.
        :raises Exception: whatever building, setting up or resetting the new worker raised.
        """
        self.kill()
        with contextlib.suppress(ValueError):  # release the old Process object's sentinel pipe
            self.process.close()
        self._start_process()
        self._lost = None
        self.handshake()
        if self._shared is not None:
            self.setup_shared(*self._shared)
        n = len(self.env_indices)
        seeds_list, options_list = list(seeds or [None] * n), [o or {} for o in (options or [None] * n)]
        self.send(Command.RESET, (seeds_list, options_list, None, self._gymnasium_resets))
        reset_infos: list[dict[str, Any]] = self.recv()
        return reset_infos

    # --- shutdown -------------------------------------------------------------------------------

    def shutdown_begin(self) -> None:
        if not self.process.is_alive():
            return
        self._stale_replies = 0
        if self._pending is not None:
            # collect the outstanding reply so the worker is free to read CLOSE; if it is still busy, its
            # late reply will arrive before the CLOSE reply and must be skipped (shutdown_end)
            try:
                if self.conn.poll(1.0):
                    self.conn.recv_bytes()
                else:
                    self._stale_replies = 1
            except (EOFError, OSError):
                pass
            self._pending = None
        try:
            self._send_conn.send_bytes(bytes([CALL]) + cloudpickle.dumps((Command.CLOSE, None)))
            self._pending = Command.CLOSE
        except OSError:
            pass

    def shutdown_end(self, deadline: float) -> BaseException | None:
        error: BaseException | None = None
        if self._pending is Command.CLOSE:
            try:
                for _ in range(self._stale_replies):  # an abandoned step's late reply
                    if self.conn.poll(max(0.0, deadline - time.monotonic())):
                        self.conn.recv_bytes()
                if self.conn.poll(max(0.0, deadline - time.monotonic())):
                    self._reply(self.conn.recv_bytes())
            except (EOFError, OSError):
                pass
            except Exception as exc:  # an env's close() raised
                error = exc
            self._pending = None
        process = self.process
        process.join(timeout=max(0.0, deadline - time.monotonic()))
        if process.is_alive():
            process.terminate()
            process.join(timeout=1.0)
        if process.is_alive():  # pragma: no cover - only for workers that ignore SIGTERM
            process.kill()
            process.join()
        self._close_conns()
        # drop every view of the shared block so closing the vec env unmaps it
        self._buffers = None
        self._terminal_obs = None
        if self._shared is not None:
            self._shared[1].close()
            self._shared = None
        return error
