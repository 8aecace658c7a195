"""A PettingZoo env module as ``vecenv run`` takes one (``vecenv run tests.pz_scripted_v0``): ``parallel_env``
makes :class:`tests.envs_pettingzoo.ScriptedAgentsEnv` (an agent that leaves early, one that joins late)."""

from __future__ import annotations

from typing import Any

from tests.envs_pettingzoo import ScriptedAgentsEnv


def parallel_env(**kwargs: Any) -> ScriptedAgentsEnv:
    return ScriptedAgentsEnv(**kwargs)
