"""NumPy 1.x reading the random generators of pickles written with NumPy 2 (SB3's ``VecNormalize`` files hold
the spaces' generators): NumPy 2 names a bit generator by its class and pickles its state with its seed
sequence, which NumPy 1.x's constructors and ``__setstate__`` do not take. From NumPy 1.24: before it, NumPy
cannot read a NumPy 2 seed sequence (its pickle's checksum differs), whatever vecenv does."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["NUMPY_1", "numpy1_bit_generator_state", "numpy1_generator_ctors"]

#: whether the NumPy installed is 1.x
NUMPY_1 = np.lib.NumpyVersion(np.__version__) < "2.0.0"


def numpy1_generator_ctors(allowed: dict[tuple[str, str], Any]) -> None:
    """Replace the allowed ``numpy.random._pickle`` constructors by ones that also take what NumPy 2 pickles pass:
    a bit generator's class (``__bit_generator_ctor``; only NumPy's bit generator classes) or an instance
    (``__generator_ctor``).

    :param allowed: the restricted unpickler's globals, changed in place.
    """
    module = "numpy.random._pickle"
    bit_generator_ctor = allowed.get((module, "__bit_generator_ctor"))
    generator_ctor = allowed.get((module, "__generator_ctor"))
    if bit_generator_ctor is None or generator_ctor is None:
        return

    def bit_generator(bit_generator: Any = "MT19937") -> Any:
        if isinstance(bit_generator, type) and issubclass(bit_generator, np.random.BitGenerator):
            return bit_generator()
        return bit_generator_ctor(bit_generator)

    def generator(bit_generator_name: Any = "MT19937", bit_generator_ctor: Any = bit_generator) -> Any:
        if isinstance(bit_generator_name, np.random.BitGenerator):
            return np.random.Generator(bit_generator_name)
        return generator_ctor(bit_generator_name)  # (before NumPy 1.24 it takes the name alone)

    allowed[(module, "__bit_generator_ctor")] = bit_generator
    allowed[(module, "__generator_ctor")] = generator


def numpy1_bit_generator_state(state: Any) -> Any:
    """A bit generator's pickled state as NumPy 1.x's ``__setstate__`` takes it: the state dict of NumPy 2's
    ``(state, seed_sequence)`` pair (the seed sequence only matters for spawning child generators)."""
    if isinstance(state, tuple) and len(state) == 2 and isinstance(state[0], dict):
        return state[0]
    return state
