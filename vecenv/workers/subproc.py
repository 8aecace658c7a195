"""Worker processes for :class:`~vecenv.SubprocVecEnv`: the worker loop and the parent-side handle.

Protocol: the parent sends ``(command, payload)``; the worker always answers ``(ok, payload)``. On
``ok=False`` the payload is a :class:`~vecenv.errors.PackedException` that the parent re-raises with
the env's own type, a note naming the env index and the remote traceback chained as cause.
The parent never blocks on a pipe without also watching the worker's process sentinel, so a dead
worker is an error, not a hang.
"""

from __future__ import annotations

import os
import select
import signal
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection, wait
from typing import Any

import gymnasium as gym

from vecenv.base import CloudpickleWrapper
from vecenv.errors import PackedException, WorkerDiedError
from vecenv.protocol import Command
from vecenv.spaces import batch_assign
from vecenv.workers.base import Worker

_BUFFER_COMMANDS = (Command.STEP, Command.RESET)


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


def worker_main(
    conn: Connection,
    parent_conn: Connection | None,
    env_fns: CloudpickleWrapper,
    env_indices: list[int],
) -> None:
    """Entry point of a worker process: build the :class:`EnvGroup`, then serve commands until CLOSE or EOF."""
    from vecenv.env_group import EnvGroup

    # Ctrl-C is the parent's business: it shuts the workers down cleanly.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if parent_conn is not None:
        parent_conn.close()
    _exit_when_parent_dies()
    try:
        group = EnvGroup(env_fns.var, env_indices)
    except BaseException as exc:
        conn.send((False, PackedException(exc, traceback.format_exc())))
        conn.close()
        return
    conn.send((True, (group.observation_space, group.action_space)))
    handlers = group.handlers
    while True:
        try:
            command, payload = conn.recv()
        except (EOFError, OSError):
            break
        try:
            if command in _BUFFER_COMMANDS:
                conn.send((True, (group.obs, group.rewards, group.dones, handlers[command](payload))))
            else:
                conn.send((True, CloudpickleWrapper(handlers[command](payload.var))))
        except Exception as exc:
            conn.send((False, PackedException(exc, traceback.format_exc())))
        if command == Command.CLOSE:
            break
    conn.close()


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
    :param env_indices: their global indices.
    """

    def __init__(self, ctx: Any, env_fns: Sequence[Callable[[], gym.Env]], env_indices: Sequence[int]) -> None:
        super().__init__(env_indices)
        self.conn, child_conn = ctx.Pipe()
        self.process = ctx.Process(
            target=worker_main,
            args=(child_conn, self.conn, CloudpickleWrapper(list(env_fns)), self.env_indices),
            daemon=True,  # if the parent exits without closing, multiprocessing terminates the worker
            name=f"vecenv-worker-{self.env_indices[0]}",
        )
        self.process.start()
        child_conn.close()
        # one prebuilt poll set per worker: waiting costs a single poll(2) call, and a dead worker
        # (its sentinel becomes readable) is noticed even if it never writes to the pipe
        self._conn_fd = self.conn.fileno()
        self._poller = select.poll()
        self._poller.register(self._conn_fd, select.POLLIN)
        self._poller.register(self.process.sentinel, select.POLLIN)
        self._pending: Command | None = None
        self._buffers: tuple[Any, Any, Any] | None = None

    def handshake(self) -> tuple[gym.Space, gym.Space]:
        """Wait for the worker to build its envs; return ``(observation_space, action_space)``."""
        self._pending = Command.RESET  # any non-None marker: a reply is expected
        ok, payload = self._recv_raw("env construction")
        self._pending = None
        if not ok:
            raise payload.rebuild(self._where())
        return payload

    def attach(self, obs_buffer: Any, rewards: Any, dones: Any) -> None:
        self._buffers = (obs_buffer, rewards, dones)

    def _where(self) -> str:
        return f"worker process {self.process.pid} (envs {self.env_indices})"

    def send(self, command: Command, payload: Any) -> None:
        if self._pending is not None:
            # a reply was never collected (e.g. KeyboardInterrupt in the middle of a step): drop it
            try:
                self.recv()
            except WorkerDiedError:
                raise
            except Exception:
                pass
        if command not in _BUFFER_COMMANDS:
            payload = CloudpickleWrapper(payload)
        try:
            self.conn.send((int(command), payload))
        except (BrokenPipeError, ConnectionResetError, EOFError) as exc:
            raise self._died(command.label) from exc
        self._pending = command

    def recv(self) -> Any:
        command = self._pending
        assert command is not None, "recv() without send()"
        ok, payload = self._recv_raw(command.label)
        self._pending = None
        if not ok:
            raise payload.rebuild(self._where())
        if command in _BUFFER_COMMANDS:
            assert self._buffers is not None, "attach() must be called before stepping"
            obs, rewards, dones, result = payload
            obs_view, rewards_view, dones_view = self._buffers
            batch_assign(obs_view, obs)
            rewards_view[:] = rewards
            dones_view[:] = dones
            return result
        return payload.var

    def _recv_raw(self, doing: str) -> Any:
        conn = self.conn
        if not any(fd == self._conn_fd for fd, _ in self._poller.poll()):
            # the poll set woke up for the sentinel alone: the worker is gone
            self._pending = None
            raise self._died(doing)
        try:
            return conn.recv()
        except (EOFError, OSError) as exc:
            self._pending = None
            raise self._died(doing) from exc

    def _died(self, doing: str) -> WorkerDiedError:
        self.process.join(timeout=1.0)
        return WorkerDiedError(
            f"The worker process {self.process.pid} running envs {self.env_indices} "
            f"{_describe_exit(self.process.exitcode)} during {doing}. If an env crashes the interpreter "
            "(native code, os._exit), run it under DummyVecEnv to see the error directly."
        )

    # --- shutdown -------------------------------------------------------------------------------

    def shutdown_begin(self) -> None:
        if not self.process.is_alive():
            return
        if self._pending is not None:
            # collect the outstanding reply so the worker is free to read CLOSE
            try:
                if self.conn.poll(1.0):
                    self.conn.recv()
            except (EOFError, OSError):
                pass
            self._pending = None
        try:
            self.conn.send((int(Command.CLOSE), CloudpickleWrapper(None)))
            self._pending = Command.CLOSE
        except OSError:
            pass

    def shutdown_end(self, deadline: float) -> BaseException | None:
        error: BaseException | None = None
        if self._pending is Command.CLOSE:
            try:
                if self.conn.poll(max(0.0, deadline - time.monotonic())):
                    ok, payload = self.conn.recv()
                    if not ok:
                        error = payload.rebuild(self._where())
            except (EOFError, OSError):
                pass
            self._pending = None
        process = self.process
        process.join(timeout=max(0.0, deadline - time.monotonic()))
        if process.is_alive():
            process.terminate()
            process.join(timeout=1.0)
        if process.is_alive():  # pragma: no cover - only for workers that ignore SIGTERM
            process.kill()
            process.join()
        self.conn.close()
        return error
