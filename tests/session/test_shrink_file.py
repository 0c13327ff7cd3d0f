"""The shrunk model on disk: `prune-explorer apply --shrink` writes a plain state_dict and a JSON
architecture description; rebuild() + load_state_dict() give back the same function."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

from prune_explorer import cli
from prune_explorer.demo import load_cnn
from prune_explorer.demo.checkpoints import untrained_model
from prune_explorer.session import Plan, Session, Step
from prune_explorer.session.shrink.description import InvalidDescriptionError, rebuild


def _plan(model: nn.Module) -> Plan:
    s = Session(model)
    s.apply("features.0.weight", "ln_structured", amount=0.5, n=2, dim=0)
    dead = s.mask("features.0.weight").flatten(1).sum(1) == 0
    s.apply("features.0.bias", "custom_from_mask", mask=~dead)
    return s.plan


def test_apply_shrink_writes_state_dict_and_json_that_rebuild_the_model(tmp_path, capsys):
    model = load_cnn()
    torch.save(model.state_dict(), tmp_path / "cnn.pt")
    plan = _plan(load_cnn())
    plan.save(tmp_path / "plan.json")
    out = tmp_path / "small.safetensors"
    code = cli.main(["apply", str(tmp_path / "cnn.pt"), str(tmp_path / "plan.json"),
                     "-o", str(out), "--shrink"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "8 channels removed" in printed
    assert "FLOPs" in printed
    description = json.loads((tmp_path / "small.safetensors.shrunk.json").read_text())
    assert description["format"] == "prune-explorer-shrunk"
    assert description["layers"]["features.0"]["sizes"]["out_channels"] == 8
    from safetensors.torch import load_file

    state = load_file(out)
    fresh = rebuild(untrained_model("cnn"), description)
    fresh.load_state_dict(state)
    masked = Session(load_cnn())
    for step in plan.steps:
        masked.apply_step(step)
    x = torch.randn(4, 1, 8, 8)
    with torch.no_grad():
        torch.testing.assert_close(fresh.eval()(x), masked.model.eval()(x))


def test_apply_shrink_to_stdout_is_refused(tmp_path, capsys):
    torch.save(load_cnn().state_dict(), tmp_path / "cnn.pt")
    Plan([Step("l1_unstructured", "features.0.weight", amount=0.5)]).save(tmp_path / "p.json")
    code = cli.main(["apply", str(tmp_path / "cnn.pt"), str(tmp_path / "p.json"), "-o", "-",
                     "--shrink"])
    assert code != 0
    assert "-o/--output must be a file" in capsys.readouterr().err


@pytest.mark.parametrize(("edit", "message"), [
    (lambda d: d.update(format="pickle"), "format must be 'prune-explorer-shrunk'"),
    (lambda d: d["layers"].update({"nope": {}}), "layer 'nope' is not a module"),
    (lambda d: d["layers"]["0"].update(type="Conv2d"), "layer '0' must describe a Linear"),
    (lambda d: d["layers"]["0"]["sizes"].update(out_features=0), "sizes must give"),
    (lambda d: d["layers"]["0"]["tensors"].update(weight=[3, "4"]), "tensors must give"),
    (lambda d: d["layers"]["0"]["tensors"].update(__class__=[1]), "tensors must give"),
])
def test_rebuild_checks_everything_before_changing_anything(edit, message):
    description = {"format": "prune-explorer-shrunk", "version": 1, "model": "",
                   "layers": {"0": {"type": "Linear",
                                    "sizes": {"in_features": 4, "out_features": 3},
                                    "tensors": {"weight": [3, 4], "bias": [3]}}}}
    edit(description)
    model = nn.Sequential(nn.Linear(4, 6))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(InvalidDescriptionError, match=message):
        rebuild(model, description)
    assert model[0].out_features == 6
    assert all(torch.equal(model.state_dict()[k], v) for k, v in before.items())


def _two_layers(first_out: int, second_out: int) -> dict:
    return {"format": "prune-explorer-shrunk", "version": 1, "model": "", "layers": {
        "0": {"type": "Linear", "sizes": {"in_features": 4, "out_features": first_out},
              "tensors": {"weight": [first_out, 4], "bias": [first_out]}},
        "1": {"type": "Linear", "sizes": {"in_features": 6, "out_features": second_out},
              "tensors": {"weight": [second_out, 6], "bias": [second_out]}}}}


def _state(model: nn.Module) -> dict:
    return {k: (v.shape, v.clone()) for k, v in model.state_dict().items()}


def _assert_untouched(model: nn.Module, before: dict) -> None:
    assert (model[0].out_features, model[1].out_features) == (6, 2)
    after = _state(model)
    assert after.keys() == before.keys()
    assert all(after[k][0] == v[0] and torch.equal(after[k][1], v[1]) for k, v in before.items())


@pytest.mark.parametrize(("description", "options", "message"), [
    # a 300-byte file asking for 4 GB: refused by the default bound, before anything changes
    (_two_layers(3, 10**9), {}, r"total 28,000,000,060 bytes, more than max_bytes=176 .*pass "
                                r"max_bytes"),
    # allowed by the bound the user raised, but more than can be allocated: still nothing changes
    (_two_layers(3, 10**15), {"max_bytes": 10**17}, "cannot be allocated"),
    # a shape its sizes do not give
    ({**_two_layers(3, 2), "layers": {"0": {**_two_layers(3, 2)["layers"]["0"],
                                          "tensors": {"weight": [3, 5], "bias": [3]}}}},
     {}, r"tensor 'weight' must have the shape its sizes give, \[3, 4\]; got \[3, 5\]"),
    (_two_layers(3, 2), {"max_bytes": -1}, "max_bytes must be an int >= 0"),
])
def test_rebuild_refuses_a_hostile_description_whole_and_leaves_the_model(description, options,
                                                                           message):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 6), nn.Linear(6, 2))
    before = _state(model)
    with pytest.raises(InvalidDescriptionError, match=message) as info:
        rebuild(model, description, **options)
    assert "\n" not in str(info.value)
    _assert_untouched(model, before)


def test_a_raised_bound_lets_a_larger_description_through():
    description = _two_layers(3, 50)
    with pytest.raises(InvalidDescriptionError, match="max_bytes"):
        rebuild(nn.Sequential(nn.Linear(4, 6), nn.Linear(6, 2)), description)
    model = rebuild(nn.Sequential(nn.Linear(4, 6), nn.Linear(6, 2)), description,
                    max_bytes=10_000)
    assert tuple(model[1].weight.shape) == (50, 6)
