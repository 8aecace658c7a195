"""The worker process's side of :class:`~vecenv.workers.subproc.SubprocWorker`: :func:`worker_main` builds the
group of envs and serves the parent's requests (:class:`WorkerLoop`) until CLOSE or the end of the pipe, writing
the group's rows of the shared batch in place; a daemon thread ends the process when its parent is gone."""

from __future__ import annotations

import errno
import gc
import os
import signal
import threading
from multiprocessing import reduction
from multiprocessing.connection import Connection, wait
from time import perf_counter
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode

from vecenv.actions import split_actions
from vecenv.base import EnvFactories
from vecenv.protocol import Command
from vecenv.shared_memory import SharedBatch, block_error
from vecenv.spaces import batch_copy, batch_slice
from vecenv.workers.group_server import GroupServer, build_group
from vecenv.workers.pipes import read_message, write_message
from vecenv.workers.spin import REPLIES, REQUESTS, SPIN_PAUSED, Spinner

__all__ = ["WorkerLoop", "worker_main"]


def _exit_when_parent_dies() -> None:
    """Start a daemon thread that ends this worker as soon as its parent process is gone.

    It waits on multiprocessing's sentinel of the parent (the end of a pipe whose other end the parent holds) and,
    on Linux, on a pidfd of the parent (``pidfd_open``): a process the parent forks later holds a copy of that
    pipe's end too, so the sentinel alone would wait for that process as well (a forked helper, a data loader's
    worker), and the worker would outlive a parent killed with SIGKILL.
    """
    import multiprocessing

    parent = multiprocessing.parent_process()
    if parent is None or parent.sentinel is None:  # pragma: no cover - always set for our workers
        return
    watched: list[Any] = [parent.sentinel]
    if hasattr(os, "pidfd_open") and parent.pid is not None:
        try:
            watched.append(os.pidfd_open(parent.pid))
        except OSError:  # no such process (the parent is gone already), or no pidfd in this kernel
            if not _alive(parent.pid):
                os._exit(0)

    def watch() -> None:
        wait(watched)
        os._exit(0)

    threading.Thread(target=watch, name="vecenv-parent-watch", daemon=True).start()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - another user's process now has that pid
        return False
    return True


