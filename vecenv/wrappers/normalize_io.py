"""The file format of :meth:`VecNormalize.save <vecenv.VecNormalize.save>`, and the import of SB3 pickles.

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

Stable-Baselines3 pickles
-------------------------

SB3's ``VecNormalize.save`` pickles the whole wrapper. :func:`read_sb3_pickle` reads such a file
without SB3, with a :class:`pickle.Unpickler` whose ``find_class`` admits only the globals such a
pickle needs (:func:`sb3_allowed_globals`): numpy's array, dtype and scalar reconstructors and random
generators, gymnasium's spaces, ``collections.OrderedDict``, and SB3's ``VecNormalize`` and
``RunningMeanStd`` (mapped onto vecenv's). The opcodes are first scanned without executing
anything (:func:`scan_pickle_globals`): a file naming any other global is refused with
:class:`NormalizationFileError` before unpickling starts. A global hidden from the scan is refused by
``find_class`` when the unpickler reaches it, so only the allowed callables can ever run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import importlib
import io
import json
import math
import os
import pickle
import pickletools
import tempfile
import zipfile
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import IO, Any, Union, cast

import numpy as np
from gymnasium import spaces

from vecenv.running_mean_std import RunningMeanStd
from vecenv.version import __version__

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
_ZIP_MAGIC = b"PK\x03\x04"

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


# --- observation spaces ---------------------------------------------------------------------------------


def describe_space(space: spaces.Space) -> dict[str, Any]:
    """A JSON-serializable description of ``space`` (the ``observation_space`` entry of the header).

    :param space: a gymnasium space.
    :return: e.g. ``{"type": "Box", "shape": [4], "dtype": "float32"}``; see the module docstring.
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


def _check_rms_shapes(state: NormalizationState, source: str) -> None:
    """The saved statistics must have the shapes of the saved observation space."""
    space_type = state.observation_space.get("type")
    if isinstance(state.obs_rms, dict) and space_type != "Dict":
        raise NormalizationFileError(f"{source}: per-key observation statistics for a {space_type} observation space")
    if isinstance(state.obs_rms, RunningMeanStd) and space_type in ("Dict", "Tuple"):
        raise NormalizationFileError(f"{source}: one set of observation statistics for a {space_type} space")
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
                raise NormalizationFileError(
                    f"{source}: observation statistics for key {key!r}, which is not in the saved observation space"
                )
            expected = _shape_of(sub)
        name = "ret_rms" if key == "ret_rms" else ("obs_rms" if key is None else f"obs_rms[{key!r}]")
        for field in ("mean", "var"):
            array = getattr(rms, field)
            if expected is not None and array.shape != expected:
                raise NormalizationFileError(
                    f"{source}: {name}.{field} has shape {array.shape} but the saved observation space says {expected}"
                )


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


def _write_payload(file: IO[bytes], data: bytes) -> None:
    """Write all of ``data`` to ``file`` (a seam for the crash tests)."""
    file.write(data)


