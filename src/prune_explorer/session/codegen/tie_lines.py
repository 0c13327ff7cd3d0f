"""Snippet lines for steps whose cut split a tie (see
:mod:`prune_explorer.session.codegen.tie_split`).

When entries of equal key straddle the cut, the session pruned the tied entries of lowest (or
highest) flat index first, and a plain ``torch.nn.utils.prune`` call would pick others. For those
steps only, the snippet defines a small ``stable_rank`` helper once and passes, as
``importance_scores`` of an L1 call, a rank in which every entry differs: torch then has no tie
left to break, and prunes exactly the session's entries.

* L1 (local or global): the stable rank of ``|w|`` (of the tensors concatenated in order, for a
  global step; torch ranks only the entries still unpruned, and a rank keeps their order).
* Random: ``torch.manual_seed(seed)`` and the very draws ``random_unstructured`` makes (one per
  unpruned entry), then an L1 call on the stable rank of ``-draws`` (the largest draws go first),
  written at the unpruned positions. The hook then holds an ``L1Unstructured``; the mask is the
  session's.

* ``ln_structured``: the session keeps, among slices whose norms tie at the cut, those of lowest
  index, on every device; torch's ``topk`` picks among them by its own device-dependent order.
  A second helper, ``slice_ranks`` (:data:`SLICE_HELPER`), ranks the slices still alive by
  their norms as the session computed them (torch's ``torch.norm``; 2-byte floats off the CPU
  summed in float64 and rounded once, as :func:`prune_explorer.prune.methods.slice_norms` does),
  tied norms highest index first, and gives each slice its rank + 1 in every entry (dead slices
  0): the ``ln_structured`` call with these as ``importance_scores`` has distinct norms to rank
  (any ``n`` orders constant slices by their value, but ``n=0``, which counts nonzeros: that
  call uses ``n=1``).

The ranks are integers, and on a tensor already pruned torch stores the combined mask in the
dtype of ``importance_scores``; each such call is followed by a line casting the mask back to
the dtype of ``<name>_orig`` (the model's), which changes no value. (Casting the ranks to the
model's dtype instead would merge ranks beyond 2**11 in fp16, 2**24 in fp32: new ties.)

Examples
--------
>>> from prune_explorer.session import Step
>>> step = Step("l1_unstructured", "fc.weight", amount=0.5)._noted("lowest")
>>> print("\\n".join(local_lines(step, 'model.get_submodule("fc")', "weight")))
module = model.get_submodule("fc")
# |w| ties at the cut: rank ties lowest flat index first, as prune-explorer did
prune.l1_unstructured(module, "weight", amount=0.5,
                      importance_scores=stable_rank(module.weight.detach().abs(), "lowest"))
# the ranks are integers: keep the mask in the weight's dtype
module.weight_mask = module.weight_mask.to(module.weight_orig.dtype)
"""

from __future__ import annotations

from collections.abc import Callable

from ..steps.step import Step, split_address
from .pysource import py_attribute, py_literal, py_set_attribute, py_str

__all__ = ["HELPER", "SLICE_HELPER", "global_lines", "local_lines"]

#: Defined once at the top of a snippet that needs it.
HELPER = [
    "",
    "",
    'def stable_rank(keys, ties="lowest"):',
    '    """Rank of every entry of `keys` (0 = smallest); equal keys are ranked by flat index,',
    '    lowest index first (ties="highest": highest first). No two ranks are equal."""',
    '    flat = keys.flatten() if ties == "lowest" else keys.flatten().flip(0)',
    "    order = torch.sort(flat, stable=True).indices",
    "    rank = torch.empty_like(order)",
    "    rank[order] = torch.arange(order.numel(), device=order.device)",
    '    return (rank if ties == "lowest" else rank.flip(0)).view(keys.shape)',
]

#: Defined once, after :data:`HELPER`, in a snippet with an ``ln_structured`` step that split a
#: tie.
SLICE_HELPER = [
    "",
    "",
    "def slice_ranks(w, mask, n, dim, ties):",
    '    """Per entry of `w`, 1 + the rank of its slice along `dim` among the slices `mask` still',
    "    keeps (all if None) by n-norm, equal norms ranked by `ties` (stable_rank); dead slices 0.",
    "    The norms are torch.norm's; 2-byte floats off the CPU are summed in float64 and rounded",
    '    once (as prune-explorer computes them, the same on every device)."""',
    "    dim = dim % w.dim()",
    "    others = [d for d in range(w.dim()) if d != dim]",
    "    if mask is None:",
    "        alive = torch.ones(w.shape[dim], dtype=torch.bool, device=w.device)",
    "    else:",
    "        alive = mask.sum(dim=others) != 0",
    "    rest = w[(slice(None),) * dim + (alive,)]",
    '    if w.device.type != "cpu" and w.element_size() == 2 and n != "nuc":',
    '        order = 2 if n == "fro" else n',
    "        norms = torch.linalg.vector_norm(rest, ord=order, dim=others,",
    "                                         dtype=torch.float64).to(w.dtype)",
    "    else:",
    "        norms = torch.norm(rest, p=n, dim=others)",
    "    ranks = torch.zeros(w.shape[dim], dtype=torch.float64, device=w.device)",
    "    ranks[alive] = stable_rank(norms, ties).to(torch.float64) + 1",
    "    shape = [1] * w.dim()",
    "    shape[dim] = -1",
    "    return ranks.view(shape).expand(w.shape)",
]


