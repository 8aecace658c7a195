"""Per-space batching utilities, dispatched on the space type with :func:`functools.singledispatch`.

A *batch buffer* holds one observation per env: for a Box, Discrete, MultiDiscrete or MultiBinary
space it is an array of shape ``(n, *space.shape)`` in ``space.dtype``; for a Dict space a dict of
buffers in the space's key order; for a Tuple space a tuple of buffers. The functions recurse, so
nested Dict/Tuple spaces batch naturally; the SB3-style vector envs refuse nesting up front with
:func:`check_for_nested_spaces`, as Stable-Baselines3 does.

Support for another space type is one ``register`` call per function.
"""

from __future__ import annotations

import copy
import warnings
from collections import OrderedDict
from collections.abc import Callable, Mapping
from functools import singledispatch
from typing import TYPE_CHECKING, Any

import numpy as np
from gymnasium import spaces

from vecenv.actions import (  # re-exported: the action helpers lived here before vecenv.actions
    ARRAY_SPACES,
    fits_action_buffer,
    make_action_writer,
    make_actions_checker,
    num_actions,
    split_actions,
    write_actions,
)

if TYPE_CHECKING:
    from vecenv.base import VecEnvObs

__all__ = [
    "ARRAY_SPACES",
    "batch_copy",
    "check_for_nested_spaces",
    "create_batch_buffer",
    "dict_to_obs",
    "fits_action_buffer",
    "make_action_writer",
    "make_actions_checker",
    "make_obs_writer",
    "make_row_reader",
    "make_row_writer",
    "num_actions",
    "obs_space_info",
    "split_actions",
    "write_actions",
]


# --- buffers ------------------------------------------------------------------------------------


#: ``alloc(shape, dtype) -> zeroed array``: where the arrays of a batch buffer live (memory or shared memory).
Allocator = Callable[[tuple[int, ...], np.dtype], np.ndarray]


