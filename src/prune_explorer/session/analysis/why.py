"""Why a criterion keeps a weight: the numbers behind a score, and where two criteria disagree.

Two records the session's :meth:`~prune_explorer.session.Session.why` and
:meth:`~prune_explorer.session.Session.compare_criteria` return (pictures of them are
:func:`prune_explorer.viz.importance.plot_why` and :func:`prune_explorer.viz.plot_diff`):

* :class:`WhyData`: for one tensor, ``|W|`` as the model sees it, the input norms ``||X_j||``
  from the calibration statistics (one per input feature, and laid along the weight's input
  axis so that it has the weight's shape) and the chosen criterion's score, all on the CPU;
* :class:`CriteriaComparison`: the masks two criteria's previews of the same step leave on one
  tensor, and the entries one keeps and the other prunes.

Nothing here changes the model; the arrays are copies (or, for the spread norms, a broadcast
view of the small per-feature vector).

Examples
--------
>>> import torch
>>> from prune_explorer import Session
>>> _ = torch.manual_seed(0)
>>> s = Session(torch.nn.Sequential(torch.nn.Linear(3, 2)))
>>> _ = s.calibrate([torch.tensor([[3.0, 0.0, 1.0], [4.0, 0.0, 0.0]])])
>>> why = s.why("0.weight", "wanda")
>>> why.input_norms.tolist(), why.dead_inputs
([5.0, 0.0, 1.0], 1)
>>> torch.equal(why.score, why.weight * why.norms.float())
True
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from .bins import log_edges

__all__ = ["CriteriaComparison", "WhyData"]


@dataclass(frozen=True, repr=False)
class WhyData:
    """What a criterion's score of one tensor is made of (CPU tensors, detached).

    Attributes
    ----------
    name : str
        The tensor's address.
    importance : str
        The criterion (a key of :data:`prune_explorer.importance.CRITERIA`).
    formula : str
        Its score in words (``"|w| * ||X_j||_2 (input feature norm)"``).
    weight : torch.Tensor
        ``|W|`` as the model sees it (pruned entries are 0), the tensor's shape.
    kept : torch.Tensor
        Bool, the tensor's shape: what its current mask keeps.
    input_norms : torch.Tensor or None
        Float64 ``(C_in,)``: ``||X_j||_2``, the root of the running sum of ``x_j**2`` that
        calibration kept; None for a tensor without input statistics (a bias, an embedding).
    norms : torch.Tensor or None
        ``input_norms`` laid along the weight's input axis, broadcast to the weight's shape (a
        view: no copy per entry), so that it is drawn as the weight is.
    input_dim : int or None
        The weight's dim that ``input_norms`` runs along (1 for ``Linear`` and convolutions,
        0 for ``transformers``' ``Conv1D``).
    score : torch.Tensor
        The criterion's scores, exactly those a step with ``importance=`` passes to the core.
    rows : int
        Calibration rows summed in ``input_norms`` (tokens, or positions of a convolution).
    module_type : str
        The class name of the module that holds the tensor (axes of the picture).
    """

    name: str
    importance: str
    formula: str
    weight: torch.Tensor
    kept: torch.Tensor
    input_norms: torch.Tensor | None
    norms: torch.Tensor | None
    input_dim: int | None
    score: torch.Tensor
    rows: int
    module_type: str

    @property
    def dead_inputs(self) -> int:
        """Input features whose norm is exactly 0 (never active on the calibration data)."""
        return 0 if self.input_norms is None else int((self.input_norms == 0).sum())

    def norm_histogram(self, bins: int = 40) -> tuple[np.ndarray, np.ndarray]:
        """``(edges, counts)`` of the positive input norms over ``bins`` log-spaced bins (the
        rule of every importance histogram: :func:`~.bins.log_edges`); empty
        arrays when there is none. Dead inputs (norm 0) are :attr:`dead_inputs`."""
        if self.input_norms is None:
            return np.zeros(0), np.zeros(0, dtype=np.int64)
        values = self.input_norms.double().numpy()
        positive = values[values > 0]
        if not positive.size:
            return np.zeros(0), np.zeros(0, dtype=np.int64)
        edges = log_edges(float(positive.min()), float(positive.max()), bins)
        counts, _ = np.histogram(np.clip(positive, edges[0], edges[-1]), edges)
        return edges, counts.astype(np.int64)

    def __repr__(self) -> str:
        norms = ("no input norms" if self.input_norms is None else
                 f"{self.input_norms.numel()} input norms over {self.rows:,} rows")
        return (f"WhyData({self.name!r}, {self.importance}: {self.formula}, shape "
                f"{tuple(self.weight.shape)}, {norms})")


@dataclass(frozen=True, repr=False)
class CriteriaComparison:
    """The masks two criteria leave on one tensor with the same step, and where they differ.

    Each mask is the one :meth:`Session.preview` gives for the step with that criterion (so,
    bit for bit, the one Apply would install).

    Attributes
    ----------
    name : str
        The tensor compared.
    method : str
        The step's method (``"l1_unstructured"``, ``"ln_structured"``,
        ``"global_unstructured"``).
    settings : mapping
        The step's settings beside ``importance``.
    first, second : str
        The criteria compared (A and B).
    first_mask, second_mask : torch.Tensor
        Bool, the tensor's shape: what A's step and B's step keep.
    """

    name: str
    method: str
    settings: Mapping[str, Any]
    first: str
    second: str
    first_mask: torch.Tensor
    second_mask: torch.Tensor
    _counts: dict[str, int] = field(default_factory=dict, compare=False)

    @property
    def only_first(self) -> torch.Tensor:
        """Entries A keeps and B prunes (bool)."""
        return self.first_mask & ~self.second_mask

    @property
    def only_second(self) -> torch.Tensor:
        """Entries B keeps and A prunes (bool)."""
        return self.second_mask & ~self.first_mask

    def counts(self) -> dict[str, int]:
        """``kept_by_first_only``, ``kept_by_second_only``, ``kept_by_both``,
        ``pruned_by_both``, ``disagree`` (the first two together) and ``numel``."""
        if not self._counts:
            first, second = self.first_mask, self.second_mask
            only_a = int((first & ~second).sum())
            only_b = int((second & ~first).sum())
            both = int((first & second).sum())
            numel = first.numel()
            self._counts.update(kept_by_first_only=only_a, kept_by_second_only=only_b,
                                kept_by_both=both, pruned_by_both=numel - only_a - only_b - both,
                                disagree=only_a + only_b, numel=numel)
        return dict(self._counts)

    @property
    def disagree(self) -> int:
        """Entries one criterion keeps and the other prunes."""
        return self.counts()["disagree"]

    def sentence(self) -> str:
        """The comparison in one line of words."""
        c = self.counts()
        share = c["disagree"] / c["numel"] if c["numel"] else 0.0
        return (f"{self.first} and {self.second} disagree on {c['disagree']:,} of "
                f"{c['numel']:,} entries of {self.name} ({share:.1%}): "
                f"{c['kept_by_first_only']:,} kept by {self.first} and pruned by "
                f"{self.second}, {c['kept_by_second_only']:,} kept by {self.second} and pruned "
                f"by {self.first}")

    def __repr__(self) -> str:
        c = self.counts()
        return (f"CriteriaComparison({self.name!r}, {self.method}: {self.first} vs "
                f"{self.second}, {c['kept_by_first_only']} kept only by {self.first}, "
                f"{c['kept_by_second_only']} kept only by {self.second})")
