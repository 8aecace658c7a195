""":class:`~vecenv.VecNormalize` across a stack of wrappers (Stable-Baselines3's helpers): finding it in a stack,
copying its statistics to an evaluation env's, and the warning for a stack normalized twice."""

from __future__ import annotations

import copy
import warnings
from typing import TYPE_CHECKING, Any

from vecenv.base import VecEnv
from vecenv.wrappers.base import VecEnvWrapper, is_one_of, stack_classes, unwrap_vec_wrapper, wrapper_below

if TYPE_CHECKING:
    from vecenv.wrappers.vec_normalize import VecNormalize

__all__ = ["sync_envs_normalization", "unwrap_vec_normalize", "warn_if_normalized"]


def warn_if_normalized(venv: VecEnv, vec_normalize_class: type[VecNormalize]) -> None:
    """Warn if ``venv`` is already normalized (by vecenv's or SB3's ``VecNormalize``): wrapping it again would
    normalize observations and rewards twice."""
    existing = wrapper_below(venv, stack_classes(vec_normalize_class))
    if existing is not None:
        warnings.warn(
            f"The env being wrapped in VecNormalize is already normalized by a "
            f"{type(existing).__module__}.{type(existing).__name__} wrapper below it: observations and rewards would "
            "be normalized twice. Wrap the unnormalized env instead, or use unwrap_vec_normalize(env) to reach the "
            "existing wrapper.",
            UserWarning,
            stacklevel=3,
        )


def unwrap_vec_normalize(env: VecEnv) -> VecNormalize | None:
    """Return the outermost :class:`VecNormalize` in the wrapper stack of ``env`` (SB3 semantics).

    :param env: a vectorized environment, wrapped or not.
    :return: the first :class:`VecNormalize` walking down from ``env``, or None.
    """
    from vecenv.wrappers.vec_normalize import VecNormalize  # (that module imports this one)

    return unwrap_vec_wrapper(env, VecNormalize)


def sync_envs_normalization(env: VecEnv, eval_env: VecEnv) -> None:
    """Copy the normalization statistics of ``env`` into ``eval_env`` (deep copies; SB3 semantics).

    Both wrapper stacks are walked in step (vecenv's wrappers and SB3's): wherever ``env`` has a
    :class:`VecNormalize` (or SB3's), ``eval_env`` must have one at the same depth, and gets a copy of its
    ``obs_rms`` (if it has one) and ``ret_rms``. Other settings (``training``, ``norm_reward``, ...) are not touched.

    :param env: the training env.
    :param eval_env: the evaluation env, wrapped the same way.
    :raises AssertionError: if ``eval_env`` is not wrapped like ``env`` (as SB3).
    """
    from vecenv.wrappers.vec_normalize import VecNormalize  # (that module imports this one)

    wrappers, normalizers = stack_classes(VecEnvWrapper), stack_classes(VecNormalize)
    env_tmp: Any = env
    eval_env_tmp: Any = eval_env
    while is_one_of(env_tmp, wrappers):
        assert is_one_of(eval_env_tmp, wrappers), (
            "Error while synchronizing normalization stats: expected the eval env to be "
            f"a VecEnvWrapper but got {eval_env_tmp} instead. "
            "This is probably due to the training env not being wrapped the same way as the evaluation env. "
            f"Training env type: {env_tmp}."
        )
        if is_one_of(env_tmp, normalizers):
            assert is_one_of(eval_env_tmp, normalizers), (
                "Error while synchronizing normalization stats: expected the eval env to be "
                f"a VecNormalize but got {eval_env_tmp} instead. "
                "This is probably due to the training env not being wrapped the same way as the evaluation env. "
                f"Training env type: {env_tmp}."
            )
            if "obs_rms" in env_tmp.__dict__:
                eval_env_tmp.obs_rms = copy.deepcopy(env_tmp.obs_rms)
            eval_env_tmp.ret_rms = copy.deepcopy(env_tmp.ret_rms)
        env_tmp = env_tmp.venv
        eval_env_tmp = eval_env_tmp.venv
