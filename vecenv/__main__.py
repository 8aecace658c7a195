"""``python -m vecenv``: the same as the ``vecenv`` command."""

import sys

from vecenv.cli import main

if __name__ == "__main__":
    sys.exit(main())
