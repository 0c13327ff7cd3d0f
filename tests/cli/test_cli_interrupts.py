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
import inspect
import random
import zipfile
from pathlib import Path
from typing import Any

import pytest
import torch

from helpers.interrupts import SOURCE, Interrupter
from prune_explorer import _files, cli
from prune_explorer.cli import files as cli_files
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


# -- the whole command: a Ctrl-C before it returns success leaves no output written -----------
MAIN = inspect.getsourcelines(cli.main)
MAIN_LINES = range(MAIN[1], MAIN[1] + len(MAIN[0]))
MAIN_FILE = inspect.getsourcefile(cli.main)


def _fake_command(args, out) -> int:
    """A command that writes the pair, then reports, as ``apply --shrink`` does (cheap)."""
    folder = Path(args.output).parent
    cli_files.write_pair([(folder / name, data, name) for name, data in NEW.items()], [])
    print("Wrote the pair", file=out)
    return 0


def _main_interrupted(folder: Path, n: int, then: int | None, capsys) -> tuple[Any, ...]:
    """(how main ended, the files, stderr) with Ctrl-C at line event ``n`` (then ``then``)."""
    with Interrupter(n, then=then) as interrupter:
        try:
            ended: Any = cli.main(["demo-checkpoint", str(folder / "small.pt")])
        except KeyboardInterrupt:
            if not interrupter.fired:
                raise
            ended = "raised"
    return interrupter, ended, _files_in(folder), capsys.readouterr().err


def _judge_main(interrupter: Interrupter, ended: Any, got: dict[str, bytes], err: str,
                old: dict[str, bytes], new: dict[str, bytes]) -> str | None:
    """None if the outcome is one of the allowed ones, else what is wrong."""
    if ended == 130:
        return None if got == old and err.endswith(": interrupted\n") else "130, files new"
    if ended == 0:
        if got != new:
            return "0, files old"
        late = "came after the outputs were complete; they are kept" in err
        return None if late or not interrupter.fired else "0 after a Ctrl-C, no note"
    if ended == "raised":  # escaped main: only after the outputs became final, in main's tail
        # or in its caller once it returned (the instant every program has before it exits)
        where = interrupter.where_again or interrupter.where
        file, line = where.rsplit(":", 1)
        after = (file == MAIN_FILE and int(line) in MAIN_LINES) or not file.startswith(SOURCE)
        if got == old or (got == new and after):
            return None
        return f"raised at {where} with the files new"
    return f"ended {ended!r}"


@pytest.mark.slow
@pytest.mark.parametrize("existing", [True, False], ids=["old-pair", "new-paths"])
def test_ctrl_c_anywhere_in_a_command_ends_it_with_130_and_no_output_written(
        tmp_path, monkeypatch, capsys, existing):
    monkeypatch.setitem(cli._COMMANDS, "demo-checkpoint", _fake_command)
    old = dict(OLD) if existing else {}

    def fresh(name: str) -> Path:
        folder = tmp_path / name
        folder.mkdir()
        for file, data in old.items():
            (folder / file).write_bytes(data)
        return folder

    counted, ended, got, _ = _main_interrupted(fresh("count"), 0, None, capsys)
    assert (ended, got) == (0, NEW)
    functions = counted.functions
    # the points the issue names are among them: after the last rename, and the clean-up
    assert "_write_all" in functions
    assert "Provisional.commit" in functions
    problems = []
    for n in range(1, counted.count + 1):
        for then in (None, 1, 3):  # and a second Ctrl-C on the way out
            interrupter, ended, got, err = _main_interrupted(fresh(f"{n}-{then}"), n, then,
                                                             capsys)
            wrong = _judge_main(interrupter, ended, got, err, old, NEW)
            if wrong:
                problems.append((n, then, functions[n - 1], interrupter.where, wrong))
    assert not problems, f"{len(problems)} of {counted.count * 3} points: {problems[:6]}"


def test_a_ctrl_c_after_the_last_rename_puts_the_old_pair_back_and_exits_130(
        tmp_path, monkeypatch, capsys):
    # the window of must-hold 3: the pair is in place, the command has not returned yet
    for name, data in OLD.items():
        (tmp_path / name).write_bytes(data)

    def write_then_ctrl_c(args, out):
        _fake_command(args, out)
        assert {name: (tmp_path / name).read_bytes() for name in NEW} == NEW  # written
        raise KeyboardInterrupt  # Ctrl-C as the command prints its summary

    monkeypatch.setitem(cli._COMMANDS, "demo-checkpoint", write_then_ctrl_c)
    code = cli.main(["demo-checkpoint", str(tmp_path / "small.pt")])
    assert (code, capsys.readouterr().err) == (130, "prune-explorer demo-checkpoint: "
                                                    "interrupted\n")
    assert _files_in(tmp_path) == OLD


def test_a_failing_status_puts_the_old_files_back(tmp_path, monkeypatch):
    (tmp_path / "small.pt").write_bytes(OLD["small.pt"])

    def write_then_fail(args, out):
        _fake_command(args, out)
        return 1

    monkeypatch.setitem(cli._COMMANDS, "demo-checkpoint", write_then_fail)
    assert cli.main(["demo-checkpoint", str(tmp_path / "small.pt")]) == 1
    assert _files_in(tmp_path) == {"small.pt": OLD["small.pt"]}


@pytest.mark.slow
def test_ctrl_c_at_the_end_of_apply_shrink_leaves_the_pair_old_or_the_command_done(
        tmp_path, capsys):
    # the real command, at its last line events (the renames, the summary, the clean-up)
    def fresh(name: str) -> tuple[Path, list[str]]:
        folder = tmp_path / name
        folder.mkdir()
        torch.save(load_mlp().state_dict(), folder / "mlp.pt")
        Plan([Step("ln_structured", "fc1.weight", amount=0.25, n=1, dim=0)]).save(
            folder / "plan.json")
        (folder / "out.pt").write_bytes(b"old state_dict")
        (folder / "out.pt.shrunk.json").write_bytes(b"old description")
        return folder, ["apply", str(folder / "mlp.pt"), str(folder / "plan.json"), "-o",
                        str(folder / "out.pt"), "--shrink"]

    def outputs(folder: Path) -> dict[str, bytes]:
        return {k: v for k, v in _files_in(folder).items() if k not in ("mlp.pt", "plan.json")}

    folder, argv = fresh("count")
    old = outputs(folder)
    with Interrupter(0) as counted:
        assert cli.main(argv) == 0
    new = outputs(folder)
    capsys.readouterr()
    functions = counted.functions
    last_rename = max(i for i, f in enumerate(functions) if f == "_replace_all") + 1
    cleanup = [i + 1 for i, f in enumerate(functions) if f == "Provisional.commit"]
    chosen = sorted({last_rename, last_rename + 1, cleanup[0], cleanup[-1], counted.count,
                     *random.Random(36).sample(range(last_rename, counted.count + 1), 3)})
    problems = []
    for n in chosen:
        folder, argv = fresh(f"p{n}")
        with Interrupter(n) as interrupter:
            try:
                ended: Any = cli.main(argv)
            except KeyboardInterrupt:
                ended = "raised"
        wrong = _judge_main(interrupter, ended, outputs(folder), capsys.readouterr().err,
                            old, new)
        if wrong:
            problems.append((n, functions[n - 1], interrupter.where, wrong))
    assert not problems, problems
