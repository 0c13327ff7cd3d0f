"""``prune-explorer demo-checkpoint``: the quickstart's model.pt, then report and apply on it."""

from __future__ import annotations

import io

import pytest
import torch

from prune_explorer import cli
from prune_explorer.cli.checkpoints import read_checkpoint
from prune_explorer.demo import DEMO_MODELS, load_model
from prune_explorer.session import Plan, Step


def run(capsys, *argv: object) -> tuple[int, str, str]:
    code = cli.main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def same_state(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("name", sorted(DEMO_MODELS))
@pytest.mark.parametrize(("suffix", "fmt"), [(".pt", "torch"), (".safetensors", "safetensors"),
                                              ("", "torch")])
def test_writes_the_trained_demo_weights(capsys, tmp_path, name, suffix, fmt):
    path = tmp_path / f"model{suffix}"
    code, out, err = run(capsys, "demo-checkpoint", path, "--model", name)
    assert (code, err) == (0, "")
    assert f"Wrote {path} ({fmt})" in out
    checkpoint = read_checkpoint(path, "CHECKPOINT")
    assert checkpoint.format == fmt
    assert same_state(dict(checkpoint.state), load_model(name).state_dict())
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]  # no temporary file left


def test_the_quickstart_round_trip(capsys, tmp_path, monkeypatch):
    # docs/cli.md: prune-explorer demo-checkpoint model.pt
    #              && prune-explorer apply model.pt plan.json
    monkeypatch.chdir(tmp_path)
    Plan([Step("l1_unstructured", "fc1.weight", amount=0.5)]).save(tmp_path / "plan.json")
    assert run(capsys, "demo-checkpoint", "model.pt")[0] == 0
    code, out, err = run(capsys, "report", "model.pt")
    assert (code, err) == (0, "")
    assert "demo model 'mlp' (DigitsMLP; matched by its keys)" in out
    code, out, err = run(capsys, "apply", "model.pt", "plan.json", "-o", "pruned.pt")
    assert (code, err) == (0, "")
    code, out, err = run(capsys, "report", "pruned.pt")
    assert (code, err) == (0, "")
    fc1 = next(line for line in out.splitlines() if line.split()[:1] == ["fc1.weight"])
    assert "4096" in fc1
    assert "50.0%" in fc1
    state = read_checkpoint(tmp_path / "pruned.pt", "CHECKPOINT").state
    assert int(state["fc1.weight_mask"].sum()) == 4096


def test_the_model_choices_are_the_demo_models():
    parser = cli.build_parser()
    sub = next(a for a in parser._subparsers._group_actions)
    model = next(a for a in sub.choices["demo-checkpoint"]._actions if a.dest == "model")
    assert sorted(model.choices) == sorted(DEMO_MODELS)


def test_to_standard_output(capsys, monkeypatch):
    buffer = io.BytesIO()

    class Out(io.TextIOWrapper):
        pass

    stdout = Out(buffer, encoding="utf-8")
    monkeypatch.setattr("sys.stdout", stdout)
    assert cli.main(["demo-checkpoint", "-"]) == 0
    stdout.flush()
    state = torch.load(io.BytesIO(buffer.getvalue()), weights_only=True)
    assert same_state(state, load_model("mlp").state_dict())
    assert "Wrote -" in capsys.readouterr().err  # the summary goes to stderr


@pytest.mark.parametrize("target", ["folder", "missing/model.pt"])
def test_bad_output_is_refused(capsys, tmp_path, target):
    (tmp_path / "folder").mkdir()
    code, out, err = run(capsys, "demo-checkpoint", tmp_path / target)
    assert code == 1
    assert out == ""
    assert err.startswith("prune-explorer demo-checkpoint: error: OUTPUT ")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder"]


def test_bad_model_is_a_usage_error(capsys, tmp_path):
    code, _, err = run(capsys, "demo-checkpoint", tmp_path / "m.pt", "--model", "resnet")
    assert code == 2
    assert "invalid choice: 'resnet'" in err
