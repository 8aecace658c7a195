"""Release metadata: the licence file, the changelog's sections, and what the installed distribution declares."""

from __future__ import annotations

import importlib.metadata
import re
from pathlib import Path

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
    """The installed distribution carries the version, the MIT licence, its licence file and the project URLs."""
    metadata = importlib.metadata.metadata("vecenv")
    assert metadata["Version"] == vecenv.__version__
    assert "MIT" in (metadata.get("License-Expression") or metadata.get("License") or "")
    assert "LICENSE" in (metadata.get_all("License-File") or [])
    assert metadata["Author"] == "The vecenv developers"
    urls = dict(entry.split(", ", 1) for entry in metadata.get_all("Project-URL") or [])
    assert set(urls) >= {"Documentation", "Source", "Changelog", "Issues"}, urls
    for url in urls.values():
        assert url.startswith("https://"), urls