class WorkerLoop(GroupServer):
    """The worker process's side: serves requests for one :class:`EnvGroup` until CLOSE or the pipe closes, with
    the group's rows of the shared batch mapped by SETUP."""

    def __init__(self, conn_in: Connection, conn_out: Connection, fd_conn: Connection, group: Any) -> None:
        super().__init__(group)
        self.conn_in, self.conn_out, self.fd_conn = conn_in, conn_out, fd_conn
        self.shared: SharedBatch | None = None
        self.action_view: Any = None
        self._action_space = group.action_space
        self._n_local = len(group)
        #: with spinning (SETUP says): this worker's row of the shared signals, the requests read and the replies
        #: written since SETUP (SETUP's included), and how this side spins
        self._signals: Any = None
        self._requests_read = self._replies_written = 0
        self._spinner: Spinner | None = None
        #: with observation slots (SETUP says): this worker's rows of each slot, the shared cell that names the
        #: slot to write, and the slot the group writes now
        self._slot_rows: list[Any] = []
        self._slot_cell: Any = None
        self._slot = 0

    def setup(self, arg: tuple[Any, ...]) -> None:
        """Map the shared batch (its fd follows this message) and write the group's rows there from now on;
        with a spin setting ``(limit, adaptive)``, wait for requests as a :class:`Spinner` says."""
        size, num_envs, start, stop, obs_in_shm, rewards_dtype, spin, obs_slots = arg
        fd = reduction.recv_handle(self.fd_conn)
        self.fd_conn.close()  # one block per worker process: the socket has done its job
        try:
            group = self.group
            self.shared = shared = SharedBatch.attach(
                group.observation_space, group.action_space, num_envs, fd, size, rewards_dtype, obs_slots
            )
        except OSError as exc:
            if exc.errno not in (errno.ENOMEM, errno.ENOSPC):
                raise
            raise block_error(exc, size, num_envs, obs_slots) from exc
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
            if obs_slots > 1:  # the calling process says which slot each request writes (vecenv.engine.obs_slots)
                self._slot_rows = [batch_slice(slot, start, stop) for slot in shared.obs_slots]
                self._slot_cell = shared.obs_slot.data  # (a memoryview: reads are cheap)
                self._slot = 0
            if shared.terminal_obs is not None:
                group.terminal_obs = batch_slice(shared.terminal_obs, start, stop)
        if shared.actions is not None:
            self.action_view = batch_slice(shared.actions, start, stop)
        if spin is not None:
            self._spinner = Spinner(*spin)
            self._signals = memoryview(shared.signals[start])
            self._requests_read, self._replies_written = 1, 0  # SETUP is the first request counted
        self._restart_accounts()  # the accounts of vecenv.stats start with the first request after SETUP

    def accounts(self, restart: bool) -> dict[str, Any]:
        """The group's and the server's accounts (:meth:`GroupServer.accounts`) plus this side's spinning
        (:meth:`Spinner.accounts`; ``wait_mode`` ``"block"`` without a spinner)."""
        accounts = super().accounts(restart)
        spinner = self._spinner
        if spinner is None:
            accounts.update(wait_mode="block", spin_seconds=0.0, spin_waits=0, spin_hits=0)
        else:
            accounts.update(spinner.accounts())
            if restart:
                spinner.restart_accounts()
        return accounts

    def call(self, command: Command, arg: Any) -> Any:
        if command is Command.SETUP:
            self.setup(arg)
            return None
        return super().call(command, arg)

    def shared_actions(self) -> Any:
        """This step's actions, copied out of shared memory: an env may keep its action (a Box action is
        a row of the batch), and the parent overwrites the buffer at the next step."""
        actions = self.action_view
        if type(actions) is np.ndarray:
            return actions.copy()
        return split_actions(self._action_space, batch_copy(actions), 0, self._n_local)

    def serve(self) -> None:
        fd_in, fd_out, handle = self.conn_in.fileno(), self.conn_out.fileno(), self.handle
        received, replied = self.received, self.replied
        while True:
            spinner = self._spinner
            try:
                message = read_message(fd_in) if spinner is None else self._read_request(spinner, fd_in)
            except (EOFError, OSError):
                return
            started = received()
            cell = self._slot_cell
            if cell is not None and cell[0] != self._slot:
                self._slot = cell[0]
                self.group.obs = self._slot_rows[self._slot]
            reply, command = handle(message)
            write_message(fd_out, reply)
            signals = self._signals
            if signals is not None:  # the reply is in the pipe: the parent may read it without blocking
                self._replies_written += 1
                signals[REPLIES] = self._replies_written
            replied(started)
            if command is Command.CLOSE:
                return

    def _read_request(self, spinner: Spinner, fd_in: int) -> bytes:
        """The next request: spin until the parent's counter says it is in the pipe (or the spin budget ran out),
        unless the calling process has paused the spinning (:class:`~vecenv.workers.spin.BetweenSteps`), then
        read it."""
        started = perf_counter()
        self._requests_read += 1
        signals = self._signals
        if not signals[SPIN_PAUSED]:  # (else the calling process's work between steps needs the cores)
            spinner.spin(signals, REQUESTS, self._requests_read, spinner.budget())
        message = read_message(fd_in)
        spinner.observe(perf_counter() - started)
        if self.accounts_start is None:  # the accounts start with this request: the wait for it is not in them
            spinner.restart_accounts()
        return message


def worker_main(
    conns: tuple[Connection, Connection, Connection],
    parent_conns: tuple[Connection, ...],
    env_fns: EnvFactories,
    env_indices: list[int],
    autoreset_mode: str = AutoresetMode.SAME_STEP.value,
    enable_gc: bool = False,
) -> None:
    """Entry point of a worker process: build the :class:`EnvGroup`, then serve requests until CLOSE or EOF.

    Every object the process inherited from its parent (under fork) is frozen out of garbage collection first
    (:func:`gc.freeze`): their finalizers are the parent's business. A Ray actor handle finalized in a forked
    child, for one, acts on the parent's connection to Ray, whose next call then never returns.

    :param conns: ``(conn_in, conn_out, fd_conn)``: the read end of the parent's request pipe, the write
        end of the reply pipe, and a socket the shared block's file descriptor arrives on.
    :param parent_conns: the parent's ends of the same channels (inherited under fork: closed at once).
    :param enable_gc: turn the garbage collector on once the inherited objects are frozen (the parent forked
        with it off; False: leave it as it is).
    """
    gc.freeze()
    if enable_gc:
        gc.enable()
    # Ctrl-C is the parent's business: it shuts the workers down cleanly.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for parent_conn in parent_conns:
        parent_conn.close()
    conn_in, conn_out, fd_conn = conns
    _exit_when_parent_dies()
    group, handshake = build_group(env_fns.var, env_indices, autoreset_mode)
    conn_out.send_bytes(handshake)
    if group is None:  # building the envs raised: the parent reports the error
        conn_out.close()
        return
    WorkerLoop(conn_in, conn_out, fd_conn, group).serve()
    for conn in conns:
        conn.close()
