"""Every ```python block of README.md and docs/*.md runs as shown, and prints what the page says it prints.

How the pages are read: Sybil (the ``sybil`` package, in the ``test`` extra) lexes each page: its Markdown
lexers find the fenced code blocks (in lists and block quotes too) and the HTML-comment directives below,
with their positions. The blocks are run by this module rather than by Sybil's own pytest plugin, because
that plugin has to be installed as a ``conftest.py`` hook, cannot give an example a marker (the SB3
blocks must be selectable with ``-m sb3`` for ``make test-sb3``) and does not compare a block's printed
output with an output block that follows it. Here each block is one parametrized test, so ``-k`` and
``-m`` select blocks as usual.

What is run, and how:

- The blocks of one page run in page order in one namespace (a block may use the names an earlier block
  defined), with ``__name__ == "__main__"`` (so the ``if __name__ == "__main__":`` guard of a script
  example runs) and a fresh temporary directory per page as working directory, holding the files listed
  for the page in :data:`PAGE_FILES`. A block selected on its own (``-k``, ``-m sb3``) first runs the
  blocks before it on its page.
- A ```text block that follows a python block with nothing but blank lines (or a directive) between them
  is that block's output: what the block prints must equal it, line for line (trailing spaces and leading
  / trailing blank lines aside).
- A block that imports ``stable_baselines3`` or ``torch`` is marked ``sb3``: skipped when SB3 is not
  installed, run by ``make test-sb3``.
- A block that uses ``RayVecEnv`` or imports ``ray`` runs in the tests' Ray (the ``ray_session`` fixture,
  already initialised, so a ``RayVecEnv`` there does not start its own); skipped where ray is not installed.
  A block that imports ``envpool`` is skipped where envpool is not installed.

Directives, written in the Markdown as an HTML comment on the line right before the block they apply to
(visible in the page's source, invisible on the rendered page):

- ``<!-- signature -->`` before a ```python block: the block shows a signature, not an example, and is
  not run.
- ``<!-- raises: ValueError -->`` before a ```python block: the block ends with that (uncaught) exception;
  its output block, if any, ends with the exception as Python prints it (type, message, notes).
- ``<!-- output-varies: REASON -->`` before an output block: its numbers are not compared (pids, timings,
  counts that depend on timing); everything else is.
- ``<!-- not-output -->`` before a ```text block that follows a python block but is not its output.
- ``<!-- xfail: REASON -->`` before a ```python block: the block is known to fail (REASON names the doc
  section and why); the test fails as soon as it passes, so the marker cannot outlive the fix.

The whole module runs in well under a minute: the examples keep their step counts small.
"""

from __future__ import annotations

import contextlib
import difflib
import importlib.util
import io
import os
import re
import shutil
import tempfile
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from sybil import Document
from sybil.parsers.markdown.lexers import DirectiveInHTMLCommentLexer, FencedCodeBlockLexer

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
HAS_SB3 = importlib.util.find_spec("stable_baselines3") is not None
NEEDS_SB3 = re.compile(r"^\s*(?:import|from)\s+(?:stable_baselines3|torch)\b", re.MULTILINE)
HAS_RAY = importlib.util.find_spec("ray") is not None
HAS_ENVPOOL = importlib.util.find_spec("envpool") is not None
NEEDS_ENVPOOL = re.compile(r"^\s*(?:import|from)\s+envpool\b", re.MULTILINE)
NEEDS_RAY = re.compile(r"\bRayVecEnv\b|^\s*(?:import|from)\s+ray\b", re.MULTILINE)

#: Files a page's examples read, copied into that page's working directory: {page: {name: source}}.
PAGE_FILES = {
    # the SB3 pickle that "Migrating SB3 pickles" imports (written by SB3 2.9.2: tests/data/make_sb3_fixtures.py)
    "docs/normalization.md": {"vec_normalize.pkl": ROOT / "tests" / "data" / "sb3_cartpole_box.pkl"},
}

FENCES = FencedCodeBlockLexer(language=r"[\w+-]*")
PYTHON_DIRECTIVES = {"signature", "raises", "xfail"}
OUTPUT_DIRECTIVES = {"output-varies", "not-output"}
DIRECTIVES = DirectiveInHTMLCommentLexer(directive="|".join(sorted(PYTHON_DIRECTIVES | OUTPUT_DIRECTIVES)))
NUMBER = re.compile(r"\d+(?:\.\d+)?(?:e[-+]?\d+)?")


@dataclass
class Block:
    """A ```python block of a page, with what the page says about it."""

    page: Path
    line: int
    source: str
    signature: bool = False
    raises: str | None = None
    xfail: str | None = None
    output: str | None = None
    output_varies: str | None = None

    @property
    def needs_sb3(self) -> bool:
        return bool(NEEDS_SB3.search(self.source))

    @property
    def needs_ray(self) -> bool:
        return bool(NEEDS_RAY.search(self.source))

    @property
    def needs_envpool(self) -> bool:
        return bool(NEEDS_ENVPOOL.search(self.source))

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(ROOT) if self.page.is_relative_to(ROOT) else self.page.name}:{self.line}"


