"""Vectorized-environment wrappers (one module per wrapper) and the :class:`VecEnvWrapper` base."""

from vecenv.wrappers.base import VecEnvWrapper, VecEnvWrapperT, is_vecenv_wrapped, unwrap_vec_wrapper

__all__ = ["VecEnvWrapper", "VecEnvWrapperT", "is_vecenv_wrapped", "unwrap_vec_wrapper"]
