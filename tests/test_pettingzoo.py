"""vecenv.pettingzoo: PettingZoo ParallelEnvs vectorized with one row per agent."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("pettingzoo")

import vecenv
from tests.conftest import HAS_RAY, RAY_TEST_OPTIONS
from tests.envs_pettingzoo import (
    DroppingAgentsEnv,
    IntKeyedLockInfoEnv,
    LockInfoEnv,
    MixedSpacesEnv,
    NoZeroObsEnv,
    ScriptedAgentsEnv,
)
from vecenv.pettingzoo import AgentVecEnv, make_vec_env

BACKEND_KWARGS = {
    "dummy": (None, None),
    "subproc": (vecenv.SubprocVecEnv, {"n_workers": 2}),
    "ray": (vecenv.RayVecEnv, RAY_TEST_OPTIONS),
}
ALL = ["dummy", "subproc", pytest.param("ray", marks=pytest.mark.skipif(not HAS_RAY, reason="ray is not installed"))]


def _build(backend: str, env_fn, n_envs: int, **kwargs) -> AgentVecEnv:
    cls, vec_kwargs = BACKEND_KWARGS[backend]
    return make_vec_env(env_fn, n_envs, vec_env_cls=cls, vec_env_kwargs=vec_kwargs, **kwargs)


@pytest.fixture
def backend_name(request: pytest.FixtureRequest) -> str:
    """The backend of the test's ``backend_name`` parameter, with the session's Ray started for "ray"."""
    if request.param == "ray":
        request.getfixturevalue("ray_session")
    return request.param


# --- SuperSuit parity (agents that all live) ----------------------------------------------------------------------


def _simple_spread(**kwargs):
    from mpe2 import simple_spread_v3

    return simple_spread_v3.parallel_env(max_cycles=6, **kwargs)


@pytest.mark.parametrize(
    ("backend", "continuous"), [("dummy", False), ("subproc", False), ("dummy", True)], ids=["dummy", "subproc", "box"]
)
def test_simple_spread_matches_supersuit_step_for_step(backend, continuous):
    """Same seeds and actions: observations, rewards, dones and terminal observations equal SuperSuit's
    concat_vec_envs_v1(pettingzoo_env_to_vec_env_v1(env), 3, num_cpus=0) (base_class="gymnasium", whose dones
    the stable_baselines3 base class only ORs together), across several episode ends; Discrete and Box actions."""
    ss = pytest.importorskip("supersuit")
    kwargs = {"continuous_actions": continuous}
    reference = ss.concat_vec_envs_v1(ss.pettingzoo_env_to_vec_env_v1(_simple_spread(**kwargs)), 3, num_cpus=0)
    venv = _build(backend, _simple_spread, 3, seed=11, env_kwargs=kwargs)
    try:
        assert venv.num_envs == 9 and venv.possible_agents == ["agent_0", "agent_1", "agent_2"]
        expected_obs, _ = reference.reset(seed=11)
        obs = venv.reset()
        np.testing.assert_array_equal(obs, expected_obs)
        rng = np.random.default_rng(3)
        n_done_steps = 0
        for t in range(26):  # episodes of 6 steps: 4 episode ends, then 2 steps more
            actions = rng.random((9, 5), dtype=np.float32) if continuous else rng.integers(0, 5, size=9)
            obs, rewards, dones, infos = venv.step(actions)
            expected_obs, expected_rewards, terminated, truncated, expected_infos = reference.step(actions)
            np.testing.assert_array_equal(obs, expected_obs, err_msg=f"step {t}")
            np.testing.assert_array_equal(rewards, expected_rewards, err_msg=f"step {t}")
            assert rewards.dtype == np.float32 and dones.dtype == np.bool_
            np.testing.assert_array_equal(dones, terminated | truncated, err_msg=f"step {t}")
            for k in np.flatnonzero(dones):
                np.testing.assert_array_equal(
                    infos[k]["terminal_observation"], expected_infos[k]["terminal_observation"]
                )
                assert infos[k]["TimeLimit.truncated"] is True
            n_done_steps += int(dones.all())
            for k, info in enumerate(infos):
                assert (info["env_index"], info["agent_id"], info["active"]) == (k // 3, f"agent_{k % 3}", True)
        assert n_done_steps == 4
    finally:
        venv.close()
        reference.close()


# --- agents that leave early and join late ------------------------------------------------------------------------


def _offset(seed: int) -> int:
    env = ScriptedAgentsEnv()
    env.reset(seed=seed)
    return env.offset


@pytest.mark.parametrize("backend_name", ALL, indirect=True)
def test_agents_that_leave_and_join_give_the_rows_written_out_by_hand(backend_name):
    """Two envs of ScriptedAgentsEnv (a, b live; c joins after step 1; b terminates at step 2; a, c truncate at
    step 4): every row's observation, reward, done, active flag and terminal observation, written out by hand."""
    venv = _build(backend_name, ScriptedAgentsEnv, 2, seed=5)
    try:
        off = [_offset(5), _offset(6)]
        zero = [0.0, 0.0]
        obs = venv.reset()
        expected = [[[0, off[e]], [1, off[e]], zero] for e in range(2)]
        np.testing.assert_array_equal(obs, np.array(expected, dtype=np.float32).reshape(6, 2))
        assert [info["active"] for info in venv.reset_infos] == [True, True, False] * 2
        assert venv.reset_infos[1] == {"reset": True, "env_index": 0, "agent_id": "b", "active": True}
        actions = np.array([1, 2, 3, 4, 0, 2])  # row k of env e: agent "abc"[k % 3]
        # what each step must give for env e: (obs rows, dones, active, terminal obs of done rows); an active row's
        # reward is 10 * j + its action, an inactive row's 0
        script = {
            1: lambda o: ([[0, o + 1], [1, o + 1], [2, o + 1]], [0, 0, 0], [1, 1, 0], {}),
            2: lambda o: ([[0, o + 2], zero, [2, o + 2]], [0, 1, 0], [1, 1, 1], {1: [1, o + 2]}),
            3: lambda o: ([[0, o + 3], zero, [2, o + 3]], [0, 0, 0], [1, 0, 1], {}),
        }
        for t in (1, 2, 3):
            obs, rewards, dones, infos = venv.step(actions)
            for e in range(2):
                rows = slice(3 * e, 3 * e + 3)
                want_obs, want_done, want_active, terminal = script[t](off[e])
                env_actions = actions[rows]
                want_rew = [10 * j + env_actions[j] if want_active[j] else 0 for j in range(3)]
                np.testing.assert_array_equal(obs[rows], np.array(want_obs, dtype=np.float32), err_msg=f"t={t}")
                np.testing.assert_array_equal(rewards[rows], np.array(want_rew, dtype=np.float32), err_msg=f"t={t}")
                np.testing.assert_array_equal(dones[rows], np.array(want_done, dtype=bool), err_msg=f"t={t}")
                assert [infos[k]["active"] for k in range(3 * e, 3 * e + 3)] == [bool(a) for a in want_active]
                for j in range(3):
                    k = 3 * e + j
                    if j in terminal:
                        np.testing.assert_array_equal(infos[k]["terminal_observation"], terminal[j])
                        assert infos[k]["TimeLimit.truncated"] is False  # b terminated
                    else:
                        assert "terminal_observation" not in infos[k]
                    if want_active[j]:
                        assert infos[k]["t"] == t and infos[k]["action"] == env_actions[j]
                    else:
                        assert "t" not in infos[k]
        # step 4: a and c truncate, the episode ends: every row done, b again (inactive, zero terminal obs)
        obs, rewards, dones, infos = venv.step(actions)
        assert dones.dtype == np.bool_ and dones.all()
        for e in range(2):
            k = 3 * e
            np.testing.assert_array_equal(infos[k]["terminal_observation"], [0, off[e] + 4])
            np.testing.assert_array_equal(infos[k + 1]["terminal_observation"], zero)
            np.testing.assert_array_equal(infos[k + 2]["terminal_observation"], [2, off[e] + 4])
            assert [infos[k + j]["active"] for j in range(3)] == [True, False, True]
            assert [infos[k + j]["TimeLimit.truncated"] for j in range(3)] == [True, False, True]
            np.testing.assert_array_equal(rewards[k : k + 3], [actions[k], 0, 20 + actions[k + 2]])
        # the envs reset (unseeded: their RNG goes on), c is absent again
        new_off = [int(row[1]) for row in obs[[0, 3]]]
        np.testing.assert_array_equal(obs[[2, 5]], [zero, zero])
        np.testing.assert_array_equal(obs[[1, 4]], [[1, new_off[0]], [1, new_off[1]]])
        assert [venv.reset_infos[k]["agent_id"] for k in range(6)] == ["a", "b", "c"] * 2
        assert venv.env_method("__getattribute__", "resets", indices=[0, 3]) == [[5, None], [6, None]]
    finally:
        venv.close()


