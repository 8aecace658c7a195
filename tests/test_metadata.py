"""Release metadata: the licence file, the changelog's sections, and what the installed distribution declares."""

from __future__ import annotations

import ast
import configparser
import importlib.metadata
import importlib.util
import os
import platform
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import vecenv

ROOT = Path(__file__).resolve().parents[1]


def test_license_file_is_mit() -> None:
    """LICENSE is the MIT licence, as setup.cfg declares."""
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("MIT License\n")
    assert re.search(r"^Copyright \(c\) \d{4} The vecenv developers$", text, re.MULTILINE)
    assert "Permission is hereby granted, free of charge" in text
    assert 'THE SOFTWARE IS PROVIDED "AS IS"' in text


def changelog_sections() -> list[str]:
    """The changelog's version headings (``## [...]`` lines), in file order."""
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    return re.findall(r"^## (.+)$", text, re.MULTILINE)


def test_changelog_has_unreleased_first_then_the_current_version_dated() -> None:
    """``[Unreleased]`` is the top section; ``vecenv.__version__`` has a dated section (Keep a Changelog)."""
    sections = changelog_sections()
    assert sections[0] == "[Unreleased]", sections
    version = re.escape(vecenv.__version__)
    dated = [s for s in sections if re.fullmatch(rf"\[{version}\] - \d{{4}}-\d{{2}}-\d{{2}}", s)]
    assert len(dated) == 1, f"no single dated section for {vecenv.__version__}: {sections}"
    for section in sections[1:]:
        assert re.fullmatch(r"\[\d+\.\d+\.\d+\] - \d{4}-\d{2}-\d{2}", section), f"undated or malformed: {section!r}"


def test_installed_distribution_metadata() -> None:
    """The installed distribution carries the version, the MIT licence, its licence file, and no placeholder URL."""
    metadata = importlib.metadata.metadata("vecenv")
    assert metadata["Version"] == vecenv.__version__
    assert "MIT" in (metadata.get("License-Expression") or metadata.get("License") or "")
    assert "LICENSE" in (metadata.get_all("License-File") or [])
    assert metadata["Author"] == "The vecenv developers"
    urls = [*(metadata.get_all("Home-page") or []), *(metadata.get_all("Project-URL") or [])]
    assert not [url for url in urls if PLACEHOLDER.search(url)], urls


# --- setup.cfg as the one source of the install instructions, the extras and the supported versions ---

INSTALL_PAGES = ("README.md", "docs/quickstart.md")
EXTRAS_PAGES = ("README.md", "docs/index.md")
#: The pages that state the supported Python versions, and which of them name the interpreter CI runs.
VERSION_PAGES = ("README.md", "docs/index.md", "docs/quickstart.md")
CI_INTERPRETER_PAGES = ("README.md", "docs/index.md")
CI_INTERPRETER = re.compile(r"CI runs the test suite\s+on one interpreter,\s+CPython (3\.\d+)")


def _load_check_links() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_links", ROOT / "docs" / "check_links.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


#: The docs link checker's pattern of a placeholder address (``https://github.com/OWNER/...``, example.com).
PLACEHOLDER: re.Pattern[str] = _load_check_links().PLACEHOLDER


def setup_cfg() -> configparser.ConfigParser:
    """setup.cfg as setuptools reads it (no interpolation: values keep their ``%``)."""
    config = configparser.ConfigParser(interpolation=None)
    config.read(ROOT / "setup.cfg", encoding="utf-8")
    return config


def declared_extras() -> dict[str, list[Requirement]]:
    """``[options.extras_require]`` of setup.cfg: {extra: its requirements, in file order}."""
    section = setup_cfg()["options.extras_require"]
    return {
        extra: [Requirement(line) for line in value.splitlines() if line.strip()] for extra, value in section.items()
    }


def declared_python_versions() -> list[str]:
    """The ``Programming Language :: Python :: 3.X`` classifiers of setup.cfg, as ``"3.X"``, oldest first."""
    classifiers = setup_cfg()["metadata"]["classifiers"].splitlines()
    found = [m.group(1) for c in classifiers if (m := re.fullmatch(r"Programming Language :: Python :: (3\.\d+)", c))]
    return sorted(found, key=lambda v: tuple(map(int, v.split("."))))


