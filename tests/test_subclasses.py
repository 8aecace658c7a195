"""Users' own subclasses of vecenv's classes, and vector envs of their own under vecenv's wrappers, behave as with
SB3's classes: their step halves are called by ``step()``, Ctrl-C interrupts their code at once, and vecenv's
wrappers and helpers accept them."""

from __future__ import annotations

import signal
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

import vecenv
from vecenv.adapters import from_gymnasium
from vecenv.base import VecEnvStepReturn


class CountEnv(gym.Env):
    """Observation ``[t]``; the episode terminates after ``length`` steps."""

    observation_space = spaces.Box(0, 100, (1,), np.float32)
    action_space = spaces.Discrete(2)

    def __init__(self, length: int = 3) -> None:
        self.length = length
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.t = 0
        return np.array([0.0], np.float32), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.t += 1
        return np.array([self.t], np.float32), 1.0, self.t >= self.length, False, {}


def count_fns(n: int) -> list[Any]:
    return [CountEnv for _ in range(n)]


BACKENDS = {
    "dummy": vecenv.DummyVecEnv,
    "subproc": lambda fns: vecenv.SubprocVecEnv(fns, n_workers=1),
}


class _CountWait:
    """A mixin whose ``step_wait`` counts its calls and adds 10 to the rewards (a user's reward shaping)."""

    calls = 0

    def step_wait(self) -> VecEnvStepReturn:
        self.calls += 1
        obs, rewards, dones, infos = super().step_wait()  # type: ignore[misc]
        return obs, rewards + 10, dones, infos


@pytest.mark.parametrize("backend", sorted(BACKENDS))
@pytest.mark.parametrize("how", ["mixin", "instance", "class-after"])
def test_step_calls_the_step_wait_of_a_mixin_an_instance_or_a_patched_class(backend: str, how: str, built) -> None:
    """``step()`` runs ``step_async`` then ``step_wait`` wherever they come from, as SB3's ``VecEnv.step``: a mixin,
    a function set on the instance, or on the class after it was defined."""
    base = vecenv.DummyVecEnv if backend == "dummy" else vecenv.SubprocVecEnv
    if how == "mixin":
        cls: Any = type("Mixed", (_CountWait, base), {})
        venv = cls(count_fns(2)) if backend == "dummy" else cls(count_fns(2), n_workers=1)
    else:
        cls = type("Plain", (base,), {})
        venv = cls(count_fns(2)) if backend == "dummy" else cls(count_fns(2), n_workers=1)
        original = venv.step_wait
        counter = {"calls": 0}

        def step_wait(self: Any = None) -> VecEnvStepReturn:
            counter["calls"] += 1
            obs, rewards, dones, infos = original()
            return obs, rewards + 10, dones, infos

        if how == "instance":
            venv.step_wait = step_wait
        else:
            cls.step_wait = step_wait
    built.append(venv)
    venv.reset()
    obs, rewards, dones, _ = venv.step(np.zeros(2, dtype=np.int64))
    calls = venv.calls if how == "mixin" else counter["calls"]
    assert calls == 1
    np.testing.assert_array_equal(rewards, [11.0, 11.0])  # the envs' reward 1, shaped
    np.testing.assert_array_equal(obs, [[1.0], [1.0]])
    np.testing.assert_array_equal(dones, [False, False])


class BatchedSim(vecenv.VecEnv):
    """A user's batched simulator: ``step_wait`` raises SIGINT (as Ctrl-C arriving while it waits for its
    simulator), then goes on; ``finished`` tells whether it ran to its end."""

    def __init__(self) -> None:
        super().__init__(2, spaces.Box(-1, 1, (3,), np.float32), spaces.Discrete(2))
        self.finished = False

    def reset(self) -> np.ndarray:
        return np.zeros((2, 3), np.float32)

    def step_async(self, actions: np.ndarray) -> None:
        self.actions = actions

    def step_wait(self) -> VecEnvStepReturn:
        signal.raise_signal(signal.SIGINT)
        self.finished = True
        return np.zeros((2, 3), np.float32), np.zeros(2, np.float32), np.zeros(2, bool), [{}, {}]

    def close(self) -> None:
        pass

    def get_attr(self, attr_name: str, indices: Any = None) -> list[Any]:
        return [None, None]

    def set_attr(self, attr_name: str, value: Any, indices: Any = None) -> None:
        pass

    def env_method(self, method_name: str, *args: Any, indices: Any = None, **kwargs: Any) -> list[Any]:
        return [None, None]

    def env_is_wrapped(self, wrapper_class: Any, indices: Any = None) -> list[bool]:
        return [False, False]


