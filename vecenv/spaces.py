"""Per-space batching utilities, dispatched on the space type with :func:`functools.singledispatch`.

A *batch buffer* holds one observation per env: for a Box, Discrete, MultiDiscrete or MultiBinary
space it is an array of shape ``(n, *space.shape)`` in ``space.dtype``; for a Dict space a dict of
buffers in the space's key order; for a Tuple space a tuple of buffers. The functions recurse, so
nested Dict/Tuple spaces batch naturally; the SB3-style vector envs refuse nesting up front with
:func:`check_for_nested_spaces`, as Stable-Baselines3 does.

Support for another space type is one ``register`` call per function.
"""

from __future__ import annotations

import math
import warnings
from collections import OrderedDict
from collections.abc import Callable, Mapping
from functools import singledispatch
from typing import Any

import numpy as np
from gymnasium import spaces

__all__ = [
    "batch_copy",
    "check_for_nested_spaces",
    "create_batch_buffer",
    "dict_to_obs",
    "make_obs_writer",
    "obs_space_info",
    "split_actions",
]

ARRAY_SPACES = (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)


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


def _store_exact(dst: np.ndarray, value: Any, what: Callable[[], str]) -> None:
    """Copy ``value`` into ``dst`` (cast to its dtype) if it has ``dst``'s shape up to axes of length 1.

    Never broadcasts nor reorders: e.g. ``(n, 1)`` fits ``(n,)``, but ``(3, 2)`` does not fit ``(2, 3)``;
    anything else is a :class:`ValueError` naming both shapes. ``what()`` names the value in the message
    (a callable, so the hot path never formats it).
    """
    array = np.asarray(value)
    if array.shape != dst.shape:
        if array.size != dst.size or array.squeeze().shape != dst.squeeze().shape:
            raise ValueError(f"{what()} must have shape {dst.shape}, got shape {array.shape}")
        array = array.reshape(dst.shape)
    np.copyto(dst, array, casting="unsafe")


def make_action_writer(action_space: spaces.Space) -> Callable[[Any, int, Any], None]:
    """Return ``write(buffer, index, action)`` storing one env's action into an action batch buffer.

    Like :func:`make_obs_writer`, but values are cast to the space's dtype and a wrong shape is a
    :class:`ValueError` instead of a silent broadcast.
    """
    if isinstance(action_space, spaces.Dict):
        writers = [(key, make_action_writer(sub)) for key, sub in action_space.spaces.items()]

        def write_dict(buffer: dict[str, Any], index: int, action: Mapping[str, Any]) -> None:
            for key, sub_write in writers:
                sub_write(buffer[key], index, action[key])

        return write_dict
    if isinstance(action_space, spaces.Tuple):
        tuple_writers = [make_action_writer(sub) for sub in action_space.spaces]

        def write_tuple(buffer: tuple[Any, ...], index: int, action: tuple[Any, ...]) -> None:
            for i, sub_write in enumerate(tuple_writers):
                sub_write(buffer[i], index, action[i])

        return write_tuple

    def write(buffer: np.ndarray, index: int, action: Any) -> None:
        if buffer.ndim == 1:  # scalar slots (Discrete): indexing gives a copy, not a view
            array = np.asarray(action)
            if array.size != 1:
                raise ValueError(
                    f"the action of env {index} (space {action_space}) must be a scalar, got shape {array.shape}"
                )
            buffer[index] = array.reshape(())
        else:
            _store_exact(buffer[index], action, lambda: f"the action of env {index} (space {action_space})")

    return write


