"""Tests for the ``prune-explorer`` command line (``prune_explorer.cli``).

``main([...])`` runs in-process; one test goes through the installed console script. Stock
``torch.nn.utils.prune`` is the oracle for every mask and zero count. Every bad input must give
exit status 1, a message on stderr naming the problem, and no output file (not even a partial
or temporary one).
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pandas as pd
import pytest
import torch
import torch.nn.utils.prune as torch_prune
from torch import nn

from helpers import REPO
from prune_explorer import cli
from prune_explorer.demo import DigitsCNN, DigitsMLP, load_cnn, load_mlp
from prune_explorer.session import Plan, Step
from prune_explorer.session.analysis.frames import REPORT_COLUMNS

REPO = REPO
PACKAGED_NOTEBOOKS = REPO / "src" / "prune_explorer" / "notebooks"
EXPECTED_NOTEBOOKS = [
    "01_quickstart.ipynb",
    "02_pruning_concepts.ipynb",
    "03_global_vs_local.ipynb",
    "04_plan_export.ipynb",
    "05_patterns_and_shrink.ipynb",
    "06_fine_tune_loop.ipynb",
    "07_importance.ipynb",
]

PLAN_STEPS = [
    Step("l1_unstructured", "fc1.weight", amount=0.5),
    Step("ln_structured", "fc2.weight", amount=0.25, n=2, dim=0),
    Step("random_unstructured", "fc3.weight", amount=0.3, seed=7),
]


# -- helpers -----------------------------------------------------------------------------------
def run(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, str, str]:
    code = cli.main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def torch_oracle(model: nn.Module) -> nn.Module:
    """Apply PLAN_STEPS to ``model`` with stock torch.nn.utils.prune."""
    torch_prune.l1_unstructured(model.fc1, "weight", amount=0.5)
    torch_prune.ln_structured(model.fc2, "weight", amount=0.25, n=2, dim=0)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(7)
        torch_prune.random_unstructured(model.fc3, "weight", amount=0.3)
    return model


LAB_CONFIG = ".jupyter-config"  # cli.lab.quiet_news: JupyterLab defaults (no news pop-up)


def listing(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


@pytest.fixture
def mlp_ckpt(tmp_path: Path) -> Path:
    path = tmp_path / "mlp.pt"
    torch.save(load_mlp().state_dict(), path)
    return path


@pytest.fixture
def cnn_ckpt(tmp_path: Path) -> Path:
    path = tmp_path / "cnn.pt"
    torch.save(load_cnn().state_dict(), path)
    return path


@pytest.fixture
def plan_file(tmp_path: Path) -> Path:
    path = tmp_path / "plan.json"
    Plan(PLAN_STEPS).save(path)
    return path


@pytest.fixture
def factory_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Write an importable module into the current folder; yields a function making one."""
    monkeypatch.chdir(tmp_path)
    made = []

    def make(source: str) -> str:
        name = f"pe_factory_{uuid.uuid4().hex[:10]}"
        (tmp_path / f"{name}.py").write_text(source, encoding="utf-8")
        made.append(name)
        return name

    yield make
    for name in made:
        sys.modules.pop(name, None)


# -- report --------------------------------------------------------------------------------------
def test_report_prints_every_tensor_and_zero_sparsity(capsys, mlp_ckpt):
    code, out, err = run(capsys, "report", mlp_ckpt, "--model", "mlp")
    assert (code, err) == (0, "")
    for name, param in load_mlp().named_parameters():
        line = next(row for row in out.splitlines() if row.split()[:1] == [name])
        assert f" {param.numel()} " in f" {line} "
        assert "0.0%" in line
    assert "TOTAL" in out
    assert "demo model 'mlp' (DigitsMLP)" in out


def test_report_infers_the_demo_model_from_the_keys(capsys, cnn_ckpt):
    code, out, _ = run(capsys, "report", cnn_ckpt)
    assert code == 0
    assert "demo model 'cnn' (DigitsCNN; matched by its keys)" in out
    assert "features.3.weight" in out


