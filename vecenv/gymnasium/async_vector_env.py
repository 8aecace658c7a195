"""``vecenv.gymnasium.AsyncVectorEnv``: Gymnasium's ``AsyncVectorEnv`` on vecenv's :class:`~vecenv.SubprocVecEnv`."""

from __future__ import annotations

import contextlib
import copy
import multiprocessing
import traceback
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import logger, spaces
from gymnasium.core import ActType, ObsType, RenderFrame
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.async_vector_env import AsyncState

from vecenv.errors import AlreadyPendingCallError, NoAsyncCallError, RemoteTraceback, env_index_of, other_errors
from vecenv.gymnasium.async_backend import (
    GymSubprocVecEnv,
    check_async_arguments,
    checked_env_fns,
    observation_spaces,
    spaces_of_different_envs,
    start_backend,
    worker_count,
)
from vecenv.gymnasium.observation_modes import check_observation_mode
from vecenv.gymnasium.vector_env import VecenvVectorEnv, values_per_env
from vecenv.interrupts import guarded
from vecenv.protocol import Command
from vecenv.vec_env import CallRequests, ResetRequests

__all__ = ["AsyncVectorEnv", "log_env_errors"]

#: names Gymnasium's AsyncVectorEnv refuses in ``call`` (its worker commands)
_ASYNC_RESERVED_CALLS = ("reset", "step", "close", "_setattr", "_check_spaces")


def _env_traceback(error: BaseException) -> str:
    """The traceback of an env's ``error`` as the process running the env formatted it, without vecenv's notes."""
    cause = error.__cause__
    text = cause.tb if isinstance(cause, RemoteTraceback) else "".join(traceback.format_exception(error))
    lines = text.splitlines(keepends=True)
    while lines and lines[-1].startswith("vecenv: "):
        lines.pop()
    return "".join(lines)


def log_env_errors(error: BaseException) -> None:
    """Log the envs' errors of a failed request as Gymnasium's ``AsyncVectorEnv`` does before raising one
    (``gymnasium.logger.error``, which warns): for each env that raised, ``Received the following error from
    Worker-{env index} - Shutting it down`` and the env's traceback; then ``Raising the last exception back to the
    main process.``. ``error``, the one raised, comes last, after the errors of the other workers (see
    :func:`vecenv.errors.other_errors`). Errors that no env raised (a worker that died, a time-out) are not logged.

    :param error: the error the request raised.
    """
    env_errors = [e for e in (*other_errors(error), error) if env_index_of(e) is not None]
    for env_error in env_errors:
        logger.error(f"Received the following error from Worker-{env_index_of(env_error)} - Shutting it down")
        logger.error(f"{_env_traceback(env_error)}")
    if env_errors:
        logger.error("Raising the last exception back to the main process.")


@contextlib.contextmanager
def _logging_env_errors() -> Iterator[None]:
    """Collect a request's replies inside this: an env's error is logged (:func:`log_env_errors`), then raised."""
    try:
        yield
    except Exception as error:
        log_env_errors(error)
        raise


