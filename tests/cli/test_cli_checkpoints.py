"""Checkpoints ``prune-explorer`` reads and writes: masks are validated, ``.safetensors`` and
``torch.save`` files are told apart by their contents, and no pickled code ever runs.

Stock ``torch.nn.utils.prune`` is the oracle for the masks; ``safetensors`` itself reads back
what we write.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pandas as pd
import pytest
import torch
import torch.nn.utils.prune as torch_prune
from safetensors.torch import load as safetensors_load
from safetensors.torch import load_file, save_file

from prune_explorer import cli
from prune_explorer.cli.checkpoints import checkpoint_bytes, detect_format
from prune_explorer.demo import load_mlp
from prune_explorer.session import Plan, Session, Step
from prune_explorer.session.model.state_dict import (
    InvalidMaskError,
    StateDictMismatchError,
    check_masks,
    load_pruned_state_dict,
)

SAFETENSORS_MAGIC_BYTE = b"{"


def run(capsys, *argv: object) -> tuple[int, str, str]:
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def assert_fails(capsys, folder: Path, argv: list[object], *needles: str) -> str:
    before = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    code, out, err = run(capsys, *argv)
    assert code == 1, (out, err)
    assert err.startswith(f"prune-explorer {argv[0]}: error: ")
    assert err.count("\n") == 1
    for needle in needles:
        assert needle in err, err
    assert {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()} == before
    return err


def torch_pruned_mlp() -> torch.nn.Module:
    model = load_mlp()
    torch_prune.l1_unstructured(model.fc1, "weight", amount=0.5)
    torch_prune.ln_structured(model.fc2, "weight", amount=0.25, n=2, dim=0)
    return model


def is_safetensors(path: Path) -> bool:
    head = path.read_bytes()[:9]
    return len(head) == 9 and head[8:9] == SAFETENSORS_MAGIC_BYTE


@pytest.fixture
def plan(tmp_path: Path) -> Path:
    path = tmp_path / "plan.json"
    Plan([Step("l1_unstructured", "fc1.weight", amount=0.5),
          Step("ln_structured", "fc2.weight", amount=0.25, n=2, dim=0)]).save(path)
    return path


# -- masks ---------------------------------------------------------------------------------------
@pytest.fixture
def pruned_state() -> dict[str, torch.Tensor]:
    return dict(torch_pruned_mlp().state_dict())


@pytest.mark.parametrize("model_args", [[], ["--model", "mlp"]], ids=["inferred", "given"])
def test_a_mask_of_halves_is_refused(capsys, tmp_path, pruned_state, plan, model_args):
    pruned_state["fc1.weight_mask"] = torch.full_like(pruned_state["fc1.weight_mask"], 0.5)
    path = tmp_path / "half.pt"
    torch.save(pruned_state, path)
    for argv in (["report", path], ["apply", path, plan, "-o", tmp_path / "o.pt"]):
        assert_fails(capsys, tmp_path, [*argv, *model_args], "CHECKPOINT", "half.pt",
                     "fc1.weight_mask must hold only 0 and 1", "got 0.5 at index (0, 0)",
                     "8192 of 8192 entries")


def test_a_mask_of_the_wrong_shape_is_named(capsys, tmp_path, pruned_state):
    pruned_state["fc1.weight_mask"] = pruned_state["fc1.weight_mask"].t().contiguous()
    path = tmp_path / "shape.pt"
    torch.save(pruned_state, path)
    err = assert_fails(capsys, tmp_path, ["report", path],
                       "fc1.weight_mask must have the shape of fc1.weight_orig, (128, 64); "
                       "got (64, 128)")
    assert "--model is needed" not in err


@pytest.mark.parametrize(
    ("mask", "needles"),
    [
        (lambda m: m.to(torch.int64), ["floating-point or bool", "torch.int64"]),
        (lambda m: torch.where(m == 0, float("nan"), 1.0), ["only 0 and 1", "got nan"]),
        (lambda m: m * 2, ["only 0 and 1", "got 2.0"]),
    ],
    ids=["int", "nan", "two"],
)
def test_other_invalid_masks(capsys, tmp_path, pruned_state, mask, needles):
    pruned_state["fc2.weight_mask"] = mask(pruned_state["fc2.weight_mask"])
    path = tmp_path / "bad.pt"
    torch.save(pruned_state, path)
    assert_fails(capsys, tmp_path, ["report", path, "--model", "mlp"], "fc2.weight_mask", *needles)


def test_a_bool_mask_is_a_valid_mask(capsys, tmp_path, pruned_state):
    pruned_state["fc1.weight_mask"] = pruned_state["fc1.weight_mask"].bool()
    path = tmp_path / "bool.pt"
    torch.save(pruned_state, path)
    csv = tmp_path / "r.csv"
    code, _, err = run(capsys, "report", path, "--csv", csv)
    assert (code, err) == (0, "")
    zeros = pd.read_csv(csv).set_index("name")["zeros"]
    assert zeros["fc1.weight"] == int((torch_pruned_mlp().fc1.weight == 0).sum()) == 4096


def test_loader_recreates_torch_pruning_exactly(pruned_state):
    oracle = torch_pruned_mlp()
    fresh = load_mlp(pretrained=False)
    load_pruned_state_dict(fresh, pruned_state)
    assert list(fresh.state_dict()) == list(oracle.state_dict())
    for key, value in oracle.state_dict().items():
        assert torch.equal(fresh.state_dict()[key], value), key
    for name in ("fc1", "fc2"):  # the pruned copies, not only the stored tensors
        assert torch.equal(getattr(fresh, name).weight, getattr(oracle, name).weight)
    assert Session(fresh).methods("fc1.weight") == ("custom_from_mask",)


def test_loader_errors_name_the_mask_and_list_mismatches(pruned_state):
    bad = dict(pruned_state, **{"fc3.weight_orig": torch.ones(10, 64),
                                "fc3.weight_mask": torch.ones(10, 64) * 0.25})
    with pytest.raises(InvalidMaskError, match=r"fc3\.weight_mask must hold only 0 and 1") as info:
        check_masks(bad)
    assert info.value.key == "fc3.weight_mask"
    extra = dict(pruned_state, stray=torch.zeros(1))
    del extra["fc3.bias"]
    with pytest.raises(StateDictMismatchError) as info:
        load_pruned_state_dict(load_mlp(pretrained=False), extra)
    assert info.value.problems == ("missing keys fc3.bias", "unexpected keys stray")


def test_session_to_recomputes_the_pruned_copy():
    model = torch.nn.Sequential(torch.nn.Linear(4, 3))
    session = Session(model)
    session.apply("0.weight", "l1_unstructured", amount=0.5)
    with torch.no_grad():
        model[0].weight_orig.mul_(2)  # the pruned copy is stale until the next forward
    assert session.to("cpu") is session
    assert torch.equal(model[0].weight, model[0].weight_orig * model[0].weight_mask)


# -- formats -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("source", "output", "written"),
    [
        ("in.safetensors", "out.safetensors", "safetensors"),
        ("in.pt", "out.safetensors", "safetensors"),
        ("in.safetensors", "out.pt", "torch"),
        ("in.safetensors", "out.weights", "safetensors"),  # unknown suffix: the input's format
        ("in.pt", "out.weights", "torch"),
    ],
)
def test_apply_round_trips_through_both_formats(capsys, tmp_path, plan, source, output, written):
    state = load_mlp().state_dict()
    src = tmp_path / source
    if source.endswith(".safetensors"):
        save_file(dict(state), src)
    else:
        torch.save(state, src)
    out = tmp_path / output
    code, stdout, err = run(capsys, "apply", src, plan, "-o", out)
    assert (code, err) == (0, "")
    assert f"({written})" in stdout
    assert is_safetensors(out) == (written == "safetensors")
    saved = load_file(out) if written == "safetensors" else torch.load(out, weights_only=True)
    oracle = torch_pruned_mlp().state_dict()
    assert sorted(saved) == sorted(oracle)
    for key, value in oracle.items():
        assert torch.equal(saved[key], value), key
    csv = tmp_path / "again.csv"
    assert run(capsys, "report", out, "--csv", csv)[0] == 0  # and reads back
    zeros = pd.read_csv(csv).set_index("name")["zeros"]
    assert zeros["fc1.weight"] == 4096


def test_commit_to_safetensors_loads_into_the_plain_model(capsys, tmp_path, plan):
    src = tmp_path / "in.pt"
    torch.save(load_mlp().state_dict(), src)
    out = tmp_path / "c.safetensors"
    assert run(capsys, "apply", src, plan, "-o", out, "--commit")[0] == 0
    fresh = load_mlp(pretrained=False)
    fresh.load_state_dict(load_file(out))
    assert int((fresh.fc1.weight == 0).sum()) == 4096


def test_safetensors_output_of_views_and_shared_tensors():
    base = torch.arange(12.0).reshape(3, 4)
    state = {"a": base, "tied": base, "t": base.t()}  # shared storage and a non-contiguous view
    saved = safetensors_load(checkpoint_bytes(state, "safetensors"))
    assert all(torch.equal(saved[k], v) for k, v in state.items())
    assert detect_format(checkpoint_bytes(state, "safetensors")[:9], 10**6) == "safetensors"
    assert detect_format(checkpoint_bytes(state, "torch")[:9], 10**6) == "torch"


@pytest.mark.parametrize("kind", ["pt-named-safetensors", "safetensors-named-pt"])
def test_the_format_comes_from_the_contents_not_the_name(capsys, tmp_path, kind):
    state = torch_pruned_mlp().state_dict()
    if kind == "pt-named-safetensors":
        path = tmp_path / "model.safetensors"
        torch.save(state, path)
    else:
        path = tmp_path / "model.pt"
        save_file(dict(state), path)
    code, out, err = run(capsys, "report", path)
    assert (code, err) == (0, "")
    row = next(line for line in out.splitlines() if line.split()[:1] == ["fc1.weight"])
    assert " 4096 " in row
    assert "custom_from_mask" in row


def test_a_corrupt_safetensors_file(capsys, tmp_path):
    path = tmp_path / "cut.safetensors"
    save_file(dict(load_mlp().state_dict()), path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    assert_fails(capsys, tmp_path, ["report", path], "not a readable safetensors file",
                 "cut.safetensors")


class Payload:
    """Unpickling this runs ``os.system``: the attack a weights-only loader must stop."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


@pytest.mark.parametrize("name", ["evil.pt", "evil.safetensors", "evil.bin"])
@pytest.mark.parametrize("how", ["torch.save", "legacy torch.save", "pickle.dump"])
def test_a_malicious_pickle_never_runs(capsys, tmp_path, plan, name, how):
    armed = tmp_path / "armed"
    pickle.loads(pickle.dumps(Payload(armed)))  # the payload does run when unpickled
    assert armed.exists()
    armed.unlink()
    marker = tmp_path / "pwned"
    payload = {"fc1.weight": Payload(marker)}
    path = tmp_path / name
    if how == "torch.save":
        torch.save(payload, path)
    elif how == "legacy torch.save":
        torch.save(payload, path, _use_new_zipfile_serialization=False)
    else:
        path.write_bytes(pickle.dumps(payload))
    for argv in (["report", path], ["apply", path, plan, "-o", tmp_path / "o.pt"]):
        assert_fails(capsys, tmp_path, argv, "CHECKPOINT", name)
        assert not marker.exists()
