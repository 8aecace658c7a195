"""Gymnasium's vector API on vecenv's machinery: drop-ins for ``gymnasium.vector.SyncVectorEnv`` / ``AsyncVectorEnv``.

:class:`SyncVectorEnv` and :class:`AsyncVectorEnv` are :class:`gymnasium.vector.VectorEnv` subclasses with the
constructors, methods, return values and errors of Gymnasium 1.x's classes of the same names (change
``gymnasium.vector.AsyncVectorEnv`` to ``vecenv.gymnasium.AsyncVectorEnv``, keep your code). Underneath, the
envs run in vecenv's :class:`~vecenv.DummyVecEnv` (in the calling process) and :class:`~vecenv.SubprocVecEnv`
(several envs per worker process, observations, rewards, flags and actions in shared memory), with
Gymnasium's float64 rewards and nested Dict / Tuple spaces, in any :class:`gymnasium.vector.AutoresetMode`.

The other names of ``gymnasium.vector`` (:class:`AutoresetMode`, :class:`VectorEnv`, the ``Vector*Wrapper`` base
classes and the ``utils`` module) are re-exported as they are (the very same objects), so
``from gymnasium.vector import AsyncVectorEnv, AutoresetMode`` becomes
``from vecenv.gymnasium import AsyncVectorEnv, AutoresetMode``.

Besides Gymnasium's API both classes offer vecenv's :meth:`~SyncVectorEnv.seed` and
:meth:`~SyncVectorEnv.set_options`: seeds / options for each env's NEXT reset, also honoured when that reset is
an automatic one. See ``docs/gymnasium-api.md`` for the rules, what is refused, and the differences from Gymnasium.
"""

from gymnasium.vector import (
    AutoresetMode,
    VectorActionWrapper,
    VectorEnv,
    VectorObservationWrapper,
    VectorRewardWrapper,
    VectorWrapper,
    utils,
)

from vecenv.gymnasium.async_vector_env import AsyncVectorEnv
from vecenv.gymnasium.sync_vector_env import SyncVectorEnv

__all__ = [
    "AsyncVectorEnv",
    "AutoresetMode",
    "SyncVectorEnv",
    "VectorActionWrapper",
    "VectorEnv",
    "VectorObservationWrapper",
    "VectorRewardWrapper",
    "VectorWrapper",
    "utils",
]
