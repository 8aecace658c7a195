"""What the ``vecenv`` command and its ``bench`` sub-command share: argument types, output-path checks, the
user-error exception and the exit statuses.

:mod:`vecenv.cli` and :mod:`vecenv.bench.cli` both import this module, which imports nothing from vecenv but
:mod:`vecenv.optional` (itself without vecenv imports).

Output paths follow one rule: missing folders are created (the folder of an output file, or an output
folder and its parents); a path is refused, before anything runs, when that folder cannot be created or
written to, when an output file is an existing folder, or when an output folder is an existing file.
Every path an option cannot use, found before the run or when writing or reading it, is reported in one
wording (:func:`path_error`): ``argument OPTION: expected WHAT, got 'PATH': WHY``, with the system's reason
in words (:func:`os_reason`: permission denied, read-only file system, ...).
"""

from __future__ import annotations

import argparse
import difflib
import errno
import importlib
import importlib.util
import json
import math
import os
import pkgutil
import re
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any, TypeVar

import gymnasium as gym
from gymnasium.envs.registration import parse_env_id

from vecenv.optional import install_hint

__all__ = [
    "EXIT_CASE_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_USAGE",
    "NAMESPACE_PROVIDERS",
    "OUTPUT_FILE",
    "OUTPUT_FOLDER",
    "EnvMaker",
    "UsageError",
    "check_output_path",
    "comma_list",
    "import_env_module",
    "is_env_module_path",
    "json_object",
    "make_output_folder",
    "non_negative_int",
    "os_reason",
    "path_error",
    "pettingzoo_env_module",
    "positive_float",
    "positive_int",
    "resolve_env_id",
]

#: Exit status of a user error (one line on stderr, no traceback).
EXIT_USAGE = 2
#: Exit status of ``vecenv bench`` when a case failed.
EXIT_CASE_FAILED = 1
#: Exit status after Ctrl-C.
EXIT_INTERRUPTED = 130

T = TypeVar("T")


class UsageError(Exception):
    """A problem with the user's input: printed as one line, exit status 2."""


# --- argument types ---------------------------------------------------------------------------------


N = TypeVar("N", int, float)


