"""The figures of the documentation and its blocks of commands, as a reader meets them on the site.

- The charts of ``vecenv bench`` (:mod:`vecenv.bench.chart`) can be read at the width of a page: every text
  of the figure is at least :data:`MIN_TEXT_PX` tall where the page shows the figure, nothing is cut off, and
  every series has a colour and a marker (a hatch for bars) of its own. Checked on the matplotlib figures
  themselves, drawn from the results the performance page shows.
- Command lines fit the page: no line of a ```bash / ```shell / ```console block, no command (``$ ...``) of a
  transcript and no line of a signature block is longer than :data:`MAX_LINE` characters, unless it is
  continued with a backslash.
- Every figure of the docs (a table of measurements, a chart) is one of ``benchmarks/figures.py``'s, which
  ``make figures`` measures again; every section that shows one names the commit it measured and the later
  changes that concern it, and every chart or snapshot the pages show is made by one of its commands.
- The prose names only mechanisms the code has: each sentence of :data:`CLAIMS` is on its page and the code
  fact it states holds; no sentence of :data:`STALE` is on its page while the code fact that makes it wrong
  holds.

Measured in the built site (``make docs``) with headless Chromium in a window 1280 px wide: furo's text
column is 736 px wide (:data:`PAGE_WIDTH_PX`), and shows a PNG at that width; a code block has 14 px of
padding on each side and a monospace font of 13 px, 7.8 px per character, so 90 characters fit on its line
(:data:`MAX_LINE`); a block in a list loses about 19 px (2.5 characters) per level.
"""

from __future__ import annotations

import importlib.util
import inspect
import itertools
import json
import math
import re
import struct
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from sybil import Document

import vecenv
from vecenv.workers import spin

from .test_docs_examples import FENCES, PAGES, parse_page

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOTS = ROOT / "benchmarks" / "snapshots"
#: The width of furo's text column at a 1280 px window, where a chart is shown (px).
PAGE_WIDTH_PX = 736
#: The smallest text a chart may show at that width: furo's own smallest, the page's table of contents (px).
MIN_TEXT_PX = 12.0
#: The longest line of a command or signature block that fits that column without scrolling (characters).
MAX_LINE = 90
#: The least colour difference between two series of a chart (CIE 1976 Delta E; tab10's closest pair: 27.7).
MIN_DELTA_E = 25.0


def _load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"{path.stem}_under_test", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


figures = _load(ROOT / "benchmarks" / "figures.py")


# --- the charts ---------------------------------------------------------------------------------------------


def _bench_results() -> Any:
    """The results the performance page's charts are drawn from (the ``bench`` figure's JSON snapshots)."""
    charts = _load(ROOT / "benchmarks" / "charts.py")
    (bench,) = [f for f in figures.FIGURES if f.name == "bench"]
    runs = [str(SNAPSHOTS / name) for name in bench.snapshots if name.endswith(".json")]
    df, machine = charts.load_runs(runs)
    return df, machine


