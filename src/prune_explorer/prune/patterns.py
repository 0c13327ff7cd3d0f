"""Hardware-friendly sparsity patterns as pruning methods: N:M semi-structured and blocks.

Neither pattern is in ``torch.nn.utils.prune``; both follow its conventions (a class with a pure
``compute_mask`` and a function that attaches it), so they combine with every other method.

* :class:`SemiStructured` / :func:`semi_structured` -- ``pattern="N:M"``: along ``dim``, every
  group of ``M`` consecutive entries keeps its ``N`` largest ``|importance|`` and prunes the rest
  (2:4 is what sparse tensor cores on Ampere and later GPUs accelerate).
* :class:`BlockStructured` / :func:`block_structured` -- the tensor is cut into blocks of shape
  ``block`` (one size per leading dim; dims past ``len(block)`` are taken whole) and the
  ``amount`` blocks with the smallest ``n``-norm are pruned.

Rules (all checked, with the package's one message template; ``pattern`` and ``block`` are
entries of the core's one constraint table, :data:`prune_explorer.prune.validation.CONSTRAINTS`,
and both methods are in its ``METHOD_PARAMETERS``):

* the pattern string is ``"N:M"`` with integers ``M >= 1`` and ``0 <= N <= M``;
* ``M`` divides the size along ``dim`` -- there is no partial group, because hardware has none
  (choose a ``dim`` whose size is a multiple of ``M``, e.g. ``dim=1``, the input channels, of a
  conv weight);
* ``block`` has at least one and at most ``rank`` positive ints, and each divides the size of its
  dim (no partial blocks, for the same reason);
* ties follow the project's rule: the lowest index is pruned first (the group position for N:M,
  the row-major block index for blocks).

PRUNING_TYPE is ``"global"`` for both: a pattern is defined on the tensor's own layout (groups of
``M`` neighbours, rectangular blocks), which the ``"unstructured"`` path (a 1-D gather of the
surviving entries) and the ``"structured"`` path (a gather of surviving slices) would destroy.
As ``"global"`` methods they receive the whole tensor and the mask so far in a
:class:`~prune_explorer.prune.PruningContainer` and honour it themselves: entries already pruned
stay pruned and count as pruned within their group (so a group keeps at most ``N`` entries), and
blocks already fully pruned are not candidates (``amount`` counts the blocks still alive).

This module imports only torch.

Examples
--------
>>> import torch
>>> from prune_explorer import prune
>>> layer = torch.nn.Linear(4, 1, bias=False)
>>> with torch.no_grad():
...     _ = layer.weight.copy_(torch.tensor([[0.1, -3.0, 0.2, 2.0]]))
>>> prune.semi_structured(layer, "weight", pattern="2:4").weight_mask.tolist()
[[0.0, 1.0, 0.0, 1.0]]
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ._base import _is_all_ones_view, checks_its_settings, times_default
from .layers import DEFAULT_GROUP_DIM, reduction_dim
from .methods import BasePruningMethod
from .validation import (
    check,
    check_dim,
    count_to_prune,
    parse_pattern,
    pattern_counts,
    problem,
    show_value,
)

__all__ = [
    "BlockStructured",
    "SemiStructured",
    "block_structured",
    "parse_pattern",
    "satisfies_pattern",
    "semi_structured",
]


def _keys(t: torch.Tensor, default_mask: torch.Tensor) -> torch.Tensor:
    """``|t|`` as floats, with entries ``default_mask`` already prunes set to -inf."""
    keys = t.abs() if t.is_floating_point() else t.abs().to(torch.float)
    if _is_all_ones_view(default_mask):  # a fresh tensor: nothing pruned yet
        return keys
    return keys.masked_fill_(default_mask == 0, float("-inf"))


#: Up to this group size the rank of each entry is counted by pairwise comparisons (fast);
#: larger groups are sorted.
_PAIRWISE_MAX = 8


def _keep_largest(groups: torch.Tensor, keep_n: int, dtype: torch.dtype) -> torch.Tensor:
    """``(G, m)`` 0/1 of ``dtype``: the ``keep_n`` largest keys of each row are 1; among equal
    keys the lower index ranks lower (is dropped first) -- the order of a stable ascending sort.

    For small ``m`` the rank of each entry (how many entries of its row come before it in that
    order) is counted with ``m (m - 1) / 2`` comparisons of whole columns, much cheaper than
    sorting millions of tiny rows. Keys with a NaN (which a sort puts last) take the sorting
    path; so does an inf + -inf row sum, harmlessly.
    """
    n_groups, m = groups.shape
    drop = m - keep_n
    out = torch.empty(groups.shape, dtype=dtype, device=groups.device)
    if m > _PAIRWISE_MAX or bool(torch.isnan(groups.sum())):
        order = torch.argsort(groups, dim=-1, stable=True)[:, :drop]
        return out.fill_(1).scatter_(-1, order, 0)
    # rank[j] starts at j (every i < j comes first) ... unless k_j < k_i, which swaps them
    rank = torch.arange(m, dtype=torch.int8, device=groups.device).view(m, 1).repeat(
        1, n_groups)
    for i in range(m):
        for j in range(i + 1, m):
            before = (groups[:, j] < groups[:, i]).view(torch.int8)
            rank[i].add_(before)
            rank[j].sub_(before)
    return torch.ge(rank.t(), drop, out=out)


@checks_its_settings
class SemiStructured(BasePruningMethod):
    """Keep ``N`` of every ``M`` consecutive entries along ``dim``: the largest ``|importance|``.

    Parameters
    ----------
    pattern : str
        ``"N:M"``, e.g. ``"2:4"``; ``M`` must divide the size along ``dim``.
    dim : int
        The dim along which groups of ``M`` neighbours are formed (default: the last; a bare
        tensor has no layer. :func:`semi_structured` and ``Session.apply`` default to the
        layer's reduction dim instead, see :mod:`prune_explorer.prune.layers`).

    Examples
    --------
    >>> import torch
    >>> from prune_explorer import prune
    >>> t = torch.tensor([[4.0, 1.0, 3.0, 2.0], [1.0, 1.0, 1.0, 1.0]])
    >>> prune.SemiStructured("2:4").compute_mask(t, torch.ones_like(t)).tolist()
    [[1.0, 0.0, 1.0, 0.0], [0.0, 0.0, 1.0, 1.0]]
    """

    PRUNING_TYPE = "global"

    def __init__(self, pattern: str = "2:4", dim: int = DEFAULT_GROUP_DIM) -> None:
        check(type(self).__name__, "pattern", pattern)
        check(type(self).__name__, "dim", dim)
        self.pattern = pattern
        self.dim = dim

    def compute_mask(self, t: torch.Tensor, default_mask: torch.Tensor) -> torch.Tensor:
        keep_n, m = pattern_counts(self.pattern)
        dim = check_group_dim(t, self.dim, m, self.where)
        moved = _keys(t, default_mask).movedim(dim, -1)
        groups = moved.reshape(-1, m)  # one row per group of m neighbours
        keep = _keep_largest(groups, keep_n, default_mask.dtype)
        return times_default(keep.reshape(moved.shape).movedim(-1, dim), default_mask)

    def _settings(self) -> dict[str, Any]:
        return {"pattern": self.pattern, "dim": self.dim}

    @classmethod
    def apply(  # type: ignore[override]
        cls, module: nn.Module, name: str, pattern: str = "2:4", dim: int | None = None,
        importance_scores: torch.Tensor | None = None,
    ) -> BasePruningMethod:
        """Attach a :class:`SemiStructured` to ``module.name`` (``dim=None``: the layer's
        reduction dim, as :func:`semi_structured`)."""
        if dim is None:
            dim = reduction_dim(module, name)
        return super().apply(module, name, pattern=pattern, dim=dim,
                             importance_scores=importance_scores)


def check_group_dim(t: torch.Tensor, dim: Any, m: int, where: str) -> int:
    """Check ``dim`` against ``t`` and that groups of ``m`` tile it; return ``dim`` >= 0."""
    d = check_dim(dim, t.dim(), where)
    if t.shape[d] % m:
        raise ValueError(problem(
            where, "pattern", f"'N:M' with M dividing the size along dim={dim} "
            f"({t.shape[d]}; groups are never partial)", f"M={m}"))
    return d


def check_block(t: torch.Tensor, block: Any, where: str) -> tuple[int, ...]:
    """Check ``block`` against ``t``'s rank and shape; return it padded with whole dims."""
    check(where, "block", block)
    if len(block) > t.dim():
        raise ValueError(problem(where, "block", f"at most {t.dim()} sizes for a {t.dim()}-D "
                                 f"tensor of shape {tuple(t.shape)}", tuple(block)))
    for d, (size, b) in enumerate(zip(t.shape, block, strict=False)):
        if size % b:
            raise ValueError(problem(
                where, "block", f"sizes that divide the tensor's shape {tuple(t.shape)} "
                f"(dim {d}: {show_value(b)} does not divide {size}; blocks are never partial)",
                tuple(block)))
    return tuple(int(b) for b in block) + tuple(t.shape[len(block):])


def block_view(x: torch.Tensor, block: tuple[int, ...]) -> torch.Tensor:
    """``x`` as a contiguous ``(grid..., entries)`` tensor: one row of entries per block.

    ``block`` has one size per dim of ``x`` (see :func:`check_block`); blocks are in row-major
    order of the grid and each block's entries in row-major order within it.
    """
    split: list[int] = []
    for size, b in zip(x.shape, block, strict=True):
        split += [size // b, b]
    rank = x.dim()
    grid = split[0::2]
    return x.reshape(split).permute(*range(0, 2 * rank, 2), *range(1, 2 * rank, 2)).reshape(
        *grid, -1)


def live_blocks(mask: torch.Tensor, block: tuple[int, ...]) -> torch.Tensor:
    """One bool per block (row-major): whether ``mask`` keeps an entry of it, i.e. whether
    :class:`BlockStructured` may still prune it. ``block`` as :func:`check_block` returns it."""
    if _is_all_ones_view(mask):  # a fresh tensor: every block is alive
        count = 1
        for size, b in zip(mask.shape, block, strict=True):
            count *= size // b
        return torch.ones(count, dtype=torch.bool, device=mask.device)
    return block_view(mask != 0, block).any(dim=-1).reshape(-1)


def _block_norm_order(n: Any) -> float:
    return 2.0 if n == "fro" else float(n)


@checks_its_settings
class BlockStructured(BasePruningMethod):
    """Prune the ``amount`` blocks of shape ``block`` with the smallest ``n``-norm.

    Parameters
    ----------
    amount : int or float
        Count (int >= 0) or fraction in [0, 1] of the blocks still alive.
    block : tuple of int
        Block size along the leading dims (dims past ``len(block)`` are taken whole); each size
        divides its dim.
    n : int, float or 'fro'
        Order of the vector norm over a block's entries (``'fro'`` is 2; ``'nuc'`` is refused).

    Examples
    --------
    >>> import torch
    >>> from prune_explorer import prune
    >>> t = torch.tensor([[1.0, 1.0, 5.0, 5.0], [1.0, 1.0, 5.0, 5.0]])
    >>> prune.BlockStructured(1, block=(2, 2)).compute_mask(t, torch.ones_like(t)).tolist()
    [[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 1.0, 1.0]]
    """

    PRUNING_TYPE = "global"

    def __init__(self, amount: float | int, block: tuple[int, ...] = (4, 4), n: Any = 1) -> None:
        where = type(self).__name__
        check(where, "amount", amount)
        check(where, "block", block)
        check(where, "n", n, "block_structured")
        self.amount = amount
        self.block = tuple(block)
        self.n = n

    def compute_mask(self, t: torch.Tensor, default_mask: torch.Tensor) -> torch.Tensor:
        where = self.where
        block = check_block(t, self.block, where)
        scores = block_view(t.abs() if t.is_floating_point() else t.abs().float(), block)
        norms = torch.linalg.vector_norm(scores, ord=_block_norm_order(self.n), dim=-1)
        live = live_blocks(default_mask, block)
        n_live = int(live.sum())
        k = count_to_prune(self.amount, n_live, where, "prunable blocks")
        keys = norms.reshape(-1).masked_fill(~live, float("-inf"))
        pruned = torch.argsort(keys, stable=True)[: k + live.numel() - n_live]
        keep_blocks = torch.ones(keys.shape, dtype=default_mask.dtype, device=t.device)
        keep_blocks[pruned] = 0
        # (g0, 1, g1, 1, ...) expanded to (g0, b0, g1, b1, ...) is the mask in one copy
        grid = [size // b for size, b in zip(t.shape, block, strict=True)]
        spread = [x for g in grid for x in (g, 1)]
        full = [x for g, b in zip(grid, block, strict=True) for x in (g, b)]
        keep = keep_blocks.view(spread).expand(full).reshape(t.shape)
        return times_default(keep, default_mask)

    def _settings(self) -> dict[str, Any]:
        return {"amount": self.amount, "block": self.block, "n": self.n}

    @classmethod
    def apply(  # type: ignore[override]
        cls, module: nn.Module, name: str, amount: float | int,
        block: tuple[int, ...] = (4, 4), n: Any = 1,
        importance_scores: torch.Tensor | None = None,
    ) -> BasePruningMethod:
        """Attach a :class:`BlockStructured` to ``module.name``."""
        return super().apply(module, name, amount=amount, block=block, n=n,
                             importance_scores=importance_scores)


def semi_structured(
    module: nn.Module, name: str, pattern: str = "2:4", dim: int | None = None,
    importance_scores: torch.Tensor | None = None,
) -> nn.Module:
    """Prune ``module.name`` to the ``"N:M"`` pattern along ``dim`` (keep N of every M by |w|).

    ``dim=None`` (the default) groups along the layer's reduction (input) dim, where hardware
    N:M groups its entries: dim 1 of a ``Linear`` or convolution weight, dim 0 of a
    ``transformers`` ``Conv1D`` or a transposed convolution (:func:`~prune_explorer.prune.layers.
    reduction_dim`); -1 for any other tensor.

    Returns the module, with ``name_orig``, ``name_mask`` and a forward pre-hook as for the
    other methods.

    Examples
    --------
    >>> import torch
    >>> from prune_explorer import prune
    >>> m = prune.semi_structured(torch.nn.Linear(8, 4), "weight", pattern="2:4")
    >>> m.weight_mask.view(4, 2, 4).sum(dim=-1).unique().tolist()
    [2.0]
    """
    if dim is None:
        dim = reduction_dim(module, name)
    SemiStructured._attach("semi_structured", module, name, importance_scores,
                           pattern=pattern, dim=dim)
    return module


def block_structured(
    module: nn.Module, name: str, amount: float | int, block: tuple[int, ...] = (4, 4),
    n: Any = 1, importance_scores: torch.Tensor | None = None,
) -> nn.Module:
    """Prune the ``amount`` blocks of ``module.name`` (shape ``block``) with the lowest n-norm.

    Examples
    --------
    >>> import torch
    >>> from prune_explorer import prune
    >>> m = prune.block_structured(torch.nn.Linear(8, 8), "weight", amount=0.5, block=(4, 4))
    >>> int(m.weight_mask.sum())
    32
    """
    BlockStructured._attach("block_structured", module, name, importance_scores,
                            amount=amount, block=block, n=n)
    return module


def satisfies_pattern(mask: torch.Tensor, pattern: str = "2:4", dim: int = -1) -> bool:
    """Whether ``mask`` keeps at most ``N`` of every ``M`` consecutive entries along ``dim``.

    False when ``M`` does not divide the size along ``dim`` (the pattern cannot hold), or for a
    0-D mask.

    Examples
    --------
    >>> import torch
    >>> satisfies_pattern(torch.tensor([1, 0, 0, 1, 1, 1, 0, 0]), "2:4")
    True
    >>> satisfies_pattern(torch.tensor([1, 1, 1, 0]), "2:4")
    False
    """
    check("satisfies_pattern", "pattern", pattern)
    keep_n, m = pattern_counts(pattern)
    if mask.dim() == 0:
        return False
    d = check_dim(dim, mask.dim(), "satisfies_pattern")
    if mask.shape[d] % m:
        return False
    moved = (mask != 0).movedim(d, -1)
    groups = moved.reshape(*moved.shape[:-1], moved.shape[-1] // m, m)
    return bool((groups.sum(dim=-1) <= keep_n).all())