def _without_marker(requirement: Requirement) -> str:
    """``name[extras]specifier`` of a requirement, its environment marker left out."""
    extras = f"[{','.join(sorted(requirement.extras))}]" if requirement.extras else ""
    return f"{canonicalize_name(requirement.name)}{extras}{requirement.specifier}"


def extras_table(page: str) -> dict[str, str]:
    """The extras table of ``page`` (header ``| extra | installs | ...``): {extra: its "installs" cell}."""
    text = (ROOT / page).read_text(encoding="utf-8")
    tables = re.findall(r"^\| extra \| installs \|.*\n\|[- |]+\|\n((?:\|.*\|\n)+)", text, re.MULTILINE)
    assert len(tables) == 1, f"{page}: expected one table headed '| extra | installs | ...', found {len(tables)}"
    rows: dict[str, str] = {}
    for row in tables[0].splitlines():
        cells = [cell.strip() for cell in row.strip().strip("|").split(" | ")]
        name = re.fullmatch(r"`([a-z0-9-]+)`", cells[0])
        assert name, f"{page}: the first cell of an extras row is an extra's name in backticks: {row!r}"
        assert name.group(1) not in rows, f"{page}: extra {name.group(1)!r} listed twice"
        rows[name.group(1)] = cells[1]
    return rows


def test_setup_cfg_metadata_names_no_placeholder_address() -> None:
    """The wheel's metadata (setup.cfg's ``[metadata]``) has no ``OWNER`` and no placeholder address."""
    metadata = setup_cfg()["metadata"]
    for option, value in metadata.items():
        assert "OWNER" not in value, f"setup.cfg [metadata] {option}: names the placeholder OWNER: {value!r}"
        assert not PLACEHOLDER.search(value), f"setup.cfg [metadata] {option}: a placeholder address: {value!r}"
    # the long description is the README: it must not carry one either
    assert metadata["long_description"] == "file: README.md"


@pytest.mark.parametrize("page", INSTALL_PAGES)
def test_install_commands_install_from_a_copy_of_the_source_or_a_built_wheel(page: str) -> None:
    """The install commands of the page name no placeholder, and install from the source or ``dist/``'s wheel.

    There is no public address to install from: every ``pip install`` of a shell block installs the copy of
    the source (``.``, with extras) or the wheel ``make dist`` builds, and the page shows both.
    """
    text = (ROOT / page).read_text(encoding="utf-8")
    assert "OWNER" not in text, f"{page} names the placeholder OWNER"
    assert not PLACEHOLDER.search(text), f"{page} links to a placeholder address"
    blocks = re.findall(r"^```(?:bash|sh|console)\n(.*?)^```", text, re.MULTILINE | re.DOTALL)
    targets = [
        m.group(1)
        for block in blocks
        for line in block.splitlines()
        if (m := re.match(r"python -m pip install (.+?)\s*(?:#.*)?$", line.strip()))
    ]
    local = re.compile(r'-e "\.(?:\[[a-z0-9,-]+\])?"|dist/vecenv-\*\.whl|"\$\(ls dist/vecenv-\*\.whl\)\[[a-z0-9,-]+\]"')
    assert targets, f"{page}: no `python -m pip install` command in its shell blocks"
    for target in targets:
        assert local.fullmatch(target), f"{page}: installs {target!r}, not the source copy or dist/'s wheel"
    assert any(t.startswith("-e") for t in targets), f"{page}: no install from the copy of the source"
    assert any("dist/" in t for t in targets), f"{page}: no install of the wheel make dist builds"
    assert any(line.strip() == "make dist" for block in blocks for line in block.splitlines()), page
    extras = set(declared_extras())
    for named in re.findall(r"\[([a-z0-9,-]+)\]", " ".join(targets)):
        assert set(named.split(",")) <= extras, f"{page}: installs extras {named!r}; setup.cfg has {sorted(extras)}"


