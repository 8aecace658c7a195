"""Adapters between vecenv's Stable-Baselines3-style :class:`~vecenv.VecEnv` and Gymnasium's ``VectorEnv``.

- :func:`to_gymnasium` / :class:`VecEnvToGymnasium`: a vecenv ``VecEnv`` (any backend, any wrapper
  stack) seen as a ``gymnasium.vector.VectorEnv`` in ``AutoresetMode.SAME_STEP``.
- :func:`from_gymnasium` / :class:`GymnasiumToVecEnv`: a Gymnasium ``VectorEnv`` (in any autoreset mode)
  or an EnvPool gymnasium-style pool seen as a vecenv ``VecEnv`` with SB3's semantics, so that vecenv's
  wrappers and SB3's algorithms apply.

See ``docs/adapters.md`` for the rules and the limitations.
"""

from vecenv.adapters.gymnasium_to_vecenv import GymnasiumToVecEnv, from_gymnasium
from vecenv.adapters.vecenv_to_gymnasium import VecEnvToGymnasium, to_gymnasium

__all__ = ["GymnasiumToVecEnv", "VecEnvToGymnasium", "from_gymnasium", "to_gymnasium"]