def test_report_with_plan_matches_torch_and_writes_csv(capsys, tmp_path, mlp_ckpt, plan_file):
    csv = tmp_path / "report.csv"
    code, out, err = run(capsys, "report", mlp_ckpt, "--plan", plan_file, "--csv", csv)
    assert (code, err) == (0, "")
    assert "3 steps applied" in out
    table = pd.read_csv(csv, keep_default_na=False)
    assert list(table.columns) == REPORT_COLUMNS
    oracle = torch_oracle(load_mlp())
    expected = {}
    for name, _ in load_mlp().named_parameters():
        module_name, tensor_name = name.rsplit(".", 1)
        expected[name] = int((getattr(oracle.get_submodule(module_name), tensor_name) == 0).sum())
    assert dict(zip(table["name"], table["zeros"], strict=True)) == expected
    assert expected["fc1.weight"] == 4096  # the plan did prune something
    row = table.set_index("name").loc["fc2.weight"]
    assert row["methods"] == "ln_structured"
    assert row["channels_pruned"] == "0:16;1:0"
    assert row["sparsity"] == pytest.approx(0.25)


def test_apply_keeps_masks_identical_to_torch(capsys, tmp_path, mlp_ckpt, plan_file):
    out_path = tmp_path / "pruned.pt"
    code, out, err = run(capsys, "apply", mlp_ckpt, plan_file, "-o", out_path)
    assert (code, err) == (0, "")
    assert "Applied 3 steps" in out
    saved = torch.load(out_path, weights_only=True)
    oracle = torch_oracle(load_mlp())
    assert list(saved) == list(oracle.state_dict())
    for key, value in oracle.state_dict().items():
        assert torch.equal(saved[key], value), key
    assert listing(tmp_path) == ["mlp.pt", "plan.json", "pruned.pt"]


def test_apply_commit_saves_a_plain_state_dict(capsys, tmp_path, mlp_ckpt, plan_file):
    out_path = tmp_path / "committed.pt"
    code, out, _ = run(capsys, "apply", mlp_ckpt, plan_file, "-o", out_path, "--commit")
    assert code == 0
    assert "made permanent for 3 tensors" in out
    saved = torch.load(out_path, weights_only=True)
    oracle = torch_oracle(load_mlp())
    for module in (oracle.fc1, oracle.fc2, oracle.fc3):
        torch_prune.remove(module, "weight")
    assert list(saved) == list(oracle.state_dict())
    fresh = DigitsMLP()
    fresh.load_state_dict(saved)  # loads into the unpruned architecture
    for key, value in oracle.state_dict().items():
        assert torch.equal(saved[key], value), key


def test_report_reads_a_pruned_checkpoint_back(capsys, tmp_path, mlp_ckpt, plan_file):
    out_path = tmp_path / "pruned.pt"
    assert cli.main(["apply", str(mlp_ckpt), str(plan_file), "-o", str(out_path)]) == 0
    csv = tmp_path / "again.csv"
    code, _, err = run(capsys, "report", out_path, "--model", "mlp", "--csv", csv)
    assert (code, err) == (0, "")
    table = pd.read_csv(csv, keep_default_na=False).set_index("name")
    oracle = torch_oracle(load_mlp())
    for name in ("fc1.weight", "fc2.weight", "fc3.weight"):
        module = oracle.get_submodule(name.split(".")[0])
        assert table.loc[name, "zeros"] == int((module.weight == 0).sum())
        assert table.loc[name, "methods"] == "custom_from_mask"


def test_apply_with_a_factory_from_the_current_folder(capsys, tmp_path, factory_module):
    name = factory_module(
        "from torch import nn\n\n"
        "def build():\n"
        "    return nn.Sequential(nn.Linear(6, 4), nn.ReLU(), nn.Linear(4, 2))\n"
    )
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 4), nn.ReLU(), nn.Linear(4, 2))
    torch.save(model.state_dict(), tmp_path / "seq.pt")
    Plan([Step("ln_structured", "0.weight", amount=0.5, n=1, dim=0)]).save(tmp_path / "p.json")
    code, out, err = run(capsys, "apply", "seq.pt", "p.json", "-o", "out.pt",
                         "--model", f"{name}:build")
    assert (code, err) == (0, "")
    assert f"{name}:build (Sequential)" in out
    torch_prune.ln_structured(model[0], "weight", amount=0.5, n=1, dim=0)
    saved = torch.load(tmp_path / "out.pt", weights_only=True)
    assert torch.equal(saved["0.weight_mask"], model[0].weight_mask)


