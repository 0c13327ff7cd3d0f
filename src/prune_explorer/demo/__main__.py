"""Regenerate the shipped demo checkpoints: ``python -m prune_explorer.demo [--out DIR]``.

Trains every demo model from seed 0 (a few seconds on a CPU), writes ``<name>.pt``
``state_dict`` files, and prints each file with its size and test accuracy.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from prune_explorer.demo.checkpoints import CHECKPOINT_DIR, DEMO_MODELS, build_checkpoints
from prune_explorer.demo.training import evaluate


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv``, rebuild the checkpoints and report them; return the exit code."""
    parser = argparse.ArgumentParser(
        prog="python -m prune_explorer.demo",
        description="Train the demo models deterministically and save their state_dicts.",
    )
    parser.add_argument(
        "--out",
        default=str(CHECKPOINT_DIR),
        help="output directory (default: the package's checkpoints folder, %(default)s)",
    )
    args = parser.parse_args(argv)
    import torch

    for name, path in build_checkpoints(args.out).items():
        model = DEMO_MODELS[name]()
        model.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
        size_kb = path.stat().st_size / 1024
        print(f"{name}: {path} ({size_kb:.1f} KB), test accuracy {evaluate(model):.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
