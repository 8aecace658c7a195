"""Running normalization of observations and rewards (Stable-Baselines3's ``VecNormalize``), and its helpers.

The wrapper follows SB3 2.9 call for call. :meth:`VecNormalize.save` writes the pickle SB3's
``save`` writes when the file name ends in ``.pkl`` (the name SB3 code, the RL Zoo and model hubs
use), so SB3 loads it; any other name gets a pickle-free file (numpy arrays + JSON, described in
:mod:`vecenv.wrappers.normalize_format`) that :meth:`VecNormalize.load` reads without ever executing
code. ``format=`` forces either. :meth:`VecNormalize.load` reads both, SB3's pickles through the
restricted unpickler of :mod:`vecenv.wrappers.sb3_pickle` (as :meth:`VecNormalize.load_sb3` does).
"""

from __future__ import annotations

import copy
import inspect
import logging
import os
import warnings
from collections.abc import Callable
from typing import Any, Literal, TypeVar, cast, overload

import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode

from vecenv.atomic import atomic_write_bytes
from vecenv.base import VecEnv, VecEnvObs, VecEnvStepReturn
from vecenv.running_mean_std import RunningMeanStd, clip_symmetric
from vecenv.spaces import is_image_space
from vecenv.wrappers.base import VecEnvWrapper, autoreset_mode_of, resets_next
from vecenv.wrappers.normalize_format import read_normalization_file, write_normalization_file
from vecenv.wrappers.normalize_stacks import sync_envs_normalization, unwrap_vec_normalize, warn_if_normalized
from vecenv.wrappers.normalize_state import (
    NormalizationFileError,
    NormalizationState,
    ObsRms,
    check_space_matches,
    describe_space,
)
from vecenv.wrappers.sb3_pickle import (
    Sb3FormatError,
    encode_sb3_pickle,
    is_pickle,
    read_sb3_state,
    write_sb3_pickle,
)

__all__ = ["NormalizationFileError", "VecNormalize", "sync_envs_normalization", "unwrap_vec_normalize"]

logger = logging.getLogger(__name__)

#: What :meth:`VecNormalize.save` can write: vecenv's pickle-free file, or Stable-Baselines3's pickle.
SaveFormat = Literal["vecenv", "sb3"]
_SAVE_FORMATS = ("vecenv", "sb3")
#: The file-name ending (any case) for which :meth:`VecNormalize.save` writes SB3's pickle by default.
SB3_SUFFIX = ".pkl"
#: :meth:`VecNormalize.load` called on a subclass returns that subclass
VecNormalizeT = TypeVar("VecNormalizeT", bound="VecNormalize")


