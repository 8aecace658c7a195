"""Stable-Baselines3 ``VecNormalize`` pickles, read and written without SB3 and without running code from a file.

SB3's ``VecNormalize.save`` pickles the whole wrapper. :func:`read_sb3_state` reads such a file
without SB3, with a :class:`pickle.Unpickler` whose ``find_class`` admits only the globals such a
pickle needs (:func:`allowed_globals`): numpy's array, dtype and scalar reconstructors and random
generators, gymnasium's spaces, ``collections.OrderedDict``, and SB3's ``VecNormalize`` and
``RunningMeanStd`` (mapped onto vecenv's: the caller passes its ``VecNormalize`` class, so this module
does not import the wrapper). The opcodes are first scanned without executing anything
(:func:`scan_pickle_globals`): a file naming any other global is refused with
:class:`~vecenv.wrappers.normalize_state.NormalizationFileError` before unpickling starts. A global
hidden from the scan is refused by ``find_class`` when the unpickler reaches it, so only the allowed
callables can ever run.

:func:`encode_sb3_pickle` writes the other direction: the pickle SB3's ``save`` would write for a
wrapper with the same attributes, naming SB3's classes (SB3 need not be installed), so SB3's
``VecNormalize.load`` reads it. It holds only globals :func:`allowed_globals` admits, so vecenv reads it too.
"""

from __future__ import annotations

import importlib
import io
import math
import os
import pickle
import pickletools
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import IO, Any, cast

import numpy as np
from gymnasium import spaces

from vecenv.atomic import atomic_write_bytes
from vecenv.running_mean_std import RunningMeanStd
from vecenv.wrappers.normalize_format import ZIP_MAGIC
from vecenv.wrappers.normalize_state import (
    NormalizationFileError,
    NormalizationState,
    ObsRms,
    check_rms_shapes,
    describe_space,
    load_error,
    statistic,
)
from vecenv.wrappers.numpy1_pickles import NUMPY_1, numpy1_bit_generator_state, numpy1_generator_ctors

__all__ = [
    "SB3_RUNNING_MEAN_STD",
    "SB3_VEC_NORMALIZE",
    "RefusedPickle",
    "RestrictedUnpickler",
    "Sb3FormatError",
    "allowed_globals",
    "encode_sb3_pickle",
    "is_pickle",
    "read_sb3_state",
    "scan_pickle_globals",
    "write_sb3_pickle",
]

#: ``(module, name)`` of SB3's ``VecNormalize`` as a pickle names it.
SB3_VEC_NORMALIZE = ("stable_baselines3.common.vec_env.vec_normalize", "VecNormalize")
#: ``(module, name)`` of SB3's ``RunningMeanStd`` as a pickle names it.
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


def allowed_globals(vec_normalize_class: type) -> dict[tuple[str, str], Any]:
    """The only globals :func:`read_sb3_state` lets a pickle reference, and what each resolves to.

    :param vec_normalize_class: the class SB3's ``VecNormalize`` is mapped onto (vecenv's
        :class:`~vecenv.VecNormalize`); unpickling calls its ``__setstate__``.
    :return: ``{(module, name): object}``: numpy's ndarray / dtype / scalar reconstructors and random
        generator constructors, gymnasium's Box, Dict, Discrete, MultiBinary, MultiDiscrete and Tuple
        spaces, ``collections.OrderedDict``, and SB3's ``VecNormalize`` mapped onto ``vec_normalize_class``
        and its ``RunningMeanStd`` onto vecenv's.
    """
    allowed: dict[tuple[str, str], Any] = {}
    for key, (modules, name) in _numpy_globals().items():
        resolved = _resolve(modules, name)
        if resolved is not None:
            allowed[key] = resolved
    for module, name in _GYMNASIUM_SPACES.items():
        allowed[(f"gymnasium.spaces.{module}", name)] = getattr(spaces, name)
    allowed[("collections", "OrderedDict")] = OrderedDict
    allowed[SB3_VEC_NORMALIZE] = vec_normalize_class
    allowed[SB3_RUNNING_MEAN_STD] = RunningMeanStd
    if NUMPY_1:
        numpy1_generator_ctors(allowed)
    return allowed


