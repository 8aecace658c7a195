"""Frame stacking for batches of observations, without any env: :class:`StackedObservations`.

The algorithm behind :class:`~vecenv.wrappers.vec_frame_stack.VecFrameStack`; semantics follow
``stable_baselines3.common.vec_env.stacked_observations`` (SB3 2.9). It keeps the last ``n_stack``
observations of every env concatenated along one axis: the channel axis of images (first or last,
detected with SB3's heuristic or given), the last axis of anything else. The newest frame is at the
end of that axis; slots not filled yet since the last reset are zeros.

Unlike SB3, :meth:`StackedObservations.reset` and :meth:`StackedObservations.update` return copies:
the caller may keep and modify them (SB3 returns its internal buffer, which a later ``reset`` zeroes
in place).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, Generic, TypeVar, cast

import numpy as np
from gymnasium import spaces

from vecenv.base import done_indices
from vecenv.spaces import is_image_space, is_image_space_channels_first

__all__ = ["StackedObservations"]

#: A batch of observations a :class:`StackedObservations` handles: an array, or a dict of arrays.
TObs = TypeVar("TObs", np.ndarray, dict[str, np.ndarray])

CHANNELS_ORDERS = ("first", "last")
MISSING_TERMINAL_WARNING = "VecFrameStack wrapping a VecEnv without terminal_observation info"


def _along(channels_first: bool, part: slice, batched: bool) -> tuple[Any, ...]:
    """Index of ``part`` of the stacking axis: axis 0 of one observation (1 with the env axis), or the last axis."""
    if not channels_first:
        return (Ellipsis, part)
    return (slice(None), part) if batched else (part,)


class StackedObservations(Generic[TObs]):
    """The last ``n_stack`` observations of ``num_envs`` envs, concatenated along a channel axis.

    Box spaces: frames are concatenated along axis 0 of each observation when channels-first, else
    along its last axis, so one env's stack has shape ``stacked_shape`` (the observation shape with
    that axis ``n_stack`` times longer) and the newest frame is last. Dict spaces: each key is stacked
    on its own (with its own channel order) and the results are dicts with the same keys.

    Where the channels are (``channels_order=None``): for image spaces (see
    :func:`~vecenv.spaces.is_image_space`) SB3's heuristic, channels-first iff the first dimension is
    the smallest (:func:`~vecenv.spaces.is_image_space_channels_first`); everything else channels-last.

    :param num_envs: number of envs in a batch.
    :param n_stack: number of observations kept per env (>= 1).
    :param observation_space: the space of ONE env's observation: a Box, or a Dict of Boxes.
    :param channels_order: ``"first"``, ``"last"`` or None (detect, see above). For a Dict space either one
        value for every key or a mapping with an entry (``"first"``, ``"last"`` or None) for every key.
    :raises TypeError: if the space is neither Box nor Dict (nor a Dict of those), or ``channels_order``
        is a mapping for a Box space.
    :raises AssertionError: if a ``channels_order`` string is not ``"first"`` or ``"last"`` (as SB3).
    :raises KeyError: if a ``channels_order`` mapping lacks a key of the Dict space.
    :raises ValueError: if ``n_stack < 1`` or a Box space has no dimension to stack along.

    >>> stack = StackedObservations(num_envs=1, n_stack=3, observation_space=spaces.Box(0, 9, (2,), np.int64))
    >>> stack.stacked_observation_space.shape
    (6,)
    >>> stack.reset(np.array([[1, 2]]))
    array([[0, 0, 0, 0, 1, 2]])
    >>> obs, infos = stack.update(np.array([[3, 4]]), np.array([False]), [{}])
    >>> obs
    array([[0, 0, 1, 2, 3, 4]])
    >>> obs, infos = stack.update(np.array([[5, 6]]), np.array([True]), [{"terminal_observation": np.array([7, 8])}])
    >>> obs, infos[0]["terminal_observation"]
    (array([[0, 0, 0, 0, 5, 6]]), array([1, 2, 3, 4, 7, 8]))
    """

    def __init__(
        self,
        num_envs: int,
        n_stack: int,
        observation_space: spaces.Box | spaces.Dict,
        channels_order: str | Mapping[str, str | None] | None = None,
    ) -> None:
        if n_stack < 1:
            raise ValueError(f"n_stack must be at least 1 (the number of frames kept per env), got {n_stack}")
        self.num_envs = num_envs
        self.n_stack = n_stack
        self.observation_space = observation_space
        self.stacked_observation_space: spaces.Box | spaces.Dict
        if isinstance(observation_space, spaces.Dict):
            orders = self._orders_per_key(observation_space, channels_order)
            #: one :class:`StackedObservations` per key of the Dict space
            self.sub_stacked_observations: dict[str, StackedObservations[Any]] = {
                # a subspace of another type raises TypeError in its own constructor
                key: StackedObservations(num_envs, n_stack, cast(spaces.Box, subspace), orders[key])
                for key, subspace in observation_space.spaces.items()
            }
            self.stacked_observation_space = spaces.Dict(
                {key: sub.stacked_observation_space for key, sub in self.sub_stacked_observations.items()}
            )
        elif isinstance(observation_space, spaces.Box):
            if isinstance(channels_order, Mapping):
                raise TypeError(
                    "When the observation space is Box, channels_order can't be a dict: give 'first', 'last' or None."
                )
            self.channels_first, self.stack_dimension, self.stacked_shape, self.repeat_axis = self.compute_stacking(
                n_stack, observation_space, channels_order
            )
            self.stacked_observation_space = spaces.Box(
                low=np.repeat(observation_space.low, n_stack, axis=self.repeat_axis),
                high=np.repeat(observation_space.high, n_stack, axis=self.repeat_axis),
                dtype=observation_space.dtype,
            )
            #: the stacks, ``(num_envs, *stacked_shape)`` in the space's dtype (internal: callers get copies)
            self.stacked_obs = np.zeros((num_envs, *self.stacked_shape), dtype=observation_space.dtype)
            channels = observation_space.shape[self.repeat_axis]
            first = self.channels_first
            self._newest = _along(first, slice(-channels, None), batched=True)
            self._newest_one_env = _along(first, slice(-channels, None), batched=False)
            self._all_but_oldest = _along(first, slice(channels, None), batched=True)
            self._all_but_newest = _along(first, slice(None, -channels), batched=True)
            # the newest frame's elements, and so the distance a frame moves back when a new one comes, in the
            # memory of a C-contiguous stack: ``channels`` channels-last, ``channels x H x W`` channels-first
            self._frame_shift = channels * math.prod(self.stacked_shape[1:]) if first else channels
        else:
            raise TypeError(
                f"StackedObservations only supports Box and Dict as observation spaces. {observation_space} was "
                "provided: convert other observations to a Box first (e.g. gymnasium.wrappers.FlattenObservation)."
            )

    @staticmethod
    def _orders_per_key(
        observation_space: spaces.Dict, channels_order: str | Mapping[str, str | None] | None
    ) -> Mapping[str, str | None]:
        """One channel order per key of a Dict space: a single value is used for every key."""
        if not isinstance(channels_order, Mapping):
            return {key: channels_order for key in observation_space.spaces}
        missing = [key for key in observation_space.spaces if key not in channels_order]
        if missing:
            raise KeyError(
                f"channels_order has no entry for the Dict keys {missing}: give 'first', 'last' or None for every key "
                f"of the observation space ({list(observation_space.spaces)}), or one value for all keys."
            )
        return channels_order

    @staticmethod
    def compute_stacking(
        n_stack: int, observation_space: spaces.Box, channels_order: str | None = None
    ) -> tuple[bool, int, tuple[int, ...], int]:
        """Where to stack the observations of a Box space, and the resulting shape (SB3's rules).

        :param n_stack: number of observations to stack.
        :param observation_space: the Box space of one observation.
        :param channels_order: ``"first"``, ``"last"`` or None: image spaces then follow SB3's heuristic (warning
            if the middle dimension is the smallest, which is treated as channels-last), others are channels-last.
        :return: ``(channels_first, stack_dimension, stacked_shape, repeat_axis)``: the stacking axis is
            ``stack_dimension`` in a batch ``(num_envs, *obs_shape)`` (1 or -1) and ``repeat_axis`` in one
            observation (0 or -1); ``stacked_shape`` is the shape of one env's stack.
        :raises AssertionError: if ``channels_order`` is not None, ``"first"`` or ``"last"``.
        :raises ValueError: if the space has no dimension (shape ``()``).

        >>> StackedObservations.compute_stacking(4, spaces.Box(0, 255, (84, 84, 1), np.uint8))
        (False, -1, (84, 84, 4), -1)
        >>> StackedObservations.compute_stacking(4, spaces.Box(0, 255, (1, 84, 84), np.uint8))
        (True, 1, (4, 84, 84), 0)
        """
        if channels_order is None:
            # SB3: only image spaces can be channels-first; everything else is stacked on its last axis
            channels_first = is_image_space(observation_space) and is_image_space_channels_first(observation_space)
        else:
            assert channels_order in CHANNELS_ORDERS, (
                "`channels_order` must be one of following: 'last', 'first' (or None to detect it), "
                f"got {channels_order!r}"
            )
            channels_first = channels_order == "first"
        if len(observation_space.shape) == 0:
            raise ValueError(
                f"Cannot stack observations of shape () (space {observation_space}): frame stacking needs at least one "
                "dimension to concatenate along; reshape the observations to (1,) first."
            )
        stack_dimension = 1 if channels_first else -1
        repeat_axis = 0 if channels_first else -1
        stacked_shape = list(observation_space.shape)
        stacked_shape[repeat_axis] *= n_stack
        return channels_first, stack_dimension, tuple(stacked_shape), repeat_axis

    def reset(self, observation: TObs) -> TObs:
        """Start every env's stack afresh: zeros, then ``observation`` as the newest frame.

        :param observation: first observations, ``(num_envs, *obs_shape)`` (a dict of such arrays for Dict spaces).
        :return: the stacks, ``(num_envs, *stacked_shape)`` (a dict for Dict spaces): a copy, the caller's to keep.
        """
        return cast(TObs, self._reset(observation))

    def update(
        self, observations: TObs, dones: np.ndarray, infos: list[dict[str, Any]]
    ) -> tuple[TObs, list[dict[str, Any]]]:
        """Push the observations of one step onto the stacks.

        For each env done at this step, ``infos[i]["terminal_observation"]`` (the last observation of the finished
        episode) is replaced with its full stack: the previous stack minus its oldest frame, then the terminal
        observation (in the space's dtype); then that env's stack restarts from zeros with ``observations[i]``,
        the first observation of the next episode. A done env without ``terminal_observation`` warns.

        :param observations: the observations after the step, ``(num_envs, *obs_shape)`` (dict for Dict spaces).
        :param dones: ``(num_envs,)`` bools, True where the episode ended at this step.
        :param infos: one info dict per env; the done envs' ``terminal_observation`` entries are replaced in place.
        :return: ``(stacks, infos)``: stacks ``(num_envs, *stacked_shape)`` (dict for Dict spaces), a copy the caller
            may keep, and ``infos`` itself.
        """
        terminals: dict[int, Any] = {}
        missing = False
        for env_idx in done_indices(dones):
            if "terminal_observation" in infos[env_idx]:
                terminals[env_idx] = infos[env_idx]["terminal_observation"]
            elif not infos[env_idx].get("vecenv.restarted", False):  # a restart loses the last observation
                missing = True
        if missing:
            warnings.warn(MISSING_TERMINAL_WARNING, stacklevel=2)
        stacked, stacked_terminals = self._update(observations, dones, terminals)
        for env_idx, terminal in stacked_terminals.items():
            infos[env_idx]["terminal_observation"] = terminal
        return cast(TObs, stacked), infos

    def push(self, observations: TObs, starts: np.ndarray) -> TObs:
        """Push the observations of one step onto the stacks, where no terminal observation is involved.

        For the autoreset modes in which a step that ends an episode returns its last observation (Gymnasium's
        ``NEXT_STEP`` and ``DISABLED``): ``observations[i]`` joins env ``i``'s stack, which first restarts from
        zeros where ``starts[i]`` (the observation is the first of a new episode).

        :param observations: the observations after the step, ``(num_envs, *obs_shape)`` (dict for Dict spaces).
        :param starts: ``(num_envs,)`` bools, True where ``observations[i]`` starts an episode.
        :return: the stacks ``(num_envs, *stacked_shape)`` (dict for Dict spaces), a copy the caller may keep.
        """
        stacked, _ = self._update(observations, starts, {})
        return cast(TObs, stacked)

    # --- the work, on either kind of space (typed loosely; the public methods give the types) ----------------

    def _reset(self, observation: Any) -> Any:
        if isinstance(self.observation_space, spaces.Dict):
            obs_dict = self._as_dict(observation)  # (keys in the order the observations have them, as SB3's)
            subs = self.sub_stacked_observations
            return {key: subs[key]._reset(value) for key, value in obs_dict.items()}
        self.stacked_obs[...] = 0
        self.stacked_obs[self._newest] = observation
        return self.stacked_obs.copy()

    def _update(self, observations: Any, dones: Sequence[bool] | np.ndarray, terminals: dict[int, Any]) -> Any:
        """Push ``observations``; ``terminals`` maps done env index -> terminal observation, returned stacked too."""
        if isinstance(self.observation_space, spaces.Dict):
            obs_dict = self._as_dict(observations)
            stacked: dict[str, np.ndarray] = {}
            key_terminals: dict[str, dict[int, Any]] = {}
            subs = self.sub_stacked_observations
            for key, value in obs_dict.items():  # (in the order the observations have them, as SB3's)
                sub_terminals = {env_idx: terminal[key] for env_idx, terminal in terminals.items()}
                stacked[key], key_terminals[key] = subs[key]._update(value, dones, sub_terminals)
            # a new dict per terminal observation: the env's own dict is left as it was
            merged = {
                env_idx: {**terminal, **{key: key_terminals[key][env_idx] for key in key_terminals}}
                for env_idx, terminal in terminals.items()
            }
            return stacked, merged

        buffer = self.stacked_obs
        # drop the oldest frame: every element moves back by one frame. On the contiguous buffer that is one move of
        # the whole block, where the same move through the stacking axis (the last one, channels-last) is a strided
        # copy of a few elements per pixel, about 20x slower for Atari frames. The elements that move into a newest
        # frame come from the next stack's oldest one, and are overwritten with the new observations below.
        if buffer.flags.c_contiguous:
            flat, shift = buffer.reshape(-1), self._frame_shift
            flat[:-shift] = flat[shift:]  # (numpy handles the overlap)
        else:  # (the attribute replaced by a caller's array)
            buffer[self._all_but_newest] = buffer[self._all_but_oldest]
        stacked_terminals: dict[int, np.ndarray] = {}
        for env_idx in done_indices(dones):
            if env_idx in terminals:
                terminal_stack = buffer[env_idx].copy()
                terminal_stack[self._newest_one_env] = terminals[env_idx]
                stacked_terminals[env_idx] = terminal_stack
            buffer[env_idx] = 0
        buffer[self._newest] = observations
        return buffer.copy(), stacked_terminals

    def _as_dict(self, observation: Any) -> Mapping[str, Any]:
        if not isinstance(observation, Mapping):
            raise TypeError(
                f"StackedObservations over a Dict space expects dict observations, got {type(observation).__name__}"
            )
        return observation
