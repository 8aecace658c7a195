"""The abstract :class:`VecEnv` (Stable-Baselines3's ``base_vec_env``), its type aliases and helpers.

Semantics follow ``stable_baselines3.common.vec_env.base_vec_env`` (SB3 2.9): the "VecEnv API" is
``reset() -> obs`` and ``step(actions) -> (obs, rewards, dones, infos)`` with automatic reset.
"""

from __future__ import annotations

import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from copy import deepcopy
from typing import Any, Union

import cloudpickle
import gymnasium as gym
import numpy as np
from gymnasium import spaces

from vecenv.errors import ClosedVecEnvError, dumps_keeping_file_names
from vecenv.interrupts import GUARD, is_vecenvs
from vecenv.stats import StepStats

__all__ = [
    "CloudpickleWrapper",
    "VecEnv",
    "VecEnvIndices",
    "VecEnvObs",
    "VecEnvStepReturn",
    "tile_images",
]

#: Which sub-envs a call addresses: ``None`` (all), one index, or an iterable of indices.
VecEnvIndices = Union[None, int, Iterable[int]]  # noqa: UP007
#: A batch of observations: an array ``(num_envs, *obs_shape)``, or a dict / tuple of such arrays.
VecEnvObs = Union[np.ndarray, dict[str, np.ndarray], tuple[np.ndarray, ...]]  # noqa: UP007
#: What :meth:`VecEnv.step` returns: ``(obs, rewards, dones, infos)``.
VecEnvStepReturn = tuple[VecEnvObs, np.ndarray, np.ndarray, list[dict]]


def _halves_are_vecenvs(venv: Any) -> bool:
    """Whether ``venv.step()`` runs only vecenv's code around its waits: at every level of the stack (``venv``,
    then each ``venv`` attribute down), ``step_async`` and ``step_wait`` are vecenv's, not a subclass's, a
    mixin's, set on the class later or on the instance. Only such a step is one Ctrl-C section: code of the
    caller's in it would otherwise run with Ctrl-C deferred (and a wait of its own could not be interrupted)."""
    for _ in range(64):  # (a stack is a few levels deep; a cycle is not vecenv's)
        if venv is None:
            return True
        attributes = getattr(venv, "__dict__", _NO_ATTRIBUTES)
        if "step_async" in attributes or "step_wait" in attributes:
            return False
        cls = type(venv)
        if not (is_vecenvs(getattr(cls, "step_async", None)) and is_vecenvs(getattr(cls, "step_wait", None))):
            return False
        venv = attributes.get("venv")
    return False


_NO_ATTRIBUTES: dict[str, Any] = {}


def _step_is_vecenvs(venv: Any) -> bool:
    """Whether ``venv.step()`` is vecenv's own (not overridden by a subclass or set on the instance) and runs only
    vecenv's code around its waits (:func:`_halves_are_vecenvs`): what a caller may run inside its own section."""
    return (
        "step" not in getattr(venv, "__dict__", _NO_ATTRIBUTES)
        and is_vecenvs(getattr(type(venv), "step", None))
        and _halves_are_vecenvs(venv)
    )


def checked_seed(seed: Any) -> int | None:
    """One env's seed: None, or an integer (Python's or NumPy's) as a Python ``int``.

    :raises gymnasium.error.Error: for anything else (a float would be truncated): Gymnasium's error and message.
    """
    if seed is None:
        return None
    if isinstance(seed, (int, np.integer)):
        return int(seed)
    raise gym.error.Error(f"Seed must be a python integer, actual type: {type(seed)}")