# -- bad inputs ----------------------------------------------------------------------------------
def assert_fails(capsys, folder: Path, argv: list[object], *needles: str) -> str:
    before = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    code, out, err = run(capsys, *argv)
    assert code == 1, (out, err)
    assert err.startswith(f"prune-explorer {argv[0]}: error: ")
    assert err.count("\n") == 1, "one line, no traceback"
    for needle in needles:
        assert needle in err
    after = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    assert after == before, "a failed command must not write or change any file"
    return err


@pytest.mark.parametrize("command", ["report", "apply"])
def test_missing_checkpoint(capsys, tmp_path, plan_file, command):
    argv = [command, tmp_path / "nope.pt"]
    argv += [plan_file, "-o", tmp_path / "out.pt"] if command == "apply" else []
    assert_fails(capsys, tmp_path, argv, "CHECKPOINT", "nope.pt", "does not exist")


def test_checkpoint_is_a_folder(capsys, tmp_path):
    assert_fails(capsys, tmp_path, ["report", tmp_path], "is a folder")


@pytest.mark.parametrize("command", ["report", "apply"])
def test_full_module_pickle_is_refused_with_advice(capsys, tmp_path, plan_file, command):
    path = tmp_path / "whole.pt"
    torch.save(load_mlp(), path)
    argv = [command, path, *([plan_file, "-o", tmp_path / "out.pt"] if command == "apply" else [])]
    err = assert_fails(capsys, tmp_path, argv, "pickled Python objects",
                       "prune_explorer.demo.models.DigitsMLP", "weights_only=True",
                       "arbitrary code", "torch.save(model.state_dict()", "--model")
    assert "package.module:factory" in err


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b"this is not a checkpoint" * 4, "not a readable PyTorch checkpoint"),
        (b"", "not a readable PyTorch checkpoint"),
        ("truncated", "not a readable PyTorch checkpoint"),
    ],
    ids=["garbage", "empty", "truncated"],
)
def test_corrupt_checkpoint(capsys, tmp_path, mlp_ckpt, plan_file, content, needle):
    path = tmp_path / "bad.pt"
    if content == "truncated":
        data = mlp_ckpt.read_bytes()
        content = data[: len(data) // 2]
    path.write_bytes(content)
    assert_fails(capsys, tmp_path, ["report", path], needle, "bad.pt")
    assert_fails(capsys, tmp_path, ["apply", path, plan_file, "-o", tmp_path / "o.pt"], needle)


def test_checkpoint_that_is_not_a_state_dict(capsys, tmp_path):
    path = tmp_path / "list.pt"
    torch.save([torch.zeros(2)], path)
    assert_fails(capsys, tmp_path, ["report", path], "must hold a state_dict", "got list")


def test_training_checkpoint_gets_a_hint(capsys, tmp_path):
    path = tmp_path / "train.pt"
    torch.save({"model": load_mlp().state_dict(), "epoch": 3}, path)
    assert_fails(capsys, tmp_path, ["report", path], "must hold a state_dict",
                 "under 'model'", "torch.save(checkpoint['model']")


def test_checkpoint_of_another_architecture(capsys, tmp_path, cnn_ckpt):
    assert_fails(capsys, tmp_path, ["report", cnn_ckpt, "--model", "mlp"],
                 "does not fit demo model 'mlp' (DigitsMLP)", "missing keys fc1.weight",
                 "unexpected keys features.0.weight")


def test_checkpoint_with_a_wrong_shape(capsys, tmp_path):
    state = load_mlp().state_dict()
    state["fc3.weight"] = torch.zeros(3, 64)
    path = tmp_path / "shape.pt"
    torch.save(state, path)
    assert_fails(capsys, tmp_path, ["report", path, "--model", "mlp"],
                 "fc3.weight is (3, 64) in the file but (10, 64) in the model")


def test_unknown_keys_without_model_asks_for_model(capsys, tmp_path):
    path = tmp_path / "other.pt"
    torch.save(nn.Linear(3, 2).state_dict(), path)
    assert_fails(capsys, tmp_path, ["report", path], "--model is needed", "package.module:factory")


@pytest.mark.parametrize(
    ("spec", "needles"),
    [
        ("resnet", ["--model must be 'mlp', 'cnn' or 'package.module:factory'; got 'resnet'"]),
        ("a:b:c", ["got 'a:b:c'"]),
        ("no_such_module_xyz:build", ["cannot import module 'no_such_module_xyz'"]),
        ("os:no_such_factory", ["'os' has no attribute 'no_such_factory'"]),
        ("os:sep", ["sep must be callable", "got str"]),
        ("torch.nn:Linear", ["calling Linear() failed", "TypeError"]),
        ("collections:OrderedDict", ["must return a torch.nn.Module; got OrderedDict"]),
    ],
)
def test_bad_model_argument(capsys, tmp_path, mlp_ckpt, spec, needles):
    assert_fails(capsys, tmp_path, ["report", mlp_ckpt, "--model", spec], *needles)


def test_factory_that_raises(capsys, tmp_path, mlp_ckpt, factory_module):
    name = factory_module("def build():\n    raise RuntimeError('needs a config file')\n")
    assert_fails(capsys, tmp_path, ["report", mlp_ckpt, "--model", f"{name}:build"],
                 "calling build() failed (RuntimeError: needs a config file)")


def test_missing_plan(capsys, tmp_path, mlp_ckpt):
    assert_fails(capsys, tmp_path, ["report", mlp_ckpt, "--plan", tmp_path / "none.json"],
                 "--plan", "does not exist")
    assert_fails(capsys, tmp_path,
                 ["apply", mlp_ckpt, tmp_path / "none.json", "-o", tmp_path / "o.pt"],
                 "PLAN", "does not exist")


@pytest.mark.parametrize(
    ("content", "needles"),
    [
        (b"{not json", ["is not a valid plan", "not valid JSON"]),
        (b"\x80\x81\xfe binary", ["is not UTF-8 text"]),
        (json.dumps({"format": "prune-explorer-plan", "version": 1, "steps": [
            {"method": "l1_unstructured", "target": "fc1.weight", "amount": 1.5}]}).encode(),
         ["is not a valid plan", "steps[0]", "amount must be a float in [0, 1]", "1.5"]),
        (b'{"format": "other", "version": 1, "steps": []}', ["format must be"]),
        # raw Python errors become one-line plan errors
        (b"[" * 200_000, ["is not a valid plan", "nested too deeply"]),
        (json.dumps({"format": "prune-explorer-plan", "version": 1, "steps": [
            {"method": "l1_unstructured", "target": "fc1.weight", "amount": 1}]}).encode()
         .replace(b'"amount": 1', b'"amount": ' + b"9" * 5000),
         ["steps[0]: amount must be an integer of at most 4300 digits"]),
        (json.dumps({"format": "prune-explorer-plan", "version": 1, "steps": [
            {"method": "ln_structured", "target": "fc2.weight", "amount": 0.5, "n": 2,
             "dim": 0}]}).encode().replace(b'"n": 2', b'"n": 1e400'),
         ["steps[0]: n must be a finite number; got 1e400"]),
        (b'{"steps": []}', ["not a prune-explorer plan"]),
    ],
    ids=["not-json", "binary", "bad-step", "wrong-format", "deep", "huge-int", "1e400",
         "no-format"],
)
def test_invalid_plan(capsys, tmp_path, mlp_ckpt, content, needles):
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    assert_fails(capsys, tmp_path, ["report", mlp_ckpt, "--plan", path], *needles)
    assert_fails(capsys, tmp_path, ["apply", mlp_ckpt, path, "-o", tmp_path / "o.pt"], *needles)


def test_a_plan_with_a_byte_order_mark_is_read(capsys, tmp_path, mlp_ckpt, plan_file):
    plan_file.write_bytes(b"\xef\xbb\xbf" + plan_file.read_bytes())
    code, out, err = run(capsys, "apply", mlp_ckpt, plan_file, "-o", tmp_path / "pruned.pt")
    assert (code, err) == (0, "")
    assert "Applied 3 steps" in out
    saved = torch.load(tmp_path / "pruned.pt", weights_only=True)
    for key, value in torch_oracle(load_mlp()).state_dict().items():
        assert torch.equal(saved[key], value), key


def test_plan_that_does_not_fit_the_model(capsys, tmp_path, cnn_ckpt, plan_file):
    needles = ["does not fit the model of CHECKPOINT", "'fc1.weight' is not a prunable tensor"]
    assert_fails(capsys, tmp_path, ["report", cnn_ckpt, "--plan", plan_file], *needles)
    assert_fails(capsys, tmp_path, ["apply", cnn_ckpt, plan_file, "-o", tmp_path / "o.pt"],
                 *needles)


def test_plan_that_fails_half_way_leaves_old_output_untouched(capsys, tmp_path, mlp_ckpt):
    plan = tmp_path / "half.json"
    Plan([Step("l1_unstructured", "fc1.weight", amount=0.5),
          Step("ln_structured", "fc2.weight", amount=0.5, n=2, dim=5)]).save(plan)
    old = tmp_path / "out.pt"
    old.write_bytes(b"previous result")
    assert_fails(capsys, tmp_path, ["apply", mlp_ckpt, plan, "-o", old], "steps[1]", "dim")
    assert old.read_bytes() == b"previous result"


def test_output_folder_missing_or_a_folder(capsys, tmp_path, mlp_ckpt, plan_file):
    assert_fails(capsys, tmp_path, ["apply", mlp_ckpt, plan_file, "-o", tmp_path / "no" / "o.pt"],
                 "-o/--output", "does not exist")
    (tmp_path / "sub").mkdir()
    assert_fails(capsys, tmp_path, ["apply", mlp_ckpt, plan_file, "-o", tmp_path / "sub"],
                 "is a folder")
    assert_fails(capsys, tmp_path, ["report", mlp_ckpt, "--csv", tmp_path / "no" / "r.csv"],
                 "--csv", "does not exist")


def test_failed_write_leaves_no_partial_file(capsys, tmp_path, mlp_ckpt, plan_file, monkeypatch):
    target = tmp_path / "out.pt"
    target.write_bytes(b"old")

    def broken_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)
    assert_fails(capsys, tmp_path, ["apply", mlp_ckpt, plan_file, "-o", target],
                 "cannot be written", "No space left on device")
    assert target.read_bytes() == b"old"