class RefusedPickle(pickle.UnpicklingError):
    """A pickle asked :class:`RestrictedUnpickler` for something it refuses (see there)."""


#: the kinds of numpy dtype a VecNormalize pickle holds: bool, signed and unsigned integers, floats, complex
_NUMERIC_KINDS = frozenset("biufc")


def _plain_numeric(dtype: Any) -> bool:
    """Whether ``dtype`` is a plain numeric numpy dtype: no fields, no sub-array, no flags of its own (an object
    field hidden by a dtype's pickled state would have numpy read bytes of the file as object pointers)."""
    return (
        isinstance(dtype, np.dtype)
        and dtype.kind in _NUMERIC_KINDS
        and dtype.fields is None
        and dtype.subdtype is None
        and dtype.flags == np.dtype(dtype.str).flags
    )


def _checked_dtype_state(dtype: np.dtype, state: Any) -> None:
    """Refuse a pickled dtype state (``dtype.__setstate__``) other than a plain numeric dtype's own."""
    if not (isinstance(state, tuple) and len(state) in (8, 9) and dtype.kind in _NUMERIC_KINDS):
        raise RefusedPickle(f"a dtype {dtype} with the state {state!r}: only plain numeric dtypes are read")
    _, byteorder, subarray, names, fields, elsize, alignment, flags = state[:8]
    if (
        byteorder not in ("<", ">", "|", "=")
        or subarray is not None
        or names is not None
        or fields is not None
        or elsize not in (-1, dtype.itemsize)
        or alignment not in (-1, dtype.alignment)
        or flags != dtype.flags
    ):
        raise RefusedPickle(f"a dtype {dtype} with the state {state!r}: only plain numeric dtypes are read")


def _checked_array_state(state: Any) -> None:
    """Refuse a pickled array state (``ndarray.__setstate__``) whose dtype is not plain numeric."""
    dtype = state[-3] if isinstance(state, tuple) and len(state) in (4, 5) else None
    if not _plain_numeric(dtype):
        raise RefusedPickle(f"an array of dtype {dtype!r}: only arrays of plain numeric dtypes are read")


def _numeric_only(function: Callable[..., Any], dtype_position: int) -> Callable[..., Any]:
    """``function`` (numpy's scalar / buffer reconstructors), refusing a dtype argument that is not plain numeric."""

    def checked(*args: Any) -> Any:
        if len(args) <= dtype_position or not _plain_numeric(args[dtype_position]):
            raise RefusedPickle(f"{function.__name__} of {args[: dtype_position + 1]!r}: only plain numeric dtypes")
        return function(*args)

    return checked


