"""Sphinx configuration of vecenv's documentation site: ``make docs`` builds it into ``docs/_build/html``.

The guides are the Markdown pages of this directory (MyST); the API reference is ``api.md`` (autodoc). Links
from a guide to a file outside ``docs/`` stay relative, so that they work on GitHub; on the site:

- a link to a file the site shows as a page (``README.md``: ``readme.md``; ``CHANGELOG.md``:
  ``changelog.md``) leads to that page;
- a link to any other file (a benchmark table, a test, an example) leads to the file itself: Sphinx copies
  it into the site (``_downloads/``), or, where ``VECENV_REPO_URL`` names the repository (for example
  ``VECENV_REPO_URL=https://github.com/<owner>/vecenv make docs``), to the file in that repository;
- a link to a file that does not exist is a warning, hence an error (``make docs`` builds with ``-W``).

``make docs`` then runs ``docs/check_links.py``, which fails on any link of the built site to a missing
file or anchor. Intersphinx needs the internet, so it is off unless ``VECENV_DOCS_INTERSPHINX=1``.
"""

from __future__ import annotations

import importlib
import inspect
import os
import re
from pathlib import Path
from typing import Any

from sphinx.util import logging

import vecenv

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
#: The repository's web address, or "" (no links into a repository: linked files are copied into the site).
REPO_URL = os.environ.get("VECENV_REPO_URL", "").rstrip("/")
#: Files outside ``docs/`` that the site shows as pages: {path from the repository root: page}.
SITE_PAGES = {"README.md": "readme.md", "CHANGELOG.md": "changelog.md"}

project = "vecenv"
author = "vecenv developers"
copyright = "2026, vecenv developers"
release = vecenv.__version__
version = release

extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx.ext.viewcode"]
if os.environ.get("VECENV_DOCS_INTERSPHINX") == "1":
    extensions.append("sphinx.ext.intersphinx")
    intersphinx_mapping = {
        "python": ("https://docs.python.org/3", None),
        "numpy": ("https://numpy.org/doc/stable", None),
        "gymnasium": ("https://gymnasium.farama.org", None),
        "stable_baselines3": ("https://stable-baselines3.readthedocs.io/en/master", None),
    }

source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
exclude_patterns = ["_build"]
myst_heading_anchors = 4
myst_enable_extensions = ["colon_fence"]

autodoc_typehints = "description"
autodoc_member_order = "bysource"
autodoc_default_options = {"members": True, "show-inheritance": True}

html_theme = "furo"
html_title = f"vecenv {release}"
html_static_path = ["_static"]
#: long lines of output blocks wrap instead of scrolling sideways (code blocks keep theirs)
html_css_files = ["vecenv.css"]

# a relative Markdown link (not an image: ``![alt](...)`` is copied into the site by Sphinx, and images of an
# included file are handled by the include's ``:relative-images:``)
_LINK = re.compile(r"(?<!!)(\[[^\]]*\]\()(?![a-z][a-z0-9+.-]*:|#|/)([^)\s#]+)(#[^)\s]*)?(\))")
_logger = logging.getLogger(__name__)


def _rewrite_links(text: str, source_dir: Path, docname: str) -> str:
    """Rewrite the relative links of Markdown ``text`` (read from ``source_dir``) for page ``docname``.

    A link to a page of the site, or to a file in ``docs/``, is left to MyST (made relative to the page);
    a link to a file the site shows as a page leads to that page; a link to another file leads to the file
    in the repository (``VECENV_REPO_URL``) or, without one, to the file itself, which MyST makes a
    download link (``path:``; Sphinx copies the file into the site).
    """
    page_dir = DOCS / Path(docname).parent

    def repl(match: re.Match[str]) -> str:
        target = (source_dir / match.group(2)).resolve()
        anchor = match.group(3) or ""
        if not target.exists():
            _logger.warning(f"{docname}: link to a file that does not exist: {match.group(2)}")
            return match.group(0)
        relative = target.relative_to(ROOT).as_posix() if ROOT in target.parents else None
        if relative in SITE_PAGES:
            url = Path(os.path.relpath(DOCS / SITE_PAGES[relative], page_dir)).as_posix() + anchor
        elif DOCS in target.parents:
            url = Path(os.path.relpath(target, page_dir)).as_posix() + anchor
        elif not REPO_URL or relative is None:  # ``path:``: a download link, even to a ``.md`` file
            url = "path:" + Path(os.path.relpath(target, page_dir)).as_posix()
        else:
            kind = "tree" if target.is_dir() else "blob"
            url = f"{REPO_URL}/{kind}/main/{relative}{anchor}"
        return f"{match.group(1)}{url}{match.group(4)}"

    return _LINK.sub(repl, text)


def _links_of_page(app: Any, docname: str, source: list[str]) -> None:
    source[0] = _rewrite_links(source[0], (DOCS / docname).parent, docname)


def _links_of_included_file(app: Any, relative_path: Path, parent_docname: str, content: list[str]) -> None:
    # ``relative_path`` is relative to ``docs/`` (MyST's include) or to the including page (Sphinx's)
    content[0] = _rewrite_links(content[0], (DOCS / relative_path).parent.resolve(), parent_docname)


def _viewcode_module_of(app: Any, modname: str, attribute: str) -> str | None:
    """Where viewcode looks for the source of ``modname.attribute``.

    Viewcode takes a documented object's module from its ``__module__``, which for a type alias
    (``VecEnvStepReturn``: ``builtins``) or a re-exported module object is not where it is written, and
    it would list a source page for ``builtins`` that it cannot write. Such a value is looked up in
    ``modname`` itself (where it is only imported), so it gets no source link; classes and functions keep
    viewcode's own lookup (``None``).
    """
    value = getattr(importlib.import_module(modname), attribute.split(".", maxsplit=1)[0], None)
    return None if inspect.isclass(value) or inspect.isroutine(value) else modname


def setup(app: Any) -> None:
    app.connect("viewcode-follow-imported", _viewcode_module_of)
    app.connect("source-read", _links_of_page)
    app.connect("include-read", _links_of_included_file)
