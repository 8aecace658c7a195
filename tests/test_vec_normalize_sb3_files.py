"""VecNormalize files in Stable-Baselines3's format: vecenv writes SB3's pickle, SB3 reads it, and the reverse.

``save(path)`` writes SB3's pickle for a name ending in ``.pkl`` (as SB3 code, the RL Zoo and model hubs call
it), vecenv's format otherwise; ``format=`` forces either. The tests without SB3 check vecenv's SB3 pickles
against vecenv's reader, against the opcodes of the pickle stream and against the pickles real SB3 wrote
(``tests/data``, see ``tests/data/make_sb3_fixtures.py``). The tests marked ``sb3`` (``make test-sb3``) hand
files to and from stable-baselines3 itself, also through SB3's algorithms. Statistics are compared exactly.
"""

from __future__ import annotations

import io
import logging
import os
import pathlib
import pickletools
import re
import warnings
from collections.abc import Callable
from typing import Any

import gymnasium as gym
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
from vecenv import DummyVecEnv, VecEnv, atomic, cli
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


def pickle_opcodes(data: bytes) -> list[tuple[str, Any]]:
    """``(opcode name, argument)`` of every opcode of a pickle, read by :func:`pickletools.genops` (nothing is
    unpickled), without the framing and memo bookkeeping (``FRAME``, ``MEMOIZE``), which push nothing."""
    return [(op.name, arg) for op, arg, _ in pickletools.genops(data) if op.name not in ("FRAME", "MEMOIZE")]


def class_references(opcodes: list[tuple[str, Any]]) -> list[tuple[str, str]]:
    """The ``(module, name)`` of each ``STACK_GLOBAL`` whose two operands are written out as strings (the first
    reference to a class; a later one takes the class from the memo)."""
    return [
        (opcodes[i - 2][1], opcodes[i - 1][1])
        for i, (name, _) in enumerate(opcodes)
        if name == "STACK_GLOBAL" and opcodes[i - 2][0] == opcodes[i - 1][0] == "SHORT_BINUNICODE"
    ]


def test_pkl_name_gets_the_pickle_sb3_reads(tmp_path):
    """What SB3 code writes through vecenv, ``save(".../vecnormalize.pkl")``, is SB3's pickle: its first object is
    an instance of SB3's VecNormalize class, its statistics SB3 RunningMeanStd objects, and no vecenv name is in it.
    vecenv's ``load`` reads it back to the bit."""
    vn = trained(DummyVecEnv(box_fns(2)), n_steps=9, seed=4, clip_obs=6.0, gamma=0.95)
    path = tmp_path / "vecnormalize.pkl"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        vn.save(path)
    data = path.read_bytes()
    opcodes = pickle_opcodes(data)
    assert opcodes[0] == ("PROTO", 4)
    # the object: SB3's class, built by cls.__new__(cls) (EMPTY_TUPLE, NEWOBJ) and given its __dict__ (BUILD)
    assert opcodes[1:6] == [
        ("SHORT_BINUNICODE", "stable_baselines3.common.vec_env.vec_normalize"),
        ("SHORT_BINUNICODE", "VecNormalize"),
        ("STACK_GLOBAL", None),
        ("EMPTY_TUPLE", None),
        ("NEWOBJ", None),
    ]
    assert opcodes[-2:] == [("BUILD", None), ("STOP", None)]
    references = class_references(opcodes)
    assert ("stable_baselines3.common.running_mean_std", "RunningMeanStd") in references
    strings = [arg for name, arg in opcodes if isinstance(arg, str)]
    assert not [text for text in strings if "vecenv" in text]
    for attribute in ("obs_rms", "ret_rms", "clip_obs", "clip_reward", "gamma", "epsilon", "training", "norm_reward"):
        assert attribute in strings
    again = VecNormalize.load(path, DummyVecEnv(box_fns(2)))
    assert_same_normalizer(again, vn)
    assert (again.clip_obs, again.gamma) == (6.0, 0.95)
    assert os.listdir(tmp_path) == ["vecnormalize.pkl"]  # written atomically: no temporary file left
    vn.save(tmp_path / "forced", format="sb3")
    assert (tmp_path / "forced").read_bytes() == data


