"""``vecenv plot``: a learning curve (episode returns against env-steps) drawn from monitor files and saved as an
image. Needs the ``plot`` extra (pandas and matplotlib), imported only when the command runs.
"""

from __future__ import annotations

import argparse
import os

from vecenv.cli_args import OUTPUT_FILE, UsageError, check_output_path, os_reason, path_error
from vecenv.monitor import LoadMonitorResultsError, get_monitor_files
from vecenv.optional import MissingExtraError, import_optional
from vecenv.plotting import plot_results

__all__ = ["MONITOR_CSV", "cmd_plot"]

#: What ``vecenv plot`` reads.
MONITOR_CSV = "a monitor CSV written by vecenv's or SB3's Monitor (a '#{...}' JSON header line, then the columns r,l,t)"


def cmd_plot(args: argparse.Namespace) -> int:
    """``vecenv plot``: learning curve from monitor files, saved as an image."""
    try:
        import_optional("pandas", "load_results")
        import_optional("matplotlib.figure", "plot_results")
    except MissingExtraError as exc:
        raise UsageError(str(exc)) from None
    path = args.path
    expected = f"a folder of *monitor.csv files (e.g. a vecenv run --monitor folder) or {MONITOR_CSV}"
    if not os.path.exists(path):
        raise UsageError(f"argument MONITOR_DIR_OR_CSV: expected {expected}; got {path!r}, which does not exist")
    if os.path.isdir(path) and not get_monitor_files(path):
        raise UsageError(
            f"argument MONITOR_DIR_OR_CSV: expected {expected}; got {path!r}, a folder without *monitor.csv files"
        )
    output = args.output
    if output is None:
        output = os.path.join(path, "monitor.png") if os.path.isdir(path) else os.path.splitext(path)[0] + ".png"
    check_output_path("-o/--output", output, folder=False)
    _check_image_format(output)
    try:
        plot_results(path, output=output, window=args.window, title=args.title)
    except LoadMonitorResultsError as exc:
        raise UsageError(f"argument MONITOR_DIR_OR_CSV: expected {MONITOR_CSV}; got {path!r}: {exc}") from None
    except OSError as exc:
        raise path_error("-o/--output", output, OUTPUT_FILE, f"cannot write it: {os_reason(exc)}") from None
    except RuntimeError as exc:  # matplotlib cannot render that format here (.pgf without a LaTeX installed)
        raise UsageError(f"argument -o/--output: matplotlib cannot render {output!r} on this machine: {exc}") from None
    print(f"wrote {output}")
    return 0


def _check_image_format(output: str) -> None:
    """Refuse an output file whose extension is not an image format of matplotlib (PNG without extension)."""
    from matplotlib.backend_bases import FigureCanvasBase

    extension = os.path.splitext(output)[1].lstrip(".").lower()
    formats = FigureCanvasBase.get_supported_filetypes()
    if extension and extension not in formats:
        raise UsageError(
            f"argument -o/--output: expected an image file name ending in one of "
            f"{', '.join('.' + name for name in sorted(formats))}, got {output!r}"
        )
