"""``python -m vecenv.bench``: the ``vecenv bench`` command."""

import sys

from vecenv.bench.cli import main

if __name__ == "__main__":
    sys.exit(main(prog="python -m vecenv.bench"))
