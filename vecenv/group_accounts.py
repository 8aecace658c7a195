"""The time accounts of an :class:`~vecenv.env_group.EnvGroup` (what :mod:`vecenv.stats` reports per worker): seconds
inside the envs and inside the group's own work, steps, resets and episodes."""

from __future__ import annotations

from typing import Any

__all__ = ["GroupAccounts"]


class GroupAccounts:
    """The accounts an :class:`~vecenv.env_group.EnvGroup` keeps as it steps and resets its envs (it adds to them)."""

    def restart_accounts(self) -> None:
        """Start the group's time accounts (:meth:`accounts`) again from zero."""
        #: seconds inside the envs' ``step`` and ``reset`` (automatic resets included)
        self.env_seconds = 0.0
        #: the part of :attr:`env_seconds` spent in resets the vector env asked for (RESET requests)
        self.requested_reset_env_seconds = 0.0
        #: seconds inside :meth:`step` and :meth:`reset` (env calls and vecenv's own work on them)
        self.busy_seconds = 0.0
        self.env_steps = 0
        self.resets = 0
        self.episodes = 0

    def accounts(self, restart: bool = False) -> dict[str, Any]:
        """The group's time accounts (seconds, counts), see :class:`vecenv.stats.WorkerStats`.

        :param restart: start the accounts again from zero after reading them.
        :return: ``env_seconds``, ``requested_reset_env_seconds``, ``busy_seconds``, ``env_steps``, ``resets``,
            ``episodes``.
        """
        accounts = {
            "env_seconds": self.env_seconds,
            "requested_reset_env_seconds": self.requested_reset_env_seconds,
            "busy_seconds": self.busy_seconds,
            "env_steps": self.env_steps,
            "resets": self.resets,
            "episodes": self.episodes,
        }
        if restart:
            self.restart_accounts()
        return accounts
