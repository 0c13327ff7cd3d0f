"""Train a demo model on the digits training split and measure its accuracy.

Examples
--------
>>> import torch
>>> from prune_explorer.demo.models import DigitsMLP
>>> from prune_explorer.demo.training import evaluate, train
>>> _ = torch.manual_seed(0)
>>> model = train(DigitsMLP(), epochs=3)
>>> 0.8 < evaluate(model) <= 1.0
True
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable, Iterator

import torch
from torch import nn

from prune_explorer.demo.data import load_digits_split
from prune_explorer.demo.models import Layout, infer_layout

DEFAULT_EPOCHS = 30
DEFAULT_LR = 1e-2
DEFAULT_BATCH_SIZE = 64
_SPLITS = ("train", "test")


def _check_positive_int(function: str, argument: str, value: object, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{function}: {argument} must be an int >= {minimum}; got {value!r}")


def _device_of(model: nn.Module) -> torch.device:
    for tensor in itertools.chain(model.parameters(), model.buffers()):
        return tensor.device
    return torch.device("cpu")


@contextlib.contextmanager
def _one_thread() -> Iterator[None]:
    """Run the block on one intra-op CPU thread, the caller's setting restored afterwards.

    Faster for models this small (a second thread buys nothing on ops this size), immune to
    slowdowns when the CPU is shared (each parallel region of two threads waits for both to
    get a time slice: evaluate took 142 ms at 2 threads against 5 ms at 1 under a load of 8 on
    2 cores), and the arithmetic no longer depends on the machine's core count.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def train(
    model: nn.Module,
    epochs: int = DEFAULT_EPOCHS,
    *,
    seed: int = 0,
    lr: float = DEFAULT_LR,
    batch_size: int = DEFAULT_BATCH_SIZE,
    layout: Layout | None = None,
    progress: Callable[[int], object] | None = None,
) -> nn.Module:
    """Train ``model`` in place on the digits training split with Adam and cross-entropy.

    Parameters
    ----------
    model : torch.nn.Module
        A classifier producing 10 logits, e.g. :class:`DigitsMLP` or :class:`DigitsCNN`.
        Pruned models (with forward pre-hooks) train too: only unmasked weights change
        the output.
    epochs : int, default 30
        Passes over the 1,347 training images (30 epochs take about a second on a CPU).
    seed : int, default 0
        Seeds the order of the mini-batches. Training is deterministic: the same initial
        weights and the same arguments give bit-identical weights on the same machine.
        Initial weights are the caller's business (see ``untrained_model(name, seed)``).
        Runs on one intra-op CPU thread (restored afterwards), which is fastest for these
        small models and keeps results independent of the number of cores.
    lr : float, default 0.01
        Adam learning rate.
    batch_size : int, default 64
        Mini-batch size.
    layout : {"flat", "image"}, optional
        Input layout; by default taken from the model (see :func:`infer_layout`).
    progress : callable, optional
        ``progress(epochs_done)`` after each epoch (a schedule's progress bar and Stop:
        :mod:`prune_explorer.session.loop.runner`); it may raise to stop. It changes nothing
        in the training.

    Returns
    -------
    torch.nn.Module
        The same ``model`` object, trained, left in eval mode.

    Examples
    --------
    >>> import torch
    >>> from prune_explorer.demo import DigitsCNN, evaluate, train
    >>> _ = torch.manual_seed(0)
    >>> cnn = train(DigitsCNN(), epochs=2)
    >>> cnn.training
    False
    """
    _check_positive_int("train", "epochs", epochs, 0)
    _check_positive_int("train", "batch_size", batch_size, 1)
    _check_positive_int("train", "seed", seed, 0)
    if not isinstance(lr, (int, float)) or isinstance(lr, bool) or not lr > 0:
        raise ValueError(f"train: lr must be a float > 0; got {lr!r}")
    with _one_thread():
        data = load_digits_split(layout or infer_layout(model))
        device = _device_of(model)
        x, y = data.x_train.to(device), data.y_train.to(device)
        generator = torch.Generator().manual_seed(seed)
        optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        loss_fn = nn.CrossEntropyLoss()
        model.train()
        for epoch in range(epochs):
            order = torch.randperm(len(y), generator=generator).to(device)
            for batch in order.split(batch_size):
                optimizer.zero_grad(set_to_none=True)
                loss = loss_fn(model(x[batch]), y[batch])
                loss.backward()
                optimizer.step()
            if progress is not None:
                progress(epoch + 1)
    model.eval()
    return model


@torch.no_grad()
def evaluate(model: nn.Module, split: str = "test", *, layout: Layout | None = None) -> float:
    """Return the classification accuracy of ``model`` on a digits split.

    The predicted class is the argmax of the logits. The model runs in eval mode and
    without gradients; its training/eval mode is restored afterwards. Pruned models are
    evaluated as they are (their forward pre-hooks apply the masks).

    Like :func:`train`, it runs on one intra-op CPU thread (restored afterwards).

    Parameters
    ----------
    model : torch.nn.Module
        A classifier producing 10 logits.
    split : {"test", "train"}, default "test"
        ``"test"`` is the held-out split (450 images) the model never trained on.
    layout : {"flat", "image"}, optional
        Input layout; by default taken from the model (see :func:`infer_layout`).

    Returns
    -------
    float
        Fraction of correctly classified images, in [0, 1].

    Examples
    --------
    >>> from prune_explorer.demo import evaluate, load_mlp
    >>> evaluate(load_mlp()) > 0.95
    True
    """
    if split not in _SPLITS:
        raise ValueError(f"evaluate: split must be 'train' or 'test'; got {split!r}")
    was_training = model.training
    with _one_thread():  # as train does
        x, y = load_digits_split(layout or infer_layout(model)).split(split)
        device = _device_of(model)
        model.eval()
        try:
            predictions = model(x.to(device)).argmax(dim=1)
        finally:
            model.train(was_training)
        return float((predictions.cpu() == y).double().mean())


#: What :func:`evaluate` measures: the explorer names its readout after it.
evaluate.metric_label = "test accuracy"  # type: ignore[attr-defined]