@pytest.mark.parametrize(
    "argv",
    [[], ["apply", "a.pt", "p.json"], ["report"], ["lab", "--port", "0"], ["lab", "--port", "x"],
     ["frobnicate"]],
)
def test_usage_errors_exit_2(capsys, argv):
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert "usage: prune-explorer" in err


def test_help_and_version(capsys):
    code, out, _ = run(capsys, "--help")
    assert code == 0
    assert all(word in out for word in ("lab", "report", "apply"))
    code, out, _ = run(capsys, "--version")
    assert (code, out.strip()) == (0, "prune-explorer 0.1.0")


# -- lab (JupyterLab itself is not started here; see test_launch.py) ----------------------------
@pytest.fixture
def launched(monkeypatch):
    calls = []

    def fake_run(cmd, cwd):
        calls.append((list(cmd), Path(cwd)))
        return 0

    monkeypatch.setattr(cli.lab, "exec_lab", fake_run)
    return calls


def test_lab_copies_notebooks_and_builds_a_safe_command(capsys, tmp_path, launched):
    folder = tmp_path / "work"
    code, out, err = run(capsys, "lab", "--dir", folder, "--port", 9123, "--no-browser")
    assert (code, err) == (0, "")
    assert listing(folder) == [LAB_CONFIG, *EXPECTED_NOTEBOOKS]  # + the lab's quiet defaults
    for name in EXPECTED_NOTEBOOKS:
        assert (folder / name).read_bytes() == (PACKAGED_NOTEBOOKS / name).read_bytes()
        assert f"{name}: copied" in out
    [(cmd, cwd)] = launched
    assert cmd[:3] == [sys.executable, "-m", "jupyterlab"]
    assert cwd == folder
    assert "--ServerApp.ip=127.0.0.1" in cmd
    assert f"--ServerApp.root_dir={folder.resolve()}" in cmd
    assert "--LabApp.default_url=/lab/tree/01_quickstart.ipynb" in cmd
    assert "--ServerApp.port=9123" in cmd
    assert "--ServerApp.port_retries=0" in cmd
    assert "--ServerApp.open_browser=False" in cmd
    assert not [part for part in cmd if "token" in part.lower() or "password" in part.lower()]
    assert ("--allow-root" in cmd) == (os.geteuid() == 0)


