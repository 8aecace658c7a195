"""vecenv: fast, robust vectorized reinforcement-learning environments.

A drop-in for ``stable_baselines3.common.vec_env``: change the import, keep your code.
"""

from vecenv.base import CloudpickleWrapper, VecEnv, VecEnvIndices, VecEnvObs, VecEnvStepReturn, tile_images
from vecenv.env_util import make_vec_env
from vecenv.errors import (
    ActionsWithoutEnvAxisError,
    AlreadyPendingCallError,
    ClosedVecEnvError,
    NoAsyncCallError,
    UncopyableInfoError,
    VecEnvError,
    WorkerDiedError,
)
from vecenv.monitor import (
    LoadMonitorResultsError,
    MissingExtraError,
    Monitor,
    ResultsWriter,
    get_monitor_files,
    load_results,
)
from vecenv.plotting import plot_results
from vecenv.ray_vec_env import RayVecEnv
from vecenv.running_mean_std import RunningMeanStd
from vecenv.spaces import dict_to_obs, obs_space_info
from vecenv.stacked_observations import StackedObservations
from vecenv.stats import StepStats, WorkerStats
from vecenv.vec_env import DummyVecEnv, SubprocVecEnv
from vecenv.version import __version__
from vecenv.wrappers import VecEnvWrapper, VecEnvWrapperT, is_vecenv_wrapped, unwrap_vec_wrapper
from vecenv.wrappers.normalize_io import NormalizationFileError
from vecenv.wrappers.vec_check_nan import VecCheckNan
from vecenv.wrappers.vec_extract_dict_obs import VecExtractDictObs
from vecenv.wrappers.vec_frame_stack import VecFrameStack
from vecenv.wrappers.vec_monitor import VecMonitor
from vecenv.wrappers.vec_normalize import VecNormalize, sync_envs_normalization, unwrap_vec_normalize
from vecenv.wrappers.vec_transpose import VecTransposeImage
from vecenv.wrappers.vec_video_recorder import VecVideoRecorder

__all__ = [
    "ActionsWithoutEnvAxisError",
    "AlreadyPendingCallError",
    "ClosedVecEnvError",
    "CloudpickleWrapper",
    "DummyVecEnv",
    "LoadMonitorResultsError",
    "MissingExtraError",
    "Monitor",
    "NoAsyncCallError",
    "NormalizationFileError",
    "RayVecEnv",
    "ResultsWriter",
    "RunningMeanStd",
    "StackedObservations",
    "StepStats",
    "SubprocVecEnv",
    "UncopyableInfoError",
    "VecCheckNan",
    "VecEnv",
    "VecEnvError",
    "VecEnvIndices",
    "VecEnvObs",
    "VecEnvStepReturn",
    "VecEnvWrapper",
    "VecEnvWrapperT",
    "VecExtractDictObs",
    "VecFrameStack",
    "VecMonitor",
    "VecNormalize",
    "VecTransposeImage",
    "VecVideoRecorder",
    "WorkerDiedError",
    "WorkerStats",
    "__version__",
    "dict_to_obs",
    "get_monitor_files",
    "is_vecenv_wrapped",
    "load_results",
    "make_vec_env",
    "obs_space_info",
    "plot_results",
    "sync_envs_normalization",
    "tile_images",
    "unwrap_vec_normalize",
    "unwrap_vec_wrapper",
]

# Let Stable-Baselines3's isinstance checks accept vecenv objects (never imports SB3 itself).
from vecenv import sb3_compat as _sb3_compat

_sb3_compat.install()
