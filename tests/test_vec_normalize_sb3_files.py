"""VecNormalize files in Stable-Baselines3's format: vecenv writes SB3's pickle, SB3 reads it, and the reverse.

The tests without SB3 check vecenv's SB3 pickles against vecenv's reader and against the pickles real SB3
wrote (``tests/data``, see ``tests/data/make_sb3_fixtures.py``). The tests marked ``sb3`` (``make test-sb3``)
hand files to and from stable-baselines3 itself. Statistics are compared exactly.
"""

from __future__ import annotations

import io
import logging
import os
import pathlib
import warnings
from typing import Any

import numpy as np
import pytest
from gymnasium import spaces

from tests.envs import SpaceEnv
from tests.test_vec_normalize import (
    DATA,
    HAS_SB3,
    ImageDictEnv,
    TwoPartEnv,
    assert_rms_equal,
    box_fns,
    sb3_venv,
    trained,
)
from vecenv import DummyVecEnv, VecEnv, atomic
from vecenv.wrappers import normalize_io
from vecenv.wrappers.sb3_pickle import SB3_RUNNING_MEAN_STD, SB3_VEC_NORMALIZE, RestrictedUnpickler
from vecenv.wrappers.vec_normalize import VecNormalize

CONFIG_FIELDS = ("training", "norm_obs", "norm_reward", "clip_obs", "clip_reward", "gamma", "epsilon", "norm_obs_keys")


def dict_fns(n: int = 2) -> list[Any]:
    return [TwoPartEnv] * n


#: name -> (env factories, VecNormalize keyword arguments)
CASES: dict[str, tuple[Any, dict[str, Any]]] = {
    "box": (box_fns, {}),
    "dict-norm-obs-keys": (dict_fns, {"norm_obs_keys": ["position", "velocity"], "clip_obs": 5.0, "gamma": 0.9}),
    "image-dict": (lambda n=2: [ImageDictEnv] * n, {"training": False}),
    "norm-obs-false": (box_fns, {"norm_obs": False, "clip_reward": 3.0, "norm_reward": False}),
}


def trained_case(name: str) -> VecNormalize:
    fns, kwargs = CASES[name]
    vn = trained(DummyVecEnv(fns()), n_steps=7, seed=1, **{k: v for k, v in kwargs.items() if k != "training"})
    vn.training = kwargs.get("training", True)
    # a seeded space carries a numpy Generator into the pickle (as SB3's make_vec_env leaves it)
    vn.action_space.seed(0)
    vn.observation_space.seed(1)
    return vn


def assert_same_normalizer(actual: Any, expected: Any) -> None:
    """Same configuration and the same statistics, to the bit (works for vecenv's and SB3's wrappers)."""
    for field in CONFIG_FIELDS:
        assert getattr(actual, field) == getattr(expected, field), field
    assert_rms_equal(actual.ret_rms, expected.ret_rms)
    if "obs_rms" not in vars(expected):
        assert "obs_rms" not in vars(actual)
    elif isinstance(expected.obs_rms, dict):
        assert list(actual.obs_rms) == list(expected.obs_rms)
        for key, rms in expected.obs_rms.items():
            assert_rms_equal(actual.obs_rms[key], rms)
    else:
        assert_rms_equal(actual.obs_rms, expected.obs_rms)


class Attributes:
    """What an unpickled SB3 object is turned into here: a bag of the attributes the pickle gave it."""


def pickled_attributes(path: pathlib.Path) -> dict[str, Any]:
    """The attributes of the SB3 VecNormalize pickled in ``path``, read with the allow-list but no SB3 class."""
    allowed = dict(normalize_io.sb3_allowed_globals())
    allowed[SB3_VEC_NORMALIZE] = allowed[SB3_RUNNING_MEAN_STD] = Attributes

    def refuse(module: str, name: str) -> Exception:
        return AssertionError(f"{module}.{name}")

    obj = RestrictedUnpickler(io.BytesIO(path.read_bytes()), allowed, refuse).load()
    assert type(obj) is Attributes
    return vars(obj)


# --- without SB3 -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(CASES))
def test_sb3_format_is_read_back_by_load(name, tmp_path):
    vn = trained_case(name)
    path = tmp_path / "vecnormalize.pkl"
    vn.save(path, format="sb3")
    assert path.read_bytes()[:2] == b"\x80\x04"  # a protocol-4 pickle, as SB3 writes
    fns, _ = CASES[name]
    for loader in (VecNormalize.load, VecNormalize.load_sb3):
        again = loader(path, DummyVecEnv(fns()))
        assert_same_normalizer(again, vn)
        assert again.observation_space == vn.observation_space
    vn.save_sb3(tmp_path / "same.pkl")
    assert (tmp_path / "same.pkl").read_bytes() == path.read_bytes()


