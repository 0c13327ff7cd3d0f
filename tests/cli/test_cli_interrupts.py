"""Issue 36, items 3 and 4: Ctrl-C while the CLI writes its outputs or reads a checkpoint.

The outputs: ``write_outputs`` (``apply --shrink``'s pair) and ``write_output`` get a Ctrl-C
delivered as CPython delivers one (``helpers.interrupts.Interrupter``: to the handler installed
then, at every line event of prune_explorer's code in the write), and a second one during what
follows; afterwards the files are all old or all new (a Ctrl-C that came after the last rename
was checked, or none was sent), with no temporary or backup file left. The checkpoint reader:
no zip archive is left to a finaliser, where a Ctrl-C would be printed and swallowed.
"""

from __future__ import annotations

import gc
import zipfile
from pathlib import Path

import pytest
import torch

from helpers.interrupts import Interrupter
from prune_explorer import _files, cli
from prune_explorer.cli.checkpoints import read_checkpoint
from prune_explorer.demo import load_mlp
from prune_explorer.session import Plan, Step

OLD = {"small.pt": b"old state_dict", "small.pt.shrunk.json": b"old description"}
NEW = {"small.pt": b"new state_dict", "small.pt.shrunk.json": b"new description"}


def _files_in(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir()}


def _write_pair(folder: Path) -> None:
    _files.write_outputs([(folder / name, data, name) for name, data in NEW.items()])


def _write_one(folder: Path) -> None:
    _files.write_output(folder / "small.pt", NEW["small.pt"], "-o")


def _interrupted(write, folder: Path, n: int, then: int = 0) -> Interrupter:
    with Interrupter(n, then=then) as interrupter:
        try:
            write(folder)
        except KeyboardInterrupt:
            if not interrupter.fired:
                raise
    return interrupter


@pytest.mark.slow
@pytest.mark.parametrize("existing", [True, False], ids=["old-pair", "new-paths"])
@pytest.mark.parametrize("write", [_write_pair, _write_one], ids=["pair", "single"])
def test_ctrl_c_anywhere_in_a_write_leaves_all_old_or_all_new_and_no_stray_file(
        tmp_path, write, existing):
    names = list(OLD) if write is _write_pair else ["small.pt"]
    old = {k: OLD[k] for k in names} if existing else {}
    new = {k: NEW[k] for k in names}

    def fresh(n: int) -> Path:
        folder = tmp_path / f"case{n}"
        folder.mkdir()
        for name, data in old.items():
            (folder / name).write_bytes(data)
        return folder

    lines = _interrupted(write, fresh(0), 0).count
    assert lines > 10
    problems = []
    for n in range(1, lines + 1):
        for then in (0, 1, 3):  # a second Ctrl-C on the way out, as impatient users press it
            folder = fresh(n * 10 + then)
            interrupter = _interrupted(write, folder, n, then)
            got = _files_in(folder)
            # a Ctrl-C raised before the last rename's check: all old; one that waited past it
            # (while the backups are removed) is raised with everything new
            if got not in ([old, new] if interrupter.fired else [new]):
                problems.append((n, then, interrupter.where, sorted(got)))
    assert not problems, f"{len(problems)} of {lines * 3} points: {problems[:6]}"


def test_a_ctrl_c_that_waits_for_the_renames_still_puts_the_old_pair_back(tmp_path,
                                                                           monkeypatch):
    # the window of the issue: right after os.replace returned, before the bookkeeping
    for name, data in OLD.items():
        (tmp_path / name).write_bytes(data)
    real = _files.os.replace
    calls = []

    def replace_then_ctrl_c(src, dst):
        real(src, dst)
        calls.append(dst)
        if len(calls) == 1:
            import signal
            signal.getsignal(signal.SIGINT)(signal.SIGINT, None)  # Ctrl-C lands here

    monkeypatch.setattr(_files.os, "replace", replace_then_ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        _write_pair(tmp_path)
    assert _files_in(tmp_path) == OLD


# -- the checkpoint reader -----------------------------------------------------------------------
def test_no_zip_archive_is_left_to_a_finaliser(tmp_path, monkeypatch):
    path = tmp_path / "mlp.pt"
    torch.save(load_mlp().state_dict(), path)
    left: list[str] = []
    real_del = zipfile.ZipFile.__del__

    def spying_del(self):
        if self.fp is not None:  # still open: the finaliser would close it
            left.append(repr(self))
        real_del(self)

    monkeypatch.setattr(zipfile.ZipFile, "__del__", spying_del)
    read_checkpoint(path, "CHECKPOINT")
    gc.collect()
    assert left == []


def test_ctrl_c_while_the_archive_closes_ends_the_command_with_130_and_no_output(
        tmp_path, monkeypatch, capsys):
    ckpt, plan, out = tmp_path / "mlp.pt", tmp_path / "plan.json", tmp_path / "out.pt"
    torch.save(load_mlp().state_dict(), ckpt)
    Plan([Step("l1_unstructured", "fc1.weight", amount=0.5)]).save(plan)
    real_close = zipfile.ZipFile.close
    pressed: list[bool] = []

    def close_with_ctrl_c(self):
        if not pressed:
            pressed.append(True)
            real_close(self)
            raise KeyboardInterrupt  # Ctrl-C lands while the archive closes
        real_close(self)

    monkeypatch.setattr(zipfile.ZipFile, "close", close_with_ctrl_c)
    code = cli.main(["apply", str(ckpt), str(plan), "-o", str(out)])
    err = capsys.readouterr().err
    assert pressed
    assert (code, err) == (130, "prune-explorer apply: interrupted\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mlp.pt", "plan.json"]
