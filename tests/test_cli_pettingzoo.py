"""``vecenv run`` with a PettingZoo env module (``vecenv run mpe2.simple_spread_v3 -n 4``): N env copies, one row
per agent. Summaries are checked against the PettingZoo envs stepped by hand: env ``i`` reset with ``seed + i``,
row ``k`` = env ``k // A``, agent ``k % A``, actions from ``batch_space(agent action space, rows)`` seeded with
``seed``, rewards as float32."""

from __future__ import annotations

import math
import re
import subprocess
import sys
from typing import Any

import numpy as np
import pytest
from gymnasium.vector.utils import batch_space

from tests.test_cli import SUMMARY_KEYS, TIMEOUT, _assert_one_line_error, _episode_stats, _run_main, _vecenv_exe
from vecenv import cli, cli_run

simple_spread_v3 = pytest.importorskip("mpe2.simple_spread_v3")

SPREAD = "mpe2.simple_spread_v3"
EXPECTED = "a registered Gymnasium env id or a PettingZoo env module with a parallel_env function"
#: vecenv run's summary keys, with the lines of a PettingZoo env: its episodes are counted per env and per agent
KEYS = [
    *SUMMARY_KEYS[:3],
    "agents",
    "rows",
    *SUMMARY_KEYS[3:6],
    "agent_steps_per_s",
    "env_episodes",
    "agent_episodes",
    *SUMMARY_KEYS[7:],
]


def _summary(stdout: str) -> dict[str, str]:
    """The ``key: value`` lines, keys in :data:`KEYS` order (option lines after them)."""
    summary = dict(line.split(":", 1) for line in stdout.splitlines() if line and not line[0].isspace())
    summary = {key: value.strip() for key, value in summary.items()}
    assert list(summary)[: len(KEYS)] == KEYS, list(summary)
    return summary


def _reference(env_fn: Any, n: int, steps: int, seed: int, **env_kwargs: Any) -> dict[str, str]:
    """Episode statistics of the rows, from ``n`` envs stepped by hand, with the episodes of the envs
    (``env_episodes``) and of the agents (``agent_episodes``). A row's episode is its agent's steps in
    ``env.agents``: it ends when the agent leaves (or the env's episode ends while it is in)."""
    envs = [env_fn(**env_kwargs) for _ in range(n)]
    agents = envs[0].possible_agents
    actions = batch_space(envs[0].action_space(agents[0]), n * len(agents))
    actions.seed(seed)
    for i, env in enumerate(envs):
        env.reset(seed=seed + i)
    running: dict[tuple[int, str], list[float]] = {}
    returns: list[float] = []
    lengths: list[int] = []
    env_episodes = 0
    for _ in range(math.ceil(steps / n)):
        batch = actions.sample()
        for i, env in enumerate(envs):
            acting = list(env.agents)
            _, rewards, terminations, truncations, _ = env.step(
                {agent: batch[i * len(agents) + agents.index(agent)] for agent in acting}
            )
            for agent in acting:
                episode = running.setdefault((i, agent), [0.0, 0])
                episode[0] += float(np.float32(rewards[agent]))
                episode[1] += 1
                if terminations[agent] or truncations[agent] or not env.agents:
                    returns.append(episode[0])
                    lengths.append(int(episode[1]))
                    del running[(i, agent)]
            if not env.agents:
                env_episodes += 1
                env.reset()
    stats = _episode_stats(returns, lengths)
    return {"env_episodes": str(env_episodes), "agent_episodes": stats.pop("episodes"), **stats}


def _stats(summary: dict[str, str]) -> dict[str, str]:
    return {key: summary[key] for key in KEYS[9:]}


def test_run_simple_spread_rows_match_the_envs_stepped_by_hand(capsys: pytest.CaptureFixture[str]) -> None:
    """-n counts env copies; the summary names the agents and the rows; the statistics are the rows'."""
    code, out, err = _run_main(capsys, "run", SPREAD, "-n", "2", "-s", "100", "--seed", "3", "-b", "dummy")
    assert code == 0, err
    summary = _summary(out)
    assert summary["env_id"] == SPREAD and summary["backend"] == "dummy" and summary["num_envs"] == "2"
    assert summary["agents"] == "3 (agent_0, agent_1, agent_2)"
    assert summary["rows"] == "6 (2 envs x 3 agents)"
    assert summary["env_steps"] == "100"
    assert float(summary["agent_steps_per_s"]) == pytest.approx(3 * float(summary["steps_per_s"]), rel=0.01, abs=3)
    reference = _reference(simple_spread_v3.parallel_env, 2, 100, 3)
    # 50 steps: 2 episodes of 25 steps per env, 3 agents each
    assert (reference["env_episodes"], reference["agent_episodes"]) == ("4", "12")
    assert _stats(summary) == reference


