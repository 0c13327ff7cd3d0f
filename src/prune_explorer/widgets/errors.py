"""Errors raised by the widget layer itself (bad input the session never sees).

Examples
--------
>>> issubclass(WidgetInputError, ValueError)
True
"""

from __future__ import annotations

__all__ = ["WidgetInputError"]


class WidgetInputError(ValueError):
    """Input the explorer cannot turn into a session call (no mask given, nothing chosen...)."""
