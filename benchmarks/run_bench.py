#!/usr/bin/env python3
"""Run the vecenv benchmark without the ``vecenv`` console script: ``python benchmarks/run_bench.py --help``.

The same code and options as ``vecenv bench`` (:mod:`vecenv.bench`); see ``benchmarks/README.md``. Works
from a source checkout where vecenv is not installed too (its dependencies must be).
"""

import os
import sys

try:
    import vecenv  # noqa: F401
except ImportError:
    # a checkout without `pip install -e .`: use the source tree, in the case processes as well
    _root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.path.insert(0, _root)
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [_root, os.environ.get("PYTHONPATH")]))

from vecenv.bench.cli import main

if __name__ == "__main__":
    sys.exit(main(prog="run_bench.py"))