def test_an_agent_dropped_without_a_flag_ends_truncated_with_its_last_observation():
    """AgentStackEnv: ``b`` leaves ``env.agents`` at step 2 without a flag: it is truncated that step, its row then
    shows zeros, and its last observation is in ``agent_terminal_observations``; the episode goes on. Written out
    by hand from DroppingAgentsEnv's script (``c`` joins after step 1)."""
    from vecenv.pettingzoo import AgentStackEnv

    env = AgentStackEnv(DroppingAgentsEnv())
    first, _ = env.reset(seed=5)
    offset = float(first["obs"][0, 1])
    actions = np.array([1, 2, 3])
    flags = ("acted", "alive", "terminated", "truncated")
    obs, reward, terminated, truncated, info = env.step(actions)
    assert [obs[key].tolist() for key in flags] == [[1, 1, 0], [1, 1, 1], [0] * 3, [0] * 3]
    assert "agent_terminal_observations" not in info and not terminated and not truncated
    obs, reward, terminated, truncated, info = env.step(actions)
    assert [obs[key].tolist() for key in flags] == [[1, 1, 1], [1, 0, 1], [0] * 3, [0, 1, 0]]
    assert all(obs[key].dtype == np.int8 for key in flags)
    np.testing.assert_array_equal(obs["obs"], np.array([[0, offset + 2], [0, 0], [2, offset + 2]], np.float32))
    np.testing.assert_array_equal(info["agent_terminal_observations"][1], np.array([1, offset + 2], np.float32))
    np.testing.assert_array_equal(obs["reward"], np.array([1, 12, 23], np.float32))
    assert reward == 36.0 and not terminated and not truncated
    env.close()


