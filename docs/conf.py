"""Sphinx configuration of vecenv's documentation site: ``make docs`` builds it into ``docs/_build/html``.

The guides are the Markdown pages of this directory (MyST); the API reference is ``api.md`` (autodoc). Links
from a guide to a file outside ``docs/`` (the changelog, the benchmark snapshots, tests, examples) stay
relative on GitHub; on the site they point to the file in the repository (``VECENV_REPO_URL``), and a link to
a file that does not exist is a warning, hence an error (``make docs`` builds with ``-W``). Intersphinx needs
the internet, so it is off unless ``VECENV_DOCS_INTERSPHINX=1``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from sphinx.util import logging

import vecenv

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
REPO_URL = os.environ.get("VECENV_REPO_URL", "https://github.com/OWNER/vecenv").rstrip("/")

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

# a Markdown link (not an image: ``![alt](...)`` is copied into the site by Sphinx) to ``../...``
_LINK = re.compile(r"(?<!!)(\[[^\]]*\]\()((?:\.\./)+[^)\s#]+)(#[^)\s]*)?(\))")
_logger = logging.getLogger(__name__)


def _links_out_of_docs(app: Any, docname: str, source: list[str]) -> None:
    """Point links that leave ``docs/`` at the repository; warn about a link to a missing file."""

    def repl(match: re.Match[str]) -> str:
        target = (DOCS / Path(docname).parent / match.group(2)).resolve()
        if DOCS in target.parents:
            return match.group(0)
        if not target.exists():
            _logger.warning(f"{docname}: link to a file that does not exist: {match.group(2)}")
            return match.group(0)
        kind = "tree" if target.is_dir() else "blob"
        url = f"{REPO_URL}/{kind}/main/{target.relative_to(ROOT).as_posix()}{match.group(3) or ''}"
        return f"{match.group(1)}{url}{match.group(4)}"

    source[0] = _LINK.sub(repl, source[0])


def setup(app: Any) -> None:
    app.connect("source-read", _links_out_of_docs)
