"""RunningMeanStd against numpy's mean / var of all the data, whatever the split into batches."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from vecenv.running_mean_std import RunningMeanStd

EPS = 1e-4


def with_prior(data: np.ndarray, epsilon: float = EPS) -> tuple[np.ndarray, np.ndarray, float]:
    """Mean / variance of ``data`` pooled with the prior (mean 0, var 1, weight ``epsilon``), computed directly."""
    x = np.asarray(data, dtype=np.float64)
    n = x.shape[0]
    mean = x.sum(axis=0) / (n + epsilon)
    var = (epsilon * (1.0 + mean**2) + ((x - mean) ** 2).sum(axis=0)) / (n + epsilon)
    return mean, var, n + epsilon


def split(data: np.ndarray, cuts: list[int]) -> list[np.ndarray]:
    bounds = [0, *sorted(set(cuts)), data.shape[0]]
    return [data[a:b] for a, b in itertools.pairwise(bounds) if b > a]


samples = st.integers(1, 3).flatmap(
    lambda dim: hnp.arrays(
        np.float64,
        st.tuples(st.integers(1, 40), st.just(dim)),
        elements=st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False),
    )
)


def test_initial_state():
    rms = RunningMeanStd(shape=(2, 3))
    assert rms.mean.shape == rms.var.shape == (2, 3)
    assert rms.mean.dtype == rms.var.dtype == np.float64
    np.testing.assert_array_equal(rms.mean, 0.0)
    np.testing.assert_array_equal(rms.var, 1.0)
    assert rms.count == EPS
    scalar = RunningMeanStd(epsilon=0.5)
    assert scalar.mean.shape == () and scalar.count == 0.5


@settings(max_examples=60, deadline=None)
@given(data=samples, cuts=st.lists(st.integers(1, 39), max_size=6))
def test_any_split_gives_numpy_mean_and_var(data: np.ndarray, cuts: list[int]):
    """epsilon=0: exactly numpy's mean / population variance of the concatenated data."""
    rms = RunningMeanStd(epsilon=0.0, shape=data.shape[1:])
    for batch in split(data, [c for c in cuts if c < data.shape[0]]):
        rms.update(batch)
    np.testing.assert_allclose(rms.mean, data.mean(axis=0), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(rms.var, data.var(axis=0), rtol=1e-9, atol=1e-7)
    assert rms.count == data.shape[0]


@settings(max_examples=60, deadline=None)
@given(data=samples, cuts=st.lists(st.integers(1, 39), max_size=6))
def test_default_epsilon_is_a_prior_of_weight_epsilon(data: np.ndarray, cuts: list[int]):
    rms = RunningMeanStd(shape=data.shape[1:])
    for batch in split(data, [c for c in cuts if c < data.shape[0]]):
        rms.update(batch)
    mean, var, count = with_prior(data)
    np.testing.assert_allclose(rms.mean, mean, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(rms.var, var, rtol=1e-9, atol=1e-7)
    assert rms.count == pytest.approx(count)


@settings(max_examples=40, deadline=None)
@given(data=samples, cut=st.integers(1, 39))
def test_combine_equals_one_pass(data: np.ndarray, cut: int):
    cut = min(cut, data.shape[0])
    a, b = RunningMeanStd(shape=data.shape[1:]), RunningMeanStd(shape=data.shape[1:])
    a.update(data[:cut])
    if cut < data.shape[0]:
        b.update(data[cut:])
    b_before = (b.mean.copy(), b.var.copy(), b.count)
    a.combine(b)
    # two priors of weight epsilon were merged: compare with the direct formula for weight 2 * epsilon
    mean, var, count = with_prior(data, epsilon=2 * EPS)
    np.testing.assert_allclose(a.mean, mean, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(a.var, var, rtol=1e-9, atol=1e-7)
    assert a.count == pytest.approx(count)
    np.testing.assert_array_equal(b.mean, b_before[0])
    np.testing.assert_array_equal(b.var, b_before[1])
    assert b.count == b_before[2]


def test_update_from_moments_matches_update():
    data = np.arange(12, dtype=np.float64).reshape(6, 2) ** 1.5
    by_update, by_moments = RunningMeanStd(shape=(2,)), RunningMeanStd(shape=(2,))
    by_update.update(data)
    by_moments.update_from_moments(data.mean(axis=0), data.var(axis=0), 6)
    np.testing.assert_array_equal(by_update.mean, by_moments.mean)
    np.testing.assert_array_equal(by_update.var, by_moments.var)
    assert by_update.count == by_moments.count == 6 + EPS


def test_scalar_stream_like_rewards():
    rms = RunningMeanStd(shape=())
    rewards = [np.array([1.0, 2.0]), np.array([3.0, -1.0]), np.array([0.5, 0.5])]
    for batch in rewards:
        rms.update(batch)
    mean, var, _ = with_prior(np.concatenate(rewards))
    assert rms.mean.shape == ()
    assert rms.mean == pytest.approx(mean) and rms.var == pytest.approx(var)


def test_float32_input_gives_float64_statistics():
    rms = RunningMeanStd(shape=(3,))
    rms.update(np.ones((4, 3), dtype=np.float32))
    assert rms.mean.dtype == np.float64 and rms.var.dtype == np.float64


def test_copy_is_independent():
    rms = RunningMeanStd(shape=(2,))
    rms.update(np.array([[1.0, 2.0], [3.0, 5.0]]))
    rms.count = np.float64(rms.count)
    clone = rms.copy()
    assert type(clone.count) is float and clone.count == rms.count
    np.testing.assert_array_equal(clone.mean, rms.mean)
    np.testing.assert_array_equal(clone.var, rms.var)
    clone.update(np.array([[100.0, 100.0]]))
    assert clone.mean[0] != rms.mean[0]
    assert rms.count == pytest.approx(2 + EPS)


@settings(max_examples=150, deadline=None)
@given(
    hnp.arrays(
        st.sampled_from([np.float32, np.float64, np.int64, np.uint8, np.bool_, np.float16]),
        hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=9),
        elements={"allow_nan": True, "allow_infinity": True},
    )
)
def test_update_adds_numpys_own_batch_mean_and_var_bit_for_bit(batch: np.ndarray):
    """A batch's moments (computed without numpy's generic mean / var for float batches) are numpy's
    ``np.mean(batch, axis=0)`` and ``np.var(batch, axis=0)`` exactly, NaN and infinities included: the statistics
    after ``update`` equal those of ``update_from_moments`` given numpy's moments."""
    updated, expected = RunningMeanStd(shape=batch.shape[1:]), RunningMeanStd(shape=batch.shape[1:])
    with np.errstate(all="ignore"):
        updated.update(batch)
        expected.update_from_moments(np.mean(batch, axis=0), np.var(batch, axis=0), batch.shape[0])
    for got, want in ((updated.mean, expected.mean), (updated.var, expected.var)):
        assert type(got) is type(want) and got.dtype == want.dtype and got.shape == want.shape
        assert np.array_equal(got, want, equal_nan=True)
    assert updated.count == expected.count