class WorkAfterStep(vecenv.VecEnvWrapper):
    """A user's wrapper whose ``step_wait`` works after the vector env's step (SIGINT arrives during that work)."""

    finished = False

    def reset(self) -> Any:
        return self.venv.reset()

    def step_wait(self) -> VecEnvStepReturn:
        result = self.venv.step_wait()
        signal.raise_signal(signal.SIGINT)
        self.finished = True
        return result


def test_ctrl_c_interrupts_a_users_vector_env_at_once(built) -> None:
    """While one of vecenv's vector envs is open (its SIGINT handler in place), Ctrl-C in the ``step_wait`` of a
    user's own ``VecEnv`` is raised there, as with SB3's base class, not held until a later vecenv call."""
    other = vecenv.DummyVecEnv(count_fns(1))
    built.append(other)
    other.reset()  # (installs vecenv's handler)
    sim = BatchedSim()
    with pytest.raises(KeyboardInterrupt):
        sim.step(np.zeros(2, dtype=np.int64))
    assert not sim.finished
    other.step(np.zeros(1, dtype=np.int64))  # nothing was left deferred


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_ctrl_c_interrupts_a_users_wrapper_at_once(backend: str, built) -> None:
    """Ctrl-C in a user's wrapper, after vecenv's vector env returned the step to it, is raised there (SB3's
    behaviour: the wrapper's code is the user's), and the vector env under it goes on stepping."""
    venv = BACKENDS[backend](count_fns(2))
    built.append(venv)
    wrapped = vecenv.VecMonitor(WorkAfterStep(venv))
    wrapped.reset()
    with pytest.raises(KeyboardInterrupt):
        wrapped.step(np.zeros(2, dtype=np.int64))
    assert not wrapped.venv.finished
    obs, _, _, _ = venv.step(np.zeros(2, dtype=np.int64))  # the envs' second step: none lost, none repeated
    np.testing.assert_array_equal(obs, [[2.0], [2.0]])


class _InterruptedVectorEnv(gym.vector.SyncVectorEnv):
    """A Gymnasium vector env whose ``step`` receives SIGINT once, then goes on."""

    interrupt = False
    finished = False

    def step(self, actions: Any) -> Any:
        if self.interrupt:
            self.interrupt = False
            signal.raise_signal(signal.SIGINT)
            self.finished = True
        return super().step(actions)


def test_ctrl_c_interrupts_an_adapted_vector_env_at_once(built) -> None:
    """The vector env that ``from_gymnasium`` adapts is another library's code: Ctrl-C in its ``step`` is raised
    there, and the adapter steps on afterwards."""
    other = vecenv.DummyVecEnv(count_fns(1))
    built.append(other)
    other.reset()
    inner = _InterruptedVectorEnv([lambda: CountEnv(5) for _ in range(2)])
    venv = from_gymnasium(inner)
    built.append(venv)
    venv.reset()
    inner.interrupt = True
    with pytest.raises(KeyboardInterrupt):
        venv.step(np.zeros(2, dtype=np.int64))
    assert not inner.finished
    obs, _, _, _ = venv.step(np.zeros(2, dtype=np.int64))
    np.testing.assert_array_equal(obs, [[1.0], [1.0]])


class DuckVecEnv:
    """A vector env that imitates SB3's API without subclassing any ``VecEnv`` (gym3 / Procgen style) and has no
    ``unwrapped``: two envs whose episodes last 2 and 3 steps."""

    num_envs = 2
    observation_space = spaces.Box(0, 10, (1,), np.float32)
    action_space = spaces.Discrete(2)
    render_mode = None
    metadata: dict[str, Any] = {}

    def __init__(self) -> None:
        self.lengths = np.array([2, 3])
        self.t = np.zeros(2, dtype=np.int64)

    def reset(self) -> np.ndarray:
        self.t[:] = 0
        return self.t[:, None].astype(np.float32)

    def step_async(self, actions: np.ndarray) -> None:
        pass

    def step_wait(self) -> VecEnvStepReturn:
        self.t += 1
        dones = self.t >= self.lengths
        infos: list[dict] = [{} for _ in range(2)]
        obs = self.t[:, None].astype(np.float32)
        for i in np.flatnonzero(dones):
            infos[i]["terminal_observation"] = obs[i].copy()
            self.t[i] = 0
        return self.t[:, None].astype(np.float32), np.ones(2, np.float32), dones, infos

    def step(self, actions: np.ndarray) -> VecEnvStepReturn:
        self.step_async(actions)
        return self.step_wait()

    def close(self) -> None:
        pass


