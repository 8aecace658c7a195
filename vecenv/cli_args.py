"""What the ``vecenv`` command and its ``bench`` sub-command share: argument types, output-path checks, the
user-error exception and the exit statuses.

:mod:`vecenv.cli` and :mod:`vecenv.bench.cli` both import this module, which imports nothing from vecenv.

Output paths follow one rule: missing folders are created (the folder of an output file, or an output
folder and its parents); a path is refused, before anything runs, when that folder cannot be created or
written to, when an output file is an existing folder, or when an output folder is an existing file.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
from collections.abc import Callable
from typing import Any, TypeVar

import gymnasium as gym

__all__ = [
    "EXIT_CASE_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_USAGE",
    "UsageError",
    "check_env_id",
    "check_output_path",
    "comma_list",
    "json_object",
    "make_output_folder",
    "non_negative_int",
    "positive_float",
    "positive_int",
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


def positive_float(text: str) -> float:
    """A number > 0 (not NaN)."""
    return _number(text, float, lambda v: v > 0, "a positive number")


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
    if folder:
        expected = "a folder that exists or can be created"
        if os.path.exists(path) and not os.path.isdir(path):
            raise UsageError(f"argument {option}: expected {expected}, got {path!r}, which is an existing file")
        target = path
    else:
        expected = "a file path whose folder exists or can be created"
        if os.path.isdir(path):
            raise UsageError(f"argument {option}: expected {expected}, got {path!r}, which is an existing folder")
        target = os.path.dirname(path) or os.curdir
    existing = _nearest_existing(target)
    if not os.path.isdir(existing):
        raise UsageError(f"argument {option}: expected {expected}, got {path!r}: {existing!r} is a file, not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UsageError(
            f"argument {option}: expected {expected}, got {path!r}: no permission to write in the folder {existing!r}"
        )


def make_output_folder(option: str, folder: str) -> None:
    """Create ``folder`` and its missing parents for ``option``; an :class:`OSError` becomes a :class:`UsageError`."""
    try:
        os.makedirs(folder or os.curdir, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"argument {option}: cannot create the folder {folder!r}: {exc.strerror or exc}") from None


def check_env_id(env_id: str) -> None:
    """Refuse an env id that Gymnasium's registry does not know, naming close matches or the package to install.

    :raises UsageError: if ``env_id`` is not registered.
    """
    try:
        gym.spec(env_id)
    except gym.error.NamespaceNotFound:
        namespace = env_id.split("/", 1)[0]
        raise UsageError(
            f"unknown env id {env_id!r}: no env of namespace {namespace!r} is registered; install the package that "
            "provides it (e.g. ale-py for ALE/...) and check gymnasium.pprint_registry()"
        ) from None
    except gym.error.Error as exc:
        close = difflib.get_close_matches(env_id, list(gym.registry.keys()), n=5, cutoff=0.5)
        hint = f"; did you mean: {', '.join(close)}?" if close else "; see gymnasium.pprint_registry() for the ids"
        raise UsageError(f"unknown env id {env_id!r} ({type(exc).__name__}){hint}") from None