def _drawn_texts(fig: Any, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Draw ``fig`` and return every non-empty text it drew (ticks, labels, titles, legend, bar labels)."""
    from matplotlib.text import Text

    drawn: list[Any] = []
    draw = Text.draw

    def recording_draw(self: Any, renderer: Any) -> Any:
        if self.get_visible() and self.get_text().strip():
            drawn.append(self)
        return draw(self, renderer)

    with monkeypatch.context() as patch:
        patch.setattr(Text, "draw", recording_draw)
        fig.canvas.draw()
    return drawn


def _assert_readable_at_page_width(fig: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from vecenv.bench.chart import DPI

    width_in, height_in = fig.get_size_inches()
    assert width_in * DPI >= PAGE_WIDTH_PX, "the PNG has fewer pixels than the page shows: it is blown up, blurred"
    scale = PAGE_WIDTH_PX / (width_in * 72)  # shown px per point of the figure
    texts = _drawn_texts(fig, monkeypatch)
    assert len(texts) > 20
    small = sorted(
        {(t.get_text(), round(t.get_fontsize() * scale, 1)) for t in texts if t.get_fontsize() * scale < MIN_TEXT_PX}
    )
    assert not small, f"texts shown under {MIN_TEXT_PX} px at {PAGE_WIDTH_PX} px: {small[:8]}"
    renderer = fig.canvas.get_renderer()
    width, height = width_in * fig.dpi, height_in * fig.dpi
    for text in texts:
        box = text.get_window_extent(renderer)
        inside = box.x0 >= -1 and box.y0 >= -1 and box.x1 <= width + 1 and box.y1 <= height + 1
        assert inside, f"{text.get_text()!r} is cut off by the edge of the figure ({box} in {width} x {height})"


def _lab(color: Any) -> tuple[float, float, float]:
    """CIE L*a*b* (D65) of a matplotlib colour."""
    from matplotlib.colors import to_rgb

    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in to_rgb(color)]
    matrix = [(0.4124, 0.3576, 0.1805), (0.2126, 0.7152, 0.0722), (0.0193, 0.1192, 0.9505)]
    white = (0.95047, 1.0, 1.08883)
    xyz = [sum(m * c for m, c in zip(row, linear, strict=True)) / w for row, w in zip(matrix, white, strict=True)]
    f = [t ** (1 / 3) if t > (6 / 29) ** 3 else t / (3 * (6 / 29) ** 2) + 4 / 29 for t in xyz]
    return 116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])


def _close_colours(colours: dict[str, Any]) -> list[tuple[str, str, float]]:
    return [
        (a, b, round(math.dist(_lab(colours[a]), _lab(colours[b])), 1))
        for a, b in itertools.combinations(colours, 2)
        if math.dist(_lab(colours[a]), _lab(colours[b])) < MIN_DELTA_E
    ]


def test_the_lab_colour_difference_is_the_textbook_one() -> None:
    assert _lab("white") == pytest.approx((100.0, 0.0, 0.0), abs=0.05)
    assert _lab("black") == pytest.approx((0.0, 0.0, 0.0), abs=0.05)
    assert _lab("#ff0000") == pytest.approx((53.24, 80.09, 67.20), abs=0.1)  # sRGB red, the usual reference


def test_the_grid_chart_of_the_performance_page_reads_at_page_width(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("pandas")
    pytest.importorskip("matplotlib")
    from vecenv.bench.chart import grid_figure

    df, _ = _bench_results()
    backends = figures.PERFORMANCE_BACKENDS.split(",")
    fig = grid_figure(df, title="vecenv bench at f5a01c4: 2 CPUs (AMD EPYC), 2026-11-29", backends=backends)
    _assert_readable_at_page_width(fig, monkeypatch)
    # one row per workload of the results, with the backends asked for in the legend, in that order
    (legend,) = [legend for sub in fig.subfigs for legend in sub.legends]
    labels = [t.get_text() for t in legend.get_texts()]
    assert labels[:3] == ["plain loop", "vecenv DummyVecEnv", "vecenv SubprocVecEnv()"] and len(labels) == len(backends)
    assert [sub._suptitle.get_text() for sub in fig.subfigs[1:]] == [
        "CartPole-v1",
        "84x84x4 image",
        "~200 us of CPU per step",
    ]


def test_every_series_of_the_grid_chart_has_a_colour_and_a_marker_of_its_own() -> None:
    """With every backend ``vecenv bench`` runs by default (and one more ``n_workers`` variant), each line of
    a panel differs from every other in colour (by at least :data:`MIN_DELTA_E`) and in marker."""
    pd = pytest.importorskip("pandas")
    pytest.importorskip("matplotlib")
    from vecenv.bench.backends import default_backend_names
    from vecenv.bench.chart import grid_figure

    backends = [*default_backend_names(), "vecenv-subproc-w8"]
    records = [
        {
            "workload": "cartpole",
            "num_envs": n,
            "backend": b,
            "status": "ok",
            "env_steps_per_s": 1e3 * (i + n),
            "startup_s": 0.1 * (i + 1),
        }
        for i, b in enumerate(backends)
        for n in (1, 4)
    ]
    fig = grid_figure(pd.DataFrame(records))
    for ax in fig.get_axes():
        lines = {line.get_label(): line for line in ax.get_lines()}
        assert len(lines) == len(backends), ax.get_ylabel()
        assert _close_colours({label: line.get_color() for label, line in lines.items()}) == []
        markers = [line.get_marker() for line in lines.values()]
        assert len(set(markers)) == len(markers) and "" not in markers and None not in markers


def test_the_speedup_chart_reads_at_page_width_and_its_bars_differ(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("pandas")
    pytest.importorskip("matplotlib")
    from matplotlib.container import BarContainer

    from vecenv.bench.chart import SPEEDUP_SERIES, speedup_figure

    df, _ = _bench_results()
    fig, drawn = speedup_figure(df, num_envs=16, title="vecenv bench at f5a01c4: 2 CPUs, 2026-11-29", cores=2)
    _assert_readable_at_page_width(fig, monkeypatch)
    (ax,) = fig.get_axes()
    bars = {str(c.get_label()): c for c in ax.containers if isinstance(c, BarContainer)}
    assert list(bars) == [label for _, label in SPEEDUP_SERIES] == list(drawn.series)
    looks: dict[str, tuple[Any, str]] = {}
    for label, container in bars.items():
        kinds = {(tuple(p.get_facecolor()), p.get_hatch()) for p in container.patches}
        assert len(kinds) == 1, f"the bars of {label!r} differ from one another"
        looks[label] = kinds.pop()
    assert _close_colours({label: colour for label, (colour, _) in looks.items()}) == []
    hatches = [hatch for _, hatch in looks.values()]
    assert len(set(hatches)) == len(hatches)


def _png_width(path: Path) -> int:
    with open(path, "rb") as f:
        header = f.read(24)
    assert header[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return int(struct.unpack(">I", header[16:20])[0])


def test_the_charts_the_docs_show_are_drawn_by_the_current_chart_code() -> None:
    """The PNGs of the ``bench`` figure have the pixel width of :mod:`vecenv.bench.chart`'s figures: they were
    drawn (``benchmarks/charts.py``) since its size and resolution were last changed."""
    from vecenv.bench.chart import DPI, FIGURE_WIDTH_IN

    (bench,) = [f for f in figures.FIGURES if f.name == "bench"]
    pngs = [SNAPSHOTS / name for name in bench.snapshots if name.endswith(".png")]
    assert len(pngs) == 2
    for png in pngs:
        assert _png_width(png) == round(FIGURE_WIDTH_IN * DPI), png.name


# --- blocks of commands -------------------------------------------------------------------------------------

COMMAND_LANGUAGES = {"bash", "shell", "sh", "console"}


def _long_lines() -> Iterator[str]:
    """``page:line: why`` for each line of a command or signature block that does not fit the page."""
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        name = page.relative_to(ROOT)
        signatures = {block.line for block in parse_page(page) if block.signature}
        for region in FENCES(Document(text, str(page))):
            language = region.lexemes["language"]
            first = text[: region.start].count("\n") + 1  # the line of the opening fence
            fence_line = text.splitlines()[first - 1]
            indent = len(fence_line) - len(fence_line.lstrip(" "))  # the lines come without it
            limit = MAX_LINE - 3 * (indent // 2)  # a block in a list is narrower
            command = False
            for number, line in enumerate(region.lexemes["source"].text.splitlines(), start=first + 1):
                if language in COMMAND_LANGUAGES or first + 1 in signatures or first in signatures:
                    checked = True
                else:  # a transcript: the commands ($ ...) and their continuation lines
                    command = command or line.lstrip().startswith("$ ")
                    checked = command
                if checked and len(line) > limit and not line.rstrip().endswith("\\"):
                    yield f"{name}:{number}: {len(line)} characters, {limit} fit: {line.strip()[:60]}..."
                if language not in COMMAND_LANGUAGES:
                    command = command and line.rstrip().endswith("\\")


def test_command_and_signature_lines_fit_the_page() -> None:
    """A wrapped command would break in the middle of an argument, a long signature scrolls sideways: both
    must fit :data:`MAX_LINE` characters, or be continued with a backslash."""
    assert list(_long_lines()) == []


def test_the_line_check_finds_a_long_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    page = tmp_path / "page.md"
    long_run = "vecenv run CartPole-v1 " + "--steps 1 " * 10
    page.write_text(
        "\n".join(
            [
                "```bash",
                long_run,  # too long
                long_run.strip() + " \\",  # continued: fine
                "    --seed 0",
                "```",
                "",
                "```text",
                "$ " + long_run,  # a command of a transcript: too long
                "x" * 120,  # output: wraps, fine
                "```",
                "",
                "- a list",
                "",
                "  ```bash",
                "  " + "y" * 88,  # 88 characters, but in a list, where 87 fit
                "  ```",
                "",
                "<!-- signature -->",
                "```python",
                "f(" + "x=None, " * 12 + ")",  # a signature: too long
                "```",
                "",
                "```python",
                "f(" + "x=None, " * 12 + ")",  # an example: scrolls, as code may
                "```",
                "",
            ]
        ),
        encoding="utf-8",
    )
    monkeypatch.setattr(sys.modules[__name__], "PAGES", [page])
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    found = [line.split(":")[1] for line in _long_lines()]
    assert found == ["2", "8", "15", "20"]


def test_command_blocks_never_wrap_on_the_site() -> None:
    """The site's CSS wraps output blocks (```text) but keeps the lines of command blocks."""
    css = (ROOT / "docs" / "_static" / "vecenv.css").read_text(encoding="utf-8")
    rules = dict(re.findall(r"([^{}]+)\{([^}]*)\}", re.sub(r"/\*.*?\*/", "", css, flags=re.DOTALL)))
    for selector, body in rules.items():
        if "white-space: pre-wrap" in body:
            assert not any(f"highlight-{language}" in selector for language in COMMAND_LANGUAGES), selector
    keeps = [s for s, body in rules.items() if re.search(r"white-space:\s*pre;", body)]
    assert all(any(f"div.highlight-{language} pre" in s for s in keeps) for language in COMMAND_LANGUAGES)
    # the CSS names sections by their ids: each is the id of a heading of the docs (MyST's slug)
    headings = {
        re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
        for page in PAGES
        for line in page.read_text(encoding="utf-8").splitlines()
        if line.startswith("#")
    }
    for section in re.findall(r"section#([\w-]+)", css):
        assert section in headings, f"vecenv.css styles section#{section}, which no heading of the docs makes"


# --- every figure is listed, dated and reproducible ---------------------------------------------------------

#: A number as figures show them: a rate with thousands separators, a ratio (``1.20x``), a time or a size.
_MEASURE = re.compile(r"\d{1,3}(?:,\d{3})+|\b\d+(?:\.\d+)?x\b|\b\d+(?:\.\d+)? ?(?:us|ms|MiB|GiB|KiB)\b")
#: A cell that is a bare decimal number (``| 0.82 |``): a ratio where the header says so; a table needs many of
#: them to count (a few could be versions, ``| 3.11 |``).
_DECIMAL_CELL = re.compile(r"(?<=\| )\**\d+\.\d+\**(?= \|)")


def _sections(text: str) -> Iterator[tuple[str, str]]:
    """``(heading, body)`` of each section of a Markdown page (a section ends at the next heading)."""
    heading, body = "", list[str]()
    fence = None
    for line in text.splitlines():
        stripped = line.lstrip()
        mark = re.match(r"(`{3,}|~{3,})", stripped)
        if mark and (fence is None or stripped.startswith(fence)):
            fence = None if fence else mark.group(1)
        if fence is None and re.match(r"#{1,6} ", line):
            yield heading, "\n".join(body)
            heading, body = line, []
        else:
            body.append(line)
    yield heading, "\n".join(body)


def _measurement_tables() -> Iterator[tuple[str, str, str]]:
    """``(page, heading, header row)`` of each Markdown table (outside code blocks) that holds at least three
    measured numbers, or eight bare decimal numbers."""
    for page in PAGES:
        if page.name == "changelog.md":
            continue
        for heading, body in _sections(page.read_text(encoding="utf-8")):
            tables = re.findall(r"(?:^\|.*\n?)+", "\n".join(_outside_fences(body)), flags=re.MULTILINE)
            for table in tables:
                rows = table.strip().splitlines()
                cells = "\n".join(rows[2:])
                if len(_MEASURE.findall(cells)) >= 3 or len(_DECIMAL_CELL.findall(cells)) >= 8:
                    yield str(page.relative_to(ROOT)), heading, rows[0]


def _outside_fences(body: str) -> Iterator[str]:
    fence = None
    for line in body.splitlines():
        stripped = line.lstrip()
        mark = re.match(r"(`{3,}|~{3,})", stripped)
        if mark and (fence is None or stripped.startswith(fence)):
            fence = None if fence else mark.group(1)
            continue
        if fence is None:
            yield line


def _section_text(page: str, heading: str) -> str:
    found = [body for h, body in _sections((ROOT / page).read_text(encoding="utf-8")) if h == heading]
    assert len(found) == 1, f"{page} has no (or several) section {heading!r}"
    return found[0]


def test_the_table_finder_tells_measurements_from_reference_tables() -> None:
    found = {(page, heading) for page, heading, _ in _measurement_tables()}
    assert ("docs/performance.md", "## The results") in found
    assert ("docs/pettingzoo.md", "## How fast") in found
    assert ("docs/performance.md", "## Scaling to more workers and cores") in found  # bare ratios: | 0.82 |
    assert not any(page == "docs/semantics.md" or heading == "## Exported names" for page, heading in found)


def test_every_measurement_table_of_the_docs_is_a_listed_figure() -> None:
    """Each table of measurements lies in a section of a figure of ``benchmarks/figures.py``, so that it is
    dated (next test) and ``make figures`` measures it again."""
    listed = {section for figure in figures.FIGURES for section in figure.sections}
    unlisted = [
        f"{page} {heading!r}: {header[:60]}"
        for page, heading, header in _measurement_tables()
        if (page, heading) not in listed
    ]
    assert unlisted == [], "tables of measurements that benchmarks/figures.py does not list"


def _recorded_commits(snapshot: Path) -> set[str]:
    """The commits of vecenv a snapshot (JSON or Markdown) says it ran (``+dirty`` left out); none for a chart."""
    if snapshot.suffix not in (".json", ".md"):
        return set()
    text = snapshot.read_text(encoding="utf-8")
    if snapshot.suffix == ".json":
        commit = json.loads(text).get("machine", {}).get("vecenv_commit")
        return {commit} if commit else set()
    return set(re.findall(r"vecenv (?:commit|@) ([0-9a-f]{7,40})", text))


@pytest.mark.parametrize("figure", figures.FIGURES, ids=lambda f: f.name)
def test_each_figure_names_the_commit_it_measured_and_the_changes_since(figure: Any) -> None:
    for page, heading in figure.sections:
        text = " ".join(_section_text(page, heading).split())
        for commit in figure.commits:
            assert re.search(rf"\b{commit}\b", text), (
                f"{page} {heading!r} does not name the commit {commit} it measured"
            )
        for commit, what in figure.changes_since:
            assert re.search(rf"\b{commit}\b", text), (
                f"{page} {heading!r} predates {commit} ({what}) but does not say so"
            )
    recorded = set().union(*(_recorded_commits(SNAPSHOTS / name) for name in figure.snapshots))
    assert {c[:7] for c in recorded} <= set(figure.commits), f"the snapshots ran {recorded}, not {figure.commits}"
    for name in figure.snapshots:
        assert (SNAPSHOTS / name).is_file(), name


def _git(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False, timeout=60)


def test_the_changes_since_a_figure_came_after_it() -> None:
    """Each commit a figure predates is a descendant of the commit it measured (where git has the history)."""
    try:
        if _git("rev-parse", "--is-shallow-repository").stdout.strip() != "false":
            pytest.skip("no full git history here")
    except (OSError, subprocess.SubprocessError):
        pytest.skip("git is not available")
    for figure in figures.FIGURES:
        for commit, _ in figure.changes_since:
            for measured in figure.commits:
                done = _git("merge-base", "--is-ancestor", measured, commit)
                assert done.returncode == 0, f"{figure.name}: {commit} is not a later change than {measured}"


def test_every_chart_and_snapshot_the_docs_show_is_made_by_make_figures() -> None:
    """An image or a snapshot file under ``benchmarks/snapshots/`` that a page shows or links to is a snapshot
    of a figure, and a file its commands write (with the snapshot's date); ``make figures`` runs them."""
    outputs: dict[str, Any] = {}
    for figure in figures.FIGURES:
        for output in figure.outputs:
            outputs[output] = figure
    pattern = re.compile(r"\]\((?:\.\./)?benchmarks/snapshots/([^)#\s]+)\)")
    shown = {
        (str(page.relative_to(ROOT)), name)
        for page in PAGES
        for name in pattern.findall(page.read_text(encoding="utf-8"))
    }
    assert any(name.endswith(".png") for _, name in shown)
    for page, name in sorted(shown):
        date = re.search(r"\d{4}-\d\d-\d\d", name)
        assert date, f"{page} shows {name}, a snapshot without a date"
        template = name.replace(date.group(), "{date}")
        assert template in outputs, f"{page} shows {name}, which no command of benchmarks/figures.py writes"
        assert name in outputs[template].snapshots, (
            f"{page} shows {name}, not a snapshot of figure {outputs[template].name}"
        )
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    target = re.search(r"^figures:.*\n((?:\t.*\n)+)", makefile, flags=re.MULTILINE)
    assert target and "benchmarks/figures.py" in target.group(1), (
        "the Makefile has no figures target running benchmarks/figures.py"
    )


def test_make_figures_dry_run_prints_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert figures.main(["--dry-run", "--date", "2031-01-02", "--out", "OUT"]) == 0
    printed = capsys.readouterr().out.splitlines()
    commands = [line for line in printed if line and not line.startswith(("#", "cp "))]
    assert len(commands) == sum(len(f.steps) for f in figures.FIGURES)
    assert (
        f"{sys.executable} benchmarks/pettingzoo_bench.py --rounds 15 --output OUT/2031-01-02-pettingzoo.md" in commands
    )
    assert "cp $WORK/bench-cpu/bench.json OUT/2031-01-02-cpu.json" in printed
    with pytest.raises(SystemExit):
        figures.main(["--only", "no-such-figure"])


def _options_of(argv: list[str]) -> tuple[list[str], str]:
    """The long options of a figure's command and the source text of the parser that takes them."""
    options = [a.split("=")[0] for a in argv if a.startswith("--")]
    if argv[1:3] == ["-m", "vecenv"]:
        sources = [ROOT / "vecenv" / "cli.py", ROOT / "vecenv" / "bench" / "cli.py"]
    else:  # a script, and the sibling scripts whose options it takes (goals.py: scaling.add_run_options)
        script = ROOT / argv[1]
        text = script.read_text(encoding="utf-8")
        sources = [script, *(script.parent / f"{m}.py" for m in ("scaling", "paired") if f"from {m} import" in text)]
    return options, "".join(path.read_text(encoding="utf-8") for path in sources)


def test_the_figures_commands_use_options_their_programs_have() -> None:
    """Every long option of every command (and of its smoke settings) is one its program's parser defines;
    ``python benchmarks/figures.py --smoke`` runs them all with tiny settings (a minute or more, so not here)."""
    fields = {"python": sys.executable, "out": "OUT", "work": "WORK", "date": "2031-01-02"}
    for figure in figures.FIGURES:
        for argv in figures.commands(figure, fields, smoke=True):
            options, source = _options_of(argv)
            missing = [o for o in options if f'"{o}"' not in source]
            assert missing == [], f"{figure.name}: {' '.join(argv[1:3])} has no option {missing}"


# --- the prose names only mechanisms the code has -----------------------------------------------------------


def _default_wait_mode() -> Any:
    return inspect.signature(vecenv.SubprocVecEnv).parameters["wait_mode"].default


def _default_layout_workers_spin() -> bool:
    """On 2 cores, the default layout (2 workers) with ``wait_mode="auto"``: the workers spin, the caller blocks."""
    return _default_wait_mode() == "auto" and spin.who_spins("auto", n_workers=2, cores=2) == (False, True)


#: (page, heading, sentence, the fact of the code it states): the sentence is in that section and the fact holds.
CLAIMS: list[tuple[str, str, str, Callable[[], bool]]] = [
    (
        "docs/pettingzoo.md",
        "## How fast",
        'The default `wait_mode="auto"` lets the two workers spin for requests',
        _default_layout_workers_spin,
    ),
    (
        "docs/pettingzoo.md",
        "## How fast",
        "pauses their spinning while the calling process spends over 50 us between steps",
        lambda: spin.MAX_TIME_BETWEEN_STEPS == 50e-6,
    ),
    (
        "docs/performance.md",
        "## The results",
        '`wait_mode="auto"`, which lets the workers spin for requests and the calling process block there',
        _default_layout_workers_spin,
    ),
    (
        "docs/performance.md",
        "### `wait_mode`",
        "each stops spinning while waits take longer than a millisecond",
        lambda: spin.SPIN_LIMIT == 1e-3,
    ),
    (
        "docs/performance.md",
        "### `wait_mode`",
        "the workers stop while the calling process spends over 50 us between steps",
        lambda: spin.MAX_TIME_BETWEEN_STEPS == 50e-6,
    ),
    (
        "docs/performance.md",
        "### `wait_mode`",
        "`n_workers=1` (both sides spin)",
        lambda: spin.who_spins("auto", n_workers=1, cores=2) == (True, True),
    ),
    (
        "docs/performance.md",
        "## Scaling to more workers and cores",
        '`wait_mode="auto"` lets the workers spin for requests where `n_workers` fit the cores',
        lambda: spin.who_spins("auto", n_workers=2, cores=2)[1] and not spin.who_spins("auto", n_workers=3, cores=2)[1],
    ),
    (
        "docs/backends.md",
        "## Waiting for the workers: `wait_mode`",
        '`"auto"` (default)',
        lambda: _default_wait_mode() == "auto",
    ),
]

#: (page, heading, sentence, the fact of the code that makes it wrong): while the fact holds, the sentence is
#: not in that section.
STALE: list[tuple[str, str, str, Callable[[], bool]]] = [
    (
        "docs/pettingzoo.md",
        "## How fast",
        "three processes share the two cores, and the workers wait for the calling process",
        _default_layout_workers_spin,
    ),
    (
        "docs/performance.md",
        "## The results",
        "the workers block",
        _default_layout_workers_spin,
    ),
]


@pytest.mark.parametrize(("page", "heading", "sentence", "fact"), CLAIMS, ids=[c[2][:40] for c in CLAIMS])
def test_the_docs_state_mechanisms_the_code_has(
    page: str, heading: str, sentence: str, fact: Callable[[], bool]
) -> None:
    assert sentence in " ".join(_section_text(page, heading).split()), f"{page} {heading!r} no longer says {sentence!r}"
    assert fact(), f"{page} {heading!r} says {sentence!r}, which the code no longer does"


@pytest.mark.parametrize(("page", "heading", "sentence", "fact"), STALE, ids=[c[2][:40] for c in STALE])
def test_the_docs_do_not_state_mechanisms_the_code_dropped(
    page: str, heading: str, sentence: str, fact: Callable[[], bool]
) -> None:
    if fact():
        assert sentence not in " ".join(_section_text(page, heading).split()), (
            f"{page} {heading!r}: {sentence!r} is no longer true"
        )
