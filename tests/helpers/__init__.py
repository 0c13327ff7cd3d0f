"""Helpers shared by the test folders (models, snapshots, replay on stock torch, browser driving).

The test folders import them as ``helpers.<module>``: ``tests/`` is on pytest's ``pythonpath``.
"""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
"""The repository root (the folder holding ``pyproject.toml``)."""
