"""Adapters between vecenv's VecEnv and other vector-env APIs (Gymnasium 1.x ``VectorEnv``, EnvPool).

See ``docs/adapters.md``.
"""

from vecenv.adapters.gymnasium_to_vecenv import GymnasiumToVecEnv, from_gymnasium
from vecenv.adapters.vecenv_to_gymnasium import VecEnvToGymnasium, to_gymnasium

__all__ = ["GymnasiumToVecEnv", "VecEnvToGymnasium", "from_gymnasium", "to_gymnasium"]
