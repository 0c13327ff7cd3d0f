"""Write the four teaching notebooks, outputs stripped, with nbformat.

The same bytes go to ``notebooks/`` (what the repository shows and CI executes with
``pytest --nbval-lax notebooks/``) and ``src/prune_explorer/notebooks/`` (the copies packaged
for ``prune-explorer lab``). Edit the cell sources here and rerun; never edit the .ipynb files.

Usage::

    python tools/make_notebooks.py           # (re)write both folders
    python tools/make_notebooks.py --check   # exit 1 if a file on disk differs from this script
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

ROOT = Path(__file__).resolve().parent.parent
TARGETS = (ROOT / "notebooks", ROOT / "src" / "prune_explorer" / "notebooks")
KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
LANGUAGE_INFO = {"name": "python"}


def md(text: str) -> nbformat.NotebookNode:
    return new_markdown_cell(textwrap.dedent(text).strip())


def code(text: str) -> nbformat.NotebookNode:
    return new_code_cell(textwrap.dedent(text).strip())


# -- 01 ------------------------------------------------------------------------------------------
QUICKSTART = [
    md("""
    # Quickstart: the pruning explorer

    **Pruning** sets some weights of a trained network to zero to make it smaller or faster,
    ideally without hurting its accuracy. `torch.nn.utils.prune` does it with *masks*: a
    pruned weight keeps its original values in `weight_orig`, a 0/1 `weight_mask` says which
    entries are kept, and the layer computes with `weight_orig * weight_mask`.

    The explorer lets you try that on a real model and *see* it before you commit to anything.
    The model here is a small MLP (64 -> 128 -> 64 -> 10) trained in a second on the 8x8
    handwritten digits that ship with scikit-learn; it is loaded from a checkpoint inside the
    package, so nothing is downloaded.

    Run the cells below (**Run -> Run All Cells**).
    """),
    code("""
    from prune_explorer import explore
    from prune_explorer.demo import evaluate, load_mlp

    model = load_mlp()
    print(f"test accuracy before pruning: {evaluate(model):.1%}")
    """),
    code("""
    explorer = explore(model)
    explorer
    """),
    md("""
    ## Three things to try first

    1. **Preview before you prune.** Pick `fc1.weight` in the tensor list, keep
       `l1_unstructured` and drag the *amount* slider. The heatmap shows which weights would
       be removed (pale yellow) and which kept (dark blue), and the text below the buttons
       gives the exact count -- the model itself does not change until you press **Apply**.
    2. **Apply, stack, undo.** Press **Apply**, then switch the method to `ln_structured`
       with `dim = 0` and apply again: whole rows (output neurons) disappear on top of the
       first mask. The **History** tab walks through the steps and shows which units died at
       each; **Undo** takes the last step back exactly.
    3. **Export the plan.** Open the **Export** tab: everything you applied is a plan, shown
       as a Python snippet for stock `torch.nn.utils.prune` and as JSON you can save and
       replay later (`prune-explorer apply model.pt plan.json -o pruned.pt`).

    After pruning, run the cell below to see what it cost.
    """),
    code("""
    print(f"test accuracy now: {evaluate(model):.1%}")
    explorer.session.report()
    """),
    md("""
    ## Where next

    * `02_pruning_concepts.ipynb` -- what each pruning method does, one idea at a time.
    * `03_global_vs_local.ipynb` -- the same budget spent globally or per layer, and layer
      collapse.
    * `04_plan_export.ipynb` -- build a plan in code, export it, and check stock PyTorch
      reproduces it mask for mask.
    """),
]

# -- 02 ------------------------------------------------------------------------------------------
CONCEPTS = [
    md("""
    # Pruning concepts, one at a time

    This notebook is for someone who knows basic PyTorch (modules, parameters, a forward pass)
    and wants to know what `torch.nn.utils.prune` really does. Every idea comes with a
    picture of the mask -- **dark = kept, pale = pruned** -- and its effect on the test
    accuracy of a small trained digit classifier.

    We import `prune` from `prune_explorer`: it is a drop-in implementation of
    `torch.nn.utils.prune` (same functions, same masks), so everything below works unchanged
    with `import torch.nn.utils.prune as prune`.
    """),
    code("""
    %matplotlib inline
    import math

    import matplotlib.pyplot as plt
    import torch

    from prune_explorer import prune, viz
    from prune_explorer.demo import evaluate, load_cnn, load_digits_split, load_mlp

    model = load_mlp()   # every call returns a fresh trained copy
    print(model)
    print(f"test accuracy, nothing pruned: {evaluate(model):.1%}")


    def show(masks, titles, module_type="Linear", **kwargs):
        # Draw a row of masks side by side.
        _, axes = plt.subplots(1, len(masks), figsize=(4.2 * len(masks), 3.6),
                               squeeze=False, layout="constrained")
        for ax, mask, title in zip(axes[0], masks, titles, strict=True):
            viz.plot_mask(ax, mask, title=title, module_type=module_type, **kwargs)
        plt.show()
    """),
    md("""
    ## 1. What pruning does to a module

    `prune.l1_unstructured(module, "weight", amount=0.3)` removes the 30 % of the entries of
    `module.weight` with the smallest absolute value. Nothing is deleted: the module now has
    a parameter `weight_orig` (the original values, still trained by an optimizer), a buffer
    `weight_mask`, and a *forward pre-hook* that recomputes `weight = weight_orig *
    weight_mask` before every forward pass.
    """),
    code("""
    model = load_mlp()
    prune.l1_unstructured(model.fc1, "weight", amount=0.3)

    print("parameters:", [name for name, _ in model.fc1.named_parameters()])
    print("buffers:   ", [name for name, _ in model.fc1.named_buffers()])
    print("hook:      ", list(model.fc1._forward_pre_hooks.values()))
    same = torch.equal(model.fc1.weight, model.fc1.weight_orig * model.fc1.weight_mask)
    print("weight == weight_orig * weight_mask:", same)
    print(f"zeros in fc1.weight: {int((model.fc1.weight == 0).sum())} of "
          f"{model.fc1.weight.numel()}")
    print(f"test accuracy: {evaluate(model):.1%}")
    """),
    md("""
    ## 2. Unstructured vs structured

    * **Unstructured** pruning removes individual entries wherever they are small. It keeps
      accuracy best, but the tensor keeps its shape: you only save memory or time with sparse
      kernels.
    * **Structured** pruning removes whole *slices* -- rows, columns, channels. A layer whose
      rows are all gone can really be made smaller.

    `fc2.weight` has shape 64 x 128 (out features x in features). Below, the same 50 % budget
    three ways: scattered entries, whole rows (`dim=0`: output neurons) and whole columns
    (`dim=1`: input features).
    """),
    code("""
    settings = [
        ("l1_unstructured", prune.l1_unstructured, {}),
        ("ln_structured n=2 dim=0 (rows)", prune.ln_structured, {"n": 2, "dim": 0}),
        ("ln_structured n=2 dim=1 (columns)", prune.ln_structured, {"n": 2, "dim": 1}),
    ]
    masks, titles = [], []
    for label, function, extra in settings:
        model = load_mlp()
        function(model.fc2, "weight", amount=0.5, **extra)
        masks.append(model.fc2.weight_mask)
        titles.append(f"{label}\\naccuracy {evaluate(model):.1%}")
    show(masks, titles)
    """),
    md("""
    Unstructured pruning barely changes the accuracy; removing half of the rows (neurons) or
    half of the columns (inputs) of `fc2` costs more. That is the usual trade: structure you
    can exploit vs accuracy.

    ## 3. What `n` and `dim` mean

    `ln_structured(module, name, amount, n, dim)` scores every slice along `dim` by its
    `n`-norm and removes the lowest-scoring `amount` of slices:

    * `dim` chooses *what a slice is*. For a `Linear` weight (out x in), `dim=0` slices are
      output neurons and `dim=1` slices are input features. For a `Conv2d` weight (out x in x
      kh x kw), `dim=0` slices are output channels (filters), `dim=1` input channels.
    * `n` chooses *how a slice is measured*: `1` sums absolute values, `2` is the Euclidean
      length, `float("inf")` takes the largest absolute value, `-inf` the smallest.

    Different norms can pick different slices. Here on the second convolution of a small CNN
    (`features.3.weight`, 32 filters of 16 x 3 x 3), one cell per filter:
    """),
    code("""
    masks, titles, chosen = [], [], {}
    for n in (1, 2, math.inf):
        cnn = load_cnn()
        prune.ln_structured(cnn.features[3], "weight", amount=0.25, n=n, dim=0)
        mask = cnn.features[3].weight_mask
        chosen[n] = {int(i) for i in torch.nonzero(mask.flatten(1).sum(1) == 0)}
        masks.append(mask)
        titles.append(f"n={n}: accuracy {evaluate(cnn):.1%}")
    show(masks, titles, module_type="Conv2d", layout="channels", dim=0)
    print("filters removed with n=1:  ", sorted(chosen[1]))
    print("filters removed with n=2:  ", sorted(chosen[2]))
    print("filters removed with n=inf:", sorted(chosen[math.inf]))
    print("removed by all three norms:", sorted(chosen[1] & chosen[2] & chosen[math.inf]))
    """),
    md("""
    ## 4. Random baselines

    Is "small weights are unimportant" a good rule? Compare with pruning at random
    (`random_unstructured`): the same number of weights, chosen blindly. Random pruning draws
    from torch's global random generator, so we seed it to make the result repeatable.
    """),
    code("""
    amounts = [0.0, 0.2, 0.4, 0.6, 0.7, 0.8, 0.9, 0.95]
    curves = {"l1_unstructured": [], "random_unstructured": []}
    for amount in amounts:
        model = load_mlp()
        prune.l1_unstructured(model.fc1, "weight", amount=amount)
        curves["l1_unstructured"].append(evaluate(model))
        model = load_mlp()
        torch.manual_seed(0)
        prune.random_unstructured(model.fc1, "weight", amount=amount)
        curves["random_unstructured"].append(evaluate(model))

    fig, ax = plt.subplots(figsize=(5.5, 3.5), layout="constrained")
    for label, scores in curves.items():
        ax.plot(amounts, scores, marker="o", label=label)
    ax.set_xlabel("fraction of fc1.weight pruned")
    ax.set_ylabel("test accuracy")
    ax.set_title("magnitude vs random pruning of fc1")
    ax.legend()
    plt.show()
    """),
    md("""
    Magnitude pruning stays near full accuracy far longer than random pruning: the size of a
    weight does carry information. Always compare a pruning criterion against this baseline.

    ## 5. Iterative pruning and `PruningContainer`

    Pruning the same tensor again does not start over: `amount` is a fraction **of what is
    still unpruned**, and the new mask is combined with the old one. Two rounds of 50 % leave
    25 % of the weights. The hook becomes a `PruningContainer` that remembers every method in
    order.
    """),
    code("""
    model = load_mlp()
    layer = model.fc2
    steps = [
        ("l1_unstructured 0.5", lambda: prune.l1_unstructured(layer, "weight", amount=0.5)),
        ("l1_unstructured 0.5 again", lambda: prune.l1_unstructured(layer, "weight", amount=0.5)),
        ("ln_structured 0.25 dim=0",
         lambda: prune.ln_structured(layer, "weight", amount=0.25, n=1, dim=0)),
    ]
    masks, titles = [], []
    for label, run in steps:
        run()
        kept = float(layer.weight_mask.mean())
        masks.append(layer.weight_mask.clone())
        titles.append(f"after {label}\\nkept {kept:.1%}, accuracy {evaluate(model):.1%}")
    show(masks, titles)

    container = next(iter(layer._forward_pre_hooks.values()))
    print(type(container).__name__, [type(m).__name__ for m in container._pruning_methods])
    """),
    md("""
    The third step is structured. It scores each row by the norm of its **original** values
    (`weight_orig`: the earlier masks do not lower the score), skips rows that are already
    entirely pruned, and removes 25 % of the remaining rows. Some entries of those rows were
    pruned already, so the kept fraction drops by less than a quarter.

    ## 6. Importance scores

    Magnitude is only one guess at importance. The `importance_scores=` argument lets you rank
    entries by anything of the same shape, while the mask still applies to the weight. Here
    a weight of `fc1` counts as important if it is large **and** its input pixel is often
    bright: `|w| * rms(x)`, the size of the weight times the root-mean-square of its input
    over the training images (the score of the *Wanda* method). Pixels at the border of the
    digits are almost always 0, so the weights reading them can go first at no cost.
    """),
    code("""
    x_train, _ = load_digits_split().split("train")
    pixel_rms = x_train.pow(2).mean(dim=0).sqrt()       # (64,): one value per input pixel

    def activity_scores(layer):
        return layer.weight.detach().abs() * pixel_rms   # (128, 64) * (64,): per column

    masks, titles = [], []
    for label, scorer in [("magnitude |w|", None), ("|w| * rms(x)", activity_scores)]:
        model = load_mlp()
        scores = scorer(model.fc1) if scorer else None
        prune.l1_unstructured(model.fc1, "weight", amount=0.85, importance_scores=scores)
        masks.append(model.fc1.weight_mask)
        titles.append(f"{label}, 85 % pruned\\naccuracy {evaluate(model):.1%}")
    show(masks, titles)
    """),
    md("""
    With the activation-aware score, whole columns (pixels that are always dark) are pruned
    first, and at this budget accuracy holds up better. It is not a free win everywhere: at
    lower amounts both keep the full accuracy -- measure, as always.

    ## 7. `remove`: making pruning permanent

    While a tensor is pruned, the module carries the original values, the mask and the hook.
    `prune.remove(module, "weight")` folds the mask into the values: `weight` becomes an
    ordinary parameter again (with its zeros), and `weight_orig`, `weight_mask` and the hook
    are gone. The zeros stay; the way back does not.
    """),
    code("""
    model = load_mlp()
    prune.l1_unstructured(model.fc1, "weight", amount=0.5)
    print("state_dict keys while pruned:", list(model.fc1.state_dict()))
    accuracy_before = evaluate(model)

    prune.remove(model.fc1, "weight")
    print("state_dict keys after remove:", list(model.fc1.state_dict()))
    print(f"zeros kept: {int((model.fc1.weight == 0).sum())} of {model.fc1.weight.numel()}")
    print(f"accuracy {accuracy_before:.1%} before remove, {evaluate(model):.1%} after")
    print("still pruned?", prune.is_pruned(model))
    """),
    md("""
    ## Summary

    | idea | call |
    | --- | --- |
    | drop the smallest entries | `prune.l1_unstructured(m, "weight", amount)` |
    | drop whole slices | `prune.ln_structured(m, "weight", amount, n, dim)` |
    | blind baseline | `prune.random_unstructured` / `prune.random_structured` |
    | your own ranking | `importance_scores=` |
    | several tensors, one threshold | `prune.global_unstructured` (see notebook 03) |
    | make it permanent | `prune.remove(m, "weight")` |

    The explorer (`01_quickstart.ipynb`) does all of this with sliders and keeps an undoable
    history.
    """),
]

# -- 03 ------------------------------------------------------------------------------------------
GLOBAL_LOCAL = [
    md("""
    # Global vs local: where does the pruning budget go?

    Say you want to remove 80 % of the weights of a network. Two ways to spend that budget:

    * **local** (per layer): remove 80 % of *each* layer's weights, each layer ranked on its
      own;
    * **global**: rank *all* weights of all layers together and remove the smallest 80 %
      overall (`prune.global_unstructured`). Some layers lose more than 80 %, others less.

    A `Session` computes both without touching the model (`compare_global_local` uses
    previews).
    """),
    code("""
    %matplotlib inline
    import matplotlib.pyplot as plt
    import pandas as pd
    import torch

    from prune_explorer import viz
    from prune_explorer.demo import evaluate, load_mlp
    from prune_explorer.session import Session

    session = Session(load_mlp())
    weights = [name for name in session.names if name.endswith("weight")]
    print(weights, f"-- test accuracy {evaluate(session.model):.1%}")

    table = session.compare_global_local(weights, amount=0.8)
    table
    """),
    code("""
    fig, ax = plt.subplots(figsize=(6, 3.8), layout="constrained")
    viz.plot_global_vs_local(ax, table, amount=0.8)
    plt.show()
    """),
    md("""
    Both spend the same total (the `TOTAL` row), but global pruning takes more from `fc2`
    and less from `fc1` and the small output layer `fc3`, whose weights are larger on
    average.

    ## Accuracy curves

    How much does each choice cost? `Session.sensitivity` sweeps the amount and measures test
    accuracy at each setting -- each layer alone (which layer is most *sensitive*?) and all
    layers under one global threshold -- through real steps that it undoes, so the model is
    unchanged at the end. For comparison we add the uniform choice: the same amount in every
    layer.
    """),
    code("""
    amounts = [0.3, 0.5, 0.7, 0.8, 0.9, 0.95]
    before = {name: session.tensor(name).clone() for name in weights}


    def kept_fraction(names):
        kept = sum(int(session.mask(n).sum()) for n in names)
        return 1 - kept / sum(session.info(n).numel for n in names)


    sensitivity = session.sensitivity(evaluate, targets=weights, amounts=amounts)
    sensitivity.loc[sensitivity["scope"] == "global", "target"] = "all weights"

    rows = []
    for amount in [0.0, *amounts]:                             # every layer, same amount
        for name in weights:
            session.apply(name, "l1_unstructured", amount=amount)
        rows.append({"target": "all weights", "scope": "local", "amount": amount,
                     "sparsity": kept_fraction(weights), "score": evaluate(session.model)})
        session.reset()
    sensitivity = pd.concat([sensitivity, pd.DataFrame(rows)], ignore_index=True)

    assert all(torch.equal(before[n], session.tensor(n)) for n in weights), "model changed"
    baseline = evaluate(session.model)

    fig, axes = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
    viz.plot_sensitivity(axes[0], sensitivity[sensitivity["target"] != "all weights"],
                         score_label="test accuracy", baseline=baseline,
                         title="one layer pruned at a time")
    viz.plot_sensitivity(axes[1], sensitivity[sensitivity["target"] == "all weights"],
                         score_label="test accuracy", baseline=baseline,
                         title="all layers: local (solid) vs global (dashed)")
    plt.show()
    """),
    md("""
    The small output layer `fc3` is the most sensitive on its own. With all layers pruned,
    global pruning holds accuracy longer at high sparsity: it protects the layers that matter
    by taking more where weights are small.

    ## Layer collapse

    Global magnitude pruning compares raw weight sizes *across* layers. That is only fair if
    the layers are on a similar scale -- and nothing forces them to be. With ReLU, multiplying
    `fc1` (weights and bias) by 10 and dividing `fc2.weight` by 10 computes **exactly the same
    function**. Local pruning does not care (each layer is ranked on its own). Global pruning
    now sees `fc2` as "all small" and removes it wholesale: the layer **collapses**, and the
    network with it.
    """),
    code("""
    rescaled = load_mlp()
    with torch.no_grad():
        rescaled.fc1.weight.mul_(10)
        rescaled.fc1.bias.mul_(10)
        rescaled.fc2.weight.div_(10)
    print(f"same function? accuracy {evaluate(rescaled):.1%} "
          f"(original {evaluate(load_mlp()):.1%})")

    scaled = Session(rescaled)
    collapse = scaled.compare_global_local(weights, amount=0.5)
    display(collapse)

    scaled.apply_global(weights, amount=0.5)
    global_acc = evaluate(rescaled)
    scaled.reset()
    for name in weights:
        scaled.apply(name, "l1_unstructured", amount=0.5)
    local_acc = evaluate(rescaled)
    scaled.reset()
    print(f"50 % of the weights pruned: global {global_acc:.1%}, local {local_acc:.1%}")

    fig, ax = plt.subplots(figsize=(6, 3.8), layout="constrained")
    viz.plot_global_vs_local(ax, collapse, amount=0.5, title="rescaled MLP: fc2 collapses")
    plt.show()
    """),
    md("""
    **Takeaways**

    * Global pruning spends a budget better than uniform per-layer pruning -- when weight
      magnitudes are comparable across layers.
    * Check the per-layer sparsity it produces (`compare_global_local`, or the explorer's
      global vs local tab) and watch for layers pruned to (almost) nothing.
    * Protect small, sensitive layers (often the first and last) by leaving them out of the
      global set, or normalise scores per layer with `importance_scores=`.
    """),
]

# -- 04 ------------------------------------------------------------------------------------------
PLAN_EXPORT = [
    md("""
    # Plans: build, export, replay on stock PyTorch

    Everything you apply in the explorer is recorded as a **plan**: an ordered list of steps
    that name tensors by their address (`"features.0.weight"`), never by live objects. A plan
    can be saved as JSON, loaded back strictly, replayed on another copy of the model, and
    exported as a plain Python snippet that uses only `torch.nn.utils.prune`.

    The explorer drives a `Session`; here we use the same `Session` API directly, on the small
    demo CNN.
    """),
    code("""
    import tempfile
    from pathlib import Path

    import torch

    from prune_explorer.cli import main as prune_explorer
    from prune_explorer.demo import evaluate, load_cnn
    from prune_explorer.session import Plan, Session

    model = load_cnn()
    session = Session(model)
    print(session.names)
    """),
    md("""
    ## Build a plan

    Three steps, as you would click them in the explorer: remove a quarter of the filters of
    the first convolution, prune the second convolution at random (the session records the
    seed, so this is reproducible), then one global magnitude step over all three weights.
    """),
    code("""
    session.apply("features.0.weight", "ln_structured", amount=0.25, n=2, dim=0)
    session.apply("features.3.weight", "random_unstructured", amount=0.2)
    session.apply_global(["features.0.weight", "features.3.weight", "classifier.weight"],
                         "l1_unstructured", amount=0.3)
    print(f"test accuracy after the plan: {evaluate(model):.1%}")
    session.report()
    """),
    md("""
    ## Export: JSON and snippet

    `session.plan` is the plan so far. `to_json()` is what the explorer's Export tab offers
    for download; `Plan.from_json` reads it back and validates every field.
    """),
    code("""
    plan = session.plan
    text = plan.to_json()
    print(text)
    assert Plan.from_json(text) == plan
    """),
    code("""
    snippet = plan.to_snippet()
    print(snippet)
    """),
    md("""
    ## Replay the snippet on stock PyTorch

    The snippet imports only `torch` and `torch.nn.utils.prune` and prunes a variable called
    `model`. We bind `model` to a fresh copy of the trained CNN, run the code, and compare
    every mask with the session's: they must be identical, entry for entry.
    """),
    code("""
    fresh = load_cnn()
    namespace = {"model": fresh}
    exec(snippet, namespace)

    for name in session.names:
        module_name, _, tensor_name = name.rpartition(".")
        module = fresh.get_submodule(module_name)
        if not hasattr(module, tensor_name + "_mask"):
            assert not session.methods(name), f"{name} should have been pruned"
            continue
        stock_mask = getattr(module, tensor_name + "_mask") != 0
        assert torch.equal(stock_mask, session.mask(name)), f"mask of {name} differs"
        print(f"{name}: identical mask, {int((~stock_mask).sum())} entries pruned")

    assert evaluate(fresh) == evaluate(model)
    print(f"same accuracy: {evaluate(fresh):.1%}")
    """),
    md("""
    ## Replay the JSON, from Python or the command line

    `plan.apply(model)` replays a plan on a model (all or nothing: a step that does not fit
    undoes the ones before it). The same works headless with the `prune-explorer` command on
    a saved `state_dict`:

    ```
    prune-explorer apply model.pt plan.json -o pruned.pt [--commit]
    prune-explorer report pruned.pt
    ```

    Below we run that command in-process, in a temporary folder.
    """),
    code("""
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        torch.save(load_cnn().state_dict(), folder / "cnn.pt")
        plan.save(folder / "plan.json")
        status = prune_explorer(["apply", str(folder / "cnn.pt"), str(folder / "plan.json"),
                                 "--model", "cnn", "-o", str(folder / "pruned.pt")])
        assert status == 0
        saved = torch.load(folder / "pruned.pt", weights_only=True)

    mask = saved["features.0.weight_mask"] != 0
    assert torch.equal(mask, session.mask("features.0.weight"))
    print("keys saved:", sorted(saved))
    """),
    md("""
    **What to remember**

    * A plan is data (JSON), not code: safe to share and validated when loaded.
    * The snippet is plain `torch.nn.utils.prune`: nothing from prune-explorer is needed to
      reproduce your pruning.
    * Random steps carry their seed, so replays give identical masks.
    """),
]

NOTEBOOKS = {
    "01_quickstart.ipynb": QUICKSTART,
    "02_pruning_concepts.ipynb": CONCEPTS,
    "03_global_vs_local.ipynb": GLOBAL_LOCAL,
    "04_plan_export.ipynb": PLAN_EXPORT,
}


def build(cells: list[nbformat.NotebookNode], stem: str) -> str:
    """The notebook as text, with stable cell ids so regeneration is byte-for-byte stable."""
    nb = new_notebook()
    nb.metadata["kernelspec"] = KERNELSPEC
    nb.metadata["language_info"] = LANGUAGE_INFO
    for index, cell in enumerate(cells):
        cell["id"] = f"{stem}-{index:02d}"
    nb.cells = cells
    nbformat.validate(nb)
    return nbformat.writes(nb) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="do not write; exit 1 if any file differs from what would be written")
    args = parser.parse_args(argv)
    stale = []
    for name, cells in NOTEBOOKS.items():
        text = build(cells, name.split("_")[0])
        for folder in TARGETS:
            path = folder / name
            if args.check:
                if not path.is_file() or path.read_text(encoding="utf-8") != text:
                    stale.append(str(path.relative_to(ROOT)))
                continue
            folder.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    if args.check:
        for folder in TARGETS:
            extra = sorted(p.name for p in folder.glob("*.ipynb") if p.name not in NOTEBOOKS)
            stale += [str((folder / e).relative_to(ROOT)) + " (not generated here)" for e in extra]
        if stale:
            print("out of date (run python tools/make_notebooks.py):", *stale, sep="\n  ")
            return 1
        print(f"{len(NOTEBOOKS)} notebooks up to date in {len(TARGETS)} folders")
        return 0
    print("wrote", ", ".join(NOTEBOOKS), "to", ", ".join(str(t.relative_to(ROOT)) for t in TARGETS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