def test_make_dist_builds_into_dist_with_build() -> None:
    """``make dist`` builds with ``python -m build`` into ``dist/`` (which the install commands name)."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    recipe = re.search(r"^dist:.*\n((?:\t.*\n)+)", makefile, re.MULTILINE)
    assert recipe, "Makefile has no dist target"
    assert re.search(r"-m build --outdir dist \.$", recipe.group(1), re.MULTILINE), recipe.group(1)


@pytest.mark.parametrize("page", EXTRAS_PAGES)
def test_extras_tables_list_every_extra_with_exactly_its_requirements(page: str) -> None:
    """The page's extras table has one row per extra of setup.cfg, listing exactly that extra's requirements.

    Each requirement is a code span ``name[extras]specifier``; one with an environment marker is followed
    by its condition in words, in parentheses.
    """
    rows = extras_table(page)
    extras = declared_extras()
    assert sorted(rows) == sorted(extras), f"{page} lists extras {sorted(rows)}; setup.cfg has {sorted(extras)}"
    for extra, requirements in extras.items():
        cell = rows[extra]
        listed = sorted(_without_marker(Requirement(span)) for span in re.findall(r"`([^`]+)`", cell))
        expected = sorted(_without_marker(r) for r in requirements)
        row = ", ".join(f"`{r}`" for r in [_without_marker(r) for r in requirements])
        assert listed == expected, f"{page}: extra {extra!r} lists {listed}; setup.cfg: {expected}; row: {row}"
        for requirement in requirements:
            if requirement.marker is not None:
                assert f"`{_without_marker(requirement)}` (" in cell, (
                    f"{page}: extra {extra!r}: say when {requirement} applies ({requirement.marker}), in parentheses"
                )


def test_declared_python_versions_are_consistent() -> None:
    """The classifiers name consecutive versions from ``python_requires``'s; mypy and ruff target the oldest."""
    versions = declared_python_versions()
    minors = [int(v.split(".")[1]) for v in versions]
    assert minors == list(range(minors[0], minors[0] + len(minors))), versions
    assert setup_cfg()["options"]["python_requires"] == f">={versions[0]}"
    assert setup_cfg()["mypy"]["python_version"] == versions[0]
    ruff = (ROOT / "ruff.toml").read_text(encoding="utf-8")
    assert re.search(rf'^target-version = "py3{minors[0]}"$', ruff, re.MULTILINE), "ruff.toml's target-version"


@pytest.mark.parametrize("page", VERSION_PAGES)
def test_pages_state_the_declared_python_versions(page: str) -> None:
    """The page states the supported versions as the classifiers declare them (``CPython 3.10, 3.11 or 3.12``)."""
    versions = [re.escape(v) for v in declared_python_versions()]
    listed = r",\s+".join(versions[:-1]) + r",?\s+(?:and|or)\s+" + versions[-1]
    text = (ROOT / page).read_text(encoding="utf-8")
    assert re.search(r"CPython\s+" + listed, text), (
        f"{page} does not state the supported versions: CPython {', '.join(declared_python_versions())}"
    )
    oldest = versions[0]
    open_ended = re.search(rf"Python`?\s+(?:>=\s*{oldest}|\(>=\s*{oldest}\)|{oldest}\s+or\s+(?:newer|later))", text)
    assert not open_ended, f"{page}: {open_ended.group(0)!r} claims every newer version; state the declared ones"


@pytest.mark.parametrize("page", CI_INTERPRETER_PAGES)
def test_the_interpreter_running_the_tests_is_a_declared_version(page: str) -> None:
    """The running interpreter is among the classifiers, and the pages name the one CI runs.

    Under CI (``CI=true``) the interpreter the pages name must be this one, so that CI's interpreter is
    always part of what the pages call tested.
    """
    running = f"{sys.version_info[0]}.{sys.version_info[1]}"
    versions = declared_python_versions()
    assert running in versions, f"the tests run on Python {running}, which setup.cfg's classifiers ({versions}) omit"
    named = CI_INTERPRETER.search((ROOT / page).read_text(encoding="utf-8"))
    assert named, f"{page} does not say which interpreter CI runs ('CI runs the test suite on one interpreter, ...')"
    assert named.group(1) in versions, f"{page}: CI's CPython {named.group(1)} is not among {versions}"
    if os.environ.get("CI") == "true":
        assert platform.python_implementation() == "CPython"
        assert named.group(1) == running, f"{page} says CI runs CPython {named.group(1)}; it runs {running}"


# --- the citation file and the version, in step ---


def citation() -> dict[str, Any]:
    """CITATION.cff, parsed as YAML."""
    import yaml

    data = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    assert isinstance(data, dict), "CITATION.cff is not a YAML mapping"
    return data


