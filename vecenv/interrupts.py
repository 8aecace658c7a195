"""Ctrl-C that never splits vecenv's bookkeeping.

CPython raises ``KeyboardInterrupt`` in the main thread at whatever point the interpreter is when it next checks
for signals: between a request's bytes going out and the request being recorded as in flight, between a reply
being read and the request being marked answered, between ``step_async`` and ``step_wait``. Raised there, the
interrupt would orphan a reply or lose one, and the vector env would return the wrong step's results or wait
for a reply that never comes.

So vecenv's calls run as *sections* in which an interrupt is *deferred*: the SIGINT handler records it and the
code goes on. The section's *waits* are the exceptions: while vecenv waits for its workers (a pipe, a spin on
shared memory, Ray) or runs an env's own code in the calling process (or another library's vector env, adapted),
nothing is half done, so an interrupt is raised there at once, as before (a deferred one is raised as a wait
begins). A ``step()`` is one section only where every level of the stack steps with vecenv's own code; with a
caller's ``step_async`` / ``step_wait`` in it, it runs as SB3's (``vecenv.base._halves_are_vecenvs``). A
deferred interrupt is raised at the first of:

- the next wait (the requests in flight are collected by the next call; see docs/reliability.md);
- the end of the vector env's ``step_wait``, after the step's results were set aside so that the next step
  returns them instead of stepping again (``_hold_step_result`` of the engine);
- the end of the outermost call, for a call that is not a step (a reset, ``get_attr``, ...: raising there
  loses no transition);
- the start of the next vecenv call, for an interrupt that arrived in a wrapper's own bookkeeping after the
  vector env's ``step_wait`` returned (raising it as that step returns would drop the step's results).

How: while a vector env is open, vecenv's handler stands in front of the SIGINT handler it found (Python's
``signal.default_int_handler``, or the program's own, which it calls in turn). It is installed from the main
thread when a call starts while one of vecenv's vector envs (``DummyVecEnv``, ``SubprocVecEnv``, ``RayVecEnv``)
is open and the handler in place is another Python function (a program that installs its own handler later gets
it wrapped at the next call), and put back when the last of them closes (by the main thread: when another
thread closes the last one, at the main thread's next call or interrupt). Programs whose
SIGINT is ``SIG_IGN`` or ``SIG_DFL`` get no Python-level interrupt, so nothing is installed for them. Vector envs
used from other threads need no deferral (Python raises ``KeyboardInterrupt`` in the main thread only), and their
sections cost nothing.

A section costs a few attribute operations and one ``_signal.getsignal`` (about 0.7 us for ``enter`` and ``leave``
together on a 2-vCPU VM, a wait about 0.5 us): the handler is installed once, not per call, and ``step()`` is one
section (``benchmarks/interrupt_guard.py`` measures the cost per step).
"""

from __future__ import annotations

import copy
import copyreg
import functools
import importlib
import os
import signal
import threading
from collections.abc import Callable
from types import CodeType, FrameType
from typing import Any, ParamSpec, TypeVar

__all__ = ["GUARD", "InterruptGuard", "guarded"]

P = ParamSpec("P")
R = TypeVar("R")

_SIGINT = int(signal.SIGINT)
#: the C function (signal.getsignal converts its result to an enum member where it can: 60x slower)
_getsignal: Callable[[int], Any] = importlib.import_module("_signal").getsignal
_get_ident = threading.get_ident

Handler = Callable[[int, FrameType | None], Any]