@pytest.mark.parametrize(
    ("name", "format", "expected"),
    [
        ("vecnormalize.pkl", None, "sb3"),
        ("VECNORMALIZE.PKL", None, "sb3"),
        ("rl_model_vecnormalize_1000_steps.pkl", None, "sb3"),  # SB3's CheckpointCallback
        ("stats.npz", None, "vecenv"),
        ("stats", None, "vecenv"),
        ("stats.pkl.npz", None, "vecenv"),
        ("vecnormalize.pkl", "vecenv", "vecenv"),
        ("stats.npz", "sb3", "sb3"),
    ],
)
def test_save_picks_the_format_from_the_name_unless_forced(name, format, expected, tmp_path):
    vn = trained(DummyVecEnv(box_fns(1)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning in any of these cases
        vn.save(tmp_path / name, format=format)
    head = (tmp_path / name).read_bytes()[:4]
    assert head[:2] == b"\x80\x04" if expected == "sb3" else head == b"PK\x03\x04"  # pickle / ZIP archive
    assert_same_normalizer(VecNormalize.load(tmp_path / name, DummyVecEnv(box_fns(1))), vn)


def test_save_refuses_an_unknown_format(tmp_path):
    vn = trained(DummyVecEnv(box_fns(1)))
    expected = (
        r"format must be one of \('vecenv', 'sb3'\) \(or None: 'sb3' for a name ending in '\.pkl', 'vecenv' "
        r"otherwise\), got 'pkl'"
    )
    with pytest.raises(ValueError, match=expected):
        vn.save(tmp_path / "other.pkl", format="pkl")  # type: ignore[arg-type]
    assert os.listdir(tmp_path) == []


class OwnBox(spaces.Box):
    """A Box subclass: SB3 would unpickle it (if importable), vecenv's allow-list does not admit it."""


def with_action_space(space: spaces.Space) -> Callable[[], SpaceEnv]:
    def make() -> SpaceEnv:
        env = SpaceEnv("box", "discrete")
        env.action_space = space
        return env

    return make


def test_sb3_format_refuses_spaces_vecenv_could_not_read_back(tmp_path):
    vn = VecNormalize(DummyVecEnv([with_action_space(OwnBox(0, 1, (2,)))]))
    with pytest.raises(ValueError, match=r"would reference tests\.test_vec_normalize_sb3_files\.OwnBox.*refuses"):
        vn.save(tmp_path / "own.pkl", format="sb3")
    assert os.listdir(tmp_path) == []


class OwnDiscrete(spaces.Discrete):
    """A Discrete subclass, which vecenv's allow-list does not admit."""


def local_discrete() -> spaces.Discrete:
    class LocalDiscrete(spaces.Discrete):  # a class pickle cannot name at all
        pass

    return LocalDiscrete(2)


@pytest.mark.parametrize(
    ("space", "reason"),
    [
        (lambda: OwnDiscrete(2), r"the pickle would reference tests\.test_vec_normalize_sb3_files\.OwnDiscrete"),
        (local_discrete, r"the observation or action space cannot be pickled \(PicklingError: .*LocalDiscrete"),
    ],
    ids=["not-allowed", "unpicklable"],
)
def test_pkl_name_falls_back_to_vecenv_format_naming_the_file(space, reason, tmp_path):
    """A ``.pkl`` save that cannot be SB3's pickle (one vecenv could read back) keeps the statistics: vecenv's
    format is written, with a warning naming the file, the reason and that SB3 cannot read it."""
    fns = [with_action_space(space())] * 2
    vn = trained(DummyVecEnv(fns), seed=2)
    path = tmp_path / "vecnormalize.pkl"
    with pytest.warns(UserWarning) as record:
        vn.save(path)
    [warning] = record
    message = str(warning.message)
    assert warning.filename == __file__  # reported at the caller's line
    assert f"wrote {str(path)!r} in vecenv's pickle-free format" in message
    assert "Stable-Baselines3 cannot (UnpicklingError)" in message and "format='vecenv'" in message
    assert re.search(reason, message), message
    assert path.read_bytes()[:4] == b"PK\x03\x04"
    assert_same_normalizer(VecNormalize.load(path, DummyVecEnv(fns)), vn)
    assert os.listdir(tmp_path) == ["vecnormalize.pkl"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        vn.save(tmp_path / "chosen.pkl", format="vecenv")
    assert (tmp_path / "chosen.pkl").read_bytes() == path.read_bytes()


@pytest.mark.parametrize(
    "save",
    [lambda vn, path: vn.save_sb3(path), lambda vn, path: vn.save(path), lambda vn, path: vn.save(path, format="sb3")],
    ids=["save_sb3", "pkl-name", "format-sb3"],
)
def test_crash_mid_sb3_save_keeps_previous_file(save, tmp_path, monkeypatch):
    path = tmp_path / "vecnormalize.pkl"
    save(trained(DummyVecEnv(box_fns(1)), seed=1), path)
    before = path.read_bytes()
    assert before[:1] == b"\x80"

    def write_half_then_fail(file: Any, data: bytes) -> None:
        file.write(data[: len(data) // 2])
        raise OSError("No space left on device")

    monkeypatch.setattr(atomic, "_write_payload", write_half_then_fail)
    with pytest.raises(OSError, match="No space left"):
        save(trained(DummyVecEnv(box_fns(1)), seed=2), path)
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == [path.name]


def test_cli_save_normalize_to_a_pkl_name_writes_sb3_format(tmp_path, capsys):
    """``vecenv run --save-normalize PATH`` saves with ``VecNormalize.save``: a ``.pkl`` name gets SB3's pickle."""
    path = tmp_path / "vecnormalize.pkl"
    args = ["run", "CartPole-v1", "-n", "2", "--steps", "40", "--seed", "3", "-b", "dummy"]
    assert cli.main([*args, "--save-normalize", str(path)]) == 0, capsys.readouterr().err
    assert class_references(pickle_opcodes(path.read_bytes()))[0] == SB3_VEC_NORMALIZE
    loaded = VecNormalize.load(path, DummyVecEnv([lambda: gym.make("CartPole-v1")]))
    # one update for the first reset and one per vector step, 2 envs each (RunningMeanStd starts at 1e-4)
    assert loaded.obs_rms.count == pytest.approx(1e-4 + 2 * (1 + 20))
    loaded.close()


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


#: how vecenv is asked for SB3's format: the ``.pkl`` name SB3 code uses, or ``format="sb3"`` with another name
SB3_SAVES: dict[str, tuple[str, Callable[[VecNormalize, pathlib.Path], None]]] = {
    "pkl-name": ("vecnormalize.pkl", lambda vn, path: vn.save(str(path))),
    "format-sb3": ("vecnormalize.stats", lambda vn, path: vn.save(path, format="sb3")),
}


@pytest.mark.sb3
@needs_sb3
@pytest.mark.parametrize("how", sorted(SB3_SAVES))
@pytest.mark.parametrize("name", sorted(CASES))
def test_vecenv_saves_sb3_format_and_sb3_loads(name, how, tmp_path):
    from stable_baselines3.common.vec_env import DummyVecEnv as Sb3DummyVecEnv
    from stable_baselines3.common.vec_env import VecNormalize as Sb3VecNormalize

    fns, kwargs = CASES[name]
    ours = trained_case(name)
    file_name, save = SB3_SAVES[how]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        save(ours, tmp_path / file_name)
    theirs = Sb3VecNormalize.load(str(tmp_path / file_name), Sb3DummyVecEnv(fns()))  # SB3's pickle.load
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
    assert_same_steps(VecNormalize.load(tmp_path / file_name, DummyVecEnv(fns())), theirs)


def cartpole_fns(n: int = 2) -> list[Callable[[], gym.Env]]:
    return [lambda: gym.make("CartPole-v1")] * n


@pytest.mark.sb3
@needs_sb3
def test_sb3_trains_and_vecenv_loads(tmp_path):
    """The RL Zoo's way with plain SB3: PPO trains on SB3's VecNormalize, ``save(".../vecnormalize.pkl")``; vecenv's
    ``VecNormalize.load`` gives the same configuration and statistics, and normalizes as SB3 does."""
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import DummyVecEnv as Sb3DummyVecEnv
    from stable_baselines3.common.vec_env import VecNormalize as Sb3VecNormalize

    env = Sb3VecNormalize(Sb3DummyVecEnv(cartpole_fns()), gamma=0.98, clip_obs=8.0)
    model = PPO("MlpPolicy", env, n_steps=32, batch_size=32, n_epochs=1, seed=0, device="cpu")
    model.learn(64)
    theirs = model.get_vec_normalize_env()
    assert theirs is env and env.obs_rms.count > 64
    theirs.save(str(tmp_path / "vecnormalize.pkl"))
    ours = VecNormalize.load(tmp_path / "vecnormalize.pkl", DummyVecEnv(cartpole_fns()))
    assert_same_normalizer(ours, theirs)
    theirs = Sb3VecNormalize.load(str(tmp_path / "vecnormalize.pkl"), Sb3DummyVecEnv(cartpole_fns()))
    for wrapper in (ours, theirs):  # as the RL Zoo's enjoy does
        wrapper.training = False
        wrapper.norm_reward = False
    ours.seed(7)
    theirs.seed(7)
    assert_same_steps(ours, theirs)


@pytest.mark.sb3
@needs_sb3
def test_vecenv_trains_and_sb3_loads(tmp_path):
    """The RL Zoo's way with vecenv's classes swapped in: PPO trains on vecenv's VecNormalize and the zoo calls
    ``save(".../vecnormalize.pkl")``; its ``enjoy`` under plain SB3 then loads the file with SB3's
    ``VecNormalize.load`` and gets the same configuration and statistics."""
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import DummyVecEnv as Sb3DummyVecEnv
    from stable_baselines3.common.vec_env import VecNormalize as Sb3VecNormalize

    env = VecNormalize(DummyVecEnv(cartpole_fns()), gamma=0.98, clip_reward=5.0)
    model = PPO("MlpPolicy", env, n_steps=32, batch_size=32, n_epochs=1, seed=0, device="cpu")
    model.learn(64)
    ours = model.get_vec_normalize_env()
    assert ours is env and env.obs_rms.count > 64
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ours.save(str(tmp_path / "vecnormalize.pkl"))
    theirs = Sb3VecNormalize.load(str(tmp_path / "vecnormalize.pkl"), Sb3DummyVecEnv(cartpole_fns()))
    assert type(theirs) is Sb3VecNormalize
    assert_same_normalizer(theirs, ours)
    assert (theirs.gamma, theirs.clip_reward, theirs.training) == (0.98, 5.0, True)
    again = VecNormalize.load(tmp_path / "vecnormalize.pkl", DummyVecEnv(cartpole_fns()))
    for wrapper in (again, theirs):
        wrapper.training = False
        wrapper.norm_reward = False
    again.seed(7)
    theirs.seed(7)
    assert_same_steps(again, theirs)


def _numpy1_bit_generator_ctor(bit_generator_name: Any = "MT19937") -> Any:
    """NumPy 1.x's ``numpy.random._pickle.__bit_generator_ctor``: a bit generator's name only."""
    if not isinstance(bit_generator_name, str):
        raise ValueError(f"{bit_generator_name} is not a known BitGenerator module.")
    return getattr(np.random, bit_generator_name)()


def _numpy1_generator_ctor(bit_generator_name: Any = "MT19937") -> Any:
    """NumPy 1.21-1.23's ``numpy.random._pickle.__generator_ctor`` (a name, one argument)."""
    return np.random.Generator(_numpy1_bit_generator_ctor(bit_generator_name))


def test_numpy_1_reads_the_generators_of_a_numpy_2_pickle(monkeypatch):
    """SB3 files written with NumPy 2 name each space's bit generator by its class and pickle its state with its
    seed sequence; with NumPy 1.x's constructors (which take names only) they are still read, and the statistics
    are those saved."""
    import numpy.random._pickle as numpy_pickle

    from vecenv.wrappers import sb3_pickle
    from vecenv.wrappers.numpy1_pickles import numpy1_bit_generator_state

    expected = VecNormalize.load(DATA / "sb3_cartpole_box.pkl", sb3_venv("cartpole")).obs_rms.mean
    monkeypatch.setattr(numpy_pickle, "__bit_generator_ctor", _numpy1_bit_generator_ctor)
    monkeypatch.setattr(numpy_pickle, "__generator_ctor", _numpy1_generator_ctor)
    with pytest.raises(ValueError, match="not a readable pickle"):  # NumPy 1.x's constructors alone
        VecNormalize.load(DATA / "sb3_cartpole_box.pkl", sb3_venv("cartpole"))
    monkeypatch.setattr(sb3_pickle, "NUMPY_1", True)
    loaded = VecNormalize.load(DATA / "sb3_cartpole_box.pkl", sb3_venv("cartpole"))
    np.testing.assert_array_equal(loaded.obs_rms.mean, expected)
    state = np.random.PCG64(3).state
    assert numpy1_bit_generator_state((state, np.random.SeedSequence(3))) is state
    assert numpy1_bit_generator_state(state) is state


@pytest.mark.parametrize("name", ["stats.npz", "stats.pkl", "sb3"])
def test_loaded_reward_statistics_are_numbers(name, tmp_path):
    """The reward statistics come back as float64 NumPy scalars, as SB3's unpickled ones and a trained
    ``RunningMeanStd``'s are (not 0-d arrays), from either format and from SB3's file; so does a pickle vecenv
    writes for SB3."""
    if name == "sb3":
        path = DATA / "sb3_cartpole_box.pkl"
    else:
        path = tmp_path / name
        trained = VecNormalize(sb3_venv("cartpole"))
        trained.reset()
        trained.step(np.zeros(trained.num_envs, dtype=np.int64))
        trained.save(path)
    loaded = VecNormalize.load(path, sb3_venv("cartpole"))
    assert type(loaded.ret_rms.mean) is np.float64 and type(loaded.ret_rms.var) is np.float64
    assert isinstance(loaded.obs_rms.mean, np.ndarray) and loaded.obs_rms.mean.shape == (4,)  # type: ignore[union-attr]