def test_citation_file_is_cff_1_2_0_of_this_software() -> None:
    """CITATION.cff has the keys CFF 1.2.0 requires and describes vecenv at its version, MIT-licensed."""
    cff = citation()
    assert cff["cff-version"] == "1.2.0"
    assert isinstance(cff["message"], str) and cff["message"]
    assert cff["title"].startswith("vecenv")
    assert cff["type"] == "software"
    assert cff["authors"] == [{"name": "The vecenv developers"}]
    assert cff["version"] == vecenv.__version__, f"CITATION.cff: {cff['version']}; vecenv: {vecenv.__version__}"
    assert cff["license"] == "MIT"
    assert isinstance(cff["date-released"], str), "quote date-released: CFF wants the string YYYY-MM-DD"
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", cff["date-released"]), cff["date-released"]


def test_the_version_is_the_same_everywhere() -> None:
    """``vecenv.__version__``, setup.cfg, the site, CITATION.cff and the newest release of the changelog agree.

    CHANGELOG.md may have an ``[Unreleased]`` section above its newest ``## [X.Y.Z] - YYYY-MM-DD``; that
    release is ``vecenv.__version__``, and CITATION.cff's ``date-released`` is its date.
    """
    version = vecenv.__version__
    assert re.fullmatch(r"\d+\.\d+\.\d+", version), version
    assert setup_cfg()["metadata"]["version"] == "attr: vecenv.version.__version__"
    conf = ast.parse((ROOT / "docs" / "conf.py").read_text(encoding="utf-8"))
    releases = [
        node.value
        for node in conf.body
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "release" for t in node.targets)
    ]
    assert len(releases) == 1, "docs/conf.py sets release once"
    release = releases[0]
    assert ast.unparse(release) == "vecenv.__version__" or (
        isinstance(release, ast.Constant) and release.value == version
    ), f"docs/conf.py: release = {ast.unparse(release)}, not vecenv.__version__ ({version})"
    sections = changelog_sections()
    released = [i for i, s in enumerate(sections) if s != "[Unreleased]"]
    assert released, "CHANGELOG.md has no released version"
    assert all(s == "[Unreleased]" for s in sections[: released[0]]), sections
    newest = re.fullmatch(r"\[(\d+\.\d+\.\d+)\] - (\d{4}-\d{2}-\d{2})", sections[released[0]])
    assert newest, f"CHANGELOG.md: the newest release heading is not '## [X.Y.Z] - YYYY-MM-DD': {sections[released[0]]}"
    assert newest.group(1) == version, f"CHANGELOG.md's newest release is {newest.group(1)}; vecenv is {version}"
    cff = citation()
    assert (cff["version"], cff["date-released"]) == (version, newest.group(2)), (
        f"CITATION.cff: {cff['version']} of {cff['date-released']}; CHANGELOG.md: {version} of {newest.group(2)}"
    )


def test_docs_extra_has_what_the_api_reference_imports() -> None:
    """The modules docs/api.md documents import with the base dependencies and the docs extra alone.

    ``make docs`` installs only the docs extra (into ``.venv-docs``); here the packages that only other
    extras bring (pandas, ray, stable-baselines3, ...) are made unimportable in a fresh interpreter.
    """
    extras = declared_extras()
    docs = {canonicalize_name(r.name) for r in extras["docs"]}
    base = {canonicalize_name(Requirement(line).name) for line in setup_cfg()["options"]["install_requires"].split()}
    others = {canonicalize_name(r.name) for name, reqs in extras.items() if name != "docs" for r in reqs} - docs - base
    blocked = sorted(
        top
        for top, dists in importlib.metadata.packages_distributions().items()
        if {canonicalize_name(d) for d in dists} <= others
    )
    api = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    modules = sorted(set(re.findall(r"^\.\. (?:currentmodule|automodule):: ([\w.]+)$", api, re.MULTILINE)))
    assert "vecenv" in modules and len(modules) > 1, modules
    script = (
        "import sys\n"
        f"blocked = {blocked!r}\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.partition('.')[0] in blocked:\n"
        "            raise ImportError(f'{name} is not in the docs extra', name=name)\n"
        "sys.meta_path.insert(0, Block())\n"
        f"for module in {modules!r}:\n"
        "    __import__(module)\n"
        "print('imported', len(sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0 and result.stdout.startswith("imported"), (
        f"importing {modules} without {blocked} failed: add what it needs to the docs extra\n{result.stderr}"
    )
