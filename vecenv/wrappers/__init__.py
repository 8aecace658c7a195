"""Vectorized-environment wrappers (one module per wrapper) and the :class:`VecEnvWrapper` base."""

from vecenv.wrappers.base import VecEnvWrapper

__all__ = ["VecEnvWrapper"]
