"""A test-only transport: each worker runs its :class:`~vecenv.env_group.EnvGroup` in a thread of this process and
hands replies back through an event, not a file descriptor.

It shows that a backend is one worker class plus its constructor: :class:`ThreadWorker` implements
:class:`vecenv.workers.Worker` (waiting through the interface's default :meth:`~vecenv.workers.Worker.wait_any`),
and :class:`ThreadVecEnv` builds the workers and hands them to :class:`vecenv.vec_env.WorkerVecEnv`. The parity
tests run it beside DummyVecEnv and SubprocVecEnv.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
from gymnasium.vector import AutoresetMode

from vecenv.env_group import EnvGroup
from vecenv.protocol import Command
from vecenv.vec_env import WorkerVecEnv, split_groups
from vecenv.workers import Worker


class ThreadWorker(Worker):
    """An EnvGroup served by a thread: :meth:`send` queues the request, the thread runs it and sets an event."""

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env]], env_indices: Sequence[int], mode: AutoresetMode):
        super().__init__(env_indices)
        self._requests: queue.Queue[tuple[Command, Any] | None] = queue.Queue()
        self._done = threading.Event()
        self._reply: tuple[bool, Any] = (True, None)
        self._command: Command | None = None
        built = queue.Queue()  # the group is built in the thread that serves it
        self._thread = threading.Thread(target=self._serve, args=(env_fns, mode, built), daemon=True)
        self._thread.start()
        ok, value = built.get()
        if not ok:
            raise value
        self.group: EnvGroup = value
        self.autoreset_mode = self.group.autoreset_mode

    def _serve(self, env_fns: Sequence[Callable[[], gym.Env]], mode: AutoresetMode, built: queue.Queue) -> None:
        try:
            group = EnvGroup(env_fns, self.env_indices, autoreset_mode=mode)
        except BaseException as exc:  # handed to the constructor
            built.put((False, exc))
            return
        built.put((True, group))
        while (request := self._requests.get()) is not None:
            command, payload = request
            try:
                self._reply = (True, group.handlers[command](payload))
            except BaseException as exc:  # delivered to recv()
                self._reply = (False, exc)
            self._done.set()

    def attach(self, obs_buffer: Any, rewards: Any, dones: Any, terminations: Any, truncations: Any) -> None:
        group = self.group
        group.obs, group.rewards, group.dones = obs_buffer, rewards, dones
        group.terminations, group.truncations = terminations, truncations
        group.forget_flags()

    @property
    def pending(self) -> Command | None:
        return self._command

    def reply_ready(self) -> bool:
        return self._done.is_set()

    def send(self, command: Command, payload: Any) -> None:
        if self._command is not None:  # a reply never collected (an interrupted call): drop it
            self._done.wait()
        self._done.clear()
        self._command = command
        self._requests.put((command, payload))

    def recv(self) -> Any:
        assert self._command is not None, "recv() without send()"
        self._done.wait()
        self._command = None
        ok, value = self._reply
        if not ok:
            raise value
        return value

    def take_partial_step(self) -> tuple[list[int], list[dict[str, Any]], list[dict[str, Any]]] | None:
        partial = self.group.take_partial_step()
        return None if partial is None else (partial[0], partial[1], list(self.group.reset_infos))

    def shutdown_begin(self) -> None:
        if self._command is None:
            self._requests.put((Command.CLOSE, None))
            self._command = Command.CLOSE

    def shutdown_end(self, deadline: float) -> BaseException | None:
        import time

        error = None
        if self._command is not None and self._done.wait(max(0.0, deadline - time.monotonic())):
            ok, value = self._reply
            error = None if ok else value
        self._command = None
        self._requests.put(None)
        return error


class ThreadVecEnv(WorkerVecEnv):
    """``env_fns`` split into ``n_workers`` groups, each served by a :class:`ThreadWorker`."""

    def __init__(
        self,
        env_fns: list[Callable[[], gym.Env]],
        n_workers: int = 2,
        autoreset_mode: AutoresetMode | str = AutoresetMode.SAME_STEP,
    ) -> None:
        mode = AutoresetMode(autoreset_mode)
        workers = [
            ThreadWorker([env_fns[i] for i in group], group, mode)
            for group in split_groups(len(env_fns), min(n_workers, len(env_fns)))
        ]
        first = workers[0].group
        super().__init__(workers, first.observation_space, first.action_space)
        self.metadata = first.envs[0].metadata
