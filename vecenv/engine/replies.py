"""Waiting for workers' replies through the :class:`~vecenv.workers.Worker` interface, and collecting them in the
order they arrive (so a worker that died is seen at once, even beside one stuck in a long env step)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Sequence
from operator import methodcaller
from typing import Any

from vecenv.errors import UncopyableInfoError, WorkerDiedError, add_other_errors
from vecenv.stats import StepClock
from vecenv.workers import Worker

__all__ = ["call_all", "gather", "next_ready", "ready_order", "wait_ready"]


def wait_ready(workers: Sequence[Worker], timeout: float | None, clock: StepClock | None = None) -> list[int]:
    """The positions of ``workers`` (each with a request pending) whose reply is ready or that ended, waiting up
    to ``timeout`` seconds for one; empty when the timeout passed. Each transport waits its own way
    (:meth:`Worker.wait_any`); workers of different transports are polled. With ``clock``, the time spent
    waiting is added to its ``wait``."""
    waits = {type(worker).wait_any for worker in workers}
    wait = waits.pop() if len(waits) == 1 else Worker.wait_any
    if clock is None:
        return wait(workers, timeout)
    started = time.perf_counter()
    try:
        return wait(workers, timeout)
    finally:
        clock.wait += time.perf_counter() - started


def ready_order(workers: Sequence[Worker], clock: StepClock | None = None) -> Iterator[int]:
    """The positions ``0..len(workers)-1`` in the order the workers' replies become ready to collect.

    Workers that never block (in-process, or nothing pending) come first, in order; then the others as their
    replies arrive or they end, so a worker that died is seen at once even while another one is still inside a
    long env step. When nothing arrives before the earliest reply deadline (``step_timeout`` /
    ``reset_timeout``), that worker comes next: its ``recv`` enforces the timeout. With ``clock`` (a
    :class:`vecenv.stats.StepClock`), the time spent waiting is added to its ``wait``.
    """
    waiting: list[int] = []
    for k, worker in enumerate(workers):
        if worker.pending is None or not worker.blocks:
            yield k
        else:
            waiting.append(k)
    while len(waiting) > 1:
        chosen = [waiting[p] for p in next_ready([workers[k] for k in waiting], clock)]
        waiting = [k for k in waiting if k not in chosen]
        yield from chosen
    yield from waiting


def next_ready(workers: Sequence[Worker], clock: StepClock | None = None) -> list[int]:
    """The positions of ``workers`` (each waiting for a reply) to collect next: those whose reply is ready or that
    ended, or, when nothing arrives before the earliest reply deadline (``step_timeout`` / ``reset_timeout``),
    that worker alone, whose ``recv`` then enforces its timeout. Never empty; waits without end only where no
    worker has a deadline. ``clock``: see :func:`ready_order`."""
    deadlines = [d for d in (worker.reply_deadline for worker in workers) if d is not None]
    timeout = None if not deadlines else max(0.0, min(deadlines) - time.monotonic())
    ready = wait_ready(workers, timeout, clock)
    if not ready:  # the earliest deadline passed: that worker's recv times out now
        ready = [min(range(len(workers)), key=lambda p: workers[p].reply_deadline or math.inf)]
    return ready


def call_all(
    fn: Callable[[Any], Any], items: Sequence[Any], workers: Sequence[Worker], clock: StepClock | None = None
) -> list[Any]:
    """``fn(item)`` for every item, in the order their workers' replies arrive (``workers[k]`` answers
    ``items[k]``), even if some fail (so every worker's reply is drained), then raise the first error (the others
    are recorded on it: :func:`vecenv.errors.other_errors`; it also names the values that the others'
    :class:`~vecenv.errors.UncopyableInfoError` name); results are in the order of ``items``.

    A :class:`~vecenv.errors.WorkerDiedError` propagates at once, without waiting for the other workers (one
    of them may be stuck in a long env step): their replies are collected or discarded by the next request.
    So do KeyboardInterrupt and SystemExit. ``clock``: see :func:`ready_order`.
    """
    results: list[Any] = [None] * len(items)
    errors: list[BaseException] = []
    for k in ready_order(workers, clock):
        try:
            results[k] = fn(items[k])
        except WorkerDiedError:
            raise
        except Exception as exc:
            if errors and isinstance(errors[0], UncopyableInfoError) and isinstance(exc, UncopyableInfoError):
                errors[0].absorb(exc)  # one error names every value a step left out
            else:
                errors.append(exc)
    if errors:
        if len(errors) > 1:
            add_other_errors(errors[0], errors[1:])
        raise errors[0]
    return results


def gather(workers: Sequence[Worker]) -> list[Any]:
    """``recv()`` from every worker; if some fail, the others are still drained, then the first error is raised."""
    return call_all(methodcaller("recv"), workers, workers)
