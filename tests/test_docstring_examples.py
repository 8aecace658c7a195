"""Every ``>>>`` example in vecenv's docstrings runs and prints what it shows (the API reference renders them).

The modules are found by walking the package, so a new module's examples are tested without a change here.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil
from types import ModuleType

import pytest

import vecenv
from vecenv.optional import MissingExtraError


def modules_with_examples() -> list[ModuleType]:
    found = []
    for info in pkgutil.walk_packages(vecenv.__path__, prefix="vecenv."):
        if info.name.endswith("__main__"):
            continue
        try:
            module = importlib.import_module(info.name)
        except MissingExtraError:  # a module of an extra that is not installed (e.g. vecenv.pettingzoo)
            continue
        if any(test.examples for test in doctest.DocTestFinder().find(module)):
            found.append(module)
    return found


MODULES = modules_with_examples()


def test_the_examples_are_found() -> None:
    """Guards against a change that would silently find none (11 modules have examples today)."""
    assert len(MODULES) >= 10


@pytest.mark.parametrize("module", MODULES, ids=lambda module: module.__name__)
def test_docstring_examples(module: ModuleType) -> None:
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} docstring examples of {module.__name__} failed"
