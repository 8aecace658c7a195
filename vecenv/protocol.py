"""The commands a vector env sends to the code that owns its sub-envs (an :class:`~vecenv.env_group.EnvGroup`).

Every backend speaks this protocol: the in-process worker calls the handler directly; worker processes and
Ray actors receive it as byte messages and answer with one reply message each (see
:mod:`vecenv.workers.messages`).
"""

from __future__ import annotations

import enum
from typing import Any


class Command(enum.IntEnum):
    """A request to an :class:`~vecenv.env_group.EnvGroup`; payloads are documented on its handlers."""

    STEP = 1
    RESET = 2
    GET_ATTR = 3
    SET_ATTR = 4
    HAS_ATTR = 5
    ENV_METHOD = 6
    IS_WRAPPED = 7
    RENDER = 8
    CLOSE = 9
    #: worker processes only: map the shared batch buffers (handled by the worker loop, not the group)
    SETUP = 10
    #: seeds / options for the envs' next reset, whoever triggers it (caller or autoreset)
    SET_NEXT_RESET = 11
    #: the group's time accounts (payload: whether to restart them), see :mod:`vecenv.stats`
    STATS = 12
    #: Gymnasium's ``call``: an attribute read once, then called with the arguments if it is callable
    CALL = 13

    @property
    def label(self) -> str:
        """Lower-case name used in error messages, e.g. ``"env_method"``."""
        return self.name.lower()


class EmptyOptions(dict[str, Any]):
    """``options={}`` as the caller of a Gymnasium-style reset gave it (``reset(options={})``, or a
    ``reset_mask`` and nothing else), as opposed to no options at all.

    In the per-env options of a RESET payload an empty dict means "no options" (the envs get ``options=None``,
    or the options stored for their next reset); this one makes a Gymnasium-style reset
    (:attr:`~vecenv.env_group.EnvGroup.gymnasium_resets`) pass ``options={}``, as Gymnasium's vector envs do.
    """