class RestrictedUnpickler(pickle._Unpickler):
    """An unpickler that resolves only the globals of ``allowed``; any other global raises.

    It is :mod:`pickle`'s pure-Python unpickler (the files are a few kilobytes), so that it can also check the
    state each ``BUILD`` opcode gives an object (its ``__setstate__``, or attributes it sets): only on instances
    of :data:`BUILD_TARGETS` (never on a class, a function or a module, which a pickle could otherwise change
    for the whole process), a numpy dtype only to a plain numeric dtype, an array only with such a dtype.
    numpy's scalar and buffer reconstructors are given only plain numeric dtypes too. These refusals raise
    :class:`RefusedPickle`.

    :param file: the pickle stream.
    :param allowed: ``{(module, name): object}`` (see :func:`allowed_globals`).
    :param on_forbidden: builds the exception raised for a forbidden ``(module, name)``.
    """

    #: the objects whose state a pickle may set (``BUILD``): besides ``allowed``'s classes, what they hold
    BUILD_TARGETS: tuple[type, ...] = (
        spaces.Space,
        RunningMeanStd,
        OrderedDict,
        dict,
        np.ndarray,
        np.dtype,
        np.random.Generator,
        np.random.BitGenerator,
        np.random.SeedSequence,
    )

    dispatch = dict(pickle._Unpickler.dispatch)

    def __init__(
        self,
        file: IO[bytes],
        allowed: Mapping[tuple[str, str], Any],
        on_forbidden: Callable[[str, str], Exception],
    ) -> None:
        super().__init__(file)
        self.allowed = dict(allowed)
        for (module, name), function in allowed.items():  # numpy's scalar(dtype, bytes), _frombuffer(buf, dtype, ..)
            if name in ("scalar", "_frombuffer") and module.startswith("numpy"):
                self.allowed[(module, name)] = _numeric_only(function, 0 if name == "scalar" else 1)
        self.on_forbidden = on_forbidden
        self._targets = (*self.BUILD_TARGETS, *(cls for cls in allowed.values() if isinstance(cls, type)))

    def find_class(self, module: str, name: str) -> Any:
        try:
            return self.allowed[(module, name)]
        except KeyError:
            raise self.on_forbidden(module, name) from None

    def load_build(self) -> None:
        state, target = self.stack[-1], self.stack[-2]  # type: ignore[attr-defined]
        if isinstance(target, type) or not isinstance(target, self._targets):
            raise RefusedPickle(f"the pickle sets the state of {target!r}, which a VecNormalize pickle never does")
        if isinstance(target, np.dtype):
            _checked_dtype_state(target, state)
        elif isinstance(target, np.ndarray):
            _checked_array_state(state)
        elif NUMPY_1 and isinstance(target, np.random.BitGenerator):
            self.stack[-1] = numpy1_bit_generator_state(state)  # type: ignore[attr-defined]
        super().load_build()  # type: ignore[misc]

    dispatch[pickle.BUILD[0]] = load_build  # type: ignore[assignment]


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
            return load_error(
                path,
                f"the pickle references {module}.{name}: it was written with the old `gym` package (Stable-Baselines3 "
                "< 2.0), which vecenv does not import. Load it with SB3 1.x and copy the statistics, or re-save it "
                "with Stable-Baselines3 >= 2.0 (gymnasium).",
            )
        return load_error(
            path,
            f"the pickle references the global {module}.{name}, which is not allowed in a Stable-Baselines3 "
            "VecNormalize file (only numpy arrays, dtypes and random generators, gymnasium spaces, "
            "collections.OrderedDict, and SB3's VecNormalize / RunningMeanStd are). The file was refused before "
            f"{module}.{name} could run; do not load it with plain pickle unless you trust its author.",
        )

    return build


def _sb3_rms(path: Any, value: Any, what: str) -> RunningMeanStd:
    if not isinstance(value, RunningMeanStd):
        raise load_error(path, f"{what} is a {type(value).__name__}, expected SB3's RunningMeanStd.")
    fields = vars(value)
    rms = RunningMeanStd()
    try:
        rms.mean = statistic(fields["mean"])
        rms.var = statistic(fields["var"])
        rms.count = float(fields["count"])
    except (KeyError, TypeError, ValueError) as exc:
        raise load_error(path, f"{what} is malformed ({type(exc).__name__}: {exc}).") from exc
    if rms.mean.shape != rms.var.shape or not math.isfinite(rms.count):
        raise load_error(path, f"{what} is malformed (mean shape {rms.mean.shape}, var shape {rms.var.shape}).")
    return rms