def tile_images(images_nhwc: Sequence[np.ndarray]) -> np.ndarray:
    """Tile ``N`` images of equal size into one near-square grid image, padding with black.

    The grid has ``ceil(sqrt(N))`` rows and ``ceil(N / rows)`` columns, filled row by row.

    :param images_nhwc: ``N`` images of shape ``(H, W, C)`` (or an array ``(N, H, W, C)``).
    :return: one image of shape ``(rows * H, cols * W, C)`` and the input dtype.
    :raises ValueError: if the images are not all ``(H, W, C)`` arrays of one shape.

    >>> tile_images(np.ones((3, 2, 2, 3), dtype=np.uint8)).shape
    (4, 4, 3)
    """
    img_nhwc = np.asarray(images_nhwc)
    if img_nhwc.ndim != 4:
        raise ValueError(
            f"tile_images expected N images of shape (H, W, C), i.e. an array of ndim 4, got shape {img_nhwc.shape}"
        )
    n_images, height, width, n_channels = img_nhwc.shape
    rows = int(np.ceil(np.sqrt(n_images)))
    cols = int(np.ceil(float(n_images) / rows))
    padded = np.zeros((rows * cols, height, width, n_channels), dtype=img_nhwc.dtype)
    padded[:n_images] = img_nhwc
    grid = padded.reshape((rows, cols, height, width, n_channels)).transpose(0, 2, 1, 3, 4)
    return grid.reshape((rows * height, cols * width, n_channels))


def is_int(value: Any) -> bool:
    """Whether ``value`` is a Python or numpy integer (a bool is not)."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def any_set(flags: np.ndarray) -> bool:
    """Whether a bool array has a true flag, read from its bytes: about 10 times cheaper than ``flags.any()`` or
    ``np.flatnonzero`` on a step's few flags (what the step path and the wrappers ask at every step)."""
    return bool(flags.tobytes().strip(b"\x00"))


def done_indices(dones: Any) -> list[int]:
    """The positions of the true flags of ``dones`` (a step's dones: a bool array, or any sequence), as ints
    (most steps have none: :func:`any_set` tells)."""
    if type(dones) is np.ndarray and dones.dtype == np.bool_ and not any_set(dones):
        return []
    indices: list[int] = np.flatnonzero(dones).tolist()
    return indices


def check_open(venv: Any, what: str) -> None:
    """Raise :class:`~vecenv.ClosedVecEnvError` for a call to ``what()`` if ``venv.closed``."""
    if venv.closed:
        raise ClosedVecEnvError(f"Cannot call {what}() on a closed {type(venv).__name__}; create a new one.")


