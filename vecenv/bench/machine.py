"""The host a benchmark runs on: CPUs, memory, load, software versions and vecenv's commit.

Every probe returns None where the platform does not tell (no ``/proc``, no ``os.getloadavg``, not a git
checkout). Nothing here imports torch or the other optional packages: their versions come from the
installed distributions' metadata.
"""

from __future__ import annotations

import datetime as dt
import importlib.metadata
import inspect
import multiprocessing as mp
import os
import platform
import subprocess
from typing import Any

import vecenv
from vecenv import SubprocVecEnv

__all__ = [
    "cpu_model",
    "cpus_usable",
    "load_1m",
    "load_average",
    "machine_info",
    "mem_available_mib",
    "mem_total_mib",
    "package_version",
    "subproc_parameters",
    "vecenv_commit",
]


def package_version(distribution: str) -> str | None:
    """The installed version of ``distribution`` (e.g. ``"stable-baselines3"``), or None."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def cpu_model() -> str | None:
    """The CPU's model name from ``/proc/cpuinfo``, else :func:`platform.processor`."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.lower().startswith(("model name", "hardware", "processor\t: ")) and ":" in line:
                    value = line.split(":", 1)[1].strip()
                    if value and not value.isdigit():
                        return value
    except OSError:
        pass
    return platform.processor() or None


def cpus_usable() -> int | None:
    """The CPUs this process may run on (its affinity), which can be fewer than :func:`os.cpu_count`."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None


def _meminfo_kib(key: str) -> int | None:
    """A ``/proc/meminfo`` field (e.g. ``"MemTotal"``) in KiB."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith(f"{key}:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def mem_total_mib() -> float | None:
    """The machine's memory, in MiB (rounded)."""
    kib = _meminfo_kib("MemTotal")
    return None if kib is None else round(kib / 1024)


def mem_available_mib() -> float | None:
    """The memory available for new processes now, in MiB."""
    kib = _meminfo_kib("MemAvailable")
    return None if kib is None else kib / 1024


def load_average() -> list[float] | None:
    """The 1, 5 and 15 minute load averages (2 decimals)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def load_1m() -> float | None:
    """The 1 minute load average."""
    load = load_average()
    return None if load is None else load[0]


def vecenv_commit() -> str | None:
    """The commit of the vecenv source tree (``+dirty`` with local changes), if it is a git checkout; else the
    environment variable ``VECENV_COMMIT`` (set where a copy of the tree runs without its git history), if set."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(vecenv.__file__)))
    if not os.path.exists(os.path.join(root, ".git")):
        return os.environ.get("VECENV_COMMIT") or None
    try:
        commit = subprocess.run(
            ["git", "-C", root, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=5, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", root, "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return commit + ("+dirty" if dirty else "")


def subproc_parameters() -> list[str]:
    """The parameters of this vecenv's ``SubprocVecEnv``, in order."""
    return list(inspect.signature(SubprocVecEnv).parameters)


def machine_info() -> dict[str, Any]:
    """The machine and software a run measured: CPUs, memory, versions, date, load (no torch import)."""
    return {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "cpu_count": os.cpu_count(),
        "cpus_usable": cpus_usable(),
        "cpu_model": cpu_model(),
        "mem_total_mib": mem_total_mib(),
        "platform": platform.platform(),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "vecenv": package_version("vecenv"),
        "vecenv_commit": vecenv_commit(),
        "vecenv_subproc_params": subproc_parameters(),
        "numpy": package_version("numpy"),
        "gymnasium": package_version("gymnasium"),
        "stable_baselines3": package_version("stable-baselines3"),
        "torch": package_version("torch"),
        "pandas": package_version("pandas"),
        "matplotlib": package_version("matplotlib"),
        "default_start_method": mp.get_start_method(allow_none=True) or mp.get_all_start_methods()[0],
        "load_average_start": load_average(),
    }
