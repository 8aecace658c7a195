"""benchmarks/pettingzoo_bench.py, tiny: every contender built and stepped in paired rounds, and the table's
numbers are the medians of the recorded rounds."""

from __future__ import annotations

import importlib.util
import os
import sys
from typing import Any

import numpy as np
import pytest

pytest.importorskip("mpe2")
pytest.importorskip("supersuit")

BENCH_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")


def _load_bench() -> Any:
    sys.path.insert(0, BENCH_DIR)  # the script imports its siblings paired.py and scaling.py
    try:
        spec = importlib.util.spec_from_file_location(
            "pettingzoo_bench_under_test", os.path.join(BENCH_DIR, "pettingzoo_bench.py")
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(BENCH_DIR)
    return module


def test_pettingzoo_bench_rows_and_paired_ratios(capsys: pytest.CaptureFixture[str], tmp_path: Any) -> None:
    bench = _load_bench()
    argv = ["-n", "2", "--rounds", "3", "--seconds", "0.02", "--warmup", "0.02", "--supersuit-base", "gymnasium"]
    result = bench.main([*argv, "--output", str(tmp_path / "pz.md"), "--json", str(tmp_path / "pz.json")])
    printed = capsys.readouterr().out
    plain = result["records"][0]
    cores = len(os.sched_getaffinity(0))
    ceiling = f"{cores * float(np.median(plain['rates'])):,.0f}"
    assert f"Ceiling: {cores} cores x plain = {ceiling} agent-steps/s" in printed
    assert result["text"] in printed and (tmp_path / "pz.md").read_text() == result["text"] + "\n"
    assert "3 rounds of 0.02 s per contender" in printed
    lines = [line for line in printed.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    assert header == [column.replace("BASELINE", "supersuit-2cpu") for column in bench.COLUMNS]
    rows = [dict(zip(header, (cell.strip() for cell in line.strip("|").split("|")), strict=True)) for line in lines[2:]]
    expected = ["plain", "supersuit-2cpu", "supersuit-0cpu", "vecenv-subproc", "vecenv-dummy"]
    if (os.cpu_count() or 1) >= 2 and len(os.sched_getaffinity(0)) >= 2:
        expected.insert(4, "vecenv-parent")
    assert [row["contender"] for row in rows] == expected
    records = {r["contender"]: r for r in result["records"]}
    baseline = np.array(records["supersuit-2cpu"]["rates"])
    for row in rows:
        record = records[row["contender"]]
        assert record["rows"] == 6  # 2 envs x 3 agents
        rates = np.array(record["rates"])
        assert len(rates) == 3 and (rates > 0).all()
        assert float(row["agent-steps/s"].replace(",", "")) == pytest.approx(np.median(rates), abs=0.5)
        assert float(row["x supersuit-2cpu"]) == pytest.approx(float(np.median(rates / baseline)), abs=5e-3)
        low, high = (float(q) for q in row["quartiles"].split(".."))
        assert (low, high) == pytest.approx(tuple(np.percentile(rates / baseline, [25, 75])), abs=5e-3)
        in_workers = row["contender"] in ("vecenv-subproc", "vecenv-parent")
        assert (row["caller us/step"] != "") == in_workers and (row["cpu us/step"] != "") == in_workers
        if in_workers:
            assert float(row["caller us/step"]) >= float(row["busy us/step"]) > 0
            assert float(row["cpu us/step"]) == pytest.approx(record["cpu_us"], abs=0.5) and record["cpu_us"] > 0


def test_pettingzoo_bench_refuses_unknown_contenders(capsys: pytest.CaptureFixture[str]) -> None:
    bench = _load_bench()
    with pytest.raises(SystemExit) as excinfo:
        bench.main(["--contenders", "vecenv-subproc,petsuit"])
    assert excinfo.value.code == 2
    err = capsys.readouterr().err
    assert "argument --contenders: expected a comma-separated list among plain, supersuit-2cpu" in err
    assert err.rstrip().endswith("got 'vecenv-subproc,petsuit'")


def test_pettingzoo_bench_supersuit_with_any_process_count() -> None:
    """``supersuit-<K>cpu`` names SuperSuit with ``num_cpus=K``; ``--baseline`` heads the ratio column."""
    bench = _load_bench()
    assert bench.contender_list("plain,supersuit-16cpu") == ["plain", "supersuit-16cpu"]
    assert [bench.supersuit_cpus(n) for n in ("supersuit-16cpu", "supersuit-0cpu", "supersuit-cpu", "plain")] == [
        16,
        0,
        None,
        None,
    ]
    assert "num_cpus=16," in bench.layout("supersuit-16cpu", 64, 16, "gymnasium")
    header = bench.table([{"contender": "plain", "layout": "x", "rate": 1.0}], "supersuit-16cpu").splitlines()[0]
    assert "x supersuit-16cpu" in header
    args = bench.parser().parse_args(["--contenders", "supersuit-16cpu", "--baseline", "supersuit-16cpu"])
    assert args.contenders == ["supersuit-16cpu"] and args.baseline == "supersuit-16cpu"