def _number(text: str, convert: Callable[[str], N], accept: Callable[[N], bool], expected: str) -> N:
    """``convert(text)`` if it succeeds and ``accept`` takes the value, else an error naming ``expected``."""
    try:
        value = convert(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
    if not accept(value):
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
    return value


def positive_int(text: str) -> int:
    """An integer >= 1 (``_`` separators allowed, as in ``100_000``)."""
    return _number(text, lambda t: int(t.replace("_", "")), lambda v: v >= 1, "a positive integer")


def non_negative_int(text: str) -> int:
    """An integer >= 0."""
    return _number(text, int, lambda v: v >= 0, "a non-negative integer")


def non_negative_float(text: str) -> float:
    """A finite number >= 0."""
    return _number(text, float, lambda v: 0 <= v < math.inf, "a finite number >= 0")


def positive_float(text: str) -> float:
    """A finite number > 0 (not NaN, not infinity)."""
    return _number(text, float, lambda v: 0 < v < math.inf, "a finite number > 0")


def json_object(text: str) -> dict[str, Any]:
    """A JSON object (keyword arguments), e.g. ``'{"max_episode_steps": 100}'``."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(
            f"expected a JSON object such as '{{\"max_episode_steps\": 100}}': {exc}"
        ) from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object (a dict of keyword arguments), got {text!r}")
    return value


def comma_list(convert: Callable[[str], T], what: str) -> Callable[[str], list[T]]:
    """The argument type of a comma-separated list: each item converted by ``convert``.

    :param convert: converts one item; a ``ValueError``, ``KeyError`` or ``ArgumentTypeError`` refuses it.
    :param what: the items, for the error message (e.g. ``"positive integers"``).
    """

    def parse(text: str) -> list[T]:
        items = [item.strip() for item in text.split(",") if item.strip()]
        if not items:
            raise argparse.ArgumentTypeError(f"expected a comma-separated list of {what}, got {text!r}")
        try:
            return [convert(item) for item in items]
        except (ValueError, KeyError, argparse.ArgumentTypeError) as exc:
            raise argparse.ArgumentTypeError(
                f"expected a comma-separated list of {what}, got {text!r}: {exc}"
            ) from None

    return parse


# --- output paths -----------------------------------------------------------------------------------

#: What an output folder option expects.
OUTPUT_FOLDER = "a folder that exists or can be created"
#: What an output file option expects.
OUTPUT_FILE = "a file path whose folder exists or can be created"

#: :func:`os_reason`'s words for the errors of paths that are the user's to fix.
_REASONS = {
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.EROFS: "read-only file system",
    errno.ENOTDIR: "a part of the path is a file, not a folder",
    errno.EISDIR: "it is a folder",
    errno.ENOENT: "no such file or folder",
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "disk quota exceeded",
    errno.ENAMETOOLONG: "file name too long",
}


def os_reason(exc: OSError) -> str:
    """Why an operation on a path failed, in words (``"permission denied"``, ``"read-only file system"``, ...)."""
    if exc.errno in _REASONS:
        return _REASONS[exc.errno]
    return (exc.strerror or str(exc)).lower()


def path_error(option: str, path: str, expected: str, problem: str) -> UsageError:
    """The one wording of a path that an option cannot use: ``argument OPTION: expected WHAT, got 'PATH': WHY``.

    :param option: the option's name, as argparse shows it (e.g. ``"--monitor"``).
    :param path: the path given.
    :param expected: what the option takes (e.g. :data:`OUTPUT_FOLDER`).
    :param problem: why ``path`` is not that, e.g. ``f"cannot write it: {os_reason(exc)}"``.
    """
    return UsageError(f"argument {option}: expected {expected}, got {path!r}: {problem}")


def _nearest_existing(path: str) -> str:
    """``path`` itself if it exists, else its nearest ancestor that exists (``.`` for a relative path)."""
    path = os.path.normpath(path)
    while not os.path.exists(path):
        parent = os.path.dirname(path) or os.curdir
        if parent == path:
            break
        path = parent
    return path


def check_output_path(option: str, path: str, *, folder: bool) -> None:
    """Refuse an output path that cannot be written, before anything runs.

    The rule of every output option: missing folders are created when the output is written (the output
    folder itself for ``folder=True``, else the folder of the output file), so the path is refused only
    when that folder cannot be created or written to, or when the path is an existing file where a folder
    is expected (or an existing folder where a file is expected).

    :param option: the option's name, as argparse shows it (e.g. ``"--monitor"``).
    :param path: the path given.
    :param folder: whether the output is a folder (else a file).
    :raises UsageError: naming the option, what was expected and the path.
    """
    if not path:
        raise UsageError(f"argument {option}: expected {OUTPUT_FOLDER if folder else OUTPUT_FILE}, got an empty path")
    if folder:
        expected = OUTPUT_FOLDER
        if os.path.exists(path) and not os.path.isdir(path):
            raise UsageError(f"argument {option}: expected {expected}, got {path!r}, which is an existing file")
        target = path
    else:
        expected = OUTPUT_FILE
        if os.path.isdir(path):
            raise UsageError(f"argument {option}: expected {expected}, got {path!r}, which is an existing folder")
        if path.endswith((os.sep, "/")):
            raise UsageError(f"argument {option}: expected {expected}, got {path!r}, which ends in a folder separator")
        target = os.path.dirname(path) or os.curdir
    existing = _nearest_existing(target)
    if not os.path.isdir(existing):
        raise path_error(option, path, expected, f"{existing!r} is a file, not a folder")
    # try it (os.access cannot tell a read-only file system, and says yes to root everywhere)
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".vecenv-check-", dir=existing))
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EPERM):
            problem = f"no permission to write in the folder {existing!r}"
        elif exc.errno == errno.EROFS:
            problem = f"the folder {existing!r} is on a read-only file system"
        elif exc.errno == errno.ENOENT:  # e.g. /proc: the folder exists, but its file system makes nothing there
            problem = f"the folder {existing!r} does not accept new files or folders (its file system refuses them)"
        else:
            problem = f"cannot write in the folder {existing!r}: {os_reason(exc)}"
        raise path_error(option, path, expected, problem) from None


def make_output_folder(option: str, path: str, *, folder: bool) -> None:
    """Create the output folder ``path`` (``folder=True``) or the folder of the output file ``path``, with its
    missing parents; an :class:`OSError` becomes a :class:`UsageError` in :func:`path_error`'s wording."""
    target = path if folder else os.path.dirname(path)
    try:
        os.makedirs(target or os.curdir, exist_ok=True)
    except OSError as exc:
        expected = OUTPUT_FOLDER if folder else OUTPUT_FILE
        raise path_error(option, path, expected, f"cannot create the folder {target!r}: {os_reason(exc)}") from None


# --- Gymnasium env ids ------------------------------------------------------------------------------

#: The env-id namespaces whose envs a package registers when imported, which Gymnasium 1.x does not import
#: itself: ``{namespace: (module to import, package to install)}``. ``vecenv run ALE/Pong-v5`` imports
#: ``ale_py`` when it is installed (as ``gymnasium.register_envs(ale_py)`` does); ``vecenv/`` holds the benchmark's
#: workloads (:mod:`vecenv.bench.workloads`).
NAMESPACE_PROVIDERS: dict[str, tuple[str, str]] = {
    "ALE": ("ale_py", "ale-py"),
    "vecenv": ("vecenv.bench.workloads", "vecenv"),
}


@dataclass(frozen=True)
class EnvMaker:
    """A picklable env factory: import ``imports``, then ``gymnasium.make(env_id, **kwargs)``.

    The imports happen in the process that calls it, so a worker process started by ``forkserver`` or
    ``spawn`` (or a Ray actor) registers the envs of a plugin package itself. As :func:`~vecenv.make_vec_env`
    makes a string id, ``render_mode`` defaults to ``"rgb_array"``, left out when the env takes no
    ``render_mode``.

    :param env_id: a Gymnasium env id, registered once ``imports`` are imported (e.g. ``ALE/Pong-v5``).
    :param imports: the modules to import first, in order (e.g. ``("ale_py",)``).
    """

    env_id: str
    imports: tuple[str, ...] = ()

    def __call__(self, **kwargs: Any) -> gym.Env:
        """Import the modules and make one env, with ``kwargs`` for ``gymnasium.make``."""
        for module in self.imports:
            importlib.import_module(module)
        try:
            return gym.make(self.env_id, **{"render_mode": "rgb_array", **kwargs})
        except TypeError:
            return gym.make(self.env_id, **kwargs)

    @property
    def factory(self) -> str | EnvMaker:
        """What :func:`~vecenv.make_vec_env` takes for it: the id itself when nothing is to be imported, else
        this maker."""
        return self if self.imports else self.env_id


#: a Python module path, as in ``module:EnvId``
_MODULE_NAME = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")


def import_env_module(module: str, where: str) -> None:
    """Import ``module``, a module that registers Gymnasium envs when imported.

    :param module: the module's name, e.g. ``ale_py``.
    :param where: the start of the error: the argument that named it, e.g. ``"argument --import:"``.
    :raises UsageError: when ``module`` is not a module name, is not installed (naming the modules of its package
        with a close name), needs a package that is not installed, or its code raised while importing.
    """
    expected = "an installed Python module that registers Gymnasium envs when imported"
    if not _MODULE_NAME.fullmatch(module):
        raise UsageError(f"{where} expected {expected}, got {module!r}, which is not a Python module name")
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if missing and (module == missing or module.startswith(missing + ".")):
            close = _close_modules(module) if "." in module else ""
            raise UsageError(
                f"{where} expected {expected}, got {module!r}: no module named {missing!r}{close}"
            ) from None
        raise UsageError(f"{where} the module {module!r} needs {missing or exc}, which is not installed") from None
    except Exception as exc:  # the module's own code raised while importing
        raise UsageError(f"{where} cannot import the module {module!r}: {type(exc).__name__}: {exc}") from None


def _namespace(env_id: str) -> str | None:
    """The namespace of ``env_id`` (``ALE`` of ``ALE/Pong-v5``), None without one or for a malformed id."""
    try:
        namespace: str | None = parse_env_id(env_id)[0]
    except gym.error.Error:
        return None
    return namespace


def _close_ids(env_id: str) -> str:
    """``"; did you mean: CartPole-v1, ...?"``: the registered ids close to ``env_id``, or ``""``."""
    close = difflib.get_close_matches(env_id, list(gym.registry.keys()), n=5, cutoff=0.5)
    return f"; did you mean: {', '.join(close)}?" if close else ""


def _namespaces() -> set[str]:
    """The namespaces of the registered env ids."""
    return {spec.namespace for spec in gym.registry.values() if spec.namespace is not None}


def _unknown_namespace(env_id: str, namespace: str, imported: str, import_option: str | None) -> UsageError:
    """The error of an id whose namespace no imported module registers: the ways to import its package."""
    spellings = {ns.lower(): ns for ns in _namespaces() | set(NAMESPACE_PROVIDERS)}
    close = difflib.get_close_matches(namespace.lower(), list(spellings), n=1, cutoff=0.6)
    hint = f" (did you mean the namespace {spellings[close[0]]!r}?)" if close else ""
    name = env_id.partition(":")[2] or env_id
    ways = f"MODULE:{name} (gymnasium.make's form)" + (f" or {import_option} MODULE" if import_option else "")
    return UsageError(
        f"unknown env id {env_id!r}: no env of namespace {namespace!r} is registered{imported}{hint}; name the "
        f"module that registers it: {ways}"
    )


def resolve_env_id(env_id: str, imports: Sequence[str] = (), import_option: str | None = "--import") -> EnvMaker:
    """The env factory of a Gymnasium env id, importing the modules that register it.

    In this order: the modules of ``imports``; the module of Gymnasium's ``module:EnvId`` form
    (``ale_py:ALE/Pong-v5``); the package of a known namespace (:data:`NAMESPACE_PROVIDERS`: ``ALE`` ->
    ``ale_py``) when no imported module registered the id's namespace and the package is installed. The factory
    imports the package of a known namespace in any case, also where this process had registered its envs
    already, since a worker process started by forkserver or spawn has not.

    :param env_id: ``EnvId`` or ``module:EnvId``.
    :param imports: modules to import first (``vecenv run --import``), e.g. a plugin that registers its envs.
    :param import_option: the command's option that imports a module (named in the errors), None when the command
        has none.
    :return: the factory of the id (without ``module:``), which imports every module that was needed.
    :raises UsageError: saying which applies: a module that cannot be imported; a known namespace whose package is
        not installed (naming the package to install); an id that the imported modules do not register (with
        close registered ids); an unknown namespace (naming the ways to import its package); an unknown id
        (with close registered ids).
    """
    modules = list(imports)
    for module in imports:
        import_env_module(module, f"argument {import_option or '--import'}:")
    name = env_id
    if ":" in env_id:
        module, _, name = env_id.partition(":")
        if not name or ":" in name or not _MODULE_NAME.fullmatch(module):
            raise UsageError(
                f"argument ENV_ID: expected ENV_ID or MODULE:ENV_ID (a module to import, then a registered id, e.g. "
                f"ale_py:ALE/Pong-v5), got {env_id!r}"
            )
        import_env_module(module, f"argument ENV_ID: the MODULE of {env_id!r}:")
        modules.append(module)
    namespace = _namespace(name)
    if namespace in NAMESPACE_PROVIDERS:
        module, package = NAMESPACE_PROVIDERS[namespace]
        if namespace not in _namespaces():
            if importlib.util.find_spec(module) is None:
                raise UsageError(
                    f"unknown env id {env_id!r}: the {namespace}/ envs are registered by the {package} package, "
                    f"which is not installed: pip install {package}"
                )
            import_env_module(
                module, f"argument ENV_ID: {env_id!r} needs {module!r}, which registers the {namespace}/ envs:"
            )
            modules.append(module)
        elif importlib.util.find_spec(module) is not None:
            # imported by the factory also where this process had registered the envs already (a worker started
            # by forkserver or spawn has not); not where another module registered the namespace without it
            modules.append(module)
    modules = list(dict.fromkeys(modules))
    try:
        gym.spec(name)
        return EnvMaker(name, tuple(modules))
    except gym.error.Error as exc:
        error = type(exc).__name__
    imported = f" after importing {', '.join(modules)}" if modules else ""
    if namespace is not None and namespace not in _namespaces():
        raise _unknown_namespace(env_id, namespace, imported, import_option)
    hint = _close_ids(name) or (
        "; see gymnasium.pprint_registry() for the ids (an env of a package that registers its ids when imported: "
        f"MODULE:{env_id} or --import MODULE)"
    )
    if modules:
        raise UsageError(f"unknown env id {env_id!r}: no env {name!r} is registered{imported}{hint}")
    raise UsageError(f"unknown env id {env_id!r} ({error}){hint}")


# --- PettingZoo env modules -------------------------------------------------------------------------

#: What ``vecenv run``'s ENV_ID takes.
ENV_ID_EXPECTED = (
    "a registered Gymnasium env id or a PettingZoo env module with a parallel_env function (e.g. mpe2.simple_spread_v3)"
)
_MODULE_PATH = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")


def is_env_module_path(env_id: str) -> bool:
    """Whether ``env_id`` names a PettingZoo env module rather than a Gymnasium env: a dotted Python module path
    (``package.module``) that Gymnasium's registry does not know."""
    if not _MODULE_PATH.fullmatch(env_id):
        return False
    try:
        gym.spec(env_id)
    except gym.error.Error:
        return True
    return False


def _close_modules(path: str) -> str:
    """``"; did you mean: mpe2.simple_spread_v3?"``: modules of ``path``'s package with a name close to its last
    part, or ``""`` when the package cannot be found or has none."""
    package, _, name = path.rpartition(".")
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return ""
    if spec is None or not spec.submodule_search_locations:
        return ""
    names = [info.name for info in pkgutil.iter_modules(spec.submodule_search_locations)]
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
    return f"; did you mean: {', '.join(f'{package}.{c}' for c in close)}?" if close else ""


def pettingzoo_env_module(env_id: str) -> ModuleType:
    """Import the PettingZoo env module ``env_id`` (e.g. ``mpe2.simple_spread_v3``), whose ``parallel_env(**kwargs)``
    makes the env.

    :raises UsageError: when pettingzoo is not installed, the module does not exist (naming modules of its
        package with a close name), importing it fails (e.g. a dependency of the env that is not installed), or
        it has no ``parallel_env`` function.
    """
    where = "argument ENV_ID:"
    if importlib.util.find_spec("pettingzoo") is None:
        raise UsageError(
            f"{where} {env_id!r} names a PettingZoo env module, which needs pettingzoo, not installed. "
            f"{install_hint('pettingzoo')}"
        )
    try:
        module = importlib.import_module(env_id)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if missing and (env_id == missing or env_id.startswith(missing + ".")):
            raise UsageError(
                f"{where} expected {ENV_ID_EXPECTED}, got {env_id!r}: no module named {missing!r}"
                f"{_close_modules(env_id)}"
            ) from None
        raise UsageError(
            f"{where} the PettingZoo env module {env_id!r} needs {missing or exc}, which is not installed"
        ) from None
    except Exception as exc:  # the module's own code raised while importing
        raise UsageError(
            f"{where} cannot import the PettingZoo env module {env_id!r}: {type(exc).__name__}: {exc}"
        ) from None
    if not callable(getattr(module, "parallel_env", None)):
        raise UsageError(
            f"{where} expected {ENV_ID_EXPECTED}, got {env_id!r}, a module without a parallel_env function"
        )
    return module