def test_run_agents_that_leave_early_and_join_late(capsys: pytest.CaptureFixture[str]) -> None:
    """An agent's episode is its own steps: b leaves after 2 steps, c joins for 3, a stays 4; b's row, done again
    when the env's episode ends, ends no second episode. Same statistics in worker processes."""
    module = "tests.pz_scripted_v0"
    reference = _reference(__import__(module, fromlist=["parallel_env"]).parallel_env, 3, 24, 5)
    # 8 steps: 2 episodes of 3 agents in each of 3 envs
    assert (reference["env_episodes"], reference["agent_episodes"]) == ("6", "18")
    assert (reference["episode_length_min"], reference["episode_length_max"]) == ("2", "4")
    for backend in ("dummy", "subproc"):
        code, out, err = _run_main(capsys, "run", module, "-n", "3", "-s", "24", "--seed", "5", "-b", backend)
        assert code == 0, err
        summary = _summary(out)
        assert summary["agents"] == "3 (a, b, c)" and summary["rows"] == "9 (3 envs x 3 agents)"
        assert _stats(summary) == reference


def test_console_script_subproc_and_profile() -> None:
    """The documented form: ``vecenv run mpe2.simple_spread_v3 -n 4 -b subproc``, with the step profile, whose
    env-steps and episodes are the env copies' (not the rows'), named as the summary names them: env episodes.
    A ``spin:`` line that says the workers block gives the calling process's time between steps, not a trainer."""
    result = subprocess.run(
        [_vecenv_exe(), "run", SPREAD, "-n", "4", "-b", "subproc", "-s", "200", "--n-workers", "2", "--profile"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    summary_text, _, profile = result.stdout.partition("\n\n")
    summary = _summary(summary_text)
    assert summary["backend"].startswith("subproc (") and summary["backend"].endswith(", 2 workers)")
    assert summary["rows"] == "12 (4 envs x 3 agents)" and summary["env_steps"] == "200"
    assert _stats(summary) == _reference(simple_spread_v3.parallel_env, 4, 200, 0)
    assert (summary["env_episodes"], summary["agent_episodes"]) == ("8", "24")  # 4 envs x 2, x 3 agents
    assert profile.startswith("vecenv step profile: 50 steps, 200 env-steps, 8 env episodes, ")
    spin = next((line for line in profile.splitlines() if line.startswith("spin: ")), "")
    assert "trainer" not in spin and "this process" not in spin, spin
    if "the workers now block" in spin:  # (whether the workers' spinning was paused depends on the timing)
        pattern = r"the workers now block, leaving the cores to the calling process, which (spends \d+ us|keeps)"
        assert re.search(pattern, spin), spin


def test_default_steps_keep_a_run_short(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Without --steps, a PettingZoo env module makes DEFAULT_PETTINGZOO_STEPS env-steps (rounded up to a multiple
    of N), a tenth of a Gymnasium env's 100,000, since each steps every agent; the help says both. (The run is
    shortened: the default is read when the run starts.)"""
    assert (cli.DEFAULT_STEPS, cli.DEFAULT_PETTINGZOO_STEPS) == (100_000, 10_000)
    monkeypatch.setenv("COLUMNS", "400")  # (no line break inside the help of --steps)
    with pytest.raises(SystemExit):
        _run_main(capsys, "run", "--help")
    help_text = " ".join(capsys.readouterr().out.split())
    assert "(default: 100000, or 10000 for a PettingZoo env module, whose env-step steps all its agents)" in help_text
    monkeypatch.setattr(cli_run, "DEFAULT_PETTINGZOO_STEPS", 20)
    code, out, err = _run_main(capsys, "run", "tests.pz_scripted_v0", "-n", "3", "-b", "dummy")
    assert code == 0, err
    assert _summary(out)["env_steps"] == "21"  # 7 steps of 3 envs


def test_normalize_and_check_nan_take_rows(capsys: pytest.CaptureFixture[str]) -> None:
    """--normalize and --check-nan wrap the rows; the statistics stay the env's own rewards."""
    args = ["run", SPREAD, "-n", "2", "-s", "60", "-b", "dummy", "--normalize", "--check-nan"]
    code, out, err = _run_main(capsys, *args)
    assert code == 0, err
    summary = _summary(out)
    assert summary["normalize"] == "on" and summary["check_nan"] == "on, no NaN or infinity found"
    assert _stats(summary) == _reference(simple_spread_v3.parallel_env, 2, 60, 0)


# --- errors: one line, exit status 2 -------------------------------------------------------------------------


def _error(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    return _assert_one_line_error(*_run_main(capsys, "run", *args))


def test_module_not_found_names_close_modules(capsys: pytest.CaptureFixture[str]) -> None:
    line = _error(capsys, "mpe2.simple_spred_v3", "-n", "2")
    assert line == (
        f"vecenv run: error: argument ENV_ID: expected {EXPECTED} (e.g. mpe2.simple_spread_v3), got "
        "'mpe2.simple_spred_v3': no module named 'mpe2.simple_spred_v3'; did you mean: mpe2.simple_spread_v3, "
        "mpe2.simple_push_v3, mpe2.simple_v3?"
    )
    line = _error(capsys, "nosuchpackage.env_v0", "-n", "2")
    assert line.endswith("got 'nosuchpackage.env_v0': no module named 'nosuchpackage'")


def test_module_without_parallel_env(capsys: pytest.CaptureFixture[str]) -> None:
    line = _error(capsys, "json.decoder")
    assert line == (
        f"vecenv run: error: argument ENV_ID: expected {EXPECTED} (e.g. mpe2.simple_spread_v3), got 'json.decoder', "
        "a module without a parallel_env function"
    )


def test_registered_gymnasium_ids_keep_their_meaning(capsys: pytest.CaptureFixture[str]) -> None:
    """An id without a dot stays a Gymnasium id (its own errors), whatever modules exist."""
    line = _error(capsys, "json-v0")
    assert "unknown env id 'json-v0'" in line


def test_pettingzoo_not_installed(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "pettingzoo" else find_spec(name, *a)
    )
    line = _error(capsys, SPREAD)
    assert line == (
        "vecenv run: error: argument ENV_ID: 'mpe2.simple_spread_v3' names a PettingZoo env module, which needs "
        'pettingzoo, not installed. Install the "pettingzoo" extra: pip install pettingzoo (or pip install -e '
        '".[pettingzoo]" in a clone of vecenv)'
    )


@pytest.mark.parametrize(
    ("source", "problem"),
    [
        (
            "import no_such_dependency_xyz\n",
            "the PettingZoo env module 'pzcli.env_v0' needs no_such_dependency_xyz, which is not installed",
        ),
        (
            "raise RuntimeError('no display')\n",
            "cannot import the PettingZoo env module 'pzcli.env_v0': RuntimeError: no display",
        ),
    ],
)
def test_module_that_cannot_be_imported(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Any, source: str, problem: str
) -> None:
    package = tmp_path / "pzcli"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "env_v0.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "pzcli", raising=False)
    assert _error(capsys, "pzcli.env_v0") == f"vecenv run: error: argument ENV_ID: {problem}"


def test_env_kwargs_the_env_refuses(capsys: pytest.CaptureFixture[str]) -> None:
    line = _error(capsys, SPREAD, "-n", "2", "-b", "dummy", "--env-kwargs", '{"foo": 1}')
    assert line.startswith(f'vecenv run: error: cannot create {SPREAD} with --env-kwargs {{"foo": 1}}: ')
    assert "'foo'" in line


@pytest.mark.parametrize(
    ("option", "why"),
    [
        ("--monitor", "whose envs each write a Monitor file"),
        ("--video", "whose first env's frames VecVideoRecorder records"),
    ],
)
def test_options_that_need_a_gymnasium_env(
    capsys: pytest.CaptureFixture[str], tmp_path: Any, option: str, why: str
) -> None:
    line = _error(capsys, SPREAD, option, str(tmp_path / "out"))
    assert line == (
        f"vecenv run: error: argument {option}: needs a Gymnasium env id, {why}; got the PettingZoo env module "
        f"'{SPREAD}'"
    )
    assert not (tmp_path / "out").exists()


def test_compare_needs_a_gymnasium_env(capsys: pytest.CaptureFixture[str]) -> None:
    assert _error(capsys, SPREAD, "--compare") == (
        "vecenv run: error: argument --compare: needs a Gymnasium env id, whose envs the comparison makes with "
        f"gymnasium.make; got the PettingZoo env module '{SPREAD}'"
    )
