"""The exported snippet reproduces the session's masks on stock torch.

The snippet runs in a fresh interpreter (the one harness in ``helpers.snippet_replay``) with
``model``
bound to a pickled copy of the unpruned model (its classes come from ``helpers.session_models``,
which
imports only torch). Every tensor of the resulting state_dict -- masks, ``_orig`` values,
committed values -- is compared with the session's model.
"""

from __future__ import annotations

import ast
import builtins
import copy
import textwrap

import pytest
import torch

from helpers.session import FACTORIES
from helpers.snippet_replay import assert_same_state_dict, replay_on_stock_torch
from prune_explorer.session import Session


def _every_method_on_convnet(s: Session) -> None:
    s.apply("features.0.weight", "identity")
    s.apply("features.0.weight", "random_unstructured", amount=0.2)
    s.apply("features.2.weight", "l1_unstructured", amount=17)
    s.apply("features.2.weight", "random_structured", amount=1, dim=0)
    s.apply("features.0.weight", "ln_structured", amount=0.25, n=float("inf"), dim=1)
    s.apply("classifier.weight", "custom_from_mask",
            mask=torch.arange(30).reshape(5, 6) % 4 != 0)
    s.apply("classifier.bias", "custom_from_mask", mask=torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0]))
    s.apply_global(["features.0.weight", "features.2.weight", "classifier.weight"],
                   "random_unstructured", amount=0.3)
    s.apply("features.2.bias", "l1_unstructured", amount=0.5)
    s.undo()  # undone steps are not in the plan
    s.commit(["classifier.weight"])
    s.apply_global(["features.2.weight", "classifier.weight"], amount=0.1)
    s.apply("features.2.weight", "ln_structured", amount=1, n=-float("inf"), dim=0)


def _zoo_steps(s: Session) -> None:
    s.apply("lstm.weight_ih_l0", "random_unstructured", amount=0.4)
    s.apply("lstm.weight_hh_l1", "ln_structured", amount=2, n=1, dim=0)
    s.apply("conv3.weight", "random_structured", amount=0.5, dim=1)
    s.apply("conv1.weight", "ln_structured", amount=1, n="nuc", dim=0)
    s.apply("linear.weight", "ln_structured", amount=1, n="fro", dim=1)
    s.apply_global(["embed.weight", "deconv.weight", "custom.scale", "ln.weight"],
                   "l1_unstructured", amount=0.5)
    s.apply("bn.bias", "random_unstructured", amount=1)
    s.commit(["bn.bias"])


def _root_steps(s: Session) -> None:
    s.apply("weight", "random_structured", amount=1, dim=1)
    s.apply("bias", "l1_unstructured", amount=1)
    s.apply_global(["weight", "bias"], "random_unstructured", amount=0.5)


CASES = {
    "convnet": ("convnet", _every_method_on_convnet),
    "zoo": ("zoo", _zoo_steps),
    "root_linear": ("root_linear", _root_steps),
}

@pytest.fixture(scope="module")
def replayed(tmp_path_factory):
    """Run every case's snippet in one fresh interpreter; return (sessions, results)."""
    sessions, cases = {}, {}
    for name, (factory, run) in CASES.items():
        model = FACTORIES[factory]()
        s = Session(copy.deepcopy(model), seed=sum(map(ord, name)))
        run(s)
        sessions[name] = s
        cases[name] = (model, s.plan.to_snippet())
    replay = replay_on_stock_torch(tmp_path_factory.mktemp("snippets"), cases)
    assert not replay.errors, replay.errors
    return sessions, replay.results


@pytest.mark.parametrize("case", list(CASES))
def test_snippet_reproduces_every_mask_and_value_on_stock_torch(replayed, case):
    sessions, results = replayed
    expected = sessions[case].model.state_dict()
    got = results[case]
    assert_same_state_dict(got, expected)
    n_masks = sum(key.endswith("_mask") for key in expected)
    assert n_masks >= 2


@pytest.mark.parametrize("case", list(CASES))
def test_snippet_uses_only_torch_and_torch_prune_on_model(replayed, case):
    sessions, _ = replayed
    source = sessions[case].plan.to_snippet()
    tree = ast.parse(source)
    imports = []
    assigned = {"model"}
    loaded = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imports += [("import", alias.name, alias.asname) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            imports += [("from", node.module, alias.name) for alias in node.names]
        elif isinstance(node, ast.FunctionDef):  # the tie helpers (stable_rank, slice_ranks)
            assigned.add(node.name)
            assigned.update(a.arg for a in node.args.args)
        elif isinstance(node, ast.Name):
            (assigned if isinstance(node.ctx, ast.Store) else loaded).add(node.id)
    assert imports == [("import", "torch", None), ("from", "torch.nn.utils", "prune")]
    free = loaded - assigned - {"torch", "prune"} - set(dir(builtins))
    assert free == set()
    assert "model" in loaded
    assert "prune_explorer" not in source
    assert all(len(line) <= 100 for line in source.splitlines())


def test_snippet_text_is_readable():
    s = Session(FACTORIES["convnet"](), seed=0)
    s.apply("features.0.weight", "ln_structured", amount=0.25, n=2, dim=0)
    s.apply("classifier.weight", "random_unstructured", amount=0.5, seed=42)
    s.apply_global(["features.0.weight", "classifier.weight"], amount=0.5)
    s.commit(["classifier.weight"])
    assert s.plan.to_snippet() == textwrap.dedent(
        '''\
        # Pruning plan exported by prune-explorer (4 steps).
        # Bind `model` to a model equal to the one the plan was made on (same architecture and
        # weights) before running this; it prunes `model` in place.
        import torch
        from torch.nn.utils import prune

        # step 1: ln_structured on features.0.weight
        prune.ln_structured(model.get_submodule("features.0"), "weight", amount=0.25, n=2, dim=0)

        # step 2: random_unstructured on classifier.weight
        torch.manual_seed(42)
        prune.random_unstructured(model.get_submodule("classifier"), "weight", amount=0.5)

        # step 3: global_unstructured (l1_unstructured) over 2 tensors
        prune.global_unstructured(
            [
                (model.get_submodule("features.0"), "weight"),
                (model.get_submodule("classifier"), "weight"),
            ],
            pruning_method=prune.L1Unstructured,
            amount=0.5,
        )

        # step 4: remove (make the pruning of classifier.weight permanent)
        prune.remove(model.get_submodule("classifier"), "weight")
        '''
    )
