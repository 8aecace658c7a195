"""Checks both adapters of :mod:`vecenv.adapters` make: integers, and calls on a closed adapter."""

from __future__ import annotations

from typing import Any

import numpy as np

from vecenv.errors import ClosedVecEnvError

__all__ = ["check_open", "is_int"]


def is_int(value: Any) -> bool:
    """Whether ``value`` is a Python or numpy integer (a bool is not)."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def check_open(adapter: Any, what: str) -> None:
    """Raise :class:`~vecenv.ClosedVecEnvError` for a call to ``what()`` if ``adapter.closed``."""
    if adapter.closed:
        raise ClosedVecEnvError(f"Cannot call {what}() on a closed {type(adapter).__name__}; create a new one.")