def read_sb3_state(path: str | os.PathLike[str], vec_normalize_class: type) -> NormalizationState:
    """Read a ``VecNormalize`` pickle written by Stable-Baselines3 (>= 2.0), without SB3 and without running code.

    The file is unpickled by a :class:`RestrictedUnpickler` over :func:`allowed_globals`; then
    only the configuration and statistics are taken from the result (and validated).

    :param path: the ``.pkl`` file written by SB3's ``VecNormalize.save`` (``str`` or :class:`os.PathLike`).
    :param vec_normalize_class: the class SB3's ``VecNormalize`` is unpickled as (vecenv's
        :class:`~vecenv.VecNormalize`); the pickle must hold an instance of it.
    :return: the saved state (``vecenv_version`` is None).
    :raises NormalizationFileError: if the file references any other global (nothing has run), is a
        vecenv file (use ``VecNormalize.load``), or is not a valid SB3 VecNormalize pickle.
    :raises OSError: if the file cannot be opened.
    """
    with open(path, "rb") as file:
        data = file.read()
    if data[:4] == ZIP_MAGIC:
        raise load_error(
            path, "this is a vecenv normalization file, not an SB3 pickle: load it with VecNormalize.load."
        )
    allowed, forbidden = allowed_globals(vec_normalize_class), _forbidden_global(path)
    try:
        named = scan_pickle_globals(data)
    except Exception as exc:
        raise load_error(path, f"not a readable pickle; truncated or corrupt? ({type(exc).__name__}: {exc})") from exc
    for module, name in named:
        if (module, name) not in allowed:
            raise forbidden(module, name)  # before anything in the file has run
    unpickler = RestrictedUnpickler(io.BytesIO(data), allowed, forbidden)
    try:
        obj = unpickler.load()
    except NormalizationFileError:
        raise
    except RefusedPickle as exc:
        raise load_error(path, f"refused: {exc}. Nothing from the file was kept.") from exc
    except Exception as exc:
        raise load_error(path, f"not a readable pickle; truncated or corrupt? ({type(exc).__name__}: {exc})") from exc
    if not isinstance(obj, vec_normalize_class):
        raise load_error(path, f"the pickle holds a {type(obj).__name__}, expected SB3's VecNormalize.")
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
        raise load_error(path, f"the pickled VecNormalize lacks or has an invalid {exc} attribute.") from exc
    if not isinstance(observation_space, spaces.Space):
        raise load_error(path, f"the pickled observation_space is a {type(observation_space).__name__}, not a space.")
    obs_rms: ObsRms | None = None
    if "obs_rms" in fields:
        raw = fields["obs_rms"]
        if isinstance(raw, dict):
            obs_rms = {key: _sb3_rms(path, value, f"obs_rms[{key!r}]") for key, value in raw.items()}
        else:
            obs_rms = _sb3_rms(path, raw, "obs_rms")
    try:
        described = describe_space(observation_space)
    except Exception as exc:  # (a space whose pickled attributes were edited or corrupted)
        raise load_error(path, f"the pickled observation_space is invalid ({type(exc).__name__}: {exc}).") from exc
    state = NormalizationState(
        config=config,
        observation_space=described,
        obs_rms=obs_rms,
        ret_rms=_sb3_rms(path, fields.get("ret_rms"), "ret_rms"),
    )
    check_rms_shapes(state, path)
    if config["norm_obs"] and obs_rms is None:
        raise load_error(path, "norm_obs is True but the pickle holds no observation statistics (obs_rms).")
    return state


#: The first byte of every pickle of protocol 2 or later (the PROTO opcode); SB3 writes protocol 4 or 5.
PICKLE_MAGIC = b"\x80"


def is_pickle(path: str | os.PathLike[str]) -> bool:
    """Whether the file at ``path`` starts like a pickle (protocol 2 or later), as SB3's ``VecNormalize.save`` writes.

    :param path: the file (``str`` or :class:`os.PathLike`).
    :return: True if its first byte is pickle's PROTO opcode (vecenv's own files start with ``b"PK"``).
    :raises OSError: if the file cannot be opened.
    """
    with open(path, "rb") as file:
        return file.read(1) == PICKLE_MAGIC


# --- writing --------------------------------------------------------------------------------------------