def test_lab_defaults(capsys, tmp_path, launched, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, _ = run(capsys, "lab")
    assert code == 0
    assert listing(tmp_path / "prune-explorer-notebooks") == [LAB_CONFIG, *EXPECTED_NOTEBOOKS]
    [(cmd, _)] = launched
    assert not [part for part in cmd if "port" in part or "open_browser" in part]


def test_lab_never_overwrites_an_edited_copy(capsys, tmp_path, launched):
    folder = tmp_path / "work"
    assert cli.main(["lab", "--dir", str(folder), "--no-browser"]) == 0
    edited = folder / "01_quickstart.ipynb"
    edited.write_text('{"my": "edits"}', encoding="utf-8")
    (folder / "03_global_vs_local.ipynb").unlink()
    capsys.readouterr()
    code, out, _ = run(capsys, "lab", "--dir", folder, "--no-browser")
    assert code == 0
    assert edited.read_text(encoding="utf-8") == '{"my": "edits"}'
    assert "01_quickstart.ipynb: kept your edited copy" in out
    assert "02_pruning_concepts.ipynb: already there, unchanged" in out
    assert "03_global_vs_local.ipynb: copied" in out
    assert listing(folder) == [LAB_CONFIG, *EXPECTED_NOTEBOOKS]
    assert len(launched) == 2


def test_lab_dir_that_is_a_file(capsys, tmp_path, launched):
    path = tmp_path / "file.txt"
    path.write_text("x")
    assert_fails(capsys, tmp_path, ["lab", "--dir", path], "--dir must be a folder")
    assert launched == []


def test_lab_without_jupyterlab_installed(capsys, tmp_path, launched, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "jupyterlab" else real(name, *a))
    assert_fails(capsys, tmp_path, ["lab", "--dir", tmp_path / "w"], "JupyterLab is not installed",
                 "pip install jupyterlab")
    assert launched == []


def test_importing_the_cli_loads_neither_torch_nor_pandas():
    # `prune-explorer lab` execs JupyterLab at once; only report/apply need torch and pandas.
    code = ("import sys, prune_explorer.cli; "
            "print(sorted({'torch', 'pandas', 'prune_explorer.session'} & set(sys.modules)))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"),
                                                         os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=120, check=True)
    assert done.stdout.strip() == "[]"


