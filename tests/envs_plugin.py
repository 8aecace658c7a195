"""A stand-in for a package that registers its Gymnasium envs when imported (as ale-py registers ``ALE/...``).

Importing it registers :data:`ENV_ID`, CartPole under a namespace of its own, so a run of it can be compared
with a run of ``CartPole-v1``. Nothing imports it but the tests of ``vecenv run --import`` and ``MODULE:ENV_ID``
(tests/test_cli_env_ids.py), which import it themselves or have vecenv import it.
"""

from __future__ import annotations

import gymnasium as gym

#: the namespace this module registers
NAMESPACE = "VecenvPlugin"
#: the id this module registers: CartPole-v1's env under :data:`NAMESPACE`
ENV_ID = f"{NAMESPACE}/CartPole-v1"
#: an id whose env needs a package that is not installed (its entry point's module does not exist), as
#: ``phys2d/CartPole-v1`` needs jax
MISSING_PACKAGE_ID = f"{NAMESPACE}/NeedsMissingPackage-v0"

if ENV_ID not in gym.registry:
    gym.register(ENV_ID, entry_point="gymnasium.envs.classic_control.cartpole:CartPoleEnv", max_episode_steps=500)
if MISSING_PACKAGE_ID not in gym.registry:
    gym.register(MISSING_PACKAGE_ID, entry_point="vecenv_missing_package_for_tests.envs:Env")