class VecEnv(ABC):
    """An abstract vectorized environment: ``num_envs`` copies of an env stepped as one batch.

    Semantics follow Stable-Baselines3's ``VecEnv``: observations are batched along a first axis of
    length ``num_envs``, envs reset automatically at episode end, and the last observation of a
    finished episode is in ``infos[i]["terminal_observation"]``.

    :param num_envs: number of sub-environments.
    :param observation_space: the observation space of ONE sub-environment.
    :param action_space: the action space of ONE sub-environment.
    """

    #: whether the envs may have different ``render_mode`` s, the vector env then taking env 0's (Gymnasium's
    #: vector envs; CleanRL renders env 0 alone to record its videos); False: they must agree (SB3's rule)
    mixed_render_modes = False

    def __init__(self, num_envs: int, observation_space: spaces.Space, action_space: spaces.Space) -> None:
        self.num_envs = num_envs
        self.observation_space = observation_space
        self.action_space = action_space
        #: Info dict returned by each env's last reset (autoresets included).
        self.reset_infos: list[dict[str, Any]] = [{} for _ in range(num_envs)]
        # seeds and options used by the next reset() only
        self._seeds: list[int | None] = [None for _ in range(num_envs)]
        self._options: list[dict[str, Any]] = [{} for _ in range(num_envs)]

        try:
            render_modes = self.get_attr("render_mode")
        except AttributeError:
            warnings.warn(
                "The `render_mode` attribute is not defined in your environment. It will be set to None.",
                stacklevel=2,
            )
            render_modes = [None for _ in range(num_envs)]
        if not self.mixed_render_modes:
            assert all(render_mode == render_modes[0] for render_mode in render_modes), (
                "render_mode mode should be the same for all environments"
            )
        self.render_mode: str | None = render_modes[0]

        modes: list[str] = []
        if self.render_mode is not None:
            # an rgb_array env can still be shown in "human" mode (with OpenCV)
            modes = ["human", "rgb_array"] if self.render_mode == "rgb_array" else [self.render_mode]
        self.metadata: dict[str, Any] = {"render_modes": modes}

    def _reset_seeds(self) -> None:
        """Forget the seeds set by :meth:`seed` (they apply to one reset only)."""
        self._seeds = [None for _ in range(self.num_envs)]

    def _reset_options(self) -> None:
        """Forget the options set by :meth:`set_options` (they apply to one reset only)."""
        self._options = [{} for _ in range(self.num_envs)]

    @abstractmethod
    def reset(self) -> VecEnvObs:
        """Reset all sub-environments and return the batch of first observations.

        Seeds from :meth:`seed` and options from :meth:`set_options` are used by this reset, then forgotten.

        :return: observations, ``(num_envs, *obs_shape)`` (a dict / tuple of such arrays for Dict / Tuple spaces).
        """

    @abstractmethod
    def step_async(self, actions: np.ndarray) -> None:
        """Tell all sub-environments to start a step with ``actions`` (collect it with :meth:`step_wait`).

        :param actions: one action per env, ``(num_envs, *action_shape)``.
        """

    @abstractmethod
    def step_wait(self) -> VecEnvStepReturn:
        """Wait for the step started by :meth:`step_async`.

        :return: ``(obs, rewards, dones, infos)``: obs ``(num_envs, *obs_shape)``, rewards ``(num_envs,)`` (float32 in
            SB3's and vecenv's vector envs, unless their ``rewards_dtype`` says otherwise), dones bool
            ``(num_envs,)``, infos a list of ``num_envs`` dicts.
        """

    @abstractmethod
    def close(self) -> None:
        """Release the sub-environments and any processes or resources they use."""

    def step_stats(self, reset: bool = False) -> StepStats:
        """Where the vector env's time went (:class:`vecenv.stats.StepStats`): vecenv's own vector envs and
        every wrapper on them answer; see :meth:`vecenv.DummyVecEnv.step_stats`.

        :param reset: start the accounts again from zero once read.
        :raises NotImplementedError: for a vector env that keeps no accounts (e.g. one made by
            :func:`vecenv.adapters.from_gymnasium`).
        """
        raise NotImplementedError(
            f"{type(self).__name__} keeps no step accounts: step_stats() needs one of vecenv's vector envs "
            "(DummyVecEnv, SubprocVecEnv, RayVecEnv), wrapped or not"
        )

    def has_attr(self, attr_name: str) -> bool:
        """Whether every sub-environment has attribute ``attr_name`` (searching its wrapper chain).

        :param attr_name: the attribute name.
        :return: True if all envs have it.
        """
        try:
            self.get_attr(attr_name)
            return True
        except AttributeError:
            return False

    @abstractmethod
    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        """Return attribute ``attr_name`` of the sub-environments at ``indices``.

        :param attr_name: the attribute name (looked up through the gymnasium wrapper chain).
        :param indices: envs to query (None: all).
        :return: one value per addressed env.
        """

    @abstractmethod
    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        """Set attribute ``attr_name`` to ``value`` on the sub-environments at ``indices``.

        :param attr_name: the attribute name (set on the outermost wrapper, as SB3 does).
        :param value: the value to assign.
        :param indices: envs to modify (None: all).
        """

    @abstractmethod
    def env_method(
        self, method_name: str, *method_args: Any, indices: VecEnvIndices = None, **method_kwargs: Any
    ) -> list[Any]:
        """Call ``method_name(*method_args, **method_kwargs)`` on the sub-environments at ``indices``.

        :param method_name: the method name (looked up through the gymnasium wrapper chain).
        :param indices: envs to call (None: all).
        :return: one return value per addressed env.
        """

    @abstractmethod
    def env_is_wrapped(self, wrapper_class: type[gym.Wrapper], indices: VecEnvIndices = None) -> list[bool]:
        """Whether each addressed sub-environment is wrapped (anywhere in its chain) with ``wrapper_class``.

        SB3's ``Monitor`` and vecenv's ``Monitor`` stand for each other, so SB3's ``evaluate_policy`` finds
        the ``Monitor`` that :func:`vecenv.make_vec_env` adds.

        :param wrapper_class: a ``gymnasium.Wrapper`` subclass.
        :param indices: envs to check (None: all).
        :return: one bool per addressed env.
        """

    def step(self, actions: np.ndarray) -> VecEnvStepReturn:
        """Step all sub-environments: :meth:`step_async` then :meth:`step_wait`.

        A Ctrl-C never lands between the two halves (see :mod:`vecenv.interrupts`): raised while the envs step,
        it leaves the step to be completed by the next call, as an env's exception does. That holds where the
        halves of every level of the stack are vecenv's; a stack with a ``step_async`` / ``step_wait`` of
        yours in it (a subclass, your own wrapper) is stepped as SB3 steps it, so that Ctrl-C interrupts your
        code at once (vecenv's own vector env still defers it across its bookkeeping).

        :param actions: one action per env, ``(num_envs, *action_shape)``.
        :return: ``(obs, rewards, dones, infos)`` as :meth:`step_wait`.
        """
        if not _halves_are_vecenvs(self):
            self.step_async(actions)
            return self.step_wait()
        counted = GUARD.enter()
        try:
            self.step_async(actions)
            return self.step_wait()
        finally:
            GUARD.leave(counted, raise_at_end=False)

    def get_images(self) -> Sequence[np.ndarray | None]:
        """Return one RGB frame per sub-environment (``rgb_array`` render mode)."""
        raise NotImplementedError

    def render(self, mode: str | None = None) -> np.ndarray | None:
        """Render the sub-environments (SB3's rules; the render mode is fixed when the envs are built).

        In ``rgb_array`` mode the frames of all envs are tiled into one image (:func:`tile_images`) and
        returned; ``mode="human"`` on an ``rgb_array`` env shows that image in an OpenCV window.
        A ``mode`` that differs from :attr:`render_mode` (other than that case) warns and returns None.

        :param mode: None (use :attr:`render_mode`), ``"human"`` or ``"rgb_array"``.
        :return: the tiled ``(H, W, 3)`` uint8 image in ``rgb_array`` mode, else None.
        """
        if mode == "human" and self.render_mode != mode:
            if self.render_mode != "rgb_array":
                warnings.warn(
                    f"You tried to render a VecEnv with mode='{mode}' "
                    "but the render mode defined when initializing the environment must be "
                    f"'human' or 'rgb_array', not '{self.render_mode}'.",
                    stacklevel=2,
                )
                return None
        elif mode and self.render_mode != mode:
            warnings.warn(
                f"Starting from gymnasium v0.26, render modes are determined during the initialization of the "
                f"environment. We allow to pass a mode argument to maintain a backwards compatible VecEnv API, but "
                f"the mode ({mode}) has to be the same as the environment render mode ({self.render_mode}) which is "
                "not the case.",
                stacklevel=2,
            )
            return None

        mode = mode or self.render_mode
        if mode is None:
            warnings.warn(
                "You tried to call render() but no `render_mode` was passed to the env constructor.", stacklevel=2
            )
            return None
        if self.render_mode == "human":
            self.env_method("render")
            return None
        if mode in ("rgb_array", "human"):
            bigimg = tile_images(self.get_images())  # type: ignore[arg-type]
            if mode == "human":
                import cv2  # imported on first use: worker processes never need it

                cv2.imshow("vecenv", bigimg[:, :, ::-1])
                cv2.waitKey(1)
                return None
            return bigimg
        self.env_method("render")
        return None

    def seed(self, seed: int | Sequence[int | None] | None = None) -> Sequence[int | None]:
        """Set the seeds used by the NEXT :meth:`reset` only: env ``i`` gets ``seed + i`` (SB3 semantics).

        Does not reset. With ``seed=None`` a random uint32 base is drawn so envs still get distinct seeds.

        :param seed: the base seed, None, or (as Gymnasium's ``reset(seed=[...])``) one seed or None per env.
        :return: the per-env seeds.
        :raises ValueError: if a sequence does not hold ``num_envs`` seeds.
        :raises gymnasium.error.Error: if a seed of a sequence is not an integer or None (Gymnasium's error).
        """
        if isinstance(seed, Sequence) and not isinstance(seed, str):
            if len(seed) != self.num_envs:
                raise ValueError(
                    f"seed([...]) must give one seed (or None) per env: expected {self.num_envs}, got {len(seed)}"
                )
            self._seeds = [checked_seed(s) for s in seed]
            return self._seeds
        if seed is None:
            seed = int(np.random.randint(0, np.iinfo(np.uint32).max, dtype=np.uint32))
        self._seeds = [seed + idx for idx in range(self.num_envs)]
        return self._seeds

    def set_options(self, options: list[dict] | dict | None = None) -> None:
        """Set the ``options`` passed to each env's NEXT :meth:`reset` only (deep-copied; SB3 semantics).

        :param options: one dict per env, one dict for all envs, or None (no options).
        :raises ValueError: if a list does not hold ``num_envs`` dicts (SB3 accepts it, and its next reset raises
            ``IndexError`` for a shorter list, or ignores the extra dicts of a longer one).
        """
        if options is None:
            options = {}
        if isinstance(options, dict):
            self._options = deepcopy([options] * self.num_envs)
            return
        if len(options) != self.num_envs:
            raise ValueError(
                f"set_options([...]) must give one dict per env: expected {self.num_envs}, got {len(options)} "
                "(pass one dict to give every env the same options)"
            )
        self._options = deepcopy(options)

    @property
    def unwrapped(self) -> VecEnv:
        """The innermost vectorized environment (this one, unless it is a :class:`~vecenv.VecEnvWrapper`)."""
        return self

    def getattr_depth_check(self, name: str, already_found: bool) -> str | None:
        """Name of this class if it has attribute ``name`` that a wrapper above already found (SB3's shadowing check).

        :param name: attribute name.
        :param already_found: whether a wrapper above has the attribute.
        :return: ``"module.Class"`` of the shadowed level, or None.
        """
        if hasattr(self, name) and already_found:
            return f"{type(self).__module__}.{type(self).__name__}"
        return None

    def _get_indices(self, indices: VecEnvIndices) -> Iterable[int]:
        """Turn ``indices`` (None, int or iterable) into an iterable of env indices."""
        if indices is None:
            return range(self.num_envs)
        if isinstance(indices, (int, np.integer)):
            return [int(indices)]
        return indices

    def _normalize_indices(self, indices: VecEnvIndices) -> list[int]:
        """``indices`` as a list of env indices in ``0..num_envs-1`` (negative ones count from the end).

        :raises TypeError: if an element is not an integer.
        :raises IndexError: if an index is outside ``-num_envs..num_envs-1``.
        """
        n = self.num_envs
        normalized = []
        for index in self._get_indices(indices):
            if not is_int(index):
                raise TypeError(f"indices must be None, an int or an iterable of ints, got element {index!r}")
            if not -n <= index < n:
                raise IndexError(f"env index {index} is out of range for a vector env with num_envs={n}")
            normalized.append(int(index) % n)
        return normalized


