"""plot_results: the PNG it writes, the curves it draws (checked against numbers computed by hand), errors."""

from __future__ import annotations

import json
import os
import sys

import matplotlib.image
import numpy as np
import pytest
from matplotlib.collections import PathCollection
from matplotlib.figure import Figure

from vecenv.monitor import LoadMonitorResultsError, MissingExtraError
from vecenv.plotting import plot_results

# two envs' episodes: (return, length, end time in seconds since that file's t_start)
EPISODES = {
    "0": [(1.0, 10, 0.5), (3.0, 12, 1.5), (2.0, 8, 2.5), (5.0, 20, 3.5)],
    "1": [(4.0, 5, 1.0), (6.0, 7, 2.0), (0.5, 9, 3.0)],
}
T_STARTS = {"0": 1000.0, "1": 1000.25}


def write_monitor_files(folder, episodes=EPISODES, env_id="Walker-v9"):
    """Monitor files written by hand (SB3's format), not with vecenv's writer."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, rows in episodes.items():
        with open(folder / f"{name}.monitor.csv", "w", newline="\n") as file:
            file.write("#" + json.dumps({"t_start": T_STARTS[name], "env_id": env_id}) + "\n")
            file.write("r,l,t\r\n")
            for r, length, t in rows:
                file.write(f"{r},{length},{t}\r\n")


def combined_by_hand():
    """All episodes sorted by absolute end time: (returns, cumulative steps)."""
    rows = sorted(
        ((T_STARTS[name] + t, r, length) for name, rows in EPISODES.items() for r, length, t in rows),
    )
    returns = np.array([r for _, r, _ in rows])
    steps = np.cumsum([length for _, _, length in rows])
    return returns, steps


def test_plot_writes_png(tmp_path):
    """A PNG that decodes, of the figure's size, no temporary file left behind; missing folders created."""
    write_monitor_files(tmp_path / "logs")
    output = tmp_path / "out" / "sub" / "curve.png"
    figure = plot_results(tmp_path / "logs", output=output)
    assert isinstance(figure, Figure)
    assert os.listdir(output.parent) == ["curve.png"]
    with open(output, "rb") as file:
        assert file.read(8) == b"\x89PNG\r\n\x1a\n"
    image = matplotlib.image.imread(output)
    width, height = figure.get_size_inches() * figure.dpi
    assert image.shape[:2] == (round(height), round(width))
    assert image.shape[2] in (3, 4)
    assert 300 <= image.shape[0] <= 2000 and 300 <= image.shape[1] <= 3000
    # not a blank image
    assert image[..., :3].std() > 0.05


def test_plot_curves_match_hand_computed(tmp_path):
    """Raw returns as dots and the rolling mean as a line, both against cumulative env steps of all files."""
    write_monitor_files(tmp_path)
    figure = plot_results(str(tmp_path), window=3)
    (axes,) = figure.axes
    returns, steps = combined_by_hand()
    (dots,) = [c for c in axes.collections if isinstance(c, PathCollection)]
    np.testing.assert_allclose(dots.get_offsets(), np.column_stack([steps, returns]))
    (line,) = axes.get_lines()
    np.testing.assert_allclose(line.get_xdata(), steps)
    # mean of the last 3 episodes (of all the episodes so far for the first two)
    means = [returns[max(0, i - 2) : i + 1].mean() for i in range(len(returns))]
    np.testing.assert_allclose(line.get_ydata(), means)
    assert "steps" in axes.get_xlabel()
    assert "return" in axes.get_ylabel()
    assert "Walker-v9" in axes.get_title()
    assert "7 episodes" in axes.get_title()
    assert "3" in axes.get_legend().get_texts()[1].get_text()


def test_plot_single_file_and_title(tmp_path):
    """One monitor CSV file can be plotted on its own; ``title`` replaces the default title."""
    write_monitor_files(tmp_path)
    figure = plot_results(tmp_path / "1.monitor.csv", title="my run")
    (axes,) = figure.axes
    assert axes.get_title() == "my run"
    np.testing.assert_allclose(axes.get_lines()[0].get_xdata(), [5, 12, 21])


def test_plot_without_episodes(tmp_path):
    """Monitor files without finished episodes still give a (labelled) figure and a PNG."""
    write_monitor_files(tmp_path / "logs", episodes={"0": []})
    figure = plot_results(tmp_path / "logs", output=tmp_path / "empty.png")
    assert matplotlib.image.imread(tmp_path / "empty.png").ndim == 3
    assert "no finished episode" in figure.axes[0].texts[0].get_text()


def test_plot_errors(tmp_path):
    """Bad window: ValueError; no monitor file: LoadMonitorResultsError; nothing written in either case."""
    write_monitor_files(tmp_path / "logs")
    for window in (0, -5, 2.5, True):
        with pytest.raises(ValueError, match="window"):
            plot_results(tmp_path / "logs", output=tmp_path / "x.png", window=window)
    with pytest.raises(LoadMonitorResultsError, match="No monitor files"):
        plot_results(tmp_path / "nothing-here", output=tmp_path / "x.png")
    assert not (tmp_path / "x.png").exists()


def test_failed_save_leaves_existing_output_alone(tmp_path):
    """If saving fails, an existing output file is unchanged and no temporary file remains."""
    write_monitor_files(tmp_path / "logs")
    output = tmp_path / "plot.notaformat"
    output.write_bytes(b"old")
    with pytest.raises(ValueError, match="notaformat"):
        plot_results(tmp_path / "logs", output=output)
    assert output.read_bytes() == b"old"
    assert sorted(os.listdir(tmp_path)) == ["logs", "plot.notaformat"]


@pytest.mark.parametrize("missing", ["matplotlib", "pandas"])
def test_missing_plot_extra(tmp_path, monkeypatch, missing):
    """Without matplotlib or pandas: MissingExtraError (an ImportError) naming the module and the extra."""
    write_monitor_files(tmp_path)
    for name in list(sys.modules):
        if name == missing or name.startswith(missing + "."):
            monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, missing, None)
    with pytest.raises(
        MissingExtraError,
        match=r"pip install pandas matplotlib \(or pip install -e \"\.\[plot\]\" in a clone of vecenv\)",
    ) as info:
        plot_results(tmp_path, output=tmp_path / "x.png")
    assert isinstance(info.value, ImportError)
    assert missing in str(info.value)
    assert not (tmp_path / "x.png").exists()
