"""The engine behind every vector env over :class:`~vecenv.workers.Worker` groups, one concern per module.

:class:`~vecenv.worker_vec_env.WorkerVecEnv` is assembled from these layers, each built on the one before:

- :mod:`~vecenv.engine.replies`: waiting for workers' replies, collecting them in arrival order;
- :mod:`~vecenv.engine.checks`: checks of the constructor arguments the backends share;
- :mod:`~vecenv.engine.core`: the batch buffers, the index bookkeeping, the async state, staged seeds / options;
- :mod:`~vecenv.engine.recovery`: results held after a failed step, and restarts of dead workers;
- :mod:`~vecenv.engine.partial_batches`: EnvPool's ``send`` / ``recv`` / ``async_reset``;
- :mod:`~vecenv.engine.calls`: calls on sub-envs (``get_attr``, ``env_method``, ...).

:mod:`vecenv.worker_vec_env` adds full-batch steps and resets, and the engine API's reset halves.
"""
