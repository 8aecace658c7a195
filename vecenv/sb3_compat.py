"""Make Stable-Baselines3 accept vecenv objects wherever it accepts its own vector envs.

SB3's algorithms and helpers check ``isinstance(env, stable_baselines3.common.vec_env.VecEnv)`` (and
``VecEnvWrapper``, ``VecNormalize``, ``VecTransposeImage``, ``VecMonitor``...). Those are ``ABCMeta``
classes, so vecenv registers its classes as *virtual subclasses* of SB3's: SB3 then treats a vecenv
object as one of its own (``PPO("MlpPolicy", vecenv_venv)``, ``evaluate_policy``, ``EvalCallback``,
``sync_envs_normalization`` on SB3 wrappers over vecenv envs, ...).

Importing vecenv never imports SB3 (it would import torch): if SB3's ``vec_env`` module is already
loaded the classes are registered at once, otherwise a post-import hook registers them the moment
SB3's module finishes loading. The hook only watches that single module name.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Sequence
from types import ModuleType

__all__ = ["install", "register_with_sb3", "sb3_counterpart"]

SB3_VEC_ENV_MODULE = "stable_baselines3.common.vec_env"

#: SB3's ``gymnasium.Wrapper`` classes that vecenv replaces (full name -> vecenv's full name): an env wrapped in
#: either counts as wrapped in both (``env_is_wrapped``), so SB3's ``evaluate_policy`` finds vecenv's Monitor
_GYM_WRAPPER_PAIRS = {"stable_baselines3.common.monitor.Monitor": "vecenv.monitor.Monitor"}
_EQUIVALENT_NAMES: dict[str, frozenset[str]] = {}
for _sb3_name, _our_name in _GYM_WRAPPER_PAIRS.items():
    _EQUIVALENT_NAMES[_sb3_name] = _EQUIVALENT_NAMES[_our_name] = frozenset({_sb3_name, _our_name})


def _full_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def wrapper_target(wrapper_class: type | frozenset[str]) -> type | frozenset[str]:
    """What ``env_is_wrapped(wrapper_class)`` looks for: the class itself, or for a wrapper vecenv replaces
    (SB3's ``Monitor``, vecenv's ``Monitor``) the full names of both, so no worker has to import SB3 to answer.
    Names pass through unchanged. See :func:`vecenv.sub_envs.is_wrapped`.
    """
    if isinstance(wrapper_class, type):
        return _EQUIVALENT_NAMES.get(_full_name(wrapper_class), wrapper_class)
    return wrapper_class


def matches_wrapper(wrapper: object, target: type | frozenset[str]) -> bool:
    """Whether ``wrapper`` is an instance of ``target`` (a class, or full names from :func:`wrapper_target`)."""
    if isinstance(target, frozenset):
        return any(_full_name(cls) in target for cls in type(wrapper).__mro__)
    return isinstance(wrapper, target)


#: SB3 class name in ``stable_baselines3.common.vec_env`` -> vecenv top-level name
_CLASS_PAIRS = {
    "VecEnv": "VecEnv",
    "VecEnvWrapper": "VecEnvWrapper",
    "DummyVecEnv": "DummyVecEnv",
    "SubprocVecEnv": "SubprocVecEnv",
    "VecNormalize": "VecNormalize",
    "VecMonitor": "VecMonitor",
    "VecFrameStack": "VecFrameStack",
    "VecTransposeImage": "VecTransposeImage",
    "VecCheckNan": "VecCheckNan",
    "VecExtractDictObs": "VecExtractDictObs",
    "VecVideoRecorder": "VecVideoRecorder",
}


def sb3_counterpart(cls: type) -> type | None:
    """SB3's class that vecenv's ``cls`` stands for (vecenv's ``VecNormalize``: SB3's ``VecNormalize``), if SB3's
    ``vec_env`` module is loaded; None otherwise, or for a class that is none of vecenv's counterparts. Does not
    import SB3."""
    sb3 = sys.modules.get(SB3_VEC_ENV_MODULE)
    if sb3 is None:
        return None
    import vecenv

    for sb3_name, our_name in _CLASS_PAIRS.items():
        if getattr(vecenv, our_name, None) is cls:
            found = getattr(sb3, sb3_name, None)
            return found if isinstance(found, type) else None
    return None


def register_with_sb3() -> list[str]:
    """Register vecenv's classes as virtual subclasses of their SB3 counterparts, if SB3 is loaded.

    Idempotent. Does not import SB3.

    :return: the SB3 class names that now accept vecenv objects (empty if SB3's ``vec_env`` is not loaded).
    """
    sb3 = sys.modules.get(SB3_VEC_ENV_MODULE)
    if sb3 is None:
        return []
    import vecenv

    registered = []
    for sb3_name, our_name in _CLASS_PAIRS.items():
        sb3_class = getattr(sb3, sb3_name, None)
        our_class = getattr(vecenv, our_name, None)
        if sb3_class is None or our_class is None or not hasattr(sb3_class, "register"):
            continue
        sb3_class.register(our_class)
        registered.append(sb3_name)
    return registered


class _RegisteringLoader(importlib.abc.Loader):
    """Delegates to SB3's real loader, then registers vecenv's classes."""

    def __init__(self, loader: importlib.abc.Loader) -> None:
        self.loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.loader.exec_module(module)
        register_with_sb3()


class _SB3ImportHook(importlib.abc.MetaPathFinder):
    """Finds nothing itself; wraps the loader of ``stable_baselines3.common.vec_env`` when it is imported."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != SB3_VEC_ENV_MODULE:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _RegisteringLoader(spec.loader)
                return spec
        return None


def install() -> None:
    """Register now if SB3 is loaded; otherwise install the import hook (once)."""
    if register_with_sb3():
        return
    if not any(isinstance(finder, _SB3ImportHook) for finder in sys.meta_path):
        sys.meta_path.insert(0, _SB3ImportHook())