def parse_page(page: Path) -> list[Block]:
    """The python blocks of ``page`` in page order, with their directives and output blocks."""
    text = page.read_text(encoding="utf-8")
    document = Document(text, str(page))
    items: list[tuple[int, int, str, tuple[str, str]]] = []  # (start, end, "fence" / "directive", details)
    for region in FENCES(document):
        items.append((region.start, region.end, "fence", (region.lexemes["language"], str(region.lexemes["source"]))))
    for region in DIRECTIVES(document):
        arguments = (region.lexemes.get("arguments") or "").strip()
        items.append((region.start, region.end, "directive", (region.lexemes["directive"], arguments)))
    items.sort()
    blocks: list[Block] = []
    pending: dict[str, str] = {}  # directives waiting for their block
    previous_end = 0
    previous_python: Block | None = None
    for start, end, kind, (name, value) in items:
        # a directive's region stops before its closing "-->"
        adjacent = previous_python is not None and not re.sub(r"--+>", "", text[previous_end:start]).strip()
        previous_end = end
        where = f"{page.name}:{text.count(chr(10), 0, start) + 1}"
        if kind == "directive":
            assert name not in pending, f"{where}: directive {name} twice"
            pending[name] = value
            continue
        if name == "python":
            assert set(pending) <= PYTHON_DIRECTIVES, f"{where}: {set(pending)} do not apply to a python block"
            block = Block(page, int(where.rsplit(":", 1)[1]), value, signature="signature" in pending)
            block.raises, block.xfail = pending.get("raises"), pending.get("xfail")
            blocks.append(block)
            previous_python = block
        elif previous_python is not None and adjacent and name == "text" and "not-output" not in pending:
            assert set(pending) <= OUTPUT_DIRECTIVES, f"{where}: {set(pending)} do not apply to an output block"
            previous_python.output = value
            previous_python.output_varies = pending.get("output-varies")
            previous_python = None
        else:
            assert set(pending) <= {"not-output"}, f"{where}: {set(pending)} before a block that is not an output"
            previous_python = None
        pending = {}
    assert not pending, f"{page.name}: directive {pending} at the end of the page applies to no block"
    return blocks


def _lines(output: str, mask_numbers: bool) -> list[str]:
    """``output`` as lines without trailing spaces or surrounding blank lines; numbers masked if asked."""
    if mask_numbers:
        output = NUMBER.sub("<n>", output)
    return [line.rstrip() for line in output.strip("\n").splitlines()]


@dataclass
class PageRun:
    """The state of one page's run: its namespace, its working directory, which blocks have run."""

    blocks: list[Block]
    directory: str
    namespace: dict[str, Any] = field(default_factory=lambda: {"__name__": "__main__"})
    done: set[int] = field(default_factory=set)

    def run(self, index: int) -> tuple[str, BaseException | None]:
        """Run block ``index`` (after any earlier block not run yet); return what it printed and raised."""
        for earlier in range(index):
            block = self.blocks[earlier]
            runnable = (
                (HAS_SB3 or not block.needs_sb3)
                and (HAS_RAY or not block.needs_ray)
                and (HAS_ENVPOOL or not block.needs_envpool)
            )
            if earlier not in self.done and not block.signature and runnable:
                _, error = self._exec(earlier)
                if error is not None and (block.raises is None or type(error).__name__ != block.raises):
                    raise AssertionError(f"the earlier block {block.id} failed: {error!r}") from error
        return self._exec(index)

    def _exec(self, index: int) -> tuple[str, BaseException | None]:
        block = self.blocks[index]
        self.done.add(index)
        code = compile("\n" * (block.line) + block.source, str(block.page), "exec", dont_inherit=True)
        printed = io.StringIO()
        cwd = os.getcwd()
        os.chdir(self.directory)
        try:
            with contextlib.redirect_stdout(printed):
                exec(code, self.namespace)
        except Exception as exc:
            return printed.getvalue(), exc
        finally:
            os.chdir(cwd)
        return printed.getvalue(), None


_RUNS: dict[Path, PageRun] = {}
_TMP = tempfile.TemporaryDirectory(prefix="vecenv-docs-")


def _page_run(page: Path, blocks: list[Block]) -> PageRun:
    if page not in _RUNS:
        directory = Path(_TMP.name) / page.stem
        directory.mkdir()
        for name, source in PAGE_FILES.get(str(page.relative_to(ROOT)), {}).items():
            shutil.copyfile(source, directory / name)
        _RUNS[page] = PageRun(blocks, str(directory))
    return _RUNS[page]