class _Sb3Object:
    """An object that is pickled as an instance of the SB3 class :data:`_SB3_CLASS_NAMES` names for its type.

    Unpickling calls that class's ``__setstate__`` with these attributes (or updates ``__dict__``), as for
    an object SB3 pickled itself.
    """

    def __init__(self, attributes: Mapping[str, Any]) -> None:
        self.__dict__.update(attributes)


class _Sb3VecNormalize(_Sb3Object):
    pass


class _Sb3RunningMeanStd(_Sb3Object):
    pass


_SB3_CLASS_NAMES: dict[type, tuple[str, str]] = {
    _Sb3VecNormalize: SB3_VEC_NORMALIZE,
    _Sb3RunningMeanStd: SB3_RUNNING_MEAN_STD,
}
#: SB3 2.9's ``VecNormalize.save`` writes the default protocol of Python 3.8 to 3.13; every Python 3 reads it.
_SB3_PROTOCOL = 4


class _Sb3NamePickler(pickle._Pickler):
    """pickle's pure-Python pickler, writing the stand-in classes under SB3's module and class names.

    A pickler writes a class by reference only after importing it by that name and finding the same
    object, which would need SB3 installed (and then the stand-ins would not be SB3's classes); the C
    pickler offers no hook for a class reference. This subclass writes the two stand-ins by name, with
    the opcodes ``pickle`` itself uses for a class reference at protocol 4 (``STACK_GLOBAL``), and
    everything else exactly as ``pickle.dumps`` would.
    """

    def save_global(self, obj: Any, name: str | None = None) -> None:
        names = _SB3_CLASS_NAMES.get(obj) if isinstance(obj, type) else None
        if names is None:
            base: Any = super()
            base.save_global(obj, name)
            return
        pickler: Any = self  # save / write / memoize are not in typeshed's _Pickler
        pickler.save(names[0])
        pickler.save(names[1])
        pickler.write(pickle.STACK_GLOBAL)
        pickler.memoize(obj)


def _sb3_rms_standin(rms: RunningMeanStd) -> _Sb3RunningMeanStd:
    return _Sb3RunningMeanStd({"mean": statistic(rms.mean), "var": statistic(rms.var), "count": rms.count})


def _sb3_attributes(vec_normalize: Any) -> dict[str, Any]:
    """The attributes SB3 2.9's ``VecNormalize.__getstate__`` returns for a wrapper like ``vec_normalize``, in
    SB3's order: those of ``VecEnv.__init__``, then ``VecNormalize.__init__``'s (``venv``, ``class_attributes``
    and ``returns`` are dropped, as SB3 does; ``old_obs`` is left out and ``old_reward`` is empty, as in a
    wrapper that has not stepped)."""
    num_envs = int(vec_normalize.num_envs)
    attributes: dict[str, Any] = {
        "num_envs": num_envs,
        "observation_space": vec_normalize.observation_space,
        "action_space": vec_normalize.action_space,
        "reset_infos": [{} for _ in range(num_envs)],
        "_seeds": [None for _ in range(num_envs)],
        "_options": [{} for _ in range(num_envs)],
        "render_mode": vec_normalize.render_mode,
        "metadata": {"render_modes": list(vec_normalize.metadata.get("render_modes", []))},
        "norm_obs": bool(vec_normalize.norm_obs),
        "norm_obs_keys": None if vec_normalize.norm_obs_keys is None else list(vec_normalize.norm_obs_keys),
    }
    obs_rms = vec_normalize.__dict__.get("obs_rms")
    if isinstance(obs_rms, dict):
        attributes["obs_spaces"] = vec_normalize.observation_space.spaces
        attributes["obs_rms"] = {key: _sb3_rms_standin(rms) for key, rms in obs_rms.items()}
    elif obs_rms is not None:
        attributes["obs_rms"] = _sb3_rms_standin(obs_rms)
    attributes["ret_rms"] = _sb3_rms_standin(vec_normalize.ret_rms)
    for field in ("clip_obs", "clip_reward", "gamma", "epsilon"):
        attributes[field] = float(getattr(vec_normalize, field))
    attributes["training"] = bool(vec_normalize.training)
    attributes["norm_reward"] = bool(vec_normalize.norm_reward)
    attributes["old_reward"] = np.array([])
    return attributes


