"""Bounded calls into Ray itself (not into an env): ``ray.init``, queries of the cluster and registering an actor,
each waited for at most a timeout (``connect_timeout`` of :class:`~vecenv.RayVecEnv`).

Ray's waits inside its C++ core cannot be interrupted by a Python signal, so a call is run in a daemon thread
that the caller stops waiting for (:class:`BoundedCall`, :func:`call_bounded`); :func:`init_ray` runs
``ray.init`` that way, and :func:`ray_timeout_message` says what to check when Ray did not answer in time.

This module never imports ray: its functions take the ``ray`` module as an argument.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar, cast

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "BoundedCall",
    "call_bounded",
    "init_ray",
    "ray_address",
    "ray_timeout_message",
]

T = TypeVar("T")

#: seconds :class:`~vecenv.RayVecEnv` waits by default for Ray itself (``connect_timeout``): to start or join a
#: Ray instance, to answer a query of the cluster, to register an actor and to start it on a node
DEFAULT_CONNECT_TIMEOUT = 60.0

# the lasting thread (see BoundedCall): its queue of calls, by the process that started it
_lasting_lock = threading.Lock()
_lasting: dict[int, queue.SimpleQueue[Callable[[], None]]] = {}


def _serve(calls: queue.SimpleQueue[Callable[[], None]]) -> None:
    while True:
        calls.get()()


def _run_on_lasting_thread(run: Callable[[], None]) -> None:
    """Run ``run`` on the lasting daemon thread of this process (started on first use; one call at a time)."""
    with _lasting_lock:
        calls = _lasting.get(os.getpid())  # (a forked child has no such thread: it starts its own)
        if calls is None:
            calls = queue.SimpleQueue()
            threading.Thread(target=_serve, args=(calls,), name="vecenv-ray-init", daemon=True).start()
            _lasting.clear()
            _lasting[os.getpid()] = calls
        calls.put(run)


class BoundedCall(Generic[T]):
    """``call()`` running in a daemon thread, so that the calling thread can stop waiting for it.

    Ray's waits inside its C++ core (e.g. ``ray.cluster_resources()`` while the GCS does not answer) cannot be
    interrupted by a Python signal, so neither a signal-based timeout nor Ctrl-C ends them; a thread that is
    joined with a deadline can be left behind instead. A call that is left behind keeps running; when it
    finishes, ``on_late(result)`` runs in its thread (e.g. to shut down a Ray that started too late, or kill an
    actor registered too late), if the call returned.

    A call that starts processes meant to live on (``ray.init`` starting a local Ray) needs ``lasting=True``: on
    Linux, Ray has its processes killed when the *thread* that started them ends (``PR_SET_PDEATHSIG``), so such
    calls run one after the other on one daemon thread that lives as long as the process.

    :param call: the call (no arguments).
    :param on_late: what to do with the result of a call that finished after :meth:`wait` gave up on it.
    :param name: the thread's name (of a new thread).
    :param lasting: run on the process's lasting thread instead of a new one.
    """

    def __init__(
        self,
        call: Callable[[], T],
        on_late: Callable[[T], object] | None = None,
        name: str = "",
        lasting: bool = False,
    ) -> None:
        self._call, self._on_late = call, on_late
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._outcome: tuple[bool, Any] | None = None
        self._abandoned = False
        try:
            if lasting:
                _run_on_lasting_thread(self._run)
            else:
                threading.Thread(target=self._run, name=name or "vecenv-ray-call", daemon=True).start()
        except RuntimeError:  # no new thread at interpreter shutdown: run it here, unbounded
            self._run()

    def _run(self) -> None:
        ok = True
        value: Any = None
        try:
            value = self._call()
        except BaseException as exc:
            ok, value = False, exc
        with self._lock:
            self._outcome = (ok, value)
            late = self._abandoned
        self._done.set()
        if late and ok and self._on_late is not None:
            with contextlib.suppress(Exception):
                self._on_late(cast(T, value))

    def wait(self, timeout: float | None) -> bool:
        """Wait up to ``timeout`` seconds (None: without limit; Ctrl-C ends the wait either way) for the call to
        finish. ``False``: it did not, and it is abandoned (see ``on_late``); also when the wait is interrupted.

        :return: whether the call finished (then :meth:`result` returns its result or raises its exception).
        """
        finished = False
        try:
            finished = self._done.wait(timeout)
        finally:
            with self._lock:
                finished = self._outcome is not None
                if not finished:
                    self._abandoned = True
        return finished

    def result(self) -> T:
        """The call's result, or its exception raised again (only after :meth:`wait` returned ``True``)."""
        assert self._outcome is not None, "the call has not finished"
        ok, value = self._outcome
        if not ok:
            raise value
        return cast(T, value)


