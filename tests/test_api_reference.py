"""The API reference (docs/api.md) documents every public name: each name of ``vecenv.__all__``,
``vecenv.gymnasium.__all__``, ``vecenv.adapters.__all__`` and ``vecenv.pettingzoo.__all__`` has an autodoc
directive in its module's section."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import vecenv
import vecenv.adapters
import vecenv.gymnasium

MODULES = [vecenv, vecenv.gymnasium, vecenv.adapters]
#: sections of modules whose optional dependency is not installed here: not checked
UNCHECKED: tuple[str, ...] = ()
try:
    import vecenv.pettingzoo

    MODULES.append(vecenv.pettingzoo)
except ImportError:  # the pettingzoo extra
    UNCHECKED = ("vecenv.pettingzoo.",)

API_PAGE = Path(__file__).resolve().parents[1] / "docs" / "api.md"
DIRECTIVE = re.compile(r"^\.\. auto(?:class|function|data):: (\S+)$", re.MULTILINE)
CURRENT = re.compile(r"^\.\. currentmodule:: (\S+)$", re.MULTILINE)


def documented() -> set[str]:
    """``module.name`` for every autodoc directive of the page (names are relative to the current module)."""
    text = API_PAGE.read_text(encoding="utf-8")
    names: set[str] = set()
    marks = sorted(
        [(m.start(), "module", m.group(1)) for m in CURRENT.finditer(text)]
        + [(m.start(), "name", m.group(1)) for m in DIRECTIVE.finditer(text)]
    )
    module = "vecenv"
    for _, kind, value in marks:
        if kind == "module":
            module = value
        else:
            names.add(f"{module}.{value}")
    return names


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__)
def test_every_public_name_is_in_the_api_reference(module) -> None:
    missing = sorted({f"{module.__name__}.{name}" for name in module.__all__} - documented())
    assert not missing, f"docs/api.md lacks an autodoc directive for {missing}"


def test_the_reference_documents_nothing_that_is_not_public() -> None:
    public = {f"{m.__name__}.{n}" for m in MODULES for n in m.__all__}
    assert {name for name in documented() if not name.startswith(UNCHECKED)} - public == set()


INHERITED = re.compile(r"^\.\. autoclass:: (\S+)\n   :inherited-members:", re.MULTILINE)


def test_public_classes_show_what_they_inherit_from_internal_bases() -> None:
    """A public class whose public methods are defined on a base class that the reference does not document
    (``SubprocVecEnv``'s ``send`` / ``recv`` / ``step_stats`` on the engine's classes) shows them itself: its
    directive has ``:inherited-members:``."""
    public = {getattr(m, n) for m in MODULES for n in m.__all__}
    text = API_PAGE.read_text(encoding="utf-8")
    with_inherited = set(INHERITED.findall(text))
    lacking = []
    for module in MODULES:
        for name in module.__all__:
            cls = getattr(module, name)
            if not isinstance(cls, type):
                continue
            hidden = [
                base
                for base in cls.__mro__[1:]
                if base.__module__.startswith("vecenv")
                and base not in public
                and any(not key.startswith("_") for key in vars(base))
            ]
            if hidden and name not in with_inherited:
                lacking.append(f"{module.__name__}.{name} (from {[base.__qualname__ for base in hidden]})")
    assert not lacking, f"docs/api.md: add :inherited-members: to {lacking}"