@pytest.mark.skipif(os.name == "nt", reason="POSIX exec")
def test_lab_replaces_the_process_with_jupyterlab(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # exec_lab changes folder; restored after the test
    calls = []

    class Execed(Exception):
        pass

    def fake_execv(path, argv):
        calls.append((path, list(argv), Path.cwd()))
        raise Execed

    monkeypatch.setattr(os, "execv", fake_execv)
    cmd = cli.lab_command(tmp_path / "w", 8899, open_browser=False)
    (tmp_path / "w").mkdir()
    with pytest.raises(Execed):
        cli.lab.exec_lab(cmd, tmp_path / "w")
    assert calls == [(cmd[0], cmd, (tmp_path / "w").resolve())]

    def missing(path, argv):
        raise FileNotFoundError(2, "No such file or directory")

    monkeypatch.setattr(os, "execv", missing)
    with pytest.raises(cli.CLIError, match=r"cannot start JupyterLab with .* \(No such file"):
        cli.lab.exec_lab(cmd, tmp_path / "w")


# -- the installed console script ---------------------------------------------------------------
def console_script() -> str:
    beside = Path(sys.executable).with_name("prune-explorer")
    found = str(beside) if beside.exists() else shutil.which("prune-explorer")
    if found is None:
        pytest.fail("the prune-explorer console script is not installed (pip install -e .)")
    return found


@pytest.mark.slow
def test_console_script(tmp_path, mlp_ckpt):
    script = console_script()
    ok = subprocess.run([script, "report", str(mlp_ckpt), "--model", "mlp"],
                        capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert "fc1.weight" in ok.stdout
    assert "TOTAL" in ok.stdout
    whole = tmp_path / "whole.pt"
    torch.save(DigitsCNN(), whole)
    bad = subprocess.run([script, "apply", str(whole), "plan.json", "-o", str(tmp_path / "o.pt")],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1
    assert bad.stderr.startswith("prune-explorer apply: error: CHECKPOINT")
    assert "weights_only=True" in bad.stderr
    assert "Traceback" not in bad.stderr
    assert not (tmp_path / "o.pt").exists()