def _params() -> Iterator[Any]:
    for page in PAGES:
        blocks = parse_page(page)
        for index, block in enumerate(blocks):
            marks = []
            if block.needs_sb3:
                marks += [
                    pytest.mark.sb3,
                    pytest.mark.skipif(not HAS_SB3, reason="needs stable-baselines3 (make test-sb3)"),
                ]
            if block.needs_ray:
                marks.append(pytest.mark.skipif(not HAS_RAY, reason="needs ray (the ray extra)"))
            if any(b.needs_ray and not b.signature for b in blocks[: index + 1]):
                marks.append(pytest.mark.ray)  # it runs in the tests' Ray (see test_python_block)
            if block.needs_envpool:
                marks.append(pytest.mark.skipif(not HAS_ENVPOOL, reason="needs envpool (no wheel for this platform)"))
            if block.signature:
                marks.append(pytest.mark.skip(reason="a signature, not an example"))
            yield pytest.param(blocks, index, id=block.id, marks=marks)


@pytest.fixture(scope="module", autouse=True)
def _clean_up_pages() -> Iterator[None]:
    """After the pages: close the vector envs their examples left open (a page's namespace can outlive its run:
    a function a block defined and registered somewhere, e.g. as an env's entry point, holds it), then forget
    the namespaces and the working directories."""
    yield
    from vecenv.base import VecEnv

    for run in _RUNS.values():
        for value in list(run.namespace.values()):
            if isinstance(value, VecEnv):
                with contextlib.suppress(Exception):  # (an example may have closed it, or broken it on purpose)
                    value.close()
    _RUNS.clear()
    _TMP.cleanup()


def check_block(block: Block, printed: str, error: BaseException | None) -> None:
    """Raise (an AssertionError or the block's own exception) unless the block did what its page says."""
    mask = block.output_varies is not None
    if block.raises is None:
        if error is not None:
            raise error
        if block.output is not None:
            expected, got = _lines(block.output, mask), _lines(printed, mask)
            diff = "\n".join(difflib.unified_diff(expected, got, "output block", "printed", lineterm=""))
            assert got == expected, f"{block.id} printed something else than its output block:\n{diff}"
        return
    assert error is not None, f"{block.id} should raise {block.raises} but raised nothing"
    if type(error).__name__ != block.raises:
        raise AssertionError(f"{block.id} should raise {block.raises}, raised {error!r}") from error
    if block.output is not None:
        expected = _lines(block.output, mask)
        got = _lines("".join(traceback.format_exception_only(error)), mask)
        assert expected[-len(got) :] == got, f"{block.id}: its output block does not end with\n" + "\n".join(got)


@pytest.mark.parametrize(("blocks", "index"), list(_params()))
def test_python_block(blocks: list[Block], index: int, request: pytest.FixtureRequest) -> None:
    """The block runs as its page says: without an exception (or with the one shown), printing its output."""
    block = blocks[index]
    if HAS_RAY and any(b.needs_ray and not b.signature for b in blocks[: index + 1]):
        request.getfixturevalue("ray_session")
    try:
        printed, error = _page_run(block.page, blocks).run(index)
        check_block(block, printed, error)
    except Exception as exc:
        if block.xfail is not None:
            pytest.xfail(f"{block.xfail} ({type(exc).__name__}: {exc})")
        raise
    if block.xfail is not None:
        pytest.fail(f"{block.id} is marked xfail ({block.xfail}) but passes: remove its <!-- xfail --> marker")


def test_every_page_is_read() -> None:
    """The lexers find the python blocks (guards against a Sybil change that would silently find none)."""
    found = {page.name: len(parse_page(page)) for page in PAGES}
    assert found["README.md"] >= 2
    assert sum(found.values()) >= 40, found


def test_directives(tmp_path: Path) -> None:
    """Directives attach to the block after them, and an output block to the python block before it."""
    page = tmp_path / "directives.md"
    page.write_text(
        """<!-- signature -->
```python
f(x, y=1)
```

```python
print(1)
```

```text
1
```

<!-- xfail: a section name -->
<!-- raises: ValueError -->
```python
raise ValueError(2)
```
<!-- output-varies: timing -->
```text
ValueError: 3
```

```python
x = 1
```
Some words.
```text
not output
```
""",
        encoding="utf-8",
    )
    blocks = parse_page(page)
    assert [(b.line, b.signature, b.raises, b.xfail, b.output, b.output_varies) for b in blocks] == [
        (2, True, None, None, None, None),
        (6, False, None, None, "1\n", None),
        (16, False, "ValueError", "a section name", "ValueError: 3\n", "timing"),
        (24, False, None, None, None, None),
    ]
    check_block(blocks[1], "1\n", None)
    check_block(blocks[2], "", ValueError(2))  # numbers masked: "ValueError: 3" matches
    with pytest.raises(AssertionError, match="printed something else"):
        check_block(blocks[1], "2\n", None)
    with pytest.raises(AssertionError, match="should raise ValueError"):
        check_block(blocks[2], "", TypeError(2))
    with pytest.raises(KeyError):
        check_block(blocks[3], "", KeyError("x"))
