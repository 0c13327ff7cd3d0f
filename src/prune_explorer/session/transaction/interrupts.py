"""Ctrl-C waits while the session changes its state: :func:`held_interrupts`, :class:`Gate` and
:func:`machinery` are the core's (:mod:`prune_explorer.prune._interrupts`, whose docstring
says how held sections, open gates and nesting work), re-exported here; the session holds them
while it opens, rolls back or commits a transaction and opens the gate for the transaction's
block and the change-event callbacks. :class:`ThreadState` and :func:`thread_state_kept` give
the calling thread its autograd mode and thread count back on any exit.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from prune_explorer.prune.engine import Gate, held_interrupts, machinery

__all__ = ["Gate", "ThreadState", "held_interrupts", "machinery", "thread_state_kept"]


@dataclass(frozen=True)
class ThreadState:
    """What an action may change of the calling thread's state and must give back, whatever
    happens: autograd mode (a ``no_grad`` block whose ``__exit__`` a Ctrl-C stopped leaves it
    off) and torch's CPU thread count. (The SIGINT handler is :func:`held_interrupts`' own.)"""

    grad: bool
    threads: int

    @classmethod
    def now(cls) -> ThreadState:
        """The calling thread's state now."""
        return cls(torch.is_grad_enabled(), torch.get_num_threads())

    def restore(self) -> None:
        """Put the state back (call it where interrupts are held)."""
        if torch.is_grad_enabled() != self.grad:
            torch.set_grad_enabled(self.grad)
        if torch.get_num_threads() != self.threads:
            torch.set_num_threads(self.threads)


@contextlib.contextmanager
def thread_state_kept() -> Iterator[None]:
    """Run the block open to Ctrl-C, then give the thread its :class:`ThreadState` back, on any
    exit, with interrupts held so that a second Ctrl-C cannot skip it.

    Examples
    --------
    >>> import torch
    >>> with thread_state_kept():
    ...     _ = torch.set_grad_enabled(False)  # e.g. a no_grad block left half-way
    >>> torch.is_grad_enabled()
    True
    """
    with held_interrupts() as gate:
        state = ThreadState.now()
        try:
            with gate.open():
                yield
        finally:
            state.restore()