def test_each_rows_info_is_its_own_dict_at_every_step():
    """Rows' infos are built from shared prebuilt dicts: a caller that changes one row's info changes no other
    row's, and no later step's. Expected infos written out by hand (simple_spread's agents have empty infos)."""
    venv = make_vec_env(_simple_spread, 2, seed=0)
    try:
        venv.reset()
        actions = np.zeros(venv.num_envs, dtype=np.int64)
        _, _, _, first = venv.step(actions)
        assert len({id(info) for info in first}) == venv.num_envs
        for info in first:
            info["active"] = "changed by the caller"
            info["mine"] = 1
        _, _, _, second = venv.step(actions)
        agents = venv.possible_agents
        assert second == [
            {"env_index": row // 3, "agent_id": agents[row % 3], "active": True, "TimeLimit.truncated": False}
            for row in range(venv.num_envs)
        ]
        assert all(info["mine"] == 1 for info in first)
    finally:
        venv.close()


def test_episode_ends_reach_the_rows_through_shared_memory(monkeypatch):
    """AgentStackEnv's observations come in its observation space's key order, so that SubprocVecEnv's workers write
    the last observation of an episode into shared memory: the step where every env's episode ends carries no
    pickled info (simple_spread's agents have empty infos), and each row's ``terminal_observation`` is the
    observation the row had before that step's reset, the same as DummyVecEnv's."""
    from vecenv.pettingzoo import AgentStackEnv

    env = AgentStackEnv(_simple_spread())
    expected_keys = list(env.observation_space.spaces)
    assert list(env.reset(seed=0)[0]) == expected_keys
    assert list(env.step(np.zeros((3,), dtype=np.int64))[0]) == expected_keys
    env.close()
    venvs = [make_vec_env(_simple_spread, 2, seed=0, vec_env_cls=cls) for cls in (vecenv.SubprocVecEnv, None)]
    try:
        for venv in venvs:
            venv.reset()
        decoded = []
        for worker in venvs[0].venv._workers:
            decode = worker._reply
            monkeypatch.setattr(worker, "_reply", lambda data, decode=decode: decoded.append(1) or decode(data))
        actions = np.arange(venvs[0].num_envs) % 5
        for step in range(6):  # max_cycles=6: every env's episode ends at the 6th step
            (obs, _, dones, infos), (dummy_obs, _, dummy_dones, dummy_infos) = (venv.step(actions) for venv in venvs)
            np.testing.assert_array_equal(obs, dummy_obs)
            np.testing.assert_array_equal(dones, dummy_dones)
            assert dones.all() == (step == 5)
        for info, dummy_info in zip(infos, dummy_infos, strict=True):
            final = info["terminal_observation"]
            assert final.dtype == np.float32 and final.shape == (18,)
            np.testing.assert_array_equal(final, dummy_info["terminal_observation"])
        assert not decoded
    finally:
        for venv in venvs:
            venv.close()


def test_actions_of_absent_agents_are_ignored():
    """ScriptedAgentsEnv raises if it receives an action for an agent not in ``agents``: row c's action (any valid
    value) at step 1 and row b's after it left never reach the env."""
    venv = make_vec_env(ScriptedAgentsEnv, 1, seed=0)
    try:
        venv.reset()
        for _ in range(9):
            venv.step(np.array([4, 4, 4]))
    finally:
        venv.close()


# --- seeds, attributes, errors ------------------------------------------------------------------------------------


def test_env_i_first_reset_uses_seed_plus_i_and_later_resets_are_unseeded():
    venv = make_vec_env(ScriptedAgentsEnv, 3, seed=40, start_index=7)
    try:
        venv.reset()
        assert venv.get_attr("resets", [0, 3, 6]) == [[40], [41], [42]]
        assert venv.get_attr("offset", [1, 4, 8]) == [_offset(40), _offset(41), _offset(42)]
        assert list(venv.seed(3)) == [3, 3, 3, 4, 4, 4, 5, 5, 5]
        venv.reset()
        assert venv.get_attr("resets", [0, 8]) == [[40, 3], [42, 5]]
    finally:
        venv.close()


def test_attribute_calls_take_rows_and_act_once_per_env():
    venv = make_vec_env(ScriptedAgentsEnv, 2)
    try:
        venv.reset()
        assert venv.get_attr("custom") == ["custom"] * 6
        venv.set_attr("custom", "changed", indices=[3, 4])
        assert venv.get_attr("custom") == ["custom"] * 3 + ["changed"] * 3
        assert venv.env_method("reset", seed=1, indices=[4, 5]) is not None
        [resets] = venv.get_attr("resets", [-1])
        assert len(resets) == 2 and resets[1] == 1  # one reset for the two rows of env 1
        states = venv.env_method("state", indices=[0, 5])
        assert len(states) == 2 and states[1][1] == _offset(1)
        assert venv.env_is_wrapped(vecenv.Monitor) == [False] * 6
        assert venv.row_env_indices.dtype == np.int64
        np.testing.assert_array_equal(venv.row_env_indices, [0, 0, 0, 1, 1, 1])
        assert venv.row_agents == ["a", "b", "c"] * 2 and venv.num_agents == 3 and venv.n_envs == 2
    finally:
        venv.close()


def test_options_reach_the_parallel_env_reset():
    venv = make_vec_env(ScriptedAgentsEnv, 2, seed=0)
    try:
        venv.set_options({"shift": 10_000})
        obs = venv.reset()
        assert obs[0, 1] == _offset(0) + 10_000 and obs[3, 1] == _offset(1) + 10_000
    finally:
        venv.close()


def test_agents_with_different_spaces_are_refused_naming_them():
    with pytest.raises(ValueError, match=r"same observation space.*'c': Box\(-inf, inf, \(3,\), float32\)"):
        make_vec_env(MixedSpacesEnv)


def test_an_aec_env_is_refused_naming_aec_to_parallel():
    from mpe2 import simple_spread_v3

    with pytest.raises(TypeError, match=r"pettingzoo\.utils\.conversions\.aec_to_parallel"):
        make_vec_env(simple_spread_v3.env)


def test_an_observation_space_without_zero_is_refused():
    with pytest.raises(ValueError, match=r"must contain zero; got Discrete\(3, start=1\)"):
        make_vec_env(NoZeroObsEnv)


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match=r"make_vec_env\(n_envs\): expected a positive integer, got 0"):
        make_vec_env(ScriptedAgentsEnv, 0)
    with pytest.raises(TypeError, match=r"make_vec_env\(env_fn\): expected a callable"):
        make_vec_env(ScriptedAgentsEnv(), 1)
    with pytest.raises(ValueError, match=r"venv must autoreset in the same step \(AutoresetMode.SAME_STEP\), got"):
        make_vec_env(ScriptedAgentsEnv, 1, vec_env_kwargs={"autoreset_mode": "NextStep"})
    venv = make_vec_env(ScriptedAgentsEnv, 2)
    try:
        venv.reset()
        with pytest.raises(ValueError, match=r"must have shape \(6,\)"):
            venv.step(np.zeros(4, dtype=np.int64))
        with pytest.raises(ValueError, match=r"seed\(\[\.\.\.\]\) must give one seed \(or None\) per env: expected 2"):
            venv.seed([1, 2, 3])
    finally:
        venv.close()