class Sb3FormatError(ValueError):
    """A wrapper that cannot be written as an SB3 pickle vecenv's own ``load`` reads back.

    :param reason: why, as a clause (``"the pickle would reference ..."``); kept as :attr:`reason`.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(
            f"Cannot save VecNormalize statistics in SB3's format: {reason}. Save in vecenv's format "
            "(format='vecenv') instead."
        )
        #: why the wrapper cannot be written in SB3's format.
        self.reason = reason


def encode_sb3_pickle(vec_normalize: Any) -> bytes:
    """The bytes of the pickle Stable-Baselines3 2.9's ``VecNormalize.save`` writes for ``vec_normalize``.

    The pickle holds an instance of ``stable_baselines3.common.vec_env.vec_normalize.VecNormalize``
    whose attributes are those SB3's ``__getstate__`` gives (``num_envs``, ``observation_space``,
    ``action_space``, ``reset_infos``, ``_seeds``, ``_options``, ``render_mode``, ``metadata``,
    ``norm_obs``, ``norm_obs_keys``, ``obs_spaces`` for a Dict space, ``obs_rms``, ``ret_rms``,
    ``clip_obs``, ``clip_reward``, ``gamma``, ``epsilon``, ``training``, ``norm_reward``,
    ``old_reward``), the statistics being instances of
    ``stable_baselines3.common.running_mean_std.RunningMeanStd`` (``mean``, ``var``: float64 arrays;
    ``count``: float). SB3 is not imported. Protocol 4.

    :param vec_normalize: the wrapper (vecenv's :class:`~vecenv.VecNormalize`).
    :return: the pickle.
    :raises Sb3FormatError: (a ValueError) if the pickle would name a global :func:`allowed_globals`
        refuses (a space of a class other than gymnasium's Box, Dict, Discrete, MultiBinary, MultiDiscrete
        and Tuple), so that vecenv could not read the file back, or if a space cannot be pickled at all.
    """
    buffer = io.BytesIO()
    try:
        _Sb3NamePickler(buffer, protocol=_SB3_PROTOCOL).dump(_Sb3VecNormalize(_sb3_attributes(vec_normalize)))
    except (pickle.PicklingError, TypeError, AttributeError) as exc:
        raise Sb3FormatError(
            f"the observation or action space cannot be pickled ({type(exc).__name__}: {exc})"
        ) from exc
    data = buffer.getvalue()
    named = set(scan_pickle_globals(data))
    refused = sorted(f"{module}.{name}" for module, name in named - set(allowed_globals(_Sb3VecNormalize)))
    if refused:
        raise Sb3FormatError(
            f"the pickle would reference {', '.join(refused)} (from the observation or action space), which "
            "VecNormalize.load refuses to import; only gymnasium's Box, Dict, Discrete, MultiBinary, "
            "MultiDiscrete and Tuple spaces are allowed"
        )
    return data


def write_sb3_pickle(path: str | os.PathLike[str], vec_normalize: Any) -> None:
    """Write :func:`encode_sb3_pickle` of ``vec_normalize`` to ``path``, atomically.

    :param path: the destination (``str`` or :class:`os.PathLike`); written as given, no extension added.
    :param vec_normalize: the wrapper (vecenv's :class:`~vecenv.VecNormalize`).
    :raises Sb3FormatError: (a ValueError) see :func:`encode_sb3_pickle` (nothing is written).
    :raises OSError: if the file cannot be written (any previous file is left unchanged).
    """
    atomic_write_bytes(path, encode_sb3_pickle(vec_normalize))
