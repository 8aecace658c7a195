"""``VecCheckNan``: find where NaN and infinite values enter the loop between the RL model and the envs."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium import spaces

from vecenv.base import VecEnv, VecEnvObs, VecEnvStepReturn
from vecenv.wrappers.base import VecEnvWrapper

__all__ = ["VecCheckNan"]

#: Non-finite kinds, in the order they are reported (SB3's order), with the test that finds them.
_KIND_TESTS = (("inf", np.isinf), ("nan", np.isnan))


@dataclass(frozen=True)
class _Finding:
    """Non-finite values of one kind in one named array."""

    name: str
    kind: str
    #: the envs (rows of the batch) that hold such values; None if the array is not batched by env
    env_indices: list[int] | None

    def describe(self) -> str:
        where = ""
        if self.env_indices is not None:
            where = f" (env{'s' if len(self.env_indices) > 1 else ''} {', '.join(map(str, self.env_indices))})"
        return f"found {self.kind} in {self.name}{where}"


def _named_arrays(name: str, value: Any) -> list[tuple[str, Any]]:
    """Split ``value`` into ``(name, array-like)`` leaves: ``name.key`` for dicts, ``name.index`` for tuples.

    :raises TypeError: for a value that is neither an array, a list, a dict nor a tuple (as SB3).
    """
    if isinstance(value, (np.ndarray, list)):
        return [(name, value)]
    if isinstance(value, dict):
        return [leaf for key, inner in value.items() for leaf in _named_arrays(f"{name}.{key}", inner)]
    if isinstance(value, tuple):
        return [leaf for idx, inner in enumerate(value) for leaf in _named_arrays(f"{name}.{idx}", inner)]
    raise TypeError(
        f"VecCheckNan can check numpy arrays, lists, dicts and tuples of arrays; {name} is a {type(value).__name__}"
    )


def _as_float_array(value: Any) -> np.ndarray | None:
    """``value`` as an array that can hold NaN, or None if it cannot (integers, booleans, strings)."""
    array = np.asarray(value)
    if array.dtype.kind in "fc":
        return array
    if array.dtype.kind == "O":
        try:
            return array.astype(np.float64)
        except (TypeError, ValueError):
            return None
    return None


def _env_entry(value: Any, env_index: int, num_envs: int) -> Any:
    """The part of a batched value that belongs to env ``env_index`` (the whole value if it is not batched)."""
    if isinstance(value, dict):
        return {key: _env_entry(inner, env_index, num_envs) for key, inner in value.items()}
    if isinstance(value, tuple):
        return tuple(_env_entry(inner, env_index, num_envs) for inner in value)
    if isinstance(value, list) or (isinstance(value, np.ndarray) and value.ndim > 0):
        return value[env_index] if len(value) == num_envs else value
    return value


class VecCheckNan(VecEnvWrapper):
    """Check actions, observations, rewards and dones for NaN (and infinity) and report where they came from.

    Semantics follow Stable-Baselines3's ``VecCheckNan``: actions are checked in :meth:`step_async`,
    observations, rewards and dones in :meth:`step_wait`, observations in :meth:`reset`; arrays, lists,
    dicts and tuples of arrays are supported. The message names each bad array (``observations.key``
    for Dict observations, ``observations.0`` for Tuple ones), the envs that hold the bad values, where
    they originated (the env at reset, the env after the listed actions, or the RL model given the listed
    observations) and how to track them down. Unlike SB3, it also lists the env indices.

    :param venv: the vectorized environment to wrap.
    :param raise_exception: raise a :class:`ValueError` instead of warning with a :class:`UserWarning`.
    :param warn_once: when warning, warn only the first time (checking then stops, as in SB3).
    :param check_inf: report ``+inf`` / ``-inf`` as well as NaN.
    :raises NotImplementedError: if the action space is a ``Dict`` space (as SB3).

    >>> import gymnasium as gym
    >>> from vecenv import DummyVecEnv
    >>> venv = VecCheckNan(DummyVecEnv([lambda: gym.make("Pendulum-v1")]), raise_exception=True)
    >>> _ = venv.reset()
    >>> venv.step(np.array([[np.nan]]))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: found nan in actions (env 0).
    Originated from the RL model, given the last observations:
    ...
    >>> venv.close()
    """

    def __init__(
        self, venv: VecEnv, raise_exception: bool = False, warn_once: bool = True, check_inf: bool = True
    ) -> None:
        super().__init__(venv)
        self.raise_exception = raise_exception
        self.warn_once = warn_once
        self.check_inf = check_inf
        self._user_warned = False
        self._actions: Any = None
        self._observations: VecEnvObs | None = None
        if isinstance(venv.action_space, spaces.Dict):
            raise NotImplementedError(
                "VecCheckNan does not support Dict action spaces (as in Stable-Baselines3); "
                f"got action space {venv.action_space}"
            )

    def step_async(self, actions: np.ndarray) -> None:
        """Check ``actions``, then start the step.

        :param actions: one action per env, ``(num_envs, *action_shape)`` (or a list / tuple of arrays).
        :raises ValueError: if ``raise_exception`` and the actions hold NaN (or infinity).
        """
        self._check_values("step_async", {"actions": actions})
        self._actions = actions
        self.venv.step_async(actions)

    def step_wait(self) -> VecEnvStepReturn:
        """Collect the step and check its observations, rewards and dones.

        :return: ``(obs, rewards, dones, infos)`` unchanged.
        :raises ValueError: if ``raise_exception`` and a value holds NaN (or infinity).
        """
        observations, rewards, dones, infos = self.venv.step_wait()
        self._check_values("step_wait", {"observations": observations, "rewards": rewards, "dones": dones})
        self._observations = observations
        return observations, rewards, dones, infos

    def reset(self) -> VecEnvObs:
        """Reset and check the first observations.

        :return: the observations unchanged.
        :raises ValueError: if ``raise_exception`` and the observations hold NaN (or infinity).
        """
        observations = self.venv.reset()
        self._check_values("reset", {"observations": observations})
        self._observations = observations
        return observations

    def check_array_value(self, name: str, value: np.ndarray) -> list[tuple[str, str]]:
        """Look for NaN (and infinity if ``check_inf``) in one array (SB3's helper).

        :param name: the name reported for the array.
        :param value: the array; integer and boolean arrays never hold NaN.
        :return: ``[(name, "inf"), (name, "nan")]``, keeping only the kinds found.
        """
        return [(finding.name, finding.kind) for finding in self._find(name, value)]

    def _find(self, name: str, value: Any) -> list[_Finding]:
        array = _as_float_array(value)
        if array is None:
            return []
        findings = []
        for kind, test in _KIND_TESTS:
            if kind == "inf" and not self.check_inf:
                continue
            mask = test(array)
            if mask.any():
                env_indices = None
                if mask.ndim > 0 and mask.shape[0] == self.num_envs:
                    env_indices = np.flatnonzero(mask.reshape(self.num_envs, -1).any(axis=1)).tolist()
                findings.append(_Finding(name, kind, env_indices))
        return findings

    def _check_values(self, event: str, values: dict[str, Any]) -> None:
        """Check ``values`` (name -> batch) seen at ``event``; raise or warn with the full report."""
        if not self.raise_exception and self.warn_once and self._user_warned:
            return
        findings = [
            finding
            for name, value in values.items()
            for leaf_name, leaf in _named_arrays(name, value)
            for finding in self._find(leaf_name, leaf)
        ]
        if not findings:
            return
        self._user_warned = True
        message = self._message(event, findings, values.get("dones"))
        if self.raise_exception:
            raise ValueError(message)
        # point at the caller of reset() / step()
        warnings.warn(message, UserWarning, stacklevel=3 if event == "reset" else 4)

    def _message(self, event: str, findings: list[_Finding], dones: Any = None) -> str:
        env_indices = sorted({i for finding in findings for i in finding.env_indices or []})
        lines = [", ".join(finding.describe() for finding in findings) + "."]
        if event == "reset":
            lines.append("Originated from the environment observation (at reset).")
            lines.append(
                "To find it, reset a single copy of the env(s) above with the same seed and options, and look for "
                "divisions by zero, overflows or uninitialized values in the env's reset()."
            )
        elif event == "step_wait":
            lines.append("Originated from the environment, after the last given actions:")
            lines.extend(self._per_env_lines("action", self._actions, env_indices))
            reset_envs = [i for i in env_indices if dones is not None and bool(_env_entry(dones, i, self.num_envs))]
            if reset_envs:
                lines.append(
                    f"  (episode ended for env {', '.join(map(str, reset_envs))}: its observation is the first of the "
                    "next episode, from the automatic reset())"
                )
            lines.append(
                "To find it, step a single copy of the env(s) above with these actions, and look for divisions by "
                "zero, overflows or out-of-range actions in the env's step() (gymnasium's PassiveEnvChecker and "
                "ClipAction / RescaleAction wrappers can help)."
            )
        elif event == "step_async":
            lines.append("Originated from the RL model, given the last observations:")
            if self._observations is None:
                lines.append("  (no observation seen yet: reset() was not called through this wrapper)")
            else:
                lines.extend(self._per_env_lines("observation", self._observations, env_indices))
            lines.append(
                "The model produced non-finite actions: look for extreme values in these observations, normalize "
                "observations and rewards (VecNormalize), lower the learning rate or clip gradients."
            )
        else:  # pragma: no cover - internal
            raise AssertionError(f"unknown event {event!r}")
        return "\n".join(lines)

    def _per_env_lines(self, label: str, value: Any, env_indices: list[int]) -> list[str]:
        """One line per bad env showing its part of ``value`` (the whole value if no env is known)."""
        if not env_indices:
            return [f"  {label}s={value!r}"]
        return [f"  env {i}: {label}={_env_entry(value, i, self.num_envs)!r}" for i in env_indices]
