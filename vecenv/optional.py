"""Optional dependencies: whether they are installed, how to install them, and the errors when they are not.

vecenv's own code imports pandas and matplotlib (the ``plot`` and ``bench`` extras) and ray (the ``ray`` extra)
only when a function needs them, through :func:`import_optional` (:class:`MissingExtraError`) or, in ``vecenv bench``,
:func:`require_bench` (:class:`BenchDependencyError`); :func:`is_installed` checks a module without importing
it. This module imports nothing from vecenv: every other module may import it.
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

__all__ = [
    "SB3_INSTALL_HINT",
    "BenchDependencyError",
    "MissingExtraError",
    "import_optional",
    "install_hint",
    "is_installed",
    "require_bench",
]

#: the packages of vecenv's optional extras that its own code imports (setup.cfg has the full lists)
_EXTRA_PACKAGES = {"plot": "pandas matplotlib", "bench": "pandas matplotlib", "ray": "ray", "pettingzoo": "pettingzoo"}
#: How to install what the Stable-Baselines3 backends of ``vecenv bench`` need.
SB3_INSTALL_HINT = "pip install torch==2.13.0 && pip install stable-baselines3 (torch first: its CPU build)"


def install_hint(extra: str) -> str:
    """How to install what vecenv's ``extra`` adds, e.g. ``Install the "plot" extra: pip install pandas
    matplotlib (or pip install -e ".[plot]" in a clone of vecenv)``: the packages themselves, since vecenv is
    installed from a clone or a git URL, not from a package index."""
    packages = _EXTRA_PACKAGES.get(extra)
    clone = f'pip install -e ".[{extra}]" in a clone of vecenv'
    return f'Install the "{extra}" extra: ' + (f"pip install {packages} (or {clone})" if packages else clone)


def _missing_message(module: str, needed_by: str, extra: str) -> str:
    return f"{needed_by} needs {module}, which is not installed. {install_hint(extra)}"


class MissingExtraError(ImportError):
    """An optional dependency of vecenv is not installed (the message names the extra that provides it).

    :param module: the missing module, e.g. ``"pandas"``.
    :param needed_by: what needs it, e.g. ``"load_results"``.
    :param extra: the vecenv extra that installs it.
    """

    def __init__(self, module: str, needed_by: str, extra: str = "plot") -> None:
        super().__init__(_missing_message(module, needed_by, extra), name=module)
        self.module = module
        self.extra = extra


def import_optional(module: str, needed_by: str, extra: str = "plot") -> ModuleType:
    """Import an optional dependency, or explain which extra to install.

    :param module: the module to import, e.g. ``"pandas"`` or ``"matplotlib.figure"``.
    :param needed_by: the function that needs it (named in the error message).
    :param extra: the vecenv extra that installs it.
    :return: the imported module.
    :raises MissingExtraError: if the module cannot be imported.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtraError(module.partition(".")[0], needed_by, extra) from exc


class BenchDependencyError(ImportError):
    """pandas or matplotlib (the ``bench`` extra) is missing."""


def require_bench(module: str) -> ModuleType:
    """Import ``module`` from the ``bench`` extra, or raise :class:`BenchDependencyError` saying how to get it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        top = module.split(".", maxsplit=1)[0]
        raise BenchDependencyError(
            _missing_message(top, "vecenv bench", "bench") + " (stable-baselines3 and torch too for the SB3 backends)"
        ) from None


def is_installed(module: str) -> bool:
    """Whether ``module`` can be imported here (found without importing it; a parent package may be imported)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False