def call_bounded(
    call: Callable[[], T],
    timeout: float | None,
    describe: Callable[[], str],
    on_late: Callable[[T], object] | None = None,
) -> T:
    """``call()``'s result, waiting at most ``timeout`` seconds for it (None: ``call()`` runs in this thread,
    without limit). The call's own exceptions propagate.

    :param describe: the message of the :class:`TimeoutError` (built only when it is raised).
    :param on_late: see :class:`BoundedCall`.
    :raises TimeoutError: ``describe()``, when ``timeout`` passed first (the call is left running).
    """
    if timeout is None:
        return call()
    job = BoundedCall(call, on_late)
    if not job.wait(timeout):
        raise TimeoutError(describe())
    return job.result()


def ray_address(ray: Any, ray_init_kwargs: dict[str, Any] | None = None) -> str | None:
    """The address of the Ray that this process uses (its GCS), or, before ``ray.init``, the one it was given:
    ``ray_init_kwargs["address"]``, else the ``RAY_ADDRESS`` variable (which ``ray.init`` reads too); None if
    neither is set."""
    if ray.is_initialized():
        with contextlib.suppress(Exception):
            address = ray.get_runtime_context().gcs_address
            if address:
                return str(address)
    address = (ray_init_kwargs or {}).get("address")
    if address in (None, "auto"):
        address = os.environ.get("RAY_ADDRESS") or address
    return None if address is None else str(address)


def ray_timeout_message(doing: str, timeout: float, address: str | None, setting: str = "connect_timeout") -> str:
    """The message of the :class:`TimeoutError` raised when Ray itself (not an env) did not answer in time:
    what Ray did not do (``doing``, e.g. ``"register the Ray actor ..."``), the address (None: none was given),
    and what to check."""
    status = "`ray status`"
    if address is None:
        where = (
            "no address was given, so ray.init joins the latest Ray started with `ray start` on this machine, or "
            "starts a new local one"
        )
    elif address == "local":
        where = "a new local Ray instance"
    else:
        where = f"Ray at {address}"
        status = f"`ray status --address {address}`"
    return (
        f"Ray did not {doing} within {setting}={timeout:g} s ({where}). Check that this is the Ray "
        f"you meant (ray_init_kwargs['address'], the RAY_ADDRESS variable, another Ray instance on this machine), "
        f"and that it runs and is not overloaded ({status}; a busy machine or a second Ray instance beside it "
        f"slows its GCS down); or raise {setting} (None waits without limit)."
    )


def _exit_on_sigterm(signum: int, frame: object) -> None:
    sys.exit(signum)


class _DropSigtermWarning(logging.Filter):
    """Drops ray.init's warning that it set no SIGTERM handler off the main thread (:func:`init_ray` sets it)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "SIGTERM handler is not set" not in record.getMessage()


def init_ray(ray: Any, ray_init_kwargs: dict[str, Any], timeout: float | None) -> None:
    """``ray.init(**ray_init_kwargs)``, waiting at most ``timeout`` seconds (None: without limit).

    With a bound, ``ray.init`` runs in a daemon thread; on the main thread, the SIGTERM handler that ``ray.init``
    installs there (``sys.exit``, so that Ray's exit handler shuts down what it started) is installed first, as
    ``ray.init`` cannot from another thread. A ``ray.init`` that finishes after the bound passed is shut down
    again. A ``ray.init`` that raises is shut down too (it may have started local Ray processes).

    :raises TimeoutError: if Ray was not initialised within ``timeout`` seconds (naming the address).
    :raises Exception: what ``ray.init`` raised.
    """
    if timeout is None:
        try:
            ray.init(**ray_init_kwargs)
        except BaseException:
            with contextlib.suppress(Exception):
                ray.shutdown()
            raise
        return
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _exit_on_sigterm)
    worker_logger = logging.getLogger("ray._private.worker")
    quiet = _DropSigtermWarning()

    def start() -> None:
        worker_logger.addFilter(quiet)
        try:
            ray.init(**ray_init_kwargs)
        except BaseException:
            with contextlib.suppress(Exception):
                ray.shutdown()  # a ray.init that failed half-way may have started local Ray processes
            raise
        finally:
            worker_logger.removeFilter(quiet)

    job = BoundedCall(start, on_late=lambda _: ray.shutdown(), lasting=True)
    if not job.wait(timeout):
        raise TimeoutError(
            ray_timeout_message("start or join a Ray instance (ray.init)", timeout, ray_address(ray, ray_init_kwargs))
        )
    job.result()
