"""Batches of actions: how a batch is split into per-env actions, written into an action batch buffer, and checked.

A batch of actions is accepted in the layouts Stable-Baselines3 accepts (see :func:`split_actions`): an
array with the env axis first, a list with one action per env, and for Dict / Tuple action spaces a dict /
tuple of batched arrays. :func:`make_actions_checker` validates a batch before anything is sent (dtype,
shape, range), :func:`write_actions` and :func:`make_action_writer` store actions into an action batch buffer
(:func:`vecenv.spaces.create_batch_buffer`), casting to the space's dtype and never broadcasting.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from gymnasium import spaces

__all__ = [
    "ARRAY_SPACES",
    "fits_action_buffer",
    "make_action_writer",
    "make_actions_checker",
    "num_actions",
    "split_actions",
    "with_valid_rows",
    "write_actions",
]

#: The space types whose batch is one array ``(n, *space.shape)`` of the space's dtype.
ARRAY_SPACES = (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)


def with_valid_rows(action_space: spaces.Space, actions: Any, rows: np.ndarray) -> Any:
    """A copy of the batch ``actions`` whose ``rows`` (a bool mask over the envs) hold a valid action of
    ``action_space`` (the lowest in range): the actions of envs that ignore theirs (Gymnasium's ``NEXT_STEP``
    resets), which Gymnasium does not check. Array batches only (Dict / Tuple batches per component); another
    layout is returned as it is."""
    if isinstance(action_space, spaces.Dict) and isinstance(actions, Mapping):
        subs = action_space.spaces
        return {key: with_valid_rows(subs[key], part, rows) if key in subs else part for key, part in actions.items()}
    if isinstance(action_space, spaces.Tuple) and isinstance(actions, tuple) and len(actions) == len(action_space):
        return tuple(with_valid_rows(sub, part, rows) for sub, part in zip(action_space.spaces, actions, strict=True))
    if not (isinstance(action_space, ARRAY_SPACES) and isinstance(actions, np.ndarray) and len(actions) == len(rows)):
        return actions
    if isinstance(action_space, spaces.Box):
        valid: Any = np.clip(np.zeros(action_space.shape), action_space.low, action_space.high)
    elif isinstance(action_space, spaces.MultiBinary):
        valid = 0
    else:  # Discrete, MultiDiscrete
        valid = action_space.start
    fixed = actions.copy()
    fixed[rows] = valid
    return fixed


# --- per-env actions ----------------------------------------------------------------------------


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
    keys in the space's order, whatever the batch's order (keys the space does not have are left out). (Gymnasium's
    ``iterate`` orders them as its batched space, whose keys ``batch_space`` sorts: vecenv.gymnasium's classes go
    through it where that order differs.)"""
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


def num_actions(action_space: spaces.Space, actions: Any) -> int:
    """Number of envs a batch of actions covers (see :func:`split_actions` for the accepted layouts)."""
    if isinstance(action_space, (spaces.Dict, spaces.Tuple)) and _is_batched(action_space, actions):
        leaf = _first_leaf(actions)
        return 0 if leaf is None else len(leaf)
    return len(actions)


# --- action batch buffers -----------------------------------------------------------------------


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


# --- checks -------------------------------------------------------------------------------------


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
