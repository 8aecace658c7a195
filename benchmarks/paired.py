"""What the paired benchmark scripts share: the rate of a stepping function, and the report they print.

Imported by the scripts in this directory (run them as ``python benchmarks/<script>.py``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any

import pandas as pd

from vecenv.bench.tables import render_markdown


def rate(step: Callable[[], object], n: int, seconds: float) -> float:
    """env-steps/s of ``step()`` (which steps ``n`` envs) over about ``seconds``, at least one call (so the rate is
    > 0 however late a busy machine lets this process run)."""
    start, steps = time.perf_counter(), 0
    while steps == 0 or time.perf_counter() - start < seconds:
        step()
        steps += n
    return steps / max(time.perf_counter() - start, 1e-9)


def write_results(result: dict[str, Any], output: str | None, json_path: str | None) -> None:
    """Write ``result["text"]`` (the report) to ``output`` and the rest of ``result`` as JSON to ``json_path``,
    each if given."""
    if output:
        with open(output, "w", encoding="utf-8") as handle:
            handle.write(result["text"] + "\n")
    if json_path:
        with open(json_path, "w", encoding="utf-8") as handle:
            json.dump({k: v for k, v in result.items() if k != "text"}, handle, indent=1)


def report(header: str, rows: list[dict[str, object]], right: Sequence[bool], output: str | None) -> None:
    """Print ``header`` and ``rows`` as a Markdown table (``right[i]``: column ``i`` right-aligned); also write them
    to ``output`` if given."""
    frame = pd.DataFrame(rows).astype(str)
    text = header + "\n\n" + render_markdown(list(frame.columns), frame.values.tolist(), right)
    print(text)
    if output:
        with open(output, "w", encoding="utf-8") as handle:
            handle.write(text + "\n")
