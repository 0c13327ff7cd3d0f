"""Which public entry point is running, so that error messages name the call the user wrote."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

_CALLER: ContextVar[str | None] = ContextVar("prune_explorer_caller", default=None)


def caller(default: str) -> str:
    """Name of the outermost public call in progress, else ``default``."""
    return _CALLER.get() or default


@contextlib.contextmanager
def calling(name: str) -> Iterator[None]:
    """Mark ``name`` as the public call in progress (outermost call wins)."""
    if _CALLER.get() is not None:
        yield
        return
    token = _CALLER.set(name)
    try:
        yield
    finally:
        _CALLER.reset(token)