@pytest.mark.parametrize(
    ("fixture", "name"), [("sb3_cartpole_box.pkl", "box"), ("sb3_dict_norm_obs_keys.pkl", "dict-norm-obs-keys")]
)
def test_sb3_format_has_the_attributes_of_an_sb3_pickle(fixture, name, tmp_path):
    """Every attribute of a pickle SB3 2.9 wrote is in vecenv's, with the same kind of value (``old_obs``, the
    last raw observation, aside: vecenv does not save it, and SB3 sets it again at ``reset``)."""
    theirs = pickled_attributes(DATA / fixture)
    trained_case(name).save(tmp_path / "ours.pkl", format="sb3")
    ours = pickled_attributes(tmp_path / "ours.pkl")
    assert list(ours) == [key for key in theirs if key != "old_obs"]  # same attributes, in SB3's order
    for key, value in theirs.items():
        if key in ("old_obs", "render_mode"):  # render_mode: the fixture's envs render, these do not
            continue
        assert type(ours[key]) is type(value), key
        if isinstance(value, Attributes):  # ret_rms, obs_rms
            assert list(vars(ours[key])) == list(vars(value)) == ["mean", "var", "count"]
    named = normalize_io.scan_pickle_globals((tmp_path / "ours.pkl").read_bytes())
    assert named[0] == SB3_VEC_NORMALIZE and SB3_RUNNING_MEAN_STD in named
    assert set(named) <= set(normalize_io.sb3_allowed_globals())


def test_load_logs_the_import_of_a_pickle(caplog, tmp_path):
    caplog.set_level(logging.INFO, logger="vecenv.wrappers.vec_normalize")
    VecNormalize.load(DATA / "sb3_cartpole_box.pkl", sb3_venv("cartpole"))
    [record] = caplog.records
    assert record.levelno == logging.INFO
    assert str(DATA / "sb3_cartpole_box.pkl") in record.getMessage()
    assert "restricted unpickler" in record.getMessage()
    caplog.clear()
    VecNormalize(DummyVecEnv(box_fns(1))).save(tmp_path / "stats.npz")
    VecNormalize.load(tmp_path / "stats.npz", DummyVecEnv(box_fns(1)))
    assert caplog.records == []


def test_save_picks_the_format_only_from_the_format_argument(tmp_path):
    vn = trained(DummyVecEnv(box_fns(1)))
    with pytest.warns(UserWarning, match=r"'\.pkl' file.*Stable-Baselines3.*cannot.*format='sb3'"):
        vn.save(tmp_path / "vecnormalize.pkl")
    assert (tmp_path / "vecnormalize.pkl").read_bytes()[:4] == b"PK\x03\x04"  # still vecenv's format
    assert_rms_equal(VecNormalize.load(tmp_path / "vecnormalize.pkl", DummyVecEnv(box_fns(1))).obs_rms, vn.obs_rms)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        vn.save(tmp_path / "explicit.pkl", format="vecenv")
        vn.save(tmp_path / "stats.npz")
        vn.save(tmp_path / "sb3.pkl", format="sb3")
    assert (tmp_path / "explicit.pkl").read_bytes() == (tmp_path / "stats.npz").read_bytes()
    assert (tmp_path / "sb3.pkl").read_bytes()[:1] == b"\x80"
    expected = r"format must be one of \('vecenv', 'sb3'\) \(or None for 'vecenv'\), got 'pkl'"
    with pytest.raises(ValueError, match=expected):
        vn.save(tmp_path / "other", format="pkl")  # type: ignore[arg-type]
    assert not (tmp_path / "other").exists()


class OwnBox(spaces.Box):
    """A Box subclass: SB3 would unpickle it (if importable), vecenv's allow-list does not admit it."""


def test_sb3_format_refuses_spaces_vecenv_could_not_read_back(tmp_path):
    def make() -> SpaceEnv:
        env = SpaceEnv("box", "discrete")
        env.action_space = OwnBox(0, 1, (2,))
        return env

    vn = VecNormalize(DummyVecEnv([make]))
    with pytest.raises(ValueError, match=r"would reference tests\.test_vec_normalize_sb3_files\.OwnBox.*refuses"):
        vn.save(tmp_path / "own.pkl", format="sb3")
    assert os.listdir(tmp_path) == []