def fits_action_buffer(buffer: Any, actions: Any, n: int) -> bool:
    """Whether a batch of ``n`` actions can travel through an action batch buffer unchanged: arrays (in the
    buffer's dict / tuple layout, same keys) with exactly the buffer's dtype and row shape, ``n`` rows each.

    Envs must receive the caller's rows as they are (SB3 and Gymnasium hand each env ``actions[i]``); any other
    batch (another dtype, an axis of length 1 more or less, a list) travels pickled instead.
    """
    if type(buffer) is np.ndarray:
        return type(actions) is np.ndarray and actions.dtype == buffer.dtype and actions.shape == (n, *buffer.shape[1:])
    if isinstance(buffer, dict):
        return (
            isinstance(actions, Mapping)
            and actions.keys() == buffer.keys()
            and all(fits_action_buffer(sub, actions[key], n) for key, sub in buffer.items())
        )
    if isinstance(buffer, tuple):
        return (
            type(actions) is tuple
            and len(actions) == len(buffer)
            and all(fits_action_buffer(sub, part, n) for sub, part in zip(buffer, actions, strict=True))
        )
    return False


def write_actions(action_space: spaces.Space, buffer: Any, actions: Any) -> None:
    """Store a batch of ``num_envs`` actions (any layout :func:`split_actions` accepts) into an action batch buffer.

    Values are cast to the buffer's dtype (the action space's dtype); shapes are never broadcast.

    :raises ValueError: if the actions do not have the buffer's shape (an action does not fit its slot).
    """
    if isinstance(buffer, np.ndarray) and isinstance(actions, np.ndarray):
        _store_exact(
            buffer, actions, lambda: f"actions (num_envs, *action_space.shape) for action space {action_space}"
        )
        return
    write = make_action_writer(action_space)
    per_env = split_actions(action_space, actions, 0, num_actions(action_space, actions))
    for i in range(len(per_env)):
        try:
            write(buffer, i, per_env[i])
        except (ValueError, TypeError, KeyError, IndexError) as exc:
            raise ValueError(f"action {i} does not fit action space {action_space}: {exc}") from None


def store_observation(space: spaces.Space, buffer: np.ndarray, index: int, obs: Any) -> None:
    """Store one env's observation at ``index`` of an array batch buffer, refusing anything that does not fit.

    The observation must have the space's shape exactly (no broadcasting, no reshaping) and a dtype
    numpy casts to the space's dtype within its kind (``same_kind``: float64 into float32 is accepted, as
    SB3 accepts it; float into an integer or uint8 buffer is refused). Object buffers (spaces that travel
    pickled) take any value.

    :raises ValueError: naming the space, the expected shape / dtype and what the env returned.
    """
    if buffer.dtype == np.dtype(object):
        buffer[index] = obs
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


# --- actions ------------------------------------------------------------------------------------


def split_actions(action_space: spaces.Space, actions: Any, start: int, stop: int) -> Any:
    """Select the actions of envs ``start:stop`` from a batch of actions, as an indexable per-env sequence.

    Accepted batches (as Stable-Baselines3 accepts them): an array with the env axis first; a list
    (or other sequence) with one action per env; for a Dict action space a dict of batched arrays;
    for a Tuple action space a tuple of batched arrays.

    :return: an object ``a`` with ``a[j]`` the action of env ``start + j``.
    """
    if isinstance(actions, np.ndarray):
        return actions[start:stop]
    if _is_batched(action_space, actions) and not isinstance(actions, np.ndarray):
        return [_action_at(action_space, actions, i) for i in range(start, stop)]
    return actions[start:stop]


def _action_at(space: spaces.Space, actions: Any, i: int) -> Any:
    """Env ``i``'s action from a batched (possibly nested) Dict / Tuple of arrays: a Dict action has the space's
    keys in the space's order, whatever the batch's order (keys the space does not have are left out), as
    Gymnasium's ``iterate`` builds it."""
    if isinstance(space, spaces.Dict) and isinstance(actions, Mapping):
        return {key: _action_at(sub, actions[key], i) for key, sub in space.spaces.items()}
    if isinstance(space, spaces.Tuple) and isinstance(actions, tuple):
        return tuple(_action_at(sub, part, i) for sub, part in zip(space.spaces, actions, strict=True))
    return actions[i]


def _is_batched(space: spaces.Space, actions: Any) -> bool:
    """True for a batch: an array with one more axis than ``space``, or (recursively) a dict / tuple of batches."""
    if isinstance(space, spaces.Dict):
        return isinstance(actions, Mapping)
    if isinstance(space, spaces.Tuple):
        return _is_batched_tuple(space, actions)
    return isinstance(actions, np.ndarray) and space.shape is not None and actions.ndim == len(space.shape) + 1


