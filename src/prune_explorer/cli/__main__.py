"""``python -m prune_explorer.cli``: the same as the ``prune-explorer`` command."""

import sys

from prune_explorer.cli import main

if __name__ == "__main__":
    sys.exit(main())