def test_crash_mid_sb3_save_keeps_previous_file(tmp_path, monkeypatch):
    path = tmp_path / "vecnormalize.pkl"
    trained(DummyVecEnv(box_fns(1)), seed=1).save_sb3(path)
    before = path.read_bytes()

    def write_half_then_fail(file: Any, data: bytes) -> None:
        file.write(data[: len(data) // 2])
        raise OSError("No space left on device")

    monkeypatch.setattr(atomic, "_write_payload", write_half_then_fail)
    with pytest.raises(OSError, match="No space left"):
        trained(DummyVecEnv(box_fns(1)), seed=2).save_sb3(path)
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == [path.name]


# --- with SB3 (make test-sb3) ----------------------------------------------------------------------------

needs_sb3 = pytest.mark.skipif(not HAS_SB3, reason="stable-baselines3 is not installed (make test-sb3)")


def sb3_trained(fns: list[Any], n_steps: int = 7, seed: int = 1, **kwargs: Any) -> Any:
    from stable_baselines3.common.vec_env import DummyVecEnv as Sb3DummyVecEnv
    from stable_baselines3.common.vec_env import VecNormalize as Sb3VecNormalize

    vn = Sb3VecNormalize(Sb3DummyVecEnv(fns), **kwargs)
    vn.reset()
    rng = np.random.default_rng(seed)
    for _ in range(n_steps):
        vn.step(rng.integers(0, 2, size=vn.num_envs))
    return vn


def assert_same_steps(ours: VecEnv, theirs: Any, n_steps: int = 4) -> None:
    """Both wrappers give the same observations and rewards, to the bit, from a reset on."""
    obs_a, obs_b = ours.reset(), theirs.reset()
    rng = np.random.default_rng(5)
    for _ in range(n_steps):
        a = ours.step(actions := rng.integers(0, 2, size=ours.num_envs))
        b = theirs.step(actions)
        for x, y in [(obs_a, obs_b), (a[1], b[1])]:
            if isinstance(x, dict):
                for key in x:
                    np.testing.assert_array_equal(x[key], y[key])
            else:
                np.testing.assert_array_equal(x, y)
        obs_a, obs_b = a[0], b[0]


@pytest.mark.sb3
@needs_sb3
@pytest.mark.parametrize("name", sorted(CASES))
def test_sb3_saves_and_vecenv_loads(name, tmp_path):
    fns, kwargs = CASES[name]
    theirs = sb3_trained(fns(), **kwargs)
    theirs.save(tmp_path / "vecnormalize.pkl")  # SB3's own pickle.dump
    ours = VecNormalize.load(tmp_path / "vecnormalize.pkl", DummyVecEnv(fns()))
    assert_same_normalizer(ours, theirs)
    assert_same_steps(ours, theirs)


@pytest.mark.sb3
@needs_sb3
@pytest.mark.parametrize("name", sorted(CASES))
def test_vecenv_saves_sb3_format_and_sb3_loads(name, tmp_path):
    from stable_baselines3.common.vec_env import DummyVecEnv as Sb3DummyVecEnv
    from stable_baselines3.common.vec_env import VecNormalize as Sb3VecNormalize

    fns, kwargs = CASES[name]
    ours = trained_case(name)
    ours.save(tmp_path / "vecnormalize.pkl", format="sb3")
    theirs = Sb3VecNormalize.load(str(tmp_path / "vecnormalize.pkl"), Sb3DummyVecEnv(fns()))  # SB3's pickle.load
    assert type(theirs) is Sb3VecNormalize
    assert_same_normalizer(theirs, ours)
    assert theirs.observation_space == ours.observation_space and theirs.action_space == ours.action_space

    # the attributes of a wrapper SB3 saved and loaded itself (old_obs aside: vecenv does not save it)
    native = sb3_trained(fns(), **kwargs)
    native.save(tmp_path / "native.pkl")
    native = Sb3VecNormalize.load(str(tmp_path / "native.pkl"), Sb3DummyVecEnv(fns()))
    assert sorted(vars(theirs)) == sorted(set(vars(native)) - {"old_obs"})

    # and back: SB3 saves what it loaded, vecenv reads it
    theirs.save(tmp_path / "again.pkl")
    assert_same_normalizer(VecNormalize.load(tmp_path / "again.pkl", DummyVecEnv(fns())), ours)
    assert_same_steps(VecNormalize.load(tmp_path / "vecnormalize.pkl", DummyVecEnv(fns())), theirs)

