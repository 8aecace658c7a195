"""Ray actors for :class:`~vecenv.RayVecEnv`: each hosts a group of envs and answers one request per call.

The actor (:class:`GroupActor`) builds its :class:`~vecenv.env_group.EnvGroup` from the cloudpickled factories,
inside the actor, and serves the byte protocol of :mod:`vecenv.workers.messages` through a
:class:`~vecenv.workers.group_server.GroupServer`: one ``handle`` call per step carries the actor's slice of the
actions in and its observations, rewards, flags and sparse infos out. :class:`RayWorker` is the driver's
handle: a :class:`~vecenv.workers.messages.MessageWorker` whose bytes travel as Ray object references, waited
for with ``ray.wait``.

Ray itself never restarts an actor or retries a call (``max_restarts=0``, ``max_task_retries=0``): a retried
step would silently run again on a fresh actor. vecenv's own restart rule (``max_restarts`` of the vector env)
builds a new actor instead, and its envs report the cut episode.

Waits on Ray itself (registering and starting an actor) are bounded by :mod:`vecenv.workers.ray_calls`, whose
names this module re-exports. This module imports ray only when a :class:`RayWorker` is built.
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
from gymnasium.vector import AutoresetMode

from vecenv.base import EnvFactories
from vecenv.errors import WorkerDiedError
from vecenv.interrupts import GUARD
from vecenv.optional import import_optional
from vecenv.protocol import Command
from vecenv.workers.base import Worker
from vecenv.workers.group_server import GroupServer, build_group
from vecenv.workers.messages import CALL, OK, MessageWorker, dumps, label
from vecenv.workers.ray_calls import (
    DEFAULT_CONNECT_TIMEOUT,
    BoundedCall,
    call_bounded,
    init_ray,
    ray_address,
    ray_timeout_message,
)

__all__ = [
    "ACTOR_NAMESPACE",
    "DEFAULT_CONNECT_TIMEOUT",
    "BoundedCall",
    "GroupActor",
    "RayWorker",
    "call_bounded",
    "import_ray",
    "init_ray",
    "ray_address",
    "ray_timeout_message",
]


#: the Ray namespace of every actor vecenv makes (``ray.util.list_named_actors(all_namespaces=True)`` lists them)
ACTOR_NAMESPACE = "vecenv"
#: actor options vecenv sets itself: Ray must not restart actors or retry calls (see the module docstring),
#: and the actors are named in vecenv's namespace
RESERVED_ACTOR_OPTIONS = ("max_restarts", "max_task_retries", "name", "namespace", "lifetime", "get_if_exists")


def import_ray(needed_by: str = "RayVecEnv") -> Any:
    """The ``ray`` module, or :class:`~vecenv.optional.MissingExtraError` naming the ``ray`` extra."""
    return import_optional("ray", needed_by, extra="ray")


class GroupActor:
    """The actor: a group of envs served by a :class:`~vecenv.workers.group_server.GroupServer`.

    :param env_fns: the group's env factories (built in :meth:`handshake`, inside the actor).
    :param env_indices: their global indices.
    :param autoreset_mode: the group's autoreset mode (its value).
    """

    def __init__(self, env_fns: EnvFactories, env_indices: list[int], autoreset_mode: str) -> None:
        self._env_fns, self._env_indices, self._autoreset_mode = env_fns, env_indices, autoreset_mode
        self._server: GroupServer | None = None

    def handshake(self) -> bytes:
        """Build the envs; the reply carries their spaces, or the error a factory raised (with its own type)."""
        group, reply = build_group(self._env_fns.var, self._env_indices, self._autoreset_mode)
        if group is not None:
            self._server = GroupServer(group)
        return reply

    def handle(self, message: bytes) -> bytes:
        """Answer one request message (:mod:`vecenv.workers.messages`); an actor whose envs could not be built
        answers only CLOSE (with nothing to close)."""
        server = self._server
        if server is None:
            return bytes([OK]) + dumps(None)
        started = server.received()
        reply = server.handle(message)[0]
        server.replied(started)  # (Ray moves the reply after this: its cost shows as idle time)
        return reply

    def where(self) -> tuple[int, str]:
        """``(pid, node id)`` of the actor's process."""
        import ray

        return os.getpid(), ray.get_runtime_context().get_node_id()


