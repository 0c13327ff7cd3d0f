"""``python -m prune_explorer.cli``: the same as the ``prune-explorer`` command."""

import sys

from prune_explorer.cli import main

sys.exit(main())
