"""The vector envs over pluggable workers, by their module of earlier versions (import path kept).

:class:`WorkerVecEnv` (``worker_vec_env.py``) holds the buffers, the async state and the index bookkeeping;
:class:`DummyVecEnv` (``dummy_vec_env.py``) and :class:`SubprocVecEnv` (``subproc_vec_env.py``, with
:func:`default_n_workers` and :func:`split_groups`) only decide where the workers run.
"""

from __future__ import annotations

from vecenv.dummy_vec_env import DummyVecEnv
from vecenv.subproc_vec_env import SubprocVecEnv, default_n_workers, split_groups
from vecenv.worker_vec_env import AsyncState, CallRequests, ResetRequests, WorkerVecEnv

__all__ = [
    "AsyncState",
    "CallRequests",
    "DummyVecEnv",
    "ResetRequests",
    "SubprocVecEnv",
    "WorkerVecEnv",
    "default_n_workers",
    "split_groups",
]
