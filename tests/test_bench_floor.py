"""benchmarks/caller_floor.py: the floor's own step against SB3's rule, and the report's figures against its
rounds."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.bench_scripts import load_bench_script


def _load() -> Any:
    return load_bench_script("caller_floor_under_test", "caller_floor.py")


def test_episode_lengths_spread_the_ends_over_the_steps() -> None:
    floor = _load()
    assert floor.episode_lengths(7, 3) == [3, 4, 5, 3, 4, 5, 3]


def test_the_floor_hands_out_fresh_infos_and_the_ended_envs_terminal_observations() -> None:
    """Each step: one fresh ``{"TimeLimit.truncated": False}`` per env, the same dict in no two steps; an env whose
    episode length divides the step count has ``TimeLimit.truncated`` True and a copy of its terminal row."""
    module = _load()
    lengths = [2, 3, 2, 5]
    floor = module.Floor(4, 2, 10, lengths)
    try:
        floor.terminal[:] = np.arange(32, dtype=np.float32).reshape(4, 8)
        kept: list[list[dict[str, Any]]] = []  # (held, so that no dict's memory, nor its id, is reused)
        for t in range(1, 7):
            floor.send()
            infos = floor.collect()
            assert len(infos) == 4 and not {id(info) for info in infos} & {id(info) for old in kept for info in old}
            kept.append(infos)
            for j, info in enumerate(infos):
                if t % lengths[j]:
                    assert info == {"TimeLimit.truncated": False}
                else:
                    assert info["TimeLimit.truncated"] is True
                    terminal = info["terminal_observation"]
                    assert terminal.tolist() == floor.terminal[j].tolist()
                    assert not np.shares_memory(terminal, floor.terminal)
    finally:
        floor.close()
    assert not any(process.is_alive() for process in floor.processes)


def test_caller_floor_report_is_the_median_of_its_rounds(capsys: pytest.CaptureFixture[str]) -> None:
    """One row per contender; send and collect are medians over rounds, and ``x floor`` the median of the per-round
    ratios of send + collect to the floor's."""
    module = _load()
    result = module.main(["-n", "8", "-w", "2", "--rounds", "3", "--steps", "4", "--env-us", "5", "--sleep-ms", "2"])
    printed = capsys.readouterr().out
    assert result["text"] in printed
    lines = [line for line in printed.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    assert header == module.COLUMNS
    rows = {cells[0]: cells for cells in ([c.strip() for c in line.strip("|").split("|")] for line in lines[2:])}
    assert list(rows) == ["floor", "vecenv"]
    floor = np.array(result["rounds"]["floor"])
    for name, cells in rows.items():
        halves = np.array(result["rounds"][name])
        assert halves.shape == (3, 2) and (halves > 0).all()
        send, collect = np.median(halves, axis=0) * 1e6
        assert (float(cells[1]), float(cells[2])) == pytest.approx((send, collect), abs=0.5)
        per_env = float(np.median(halves.sum(axis=1))) * 1e6 / 8
        assert float(cells[3]) == pytest.approx(per_env, abs=5e-4)
        ratios = halves.sum(axis=1) / floor.sum(axis=1)
        assert float(cells[4]) == pytest.approx(float(np.median(ratios)), abs=5e-3)
    assert rows["floor"][4] == "1.00" and rows["floor"][5] == "1.00..1.00"
