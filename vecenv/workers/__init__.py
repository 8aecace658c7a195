"""How a vector env reaches its sub-envs: in this process, or in worker processes."""

from vecenv.workers.base import Worker, shutdown_workers, split_groups
from vecenv.workers.in_process import InProcessWorker
from vecenv.workers.subproc import SubprocWorker

__all__ = ["InProcessWorker", "SubprocWorker", "Worker", "shutdown_workers", "split_groups"]
