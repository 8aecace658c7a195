"""Worker processes for :class:`~vecenv.SubprocVecEnv`: the worker loop and the parent-side handle.

Each worker process owns a group of envs (an :class:`~vecenv.env_group.EnvGroup`). Observations,
rewards, dones and actions live in a :class:`~vecenv.shared_memory.SharedBatch` that both sides map;
the group writes its rows in place, so a step costs one small message each way per worker.

Channels: requests travel through one one-way pipe, replies through another (waking a process blocked on a
pipe is cheaper than on the Unix socket a duplex ``multiprocessing.Pipe()`` is; measurements in
docs/performance.md); a socket pair serves once, to pass the shared block's file descriptor.
Messages use ``multiprocessing.Connection``'s framing (:mod:`vecenv.workers.pipes`); the worker process's
side is :mod:`vecenv.workers.worker_process`.

The messages (what each request and reply holds) are defined in :mod:`vecenv.workers.messages`.

The parent never blocks on a pipe without also watching the worker's process sentinel, so a dead
worker is an error, not a hang.

With a :class:`~vecenv.workers.spin.Spinner` (SubprocVecEnv's ``wait_mode``), each side bumps a counter in the
shared block right after writing a message to the pipe, and the other side spins on that counter for a while
before it blocks as above (the calling process for STEP replies, the worker for every request): once the counter
moved, the message is in the pipe and reading it never blocks.
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import os
import select
import sys
import threading
import time
from collections.abc import Callable, Sequence
from multiprocessing import reduction
from time import perf_counter
from typing import Any

import cloudpickle
import gymnasium as gym
from gymnasium.vector import AutoresetMode

from vecenv.base import EnvFactories
from vecenv.errors import WorkerDiedError
from vecenv.interrupts import GUARD
from vecenv.protocol import Command
from vecenv.shared_memory import SharedBatch, SharedFd
from vecenv.spaces import batch_slice, make_row_reader
from vecenv.workers.base import Worker
from vecenv.workers.common_step import CommonStep
from vecenv.workers.messages import (
    CALL,
    STEP_SHARED_MESSAGE,
    MessageWorker,
    label,
)
from vecenv.workers.pipes import (
    STEP_SHARED_FRAME,
    frame,
    read_message,
    without_sigpipe,
    write_message,
)
from vecenv.workers.process_exits import (
    DEBUG_ENV_VAR,
    EXIT_MAIN_REIMPORTED,
    describe_exit,
    exit_if_importing_main,
    note_daemonic_parent,
    script_without_main_guard,
)
from vecenv.workers.spin import REPLIES, REQUESTS, Spinner
from vecenv.workers.worker_process import WorkerLoop, worker_main

#: vecenv's own worker processes being started now: their forks inherit the caller's observation batches but never
#: read them, so the observation slots held then stay in use (``vecenv.engine.core``)
OWN_STARTS = [0]

__all__ = ["OWN_STARTS", "SubprocWorker", "WorkerLoop", "frame", "read_message", "worker_main", "write_message"]


_POLLIN = select.POLLIN


class SubprocWorker(MessageWorker):
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
        super().__init__(env_indices, autoreset_mode)
        self._ctx = ctx
        self._env_fns = EnvFactories(env_fns)
        #: kept for :meth:`restart`: the shared block (fd stays open until shutdown) and its arguments
        self._shared: tuple[SharedBatch, SharedFd, bool] | None = None
        #: how this side waits for STEP replies (None: it blocks; see :meth:`use_spinner`), and how the worker
        #: process waits for requests (``(limit, adaptive)`` of its Spinner; None: it blocks)
        self._spinner: Spinner | None = None
        self._worker_spin: tuple[float, bool] | None = None
        #: while spinning: this worker's row of the shared signals, and the requests written since SETUP
        self._signals: Any = None
        self._requests = 0
        #: while a restarted process builds its envs and maps the shared block: when that wait gives up
        #: (monotonic seconds, from ``reset_timeout``; None: never)
        self._start_deadline: float | None = None
        #: the pipes are closed by whichever thread gets there first (a step that sees the worker end while another
        #: thread closes the vector env): one at a time, so no descriptor is closed twice
        self._closing = threading.Lock()
        self._start_process()
        # late replies of an abandoned request that shutdown must skip before the CLOSE reply
        self._stale_replies = 0

    def _start_process(self) -> None:
        exit_if_importing_main()
        ctx = self._ctx
        # requests and replies travel through two one-way pipes (waking a process blocked on a pipe is cheaper
        # than on the Unix socket of a duplex Pipe(): docs/performance.md); a socket pair passes the shared
        # block's file descriptor (SCM_RIGHTS) once
        child_in, self._send_conn = ctx.Pipe(duplex=False)
        self.conn, child_out = ctx.Pipe(duplex=False)
        self._fd_conn, child_fd = ctx.Pipe()
        child_conns = (child_in, child_out, child_fd)
        # under fork, the child starts with the garbage collector off, so that it collects nothing it inherited
        # before worker_main freezes it (see there); worker_main turns it back on
        collecting = ctx.get_start_method() == "fork" and gc.isenabled()
        self.process = ctx.Process(
            target=worker_main,
            args=(
                child_conns,
                (self._send_conn, self.conn, self._fd_conn),
                self._env_fns,
                self.env_indices,
                self.autoreset_mode.value,
                collecting,
            ),
            daemon=True,  # if the parent exits without closing, multiprocessing terminates the worker
            name=f"vecenv-worker-{self.env_indices[0]}",
        )
        if collecting:
            gc.disable()
        OWN_STARTS[0] += 1  # (its fork need not retire the observation slots the caller holds)
        try:
            self.process.start()
        except AssertionError as exc:  # multiprocessing's "daemonic processes are not allowed to have children"
            note_daemonic_parent(exc)
            raise
        finally:
            OWN_STARTS[0] -= 1
            if collecting:
                gc.enable()
        for conn in child_conns:
            conn.close()
        # one prebuilt poll set per worker: waiting costs a single poll(2) call, and a dead worker
        # (its sentinel becomes readable) is noticed even if it never writes to the pipe
        self._conn_fd = self.conn.fileno()
        self._send_fd = self._send_conn.fileno()
        self._sentinel = self.process.sentinel
        CommonStep.forget_descriptors()
        self._poller: Any = select.poll()
        self._poller.register(self._conn_fd, select.POLLIN)
        self._poller.register(self._sentinel, select.POLLIN)
        #: a poll over several workers (:meth:`wait_any`) saw this worker's reply in the pipe, not read yet:
        #: :meth:`_recv_raw` reads it without polling again (only :meth:`_recv_raw` reads the pipe)
        self._reply_seen = False
        #: a reply read from the pipe by :class:`~vecenv.workers.common_step.CommonStep` and handed back
        #: (:meth:`hand_back`): :meth:`_recv_raw` returns it without reading the pipe
        self._unread: bytes | None = None

    def handshake(self) -> tuple[gym.Space, gym.Space]:
        """Wait for the worker to build its envs; return ``(observation_space, action_space)``."""
        try:
            raw = self._recv_raw("env construction")
        except WorkerDiedError as exc:
            if self.process.exitcode != EXIT_MAIN_REIMPORTED:
                raise
            # the advice comes first on stderr, before the caller's traceback (which ends with it again)
            print(f"vecenv: {exc}", file=sys.stderr, flush=True)
            raise exc from None
        spaces: tuple[gym.Space, gym.Space] = self._reply(raw)
        return spaces

    def use_spinner(self, spinner: Spinner | None, worker_spin: tuple[float, bool] | None) -> None:
        """From :meth:`setup_shared` on: spin as ``spinner`` says (shared by the vector env's workers) while
        waiting for STEP replies (None: block), and have the worker process wait for its requests as a
        ``Spinner(*worker_spin)`` (None: block)."""
        self._spinner = None if spinner is None or spinner.limit <= 0 else spinner
        self._worker_spin = None if worker_spin is None or worker_spin[0] <= 0 else worker_spin

    @property
    def signals(self) -> Any:
        """This worker's row of the shared signals (:mod:`vecenv.workers.spin`), once :meth:`setup_shared` has
        mapped it for a spinning side; else None."""
        return self._signals

    def setup_shared(self, shared: SharedBatch, fd: SharedFd, obs_in_shm: bool) -> None:
        """Send the shared batch's fd; from now on the worker writes its rows of ``shared`` in place."""
        self._shared = (shared, fd, obs_in_shm)
        start, stop = self.env_indices[0], self.env_indices[-1] + 1
        spin = self._worker_spin
        if spin is not None or self._spinner is not None:
            row = shared.signals[start]
            row[:] = 0  # a restarted worker counts from zero again (its predecessor is dead)
            self._signals, self._requests = memoryview(row), 0
        slots = len(shared.obs_slots)
        arg = (shared.size, shared.num_envs, start, stop, obs_in_shm, shared.rewards.dtype.str, spin, slots)
        self._send_bytes(bytes([CALL]) + cloudpickle.dumps((Command.SETUP, arg)), "setup")
        try:
            without_sigpipe(lambda: reduction.send_handle(self._fd_conn, fd.fd, self.process.pid))
        except OSError as exc:
            raise self._died("setup") from exc
        finally:
            self._fd_conn.close()
        self._reply(self._recv_raw("setup"))
        self.reads_shared_actions = shared.actions is not None
        if obs_in_shm and shared.terminal_obs is not None:
            self._terminal_row = make_row_reader(batch_slice(shared.terminal_obs, start, stop))

    def reply_ready(self) -> bool:
        if self._lost is not None or self._poller is None or self._unread is not None:
            return True
        return bool(self._poller.poll(0))

    def has_ended(self) -> bool:
        return self._lost is not None or not self.process.is_alive()

    @classmethod
    def wait_any(cls, workers: Sequence[Worker], timeout: float | None) -> list[int]:
        """One ``poll(2)`` over every worker's reply pipe and process sentinel (a worker that died is ready);
        for STEP replies with a spinner, a spin on the workers' reply counters first."""
        spinner = cls._spinner_for(workers) if workers[0]._spinner is not None else None  # type: ignore[attr-defined]
        if spinner is None:
            return cls._poll_any(workers, timeout)
        started = perf_counter()
        watched = [(worker._signals, worker._requests) for worker in workers]  # type: ignore[attr-defined]
        waiting = GUARD.wait_begin()  # (a wait: Ctrl-C is raised here at once, nothing half done)
        try:
            ready = spinner.spin_any(watched, REPLIES, spinner.budget(timeout))
        finally:
            GUARD.wait_end(waiting)
        if not ready:
            ready = cls._poll_any(workers, None if timeout is None else max(0.0, timeout - (perf_counter() - started)))
        spinner.observe(perf_counter() - started)
        return ready

    @classmethod
    def common_step(cls, workers: Sequence[Worker]) -> CommonStep:
        """Every request written in one loop; one poll set over every worker's pipe and sentinel, and each reply
        decoded as it arrives (:class:`~vecenv.workers.common_step.CommonStep`)."""
        return CommonStep([worker for worker in workers if isinstance(worker, SubprocWorker)])

    @staticmethod
    def _spinner_for(workers: Sequence[Worker]) -> Spinner | None:
        """The spinner to wait for ``workers`` with: the one they share when each is waiting for a STEP reply and
        none is lost, else None (block)."""
        first = workers[0]
        assert isinstance(first, SubprocWorker)
        spinner = first._spinner
        if spinner is None:
            return None
        for worker in workers:
            assert isinstance(worker, SubprocWorker)
            if worker._signals is None or worker._lost is not None or worker._pending is not Command.STEP:
                return None
        return spinner

    @classmethod
    def _poll_any(cls, workers: Sequence[Worker], timeout: float | None) -> list[int]:
        poller = select.poll()
        owner: dict[int, int] = {}
        ready: set[int] = set()
        for k, worker in enumerate(workers):
            assert isinstance(worker, SubprocWorker)
            if worker._lost is not None or worker._poller is None or worker._unread is not None:
                ready.add(k)  # killed or found dead (recv() raises at once), or its reply handed back
                continue
            conn_fd = worker._conn_fd
            poller.register(conn_fd, _POLLIN)
            poller.register(worker._sentinel, _POLLIN)
            owner[conn_fd] = owner[worker._sentinel] = k
        if ready:
            return sorted(ready)
        wait_ms = None if timeout is None else max(0, int(timeout * 1000) + 1)
        waiting = GUARD.wait_begin()
        try:
            events = poller.poll(wait_ms)
        finally:
            GUARD.wait_end(waiting)
        for fd, event in events:
            worker = workers[owner[fd]]
            if event & _POLLIN and fd == worker._conn_fd:  # type: ignore[attr-defined]
                worker._reply_seen = True  # type: ignore[attr-defined]
        return sorted({owner[fd] for fd, _ in events})

    @property
    def location(self) -> str:
        return f"worker process {self.process.pid}"

    def _where(self) -> str:
        return f"{self.location} (envs {self.env_indices})"

    def _send_bytes(self, data: bytes, doing: Command | str) -> None:
        self._reply_seen = False
        try:
            without_sigpipe(lambda: self._write(data))  # (where a write to a dead worker's pipe would end the process)
        except (OSError, EOFError) as exc:  # broken pipe or reset: the worker is gone
            raise self._died(doing) from exc
        if self._signals is not None:
            self._count_request()

    def _write(self, data: bytes) -> None:
        if data is STEP_SHARED_MESSAGE:
            os.write(self._send_fd, STEP_SHARED_FRAME)
        else:
            write_message(self._send_fd, data)

    def _count_request(self) -> None:
        """A request is in the pipe: tell a worker that spins for it."""
        signals = self._signals
        if signals is not None:
            self._requests += 1
            signals[REQUESTS] = self._requests

    def hand_back(self, data: bytes) -> None:
        """Give back the pending request's reply, read from the pipe by
        :class:`~vecenv.workers.common_step.CommonStep`: :meth:`recv` takes it as if it came now."""
        self._unread = data

    def _recv_raw(self, doing: Command | str) -> bytes:
        if self._unread is not None:
            data, self._unread = self._unread, None
            return data
        deadline = self._deadline if self._pending is not None else self._start_deadline
        spinner, signals = self._spinner, self._signals
        if spinner is not None and signals is not None and doing is Command.STEP:
            if signals[REPLIES] < self._requests:  # (else wait_any saw it come: not a wait of its own)
                started = perf_counter()
                timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
                waiting = GUARD.wait_begin()
                try:
                    arrived = spinner.spin(signals, REPLIES, self._requests, spinner.budget(timeout))
                finally:
                    GUARD.wait_end(waiting)
                if not arrived:
                    self._poll_reply(doing, deadline)
                spinner.observe(perf_counter() - started)
        elif self._reply_seen:  # wait_any saw it in the pipe: no second poll(2)
            self._reply_seen = False
        else:
            self._poll_reply(doing, deadline)
        try:
            return read_message(self._conn_fd)
        except (EOFError, OSError) as exc:
            self._pending = None
            raise self._died(doing) from exc

    def _poll_reply(self, doing: Command | str, deadline: float | None) -> None:
        """Block until the reply is in the pipe; kill the worker and raise if ``deadline`` passes or it died."""
        assert self._poller is not None
        waiting = GUARD.wait_begin()  # (a wait: Ctrl-C is raised here at once, nothing half done)
        try:
            ready = self._poller.poll(
                None if deadline is None else max(0, int((deadline - time.monotonic()) * 1000) + 1)
            )
        finally:
            GUARD.wait_end(waiting)
        if not ready:
            self._pending = None
            pid = self.process.pid
            # (a restart's env construction and setup are bounded by reset_timeout, as its reset is)
            setting = "step_timeout" if doing is Command.STEP else "reset_timeout"
            timeout = self.step_timeout if doing is Command.STEP else self.reset_timeout
            self.kill(
                f"The worker process {pid} running envs {self.env_indices} was killed by vecenv during "
                f"{label(doing)}: it did not finish within {setting}={timeout} s. It cannot be used again: create "
                "a new vector env, or set max_restarts to have such workers restarted."
            )
            advice = (
                "Raise reset_timeout, which bounds building a restarted worker's envs too."
                if doing in ("env construction", "setup")
                else "Raise the timeout, or set max_restarts to restart the worker and go on."
            )
            raise TimeoutError(
                f"envs {self.env_indices} did not finish {label(doing)} within {timeout} s ({setting}): their "
                f"worker process {pid} was killed. {advice}"
            )
        if not any(fd == self._conn_fd for fd, _ in ready):
            # the poll set woke up for the sentinel alone: the worker is gone
            self._pending = None
            raise self._died(doing)

    def _died(self, doing: Command | str) -> WorkerDiedError:
        """The error for a worker found dead while ``doing`` (a command, or a phase such as ``"setup"``); every
        later call raises it again (see :meth:`kill`)."""
        self.process.join(timeout=1.0)
        method = self._ctx.get_start_method()
        script = script_without_main_guard() if doing == "env construction" and method != "fork" else None
        if doing == "env construction" and self.process.exitcode == EXIT_MAIN_REIMPORTED:
            # the worker found itself importing the main script, which tried to start workers again
            main = getattr(sys.modules.get("__main__"), "__file__", None)
            message = (
                f'The script {main or "(the main module)"} has no `if __name__ == "__main__":` guard. With the '
                f"{method} start method each worker process imports the main script first, so its top-level code "
                f"ran again in worker process {self.process.pid} and tried to build the vector env there (vecenv "
                "ended that worker). Move the code that builds and uses the vector env under "
                '`if __name__ == "__main__":` (or use start_method="fork"). '
                f"{DEBUG_ENV_VAR}=1 shows multiprocessing's own error in each worker."
            )
        elif script is not None and self.process.exitcode == 1:
            # it ended before vecenv's worker code ran: most often it re-ran the caller's script and failed there
            message = (
                f"The worker process {self.process.pid} running envs {self.env_indices} exited with code 1 while "
                f'starting, most likely because the script {script} has no `if __name__ == "__main__":` guard. '
                f"With the {method} start method every worker process imports the main script, so code at its top "
                "level (building the vector env) runs again in the worker and fails. Move that code under "
                '`if __name__ == "__main__":` (or use start_method="fork"); the worker\'s own error is printed '
                "above on stderr."
            )
        else:
            message = (
                f"The worker process {self.process.pid} running envs {self.env_indices} "
                f"{describe_exit(self.process.exitcode, self.process.pid)} during {label(doing)}. If an env "
                "crashes the interpreter (native code, os._exit), run it under DummyVecEnv to see the error directly."
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
        with self._closing:
            for conn in (self._send_conn, self.conn, self._fd_conn):
                conn.close()
        self._conn_fd = self._send_fd = -1
        CommonStep.forget_descriptors()
        self._poller = None
        self._reply_seen = False
        self._unread = None
        self._signals = None  # (setup_shared maps them again for a restarted worker)

    def restart(
        self, seeds: Sequence[int | None] | None = None, options: Sequence[dict[str, Any] | None] | None = None
    ) -> list[dict[str, Any]]:
        """Replace a dead (or killed) worker process: rebuild its envs from their factories, map the shared
        block again and reset every env, env ``j`` with ``seeds[j]`` / ``options[j]`` if given. The envs' first
        observations are in the buffers. Building the envs and mapping the block are bounded by
        :attr:`reset_timeout`, and so is the reset.

        :return: the reset infos of the group.
        :raises BaseException: whatever building, setting up or resetting the new worker raised (a
            :class:`TimeoutError` past ``reset_timeout``, a Ctrl-C). The new process is then ended and the worker
            stays dead: every later call raises :class:`~vecenv.errors.WorkerDiedError` naming that error, and
            another restart may replace it.
        """
        self.kill()
        with contextlib.suppress(ValueError):  # release the old Process object's sentinel pipe
            self.process.close()
        self._start_process()
        self._lost = None
        stage = "env construction"
        self._start_deadline = None if self.reset_timeout is None else time.monotonic() + self.reset_timeout
        try:
            self.handshake()
            stage = "setup"
            if self._shared is not None:
                self.setup_shared(*self._shared)
            stage = "reset"
            return self._reset_after_restart(seeds, options)
        except BaseException as exc:  # (its envs may be built and not reset, or a reply may be left unread)
            self._end_failed_restart(stage, exc)
            raise
        finally:
            self._start_deadline = None

    # --- shutdown -------------------------------------------------------------------------------

    def forget_after_fork(self) -> None:
        # multiprocessing lists it among this process's children: its exit handler would SIGTERM it
        multiprocessing.process._children.discard(self.process)  # type: ignore[attr-defined]

    def shutdown_begin(self) -> None:
        if not self.process.is_alive():
            return
        # a request still in flight (an abandoned step) is answered before CLOSE is read: shutdown_end skips that
        # late reply; nothing is waited for here, so every worker is asked to close before any is waited for
        self._stale_replies = 0 if self._pending is None or self._unread is not None else 1
        self._pending = None
        request = bytes([CALL]) + cloudpickle.dumps((Command.CLOSE, None))
        try:
            without_sigpipe(lambda: self._send_conn.send_bytes(request))
            self._pending = Command.CLOSE
        except OSError:  # the worker is gone
            pass
        else:
            self._count_request()

    def shutdown_end(self, deadline: float) -> BaseException | None:
        reply = self._close_reply(deadline) if self._pending is Command.CLOSE else None
        self._pending = None
        process = self.process
        process.join(timeout=max(0.0, deadline - time.monotonic()))
        if process.is_alive():
            process.terminate()  # waited for by shutdown_finish, with the other workers'
        if reply is None:
            return None
        try:
            self._reply(reply)
        except Exception as exc:  # an env's close() raised (rebuilt with its type, OSError included)
            return exc
        return None

    def _close_reply(self, deadline: float) -> bytes | None:
        """The worker's reply to CLOSE, past an abandoned request's late reply, if it comes by ``deadline``."""
        conn = self.conn
        try:
            for _ in range(self._stale_replies):
                if conn.poll(max(0.0, deadline - time.monotonic())):
                    conn.recv_bytes()
            if conn.poll(max(0.0, deadline - time.monotonic())):
                return conn.recv_bytes()
        except (EOFError, OSError):  # the pipe broke: the worker is gone (an env's error is in a reply, not here)
            pass
        return None

    def shutdown_finish(self, deadline: float) -> None:
        process = self.process
        if process.is_alive():
            process.join(timeout=max(0.0, deadline - time.monotonic()))
        if process.is_alive():  # it ignored SIGTERM
            process.kill()
            process.join()
        self._close_conns()
        # drop every view of the shared block so closing the vec env unmaps it
        self._buffers = None
        self._terminal_row = None
        if self._shared is not None:
            self._shared[1].close()
            self._shared = None