class EnvFactories:
    """A group's env factories, each pickled on its own with cloudpickle (keeping file names, as
    :class:`CloudpickleWrapper`), so that every env built from them in another process gets its own copy of what
    its factory captured, as with one process per env (SB3's ``SubprocVecEnv``, Gymnasium's
    ``AsyncVectorEnv``): a list, a dict or a random generator closed over by several factories is not shared
    by their envs. Unpickled, :attr:`var` is the list of factories. (Where nothing is pickled, under the fork
    start method, the envs of one worker share such objects, as the envs of ``DummyVecEnv`` do.)

    :param env_fns: the factories.
    """

    def __init__(self, env_fns: Sequence[Callable[[], Any]]) -> None:
        self.var = list(env_fns)

    def __getstate__(self) -> Any:
        pickled: dict[int, bytes] = {}  # one pickle per distinct factory object (``[make_env] * n``), loaded n times
        for env_fn in self.var:
            if id(env_fn) not in pickled:
                pickled[id(env_fn)] = dumps_keeping_file_names(env_fn)
        return [pickled[id(env_fn)] for env_fn in self.var]

    def __setstate__(self, pickled: list[bytes]) -> None:
        self.var = [cloudpickle.loads(data) for data in pickled]


class CloudpickleWrapper:
    """Holds any object and pickles it with cloudpickle (so lambdas and closures reach worker processes).

    The code that cloudpickle pickles by value (the env classes and functions of the main script, local
    functions) keeps its file name (:func:`~vecenv.errors.dumps_keeping_file_names`), so that a worker's
    traceback names the script and shows its source lines.

    :param var: the object to wrap, e.g. an env factory.
    """

    def __init__(self, var: Any) -> None:
        self.var = var

    def __getstate__(self) -> Any:
        return dumps_keeping_file_names(self.var)

    def __setstate__(self, var: Any) -> None:
        self.var = cloudpickle.loads(var)