@functools.cache
def _remote_actor_class(ray: Any) -> Any:
    """:class:`GroupActor` as a Ray actor class (made once)."""
    return ray.remote(GroupActor)


#: why a Ray actor is gone when Ray itself was shut down under an open vector env
_RAY_SHUT_DOWN = (
    "Ray was shut down (ray.shutdown()) while the vector env was open: its actors ended with it. Close the vector "
    "env before shutting Ray down"
)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


class RayWorker(MessageWorker):
    """The driver's handle of one :class:`GroupActor`.

    The actor is created (and starts building its envs) at construction; :meth:`handshake` waits for it.

    :param env_fns: factories of the group's envs (cloudpickled into the actor).
    :param env_indices: their global indices (contiguous).
    :param autoreset_mode: the group's :class:`gymnasium.vector.AutoresetMode`.
    :param actor_options: Ray's actor options (``num_cpus``, ``resources``, ``scheduling_strategy``,
        ``runtime_env``, ...), without those in :data:`RESERVED_ACTOR_OPTIONS`.
    :param name: the actor's name in the :data:`ACTOR_NAMESPACE` namespace (a restart appends a counter).
    :param connect_timeout: seconds to wait for Ray to register the actor, and again for the actor to start on
        a node (None: without limit); see :class:`~vecenv.RayVecEnv`.
    :raises TimeoutError: if Ray did not register the actor within ``connect_timeout``.
    """

    runs_in = "Ray actors"

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env]],
        env_indices: Sequence[int],
        autoreset_mode: AutoresetMode = AutoresetMode.SAME_STEP,
        actor_options: dict[str, Any] | None = None,
        name: str | None = None,
        connect_timeout: float | None = DEFAULT_CONNECT_TIMEOUT,
    ) -> None:
        super().__init__(env_indices, autoreset_mode)
        self._ray = import_ray()
        #: seconds to wait for Ray itself: to register an actor, and for the actor to start (None: forever)
        self.connect_timeout = connect_timeout
        self._env_fns = EnvFactories(env_fns)
        self._actor_options = dict(actor_options or {})
        self._name = name or f"vecenv-{os.getpid()}-{id(self):x}"
        self._actor_name = self._name
        self._generation = 0
        self._ref: Any = None  # the reply to the pending request (an ObjectRef)
        self._close_ref: Any = None
        self._where_ref: Any = None  # the reply to the new actor's first call: it has started
        self._location: tuple[int, str] | None = None
        self.actor: Any = None
        try:
            self._start_actor()
        except BaseException:
            self.kill()  # an actor made before the failure does not outlive its handle
            raise

    def _start_actor(self) -> None:
        ray = self._ray
        if not ray.is_initialized():  # (a call to Ray would start a new local Ray, which nobody shuts down)
            raise RuntimeError(_RAY_SHUT_DOWN)
        name = self._name if not self._generation else f"{self._name}-restart{self._generation}"
        self._generation += 1
        #: the name of the actor now running the group (the restarted one's has a ``-restartN`` suffix)
        self._actor_name = name
        options = {
            **self._actor_options,
            "name": name,
            "namespace": ACTOR_NAMESPACE,
            "max_restarts": 0,
            "max_task_retries": 0,
        }
        actor_class = _remote_actor_class(ray).options(**options)
        self.actor = None
        self._location = None
        # Ray registers a named actor with its GCS before .remote() returns: bounded, as every wait on Ray
        self.actor = call_bounded(
            lambda: actor_class.remote(self._env_fns, self.env_indices, self.autoreset_mode.value),
            self.connect_timeout,
            lambda: ray_timeout_message(
                f"register the Ray actor {name} (envs {self.env_indices})",
                self.connect_timeout or 0.0,
                ray_address(ray),
            ),
            on_late=lambda actor: ray.kill(actor, no_restart=True),
        )
        # an actor runs its calls in order: `where` answers once the actor has started, before its envs exist
        self._where_ref = self.actor.where.remote()
        self._handshake_ref = self.actor.handshake.remote()

    def handshake(self, timeout: float | None = None) -> tuple[gym.Space, gym.Space]:
        """Wait for the actor to build its envs (up to ``timeout`` seconds); return ``(observation_space,
        action_space)``.

        :raises Exception: what an env factory raised, with its own type and message.
        :raises WorkerDiedError: if the actor died (or could not be placed) first.
        :raises TimeoutError: if ``timeout`` passed first, or Ray did not start the actor within
            :attr:`connect_timeout` (the actor is killed).
        """
        self._ref, self._handshake_ref = self._handshake_ref, None
        self._deadline = None if timeout is None else time.monotonic() + timeout
        try:
            self._await_start()
            spaces: tuple[gym.Space, gym.Space] = self._reply(self._recv_raw("env construction"))
        finally:
            self._deadline = None
        return spaces

    def _await_start(self) -> None:
        """Wait until the new actor runs (Ray placed it on a node and started its process), at most
        :attr:`connect_timeout` seconds, and record where it runs. When the ``reset_timeout`` deadline comes
        first, return: the handshake's wait then reports it."""
        ray = self._ray
        ref, self._where_ref = self._where_ref, None
        if ref is None:
            return
        bound = self.connect_timeout
        remaining = None if self._deadline is None else max(0.0, self._deadline - time.monotonic())
        timeout = bound if remaining is None else remaining if bound is None else min(bound, remaining)
        try:
            pid, node = ray.get(ref, timeout=timeout)
        except ray.exceptions.GetTimeoutError:
            if bound is None or (remaining is not None and remaining <= bound):
                return
            address = ray_address(ray)
            message = ray_timeout_message(
                f"start the {self._where()} (no node had the resources of its actor_options, "
                f"{self._resources_text()}, free, or its process did not start in time)",
                bound,
                address,
            )
            self.kill(f"The {self._where()} was killed by vecenv: Ray did not start it within connect_timeout.")
            raise TimeoutError(message) from None
        except KeyboardInterrupt:
            self._where_ref = ref
            raise
        except Exception as exc:  # the actor could not be created (or died at once)
            self._pending = None
            raise self._died("env construction", exc) from exc
        self._location = (int(pid), str(node))

    def _resources_text(self) -> str:
        options = self._actor_options
        shown = {key: options[key] for key in ("num_cpus", "num_gpus", "memory", "resources") if key in options}
        return ", ".join(f"{key}={value!r}" for key, value in shown.items()) or "Ray's defaults"

    @property
    def node_id(self) -> str | None:
        """The id of the Ray node the actor runs on (None if unknown)."""
        return None if self._location is None else self._location[1]

    # --- moving the bytes ----------------------------------------------------------------------------

    @property
    def location(self) -> str:
        if self._location is None:
            return f"Ray actor {self._actor_name}"
        return f"Ray actor {self._actor_name} (process {self._location[0]})"

    def _where(self) -> str:
        if self._location is None:
            return f"Ray actor {self._actor_name} (envs {self.env_indices})"
        pid, node = self._location
        return f"Ray actor {self._actor_name} (process {pid} on node {node[:12]}, envs {self.env_indices})"

    def _send_bytes(self, data: bytes, doing: Command | str) -> None:
        if not self._ray.is_initialized():
            raise self._died(doing, RuntimeError(_RAY_SHUT_DOWN))
        try:
            self._ref = self.actor.handle.remote(data)
        except Exception as exc:  # Ray refused the call (the actor handle is gone, Ray shut down)
            raise self._died(doing, exc) from exc

    def _recv_raw(self, doing: Command | str) -> bytes:
        # a wait (vecenv.interrupts): Ctrl-C is raised in it at once (a deferred one before the reference is taken);
        # the reply stays in Ray's object store, so one that came as the interrupt did is read by the next request
        ray = self._ray
        if not ray.is_initialized():  # (ray.get would start a new local Ray)
            self._ref = self._pending = None
            raise self._died(doing, RuntimeError(_RAY_SHUT_DOWN))
        waiting = GUARD.wait_begin()
        ref, self._ref = self._ref, None
        assert ref is not None, "nothing to receive"
        deadline = self._deadline
        try:
            data: bytes = ray.get(ref, timeout=None if deadline is None else max(0.0, deadline - time.monotonic()))
        except ray.exceptions.GetTimeoutError:
            self._pending = None
            # (building the envs is bounded by reset_timeout, as their reset is)
            timeout = self.step_timeout if doing is Command.STEP else self.reset_timeout
            setting = "step_timeout" if doing is Command.STEP else "reset_timeout"
            what = (
                "the actor did not build its envs in time"
                if doing == "env construction"
                else (f"it did not finish within {setting}={timeout} s")
            )
            self.kill(
                f"The {self._where()} was killed by vecenv during {label(doing)}: {what}. It cannot be used "
                "again: create a new vector env, or set max_restarts to have such actors rebuilt."
            )
            advice = (
                "Raise reset_timeout, which bounds building the envs too."
                if doing == "env construction"
                else "Raise the timeout, or set max_restarts to rebuild the actor and go on."
            )
            raise TimeoutError(
                f"envs {self.env_indices} did not finish {label(doing)} within {timeout} s ({setting}): their Ray "
                f"actor was killed. {advice}"
            ) from None
        except KeyboardInterrupt:
            self._ref = ref  # still pending: collected (or dropped) by the next request
            raise
        except Exception as exc:  # the actor died, its node was lost, or Ray could not run the call
            self._pending = None
            raise self._died(doing, exc) from exc
        finally:
            GUARD.wait_end(waiting)
        return data

    def _died(self, doing: Command | str, cause: BaseException) -> WorkerDiedError:
        """The error for an actor found dead while ``doing``; every later call raises it again."""
        message = (
            f"The {self._where()} died during {label(doing)} ({_first_line(cause)}). If its node was lost, "
            "the envs are gone; set max_restarts to have vecenv rebuild the actor on the remaining capacity."
        )
        self.kill(message)
        return WorkerDiedError(message)

    def reply_ready(self) -> bool:
        if self._lost is not None or self._ref is None or not self._ray.is_initialized():
            return True
        ready, _ = self._ray.wait([self._ref], num_returns=1, timeout=0)
        return bool(ready)

    def has_ended(self) -> bool:
        if self._lost is not None or not self._ray.is_initialized():
            return True
        if self._ref is None or not self.reply_ready():
            return False
        ray = self._ray
        try:
            ray.get(self._ref, timeout=0)
        except ray.exceptions.RayActorError:
            return True
        except Exception:
            return False
        return False

    @classmethod
    def wait_any(cls, workers: Sequence[Worker], timeout: float | None) -> list[int]:
        """One ``ray.wait`` over the pending replies (a dead actor's reply is ready: it holds the error)."""
        refs: dict[Any, int] = {}
        ready: list[int] = []
        ray: Any = None
        for k, worker in enumerate(workers):
            assert isinstance(worker, RayWorker)
            ray = worker._ray
            if worker._lost is not None or worker._ref is None or not ray.is_initialized():
                ready.append(k)
            else:
                refs[worker._ref] = k
        if ready or not refs:
            return ready
        waiting = GUARD.wait_begin()  # (a wait: Ctrl-C is raised here at once, nothing half done)
        try:
            done, _ = ray.wait(list(refs), num_returns=1, timeout=timeout)
            if done:  # whatever else is ready too
                done, _ = ray.wait(list(refs), num_returns=len(refs), timeout=0)
        finally:
            GUARD.wait_end(waiting)
        return sorted(refs[ref] for ref in done)

    # --- restarts and shutdown ------------------------------------------------------------------------

    def kill(self, reason: str | None = None) -> None:
        """End the actor at once (``ray.kill``); every later request raises :class:`WorkerDiedError` with
        ``reason``; the handle can :meth:`restart`."""
        if self.actor is not None and self._ray.is_initialized():  # (ray.kill would start a new local Ray)
            with contextlib.suppress(Exception):
                self._ray.kill(self.actor, no_restart=True)
        self._ref = self._close_ref = self._where_ref = None
        self._pending = None
        self._partial = None
        if self._lost is None:
            self._lost = reason or f"The {self._where()} was killed by vecenv and cannot be used again."

    def restart(
        self, seeds: Sequence[int | None] | None = None, options: Sequence[dict[str, Any] | None] | None = None
    ) -> list[dict[str, Any]]:
        """Replace the actor with a new one (same options): build its envs from their factories and reset every
        env, env ``j`` with ``seeds[j]`` / ``options[j]`` if given; their first observations are in the buffers.

        :return: the reset infos of the group.
        :raises BaseException: whatever building or resetting the new actor's envs raised (a
            :class:`TimeoutError` past ``reset_timeout``, a Ctrl-C). The new actor is then ended and the worker
            stays dead: every later call raises :class:`~vecenv.errors.WorkerDiedError` naming that error, and
            another restart may replace it.
        """
        self.kill()
        self._start_actor()
        self._lost = None
        stage = "env construction"
        try:
            self.handshake(self.reset_timeout)
            stage = "reset"
            return self._reset_after_restart(seeds, options)
        except BaseException as exc:  # (its envs may be built and not reset)
            self._end_failed_restart(stage, exc)
            raise

    def shutdown_begin(self) -> None:
        if self._lost is not None or self.actor is None:
            return
        if not self._ray.is_initialized():  # the actors ended with Ray: nothing to ask (and no new Ray started)
            self.kill(_RAY_SHUT_DOWN)
            return
        # an actor runs its calls in order: CLOSE follows a pending request, which need not be collected
        with contextlib.suppress(Exception):
            self._close_ref = self.actor.handle.remote(bytes([CALL]) + dumps((Command.CLOSE, None)))
        self._ref = None
        self._pending = None

    def shutdown_end(self, deadline: float) -> BaseException | None:
        error: BaseException | None = None
        close_ref, self._close_ref = self._close_ref, None
        if close_ref is not None and self._ray.is_initialized():
            try:
                self._reply(self._ray.get(close_ref, timeout=max(0.0, deadline - time.monotonic())))
            except WorkerDiedError:
                pass
            except Exception as exc:
                # an env's close() raised (rebuilt with its type), or the actor died / did not answer in time
                if not isinstance(exc, self._ray.exceptions.RayError):
                    error = exc
        if self._lost is None:
            self.kill("The Ray actor was closed with its vector env.")
        return error

    def shutdown_finish(self, deadline: float) -> None:
        self._wait_dead(deadline)
        self._buffers = None

    def _wait_dead(self, deadline: float) -> None:
        """Wait (until ``deadline``, at least a moment) until Ray reports the killed actor dead, so that no actor
        of a closed vector env is alive when ``close()`` returns (``ray.kill`` is asynchronous)."""
        ray = self._ray
        while self.actor is not None and ray.is_initialized():
            try:
                ray.get(self.actor.where.remote(), timeout=max(0.1, deadline - time.monotonic()))
            except Exception:  # RayActorError: dead (or Ray is gone, or the time is up)
                return
            if time.monotonic() >= deadline:
                return
            time.sleep(0.01)
