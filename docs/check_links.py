"""Check every link of the built documentation site: ``python docs/check_links.py [docs/_build/html]``.

``make docs`` runs it after the build. It reads every ``.html`` file of the site and fails (exit status 1,
one line per broken link) on:

- a relative link (``href`` or ``src``) to a file that is not in the site;
- a link to an anchor (``page.html#name``, ``#name``) that the target page does not define;
- a link to a placeholder address (``https://github.com/OWNER/...``, ``example.com``): the site links
  into the repository only where ``VECENV_REPO_URL`` gives its real address (``docs/conf.py``);
- a web address without a host (``https:/github.com/...``).

It needs only the standard library, so it runs wherever the site was built.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

#: An address that stands for a real one: the ``OWNER`` of an unpublished repository, example domains.
PLACEHOLDER = re.compile(r"//(?:[^/]*\.)?example\.(?:com|org|net)(?:[:/]|$)|/OWNER(?:/|$)", re.IGNORECASE)
#: Schemes that do not name a file or a web address to check.
SKIPPED_SCHEMES = {"mailto", "javascript", "data", "tel"}


@dataclass
class Page:
    """The links (``href`` / ``src`` values, in page order) and the anchors (``id`` / ``name``) of a page."""

    links: list[str] = field(default_factory=list)
    anchors: set[str] = field(default_factory=set)


class _PageParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.page = Page()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if value is None:
                continue
            if name in ("href", "src") and not (tag == "link" and name == "href" and value.startswith("#")):
                self.page.links.append(value)
            elif name == "id" or (tag == "a" and name == "name"):
                self.page.anchors.add(value)


def parse_page(path: Path) -> Page:
    """Read the links and anchors of the HTML file ``path``."""
    parser = _PageParser()
    parser.feed(path.read_text(encoding="utf-8"))
    parser.close()
    return parser.page


def broken_links(site: Path) -> Iterator[str]:
    """Yield ``"page: link: why"`` for every broken link of the site in directory ``site``.

    :param site: the directory of the built site (``docs/_build/html``).
    :return: one line per broken link, pages and links in order.
    """
    site = site.resolve()
    pages: dict[Path, Page] = {}

    def page(path: Path) -> Page:
        if path not in pages:
            pages[path] = parse_page(path)
        return pages[path]

    for html in sorted(site.rglob("*.html")):
        where = html.relative_to(site).as_posix()
        for link in page(html).links:
            parts = urlsplit(link)
            if parts.scheme in SKIPPED_SCHEMES:
                continue
            if parts.scheme or link.startswith("//"):
                if PLACEHOLDER.search(link):
                    yield f"{where}: {link}: a placeholder address, not a real one"
                elif parts.scheme in ("http", "https") and not parts.netloc:
                    yield f"{where}: {link}: an address without a host"
                continue
            target = (html.parent / unquote(parts.path)).resolve() if parts.path else html
            if site != target and site not in target.parents:
                yield f"{where}: {link}: leads outside the site"
            elif target.is_dir():
                if not (target / "index.html").is_file():
                    yield f"{where}: {link}: a directory without index.html"
            elif not target.is_file():
                yield f"{where}: {link}: no such file in the site"
            elif parts.fragment and target.suffix == ".html" and unquote(parts.fragment) not in page(target).anchors:
                yield f"{where}: {link}: {target.name} has no anchor {parts.fragment!r}"


def main(argv: list[str]) -> int:
    site = Path(argv[0]) if argv else Path(__file__).resolve().parent / "_build" / "html"
    if not (site / "index.html").is_file():
        print(f"check_links: {site} holds no built site (index.html): run `make docs` first", file=sys.stderr)
        return 2
    problems = list(broken_links(site))
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        print(f"check_links: {len(problems)} broken link(s) in {site}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