class VecNormalize(VecEnvWrapper):
    """Normalize observations and/or rewards with running statistics (SB3 semantics).

    Observations are standardized with the running mean and variance of all observations seen while
    ``training``: ``clip((obs - mean) / sqrt(var + epsilon), -clip_obs, clip_obs)`` as float32.
    Rewards are divided by the running standard deviation of the discounted return
    ``returns = returns * gamma + reward`` (reset to 0 at episode end) and clipped to ``±clip_reward``.
    ``infos[i]["terminal_observation"]`` is normalized exactly like the observations.

    With ``norm_obs=True`` the observation space must be a Box or a Dict of Boxes (the keys in
    ``norm_obs_keys``). An image sub-space (uint8 ``0..255`` with 3 dimensions) that is normalized is
    replaced in :attr:`observation_space` by ``Box(-clip_obs, clip_obs, shape, float32)`` (vecenv
    copies a Dict space instead of changing the wrapped env's space in place as SB3 does).

    :param venv: the vectorized environment to wrap.
    :param training: whether :meth:`reset` and :meth:`step_wait` update the statistics (set False to evaluate).
    :param norm_obs: whether to normalize observations.
    :param norm_reward: whether to normalize rewards.
    :param clip_obs: normalized observations are clipped to ``[-clip_obs, clip_obs]``.
    :param clip_reward: normalized rewards are clipped to ``[-clip_reward, clip_reward]``.
    :param gamma: discount factor of the returns whose variance scales the rewards.
    :param epsilon: added to the variances before the square root, to avoid dividing by zero.
    :param norm_obs_keys: for a Dict observation space, the keys to normalize (None: all keys).
    :raises ValueError: (only with ``norm_obs``) if the observation space is neither a Box nor a Dict,
        if a key to normalize is not a Box, or if ``norm_obs_keys`` is given for a Box space.
    :raises KeyError: if a key of ``norm_obs_keys`` is not in the Dict observation space.
    """

    obs_spaces: dict[str, spaces.Space]
    old_obs: VecEnvObs

    def __init__(
        self,
        venv: VecEnv,
        training: bool = True,
        norm_obs: bool = True,
        norm_reward: bool = True,
        clip_obs: float = 10.0,
        clip_reward: float = 10.0,
        gamma: float = 0.99,
        epsilon: float = 1e-8,
        norm_obs_keys: list[str] | None = None,
    ) -> None:
        warn_if_normalized(venv, VecNormalize)
        VecEnvWrapper.__init__(self, venv)
        self.norm_obs = norm_obs
        self.norm_obs_keys = norm_obs_keys
        if self.norm_obs:
            self._sanity_checks()
            self._init_obs_rms(clip_obs)

        self.ret_rms = RunningMeanStd(shape=())
        self.clip_obs = clip_obs
        self.clip_reward = clip_reward
        #: discounted return of each env's current episode, float64 ``(num_envs,)``.
        self.returns = np.zeros(self.num_envs)
        self.gamma = gamma
        self.epsilon = epsilon
        self.training = training
        self.norm_reward = norm_reward
        #: raw rewards of the last step, ``(num_envs,)`` in the vector env's dtype (float32, or the
        #: ``rewards_dtype`` of vecenv's backends; empty before the first step).
        self.old_reward = np.array([])
        self._follow_autoreset_mode(venv)

    def _follow_autoreset_mode(self, venv: VecEnv) -> None:
        # NEXT_STEP: the step after an episode end only resets the env; its return (0) is not a sample
        self._next_step = autoreset_mode_of(venv) is AutoresetMode.NEXT_STEP
        self._resetting = np.zeros(self.num_envs, dtype=bool)

    def _init_obs_rms(self, clip_obs: float) -> None:
        """Create ``obs_rms``; replace the image (sub-)spaces being normalized by float Boxes."""
        space = self.observation_space
        if isinstance(space, spaces.Dict):
            assert self.norm_obs_keys is not None
            image_keys = [key for key in self.norm_obs_keys if is_image_space(space[key])]
            if image_keys:
                # a copy: the wrapped env's space describes its own (raw) observations and must not change
                dict_space = copy.deepcopy(space)
                for key in image_keys:
                    dict_space.spaces[key] = self._float_box(space[key], clip_obs)
                self.observation_space = space = dict_space
            self.obs_spaces = space.spaces
            self.obs_rms: ObsRms = {key: RunningMeanStd(shape=self._shape(space[key])) for key in self.norm_obs_keys}
        else:
            self.obs_rms = RunningMeanStd(shape=self._shape(space))
            # a normalized image is no longer an image: say so, or a policy would rescale it again (SB3 #1214)
            if is_image_space(space):
                self.observation_space = self._float_box(space, clip_obs)

    @staticmethod
    def _shape(space: spaces.Space) -> tuple[int, ...]:
        assert space.shape is not None
        return space.shape

    @staticmethod
    def _float_box(space: spaces.Space, clip_obs: float) -> spaces.Box:
        return spaces.Box(low=-clip_obs, high=clip_obs, shape=space.shape, dtype=np.float32)

    def _sanity_checks(self) -> None:
        """Check that the observations to normalize are Boxes (SB3's checks and messages)."""
        if isinstance(self.observation_space, spaces.Dict):
            if self.norm_obs_keys is None:
                self.norm_obs_keys = list(self.observation_space.spaces.keys())
            for obs_key in self.norm_obs_keys:
                if obs_key not in self.observation_space.spaces:
                    raise KeyError(
                        f"norm_obs_keys names {obs_key!r}, which is not a key of the observation space; its keys are "
                        f"{list(self.observation_space.spaces.keys())}"
                    )
                if not isinstance(self.observation_space.spaces[obs_key], spaces.Box):
                    raise ValueError(
                        f"VecNormalize only supports `gym.spaces.Box` observation spaces but {obs_key} "
                        f"is of type {self.observation_space.spaces[obs_key]}. "
                        "You should probably explicitly pass the observation keys "
                        " that should be normalized via the `norm_obs_keys` parameter."
                    )
        elif isinstance(self.observation_space, spaces.Box):
            if self.norm_obs_keys is not None:
                raise ValueError("`norm_obs_keys` param is applicable only with `gym.spaces.Dict` observation spaces")
        else:
            raise ValueError(
                "VecNormalize only supports `gym.spaces.Box` and `gym.spaces.Dict` observation spaces, "
                f"not {self.observation_space}"
            )

    # --- pickling (SB3's rules) --------------------------------------------------------------------------

    def __getstate__(self) -> dict[str, Any]:
        """State for pickling / deep-copying: everything but ``venv``, ``class_attributes``, ``returns`` and what
        depends on the wrapped env's autoreset mode (set again by :meth:`set_venv`)."""
        state = self.__dict__.copy()
        for name in ("venv", "class_attributes", "returns", "_next_step", "_resetting"):
            state.pop(name, None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Restore a pickled state; call :meth:`set_venv` before using the wrapper."""
        if "norm_obs_keys" not in state and isinstance(state.get("observation_space"), spaces.Dict):
            state["norm_obs_keys"] = list(state["observation_space"].spaces.keys())
        assert "venv" not in state
        self.__dict__.update(state)
        self.venv = None  # type: ignore[assignment]

    def set_venv(self, venv: VecEnv) -> None:
        """Wrap ``venv`` (after unpickling or deep-copying, which drop the wrapped env).

        :param venv: the vectorized environment; its observation shapes must match the saved ones.
        :raises ValueError: if this wrapper already wraps an env, or if the observation shapes or Dict
            keys differ (the message names the key, the saved shape and the env's shape; SB3 raises
            AssertionError here).
        """
        if self.__dict__.get("venv") is not None:
            raise ValueError("Trying to set venv of already initialized VecNormalize wrapper.")
        check_space_matches(describe_space(self.observation_space), venv.observation_space)
        warn_if_normalized(venv, VecNormalize)
        self.venv = venv
        self.num_envs = venv.num_envs
        self.class_attributes = dict(inspect.getmembers(self.__class__))
        self.render_mode = venv.render_mode
        self.returns = np.zeros(self.num_envs)
        self._follow_autoreset_mode(venv)

    # --- stepping ------------------------------------------------------------------------------------------

    def step_wait(self) -> VecEnvStepReturn:
        """Step, update the statistics if ``training``, and normalize.

        :return: ``(obs, rewards, dones, infos)``: obs normalized (float32 for the normalized arrays / keys),
            rewards float32 ``(num_envs,)``, and ``infos[i]["terminal_observation"]`` normalized like obs.
        """
        obs, rewards, dones, infos = self.venv.step_wait()
        self.old_obs = obs
        self.old_reward = rewards

        if self.training and self.norm_obs:
            self._update_obs(obs)
        obs = self.normalize_obs(obs)

        if self.training:
            self._update_reward(rewards)
        rewards = self.normalize_reward(rewards)
        if self._next_step:  # the next step of these envs resets them: it adds no return sample
            self._resetting = resets_next(dones, infos)

        for idx, done in enumerate(dones):
            if done and "terminal_observation" in infos[idx]:
                infos[idx]["terminal_observation"] = self.normalize_obs(infos[idx]["terminal_observation"])

        self.returns[dones] = 0
        return obs, rewards, dones, infos

    def reset(self) -> np.ndarray | dict[str, np.ndarray]:
        """Reset all envs, zero the returns, update the observation statistics if ``training``.

        :return: the normalized first observations (typed as SB3's: an array or a dict of arrays; with
            ``norm_obs=False`` the observations of a Tuple space pass through as their tuple).
        """
        obs = self.venv.reset()
        self.old_obs = obs
        self.returns = np.zeros(self.num_envs)
        self._resetting = np.zeros(self.num_envs, dtype=bool)
        if self.training and self.norm_obs:
            self._update_obs(obs)
        return cast("np.ndarray | dict[str, np.ndarray]", self.normalize_obs(obs))

    def _update_obs(self, obs: VecEnvObs) -> None:
        obs_rms = self.obs_rms
        if isinstance(obs_rms, dict):
            assert isinstance(obs, dict)
            for key, rms in obs_rms.items():
                rms.update(obs[key])
        else:
            obs_rms.update(obs)

    def _update_reward(self, reward: np.ndarray) -> None:
        """Add ``reward`` to the discounted returns and update the return statistics (``NEXT_STEP`` mode: not
        with the returns of the envs this step reset, which are no sample of any episode's return)."""
        self.returns = self.returns * self.gamma + reward
        if self._next_step and self._resetting.any():
            if not self._resetting.all():
                self.ret_rms.update(self.returns[~self._resetting])
            return
        self.ret_rms.update(self.returns)

    # --- normalization -------------------------------------------------------------------------------------

    def _normalize_obs(self, obs: np.ndarray, obs_rms: RunningMeanStd) -> np.ndarray:
        """``clip((obs - mean) / sqrt(var + epsilon), -clip_obs, clip_obs)`` (float64 for float32 input)."""
        return clip_symmetric((obs - obs_rms.mean) / np.sqrt(obs_rms.var + self.epsilon), self.clip_obs)

    def _unnormalize_obs(self, obs: np.ndarray, obs_rms: RunningMeanStd) -> np.ndarray:
        """``obs * sqrt(var + epsilon) + mean``."""
        return (obs * np.sqrt(obs_rms.var + self.epsilon)) + obs_rms.mean

    def _transform_obs(
        self, obs: VecEnvObs, transform: Callable[[np.ndarray, RunningMeanStd], np.ndarray]
    ) -> VecEnvObs:
        """A deep copy of ``obs`` whose normalized arrays (all, or the ``norm_obs_keys`` of a dict) are replaced by
        ``transform(array, its statistics)``; with ``norm_obs=False`` just the copy."""
        if self.norm_obs and not isinstance(obs, dict):  # (the copy would be replaced at once)
            assert isinstance(self.obs_rms, RunningMeanStd)
            return transform(obs, self.obs_rms)  # type: ignore[arg-type]
        obs_ = copy.deepcopy(obs)
        if self.norm_obs:
            obs_rms = self.obs_rms
            if isinstance(obs, dict) and isinstance(obs_rms, dict):
                assert isinstance(obs_, dict) and self.norm_obs_keys is not None
                for key in self.norm_obs_keys:
                    obs_[key] = transform(obs[key], obs_rms[key])
            else:
                assert isinstance(obs_rms, RunningMeanStd)
                obs_ = transform(obs, obs_rms)  # type: ignore[arg-type]
        return obs_

    @overload
    def normalize_obs(self, obs: np.ndarray) -> np.ndarray: ...
    @overload
    def normalize_obs(self, obs: dict[str, np.ndarray]) -> dict[str, np.ndarray]: ...
    @overload
    def normalize_obs(self, obs: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]: ...
    def normalize_obs(self, obs: VecEnvObs) -> VecEnvObs:
        """Normalize observations with the current statistics (does not update them; ``obs`` is not modified).

        :param obs: observations ``(num_envs, *obs_shape)``, or a dict of such arrays for Dict spaces.
        :return: a new array / dict; the normalized arrays (the keys in ``norm_obs_keys``) are float32
            and clipped to ``±clip_obs``. With ``norm_obs=False`` a deep copy of ``obs``.
        """
        return self._transform_obs(obs, lambda part, rms: self._normalize_obs(part, rms).astype(np.float32))

    def normalize_reward(self, reward: np.ndarray) -> np.ndarray:
        """Scale rewards by the return statistics and clip them (does not update the statistics).

        :param reward: rewards ``(num_envs,)``.
        :return: ``clip(reward / sqrt(ret_rms.var + epsilon), ±clip_reward)`` as float32; with
            ``norm_reward=False`` just ``reward`` as float32 (always float32, as SB3).
        """
        if self.norm_reward:
            reward = clip_symmetric(reward / np.sqrt(self.ret_rms.var + self.epsilon), self.clip_reward)
        return np.asarray(reward).astype(np.float32)

    @overload
    def unnormalize_obs(self, obs: np.ndarray) -> np.ndarray: ...
    @overload
    def unnormalize_obs(self, obs: dict[str, np.ndarray]) -> dict[str, np.ndarray]: ...
    @overload
    def unnormalize_obs(self, obs: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]: ...
    def unnormalize_obs(self, obs: VecEnvObs) -> VecEnvObs:
        """Invert :meth:`normalize_obs` (without the clipping): ``obs * sqrt(var + epsilon) + mean``.

        :param obs: normalized observations (array or dict).
        :return: a new array / dict in raw units (float64 for the unnormalized arrays).
        """
        return self._transform_obs(obs, self._unnormalize_obs)

    def unnormalize_reward(self, reward: np.ndarray) -> np.ndarray:
        """Invert :meth:`normalize_reward` (without the clipping).

        :param reward: normalized rewards ``(num_envs,)``.
        :return: ``reward * sqrt(ret_rms.var + epsilon)`` (``reward`` unchanged if ``norm_reward=False``).
        """
        if self.norm_reward:
            return reward * np.sqrt(self.ret_rms.var + self.epsilon)
        return reward

    def get_original_obs(self) -> np.ndarray | dict[str, np.ndarray]:
        """The raw observations of the last :meth:`reset` or step.

        :return: a deep copy, ``(num_envs, *obs_shape)`` (or dict) in the wrapped env's dtype (typed as SB3's; the
            tuple of a Tuple space with ``norm_obs=False``).
        :raises AttributeError: before the first :meth:`reset`.
        """
        if "old_obs" not in self.__dict__:
            raise AttributeError("VecNormalize has no original observation yet: call reset() first.")
        return cast("np.ndarray | dict[str, np.ndarray]", copy.deepcopy(self.old_obs))

    def get_original_reward(self) -> np.ndarray:
        """The raw rewards of the last step.

        :return: a copy, ``(num_envs,)`` in the vector env's rewards dtype (float32, or the ``rewards_dtype`` of
            vecenv's backends; empty before the first step).
        """
        return self.old_reward.copy()

    # --- saving --------------------------------------------------------------------------------------------

    def _config(self) -> dict[str, Any]:
        return {
            "training": bool(self.training),
            "norm_obs": bool(self.norm_obs),
            "norm_reward": bool(self.norm_reward),
            "clip_obs": float(self.clip_obs),
            "clip_reward": float(self.clip_reward),
            "gamma": float(self.gamma),
            "epsilon": float(self.epsilon),
            "norm_obs_keys": None if self.norm_obs_keys is None else list(self.norm_obs_keys),
        }

    def save(self, save_path: str | os.PathLike[str], *, format: SaveFormat | None = None) -> None:
        """Save the statistics and configuration to ``save_path``, atomically: as the pickle Stable-Baselines3's
        ``save`` writes when the name ends in ``.pkl``, in vecenv's pickle-free format otherwise.

        Saved: ``obs_rms`` (if present), ``ret_rms``, ``training``, ``norm_obs``, ``norm_reward``,
        ``clip_obs``, ``clip_reward``, ``gamma``, ``epsilon``, ``norm_obs_keys`` and the observation
        space. Not saved (as SB3's pickle would): the wrapped env, ``returns``, ``old_obs``,
        ``old_reward``. The file is written to a temporary file in the same folder and renamed over
        ``save_path``, so an interrupted save leaves any previous file intact. :meth:`load` reads both
        formats, whatever the file's name.

        - ``"sb3"``: the pickle SB3 2.9's ``VecNormalize.save`` writes for the same wrapper (an instance of
          ``stable_baselines3.common.vec_env.vec_normalize.VecNormalize``; SB3 is not imported), which SB3's
          ``VecNormalize.load``, the RL Zoo and model hubs read. Same as :meth:`save_sb3`.
        - ``"vecenv"``: numpy arrays and JSON, described in :mod:`vecenv.wrappers.normalize_format`;
          loading it can never run code. SB3's ``VecNormalize.load`` cannot read it (``UnpicklingError``).

        With ``format`` left out, the name decides, as SB3 code expects: a ``save_path`` ending in ``.pkl``
        (any case; SB3, the RL Zoo and model hubs name the file ``vecnormalize.pkl``) gets ``"sb3"``, any
        other name ``"vecenv"``. If the wrapper cannot be written in SB3's format (an observation or action
        space of a class vecenv's restricted unpickler does not admit, see :meth:`save_sb3`), a ``.pkl``
        name gets vecenv's format instead, with a ``UserWarning`` naming the file and the reason.

        :param save_path: the file to write (``str`` or :class:`pathlib.Path`), used as given (no extension added).
        :param format: ``"vecenv"`` or ``"sb3"`` (keyword only) to force the format; None: chosen by the name.
        :raises ValueError: if ``format`` is another value, or (``format="sb3"``) if the observation or action
            space is not one of gymnasium's Box, Dict, Discrete, MultiBinary, MultiDiscrete, Tuple (vecenv could
            not load the pickle back); nothing is written.
        :raises TypeError: (vecenv's format) if ``norm_obs_keys`` or the Dict keys are neither strings nor
            integers.
        :raises OSError: if the file cannot be written (any previous file is left unchanged).
        """
        if format is not None and format not in _SAVE_FORMATS:
            raise ValueError(
                f"format must be one of {_SAVE_FORMATS} (or None: 'sb3' for a name ending in {SB3_SUFFIX!r}, "
                f"'vecenv' otherwise), got {format!r}"
            )
        if format == "sb3":
            write_sb3_pickle(save_path, self)
            return
        not_sb3: Sb3FormatError | None = None
        if format is None and os.fsdecode(save_path).lower().endswith(SB3_SUFFIX):
            try:
                data = encode_sb3_pickle(self)
            except Sb3FormatError as exc:
                not_sb3 = exc
            else:
                atomic_write_bytes(save_path, data)
                return
        obs_rms = self.__dict__.get("obs_rms")
        state = NormalizationState(
            config=self._config(),
            observation_space=describe_space(self.observation_space),
            obs_rms=obs_rms,
            ret_rms=self.ret_rms,
        )
        write_normalization_file(save_path, state)
        if not_sb3 is not None:
            warnings.warn(
                f"VecNormalize.save wrote {os.fsdecode(save_path)!r} in vecenv's pickle-free format, not in "
                f"Stable-Baselines3's pickle format that its {SB3_SUFFIX!r} name asks for: {not_sb3.reason}. "
                "vecenv's VecNormalize.load reads the file; Stable-Baselines3 cannot (UnpicklingError). Pass "
                "format='vecenv' to write this format without the warning.",
                UserWarning,
                stacklevel=2,
            )

    def save_sb3(self, save_path: str | os.PathLike[str]) -> None:
        """Save as the pickle Stable-Baselines3's ``VecNormalize.save`` writes (``save(path, format="sb3")``).

        SB3's ``VecNormalize.load(save_path, venv)`` (SB3 >= 2.0), the RL Zoo and vecenv's :meth:`load`
        read the file. It holds an instance of ``stable_baselines3.common.vec_env.vec_normalize.VecNormalize``
        with the attributes SB3's ``__getstate__`` gives, its statistics as SB3 ``RunningMeanStd`` objects
        (float64 ``mean`` / ``var``, float ``count``), numpy arrays and gymnasium spaces; written with pickle
        protocol 4 and without importing SB3. As with any SB3 pickle, loading it with SB3 unpickles it: only
        load files you trust there.

        :param save_path: the file to write (``str`` or :class:`pathlib.Path`), used as given (no extension added).
        :raises ValueError: if the observation or action space is not one of gymnasium's Box, Dict, Discrete,
            MultiBinary, MultiDiscrete, Tuple (vecenv could not load the pickle back); nothing is written.
        :raises OSError: if the file cannot be written (any previous file is left unchanged).
        """
        write_sb3_pickle(save_path, self)

    @classmethod
    def _from_state(cls: type[VecNormalizeT], state: NormalizationState, venv: VecEnv) -> VecNormalizeT:
        check_space_matches(state.observation_space, venv.observation_space)
        try:
            inspect.signature(cls).bind(venv, **state.config)
        except TypeError:  # a subclass with an __init__ of its own: set up as a VecNormalize (SB3 unpickles it)
            vec_normalize = cls.__new__(cls)
            VecNormalize.__init__(vec_normalize, venv, **state.config)
        else:
            vec_normalize = cls(venv, **state.config)
        if state.obs_rms is not None:
            obs_rms = state.obs_rms
            shapes = obs_rms.items() if isinstance(obs_rms, dict) else [(None, obs_rms)]
            env_space = venv.observation_space
            for key, rms in shapes:
                sub_space = env_space if key is None else env_space[key]  # type: ignore[index]
                if sub_space.shape != rms.mean.shape:
                    where = "the observation" if key is None else f"observation key {key!r}"
                    raise ValueError(
                        f"The VecNormalize statistics do not fit this env: {where} was saved with shape "
                        f"{rms.mean.shape} but the env's observation space has shape {sub_space.shape}."
                    )
            vec_normalize.obs_rms = obs_rms
        vec_normalize.ret_rms = state.ret_rms
        return vec_normalize

    @classmethod
    def load(cls: type[VecNormalizeT], load_path: str | os.PathLike[str], venv: VecEnv) -> VecNormalizeT:
        """Load statistics and configuration saved by :meth:`save` (either format) or by SB3, and wrap ``venv``.

        A vecenv file holds numpy arrays (read with ``allow_pickle=False``) and JSON: nothing in it is
        executed. A pickle (a file starting with pickle's protocol byte ``0x80``, as SB3's
        ``VecNormalize.save`` and ``save(path, format="sb3")`` write) is read as :meth:`load_sb3` reads it,
        by the restricted unpickler that builds nothing outside its allow-list, and the import is logged
        (logger ``vecenv.wrappers.vec_normalize``, level INFO). Note that ``training`` is restored as
        saved: set ``training = False`` (and usually ``norm_reward = False``) to evaluate.

        :param load_path: the file written by :meth:`save` or by SB3 (``str`` or :class:`pathlib.Path`).
        :param venv: the vectorized environment to wrap; its observation space must match the saved one.
        :return: a new :class:`VecNormalize` around ``venv``; called on a subclass, an instance of that subclass
            (built as ``cls(venv, **saved_config)``, or set up as a ``VecNormalize`` where its ``__init__`` takes
            other arguments: attributes of its own are not saved, set them again).
        :raises NormalizationFileError: (a ValueError) if the file is truncated, corrupt, modified, holds
            pickled objects inside a vecenv file, or is a pickle that names a global outside the allow-list
            (refused before anything in it runs) or holds no SB3 VecNormalize.
        :raises ValueError: if the observation shapes or Dict keys of ``venv`` differ from the saved
            ones (the message names the key, the saved shape and the env's shape).
        :raises OSError: if the file cannot be read.
        """
        if is_pickle(load_path):
            return cls.load_sb3(load_path, venv)
        return cls._from_state(read_normalization_file(load_path), venv)

    @classmethod
    def load_sb3(cls: type[VecNormalizeT], load_path: str | os.PathLike[str], venv: VecEnv) -> VecNormalizeT:
        """Import a ``VecNormalize`` pickle written by Stable-Baselines3 (>= 2.0), without SB3 installed.

        The pickle is read by a restricted unpickler that admits only numpy arrays / dtypes / random
        generators, gymnasium spaces, ``collections.OrderedDict`` and SB3's ``VecNormalize`` and
        ``RunningMeanStd`` classes (mapped onto vecenv's); any other global is refused before it can run.
        The configuration and statistics are then taken from it, exactly as SB3 saved them. Call
        :meth:`save` on the result to convert the file to vecenv's format. :meth:`load` does the same for a
        pickle; the import is logged (logger ``vecenv.wrappers.vec_normalize``, level INFO).

        :param load_path: the ``.pkl`` file written by SB3's ``VecNormalize.save`` (``str`` or :class:`pathlib.Path`).
        :param venv: the vectorized environment to wrap; its observation space must match the saved one.
        :return: a new :class:`VecNormalize` around ``venv``; called on a subclass, an instance of that subclass
            (built as ``cls(venv, **saved_config)``, or set up as a ``VecNormalize`` where its ``__init__`` takes
            other arguments: attributes of its own are not saved, set them again).
        :raises NormalizationFileError: if the pickle references a forbidden global (the message names
            it), is truncated or corrupt, or is not an SB3 VecNormalize.
        :raises ValueError: if the observation shapes or Dict keys of ``venv`` differ from the saved ones.
        :raises OSError: if the file cannot be read.
        """
        state = read_sb3_state(load_path, VecNormalize)
        logger.info(
            "Imported the Stable-Baselines3 VecNormalize pickle %s with the restricted unpickler (only numpy "
            "arrays, gymnasium spaces and SB3's VecNormalize / RunningMeanStd were built)",
            os.fspath(load_path),
        )
        return cls._from_state(state, venv)