@pytest.mark.filterwarnings("ignore:The `render_mode` attribute:UserWarning")
def test_vec_monitor_accepts_a_vector_env_without_unwrapped() -> None:
    """``VecMonitor`` over an SB3-like vector env that has no ``unwrapped`` (SB3's accepts it) counts its
    episodes: returns and lengths as the envs' own episode lengths give them."""
    monitor = vecenv.VecMonitor(DuckVecEnv())  # type: ignore[arg-type]
    monitor.reset()
    episodes: list[tuple[int, float, int]] = []
    for _ in range(6):
        _, _, dones, infos = monitor.step(np.zeros(2, dtype=np.int64))
        episodes += [(i, infos[i]["episode"]["r"], infos[i]["episode"]["l"]) for i in np.flatnonzero(dones)]
    assert sorted(episodes) == [(0, 2.0, 2)] * 3 + [(1, 3.0, 3)] * 2


@pytest.mark.filterwarnings("ignore:The `render_mode` attribute:UserWarning")
def test_step_stats_through_a_wrapper_over_a_foreign_vector_env() -> None:
    """``step_stats()`` on a vecenv wrapper over a vector env that keeps no accounts raises the documented
    ``NotImplementedError``, naming that vector env."""
    wrapped = vecenv.VecNormalize(DuckVecEnv())  # type: ignore[arg-type]
    with pytest.raises(NotImplementedError, match="DuckVecEnv keeps no step accounts"):
        wrapped.step_stats()


class HalvedNormalize(vecenv.VecNormalize):
    """A user's ``VecNormalize`` subclass: its normalized observations are halved."""

    def normalize_obs(self, obs: Any) -> Any:
        return super().normalize_obs(obs) / 2


@pytest.mark.parametrize("name", ["stats.npz", "stats.pkl"])
def test_load_on_a_subclass_returns_that_subclass(tmp_path, name: str) -> None:
    """``Subclass.load()`` builds that subclass with the saved configuration and statistics (SB3 unpickles the
    subclass), so its own ``normalize_obs`` is the one evaluation uses."""
    venv = vecenv.DummyVecEnv(count_fns(2))
    trained = HalvedNormalize(venv, gamma=0.9)
    trained.reset()
    for _ in range(5):
        trained.step(np.zeros(2, dtype=np.int64))
    trained.save(tmp_path / name)
    loaded = HalvedNormalize.load(tmp_path / name, vecenv.DummyVecEnv(count_fns(2)))
    try:
        assert type(loaded) is HalvedNormalize
        assert loaded.gamma == 0.9
        raw = np.array([[2.0], [3.0]], np.float32)
        expected = np.clip((raw - trained.obs_rms.mean) / np.sqrt(trained.obs_rms.var + trained.epsilon), -10, 10)
        np.testing.assert_allclose(loaded.normalize_obs(raw), expected / 2, rtol=1e-6)
        assert type(vecenv.VecNormalize.load(tmp_path / name, loaded.venv)) is vecenv.VecNormalize
    finally:
        trained.close()
        loaded.close()


class WorldModel(vecenv.DummyVecEnv):
    """A ``DummyVecEnv`` subclass that steps a batched model in its own ``step`` and replaces SB3's buffers."""

    def __init__(self) -> None:
        super().__init__(count_fns(2))
        self.buf_obs = np.zeros((2, 1), np.float32)
        self.buf_infos = [{"model": True}, {"model": True}]

    def reset(self) -> np.ndarray:
        model_obs: Any = self.buf_obs
        model_obs[:] = 0
        return model_obs.copy()

    def step(self, actions: Any) -> VecEnvStepReturn:
        model_obs: Any = self.buf_obs
        model_obs += 5
        return model_obs.copy(), np.ones(2, np.float32), np.zeros(2, bool), self.buf_infos


def test_a_subclass_may_replace_buf_obs_and_buf_infos() -> None:
    """A ``DummyVecEnv`` subclass may assign ``buf_obs`` / ``buf_infos`` (SB3's has plain attributes): they are
    then the objects it assigned."""
    model = WorldModel()
    try:
        model.reset()
        obs, _, _, infos = model.step(np.zeros(2, dtype=np.int64))
        obs, _, _, infos = model.step(np.zeros(2, dtype=np.int64))
        np.testing.assert_array_equal(obs, [[10.0], [10.0]])
        assert infos == [{"model": True}, {"model": True}] and model.buf_infos is infos
    finally:
        model.close()


class EvalNormalize(vecenv.VecNormalize):
    """A subclass with an ``__init__`` of its own (an evaluation wrapper): ``load`` cannot pass it the saved
    configuration, so it is set up as a ``VecNormalize``."""

    def __init__(self, venv: Any) -> None:
        super().__init__(venv, training=False, norm_reward=False)