# --- imports ------------------------------------------------------------------------------------------------------


def test_import_vecenv_does_not_import_pettingzoo():
    code = (
        "import sys, vecenv; sys.exit(any(m.split('.')[0] in ('pettingzoo', 'supersuit', 'mpe2') for m in sys.modules))"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


# --- wrappers on top ------------------------------------------------------------------------------------------------


def test_vec_monitor_counts_the_steps_each_agent_acted_and_no_episode_for_absent_agents():
    """Episode of 4 steps (actions 1, 2, 3 for rows a, b, c): a acts 4 times (return 4 * 1), b twice before it
    terminates (2 * 12), c three times after joining (3 * 23); b's second done (inactive) records nothing."""
    venv = vecenv.VecMonitor(make_vec_env(ScriptedAgentsEnv, 2, seed=0))
    try:
        venv.reset()
        episodes: list[tuple[int, str, float, int]] = []
        for t in range(1, 9):
            _, _, dones, infos = venv.step(np.array([1, 2, 3] * 2))
            for k in np.flatnonzero(dones):
                if "episode" in infos[k]:
                    episode = infos[k]["episode"]
                    episodes.append((t, infos[k]["agent_id"], float(episode["r"]), int(episode["l"])))
                else:
                    assert infos[k]["active"] is False and infos[k]["agent_id"] == "b" and t % 4 == 0
        per_env = [(2, "b", 24.0, 2), (4, "a", 4.0, 4), (4, "c", 69.0, 3)]
        expected = [(t + shift, agent, r, n) for shift in (0, 4) for t, agent, r, n in per_env for _ in range(2)]
        assert sorted(episodes) == sorted(expected)
        assert venv.episode_count == 12
    finally:
        venv.close()


def test_vec_normalize_on_top_normalizes_rows_as_computed_by_hand():
    """VecNormalize over the rows: observations (terminal ones too) and rewards equal a RunningMeanStd fed by hand
    with the raw rows of an identical AgentVecEnv."""
    gamma, eps, clip = 0.9, 1e-8, 10.0
    raw = make_vec_env(ScriptedAgentsEnv, 2, seed=1)
    normalized = vecenv.VecNormalize(make_vec_env(ScriptedAgentsEnv, 2, seed=1), gamma=gamma)
    obs_rms, ret_rms = vecenv.RunningMeanStd(shape=(2,)), vecenv.RunningMeanStd(shape=())
    returns = np.zeros(6)

    def norm(obs):
        return np.clip((obs - obs_rms.mean) / np.sqrt(obs_rms.var + eps), -clip, clip)

    try:
        raw_obs = raw.reset()
        obs_rms.update(raw_obs)
        np.testing.assert_allclose(normalized.reset(), norm(raw_obs), rtol=1e-5)
        rng = np.random.default_rng(0)
        for t in range(10):
            actions = rng.integers(0, 5, size=6)
            raw_obs, raw_rewards, raw_dones, raw_infos = raw.step(actions)
            obs, rewards, dones, infos = normalized.step(actions)
            obs_rms.update(raw_obs)
            returns = returns * gamma + raw_rewards
            ret_rms.update(returns)
            np.testing.assert_allclose(obs, norm(raw_obs), rtol=1e-5, err_msg=f"step {t}")
            want_rewards = np.clip(raw_rewards / np.sqrt(ret_rms.var + eps), -clip, clip)
            np.testing.assert_allclose(rewards, want_rewards, rtol=1e-5, err_msg=f"step {t}")
            np.testing.assert_array_equal(dones, raw_dones)
            for k in np.flatnonzero(dones):
                want = norm(raw_infos[k]["terminal_observation"])
                np.testing.assert_allclose(infos[k]["terminal_observation"], want, rtol=1e-5)
                assert infos[k]["active"] == raw_infos[k]["active"]
            returns[dones] = 0
    finally:
        raw.close()
        normalized.close()


@pytest.mark.parametrize(
    "wrap",
    [
        lambda v: vecenv.VecFrameStack(v, 3),
        lambda v: vecenv.VecCheckNan(v, raise_exception=True),
        lambda v: vecenv.VecMonitor(vecenv.VecNormalize(v)),
    ],
    ids=["frame_stack", "check_nan", "monitor_normalize"],
)
def test_other_wrappers_run_over_the_rows(wrap):
    venv = wrap(make_vec_env(ScriptedAgentsEnv, 2, seed=0))
    try:
        obs = venv.reset()
        assert obs.shape[0] == 6
        for _ in range(9):
            obs, _, dones, infos = venv.step(np.ones(6, dtype=np.int64))
            assert all(infos[k]["terminal_observation"].shape == obs.shape[1:] for k in np.flatnonzero(dones))
        assert venv.unwrapped.num_agents == 3
    finally:
        venv.close()


# --- a real env whose agents die: Knights Archers Zombies -----------------------------------------------------------

KAZ_KWARGS = {"spawn_delay": 2, "max_zombies": 4, "max_cycles": 300, "line_death": True, "num_archers": 1}


def _kaz(**kwargs):
    from pettingzoo.butterfly import knights_archers_zombies_v11

    return knights_archers_zombies_v11.parallel_env(**kwargs)


@pytest.mark.filterwarnings("ignore:The old environment creation API has been deprecated:DeprecationWarning")
def test_knights_archers_zombies_rows_match_the_envs_stepped_by_hand():
    """Two KAZ envs (vector observations; agents die when they touch a wall or a zombie) in lockstep with two
    envs stepped by hand, same seeds (seed + i) and actions: every row, done, active flag and terminal observation
    follows the rules, through agents' deaths and episode ends."""
    pytest.importorskip("pymunk")
    n_envs, seed = 2, 3
    venv = make_vec_env(_kaz, n_envs, seed=seed, env_kwargs=KAZ_KWARGS)
    by_hand = [_kaz(**KAZ_KWARGS) for _ in range(n_envs)]
    agents = venv.possible_agents
    agent_count = len(agents)
    zero = np.zeros(venv.observation_space.shape)

    def rows_of(env, observations):
        return [observations[a] if a in env.agents else zero for a in agents]

    try:
        expected = [rows_of(env, env.reset(seed=seed + i)[0]) for i, env in enumerate(by_hand)]
        np.testing.assert_array_equal(venv.reset(), np.concatenate(expected))
        rng = np.random.default_rng(0)
        early_deaths = episode_ends = 0
        for t in range(320):
            actions = rng.integers(0, 6, size=venv.num_envs)
            obs, rewards, dones, infos = venv.step(actions)
            for i, env in enumerate(by_hand):
                acting = list(env.agents)
                step_actions = {a: actions[i * agent_count + agents.index(a)] for a in acting}
                observations, env_rewards, terminated, truncated, _ = env.step(step_actions)
                over = not env.agents
                early_deaths += sum(bool(terminated[a] or truncated[a]) for a in acting) if not over else 0
                next_rows = rows_of(env, env.reset()[0]) if over else rows_of(env, observations)
                episode_ends += over
                for j, agent in enumerate(agents):
                    k, acted = i * agent_count + j, agent in acting
                    done = over or (acted and bool(terminated[agent] or truncated[agent]))
                    where = f"step {t} env {i} {agent}"
                    np.testing.assert_array_equal(obs[k], next_rows[j], err_msg=where)
                    assert rewards[k] == (np.float32(env_rewards[agent]) if acted else 0.0), where
                    assert dones[k] == done and infos[k]["active"] == acted, where
                    if done:
                        last = observations[agent] if acted else zero
                        np.testing.assert_array_equal(infos[k]["terminal_observation"], last, err_msg=where)
                    else:
                        assert "terminal_observation" not in infos[k], where
        assert early_deaths >= 2 and episode_ends >= 2, (early_deaths, episode_ends)
    finally:
        venv.close()
        for env in by_hand:
            env.close()


# --- worker restarts ------------------------------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_a_killed_worker_is_restarted_and_its_rows_report_the_restart():
    """SubprocVecEnv(n_workers=2, max_restarts=1): worker 1 (env 1, rows 3..5) is killed; its rows come back
    done in a fresh episode (agents a, b at t 0; c absent), with vecenv.restarted and no terminal observation;
    env 0's rows step on."""
    venv = make_vec_env(
        ScriptedAgentsEnv,
        2,
        seed=0,
        vec_env_cls=vecenv.SubprocVecEnv,
        vec_env_kwargs={"n_workers": 2, "max_restarts": 1},
    )
    try:
        venv.reset()
        venv.step(np.ones(6, dtype=np.int64))
        os.kill(venv.venv.processes[1].pid, signal.SIGKILL)
        with pytest.warns(RuntimeWarning, match=r"restarting the worker of envs \[1\]"):
            obs, rewards, dones, infos = venv.step(np.ones(6, dtype=np.int64))
        assert dones.tolist() == [False, True, False, True, True, True]  # (b leaves env 0 at step 2)
        assert rewards[3:].tolist() == [0.0, 0.0, 0.0]
        assert obs[0].tolist() == [0, _offset(0) + 2]
        fresh = obs[3, 1]  # the restarted env's offset (t = 0)
        assert obs[3:].tolist() == [[0, fresh], [1, fresh], [0, 0]]
        for info in infos[3:]:
            assert info["vecenv.restarted"] is True and info["TimeLimit.truncated"] is True
            assert info["active"] is False and "terminal_observation" not in info
        assert [info["active"] for info in venv.reset_infos[3:]] == [True, True, False]
        obs, _, dones, _ = venv.step(np.ones(6, dtype=np.int64))
        assert not dones.any() and obs[3:].tolist() == [[0, fresh + 1], [1, fresh + 1], [2, fresh + 1]]
    finally:
        venv.close()


# --- infos that cannot be copied --------------------------------------------------------------------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize("backend_name", ALL, indirect=True)
def test_an_uncopyable_value_in_one_agents_info_is_left_out_of_that_agents_row_only(backend_name):
    """Two envs of LockInfoEnv: at step 3 (the episode's last) agent a1's info holds a lock. The step raises
    UncopyableInfoError naming the rows of a1 (1 and 3), the key and the type; the next step returns step 3 (its
    actions ignored) with a1's other info keys kept and the lock named in a1's rows only; a0's rows are as usual;
    the envs were stepped exactly once per step."""
    venv = _build(backend_name, LockInfoEnv, 2)
    try:
        venv.reset()
        actions = np.array([1, 0, 0, 1])  # rows: env 0's a0, a1, env 1's a0, a1
        for t in (1, 2):
            obs, _, dones, infos = venv.step(actions)
            assert not dones.any() and [info["t"] for info in infos] == [t] * 4
            assert all("vecenv.uncopyable_info" not in info for info in infos)
        # (with one worker per env, either worker's error may be the one raised, naming the other's in a note)
        lock = r"env [01]: info\[1\]\['lock'\] is a _thread\.lock "
        with pytest.raises(vecenv.UncopyableInfoError, match=lock) as error:
            venv.step(actions)
        assert isinstance(error.value, TypeError)
        assert sorted(error.value.entries) == [(1, "lock", "_thread.lock"), (3, "lock", "_thread.lock")]
        notes = "\n".join(getattr(error.value, "__notes__", []))
        assert "env 0's info[1] is agent 'a1' (row 1)" in notes and "env 1's info[1] is agent 'a1' (row 3)" in notes
        obs, rewards, dones, infos = venv.step(1 - actions)  # returns step 3; these actions are ignored
        np.testing.assert_array_equal(obs, np.array([[0, 0], [1, 0]] * 2, dtype=np.float32))  # reset observations
        np.testing.assert_array_equal(rewards, np.array([0 + 1, 1 + 0, 0 + 0, 1 + 1], dtype=np.float32))
        assert dones.all()
        for k, info in enumerate(infos):
            e, j = divmod(k, 2)
            np.testing.assert_array_equal(info.pop("terminal_observation"), np.array([j, 3], dtype=np.float32))
            want = {"t": 3, "agent": f"a{j}", "env_index": e, "agent_id": f"a{j}", "active": True}
            want["TimeLimit.truncated"] = True
            if j == 1:
                want["vecenv.uncopyable_info"] = {"lock": "_thread.lock"}
            assert info == want, k
        assert venv.reset_infos == [
            {"reset": 2, "agent": f"a{j}", "env_index": e, "agent_id": f"a{j}", "active": True}
            for e in range(2)
            for j in range(2)
        ]
        obs, _, dones, infos = venv.step(actions)
        np.testing.assert_array_equal(obs, np.array([[0, 1], [1, 1]] * 2, dtype=np.float32))
        assert not dones.any() and [info["t"] for info in infos] == [1] * 4
        assert all("vecenv.uncopyable_info" not in info for info in infos)
        # each env stepped 3 + 1 times: not again for the step that raised
        assert venv.get_attr("resets") == [2] * 4 and venv.get_attr("t") == [1] * 4
    finally:
        venv.close()


@pytest.mark.timeout(60)
def test_an_unpicklable_value_in_one_agents_reset_info_is_left_out_of_that_agents_row_only():
    """SubprocVecEnv, LockInfoEnv(length=2, lock_step=0, lock_in_reset=True): the automatic reset at step 2 gives
    a1 a reset info holding a lock, which the worker cannot send. The step raises naming a1's row of each env; the
    next step returns step 2 with the lock left out of a1's reset infos only (their other keys kept)."""
    venv = _build("subproc", LockInfoEnv, 2, env_kwargs={"length": 2, "lock_step": 0, "lock_in_reset": True})
    try:
        venv.reset()
        actions = np.zeros(4, dtype=np.int64)
        venv.step(actions)
        with pytest.raises(
            vecenv.UncopyableInfoError, match=r"env [01]: reset info\[1\]\['lock'\] is a _thread\.lock "
        ) as error:
            venv.step(actions)
        assert sorted(error.value.entries) == [(1, "lock", "_thread.lock"), (3, "lock", "_thread.lock")]
        _, _, dones, infos = venv.step(actions)
        assert dones.all() and [info["t"] for info in infos] == [2] * 4
        assert all("vecenv.uncopyable_info" not in info for info in infos)
        for k, info in enumerate(venv.reset_infos):
            e, j = divmod(k, 2)
            want = {"reset": 2, "agent": f"a{j}", "env_index": e, "agent_id": f"a{j}", "active": True}
            if j == 1:
                want["vecenv.uncopyable_info"] = {"lock": "_thread.lock"}
            assert info == want, k
        assert venv.get_attr("resets") == [2] * 4 and venv.get_attr("t") == [0] * 4
    finally:
        venv.close()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("backend", ["dummy", "subproc"])
def test_recv_names_the_row_of_an_uncopyable_value_in_one_agents_info(backend):
    """Partial batches: env 1 alone is sent (rows 2, 3) and a1's info holds a lock at step 1: recv raises naming row
    3; the next recv returns env 1's rows of that step, the lock named on row 3 only, a1's other keys kept."""
    venv = _build(backend, LockInfoEnv, 2, env_kwargs={"lock_step": 1})
    try:
        venv.async_reset()
        assert venv.recv()[4].tolist() == [0, 1, 2, 3]
        venv.send(np.array([1, 1]), [2, 3])
        with pytest.raises(
            vecenv.UncopyableInfoError, match=r"env 1: info\[1\]\['lock'\] is a _thread\.lock "
        ) as error:
            venv.recv()
        assert error.value.entries == [(3, "lock", "_thread.lock")]
        assert "env 1's info[1] is agent 'a1' (row 3)" in error.value.__notes__[-1]
        obs, rewards, dones, infos, rows = venv.recv()
        assert rows.tolist() == [2, 3] and not dones.any()
        np.testing.assert_array_equal(obs, np.array([[0, 1], [1, 1]], dtype=np.float32))
        np.testing.assert_array_equal(rewards, np.array([1, 2], dtype=np.float32))
        assert [(info["t"], info["agent"], info["env_index"]) for info in infos] == [(1, "a0", 1), (1, "a1", 1)]
        assert "vecenv.uncopyable_info" not in infos[0] and infos[1]["vecenv.uncopyable_info"] == {
            "lock": "_thread.lock"
        }
        assert venv.get_attr("t") == [0, 0, 1, 1]
    finally:
        venv.close()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("cls", [vecenv.DummyVecEnv, vecenv.SubprocVecEnv], ids=["dummy", "subproc"])
def test_a_single_agent_info_shaped_like_an_agent_stacks_is_left_out_by_top_level_key(cls):
    """A single-agent env's info {0: {...}, 1: {..., "lock": lock}}: the rule stays per top-level key (only agent
    stacks are looked into), so key 1 is left out whole and named with its type."""
    venv = cls([IntKeyedLockInfoEnv])
    try:
        venv.reset()
        with pytest.raises(vecenv.UncopyableInfoError, match=r"env 0: info\[1\] is a dict ") as error:
            venv.step(np.zeros(1, dtype=np.int64))
        assert error.value.entries == [(0, 1, "dict")]
        _, _, _, infos = venv.step(np.zeros(1, dtype=np.int64))
        assert infos[0] == {0: {"t": 1}, "TimeLimit.truncated": False, "vecenv.uncopyable_info": {1: "dict"}}
    finally:
        venv.close()


# --- partial batches ------------------------------------------------------------------------------------------------


def _same_rows(got, want, where):
    for key, (a, b) in enumerate(zip(got, want, strict=True)):
        if key == 3:  # infos
            assert len(a) == len(b), where
            for info, expected in zip(a, b, strict=True):
                assert info.keys() == expected.keys(), where
                for name, value in expected.items():
                    np.testing.assert_array_equal(info[name], value, err_msg=f"{where} {name}")
        else:
            np.testing.assert_array_equal(a, b, err_msg=where)


@pytest.mark.parametrize("backend", ["dummy", "subproc"])
def test_partial_batches_send_and_recv_rows_env_by_env(backend):
    """async_reset / send / recv by rows, one env at a time (rows given in any order), give the rows of a full-batch
    AgentVecEnv stepped with the same seeds and actions."""
    venv = _build(backend, ScriptedAgentsEnv, 2, seed=9)
    reference = make_vec_env(ScriptedAgentsEnv, 2, seed=9)
    try:
        venv.async_reset()
        obs, rewards, dones, infos, rows = venv.recv()
        want_obs = reference.reset()
        assert rows.dtype == np.int64 and rows.tolist() == list(range(6))
        _same_rows(
            (obs, rewards, dones, infos), (want_obs, np.zeros(6), np.zeros(6, bool), reference.reset_infos), "reset"
        )
        rng = np.random.default_rng(1)
        for t in range(9):
            actions = rng.integers(0, 5, size=6)
            want = reference.step(actions)
            for e, order in ((0, [0, 1, 2]), (1, [5, 3, 4])):
                venv.send(actions[order], order)
                *got, rows = venv.recv()
                assert rows.tolist() == [3 * e, 3 * e + 1, 3 * e + 2]
                rows_of_e = slice(3 * e, 3 * e + 3)
                _same_rows(
                    got, (want[0][rows_of_e], want[1][rows_of_e], want[2][rows_of_e], want[3][rows_of_e]), f"t={t}"
                )
        with pytest.raises(
            ValueError, match=r"send\(env_ids\): expected every row of each env sent .* miss rows \[5\]"
        ):
            venv.send(np.zeros(2, dtype=np.int64), [3, 4])
    finally:
        venv.close()
        reference.close()


def test_without_pettingzoo_the_module_names_the_extra():
    code = (
        "import sys; sys.modules['pettingzoo'] = None\n"
        "try:\n    import vecenv.pettingzoo\nexcept ImportError as exc:\n    print(type(exc).__name__, exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.strip() == (
        'MissingExtraError vecenv.pettingzoo needs pettingzoo, which is not installed. Install the "pettingzoo" '
        'extra: pip install pettingzoo (or pip install -e ".[pettingzoo]" in a clone of vecenv)'
    )


def test_works_without_stable_baselines3():
    """A smoke run with Stable-Baselines3 made unimportable: build, wrap, step through an episode end, close."""
    code = """
import sys
sys.modules["stable_baselines3"] = None
import numpy as np, vecenv
from mpe2 import simple_spread_v3
from vecenv.pettingzoo import make_vec_env
venv = vecenv.VecMonitor(make_vec_env(simple_spread_v3.parallel_env, 2, seed=0, env_kwargs={"max_cycles": 3}))
venv.reset()
for _ in range(3):
    _, _, dones, infos = venv.step(np.zeros(6, dtype=np.int64))
venv.close()
print(dones.all(), sorted(infos[0]["episode"]), "stable_baselines3" in sys.modules and sys.modules["stable_baselines3"])
"""
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.split() == ["True", "['l',", "'r',", "'t']", "None"]


def test_render_tiles_one_frame_per_env_and_attributes_reach_through_wrappers():
    venv = vecenv.VecNormalize(
        make_vec_env(_simple_spread, 2, seed=0, env_kwargs={"render_mode": "rgb_array"}), norm_reward=False
    )
    try:
        venv.reset()
        frames = venv.get_images()
        assert venv.render_mode == "rgb_array" and len(frames) == 2
        np.testing.assert_array_equal(venv.render(), vecenv.tile_images(frames))
        np.testing.assert_array_equal(frames[1], venv.env_method("render", indices=[3])[0])
        assert venv.possible_agents == ["agent_0", "agent_1", "agent_2"] and venv.n_envs == 2
    finally:
        venv.close()