def local_lines(step: Step, module: str, tensor_name: str) -> list[str]:
    """Lines for a single-tensor L1/random/``ln_structured`` step whose :attr:`Step.ties` is
    set."""
    q = py_str
    ties = q(step.ties or "lowest")
    name = q(tensor_name)
    weight = py_attribute("module", tensor_name)
    amount = py_literal(step.settings["amount"])
    mask = py_attribute("module", tensor_name + "_mask")
    orig = py_attribute("module", tensor_name + "_orig")
    cast = py_set_attribute("module", tensor_name + "_mask", f"{mask}.to({orig}.dtype)")
    keep_dtype = ["# the ranks are integers: keep the mask in the weight's dtype", cast]
    lines = [f"module = {module}"]
    if step.method == "ln_structured":
        n = step.settings["n"]
        call_n = 1 if n == 0 and not isinstance(n, bool) else n
        lines += [
            "# slice norms tie at the cut: prune-explorer kept the tied slices of lowest index",
            "# (torch's topk picks among them differently on a CPU and a GPU): the slices ranked",
            "# that way, as importance_scores"
            + (" (n=1: n=0 would count the ranks' nonzeros)" if call_n != n else ""),
            f"ranks = slice_ranks({weight}.detach(), getattr(module, "
            f"{q(tensor_name + '_mask')}, None),",
            f"                    {py_literal(n)}, {py_literal(step.settings['dim'])}, {ties})",
            f"prune.ln_structured(module, {name}, amount={amount}, n={py_literal(call_n)}, "
            f"dim={py_literal(step.settings['dim'])},",
            "                    importance_scores=ranks)",
            "# the ranks are float64: keep the mask in the weight's dtype",
            cast,
        ]
        return lines
    if step.method == "l1_unstructured":
        lines += [
            f"# |w| ties at the cut: rank ties {step.ties} flat index first, as prune-explorer did",
            f"prune.l1_unstructured(module, {name}, amount={amount},",
            f"                      importance_scores=stable_rank({weight}.detach().abs(), "
            f"{ties}))",
            *keep_dtype,
        ]
        return lines
    lines += [
        "# random_unstructured draws one number per unpruned entry and prunes the largest; the",
        f"# draws tie at the cut, and prune-explorer pruned the tied ones {step.ties} flat index",
        "# first: the same draws, ranked, in an L1 call",
        f"if hasattr(module, {q(tensor_name + '_mask')}):",
        f"    alive = {mask} == 1",
        "else:",
        f"    alive = torch.ones_like({weight}, dtype=torch.bool)",
        f"draws = torch.rand(int(alive.sum()), dtype={weight}.dtype, device={weight}.device)",
        "scores = torch.zeros(alive.shape, dtype=torch.long, device=alive.device)",
        f"scores[alive] = stable_rank(-draws, {ties})",
        f"prune.l1_unstructured(module, {name}, amount={amount}, importance_scores=scores)",
        *keep_dtype,
    ]
    return lines


def global_lines(step: Step, module_expr: Callable[[str], str]) -> list[str]:
    """Lines for a ``global_unstructured`` step whose :attr:`Step.ties` is set."""
    q = py_str
    ties = q(step.ties or "lowest")
    lines = ["parameters = ["]
    for address in step.targets:
        module_name, tensor_name = split_address(address)
        lines.append(f"    ({module_expr(module_name)}, {q(tensor_name)}),")
    lines.append("]")
    if step.settings["pruning_method"] == "l1_unstructured":
        lines += [
            f"# |w| ties at the cut: rank ties {step.ties} flat index first (the tensors taken in "
            "this order),",
            "# as prune-explorer did",
            "keys = torch.cat([getattr(m, n).detach().abs().flatten() for m, n in parameters])",
            f"ranks = stable_rank(keys, {ties}).split([getattr(m, n).numel() "
            "for m, n in parameters])",
            "importance = {(m, n): r.view(getattr(m, n).shape) "
            "for (m, n), r in zip(parameters, ranks)}",
        ]
    else:
        lines += [
            "# random pruning draws one number per unpruned entry (all tensors in this order) and",
            f"# prunes the largest; the draws tie at the cut, and prune-explorer pruned the tied "
            f"ones {step.ties}",
            "# flat index first: the same draws, ranked, in an L1 call",
            "alive = [getattr(m, n + \"_mask\") == 1 if hasattr(m, n + \"_mask\")",
            "         else torch.ones_like(getattr(m, n), dtype=torch.bool)",
            "         for m, n in parameters]",
            "first = getattr(*parameters[0])",
            "counts = [int(a.sum()) for a in alive]",
            "draws = torch.rand(sum(counts), dtype=first.dtype, device=first.device)",
            f"ranks = stable_rank(-draws, {ties}).split(counts)",
            "importance = {}",
            "for p, a, r in zip(parameters, alive, ranks):",
            "    importance[p] = torch.zeros(a.shape, dtype=torch.long, device=a.device)",
            "    importance[p][a] = r",
        ]
    lines += [
        "prune.global_unstructured(",
        "    parameters,",
        "    pruning_method=prune.L1Unstructured,",
        f"    amount={py_literal(step.settings['amount'])},",
        "    importance_scores=importance,",
        ")",
        "# the ranks are integers: keep the masks in the weights' dtypes",
        "for m, n in parameters:",
        '    setattr(m, n + "_mask", getattr(m, n + "_mask").to(getattr(m, n + "_orig").dtype))',
    ]
    return lines
