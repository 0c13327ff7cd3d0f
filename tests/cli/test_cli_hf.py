"""The CLI on Hugging Face models built from small configs (``--model helpers.hf_models:NAME``):
``apply --shrink`` traces a language model on token ids (inferred, or ``--input-kind``) and the
result loads back; ``report`` / ``apply`` read ``save_pretrained`` output of tied (GPT-2) and
renamed (ViT) models, pruned or not; a plan step on an int8 weight is refused in one line."""

from __future__ import annotations

import json
import warnings

import pytest
import torch
from safetensors.torch import load_file

from helpers import hf_models
from prune_explorer import Session, cli
from prune_explorer.session import Plan, Step, rebuild_shrunk
from prune_explorer.session.model.state_dict import load_pruned_state_dict


def run(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()  # not what save_pretrained printed before
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _save_pretrained(model: torch.nn.Module, folder) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PruningNotSavedWarning on the pruned ones
        model.save_pretrained(folder)
    return str(folder / "model.safetensors")


def _shrinkable_plan(name: str) -> tuple[torch.nn.Module, Plan]:
    model = hf_models.FACTORIES[name]()
    s = Session(model)
    if name == "gpt2":
        for layer in (0, 1):
            s.apply(f"transformer.h.{layer}.mlp.c_fc.weight", "ln_structured", amount=16, n=2,
                    dim=1, with_bias=True)
    else:
        mlp = "model.layers.0.mlp"
        s.apply(f"{mlp}.up_proj.weight", "ln_structured", amount=16, n=2, dim=0)
        dead = ~s.mask(f"{mlp}.up_proj.weight").any(dim=1)
        s.apply(f"{mlp}.gate_proj.weight", "custom_from_mask",
                mask=(~dead)[:, None].expand(64, 32))
    return model, s.plan


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_apply_shrink_traces_a_language_model_on_token_ids_and_the_result_loads(
        capsys, tmp_path, name):
    masked, plan = _shrinkable_plan(name)
    plan.save(tmp_path / "plan.json")
    checkpoint = _save_pretrained(hf_models.FACTORIES[name](), tmp_path / "saved")
    out = tmp_path / "small.safetensors"
    code, printed, err = run(capsys, "apply", checkpoint, tmp_path / "plan.json", "-o", out,
                             "--shrink", "--model", f"helpers.hf_models:{name}")
    assert (code, err) == (0, ""), err
    assert "16 channels removed" in printed or "32 channels removed" in printed
    description = json.loads((tmp_path / "small.safetensors.shrunk.json").read_text())
    fresh = rebuild_shrunk(hf_models.FACTORIES[name](), description)
    load_pruned_state_dict(fresh, load_file(out))
    torch.testing.assert_close(hf_models.outputs(fresh, name), hf_models.outputs(masked, name),
                               rtol=1e-5, atol=1e-5)


def test_apply_shrink_with_float_inputs_on_a_language_model_is_one_line(capsys, tmp_path):
    _, plan = _shrinkable_plan("gpt2")
    plan.save(tmp_path / "plan.json")
    torch.save(hf_models.gpt2().state_dict(), tmp_path / "gpt2.pt")
    code, _, err = run(capsys, "apply", tmp_path / "gpt2.pt", tmp_path / "plan.json", "-o",
                       tmp_path / "small.pt", "--shrink", "--model", "helpers.hf_models:gpt2",
                       "--input-kind", "float", "--input-shape", "1,8")
    assert code == 1, err
    assert err.count("\n") == 1
    assert "cannot run on float inputs of shape 1,8" in err
    assert "--input-kind" in err
    assert "internal error" not in err
    assert not (tmp_path / "small.pt").exists()


@pytest.mark.parametrize("pruned", [False, True], ids=["plain", "pruned"])
@pytest.mark.parametrize("name", ["gpt2", "vit"])
def test_report_and_apply_read_save_pretrained_output(capsys, tmp_path, name, pruned):
    model = hf_models.FACTORIES[name]()
    s = Session(model)
    if pruned:
        s.apply_global(s.default_targets(), "l1_unstructured", amount=0.5)
    checkpoint = _save_pretrained(model, tmp_path / "saved")
    spec = f"helpers.hf_models:{name}"
    code, out, err = run(capsys, "report", checkpoint, "--model", spec)
    assert (code, err) == (0, ""), err
    total = next(line for line in out.splitlines() if line.split()[:1] == ["TOTAL"])
    zeros = int(s.report(totals=True)["zeros"].iloc[-1])
    assert f" {zeros} " in f" {total} "
    target = s.default_targets()[-1]
    Plan([Step("l1_unstructured", target, amount=0.25)]).save(tmp_path / "plan.json")
    code, _, err = run(capsys, "apply", checkpoint, tmp_path / "plan.json", "-o",
                       tmp_path / "out.safetensors", "--model", spec)
    assert (code, err) == (0, ""), err


def test_a_plan_step_on_an_int8_weight_is_refused_in_one_line(capsys, tmp_path):
    torch.save(hf_models.int8_llama().state_dict(), tmp_path / "int8.pt")
    up = "model.layers.0.mlp.up_proj.weight"
    Plan([Step("l1_unstructured", up, amount=0.5)]).save(tmp_path / "plan.json")
    code, _, err = run(capsys, "apply", tmp_path / "int8.pt", tmp_path / "plan.json", "-o",
                       tmp_path / "out.pt", "--model", "helpers.hf_models:int8_llama")
    assert code == 1, err
    assert err.count("\n") == 1
    assert f"cannot prune '{up}': its dtype is torch.int8" in err
