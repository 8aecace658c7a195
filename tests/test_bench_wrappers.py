"""benchmarks/wrappers.py: the replay stub hands out the recorded steps in turn, as fresh objects, and a tiny run
(vecenv's and SB3's wrappers over the same recorded steps) reports every case with numbers that parse back."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from tests.bench_scripts import load_bench_script


def _load() -> Any:
    return load_bench_script("wrappers_under_test", "wrappers.py")


def test_the_replay_stub_returns_the_recorded_steps_in_turn_as_fresh_objects():
    """vecenv's stub over steps recorded from 3 ``frame`` envs: step k returns recorded step k (then from the start
    again), equal in value; arrays and info dicts are new objects, so a wrapper that changes them changes no later
    step; the recorded episode ends (100 steps) are in the replay."""
    import vecenv

    wrappers = _load()
    first, actions, recorded = wrappers.record_steps(wrappers.FrameEnv, 3, 120)
    stub = wrappers.replay_class(vecenv)(wrappers.FrameEnv, first, recorded)
    assert stub.num_envs == 3 and stub.observation_space == wrappers.FrameEnv.observation_space
    obs = stub.reset()
    assert np.array_equal(obs, first) and obs is not first
    returned = [stub.step(actions[k % len(actions)]) for k in range(125)]
    for k, (obs, rewards, dones, infos) in enumerate(returned):
        want = recorded[k % 120]
        assert np.array_equal(obs, want[0]) and obs is not want[0]
        assert np.array_equal(rewards, want[1]) and np.array_equal(dones, want[2])
        assert infos == want[3] and all(a is not b for a, b in zip(infos, want[3], strict=True))
    assert returned[99][2].all() and "terminal_observation" in returned[99][3][0]
    returned[0][3][0]["changed"] = True
    returned[0][0][...] = 7
    assert "changed" not in recorded[0][3][0] and "changed" not in returned[120][3][0]
    assert np.array_equal(returned[120][0], recorded[0][0]) and not (recorded[0][0] == 7).all()


@pytest.mark.sb3
def test_a_tiny_run_reports_every_case_with_numbers(tmp_path):
    pytest.importorskip("stable_baselines3")
    wrappers = _load()
    cases = ["VecMonitor", "VecFrameStack-frame", "VecExtractDictObs"]
    argv = ["--cases", ",".join(cases), "-n", "2", "--rounds", "2", "--steps", "20", "--record", "110"]
    argv += ["--output", str(tmp_path / "w.md"), "--json", str(tmp_path / "w.json")]
    result = wrappers.main(argv)
    lines = [line for line in (tmp_path / "w.md").read_text(encoding="utf-8").splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    assert header == wrappers.COLUMNS
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[2:]]
    assert [row[0] for row in rows] == cases
    assert [row[1] for row in rows] == ["vector", "frame", "dict"]
    for row in rows:
        float(row[2]), float(row[3]), float(row[4])
        low, high = (float(x) for x in row[5].split(".."))
        assert low <= float(row[4]) <= high
    parsed = json.loads((tmp_path / "w.json").read_text(encoding="utf-8"))
    assert [record["case"] for record in parsed["records"]] == cases
    for record in parsed["records"]:
        assert len(record["ratios"]) == 2
        for library in ("vecenv", "sb3"):
            assert len(record["added_us"][library]) == len(record["bare_us"][library]) == 2
    assert result["text"].startswith("# vecenv's wrappers against SB3's")