def _is_batched_tuple(action_space: spaces.Tuple, actions: Any) -> bool:
    """True for a tuple of per-component batches (arrays with one more axis than their sub-space, recursively)."""
    return (
        isinstance(actions, tuple)
        and len(actions) == len(action_space.spaces)
        and all(_is_batched(sub, part) for part, sub in zip(actions, action_space.spaces, strict=True))
    )


def _first_leaf(actions: Any) -> Any:
    while isinstance(actions, (Mapping, tuple)) and not isinstance(actions, np.ndarray):
        if not actions:
            return None
        actions = next(iter(actions.values())) if isinstance(actions, Mapping) else actions[0]
    return actions


def _check_value_range(name: str, batch: np.ndarray, low: Any, high: Any, space: spaces.Space) -> None:
    """Raise if any value of ``batch`` lies outside ``[low, high)`` (broadcast per component); for a MultiBinary
    batch of floats, if any value is not exactly 0 or 1."""
    if isinstance(space, spaces.MultiBinary) and batch.dtype.kind in "fc":
        _refuse_values(
            (batch != 0) & (batch != 1),
            batch,
            f"{name} for action space {space} must be integers, got dtype {batch.dtype} with values other than 0 "
            "and 1 (any numeric dtype is accepted when every value is 0 or 1, as by Gymnasium's MultiBinary.contains)",
        )
    _refuse_values((batch < low) | (batch >= high), batch, f"{name} out of range for action space {space}")


def _refuse_values(bad: np.ndarray, batch: np.ndarray, problem: str) -> None:
    """Raise ``ValueError(problem: the envs with a ``bad`` value and their actions)`` if ``bad`` has any."""
    if bad.any():
        rows = sorted({int(i) for i in np.argwhere(bad)[:, 0]}) if batch.ndim else [0]
        shown = rows[:5]
        values = [batch[i].tolist() for i in shown] if batch.ndim else [batch.tolist()]
        raise ValueError(f"{problem}: envs {shown}{' ...' if len(rows) > 5 else ''} got {values}")