def _new_file_mode(path: str) -> int:
    """Permissions for the saved file: those of the file it replaces, else what ``open()`` would give."""
    with contextlib.suppress(OSError):
        return os.stat(path).st_mode & 0o777
    umask = os.umask(0o022)
    os.umask(umask)
    return 0o666 & ~umask


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Replace the file at ``path`` by ``data`` atomically.

    The bytes go to a temporary file in the same folder, which is flushed, fsynced and then renamed
    over ``path`` with :func:`os.replace`. If anything fails the temporary file is removed and the
    previous file at ``path`` (if any) is left untouched.

    :param path: the destination.
    :param data: the full file content.
    """
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp_path = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as file:
            _write_payload(file, data)
            file.flush()
            os.fsync(file.fileno())
        os.chmod(tmp_path, _new_file_mode(path))
        os.replace(tmp_path, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp_path)
        raise
    # make the rename itself durable (not possible on every platform / file system)
    with contextlib.suppress(OSError):
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def write_normalization_file(path: str | os.PathLike[str], state: NormalizationState) -> None:
    """Write ``state`` to ``path`` in the vecenv normalization format, atomically.

    :param path: the destination (``str`` or :class:`os.PathLike`); written as given, no extension added.
    :param state: what to save.
    """
    atomic_write_bytes(path, encode_normalization_file(state))


# --- reading --------------------------------------------------------------------------------------------


def _read_bytes(path: str | os.PathLike[str]) -> bytes:
    with open(path, "rb") as file:
        return file.read()


def _fail(path: Any, problem: str) -> NormalizationFileError:
    return NormalizationFileError(f"Cannot load VecNormalize statistics from {os.fspath(path)!r}: {problem}")


def _read_members(path: Any, data: bytes) -> dict[str, np.ndarray]:
    """Every member of the archive as an array, refusing pickled objects and anything that is not ``.npy``."""
    members: dict[str, np.ndarray] = {}
    max_member_size = max(100 * len(data), 1 << 20)  # zip-bomb guard; stored members are never larger than the file
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            for info in archive.infolist():
                name = info.filename
                if not name.endswith(".npy") or name[: -len(".npy")] in members:
                    raise _fail(path, f"unexpected or duplicate archive member {name!r}; this is not a vecenv file.")
                if info.file_size > max_member_size:
                    raise _fail(path, f"archive member {name!r} claims {info.file_size} bytes; refusing to read it.")
                with archive.open(info) as member:
                    try:
                        array = np.lib.format.read_array(member, allow_pickle=False)
                    except ValueError as exc:
                        if "allow_pickle" in str(exc) or "Object arrays" in str(exc):
                            raise _fail(
                                path,
                                f"member {name!r} holds pickled Python objects; vecenv never unpickles them, so the "
                                "file is refused (nothing was executed).",
                            ) from exc
                        raise
                members[name[: -len(".npy")]] = array
    except NormalizationFileError:
        raise
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError, EOFError, KeyError, RuntimeError) as exc:
        raise _fail(path, f"the file is truncated or corrupt ({type(exc).__name__}: {exc}).") from exc
    return members


def _decode_header(path: Any, members: Mapping[str, np.ndarray]) -> dict[str, Any]:
    if HEADER not in members or HEADER_DIGEST not in members:
        raise _fail(path, f"the archive has no {HEADER!r} / {HEADER_DIGEST!r} members; this is not a vecenv file.")
    header_array, digest_array = members[HEADER], members[HEADER_DIGEST]
    if header_array.dtype != np.uint8 or header_array.ndim != 1 or digest_array.dtype != np.uint8:
        raise _fail(path, "the header members have the wrong dtype or shape.")
    header_bytes = header_array.tobytes()
    if hashlib.sha256(header_bytes).digest() != digest_array.tobytes():
        raise _fail(path, "the header does not match its SHA-256 digest: the file was modified or is corrupt.")
    try:
        header = json.loads(header_bytes.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _fail(path, f"the header is not valid JSON ({exc}).") from exc
    if not isinstance(header, dict) or header.get("format") != FORMAT_NAME:
        raise _fail(path, f"the header does not declare format {FORMAT_NAME!r}.")
    version = header.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise _fail(path, f"invalid format_version {version!r}.")
    if version > FORMAT_VERSION:
        raise _fail(
            path,
            f"it uses format version {version}, written by vecenv {header.get('vecenv_version')}; this vecenv "
            f"({__version__}) reads versions up to {FORMAT_VERSION}. Upgrade vecenv to load it.",
        )
    return header


def _check_config(path: Any, config: Any) -> dict[str, Any]:
    if not isinstance(config, dict):
        raise _fail(path, "the header has no 'config' object.")
    checked: dict[str, Any] = {}
    for field in BOOL_CONFIG_FIELDS:
        value = config.get(field)
        if not isinstance(value, bool):
            raise _fail(path, f"config field {field!r} must be true or false, got {value!r}")
        checked[field] = value
    for field in FLOAT_CONFIG_FIELDS:
        value = config.get(field)
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise _fail(path, f"config field {field!r} must be a number, got {value!r}")
        checked[field] = float(value)
    keys = config.get("norm_obs_keys")
    if keys is not None and (not isinstance(keys, list) or not all(isinstance(k, (str, int)) for k in keys)):
        raise _fail(path, f"config field 'norm_obs_keys' must be null or a list of keys, got {keys!r}")
    checked["norm_obs_keys"] = keys
    extra = set(config) - set(checked)
    if extra:
        raise _fail(path, f"unknown config fields {sorted(extra)}")
    return checked


def _check_space_description(path: Any, description: Any) -> None:
    if not isinstance(description, dict) or not isinstance(description.get("type"), str):
        raise _fail(path, "the observation space description is malformed.")
    kind = description["type"]
    if kind == "Box":
        shape = description.get("shape")
        if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
            raise _fail(path, f"malformed Box shape {shape!r} in the observation space description.")
    elif kind in ("Dict", "Tuple"):
        subs = description.get("spaces")
        if not isinstance(subs, list):
            raise _fail(path, f"malformed {kind} space description.")
        for sub in subs:
            if kind == "Dict" and not (isinstance(sub, list) and len(sub) == 2 and isinstance(sub[0], (str, int))):
                raise _fail(path, "malformed Dict space description.")
            _check_space_description(path, sub[1] if kind == "Dict" else sub)


def _rms_from(path: Any, arrays: Mapping[str, np.ndarray], prefix: str) -> RunningMeanStd:
    rms = RunningMeanStd(shape=arrays[f"{prefix}.mean"].shape)
    rms.mean = arrays[f"{prefix}.mean"].astype(np.float64)
    rms.var = arrays[f"{prefix}.var"].astype(np.float64)
    if rms.var.shape != rms.mean.shape or arrays[f"{prefix}.count"].shape != ():
        raise _fail(path, f"{prefix} arrays have inconsistent shapes.")
    rms.count = float(arrays[f"{prefix}.count"])
    return rms


def read_normalization_file(path: str | os.PathLike[str]) -> NormalizationState:
    """Read and validate a file written by :func:`write_normalization_file`; nothing in it is executed.

    :param path: the file (``str`` or :class:`os.PathLike`).
    :return: the saved state.
    :raises NormalizationFileError: if the file is an SB3 pickle (the message names
        :meth:`VecNormalize.load_sb3 <vecenv.VecNormalize.load_sb3>`), not a vecenv normalization file,
        truncated, corrupt, modified, or holds pickled objects.
    :raises OSError: if the file cannot be opened.
    """
    data = _read_bytes(path)
    if data[:1] == _PICKLE_PROTO:
        raise _fail(
            path,
            "this is a pickle, probably written by Stable-Baselines3's VecNormalize.save. VecNormalize.load never "
            "unpickles; import a Stable-Baselines3 file with vecenv.VecNormalize.load_sb3(path, venv) (a restricted "
            "unpickler, SB3 not needed), then save it in vecenv's format with .save(path).",
        )
    if data[:4] != _ZIP_MAGIC:
        what = "an empty file" if not data else f"a file starting with {data[:8]!r}"
        raise _fail(path, f"expected a vecenv normalization file (a ZIP archive starting with b'PK'), got {what}.")
    members = _read_members(path, data)
    header = _decode_header(path, members)
    config = _check_config(path, header.get("config"))
    _check_space_description(path, header.get("observation_space"))

    manifest = header.get("arrays")
    statistics = header.get("statistics")
    if not isinstance(manifest, dict) or not isinstance(statistics, dict):
        raise _fail(path, "the header has no 'arrays' / 'statistics' objects.")
    obs_stats = statistics.get("obs_rms")
    prefixes: list[str] = []
    obs_keys: list[Any] | None = None
    if obs_stats is not None:
        if not isinstance(obs_stats, dict) or "keys" not in obs_stats:
            raise _fail(path, "malformed 'statistics.obs_rms' entry.")
        obs_keys = obs_stats["keys"]
        if obs_keys is None:
            prefixes.append("obs_rms")
        elif isinstance(obs_keys, list) and len(set(map(repr, obs_keys))) == len(obs_keys):
            prefixes += [f"obs_rms.{i}" for i in range(len(obs_keys))]
        else:
            raise _fail(path, f"malformed observation statistics keys {obs_keys!r}.")
    prefixes.append("ret_rms")
    expected_names = {f"{prefix}.{field}" for prefix in prefixes for field in STAT_FIELDS}
    arrays = {name: array for name, array in members.items() if name not in (HEADER, HEADER_DIGEST)}
    if set(arrays) != expected_names or set(manifest) != expected_names:
        raise _fail(
            path,
            f"the archive holds arrays {sorted(arrays)} and the header lists {sorted(manifest)}, expected "
            f"{sorted(expected_names)}.",
        )
    for name, array in arrays.items():
        entry = manifest[name]
        if not isinstance(entry, dict):
            raise _fail(path, f"malformed header entry for array {name!r}.")
        if array.dtype.str != "<f8" or entry.get("dtype") != "<f8":
            raise _fail(
                path, f"array {name!r} has dtype {array.dtype.str} (header: {entry.get('dtype')}), expected <f8."
            )
        if entry.get("shape") != list(array.shape):
            raise _fail(path, f"array {name!r} has shape {array.shape} but the header says {entry.get('shape')}.")
        if entry.get("sha256") != _array_digest(array):
            raise _fail(path, f"array {name!r} does not match its SHA-256 digest: the file was modified or is corrupt.")

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
    _check_rms_shapes(state, f"Cannot load VecNormalize statistics from {os.fspath(path)!r}")
    if config["norm_obs"] and obs_rms is None:
        raise _fail(path, "norm_obs is true but the file holds no observation statistics.")
    return state


# --- Stable-Baselines3 pickles --------------------------------------------------------------------------

SB3_VEC_NORMALIZE = ("stable_baselines3.common.vec_env.vec_normalize", "VecNormalize")
SB3_RUNNING_MEAN_STD = ("stable_baselines3.common.running_mean_std", "RunningMeanStd")


def _numpy_globals() -> dict[tuple[str, str], tuple[tuple[str, ...], str]]:
    """``(module, name)`` as written in a pickle -> (modules to take ``name`` from, in order of preference, name)."""
    table: dict[tuple[str, str], tuple[tuple[str, ...], str]] = {}
    for core in ("numpy._core", "numpy.core"):  # numpy >= 2 writes numpy._core, numpy 1.x numpy.core
        for module, name in (("multiarray", "_reconstruct"), ("multiarray", "scalar"), ("numeric", "_frombuffer")):
            table[(f"{core}.{module}", name)] = ((f"numpy._core.{module}", f"numpy.core.{module}"), name)
    table[("numpy", "ndarray")] = (("numpy",), "ndarray")
    table[("numpy", "dtype")] = (("numpy",), "dtype")
    for name in ("__generator_ctor", "__bit_generator_ctor"):
        table[("numpy.random._pickle", name)] = (("numpy.random._pickle",), name)
    for module, name in (
        ("_pcg64", "PCG64"),
        ("_pcg64", "PCG64DXSM"),
        ("_mt19937", "MT19937"),
        ("_philox", "Philox"),
        ("_sfc64", "SFC64"),
        ("bit_generator", "SeedSequence"),
        ("bit_generator", "__pyx_unpickle_SeedSequence"),
    ):
        table[(f"numpy.random.{module}", name)] = ((f"numpy.random.{module}",), name)
    return table


_GYMNASIUM_SPACES = {
    "box": "Box",
    "dict": "Dict",
    "discrete": "Discrete",
    "multi_binary": "MultiBinary",
    "multi_discrete": "MultiDiscrete",
    "tuple": "Tuple",
}


def _resolve(modules: tuple[str, ...], name: str) -> Any:
    for module_name in modules:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        if hasattr(module, name):
            return getattr(module, name)
    return None


def sb3_allowed_globals() -> dict[tuple[str, str], Any]:
    """The only globals :func:`read_sb3_pickle` lets a pickle reference, and what each resolves to.

    :return: ``{(module, name): object}``: numpy's ndarray / dtype / scalar reconstructors and random
        generator constructors, gymnasium's Box, Dict, Discrete, MultiBinary, MultiDiscrete and Tuple
        spaces, ``collections.OrderedDict``, and SB3's ``VecNormalize`` / ``RunningMeanStd`` mapped onto
        vecenv's classes.
    """
    from vecenv.wrappers.vec_normalize import VecNormalize

    allowed: dict[tuple[str, str], Any] = {}
    for key, (modules, name) in _numpy_globals().items():
        resolved = _resolve(modules, name)
        if resolved is not None:
            allowed[key] = resolved
    for module, name in _GYMNASIUM_SPACES.items():
        allowed[(f"gymnasium.spaces.{module}", name)] = getattr(spaces, name)
    allowed[("collections", "OrderedDict")] = OrderedDict
    allowed[SB3_VEC_NORMALIZE] = VecNormalize
    allowed[SB3_RUNNING_MEAN_STD] = RunningMeanStd
    return allowed


class RestrictedUnpickler(pickle.Unpickler):
    """An unpickler that resolves only the globals of ``allowed``; any other global raises.

    :param file: the pickle stream.
    :param allowed: ``{(module, name): object}`` (see :func:`sb3_allowed_globals`).
    :param on_forbidden: builds the exception raised for a forbidden ``(module, name)``.
    """

    def __init__(
        self,
        file: IO[bytes],
        allowed: Mapping[tuple[str, str], Any],
        on_forbidden: Callable[[str, str], Exception],
    ) -> None:
        super().__init__(file)
        self.allowed = allowed
        self.on_forbidden = on_forbidden

    def find_class(self, module: str, name: str) -> Any:
        try:
            return self.allowed[(module, name)]
        except KeyError:
            raise self.on_forbidden(module, name) from None


_STRING_OPS = frozenset(
    {"STRING", "BINSTRING", "SHORT_BINSTRING", "UNICODE", "BINUNICODE", "SHORT_BINUNICODE", "BINUNICODE8"}
)
_MEMO_OPS = frozenset({"MEMOIZE", "PUT", "BINPUT", "LONG_BINPUT"})


def scan_pickle_globals(data: bytes) -> list[tuple[str, str]]:
    """The globals a pickle names, found by reading its opcodes without executing any.

    ``GLOBAL`` / ``INST`` opcodes carry their names; a ``STACK_GLOBAL`` is resolved when the two values
    pushed just before it are strings (directly or through the memo), which is how :mod:`pickle` writes
    them. Globals hidden any other way are not listed: :class:`RestrictedUnpickler` still refuses them.

    :param data: the pickle bytes.
    :return: ``(module, name)`` pairs in file order.
    :raises ValueError: if the opcode stream is malformed or truncated.
    """
    found: list[tuple[str, str]] = []
    memo: dict[int, str | None] = {}
    recent: list[str | None] = []  # values pushed by the latest opcodes (None: not a known string)
    for opcode, raw_arg, _ in pickletools.genops(data):
        name, arg = opcode.name, cast(Any, raw_arg)
        if name in _STRING_OPS:
            recent.append(arg.decode("latin-1") if isinstance(arg, bytes) else str(arg))
        elif name in ("GET", "BINGET", "LONG_BINGET"):
            recent.append(memo.get(int(arg)))
        elif name in _MEMO_OPS:  # store the top of the stack; push nothing
            memo[len(memo) if name == "MEMOIZE" else int(arg)] = recent[-1] if recent else None
        elif name in ("PROTO", "FRAME"):
            continue
        elif name in ("GLOBAL", "INST"):
            module, _, qualname = str(arg).partition(" ")
            found.append((module, qualname))
            recent.append(None)
        elif name == "STACK_GLOBAL":
            pair = (recent[-2], recent[-1]) if len(recent) >= 2 else (None, None)
            if pair[0] is not None and pair[1] is not None:
                found.append((pair[0], pair[1]))
            recent.append(None)
        else:
            recent.append(None)
        del recent[:-2]
    return found


def _forbidden_global(path: Any) -> Callable[[str, str], Exception]:
    def build(module: str, name: str) -> Exception:
        if module == "gym" or module.startswith("gym."):
            return _fail(
                path,
                f"the pickle references {module}.{name}: it was written with the old `gym` package (Stable-Baselines3 "
                "< 2.0), which vecenv does not import. Load it with SB3 1.x and copy the statistics, or re-save it "
                "with Stable-Baselines3 >= 2.0 (gymnasium).",
            )
        return _fail(
            path,
            f"the pickle references the global {module}.{name}, which is not allowed in a Stable-Baselines3 "
            "VecNormalize file (only numpy arrays, dtypes and random generators, gymnasium spaces, "
            "collections.OrderedDict, and SB3's VecNormalize / RunningMeanStd are). The file was refused before "
            f"{module}.{name} could run; do not load it with plain pickle unless you trust its author.",
        )

    return build


def _sb3_rms(path: Any, value: Any, what: str) -> RunningMeanStd:
    if not isinstance(value, RunningMeanStd):
        raise _fail(path, f"{what} is a {type(value).__name__}, expected SB3's RunningMeanStd.")
    fields = vars(value)
    rms = RunningMeanStd()
    try:
        rms.mean = np.array(fields["mean"], dtype=np.float64)
        rms.var = np.array(fields["var"], dtype=np.float64)
        rms.count = float(fields["count"])
    except (KeyError, TypeError, ValueError) as exc:
        raise _fail(path, f"{what} is malformed ({type(exc).__name__}: {exc}).") from exc
    if rms.mean.shape != rms.var.shape or not math.isfinite(rms.count):
        raise _fail(path, f"{what} is malformed (mean shape {rms.mean.shape}, var shape {rms.var.shape}).")
    return rms


def read_sb3_pickle(path: str | os.PathLike[str]) -> NormalizationState:
    """Read a ``VecNormalize`` pickle written by Stable-Baselines3 (>= 2.0), without SB3 and without running code.

    The file is unpickled by a :class:`RestrictedUnpickler` over :func:`sb3_allowed_globals`; then
    only the configuration and statistics are taken from the result (and validated).

    :param path: the ``.pkl`` file written by SB3's ``VecNormalize.save`` (``str`` or :class:`os.PathLike`).
    :return: the saved state (``vecenv_version`` is None).
    :raises NormalizationFileError: if the file references any other global (nothing has run), is a
        vecenv file (use ``VecNormalize.load``), or is not a valid SB3 VecNormalize pickle.
    :raises OSError: if the file cannot be opened.
    """
    from vecenv.wrappers.vec_normalize import VecNormalize

    data = _read_bytes(path)
    if data[:4] == _ZIP_MAGIC:
        raise _fail(path, "this is a vecenv normalization file, not an SB3 pickle: load it with VecNormalize.load.")
    allowed, forbidden = sb3_allowed_globals(), _forbidden_global(path)
    try:
        named = scan_pickle_globals(data)
    except Exception as exc:
        raise _fail(path, f"not a readable pickle; truncated or corrupt? ({type(exc).__name__}: {exc})") from exc
    for module, name in named:
        if (module, name) not in allowed:
            raise forbidden(module, name)  # before anything in the file has run
    unpickler = RestrictedUnpickler(io.BytesIO(data), allowed, forbidden)
    try:
        obj = unpickler.load()
    except NormalizationFileError:
        raise
    except Exception as exc:
        raise _fail(path, f"not a readable pickle; truncated or corrupt? ({type(exc).__name__}: {exc})") from exc
    if not isinstance(obj, VecNormalize):
        raise _fail(path, f"the pickle holds a {type(obj).__name__}, expected SB3's VecNormalize.")
    fields = vars(obj)
    try:
        config = {
            "training": bool(fields["training"]),
            "norm_obs": bool(fields["norm_obs"]),
            "norm_reward": bool(fields["norm_reward"]),
            "clip_obs": float(fields["clip_obs"]),
            "clip_reward": float(fields["clip_reward"]),
            "gamma": float(fields["gamma"]),
            "epsilon": float(fields["epsilon"]),
            "norm_obs_keys": None if fields.get("norm_obs_keys") is None else list(fields["norm_obs_keys"]),
        }
        observation_space = fields["observation_space"]
    except (KeyError, TypeError, ValueError) as exc:
        raise _fail(path, f"the pickled VecNormalize lacks or has an invalid {exc} attribute.") from exc
    if not isinstance(observation_space, spaces.Space):
        raise _fail(path, f"the pickled observation_space is a {type(observation_space).__name__}, not a space.")
    obs_rms: ObsRms | None = None
    if "obs_rms" in fields:
        raw = fields["obs_rms"]
        if isinstance(raw, dict):
            obs_rms = {key: _sb3_rms(path, value, f"obs_rms[{key!r}]") for key, value in raw.items()}
        else:
            obs_rms = _sb3_rms(path, raw, "obs_rms")
    state = NormalizationState(
        config=config,
        observation_space=describe_space(observation_space),
        obs_rms=obs_rms,
        ret_rms=_sb3_rms(path, fields.get("ret_rms"), "ret_rms"),
    )
    _check_rms_shapes(state, f"Cannot load VecNormalize statistics from {os.fspath(path)!r}")
    if config["norm_obs"] and obs_rms is None:
        raise _fail(path, "norm_obs is True but the pickle holds no observation statistics (obs_rms).")
    return state
