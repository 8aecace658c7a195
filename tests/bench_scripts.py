"""Loading a script of ``benchmarks/`` as a module in a test (the scripts are not a package)."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
from collections.abc import Iterator
from typing import Any

BENCH_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")


def load_bench_script(name: str, filename: str) -> Any:
    """``benchmarks/<filename>`` as a module named ``name``: its siblings (``paired.py``, ...) importable and the
    module in ``sys.modules`` while it runs (its dataclasses look their module up there), neither after."""
    sys.path.insert(0, BENCH_DIR)
    spec = importlib.util.spec_from_file_location(name, os.path.join(BENCH_DIR, filename))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
        sys.path.remove(BENCH_DIR)
    return module


@contextlib.contextmanager
def registered_bench_script(name: str, filename: str) -> Iterator[Any]:
    """``benchmarks/<filename>`` as a module named ``name``, left in ``sys.modules`` until the block ends: for a
    script whose functions are pickled by reference while a test runs it (a forked pool's task, a worker's env
    factory)."""
    spec = importlib.util.spec_from_file_location(name, os.path.join(BENCH_DIR, filename))
    assert spec is not None and spec.loader is not None
    module = sys.modules[name] = importlib.util.module_from_spec(spec)
    try:
        sys.path.insert(0, BENCH_DIR)  # its siblings (paired.py, scaling.py, ...)
        try:
            spec.loader.exec_module(module)
        finally:
            sys.path.remove(BENCH_DIR)
        yield module
    finally:
        del sys.modules[name]