def make_actions_checker(action_space: spaces.Space, name: str = "actions") -> Callable[[Any, int], None]:
    """Return ``check(actions, num_envs)`` validating a batch of ``num_envs`` actions before anything is sent.

    For array batches (the layout trainers use): Discrete and MultiDiscrete actions must be integers within
    the space's range; MultiBinary actions may have any numeric dtype (bool, integer, float) with every value
    0 or 1 (Gymnasium's ``MultiBinary.contains``; SB3's PPO and A2C sample them as float32 ``0.`` / ``1.``); Box
    actions must be real numbers; the batch must have shape ``(num_envs, *action_space.shape)`` (axes of
    length 1 may be added or dropped, as :func:`write_actions` accepts). Dict and Tuple batches are checked
    per component; other layouts (a list of per-env actions) are converted with :func:`numpy.asarray` when
    they are numeric.
    Cost: a dtype test and one vectorized range test per step.

    :param name: how messages name the batch (components of Dict / Tuple batches add their key / index).
    :raises ValueError: naming the action space, the expected and received shape / dtype, and for values
        out of range the env indices and their actions.
    """
    if isinstance(action_space, spaces.Dict):
        sub_checks = {key: make_actions_checker(sub, f"{name}[{key!r}]") for key, sub in action_space.spaces.items()}

        def check_dict(actions: Any, num_envs: int) -> None:
            if isinstance(actions, Mapping):
                for key, sub_check in sub_checks.items():
                    if key not in actions:
                        raise ValueError(f"{name} for action space {action_space} miss the key {key!r}")
                    sub_check(actions[key], num_envs)

        return check_dict
    if isinstance(action_space, spaces.Tuple):
        tuple_checks = [make_actions_checker(sub, f"{name}[{i}]") for i, sub in enumerate(action_space.spaces)]

        def check_tuple(actions: Any, num_envs: int) -> None:
            if _is_batched_tuple(action_space, actions):
                for sub_check, part in zip(tuple_checks, actions, strict=True):
                    sub_check(part, num_envs)

        return check_tuple
    if not isinstance(action_space, ARRAY_SPACES):
        return lambda actions, num_envs: None  # custom spaces: the env validates its own actions

    shape = tuple(action_space.shape or ())
    integer = not isinstance(action_space, spaces.Box)
    low: Any = None
    high: Any = None
    if isinstance(action_space, spaces.Discrete):
        low, high = int(action_space.start), int(action_space.start + action_space.n)
    elif isinstance(action_space, spaces.MultiDiscrete):
        low, high = action_space.start, action_space.start + action_space.nvec
        if low.size and (low == low.flat[0]).all() and (high == high.flat[0]).all():
            low, high = int(low.flat[0]), int(high.flat[0])  # one range for every component: the cheap tests
    elif isinstance(action_space, spaces.MultiBinary):
        low, high = 0, 2
    binary = isinstance(action_space, spaces.MultiBinary)
    kinds = "biufc" if binary else "biuf" if not integer else "iu"
    wanted = "integers (or numbers that are all 0 or 1)" if binary else "integers" if integer else "real numbers"
    scalar_range = isinstance(low, int) and isinstance(high, int)
    # small ranges (Discrete(n), MultiBinary): one set test per batch, cheaper than min() plus max()
    allowed = frozenset(range(low, high)) if scalar_range and high - low <= 1024 else None

    def check(actions: Any, num_envs: int) -> None:
        expected = (num_envs, *shape)
        if isinstance(actions, np.ndarray):
            batch = actions
        else:
            try:
                batch = np.asarray(actions)
            except (ValueError, TypeError):
                return  # ragged per-env lists: the per-env writers / the env itself will complain
            if batch.dtype == np.dtype(object):
                return
        if batch.dtype.kind not in kinds:
            raise ValueError(
                f"{name} for action space {action_space} must be {wanted}, got dtype {batch.dtype} "
                f"(shape {batch.shape}); expected shape {expected}"
            )
        if batch.shape != expected and (
            batch.size != math.prod(expected) or batch.squeeze().shape != _squeezed(expected)
        ):
            raise ValueError(
                f"{name} for action space {action_space} must have shape {expected} "
                f"(num_envs, *action_space.shape), got shape {batch.shape} (dtype {batch.dtype})"
            )
        if low is None:
            return
        if scalar_range:
            if batch.size == 0:
                return
            if batch.size <= 256:
                # small batches: a Python pass over the values runs less code than numpy reductions, which
                # matters more than their speed: right after the parent wakes up, its caches are cold
                values = batch.ravel().tolist()
                if allowed is not None:
                    if allowed.issuperset(values):
                        return
                elif low <= min(values) and max(values) < high:
                    return
            elif binary and batch.dtype.kind in "fc":
                if ((batch == 0) | (batch == 1)).all():
                    return
            elif low == 0 and batch.dtype.kind in "iu":
                # one reduction: viewed as unsigned, negative values wrap around to huge numbers
                if int(_max_reduce(batch.view(f"u{batch.dtype.itemsize}"), axis=None)) < high:
                    return
            elif low <= batch.min() and batch.max() < high:
                return
        _check_value_range(name, batch.reshape(expected), low, high, action_space)

    return check


_max_reduce = np.maximum.reduce


def _squeezed(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(d for d in shape if d != 1)


def num_actions(action_space: spaces.Space, actions: Any) -> int:
    """Number of envs a batch of actions covers (see :func:`split_actions` for the accepted layouts)."""
    if isinstance(action_space, (spaces.Dict, spaces.Tuple)) and _is_batched(action_space, actions):
        leaf = _first_leaf(actions)
        return 0 if leaf is None else len(leaf)
    return len(actions)


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


def dict_to_obs(obs_space: spaces.Space, obs_dict: dict[Any, np.ndarray]) -> Any:
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
