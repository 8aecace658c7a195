"""What a saved :class:`~vecenv.VecNormalize` holds, whichever file it came from, and its checks against spaces.

:class:`NormalizationState` is what :mod:`vecenv.wrappers.normalize_format` (vecenv's pickle-free
files) and :mod:`vecenv.wrappers.sb3_pickle` (Stable-Baselines3 pickles) read and what
:class:`~vecenv.VecNormalize` is rebuilt from. Observation spaces are stored as JSON-serializable
descriptions (:func:`describe_space`); :func:`check_space_matches` compares such a description with an
env's space, and :func:`check_rms_shapes` checks the statistics against the saved description.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any, Union

import numpy as np
from gymnasium import spaces

from vecenv.running_mean_std import RunningMeanStd

__all__ = [
    "NormalizationFileError",
    "NormalizationState",
    "ObsRms",
    "check_rms_shapes",
    "check_space_matches",
    "describe_space",
    "load_error",
    "statistic",
]

#: ``obs_rms`` of a VecNormalize: one :class:`RunningMeanStd` (Box) or one per normalized key (Dict).
ObsRms = Union[RunningMeanStd, dict[str, RunningMeanStd]]  # noqa: UP007


class NormalizationFileError(ValueError):
    """A normalization file cannot be read: not a vecenv file, truncated, corrupt, tampered with, or unsafe.

    Nothing from such a file has been executed when this is raised.
    """


@dataclasses.dataclass
class NormalizationState:
    """Everything a normalization file holds: what :class:`~vecenv.VecNormalize` needs to be rebuilt.

    :param config: the keyword arguments of :class:`~vecenv.VecNormalize` (``training``, ``norm_obs``,
        ``norm_reward``, ``clip_obs``, ``clip_reward``, ``gamma``, ``epsilon``, ``norm_obs_keys``).
    :param observation_space: :func:`describe_space` of the wrapper's observation space.
    :param obs_rms: the observation statistics, or None if the wrapper had none.
    :param ret_rms: the statistics of the discounted returns.
    :param vecenv_version: the vecenv version that wrote the file (None for an SB3 pickle).
    """

    config: dict[str, Any]
    observation_space: dict[str, Any]
    obs_rms: ObsRms | None
    ret_rms: RunningMeanStd
    vecenv_version: str | None = None


def describe_space(space: spaces.Space) -> dict[str, Any]:
    """A JSON-serializable description of ``space`` (the ``observation_space`` entry of the header).

    :param space: a gymnasium space.
    :return: e.g. ``{"type": "Box", "shape": [4], "dtype": "float32"}``; every form is listed in
        :mod:`vecenv.wrappers.normalize_format`.
    """
    if isinstance(space, spaces.Box):
        return {"type": "Box", "shape": list(space.shape), "dtype": str(space.dtype)}
    if isinstance(space, spaces.Dict):
        return {"type": "Dict", "spaces": [[key, describe_space(sub)] for key, sub in space.spaces.items()]}
    if isinstance(space, spaces.Tuple):
        return {"type": "Tuple", "spaces": [describe_space(sub) for sub in space.spaces]}
    if isinstance(space, spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, spaces.MultiDiscrete):
        return {"type": "MultiDiscrete", "nvec": np.asarray(space.nvec).tolist()}
    if isinstance(space, spaces.MultiBinary):
        return {"type": "MultiBinary", "n": np.asarray(space.n).tolist()}
    shape = None if space.shape is None else list(space.shape)
    return {"type": type(space).__name__, "shape": shape}


def _shape_of(description: Mapping[str, Any]) -> tuple[int, ...] | None:
    shape = description.get("shape")
    return None if shape is None else tuple(shape)


def check_space_matches(saved: Mapping[str, Any], space: spaces.Space) -> None:
    """Check that statistics saved for the space ``saved`` fit the observation space ``space``.

    As SB3's ``check_shape_equal``: Box shapes must be equal, Dict spaces must have the same keys
    (and equal Box shapes under each key); other spaces are not compared.

    :param saved: :func:`describe_space` of the space the statistics were saved with.
    :param space: the observation space of the env they are loaded into.
    :raises ValueError: naming the key, the saved shape and the env's shape.
    """
    _check_space(saved, space, key=None)


def _where(key: Any) -> str:
    return "the observation" if key is None else f"observation key {key!r}"


def _check_space(saved: Mapping[str, Any], space: spaces.Space, key: Any) -> None:
    hint = "Load the statistics into an env built like the one they were saved from."
    if saved["type"] == "Dict":
        if not isinstance(space, spaces.Dict):
            raise ValueError(
                f"The VecNormalize statistics were saved for a Dict observation space but the env's observation space "
                f"is {space}. {hint}"
            )
        saved_keys = [entry[0] for entry in saved["spaces"]]
        if set(saved_keys) != set(space.spaces.keys()):
            raise ValueError(
                f"The VecNormalize statistics were saved for observation keys {sorted(map(str, saved_keys))} but the "
                f"env's Dict observation space has keys {sorted(map(str, space.spaces.keys()))}. {hint}"
            )
        for sub_key, sub_saved in saved["spaces"]:
            _check_space(sub_saved, space.spaces[sub_key], sub_key)
    elif saved["type"] == "Box" and (not isinstance(space, spaces.Box) or _shape_of(saved) != space.shape):
        env_shape = space.shape if isinstance(space, spaces.Box) else f"{space} (not a Box)"
        raise ValueError(
            f"The VecNormalize statistics do not fit this env: {_where(key)} was saved with shape "
            f"{_shape_of(saved)} but the env's observation space has shape {env_shape}. {hint}"
        )


def _space_at(description: Mapping[str, Any], key: Any) -> Mapping[str, Any] | None:
    if key is None:
        return description
    for sub_key, sub in description.get("spaces", []):
        if sub_key == key:
            return sub
    return None


def load_error(path: str | os.PathLike[str], problem: str) -> NormalizationFileError:
    """The error for a normalization file that cannot be loaded.

    :param path: the file.
    :param problem: what is wrong with it, as a sentence.
    :return: ``NormalizationFileError("Cannot load VecNormalize statistics from '<path>': <problem>")``.
    """
    return NormalizationFileError(f"Cannot load VecNormalize statistics from {os.fspath(path)!r}: {problem}")


def check_rms_shapes(state: NormalizationState, path: str | os.PathLike[str]) -> None:
    """Check that the statistics of ``state`` have the shapes of its saved observation space.

    :param state: the state read from ``path``.
    :param path: the file it was read from (named in the error).
    :raises NormalizationFileError: if per-key statistics do not belong to a Dict space (or one set to a
        Dict or Tuple space), if a key is not in the saved space, or if a ``mean`` / ``var`` shape differs
        from the saved shape (``()`` for ``ret_rms``).
    """
    space_type = state.observation_space.get("type")
    if isinstance(state.obs_rms, dict) and space_type != "Dict":
        raise load_error(path, f"per-key observation statistics for a {space_type} observation space")
    if isinstance(state.obs_rms, RunningMeanStd) and space_type in ("Dict", "Tuple"):
        raise load_error(path, f"one set of observation statistics for a {space_type} space")
    items: list[tuple[Any, RunningMeanStd]] = [("ret_rms", state.ret_rms)]
    if isinstance(state.obs_rms, dict):
        items += list(state.obs_rms.items())
    elif state.obs_rms is not None:
        items.append((None, state.obs_rms))
    for key, rms in items:
        if key == "ret_rms":
            expected: tuple[int, ...] | None = ()
        else:
            sub = _space_at(state.observation_space, key)
            if sub is None:
                raise load_error(
                    path, f"observation statistics for key {key!r}, which is not in the saved observation space"
                )
            expected = _shape_of(sub)
        name = "ret_rms" if key == "ret_rms" else ("obs_rms" if key is None else f"obs_rms[{key!r}]")
        for field in ("mean", "var"):
            array = getattr(rms, field)
            if expected is not None and array.shape != expected:
                raise load_error(
                    path, f"{name}.{field} has shape {array.shape} but the saved observation space says {expected}"
                )


def statistic(values: Any) -> Any:
    """A ``mean`` / ``var`` as a ``RunningMeanStd`` holds it after an update: float64, a NumPy scalar for a statistic
    of shape ``()`` (a reward's), as SB3's; an array otherwise."""
    array = np.array(values, dtype=np.float64)
    return array[()] if array.ndim == 0 else array
