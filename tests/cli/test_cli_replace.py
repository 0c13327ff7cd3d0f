"""Issue 23, must-hold 4: outputs are replaced only when that is safe and asked for.

``apply --shrink`` writes OUT and OUT.shrunk.json as a pair (both new or both old, whichever
rename fails); a read-only output or one of another user is refused unless ``--force``.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
import torch

from prune_explorer import _files, cli
from prune_explorer.demo import load_cnn, load_mlp
from prune_explorer.session import Plan, Session


@pytest.fixture
def shrink_case(tmp_path: Path) -> list[str]:
    torch.save(load_cnn().state_dict(), tmp_path / "cnn.pt")
    s = Session(load_cnn())
    s.apply("features.0.weight", "ln_structured", amount=0.5, n=2, dim=0)
    dead = s.mask("features.0.weight").flatten(1).sum(1) == 0
    s.apply("features.0.bias", "custom_from_mask", mask=~dead)  # dead channels output zero
    s.plan.save(tmp_path / "plan.json")
    return ["apply", str(tmp_path / "cnn.pt"), str(tmp_path / "plan.json"),
            "-o", str(tmp_path / "small.pt"), "--shrink"]


def _fail_renames_to(monkeypatch, suffix: str) -> list[str]:
    renamed: list[str] = []
    real = os.replace

    def replace(src, dst):
        if str(dst).endswith(suffix) and not str(src).endswith(".old"):
            raise OSError(28, "No space left on device")
        renamed.append(str(dst))
        return real(src, dst)

    monkeypatch.setattr(_files.os, "replace", replace)
    return renamed


@pytest.mark.parametrize("existing", [False, True], ids=["new", "old-pair"])
@pytest.mark.parametrize("failing", [".shrunk.json", "small.pt"])
def test_shrink_outputs_are_both_new_or_both_old(capsys, monkeypatch, tmp_path, shrink_case,
                                                 existing, failing):
    out, arch = tmp_path / "small.pt", tmp_path / "small.pt.shrunk.json"
    if existing:
        out.write_bytes(b"old state_dict")
        arch.write_bytes(b"old description")
    renamed = _fail_renames_to(monkeypatch, failing)
    assert cli.main(shrink_case) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "No space left on device" in err
    assert "all are as they were" in err
    if failing == ".shrunk.json":  # OUT was already replaced once: the test can fail
        assert str(out) in renamed
    if existing:
        assert out.read_bytes() == b"old state_dict"
        assert arch.read_bytes() == b"old description"
    else:
        assert not out.exists()
        assert not arch.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["cnn.pt", "plan.json"] + (["small.pt", "small.pt.shrunk.json"] if existing else []))


def test_shrink_outputs_replace_an_old_pair(capsys, tmp_path, shrink_case):
    out, arch = tmp_path / "small.pt", tmp_path / "small.pt.shrunk.json"
    out.write_bytes(b"old state_dict")
    arch.write_bytes(b"old description")
    assert cli.main(shrink_case) == 0, capsys.readouterr().err
    assert torch.load(out, weights_only=True)["features.0.weight"].shape[0] == 8
    assert arch.read_text().startswith("{")
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "cnn.pt", "plan.json", "small.pt", "small.pt.shrunk.json"]


@pytest.fixture
def apply_case(tmp_path: Path) -> tuple[list[str], Path]:
    torch.save(load_mlp().state_dict(), tmp_path / "mlp.pt")
    Plan().save(tmp_path / "plan.json")
    out = tmp_path / "out.pt"
    out.write_bytes(b"precious")
    return ["apply", str(tmp_path / "mlp.pt"), str(tmp_path / "plan.json"), "-o", str(out)], out


def test_a_read_only_output_is_refused_unless_forced(capsys, apply_case):
    argv, out = apply_case
    out.chmod(0o444)
    assert cli.main(argv) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "is read-only (mode -r--r--r--); refusing to replace it: pass --force" in err
    assert out.read_bytes() == b"precious"
    assert cli.main([*argv, "--force"]) == 0, capsys.readouterr().err
    assert out.read_bytes() != b"precious"
    assert stat.S_IMODE(out.stat().st_mode) == 0o444  # replaced, keeping its mode


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                    reason="only root can give a file to another user")
def test_a_file_of_another_user_is_refused_unless_forced(capsys, apply_case, tmp_path):
    argv, out = apply_case
    os.chown(out, 12345, 12345)
    assert cli.main(argv) == 1
    assert "belongs to another user (uid 12345); refusing to replace it: pass --force" in \
        capsys.readouterr().err
    assert out.read_bytes() == b"precious"
    csv = tmp_path / "r.csv"
    csv.write_bytes(b"theirs")
    os.chown(csv, 12345, 12345)
    assert cli.main(["report", argv[1], "--csv", str(csv)]) == 1
    assert csv.read_bytes() == b"theirs"
    assert cli.main([*argv, "--force"]) == 0, capsys.readouterr().err
    assert out.read_bytes() != b"precious"


def test_force_is_in_the_help_of_each_command_that_writes(capsys):
    for command in ("apply", "report", "demo-checkpoint"):
        assert cli.main([command, "--help"]) == 0
        assert "--force" in capsys.readouterr().out