class InterruptGuard:
    """The process's deferral of SIGINT (one instance: :data:`GUARD`); see the module docstring.

    Counters are kept for the main thread only: :meth:`enter` returns whether the calling thread is counted, and
    the same flag goes to :meth:`leave`. Waits call :meth:`wait_begin` / :meth:`wait_end`.
    """

    def __init__(self) -> None:
        #: nesting of the main thread's sections, and of the waits inside them
        self.depth = 0
        self.waiting = 0
        #: of the waits, those running envs in the calling process (:meth:`envs_begin`)
        self.envs_waiting = 0
        #: ``(depth, waiting, envs_waiting)`` of the waits that called vecenv again (a section inside a wait is
        #: vecenv's bookkeeping too: deferred again until it ends)
        self._suspended: list[tuple[int, int, int]] = []
        #: ``(signum, frame)`` of an interrupt that arrived inside a section, outside a wait
        self.deferred: tuple[int, FrameType | None] | None = None
        #: the handler vecenv's stands in front of (None: not installed)
        self.chained: Handler | None = None
        #: open vector envs (the handler is put back when the last one closes)
        self.users = 0
        #: interrupts deferred so far (for tests and diagnostics)
        self.deferrals = 0
        self.main = threading.main_thread().ident
        #: the handler as installed (one bound method, so that identity tells whether it is in place)
        self.handler: Handler = self.handle

    # --- the handler ------------------------------------------------------------------------------------

    def handle(self, signum: int, frame: FrameType | None) -> None:
        """vecenv's SIGINT handler: defer inside a section (outside its waits), else the chained handler (put back
        first where no vector env is open any more: the last one was closed by another thread)."""
        if self.depth and (
            not self.waiting or (self.envs_waiting == self.waiting and in_bookkeeping_between_envs(frame))
        ):
            self.deferred = (signum, frame)
            self.deferrals += 1
            return
        chained = self.chained
        if not self.users and chained is not None and not self.depth:
            self._put_back()
            if chained is not self.handler and callable(chained):
                chained(signum, frame)
                return
        self._chain(signum, frame)

    def _chain(self, signum: int, frame: FrameType | None) -> None:
        chained = self.chained
        if chained is None or chained is self.handler:  # (a handler vecenv no longer stands in front of)
            signal.default_int_handler(signum, frame)
        else:
            chained(signum, frame)

    def _install(self) -> None:
        """Stand in front of the SIGINT handler in place, if it is a Python function (main thread only)."""
        current = _getsignal(_SIGINT)
        if current is self.handler or not callable(current):
            return
        # (chained first: an interrupt arriving as soon as vecenv's handler is in place goes to the program's)
        previous, self.chained = self.chained, current
        try:
            signal.signal(signal.SIGINT, self.handler)
        except ValueError:  # not the main thread of the main interpreter
            self.chained = previous

    def acquire(self) -> None:
        """A vector env opened."""
        self.users += 1

    def release(self) -> None:
        """A vector env closed: the last one puts the chained handler back (if vecenv's is still in place). Only the
        main thread can: where another thread closes the last one, the main thread does at its next vecenv call
        or at the next interrupt (whose handler is then the chained one, as it would have been)."""
        self.users = max(0, self.users - 1)
        if self.users or self.chained is None or _get_ident() != self.main:
            return
        self._put_back()

    def _put_back(self) -> None:
        """Put the chained handler back (main thread), if vecenv's is still in place and no section runs."""
        if _getsignal(_SIGINT) is self.handler and not self.depth:
            try:
                signal.signal(signal.SIGINT, self.chained)
            except ValueError:  # pragma: no cover - checked above
                return
            self.chained = None
            deferred, self.deferred = self.deferred, None
            if deferred is not None:  # (an interrupt held over from a wrapper's bookkeeping)
                self._chain(*deferred)

    # --- sections and waits ---------------------------------------------------------------------------

    def enter(self) -> bool:
        """Start a section. An interrupt deferred past the end of the last call is raised here, before anything
        is done.

        :return: whether the section is counted (main thread); pass it to :meth:`leave`.
        """
        if _get_ident() != self.main:
            return False
        if not self.depth:
            if self.users:
                if _getsignal(_SIGINT) is not self.handler:
                    self._install()
            elif self.chained is not None:  # the last vector env was closed by another thread
                self._put_back()
            if self.deferred is not None:
                self.raise_deferred()
        elif self.waiting:  # vecenv called from code a wait runs (an env, an adapted vector env): its own section
            # (the counts go first: an interrupt arriving from then on is deferred, and nothing is left half done)
            suspended = (self.depth, self.waiting, self.envs_waiting)
            self.waiting = self.envs_waiting = 0
            self._suspended.append(suspended)
        self.depth += 1
        return True

    def leave(self, counted: bool, raise_at_end: bool = True) -> None:
        """End a section; at the end of the outermost one, raise a deferred interrupt if ``raise_at_end``. False
        for a call that returns a step's results (raising would drop them) or that starts a request the caller
        must then collect (``step_async``, ``start_call``): the next call raises it before doing anything."""
        if not counted or not self.depth:  # (0: a section begun before this process was forked from its parent)
            return
        self.depth -= 1
        suspended = self._suspended
        if suspended and suspended[-1][0] == self.depth:  # back in the wait that called vecenv
            _, self.waiting, self.envs_waiting = suspended.pop()
        if not self.depth:
            self.waiting = self.envs_waiting = 0  # (every wait ends inside its section: this only undoes a miscount)
            suspended.clear()
            if self.deferred is not None and raise_at_end:
                self.raise_deferred()

    def wait_begin(self) -> bool:
        """A wait starts: interrupts are raised at once (a deferred one now).

        :return: whether the wait is counted (main thread); pass it to :meth:`wait_end`, in a ``finally``.
        """
        if _get_ident() != self.main or not self.depth:  # (outside a section nothing is deferred: nothing to count)
            return False
        if self.deferred is not None:
            self.raise_deferred()
        self.waiting += 1
        return True

    def envs_begin(self) -> bool:
        """A wait that runs envs in the calling process starts (``DummyVecEnv``, ``parent_envs``): as
        :meth:`wait_begin`, except that an interrupt landing in vecenv's own code between the envs' calls (a
        row's copy, an info's) is deferred, since the env whose call returned has stepped. Its caller's code must
        be registered in :data:`ENVS_WAIT_OWNERS`.

        :return: whether the wait is counted; pass it to :meth:`envs_end`, in a ``finally``.
        """
        counted = self.wait_begin()
        if counted:
            self.envs_waiting += 1
        return counted

    def envs_end(self, counted: bool) -> None:
        """The wait of :meth:`envs_begin` is over."""
        if counted and self.envs_waiting:  # (see wait_end)
            self.waiting -= 1
            self.envs_waiting -= 1

    def wait_end(self, counted: bool) -> None:
        """The wait is over: interrupts are deferred again (the count drops before anything else runs, so an
        interrupt arriving now cannot leave it raised). A wait begun before this process was forked from its parent
        is not counted here (the child starts with none)."""
        if counted and self.waiting:
            self.waiting -= 1

    def run_deferring(self, function: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """Run ``function`` as a section also where no vector env is open yet (a constructor starting its worker
        processes): a Ctrl-C arriving meanwhile is raised as it returns, once what it started is recorded (a
        child forked but not yet known could not be ended).

        :return: what ``function`` returns.
        """
        self.acquire()
        try:
            counted = self.enter()
            try:
                return function(*args, **kwargs)
            finally:
                self.leave(counted)
        finally:
            self.release()

    def run_waiting(self, function: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """Run code that is not vecenv's (another library's vector env) as a wait: Ctrl-C is raised in it at once.

        :return: what ``function`` returns.
        """
        counted = self.wait_begin()
        try:
            return function(*args, **kwargs)
        finally:
            self.wait_end(counted)

    def raise_deferred(self) -> None:
        """Deliver the deferred interrupt now: Python's handler raises ``KeyboardInterrupt``; a program's own handler
        may return instead (a "stop after this iteration" flag), and then so does this."""
        deferred, self.deferred = self.deferred, None
        if deferred is not None:
            self._chain(*deferred)

    def after_fork(self) -> None:
        """In a forked child: its own main thread, no sections, nothing installed by it. A child forked inside a
        section (an env that calls ``os.fork()``) goes on through the parent's frames: their ends count nothing."""
        self.main = threading.main_thread().ident
        self.depth = self.waiting = self.envs_waiting = self.users = 0
        self._suspended = []
        self.deferred = None


#: the process's interrupt guard
GUARD = InterruptGuard()
os.register_at_fork(after_in_child=GUARD.after_fork)


#: the code of the functions that run envs in the calling process inside :meth:`InterruptGuard.envs_begin`
ENVS_WAIT_OWNERS: set[CodeType] = set()
_VECENV_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
#: the files of the standard library's code that vecenv's bookkeeping calls between the envs' calls (the deep
#: copies of infos and terminal observations); what they call in turn (a ``__deepcopy__`` of the program's) is not
_BOOKKEEPING_HELPERS = frozenset({copy.deepcopy.__code__.co_filename, copyreg.constructor.__code__.co_filename})


def is_vecenvs(function: Any) -> bool:
    """Whether ``function`` is vecenv's own code (its code object's file is in the package; a wrapper made with
    ``functools.wraps`` around one of vecenv's methods is not)."""
    try:
        if function in _VECENVS_FUNCTIONS:
            return True
        own: bool = function.__code__.co_filename.startswith(_VECENV_DIR)
    except (AttributeError, TypeError):  # (not a Python function; an unhashable callable)
        return False
    if own:
        _VECENVS_FUNCTIONS.add(function)
    return own


#: vecenv's functions met by :func:`is_vecenvs` (its classes' methods: remembering them keeps nothing alive; the
#: functions of a program's own classes are not remembered, and are freed with them)
_VECENVS_FUNCTIONS: set[Any] = set()


def in_bookkeeping_between_envs(frame: FrameType | None) -> bool:
    """Whether an interrupt that landed in ``frame``, during a wait of :meth:`InterruptGuard.envs_begin`, landed
    in vecenv's own bookkeeping between the envs' calls: every frame from ``frame`` up to the wait's owner
    (:data:`ENVS_WAIT_OWNERS`) is vecenv's or one of the standard library's helpers it calls (``copy.deepcopy``).
    In an env's code, or any other code of the program (a ``__deepcopy__`` that ``copy.deepcopy`` calls), it is
    raised at once."""
    while frame is not None:
        code = frame.f_code
        filename = code.co_filename
        if filename.startswith(_VECENV_DIR):
            if code in ENVS_WAIT_OWNERS:
                return True
        elif filename not in _BOOKKEEPING_HELPERS:
            return False
        frame = frame.f_back
    return False


def guarded(raise_at_end: bool = True) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Run the decorated method as a section of :data:`GUARD` (see the module docstring).

    :param raise_at_end: see :meth:`InterruptGuard.leave`.
    """

    def decorate(method: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(method)
        def section(*args: P.args, **kwargs: P.kwargs) -> R:
            counted = GUARD.enter()
            try:
                return method(*args, **kwargs)
            finally:
                GUARD.leave(counted, raise_at_end)

        return section

    return decorate
