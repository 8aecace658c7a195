"""Saving and loading :class:`~vecenv.VecNormalize` statistics: the names of the modules that do it, in one place.

- :mod:`vecenv.wrappers.normalize_format`: vecenv's pickle-free file format (written by
  :meth:`VecNormalize.save <vecenv.VecNormalize.save>`), its writer, and its validating reader;
- :mod:`vecenv.wrappers.sb3_pickle`: the restricted unpickler that imports Stable-Baselines3 pickles, and the
  writer of SB3's pickle format;
- :mod:`vecenv.wrappers.normalize_state`: what both hold (:class:`NormalizationState`) and the checks
  of saved statistics against observation spaces.

:func:`sb3_allowed_globals` and :func:`read_sb3_pickle` map SB3's ``VecNormalize`` onto
:class:`~vecenv.VecNormalize`. The modules above never import the wrapper; this one does.
"""

from __future__ import annotations

import os
from typing import Any

from vecenv.wrappers.normalize_format import (
    FORMAT_NAME,
    FORMAT_VERSION,
    encode_normalization_file,
    read_normalization_file,
    write_normalization_file,
)
from vecenv.wrappers.normalize_state import (
    NormalizationFileError,
    NormalizationState,
    ObsRms,
    check_space_matches,
    describe_space,
)
from vecenv.wrappers.sb3_pickle import allowed_globals, read_sb3_state, scan_pickle_globals
from vecenv.wrappers.vec_normalize import VecNormalize

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "NormalizationFileError",
    "NormalizationState",
    "ObsRms",
    "check_space_matches",
    "describe_space",
    "encode_normalization_file",
    "read_normalization_file",
    "read_sb3_pickle",
    "sb3_allowed_globals",
    "scan_pickle_globals",
    "write_normalization_file",
]


def sb3_allowed_globals() -> dict[tuple[str, str], Any]:
    """The only globals :func:`read_sb3_pickle` lets a pickle reference, and what each resolves to.

    :return: ``{(module, name): object}``: numpy's ndarray / dtype / scalar reconstructors and random
        generator constructors, gymnasium's Box, Dict, Discrete, MultiBinary, MultiDiscrete and Tuple
        spaces, ``collections.OrderedDict``, and SB3's ``VecNormalize`` / ``RunningMeanStd`` mapped onto
        vecenv's classes.
    """
    return allowed_globals(VecNormalize)


def read_sb3_pickle(path: str | os.PathLike[str]) -> NormalizationState:
    """Read a ``VecNormalize`` pickle written by Stable-Baselines3 (>= 2.0), without SB3 and without running code.

    The file is unpickled by a restricted unpickler over :func:`sb3_allowed_globals`; then only the
    configuration and statistics are taken from the result (and validated).

    :param path: the ``.pkl`` file written by SB3's ``VecNormalize.save`` (``str`` or :class:`os.PathLike`).
    :return: the saved state (``vecenv_version`` is None).
    :raises NormalizationFileError: if the file references any other global (nothing has run), is a
        vecenv file (use ``VecNormalize.load``), or is not a valid SB3 VecNormalize pickle.
    :raises OSError: if the file cannot be opened.
    """
    return read_sb3_state(path, VecNormalize)