# Gymnasium's VectorEnv is listed as a direct base (it is VecenvVectorEnv's base too, so the MRO is unchanged):
# libraries that recognise a Gymnasium vector env by a class's direct bases (skrl's wrap_env) see one
class AsyncVectorEnv(VecenvVectorEnv[ObsType, ActType], VectorEnv[ObsType, ActType, np.ndarray]):
    """``gymnasium.vector.AsyncVectorEnv`` on vecenv's :class:`~vecenv.SubprocVecEnv`: several envs per worker
    process, observations, rewards, flags and actions in shared memory, one small message per worker per step.

    Same constructor, methods, return values and errors as Gymnasium's class (see :class:`SyncVectorEnv` for
    ``reset`` / ``step``), including ``reset_async`` / ``reset_wait``, ``step_async`` / ``step_wait``,
    ``call_async`` / ``call_wait`` with ``timeout``. An exception raised by an env reaches you with its own type,
    a note naming the env, and the worker's traceback chained, after Gymnasium's log of it
    (:func:`log_env_errors`); the vector env stays usable.

    .. warning:: With the ``forkserver`` (vecenv's default) and ``spawn`` contexts, scripts must guard their
        entry point with ``if __name__ == "__main__":``; env factories are sent to the workers with cloudpickle.

    :param env_fns: callables that each build a new ``gymnasium.Env``.
    :param shared_memory: which observation spaces are accepted, as Gymnasium: with True, spaces Gymnasium
        cannot share are refused (Graph, Sequence: ``TypeError``; custom spaces: ``ValueError`` from a
        ``CustomSpaceError``); False accepts every space. Either way vecenv keeps rewards, flags, actions and
        fixed-size observations in shared memory and pickles the rest (Text, Sequence, ...).
    :param copy: as :class:`SyncVectorEnv` (observations are always fresh objects here).
    :param context: the multiprocessing start method (``"fork"``, ``"forkserver"``, ``"spawn"``); None: vecenv's
        default, ``"forkserver"`` where available, else ``"spawn"``.
    :param daemon: must be True (worker processes are daemonic and end with the parent).
    :param worker: must be None (custom Gymnasium worker functions do not apply to vecenv's workers).
    :param observation_mode: as :class:`SyncVectorEnv`. ``"different"`` builds every env once in this process to
        read its space (as Gymnasium does), then closes it.
    :param autoreset_mode: a :class:`gymnasium.vector.AutoresetMode` or its value (``NEXT_STEP`` by default).
    :param max_concurrency: at most this many envs run ``step`` / ``reset`` at a time: caps the number of
        worker processes (each steps its envs in sequence; with ``parent_envs`` this process counts as one).
        None: no cap.
    :param n_workers: number of worker processes (vecenv's; None: one per CPU core available, at most
        ``len(env_fns)``). ``n_workers=len(env_fns)`` gives Gymnasium's one process per env.
    :param parent_envs: vecenv's: how many envs (the first ones) this process steps itself, in
        :meth:`step_wait`, while the workers step the rest (default 0; with it, ``n_workers=None`` means one
        worker per core minus one). See :class:`vecenv.SubprocVecEnv`: the parent's envs are not isolated, and a
        ``timeout`` of :meth:`step_wait` / :meth:`reset_wait` / :meth:`call_wait` waits for the workers only,
        before this process steps its own envs (so with a timeout the two no longer overlap).
    :raises ValueError: for ``worker`` not None, ``daemon=False``, an invalid ``max_concurrency``, ``context``,
        ``observation_mode``, ``autoreset_mode`` or ``parent_envs``, and spaces shared memory cannot hold (see
        above).
    :raises RuntimeError: if the envs' spaces differ (Gymnasium's messages, vecenv's details chained).
    """

    _final_info_first = True
    #: the pending call's requests, or the error ``call_wait`` raises for a name Gymnasium refuses
    _pending_call: CallRequests | ValueError

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env]],
        shared_memory: bool = True,
        copy: bool = True,
        context: str | None = None,
        daemon: bool = True,
        worker: Callable[..., None] | None = None,
        observation_mode: str | tuple[spaces.Space, spaces.Space] = "same",
        autoreset_mode: str | AutoresetMode = AutoresetMode.NEXT_STEP,
        max_concurrency: int | None = None,
        n_workers: int | None = None,
        parent_envs: int = 0,
    ) -> None:
        mode = autoreset_mode if isinstance(autoreset_mode, AutoresetMode) else AutoresetMode(autoreset_mode)
        check_async_arguments(max_concurrency, worker, daemon)
        given_spaces = check_observation_mode(observation_mode)
        if isinstance(env_fns, (str, bytes)) or not isinstance(env_fns, Iterable):
            raise TypeError(f"env_fns must be a list of callables returning a gymnasium.Env, got {env_fns!r}")
        fns = list(env_fns)
        if given_spaces is None and observation_mode == "different":
            given_spaces = spaces_of_different_envs(fns)
        if given_spaces is not None:
            fns = checked_env_fns(fns, given_spaces[1], shared_memory)
        venv = start_backend(fns, context, worker_count(n_workers, max_concurrency, parent_envs), mode, parent_envs)
        #: the envs this process steps itself answer calls with their own objects: they get and give copies
        self._parent_envs = parent_envs
        try:
            observation_space, single = observation_spaces(venv, given_spaces, shared_memory)
            metadata = venv.get_attr("metadata", indices=0)[0]
            self._setup(
                venv, env_fns, copy, observation_mode, mode, single, observation_space, dict(metadata), venv.render_mode
            )
        except BaseException:
            with contextlib.suppress(Exception):
                venv.close()
            raise
        self._sub: GymSubprocVecEnv = venv
        self.shared_memory = shared_memory
        self.context = context
        self.daemon = daemon
        self.worker = worker
        self.max_concurrency = max_concurrency
        self.n_workers = venv.n_workers
        self._state = AsyncState.DEFAULT
        self._reset_requests: ResetRequests = []
        self._reset_ids: list[int] | None = None

    @property
    def processes(self) -> list[multiprocessing.process.BaseProcess]:
        """The worker processes (one per group of envs)."""
        return list(self._sub.processes)

    def _check_default(self, what: str, period: str = ".") -> None:
        if self._state != AsyncState.DEFAULT:
            raise AlreadyPendingCallError(
                f"Calling `{what}` while waiting for a pending call to `{self._state.value}` to complete{period}",
                str(self._state.value),
            )

    def _expect_pending(self, state: AsyncState, what: str, started_by: str) -> None:
        """Raise Gymnasium's errors unless the env is open and ``state`` is pending (``what`` collects it)."""
        self._assert_is_running()
        if self._state != state:
            raise NoAsyncCallError(f"Calling `{what}` without any prior call to `{started_by}`.", state.value)

    def _wait(self, timeout: float | None, what: str) -> None:
        """Wait up to ``timeout`` s for every worker's reply, then leave the pending state; on time-out the call
        stays pending."""
        if timeout is not None and not self._venv.wait_until_ready(timeout):
            raise multiprocessing.TimeoutError(f"The call to `{what}` has timed out after {timeout} second(s).")
        self._state = AsyncState.DEFAULT

    # --- reset ----------------------------------------------------------------------------------------

    def reset(
        self,
        *,
        seed: int | list[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[ObsType, dict[str, Any]]:
        """Reset every env, or those of ``options["reset_mask"]``: :meth:`reset_async` then :meth:`reset_wait`.

        See :meth:`SyncVectorEnv.reset` for the arguments and the return value.

        :raises gymnasium.error.AlreadyPendingCallError: if another call is pending.
        """
        self.reset_async(seed=seed, options=options)
        return self.reset_wait()

    def reset_async(self, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None) -> None:
        """Start resetting every env, or those of ``options["reset_mask"]``; collect with :meth:`reset_wait`.

        :param seed: as :meth:`SyncVectorEnv.reset`.
        :param options: as :meth:`SyncVectorEnv.reset`.
        :raises ValueError: if a seed list does not have ``num_envs`` entries, or for a bad ``reset_mask``.
        :raises TypeError: if ``reset_mask`` is not a bool numpy array.
        :raises gymnasium.error.AlreadyPendingCallError: if another call is pending.
        :raises gymnasium.error.ClosedEnvironmentError: after :meth:`close`.
        """
        self._assert_is_running()
        seeds = self._seed_list(seed)
        self._check_default("reset_async", period="")
        env_ids, options = self._split_options(options)
        venv = self._venv
        self._load_reset_args(seeds, options, env_ids)
        try:
            requests = venv.start_reset(env_ids)
        finally:
            self._clear_reset_args()
        self._reset_requests, self._reset_ids = requests, env_ids
        self._state = AsyncState.WAITING_RESET

    def reset_wait(self, timeout: float | None = None) -> tuple[ObsType, dict[str, Any]]:
        """Collect the reset started by :meth:`reset_async`.

        :param timeout: seconds to wait at most (None: no limit).
        :return: ``(obs, infos)`` as :meth:`SyncVectorEnv.reset`.
        :raises gymnasium.error.NoAsyncCallError: without a pending :meth:`reset_async`.
        :raises multiprocessing.TimeoutError: if the envs did not finish within ``timeout`` (the reset stays
            pending: call :meth:`reset_wait` again).
        :raises Exception: the exception an env raised, with its own type.
        """
        self._expect_pending(AsyncState.WAITING_RESET, "reset_wait", "reset_async")
        self._wait(timeout, "reset_wait")
        with _logging_env_errors():
            self._venv.finish_reset(self._reset_requests)
        return self._reset_return(self._reset_ids)

    # --- step -----------------------------------------------------------------------------------------

    @guarded(raise_at_end=False)
    def step(self, actions: ActType) -> tuple[ObsType, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Step every env: :meth:`step_async` then :meth:`step_wait`.

        :param actions: an element of the batched :attr:`action_space` (see :meth:`SyncVectorEnv.step`).
        :return: ``(obs, rewards, terminations, truncations, infos)`` as :meth:`SyncVectorEnv.step`.
        :raises gymnasium.error.AlreadyPendingCallError: if another call is pending.
        :raises Exception: the exception an env raised, with its own type.
        """
        self.step_async(actions)
        return self.step_wait()

    @guarded(raise_at_end=False)
    def step_async(self, actions: ActType) -> None:
        """Start stepping every env with its action of the batch ``actions``; collect with :meth:`step_wait`.

        :param actions: an element of the batched :attr:`action_space` (see :meth:`SyncVectorEnv.step`).
        :raises gymnasium.error.AlreadyPendingCallError: if another call is pending.
        :raises ValueError: if ``actions`` does not hold one valid action per env (checked before anything is sent).
        :raises gymnasium.error.ClosedEnvironmentError: after :meth:`close`.
        """
        self._assert_is_running()
        self._check_default("step_async")
        self._send_step(self._convert_actions(actions))
        self._state = AsyncState.WAITING_STEP

    @guarded(raise_at_end=False)
    def step_wait(
        self, timeout: float | None = None
    ) -> tuple[ObsType, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Collect the step started by :meth:`step_async`.

        :param timeout: seconds to wait at most (None: no limit).
        :return: ``(obs, rewards, terminations, truncations, infos)`` as :meth:`SyncVectorEnv.step`.
        :raises gymnasium.error.NoAsyncCallError: without a pending :meth:`step_async`.
        :raises multiprocessing.TimeoutError: if the envs did not finish within ``timeout`` (the step stays
            pending: call :meth:`step_wait` again).
        :raises Exception: the exception an env raised, with its own type.
        """
        self._expect_pending(AsyncState.WAITING_STEP, "step_wait", "step_async")
        self._wait(timeout, "step_wait")
        with _logging_env_errors():
            obs, rewards, dones, step_infos = self._venv.step_wait()
        return self._step_return(obs, rewards, dones, step_infos)

    # --- calls into the envs ----------------------------------------------------------------------------

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Call method ``name`` of every env; for an attribute, its value: :meth:`call_async` then :meth:`call_wait`.

        :param name: method or attribute name (found through each env's wrappers).
        :return: one result per env (copies: results travel pickled).
        """
        self.call_async(name, *args, **kwargs)
        return self.call_wait()

    def call_async(self, name: str, /, *args: Any, **kwargs: Any) -> None:
        """Start calling method ``name(*args, **kwargs)`` of every env; collect with :meth:`call_wait`.

        :param name: method or attribute name (found through each env's wrappers).
        :param args: positional arguments of the call.
        :param kwargs: keyword arguments of the call.
        :raises gymnasium.error.AlreadyPendingCallError: if another call is pending.
        :raises gymnasium.error.ClosedEnvironmentError: after :meth:`close`.
        """
        self._assert_is_running()
        self._check_default("call_async")
        if name in _ASYNC_RESERVED_CALLS:
            self._pending_call = ValueError(
                f"Trying to call function `{name}` with `call`, use `{name}` directly instead."
            )
        else:
            self._pending_call = self._venv.start_call(Command.CALL, None, name, args, kwargs)
        self._state = AsyncState.WAITING_CALL

    def call_wait(self, timeout: float | None = None) -> tuple[Any, ...]:
        """Collect the call started by :meth:`call_async`.

        :param timeout: seconds to wait at most (None: no limit).
        :return: one result per env.
        :raises gymnasium.error.NoAsyncCallError: without a pending :meth:`call_async`.
        :raises multiprocessing.TimeoutError: if the envs did not answer within ``timeout`` (the call stays
            pending: call :meth:`call_wait` again).
        :raises ValueError: for ``reset``, ``step``, ``close`` (use those methods), as Gymnasium.
        :raises Exception: the exception an env raised (e.g. :class:`AttributeError`), with its own type.
        """
        self._expect_pending(AsyncState.WAITING_CALL, "call_wait", "call_async")
        pending_call = self._pending_call
        if isinstance(pending_call, ValueError):
            self._state = AsyncState.DEFAULT
            raise pending_call
        self._wait(timeout, "call_wait")
        with _logging_env_errors():
            results = self._venv.finish_call(pending_call)
        # the envs this process steps (parent_envs) answer with their own objects: copies, as pickled ones are
        return tuple(copy.deepcopy(result) if i < self._parent_envs else result for i, result in enumerate(results))

    def get_attr(self, name: str) -> tuple[Any, ...]:
        """Attribute ``name`` of every env (found through its wrappers), read once per env; a method is called:
        this is ``call(name)``, as Gymnasium's ``get_attr``.

        :param name: attribute name.
        :return: one value per env (copies: values travel pickled).
        :raises gymnasium.error.AlreadyPendingCallError: if another call is pending.
        :raises TypeError: if a value cannot be pickled (Gymnasium's message; a note names the attribute).
        :raises Exception: the exception reading the attribute raised (e.g. :class:`AttributeError`).
        """
        return self.call(name)

    def set_attr(self, name: str, values: list[Any] | tuple[Any, ...] | object) -> None:
        """Set attribute ``name`` of the envs with ``env.set_wrapper_attr`` (Gymnasium's rule).

        :param name: attribute name.
        :param values: a list or tuple with one value per env, or one value for every env.
        :raises ValueError: if a list or tuple does not hold ``num_envs`` values (Gymnasium's message).
        :raises gymnasium.error.AlreadyPendingCallError: if another call is pending.
        """
        self._assert_is_running()
        values = values_per_env(values, self.num_envs)
        self._check_default("set_attr")
        venv = self._venv
        # the envs this process steps (parent_envs) get copies, as the others get pickled ones
        values = [copy.deepcopy(value) if i < self._parent_envs else value for i, value in enumerate(values)]
        with _logging_env_errors():
            if all(value is values[0] for value in values):
                venv.env_method("set_wrapper_attr", name, values[0])
            else:
                for i, value in enumerate(values):
                    venv.env_method("set_wrapper_attr", name, value, indices=i)

    def render(self) -> tuple[RenderFrame, ...] | None:
        """``call("render")``: every env's ``render()``.

        :return: one frame per env (an ``(H, W, 3)`` uint8 array in ``rgb_array`` mode).
        """
        return self.call("render")

    def close_extras(self, timeout: float | None = None, terminate: bool = False) -> None:
        """End the worker processes (called once by ``close(timeout=..., terminate=...)``).

        A pending call is collected first (up to ``timeout`` seconds, with a warning, as Gymnasium); if it times
        out, or with ``terminate=True``, the workers are terminated without closing their envs. Otherwise every
        env is closed (vecenv waits about 5 s at most, then terminates the workers).

        :param timeout: seconds to wait for a pending call (None: no limit).
        :param terminate: terminate the workers at once.
        :raises Exception: the first error an env's ``close()`` raised.
        """
        # (a constructor that raised has nothing to close: Gymnasium < 1.3's __del__ calls close() on it too)
        if "_state" not in vars(self) or "_venv" not in vars(self):
            return
        timeout = 0 if terminate else timeout
        if self._state != AsyncState.DEFAULT:
            logger.warn(f"Calling `close` while waiting for a pending call to `{self._state.value}` to complete.")
            try:
                getattr(self, f"{self._state.value}_wait")(timeout)
            except multiprocessing.TimeoutError:
                terminate = True
            except Exception:  # the pending call's own error: we are closing anyway
                pass
            self._state = AsyncState.DEFAULT
        if terminate:
            for process in self._sub.processes:
                if process.is_alive():
                    process.terminate()
        self._venv.close()