def test_load_on_a_subclass_with_its_own_init(tmp_path) -> None:
    """``EvalNormalize.load()`` returns an ``EvalNormalize`` with the saved configuration and statistics."""
    trained = vecenv.VecNormalize(vecenv.DummyVecEnv(count_fns(2)), gamma=0.9)
    trained.reset()
    trained.step(np.zeros(2, dtype=np.int64))
    trained.save(tmp_path / "stats.npz")
    loaded = EvalNormalize.load(tmp_path / "stats.npz", vecenv.DummyVecEnv(count_fns(2)))
    try:
        assert type(loaded) is EvalNormalize and loaded.gamma == 0.9 and loaded.training
        np.testing.assert_array_equal(loaded.obs_rms.mean, trained.obs_rms.mean)  # type: ignore[union-attr]
    finally:
        trained.close()
        loaded.close()


def test_ctrl_c_interrupts_a_step_half_set_on_a_wrapper_instance(built) -> None:
    """A ``step_wait`` set on one of vecenv's wrappers (``mock.patch.object``) is the caller's code: Ctrl-C in it is
    raised at once, as with SB3."""
    venv = vecenv.DummyVecEnv(count_fns(2))
    built.append(venv)
    monitor = vecenv.VecMonitor(venv)
    monitor.reset()
    finished = []

    def step_wait() -> VecEnvStepReturn:
        result = venv.step_wait()
        signal.raise_signal(signal.SIGINT)
        finished.append(True)
        return result

    monitor.step_wait = step_wait  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt):
        monitor.step(np.zeros(2, dtype=np.int64))
    assert not finished


def test_ctrl_c_in_vecenvs_bookkeeping_under_an_adapter_is_deferred(built) -> None:
    """vecenv's own Gymnasium layer adapted by ``from_gymnasium``: a Ctrl-C between its engine's two step halves is
    deferred as when it is used directly (the adapter's wait runs vecenv's own sections), so the next steps work
    and no step is lost."""
    import vecenv.gymnasium as vg

    inner = vg.SyncVectorEnv([lambda: CountEnv(10) for _ in range(2)])
    engine = inner._venv
    original = engine.step_async
    calls = []

    def step_async_then_sigint(actions: Any) -> None:
        original(actions)
        calls.append(1)
        if len(calls) == 2:
            signal.raise_signal(signal.SIGINT)

    engine.step_async = step_async_then_sigint  # type: ignore[method-assign]
    venv = from_gymnasium(inner)
    built.append(venv)
    venv.reset()
    actions = np.zeros(2, dtype=np.int64)
    np.testing.assert_array_equal(venv.step(actions)[0], [[1.0], [1.0]])
    with pytest.raises(KeyboardInterrupt):
        venv.step(actions)
    seen = [venv.step(actions)[0][0, 0] for _ in range(2)]
    assert seen == [2.0, 3.0]  # the interrupted step, held by the inner vector env, then the next one


def test_a_wrapper_decorating_vecenvs_step_wait_is_the_users_code(built) -> None:
    """A subclass whose ``step_wait`` is vecenv's method under the user's ``functools.wraps`` decorator (which copies
    the name and module) runs the user's code: Ctrl-C there is raised at once, as in any step half of the user's."""
    import functools

    def interrupted(method: Any) -> Any:
        @functools.wraps(method)
        def wrapper(self: Any) -> Any:
            result = method(self)
            signal.raise_signal(signal.SIGINT)
            self.finished = True
            return result

        return wrapper

    class Decorated(vecenv.DummyVecEnv):
        finished = False
        step_wait = interrupted(vecenv.DummyVecEnv.step_wait)

    venv = Decorated(count_fns(2))
    built.append(venv)
    venv.reset()
    with pytest.raises(KeyboardInterrupt):
        venv.step(np.zeros(2, dtype=np.int64))
    assert not venv.finished


def test_step_halves_of_a_class_made_per_run_are_not_kept_alive() -> None:
    """vecenv keeps nothing of the step halves it looked at: a wrapper class made per run (a trial of a sweep), and
    what its methods' closures hold, are freed with the run."""
    import gc
    import weakref

    class Model:
        scale = 2.0

    def run() -> weakref.ref:
        model = Model()

        class Scaled(vecenv.VecEnvWrapper):
            def reset(self) -> Any:
                return self.venv.reset()

            def step_wait(self) -> VecEnvStepReturn:
                obs, rewards, dones, infos = self.venv.step_wait()
                return obs, rewards * model.scale, dones, infos

        venv = Scaled(vecenv.DummyVecEnv(count_fns(1)))
        venv.reset()
        venv.step(np.zeros(1, dtype=np.int64))
        venv.close()
        return weakref.ref(model)

    refs = [run() for _ in range(3)]
    gc.collect()
    assert [ref() for ref in refs] == [None, None, None]
