"""vecenv's batches and per-env infos <-> Gymnasium's batched observations and dict-of-arrays infos.

Shared by :mod:`vecenv.gymnasium`'s vector envs and the adapters of :mod:`vecenv.adapters`.

Both libraries batch Box / Discrete / MultiDiscrete / MultiBinary observations as arrays with the env axis
first, and Dict / Tuple spaces as dicts / tuples of such batches. They differ for the other spaces (Text,
Sequence, Graph, OneOf, custom spaces): Gymnasium batches them as a tuple of per-env values, vecenv as an
object array ``(num_envs,)``. Infos are one dict per env for vecenv (with ``terminal_observation`` and
``TimeLimit.truncated``) and one dict of arrays with ``_key`` masks for Gymnasium (with ``final_obs`` /
``final_info`` for the envs that reset within a step).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from gymnasium import spaces

from vecenv.actions import ARRAY_SPACES

__all__ = [
    "VECENV_INFO_KEYS",
    "AddInfo",
    "BatchConverter",
    "attribute_values_for_call",
    "fresh_batch_to_gymnasium",
    "gymnasium_batch_to_vecenv",
    "is_array_batch",
    "per_env_infos",
    "vecenv_batch_to_gymnasium",
    "vector_reset_infos",
    "vector_step_infos",
]

#: keys vecenv adds to every step info (Gymnasium has terminations / truncations / final_obs instead)
VECENV_INFO_KEYS = frozenset({"TimeLimit.truncated", "terminal_observation"})

#: ``convert(batch) -> batch`` in the other library's layout, built once per space
BatchConverter = Callable[[Any], Any]
#: Gymnasium's ``VectorEnv._add_info(vector_infos, env_info, env_index) -> vector_infos``, bound to a vector env
AddInfo = Callable[[dict[str, Any], dict[str, Any], int], dict[str, Any]]


# --- observation batches ----------------------------------------------------------------------------


def _structure_converter(space: spaces.Space, leaf: Callable[[spaces.Space], BatchConverter]) -> BatchConverter:
    """A converter that follows the Dict / Tuple structure of ``space`` and converts each leaf batch with the
    converter ``leaf(leaf_space)``."""
    if isinstance(space, spaces.Dict):
        items = [(key, _structure_converter(sub, leaf)) for key, sub in space.spaces.items()]
        return lambda batch: {key: convert(batch[key]) for key, convert in items}
    if isinstance(space, spaces.Tuple):
        parts = [_structure_converter(sub, leaf) for sub in space.spaces]
        return lambda batch: tuple(convert(part) for convert, part in zip(parts, batch, strict=True))
    return leaf(space)


def _identity(batch: Any) -> Any:
    return batch


def _deep_copied_values(batch: Any) -> tuple[Any, ...]:
    return tuple(copy.deepcopy(value) for value in batch)


def fresh_batch_to_gymnasium(space: spaces.Space, deep: bool) -> BatchConverter:
    """Converter of the batches a vecenv backend returns (fresh arrays) to Gymnasium's layout, for single-env
    space ``space``: array batches are returned as they are, the others become tuples of the envs' values.

    :param deep: deep-copy the values of tuple-batched spaces (the envs' own objects with in-process envs).
    """

    def leaf(sub: spaces.Space) -> BatchConverter:
        if isinstance(sub, ARRAY_SPACES):
            return _identity
        return _deep_copied_values if deep else tuple

    return _structure_converter(space, leaf)


def _copy_to_gymnasium(batch: Any) -> Any:
    if isinstance(batch, np.ndarray) and batch.dtype == object:
        return _deep_copied_values(batch)
    return np.array(batch, copy=True)


def vecenv_batch_to_gymnasium(space: spaces.Space) -> BatchConverter:
    """Converter of any vecenv VecEnv's batches (which the env may reuse) to copies in Gymnasium's layout, for
    single-env space ``space``: object arrays become tuples of deep copies, other batches array copies."""
    return _structure_converter(space, lambda sub: _copy_to_gymnasium)


def _copy_to_vecenv(batch: Any) -> Any:
    if isinstance(batch, np.ndarray):
        return batch.copy()
    values = list(batch)
    out = np.empty(len(values), dtype=object)
    for i, value in enumerate(values):
        out[i] = copy.deepcopy(value)
    return out


def gymnasium_batch_to_vecenv(space: spaces.Space) -> BatchConverter:
    """Converter of Gymnasium's batches to copies in vecenv's layout, for single-env space ``space``: arrays are
    copied, tuples of values become object arrays of deep copies."""
    return _structure_converter(space, lambda sub: _copy_to_vecenv)


def is_array_batch(space: spaces.Space, actions: Any) -> bool:
    """Whether Gymnasium's batched ``actions`` of a Dict / Tuple ``space`` is a batch vecenv takes as is: arrays
    in one dict / tuple level."""
    if isinstance(space, spaces.Dict):
        return (
            isinstance(actions, Mapping)
            and all(isinstance(sub, ARRAY_SPACES) for sub in space.spaces.values())
            and all(isinstance(actions.get(key), np.ndarray) for key in space.spaces)
        )
    if isinstance(space, spaces.Tuple):
        return (
            isinstance(actions, tuple)
            and len(actions) == len(space.spaces)
            and all(
                isinstance(sub, ARRAY_SPACES) and isinstance(part, np.ndarray) and part.ndim == len(sub.shape or ()) + 1
                for sub, part in zip(space.spaces, actions, strict=True)
            )
        )
    return False


# --- infos --------------------------------------------------------------------------------------------


def vector_reset_infos(
    add_info: AddInfo, reset_infos: Sequence[dict[str, Any]], env_ids: Sequence[int] | None = None
) -> dict[str, Any]:
    """Gymnasium's reset infos (dict of arrays with ``_key`` masks) from vecenv's ``reset_infos``.

    :param add_info: the vector env's ``_add_info``.
    :param reset_infos: one reset info per env.
    :param env_ids: the envs reset (None: all).
    """
    infos: dict[str, Any] = {}
    for i in range(len(reset_infos)) if env_ids is None else env_ids:
        infos = add_info(infos, reset_infos[i], i)
    return infos


def vector_step_infos(
    add_info: AddInfo,
    step_infos: Sequence[Mapping[str, Any]],
    reset_in_step: np.ndarray | None,
    reset_infos: Sequence[dict[str, Any]],
    missing_final_obs: Callable[[int, Mapping[str, Any]], Exception],
    final_info_first: bool = False,
    reset_steps: np.ndarray | None = None,
) -> dict[str, Any]:
    """Gymnasium's step infos (dict of arrays with ``_key`` masks) from vecenv's per-env step infos.

    vecenv's own keys (:data:`VECENV_INFO_KEYS`) are left out. An env that reset within the step
    (``SAME_STEP``) gets ``final_obs`` (its ``terminal_observation``) and ``final_info`` (its step info), and
    its reset info at the top level. An env whose step was its reset (``NEXT_STEP``) gets its reset info as the
    env returned it, those keys included.

    :param add_info: the vector env's ``_add_info``.
    :param step_infos: one step info per env.
    :param reset_in_step: bool ``(num_envs,)``: the envs that reset within the step; None: none.
    :param reset_infos: one reset info per env (read for the envs of ``reset_in_step`` only).
    :param missing_final_obs: the error for env ``i`` of ``reset_in_step`` whose info has no
        ``terminal_observation``.
    :param final_info_first: give ``final_info``, ``final_obs`` and the reset info in one ``add_info`` call, in
        that key order (as Gymnasium's AsyncVectorEnv worker); otherwise ``final_obs``, ``final_info``, then the
        reset info.
    :param reset_steps: bool ``(num_envs,)``: the envs whose step was their reset (``NEXT_STEP``); None: none.
    """
    infos: dict[str, Any] = {}
    for i, info in enumerate(step_infos):
        if reset_steps is not None and reset_steps[i]:
            if reset_infos[i]:
                infos = add_info(infos, reset_infos[i], i)
            continue
        reset_now = reset_in_step is not None and bool(reset_in_step[i])
        if not reset_now and len(info) == 1 and "TimeLimit.truncated" in info:
            continue  # the common case: the env's info was empty and the env did not reset
        env_info = {key: value for key, value in info.items() if key not in VECENV_INFO_KEYS}
        if reset_now:
            if "terminal_observation" not in info:
                raise missing_final_obs(i, info)
            final_obs = info["terminal_observation"]
            if final_info_first:
                infos = add_info(infos, {"final_info": env_info, "final_obs": final_obs, **reset_infos[i]}, i)
            else:
                infos = add_info(infos, {"final_obs": final_obs, "final_info": env_info}, i)
                infos = add_info(infos, reset_infos[i], i)
        elif env_info:
            infos = add_info(infos, env_info, i)
    return infos


def per_env_infos(vector_infos: Mapping[str, Any], n: int) -> list[dict[str, Any]]:
    """Gymnasium's dict-of-arrays infos to one dict per env (the inverse of Gymnasium's ``VectorEnv._add_info``).

    A key ``k`` with a mask ``_k`` is given to the envs whose mask is True; a nested dict is unbatched
    recursively; an array whose first axis has length ``n`` gives element ``i`` to env ``i``. Any other
    value (e.g. an EnvPool entry that is not per env) is given as is to every env.
    """
    per_env: list[dict[str, Any]] = [{} for _ in range(n)]
    for key, value in vector_infos.items():
        if key.startswith("_") and key[1:] in vector_infos:
            continue  # the mask of key[1:]
        mask = vector_infos.get(f"_{key}")
        if isinstance(value, Mapping):
            values: list[Any] = per_env_infos(value, n)
        elif isinstance(value, np.ndarray) and value.ndim >= 1 and len(value) == n:
            values = [value[i].copy() if isinstance(value[i], np.ndarray) else value[i] for i in range(n)]
        else:
            values = [value] * n
        for i in range(n):
            if mask is None or mask[i]:
                per_env[i][key] = values[i]
    return per_env


# --- calls ---------------------------------------------------------------------------------------------


def attribute_values_for_call(
    call_error: TypeError, read_attribute: Callable[[], Sequence[Any]], refuse: bool = False
) -> tuple[Any, ...]:
    """Gymnasium's ``call(name)`` returns the value of an attribute that is not callable, where vecenv's call
    raised ``call_error``: the attribute's value for every env, read with ``read_attribute()``.

    :param refuse: re-raise ``call_error`` anyway (once the attribute has been read).
    :raises TypeError: ``call_error`` if the attribute cannot be read (its context suppressed), is callable for
        some env, or with ``refuse``.
    """
    try:
        values = read_attribute()
    except Exception:
        raise call_error from None
    if refuse or any(callable(value) for value in values):
        raise call_error
    return tuple(values)
