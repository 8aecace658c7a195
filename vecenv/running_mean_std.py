"""Running mean and variance of a stream of arrays (Stable-Baselines3's ``RunningMeanStd``).

Batches are merged with the parallel algorithm of Chan et al.
(https://en.wikipedia.org/wiki/Algorithms_for_calculating_variance#Parallel_algorithm), so feeding
the data in any split into batches gives the same statistics as one pass over all of it, up to
floating-point rounding. Statistics are kept in float64. Also here: the batch arithmetic of
:class:`~vecenv.VecNormalize` that must give numpy's results to the bit (a batch's moments, the clip).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["RunningMeanStd", "clip_symmetric"]


class RunningMeanStd:
    """Mean and (population) variance of all samples seen so far, element-wise over ``shape``.

    The statistics start as ``mean = 0``, ``var = 1`` with weight ``count = epsilon``: a tiny prior
    that keeps the first division finite. Semantics and arithmetic follow SB3 exactly.

    :param epsilon: the initial ``count`` (weight of the prior ``mean = 0``, ``var = 1``).
    :param shape: the shape of ONE sample, e.g. ``(4,)`` for CartPole observations, ``()`` for rewards.

    >>> rms = RunningMeanStd(epsilon=0.0, shape=(2,))
    >>> rms.update(np.array([[1.0, 10.0], [3.0, 30.0]]))
    >>> rms.mean, rms.var, rms.count
    (array([ 2., 20.]), array([  1., 100.]), 2.0)
    """

    def __init__(self, epsilon: float = 1e-4, shape: tuple[int, ...] = ()) -> None:
        #: float64 array of shape ``shape``.
        self.mean: np.ndarray = np.zeros(shape, np.float64)
        #: float64 array of shape ``shape`` (population variance, ``ddof=0``).
        self.var: np.ndarray = np.ones(shape, np.float64)
        #: number of samples seen, plus ``epsilon``.
        self.count: float = epsilon

    def __repr__(self) -> str:
        return f"RunningMeanStd(shape={self.mean.shape}, count={self.count!r})"

    def copy(self) -> RunningMeanStd:
        """Return an independent copy (new arrays, ``count`` as a Python float).

        :return: a new :class:`RunningMeanStd` with the same statistics.
        """
        new_object = RunningMeanStd(shape=self.mean.shape)
        new_object.mean = self.mean.copy()
        new_object.var = self.var.copy()
        new_object.count = float(self.count)
        return new_object

    def combine(self, other: RunningMeanStd) -> None:
        """Merge the statistics of ``other`` into these, as if its samples had been seen here too.

        :param other: statistics of the same ``shape``; left unchanged.
        """
        self.update_from_moments(other.mean, other.var, other.count)

    def update(self, arr: Any) -> None:
        """Add a batch of samples.

        :param arr: array of shape ``(batch_size, *shape)``; the first axis indexes samples.
        """
        arr = np.asarray(arr)
        if arr.dtype.kind == "f" and arr.ndim and arr.shape[0] and arr.dtype.itemsize >= 4:
            batch_mean, batch_var = _float_moments(arr)
        else:  # (integers and bools accumulate in float64, float16 in float32, an empty batch warns: numpy's own)
            batch_mean, batch_var = np.mean(arr, axis=0), np.var(arr, axis=0)
        self.update_from_moments(batch_mean, batch_var, arr.shape[0])

    def update_from_moments(self, batch_mean: Any, batch_var: Any, batch_count: float) -> None:
        """Add a batch given only its moments.

        :param batch_mean: mean of the batch, shape ``shape``.
        :param batch_var: population variance of the batch, shape ``shape``.
        :param batch_count: number of samples in the batch.
        """
        delta = batch_mean - self.mean
        tot_count = self.count + batch_count

        new_mean = self.mean + delta * batch_count / tot_count
        m_a = self.var * self.count
        m_b = batch_var * batch_count
        m_2 = m_a + m_b + np.square(delta) * self.count * batch_count / tot_count

        self.mean = new_mean
        self.var = m_2 / tot_count
        self.count = batch_count + self.count


_add_reduce = np.add.reduce


def _float_moments(arr: np.ndarray) -> tuple[Any, Any]:
    """``(np.mean(arr, axis=0), np.var(arr, axis=0))`` of a non-empty float32 / float64 batch, bit for bit: the
    ufunc calls numpy's ``_mean`` and ``_var`` make for such an array, without their generic checks (which cost more
    than the arithmetic on a step's batch: VecNormalize updates two statistics per step)."""
    count = np.intp(arr.shape[0])
    total = _add_reduce(arr, axis=0)
    if isinstance(total, np.ndarray):
        mean = np.true_divide(total, count, out=total, casting="unsafe")
    else:  # a batch of scalars: numpy returns a scalar of the array's type
        mean = total.dtype.type(total / count)
    centred = _add_reduce(arr, axis=0, keepdims=True)
    centred = np.true_divide(centred, count, out=centred, casting="unsafe")
    deviations = np.subtract(arr, centred)
    np.square(deviations, out=deviations)
    spread = _add_reduce(deviations, axis=0)
    if isinstance(spread, np.ndarray):
        var = np.true_divide(spread, count, out=spread, casting="unsafe")
    else:
        var = spread.dtype.type(spread / count)
    return mean, var


def clip_symmetric(values: Any, bound: float) -> Any:
    """``np.clip(values, -bound, bound)``, bit for bit (NaN stays NaN); in place for a float array, which
    :class:`~vecenv.VecNormalize` passes fresh (two ufunc calls cost less than ``np.clip``'s dispatch on a step's
    batch).

    :param values: an array (a float array is overwritten) or a scalar.
    :param bound: the clip bound, ``> 0``.
    :return: the clipped values, ``values`` itself for a float array.
    """
    if type(values) is np.ndarray and values.dtype.kind == "f":
        np.maximum(values, -bound, out=values)
        return np.minimum(values, bound, out=values)
    return np.clip(values, -bound, bound)
