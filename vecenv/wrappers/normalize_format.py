"""The file format of :meth:`VecNormalize.save <vecenv.VecNormalize.save>`: writing, reading and validation.

vecenv never unpickles a file written by ``VecNormalize.save``: the statistics are plain numpy arrays
and the configuration is JSON. Reading such a file cannot run code, whoever wrote it.

File format, version 1
----------------------

The file is a ZIP archive (a NumPy ``.npz``, so ``numpy.load(path)`` opens it for inspection) with
uncompressed members in this order, each a ``.npy`` array without pickled objects:

``header.npy``
    ``uint8`` array, shape ``(n,)``: the UTF-8 bytes of a JSON object (the *header*, below).
``header_sha256.npy``
    ``uint8`` array, shape ``(32,)``: the SHA-256 digest of exactly those ``n`` bytes.
``obs_rms.mean.npy``, ``obs_rms.var.npy``, ``obs_rms.count.npy``
    observation statistics of a Box observation space (only if the wrapper had ``obs_rms``).
``obs_rms.<i>.mean.npy``, ``obs_rms.<i>.var.npy``, ``obs_rms.<i>.count.npy``
    instead, for a Dict observation space: statistics of ``header["statistics"]["obs_rms"]["keys"][i]``.
``ret_rms.mean.npy``, ``ret_rms.var.npy``, ``ret_rms.count.npy``
    statistics of the discounted returns (always present).

Every statistics array is little-endian float64 (``<f8``): ``mean`` and ``var`` have the shape of
one observation (``()`` for ``ret_rms``), ``count`` has shape ``()``. The header is::

    {
      "format": "vecenv.VecNormalize",
      "format_version": 1,
      "vecenv_version": "0.1.0",
      "config": {"training": true, "norm_obs": true, "norm_reward": true, "clip_obs": 10.0,
                 "clip_reward": 10.0, "gamma": 0.99, "epsilon": 1e-08, "norm_obs_keys": null},
      "observation_space": {"type": "Box", "shape": [4], "dtype": "float32"},
      "statistics": {"obs_rms": {"keys": null}, "ret_rms": {}},
      "arrays": {"obs_rms.mean": {"dtype": "<f8", "shape": [4], "sha256": "<64 hex digits>"}, ...}
    }

- ``config`` holds the keyword arguments of :class:`~vecenv.VecNormalize` (``norm_obs_keys`` is a
  list of keys or ``null``). Infinite clip values are written as ``Infinity`` (Python's JSON).
- ``observation_space`` describes the wrapper's observation space: ``{"type": "Box", "shape",
  "dtype"}``, ``{"type": "Dict", "spaces": [[key, description], ...]}`` in the space's key order,
  ``{"type": "Tuple", "spaces": [...]}``, ``{"type": "Discrete", "n", "start"}``,
  ``{"type": "MultiDiscrete", "nvec"}``, ``{"type": "MultiBinary", "n"}``, or for any other space
  ``{"type": <class name>, "shape"}``. Loading compares the Box shapes and Dict keys with the env.
- ``statistics.obs_rms`` is ``null`` (no observation statistics, e.g. ``norm_obs=False``), or
  ``{"keys": null}`` (one set of arrays for a Box space), or ``{"keys": [key, ...]}`` (Dict space).
- ``arrays`` lists every statistics member by name (without ``.npy``) with its dtype string, shape
  and the SHA-256 of its data bytes (C order).

A reader must refuse the file if it is not a ZIP archive, if the member names are not exactly the
ones above, if any member is not a ``.npy`` array or holds Python objects, if the header digest or an
array digest does not match, if the header is not valid JSON of this shape, or if ``format_version``
is newer than it knows. The digests detect corruption and edits that forget to update them; they are
not signatures (anyone can recompute them). Safety against code execution comes from the format
itself: nothing in it is ever unpickled.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import zipfile
from collections.abc import Mapping
from typing import Any

import numpy as np

from vecenv.atomic import atomic_write_bytes
from vecenv.running_mean_std import RunningMeanStd
from vecenv.version import __version__
from vecenv.wrappers.normalize_state import (
    NormalizationFileError,
    NormalizationState,
    ObsRms,
    check_rms_shapes,
    load_error,
    statistic,
)

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "ZIP_MAGIC",
    "encode_normalization_file",
    "read_normalization_file",
    "write_normalization_file",
]

#: ``header["format"]`` of every file written by :func:`write_normalization_file`.
FORMAT_NAME = "vecenv.VecNormalize"
#: The format version written by this vecenv; files with a larger version are refused.
FORMAT_VERSION = 1

HEADER = "header"
HEADER_DIGEST = "header_sha256"
STAT_FIELDS = ("mean", "var", "count")
BOOL_CONFIG_FIELDS = ("training", "norm_obs", "norm_reward")
FLOAT_CONFIG_FIELDS = ("clip_obs", "clip_reward", "gamma", "epsilon")
_ZIP_DATE = (1980, 1, 1, 0, 0, 0)  # fixed member timestamps: the same statistics give the same bytes
_PICKLE_PROTO = b"\x80"
#: The first bytes of every normalization file (those of any ZIP archive).
ZIP_MAGIC = b"PK\x03\x04"


# --- writing --------------------------------------------------------------------------------------------


def _npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def _stat_arrays(prefix: str, rms: RunningMeanStd) -> dict[str, np.ndarray]:
    return {
        f"{prefix}.mean": np.array(rms.mean, dtype="<f8", order="C"),
        f"{prefix}.var": np.array(rms.var, dtype="<f8", order="C"),
        f"{prefix}.count": np.array(rms.count, dtype="<f8"),
    }


def _array_digest(array: np.ndarray) -> str:
    return hashlib.sha256(array.tobytes(order="C")).hexdigest()


def encode_normalization_file(state: NormalizationState) -> bytes:
    """Serialize ``state`` to the bytes of a normalization file (see the module docstring).

    :param state: what to save.
    :return: the file content (deterministic: the same state gives the same bytes).
    :raises TypeError: if ``norm_obs_keys`` or the observation space keys cannot be written as JSON.
    """
    arrays: dict[str, np.ndarray] = {}
    obs_stats: dict[str, Any] | None = None
    if isinstance(state.obs_rms, dict):
        keys = list(state.obs_rms.keys())
        obs_stats = {"keys": keys}
        for i, key in enumerate(keys):
            arrays.update(_stat_arrays(f"obs_rms.{i}", state.obs_rms[key]))
    elif state.obs_rms is not None:
        obs_stats = {"keys": None}
        arrays.update(_stat_arrays("obs_rms", state.obs_rms))
    arrays.update(_stat_arrays("ret_rms", state.ret_rms))

    header = {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "vecenv_version": __version__,
        "config": state.config,
        "observation_space": state.observation_space,
        "statistics": {"obs_rms": obs_stats, "ret_rms": {}},
        "arrays": {
            name: {"dtype": array.dtype.str, "shape": list(array.shape), "sha256": _array_digest(array)}
            for name, array in arrays.items()
        },
    }
    try:
        header_bytes = json.dumps(header, ensure_ascii=False).encode("utf-8")
    except TypeError as exc:
        raise TypeError(
            f"Cannot save VecNormalize statistics: the configuration or observation space holds a value JSON cannot "
            f"represent ({exc}). Observation keys must be strings or integers."
        ) from exc
    members = {
        HEADER: np.frombuffer(header_bytes, dtype=np.uint8),
        HEADER_DIGEST: np.frombuffer(hashlib.sha256(header_bytes).digest(), dtype=np.uint8),
        **arrays,
    }
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as archive:
        for name, array in members.items():
            info = zipfile.ZipInfo(f"{name}.npy", date_time=_ZIP_DATE)
            info.external_attr = 0o644 << 16
            archive.writestr(info, _npy_bytes(array))
    return buffer.getvalue()


def write_normalization_file(path: str | os.PathLike[str], state: NormalizationState) -> None:
    """Write ``state`` to ``path`` in the vecenv normalization format, atomically.

    :param path: the destination (``str`` or :class:`os.PathLike`); written as given, no extension added.
    :param state: what to save.
    """
    atomic_write_bytes(path, encode_normalization_file(state))


# --- reading --------------------------------------------------------------------------------------------


def _read_members(path: Any, data: bytes) -> dict[str, np.ndarray]:
    """Every member of the archive as an array, refusing pickled objects and anything that is not ``.npy``."""
    members: dict[str, np.ndarray] = {}
    max_member_size = max(100 * len(data), 1 << 20)  # zip-bomb guard; stored members are never larger than the file
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            for info in archive.infolist():
                name = info.filename
                if not name.endswith(".npy") or name[: -len(".npy")] in members:
                    raise load_error(
                        path, f"unexpected or duplicate archive member {name!r}; this is not a vecenv file."
                    )
                if info.file_size > max_member_size:
                    raise load_error(
                        path, f"archive member {name!r} claims {info.file_size} bytes; refusing to read it."
                    )
                with archive.open(info) as member:
                    try:
                        array = np.lib.format.read_array(member, allow_pickle=False)
                    except ValueError as exc:
                        if "allow_pickle" in str(exc) or "Object arrays" in str(exc):
                            raise load_error(
                                path,
                                f"member {name!r} holds pickled Python objects; vecenv never unpickles them, so the "
                                "file is refused (nothing was executed).",
                            ) from exc
                        raise
                members[name[: -len(".npy")]] = array
    except NormalizationFileError:
        raise
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError, EOFError, KeyError, RuntimeError) as exc:
        raise load_error(path, f"the file is truncated or corrupt ({type(exc).__name__}: {exc}).") from exc
    return members


def _decode_header(path: Any, members: Mapping[str, np.ndarray]) -> dict[str, Any]:
    if HEADER not in members or HEADER_DIGEST not in members:
        raise load_error(path, f"the archive has no {HEADER!r} / {HEADER_DIGEST!r} members; this is not a vecenv file.")
    header_array, digest_array = members[HEADER], members[HEADER_DIGEST]
    if header_array.dtype != np.uint8 or header_array.ndim != 1 or digest_array.dtype != np.uint8:
        raise load_error(path, "the header members have the wrong dtype or shape.")
    header_bytes = header_array.tobytes()
    if hashlib.sha256(header_bytes).digest() != digest_array.tobytes():
        raise load_error(path, "the header does not match its SHA-256 digest: the file was modified or is corrupt.")
    try:
        header = json.loads(header_bytes.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise load_error(path, f"the header is not valid JSON ({exc}).") from exc
    if not isinstance(header, dict) or header.get("format") != FORMAT_NAME:
        raise load_error(path, f"the header does not declare format {FORMAT_NAME!r}.")
    version = header.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise load_error(path, f"invalid format_version {version!r}.")
    if version > FORMAT_VERSION:
        raise load_error(
            path,
            f"it uses format version {version}, written by vecenv {header.get('vecenv_version')}; this vecenv "
            f"({__version__}) reads versions up to {FORMAT_VERSION}. Upgrade vecenv to load it.",
        )
    return header


def _check_config(path: Any, config: Any) -> dict[str, Any]:
    if not isinstance(config, dict):
        raise load_error(path, "the header has no 'config' object.")
    checked: dict[str, Any] = {}
    for field in BOOL_CONFIG_FIELDS:
        value = config.get(field)
        if not isinstance(value, bool):
            raise load_error(path, f"config field {field!r} must be true or false, got {value!r}")
        checked[field] = value
    for field in FLOAT_CONFIG_FIELDS:
        value = config.get(field)
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise load_error(path, f"config field {field!r} must be a number, got {value!r}")
        checked[field] = float(value)
    keys = config.get("norm_obs_keys")
    if keys is not None and (not isinstance(keys, list) or not all(isinstance(k, (str, int)) for k in keys)):
        raise load_error(path, f"config field 'norm_obs_keys' must be null or a list of keys, got {keys!r}")
    checked["norm_obs_keys"] = keys
    extra = set(config) - set(checked)
    if extra:
        raise load_error(path, f"unknown config fields {sorted(extra)}")
    return checked


def _check_space_description(path: Any, description: Any) -> None:
    if not isinstance(description, dict) or not isinstance(description.get("type"), str):
        raise load_error(path, "the observation space description is malformed.")
    kind = description["type"]
    if kind == "Box":
        shape = description.get("shape")
        if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
            raise load_error(path, f"malformed Box shape {shape!r} in the observation space description.")
    elif kind in ("Dict", "Tuple"):
        subs = description.get("spaces")
        if not isinstance(subs, list):
            raise load_error(path, f"malformed {kind} space description.")
        for sub in subs:
            if kind == "Dict" and not (isinstance(sub, list) and len(sub) == 2 and isinstance(sub[0], (str, int))):
                raise load_error(path, "malformed Dict space description.")
            _check_space_description(path, sub[1] if kind == "Dict" else sub)


def _rms_from(path: Any, arrays: Mapping[str, np.ndarray], prefix: str) -> RunningMeanStd:
    rms = RunningMeanStd(shape=arrays[f"{prefix}.mean"].shape)
    rms.mean = statistic(arrays[f"{prefix}.mean"])
    rms.var = statistic(arrays[f"{prefix}.var"])
    if rms.var.shape != rms.mean.shape or arrays[f"{prefix}.count"].shape != ():
        raise load_error(path, f"{prefix} arrays have inconsistent shapes.")
    rms.count = float(arrays[f"{prefix}.count"])
    return rms


def read_normalization_file(path: str | os.PathLike[str]) -> NormalizationState:
    """Read and validate a file written by :func:`write_normalization_file`; nothing in it is executed.

    :param path: the file (``str`` or :class:`os.PathLike`).
    :return: the saved state.
    :raises NormalizationFileError: if the file is an SB3 pickle (the message names
        :meth:`VecNormalize.load <vecenv.VecNormalize.load>`, which reads it), not a vecenv normalization file,
        truncated, corrupt, modified, or holds pickled objects.
    :raises OSError: if the file cannot be opened.
    """
    with open(path, "rb") as file:
        data = file.read()
    if data[:1] == _PICKLE_PROTO:
        raise load_error(
            path,
            "this is a pickle, probably written by Stable-Baselines3's VecNormalize.save; this reader never "
            "unpickles. vecenv.VecNormalize.load(path, venv) reads Stable-Baselines3 pickles through a restricted "
            "unpickler (as VecNormalize.load_sb3 and read_sb3_pickle do; SB3 not needed).",
        )
    if data[:4] != ZIP_MAGIC:
        what = "an empty file" if not data else f"a file starting with {data[:8]!r}"
        raise load_error(path, f"expected a vecenv normalization file (a ZIP archive starting with b'PK'), got {what}.")
    members = _read_members(path, data)
    header = _decode_header(path, members)
    config = _check_config(path, header.get("config"))
    _check_space_description(path, header.get("observation_space"))

    manifest = header.get("arrays")
    statistics = header.get("statistics")
    if not isinstance(manifest, dict) or not isinstance(statistics, dict):
        raise load_error(path, "the header has no 'arrays' / 'statistics' objects.")
    obs_stats = statistics.get("obs_rms")
    prefixes: list[str] = []
    obs_keys: list[Any] | None = None
    if obs_stats is not None:
        if not isinstance(obs_stats, dict) or "keys" not in obs_stats:
            raise load_error(path, "malformed 'statistics.obs_rms' entry.")
        obs_keys = obs_stats["keys"]
        if obs_keys is None:
            prefixes.append("obs_rms")
        elif isinstance(obs_keys, list) and len(set(map(repr, obs_keys))) == len(obs_keys):
            prefixes += [f"obs_rms.{i}" for i in range(len(obs_keys))]
        else:
            raise load_error(path, f"malformed observation statistics keys {obs_keys!r}.")
    prefixes.append("ret_rms")
    expected_names = {f"{prefix}.{field}" for prefix in prefixes for field in STAT_FIELDS}
    arrays = {name: array for name, array in members.items() if name not in (HEADER, HEADER_DIGEST)}
    if set(arrays) != expected_names or set(manifest) != expected_names:
        raise load_error(
            path,
            f"the archive holds arrays {sorted(arrays)} and the header lists {sorted(manifest)}, expected "
            f"{sorted(expected_names)}.",
        )
    for name, array in arrays.items():
        entry = manifest[name]
        if not isinstance(entry, dict):
            raise load_error(path, f"malformed header entry for array {name!r}.")
        if array.dtype.str != "<f8" or entry.get("dtype") != "<f8":
            raise load_error(
                path, f"array {name!r} has dtype {array.dtype.str} (header: {entry.get('dtype')}), expected <f8."
            )
        if entry.get("shape") != list(array.shape):
            raise load_error(path, f"array {name!r} has shape {array.shape} but the header says {entry.get('shape')}.")
        if entry.get("sha256") != _array_digest(array):
            raise load_error(
                path, f"array {name!r} does not match its SHA-256 digest: the file was modified or is corrupt."
            )

    obs_rms: ObsRms | None = None
    if obs_keys is not None:
        obs_rms = {key: _rms_from(path, arrays, f"obs_rms.{i}") for i, key in enumerate(obs_keys)}
    elif obs_stats is not None:
        obs_rms = _rms_from(path, arrays, "obs_rms")
    state = NormalizationState(
        config=config,
        observation_space=header["observation_space"],
        obs_rms=obs_rms,
        ret_rms=_rms_from(path, arrays, "ret_rms"),
        vecenv_version=str(header.get("vecenv_version")),
    )
    check_rms_shapes(state, path)
    if config["norm_obs"] and obs_rms is None:
        raise load_error(path, "norm_obs is true but the file holds no observation statistics.")
    return state