def _zeros(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    return np.zeros(shape, dtype=dtype)


@singledispatch
def create_batch_buffer(space: spaces.Space, n: int, alloc: Allocator = _zeros) -> Any:
    """Allocate a zeroed batch buffer holding ``n`` observations of ``space``.

    A space vecenv does not know but that declares a ``shape`` and a numeric ``dtype`` is batched
    like a Box; any other unknown space gets an object array ``(n,)`` holding the observations as
    they are (they cannot live in shared memory and travel pickled).

    :param space: a single-env observation space.
    :param n: number of envs (first axis of every array).
    :param alloc: allocates each numeric array (``np.zeros`` by default; shared memory for worker processes).
    :return: an array ``(n, *space.shape)`` of ``space.dtype``, or a dict / tuple of such buffers
        for Dict / Tuple spaces (Dict keys in the space's order).
    """
    if space.shape is not None and space.dtype is not None and space.dtype != np.dtype(object):
        return alloc((n, *space.shape), np.dtype(space.dtype))
    return np.empty((n,), dtype=object)


@create_batch_buffer.register(spaces.Box)
@create_batch_buffer.register(spaces.Discrete)
@create_batch_buffer.register(spaces.MultiDiscrete)
@create_batch_buffer.register(spaces.MultiBinary)
def _(space: spaces.Space, n: int, alloc: Allocator = _zeros) -> np.ndarray:
    assert space.dtype is not None and space.shape is not None
    return alloc((n, *space.shape), np.dtype(space.dtype))


@create_batch_buffer.register(spaces.Dict)
def _(space: spaces.Dict, n: int, alloc: Allocator = _zeros) -> dict[str, Any]:
    return {key: create_batch_buffer(sub, n, alloc) for key, sub in space.spaces.items()}


@create_batch_buffer.register(spaces.Tuple)
def _(space: spaces.Tuple, n: int, alloc: Allocator = _zeros) -> tuple[Any, ...]:
    return tuple(create_batch_buffer(sub, n, alloc) for sub in space.spaces)


def buffer_leaves(buffer: Any) -> list[np.ndarray]:
    """The arrays of a batch buffer, depth first in space order."""
    if isinstance(buffer, np.ndarray):
        return [buffer]
    values = buffer.values() if isinstance(buffer, dict) else buffer
    return [leaf for value in values for leaf in buffer_leaves(value)]


def is_shareable(buffer: Any) -> bool:
    """Whether every array of a batch buffer has a fixed-size dtype (so it can live in shared memory)."""
    return all(leaf.dtype != np.dtype(object) for leaf in buffer_leaves(buffer))


def store_observation(space: spaces.Space, buffer: np.ndarray, index: int, obs: Any) -> None:
    """Store one env's observation at ``index`` of an array batch buffer, refusing anything that does not fit.

    The observation must have the space's shape exactly (no broadcasting, no reshaping) and a dtype
    numpy casts to the space's dtype within its kind (``same_kind``: float64 into float32 is accepted, as
    SB3 accepts it; float into an integer or uint8 buffer is refused). Object buffers (spaces that travel
    pickled) take any value, as a deep copy: the env may change its own objects afterwards (an array it updates
    in place), as pickling to another process would not let it.

    :raises ValueError: naming the space, the expected shape / dtype and what the env returned.
    """
    if buffer.dtype == np.dtype(object):
        buffer[index] = copy.deepcopy(obs)
        return
    array = np.asarray(obs)
    slot_shape = buffer.shape[1:]
    if array.shape != slot_shape or not np.can_cast(array.dtype, buffer.dtype, casting="same_kind"):
        raise ValueError(
            f"the observation does not fit observation_space {space}: expected shape {slot_shape} and dtype "
            f"{buffer.dtype} (or one that casts to it without changing kind), got shape {array.shape} and dtype "
            f"{array.dtype} ({type(obs).__name__}). Return observations of the declared shape and dtype, or fix "
            "the env's observation_space."
        )
    buffer[index] = array


@singledispatch
def make_obs_writer(space: spaces.Space) -> Callable[[Any, int, Any], None]:
    """Return ``write(buffer, index, obs)`` that stores one env's observation at ``index`` of a batch buffer.

    Built once per vector env so the per-step path is a single call with no type dispatch. Observations
    that do not fit raise :class:`ValueError` (see :func:`store_observation`); the common case (an array
    of exactly the buffer's shape and dtype) costs one comparison.
    """

    def write(buffer: np.ndarray, index: int, obs: Any) -> None:
        if type(obs) is np.ndarray and obs.dtype == buffer.dtype and obs.shape == buffer.shape[1:]:
            buffer[index] = obs
        else:
            store_observation(space, buffer, index, obs)

    return write


@make_obs_writer.register(spaces.Dict)
def _(space: spaces.Dict) -> Callable[[Any, int, Any], None]:
    writers = [(key, make_obs_writer(sub)) for key, sub in space.spaces.items()]

    def write(buffer: dict[str, Any], index: int, obs: Mapping[str, Any]) -> None:
        for key, sub_write in writers:
            sub_write(buffer[key], index, obs[key])

    return write


@make_obs_writer.register(spaces.Tuple)
def _(space: spaces.Tuple) -> Callable[[Any, int, Any], None]:
    writers = [make_obs_writer(sub) for sub in space.spaces]

    def write(buffer: tuple[Any, ...], index: int, obs: tuple[Any, ...]) -> None:
        for i, sub_write in enumerate(writers):
            sub_write(buffer[i], index, obs[i])

    return write


@singledispatch
def make_row_writer(space: spaces.Space) -> Callable[[Any, int, Any], bool]:
    """Return ``write(buffer, index, obs) -> bool`` that stores one env's observation at row ``index`` of a batch
    buffer of ``space`` only if a row holds exactly that value, and says whether it did.

    Exactly: arrays (``type(obs) is np.ndarray``) of the row's dtype and shape; for a Dict space a ``dict`` with
    the space's keys in the space's order; for a Tuple space a ``tuple`` of its length. Reading the row back
    (:func:`make_row_reader`) then gives a value equal to ``obs`` in type, key order, dtype and shape. Anything
    else (a Python scalar, another mapping type, a key order of the env's own) returns False, possibly after
    writing part of the row: the caller then keeps a copy of ``obs`` itself.
    """

    def write(buffer: np.ndarray, index: int, obs: Any) -> bool:
        if type(obs) is np.ndarray and obs.dtype == buffer.dtype and obs.shape == buffer.shape[1:]:
            buffer[index] = obs
            return True
        return False

    return write


@make_row_writer.register(spaces.Dict)
def _(space: spaces.Dict) -> Callable[[Any, int, Any], bool]:
    writers = [(key, make_row_writer(sub)) for key, sub in space.spaces.items()]
    size = len(writers)

    def write(buffer: dict[str, Any], index: int, obs: Any) -> bool:
        if type(obs) is not dict or len(obs) != size:
            return False
        for (key, sub_write), (obs_key, value) in zip(writers, obs.items(), strict=True):
            if key != obs_key or not sub_write(buffer[key], index, value):
                return False
        return True

    return write


@make_row_writer.register(spaces.Tuple)
def _(space: spaces.Tuple) -> Callable[[Any, int, Any], bool]:
    writers = [make_row_writer(sub) for sub in space.spaces]
    size = len(writers)

    def write(buffer: tuple[Any, ...], index: int, obs: Any) -> bool:
        if type(obs) is not tuple or len(obs) != size:
            return False
        return all(sub_write(buffer[i], index, obs[i]) for i, sub_write in enumerate(writers))

    return write


def make_row_reader(buffer: Any) -> Callable[[int], Any]:
    """Return ``read(index)``: a copy of row ``index`` of the batch buffer ``buffer`` (array, dict or tuple of
    buffers), in its structure: an array ``obs_shape`` (a 0-d array for a scalar row), a ``dict`` in the buffer's
    key order, a ``tuple``. What :func:`make_row_writer` stored comes back equal."""
    if isinstance(buffer, np.ndarray):
        return lambda index: buffer[index, ...].copy()
    if isinstance(buffer, dict):
        parts = [(key, make_row_reader(value)) for key, value in buffer.items()]
        return lambda index: {key: read(index) for key, read in parts}
    if isinstance(buffer, tuple):
        items = [make_row_reader(value) for value in buffer]
        return lambda index: tuple(read(index) for read in items)
    raise TypeError(f"make_row_reader expected an array, dict or tuple batch buffer, got {type(buffer).__name__}")


def batch_copy(buffer: Any) -> Any:
    """Deep-copy a batch buffer (array, dict or tuple of buffers) so the caller may keep it."""
    if isinstance(buffer, np.ndarray):
        return buffer.copy()
    if isinstance(buffer, dict):
        return {key: batch_copy(value) for key, value in buffer.items()}
    if isinstance(buffer, tuple):
        return tuple(batch_copy(value) for value in buffer)
    raise TypeError(f"batch_copy expected an array, dict or tuple batch buffer, got {type(buffer).__name__}")


def batch_slice(buffer: Any, start: int, stop: int) -> Any:
    """Return views of envs ``start:stop`` of a batch buffer (same structure)."""
    if isinstance(buffer, np.ndarray):
        return buffer[start:stop]
    if isinstance(buffer, dict):
        return {key: batch_slice(value, start, stop) for key, value in buffer.items()}
    if isinstance(buffer, tuple):
        return tuple(batch_slice(value, start, stop) for value in buffer)
    raise TypeError(f"batch_slice expected an array, dict or tuple batch buffer, got {type(buffer).__name__}")


def batch_take(buffer: Any, index: np.ndarray) -> Any:
    """Copy the rows ``index`` (an integer array of env indices) of a batch buffer (same structure)."""
    if isinstance(buffer, np.ndarray):
        return buffer[index]
    if isinstance(buffer, dict):
        return {key: batch_take(value, index) for key, value in buffer.items()}
    if isinstance(buffer, tuple):
        return tuple(batch_take(value, index) for value in buffer)
    raise TypeError(f"batch_take expected an array, dict or tuple batch buffer, got {type(buffer).__name__}")


def batch_assign(dst: Any, src: Any) -> None:
    """Copy batch buffer ``src`` into ``dst`` of the same structure and shapes, in place."""
    if isinstance(dst, np.ndarray):
        dst[...] = src
    elif isinstance(dst, dict):
        for key, value in dst.items():
            batch_assign(value, src[key])
    elif isinstance(dst, tuple):
        for i, value in enumerate(dst):
            batch_assign(value, src[i])
    else:
        raise TypeError(f"batch_assign expected an array, dict or tuple batch buffer, got {type(dst).__name__}")


# --- Stable-Baselines3 helpers (``stable_baselines3.common.vec_env.util``) ----------------------------


def check_for_nested_spaces(obs_space: spaces.Space) -> None:
    """Raise Stable-Baselines3's :class:`NotImplementedError` for a Dict/Tuple space inside a Dict/Tuple space.

    :param obs_space: an observation space.
    :raises NotImplementedError: if ``obs_space`` nests Dict or Tuple spaces (same message as SB3).
    """
    if isinstance(obs_space, (spaces.Dict, spaces.Tuple)):
        sub_spaces = obs_space.spaces.values() if isinstance(obs_space, spaces.Dict) else obs_space.spaces
        for sub_space in sub_spaces:
            if isinstance(sub_space, (spaces.Dict, spaces.Tuple)):
                raise NotImplementedError(
                    "Nested observation spaces are not supported (Tuple/Dict space inside Tuple/Dict space)."
                )


def obs_space_info(obs_space: spaces.Space) -> tuple[list[Any], dict[Any, tuple[int, ...]], dict[Any, np.dtype]]:
    """Describe an observation space as keys, shapes and dtypes (Stable-Baselines3 semantics).

    Dict spaces give their keys, Tuple spaces the indices ``0..n-1``, other spaces (including ``OneOf``, whose
    batch is one object array) the single key ``None``.

    :param obs_space: an observation space.
    :return: ``(keys, shapes, dtypes)`` with ``shapes[key]`` and ``dtypes[key]`` per key.
    :raises NotImplementedError: for nested Dict/Tuple spaces.
    """
    check_for_nested_spaces(obs_space)
    subspaces: dict[Any, spaces.Space]
    if isinstance(obs_space, spaces.Dict):
        subspaces = dict(obs_space.spaces)
    elif isinstance(obs_space, spaces.Tuple):
        subspaces = dict(enumerate(obs_space.spaces))
    else:
        # OneOf holds ``spaces`` but batches as one object array (its observations travel as they are), like
        # Sequence or Graph; any other structured space is refused as SB3 refuses it
        if not isinstance(obs_space, spaces.OneOf):
            assert not hasattr(obs_space, "spaces"), f"Unsupported structured space '{type(obs_space)}'"
        subspaces = {None: obs_space}
    keys: list[Any] = []
    shapes: dict[Any, tuple[int, ...]] = {}
    dtypes: dict[Any, np.dtype] = {}
    for key, box in subspaces.items():
        keys.append(key)
        shapes[key] = box.shape  # type: ignore[assignment]
        dtypes[key] = box.dtype  # type: ignore[assignment]
    return keys, shapes, dtypes


def dict_to_obs(obs_space: spaces.Space, obs_dict: dict[Any, np.ndarray]) -> VecEnvObs:
    """Convert SB3's internal ``{key: array}`` representation to the observation type of ``obs_space``.

    :param obs_space: an observation space.
    :param obs_dict: a dict of batched arrays keyed as :func:`obs_space_info` keys them.
    :return: the dict itself for Dict spaces, a tuple ordered by index for Tuple spaces, else ``obs_dict[None]``.
    """
    if isinstance(obs_space, spaces.Dict):
        return obs_dict
    if isinstance(obs_space, spaces.Tuple):
        assert len(obs_dict) == len(obs_space.spaces), "size of observation does not match size of observation space"
        return tuple(obs_dict[i] for i in range(len(obs_space.spaces)))
    assert set(obs_dict.keys()) == {None}, "multiple observation keys for unstructured observation space"
    return obs_dict[None]


def buffer_as_obs_dict(obs_space: spaces.Space, buffer: Any) -> OrderedDict[Any, np.ndarray]:
    """SB3's ``buf_obs`` view of a (non-nested) batch buffer: ``OrderedDict`` keyed as :func:`obs_space_info`."""
    if isinstance(obs_space, spaces.Dict):
        return OrderedDict(buffer.items())
    if isinstance(obs_space, spaces.Tuple):
        return OrderedDict(enumerate(buffer))
    return OrderedDict([(None, buffer)])


# --- images (``stable_baselines3.common.preprocessing``) -----------------------------------------------


def is_image_space_channels_first(observation_space: spaces.Box) -> bool:
    """Whether an image space is channels-first ``(C, H, W)``: SB3's heuristic, the smallest dimension is channels.

    Warns when the middle dimension is the smallest (treated as channels-last, as SB3 does).

    :param observation_space: a 3-D Box.
    :return: True for channels-first, False for channels-last.
    """
    smallest_dimension = int(np.argmin(observation_space.shape))
    if smallest_dimension == 1:
        warnings.warn(
            "Treating image space as channels-last, while second dimension was smallest of the three.", stacklevel=2
        )
    return smallest_dimension == 0


def is_image_space(
    observation_space: spaces.Space, check_channels: bool = False, normalized_image: bool = False
) -> bool:
    """Whether a space looks like an image: a 3-D Box of uint8 with bounds 0..255 (SB3's conservative check).

    :param observation_space: any space.
    :param check_channels: also require 1, 3 or 4 channels (grayscale, RGB, RGBD).
    :param normalized_image: skip the dtype and bounds checks (only require a 3-D Box).
    :return: True if the space is an image space.
    """
    if not isinstance(observation_space, spaces.Box) or len(observation_space.shape) != 3:
        return False
    if not normalized_image:
        if observation_space.dtype != np.uint8:
            return False
        if np.any(observation_space.low != 0) or np.any(observation_space.high != 255):
            return False
    if not check_channels:
        return True
    shape = observation_space.shape
    n_channels = shape[0] if is_image_space_channels_first(observation_space) else shape[-1]
    return n_channels in (1, 3, 4)
