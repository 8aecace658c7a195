"""The documentation site as a newcomer meets it: every link leads somewhere, the quick start's examples run
one by one as separate scripts, and the summaries of the landing page and of the migration guide match the
code.

The link checker (``docs/check_links.py``, run by ``make docs`` after the build) is tested here on a small
hand-written site; ``test_the_built_site_has_no_broken_link`` builds the real site once (about 15 s) where
the ``docs`` extra (Sphinx, MyST, furo) is installed, and is skipped elsewhere.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

import vecenv
from vecenv.gymnasium import AutoresetMode

from .processes import repo_env
from .test_docs_examples import Block, _lines, parse_page

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
HAS_SPHINX = all(importlib.util.find_spec(name) is not None for name in ("sphinx", "myst_parser", "furo"))


def _load_docs_module(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, DOCS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


check_links = _load_docs_module("check_links")


# --- the link checker -------------------------------------------------------------------------------------


def _write(path: Path, body: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"<!DOCTYPE html><html><head></head><body>{body}</body></html>", encoding="utf-8")


def test_check_links_reports_each_kind_of_broken_link(tmp_path: Path) -> None:
    _write(
        tmp_path / "index.html",
        """
        <p id="top"><a href="#top">here</a> <a href="#nowhere">gone</a> <a href="page.html#part">page</a>
        <a href="page.html#missing">bad anchor</a> <a href="missing.html">missing page</a>
        <a href="_downloads/abc/example.py">file</a> <a href="_downloads/abc/gone.py">gone file</a>
        <a href="https://github.com/OWNER/vecenv/blob/main/README.md">placeholder</a>
        <a href="https://example.com/x">example</a> <a href="https://gymnasium.farama.org">real</a>
        <a href="mailto:someone@somewhere.org">mail</a> <a href="../outside.html">outside</a>
        <a href="https:/github.com/someone/vecenv">no host</a>
        <img src="_images/chart.png"> <a href="sub/">directory</a> <a href="page.html?v=1">query</a></p>""",
    )
    _write(tmp_path / "page.html", '<h2 id="part">Part</h2><a name="old">old</a><a href="index.html#top">back</a>')
    _write(tmp_path / "sub" / "index.html", '<a href="../page.html#old">up</a>')
    (tmp_path / "_downloads" / "abc").mkdir(parents=True)
    (tmp_path / "_downloads" / "abc" / "example.py").write_text("print(1)\n")
    (tmp_path / "_images").mkdir()
    (tmp_path / "_images" / "chart.png").write_bytes(b"\x89PNG")

    assert list(check_links.broken_links(tmp_path)) == [
        "index.html: #nowhere: index.html has no anchor 'nowhere'",
        "index.html: page.html#missing: page.html has no anchor 'missing'",
        "index.html: missing.html: no such file in the site",
        "index.html: _downloads/abc/gone.py: no such file in the site",
        "index.html: https://github.com/OWNER/vecenv/blob/main/README.md: a placeholder address, not a real one",
        "index.html: https://example.com/x: a placeholder address, not a real one",
        "index.html: ../outside.html: leads outside the site",
        "index.html: https:/github.com/someone/vecenv: an address without a host",
    ]
    assert check_links.main([str(tmp_path)]) == 1


def test_check_links_passes_a_sound_site_and_refuses_a_missing_one(tmp_path: Path) -> None:
    _write(tmp_path / "index.html", '<a href="page.html">page</a>')
    _write(tmp_path / "page.html", '<a id="x" href="index.html#x">x</a>')
    assert check_links.main([str(tmp_path)]) == 1  # index.html has no anchor "x"
    _write(tmp_path / "page.html", '<a id="x" href="page.html#x">x</a>')
    assert check_links.main([str(tmp_path)]) == 0
    assert check_links.main([str(tmp_path / "nothing-built")]) == 2


@pytest.mark.skipif(not HAS_SPHINX, reason="the docs extra (sphinx, myst-parser, furo) is not installed")
def test_links_that_leave_docs_lead_to_a_page_a_copied_file_or_the_configured_repository(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    conf = _load_docs_module("conf")
    text = (
        "[README](../README.md#install) [log](../CHANGELOG.md) [ex](../examples/cleanrl_ppo.py) "
        "[bench](../benchmarks/README.md) [here](semantics.md#errors) "
        "![chart](../benchmarks/snapshots/2026-11-22-d.png) [web](https://gymnasium.farama.org) [anchor](#top)"
    )
    monkeypatch.setattr(conf, "REPO_URL", "")
    assert conf._rewrite_links(text, DOCS, "quickstart") == (
        "[README](readme.md#install) [log](changelog.md) [ex](path:../examples/cleanrl_ppo.py) "
        "[bench](path:../benchmarks/README.md) [here](semantics.md#errors) "
        "![chart](../benchmarks/snapshots/2026-11-22-d.png) [web](https://gymnasium.farama.org) [anchor](#top)"
    )
    monkeypatch.setattr(conf, "REPO_URL", "https://github.com/someone/vecenv")
    assert conf._rewrite_links(text, DOCS, "quickstart") == (
        "[README](readme.md#install) [log](changelog.md) "
        "[ex](https://github.com/someone/vecenv/blob/main/examples/cleanrl_ppo.py) "
        "[bench](https://github.com/someone/vecenv/blob/main/benchmarks/README.md) [here](semantics.md#errors) "
        "![chart](../benchmarks/snapshots/2026-11-22-d.png) [web](https://gymnasium.farama.org) [anchor](#top)"
    )
    # README.md's own links, as the include of docs/readme.md reads them (relative to the repository root)
    assert conf._rewrite_links("[n](docs/normalization.md) [c](CHANGELOG.md)", ROOT, "readme") == (
        "[n](normalization.md) [c](changelog.md)"
    )


@pytest.fixture(scope="module")
def built_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built once for this module as ``make docs`` builds it (warnings are errors)."""
    out = tmp_path_factory.mktemp("site")
    env = repo_env()
    env.pop("VECENV_REPO_URL", None)
    build = subprocess.run(
        [sys.executable, "-m", "sphinx", "-E", "-W", "--keep-going", "-q", "-b", "html", str(DOCS), str(out)],
        check=False,
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert build.returncode == 0, f"sphinx-build failed:\n{build.stderr}"
    return out


@pytest.mark.skipif(not HAS_SPHINX, reason="the docs extra (sphinx, myst-parser, furo) is not installed")
def test_the_built_site_has_no_broken_link(built_site: Path) -> None:
    assert list(check_links.broken_links(built_site)) == []
    # the files that the guides link to are in the site: README and CHANGELOG as pages, the others as files
    assert {"readme.html", "changelog.html"} <= {p.name for p in built_site.glob("*.html")}
    copied = {p.name for p in (built_site / "_downloads").rglob("*") if p.is_file()}
    assert {"README.md", "cleanrl_ppo.py", "soak-2026-11-22.json"} <= copied
    assert 'href="readme.html#install-into-your-own-environment"' in (built_site / "quickstart.html").read_text()


# --- the quick start: each example is a script of its own -------------------------------------------------

QUICKSTART_BLOCKS = [b for b in parse_page(DOCS / "quickstart.md") if not b.signature]


@pytest.mark.parametrize("block", QUICKSTART_BLOCKS, ids=lambda b: f"line{b.line}")
def test_quickstart_example_runs_as_a_script_of_its_own(block: Block, tmp_path: Path) -> None:
    """Saved to a file and run with ``python`` in an empty directory, the block prints its output block."""
    assert block.output is not None, f"{block.id} has no output block to compare with"
    script = tmp_path / "example.py"
    script.write_text(block.source, encoding="utf-8")
    env = repo_env()
    run = subprocess.run(
        [sys.executable, script.name], check=False, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, f"{block.id} failed on its own:\n{run.stderr}"
    mask = block.output_varies is not None
    assert _lines(run.stdout, mask) == _lines(block.output, mask), f"{block.id} printed:\n{run.stdout}"


def test_quickstart_examples_import_what_they_use_and_use_what_they_import() -> None:
    """No block relies on a name from another block, and none imports a name it does not use."""
    for block in (
        QUICKSTART_BLOCKS
        + [b for b in parse_page(ROOT / "README.md") if not b.signature]
        + [b for b in parse_page(DOCS / "index.md") if not b.signature]
    ):
        tree = ast.parse(block.source)
        imported = {
            (alias.asname or alias.name).split(".")[0]
            for node in ast.walk(tree)
            if isinstance(node, (ast.Import, ast.ImportFrom))
            for alias in node.names
        }
        used = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
        assert imported <= used, f"{block.id} imports {sorted(imported - used)} without using them"


# --- the summaries of the landing page and the migration guide --------------------------------------------


def test_the_landing_page_shows_subprocvecenv_s_signature() -> None:
    text = (DOCS / "index.md").read_text(encoding="utf-8")
    match = re.search(r"`SubprocVecEnv\(([^`]*)\)`", text)
    assert match, "docs/index.md shows no `SubprocVecEnv(...)` signature"
    shown = ast.parse(f"def f({' '.join(match.group(1).split())}): pass").body[0]
    assert isinstance(shown, ast.FunctionDef)
    names = [arg.arg for arg in shown.args.args]
    defaults = [eval(ast.unparse(d), {"AutoresetMode": AutoresetMode}) for d in shown.args.defaults]
    parameters = inspect.signature(vecenv.SubprocVecEnv).parameters
    assert names == list(parameters)
    assert dict(zip(names[len(names) - len(defaults) :], defaults, strict=True)) == {
        name: p.default for name, p in parameters.items() if p.default is not inspect.Parameter.empty
    }


def test_the_landing_page_names_every_command() -> None:
    text = (DOCS / "index.md").read_text(encoding="utf-8")
    status = text[text.index("- **The `vecenv` command**") : text.index("- **Reliability**")]
    commands = re.findall(
        r"^    (\w+) ",
        subprocess.run(
            [sys.executable, "-m", "vecenv", "--help"],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        ).stdout,
        re.MULTILINE,
    )
    assert commands, "vecenv --help lists no command"
    for word in [f"`vecenv {command}`" for command in commands] + ["`--profile`", "--autotune"]:
        assert word in status, f"the landing page's summary of the vecenv command lacks {word}"


#: The parameters of Stable-Baselines3's ``SubprocVecEnv`` (SB3 2.9.2, ``vec_env/subproc_vec_env.py``).
SB3_SUBPROC_PARAMETERS = ["env_fns", "start_method"]


def _exported_names_table() -> list[list[str]]:
    text = (DOCS / "migrating-from-sb3.md").read_text(encoding="utf-8")
    section = text[text.index("## Exported names") : text.index("## SB3 algorithms accept vecenv objects")]
    rows = [line for line in section.splitlines() if line.startswith("| ")][2:]  # without header and rule
    return [[cell.strip() for cell in row.strip("|").split(" | ")] for row in rows]


def test_the_migration_guide_lists_every_exported_name() -> None:
    listed = [name for row in _exported_names_table() for name in re.findall(r"`([^`]+)`", row[0])]
    assert sorted(listed) == sorted(vecenv.__all__)


def test_the_migration_guide_lists_every_parameter_subprocvecenv_adds() -> None:
    if importlib.util.find_spec("stable_baselines3") is not None:
        from stable_baselines3.common.vec_env import SubprocVecEnv as SB3SubprocVecEnv

        assert list(inspect.signature(SB3SubprocVecEnv).parameters) == SB3_SUBPROC_PARAMETERS
    extra = [name for name in inspect.signature(vecenv.SubprocVecEnv).parameters if name not in SB3_SUBPROC_PARAMETERS]
    (row,) = [row for row in _exported_names_table() if row[0] == "`SubprocVecEnv`"]
    missing = [name for name in extra if f"`{name}`" not in row[2]]
    assert not missing, f"the SubprocVecEnv row of docs/migrating-from-sb3.md lacks {missing}"


# --- the figures of the landing page and of the README are those of the snapshot they show ----------------

THOUSANDS = re.compile(r"(?<![\d.])\d{1,3}(?:,\d{3})+(?![\d,])")


def _section(text: str, heading: str) -> str:
    start = text.index(f"\n{heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


@pytest.mark.parametrize(("page", "heading"), [("docs/index.md", "## How fast"), ("README.md", "## Performance")])
def test_the_performance_summary_quotes_the_snapshot_it_shows(page: str, heading: str) -> None:
    """The chart of the summary is a committed snapshot of ``vecenv bench``, and every rate, memory size or
    other figure with a thousands separator that the summary quotes is in that run's tables."""
    from vecenv.bench.workloads import WORKLOADS

    section = _section((ROOT / page).read_text(encoding="utf-8"), heading)
    charts = re.findall(r"!\[[^\]]*\]\((?:\.\./)?(benchmarks/snapshots/([0-9-]{10})-speedup\.png)\)", section)
    assert len(charts) == 1, f"{page}: the {heading!r} section shows no (or several) speed-up chart(s)"
    chart, date = charts[0]
    assert (ROOT / chart).is_file(), f"{page} shows {chart}, which does not exist"
    tables = [ROOT / "benchmarks" / "snapshots" / f"{date}-{workload}.md" for workload in WORKLOADS]
    assert all(table.is_file() for table in tables), f"the run of {date} lacks a table per workload"
    measured = {number for table in tables for number in THOUSANDS.findall(table.read_text(encoding="utf-8"))}
    quoted = THOUSANDS.findall(section)
    assert quoted, f"{page}: the {heading!r} section quotes no figure"
    assert [n for n in quoted if n not in measured] == [], f"{page} quotes figures that the {date} run lacks"
