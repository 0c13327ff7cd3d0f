"""How ``prune-explorer`` writes its outputs (``-o``, ``--csv``): never over a device, a FIFO,
a symlink or one of its own inputs, and never leaving a temporary file behind.

Regular files and new paths are replaced atomically (a symlink's target, keeping the link);
character devices, FIFOs and standard output are written through; an output that is an input
is refused; Ctrl-C and SIGTERM during a write leave the old file and no temporary file.
"""

from __future__ import annotations

import io
import os
import signal
import socket
import stat
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
import torch

from helpers import REPO
from prune_explorer import cli
from prune_explorer.demo import load_mlp
from prune_explorer.session import Plan, Step
from prune_explorer.session.analysis.frames import REPORT_COLUMNS

SRC = REPO / "src"


def run(capsys, *argv: object) -> tuple[int, str, str]:
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def files_in(folder: Path) -> dict[str, bytes]:
    """Every entry of ``folder``, hidden ones included; symlinks and special files by kind."""
    found: dict[str, bytes] = {}
    for entry in folder.iterdir():
        if entry.is_symlink():
            found[entry.name] = b"-> " + os.readlink(entry).encode()
        elif entry.is_file():
            found[entry.name] = entry.read_bytes()
        else:
            found[entry.name] = f"<{stat.filemode(entry.lstat().st_mode)}>".encode()
    return found


def assert_refused(capsys, folder: Path, argv: list[object], *needles: str) -> None:
    before = files_in(folder)
    code, _, err = run(capsys, *argv)
    assert code == 1, err
    assert err.startswith(f"prune-explorer {argv[0]}: error: ")
    assert err.count("\n") == 1
    for needle in needles:
        assert needle in err
    assert files_in(folder) == before


@pytest.fixture
def ckpt(tmp_path: Path) -> Path:
    path = tmp_path / "mlp.pt"
    torch.save(load_mlp().state_dict(), path)
    return path


@pytest.fixture
def plan(tmp_path: Path) -> Path:
    path = tmp_path / "plan.json"
    Plan([Step("l1_unstructured", "fc1.weight", amount=0.5)]).save(path)
    return path


def expected_csv_columns(data: bytes) -> list[str]:
    return list(pd.read_csv(io.BytesIO(data), keep_default_na=False).columns)


# -- special files: written through, never replaced ---------------------------------------------
@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0,
                    reason="as root a regression would replace the system's /dev/null; "
                    "the device node test below covers root")
def test_dev_null_stays_a_character_device(capsys, ckpt, plan):
    assert run(capsys, "apply", ckpt, plan, "-o", "/dev/null")[0] == 0
    assert run(capsys, "report", ckpt, "--csv", "/dev/null")[0] == 0
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    assert not any(p.name.startswith(".null.") for p in Path("/dev").iterdir())


def test_a_character_device_node_is_written_through(capsys, tmp_path, ckpt, plan):
    node = tmp_path / "devnull"
    try:
        os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # another /dev/null node
        with open(node, "wb") as probe:
            probe.write(b"")
    except OSError as exc:  # not root, or a filesystem mounted nodev
        pytest.skip(f"cannot make a usable character device here ({exc.strerror})")
    assert run(capsys, "apply", ckpt, plan, "-o", node)[0] == 0
    assert stat.S_ISCHR(node.lstat().st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["devnull", "mlp.pt", "plan.json"]


def test_a_fifo_receives_the_csv_and_stays_a_fifo(capsys, tmp_path, ckpt):
    fifo = tmp_path / "report.fifo"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()
    assert run(capsys, "report", ckpt, "--csv", fifo)[0] == 0
    reader.join(timeout=30)
    assert expected_csv_columns(received[0]) == REPORT_COLUMNS
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


def test_a_symlink_output_replaces_its_target_and_stays_a_link(capsys, tmp_path, ckpt):
    target = tmp_path / "real.csv"
    target.write_bytes(b"old")
    target.chmod(0o600)
    link = tmp_path / "link.csv"
    link.symlink_to(target.name)
    assert run(capsys, "report", ckpt, "--csv", link)[0] == 0
    assert link.is_symlink()
    assert os.readlink(link) == "real.csv"
    assert expected_csv_columns(target.read_bytes()) == REPORT_COLUMNS
    assert stat.S_IMODE(target.stat().st_mode) == 0o600  # the replaced file keeps its mode
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.csv", "mlp.pt", "real.csv"]


def test_a_dangling_symlink_output_creates_its_target(capsys, tmp_path, ckpt):
    (tmp_path / "sub").mkdir()
    link = tmp_path / "link.csv"
    link.symlink_to(tmp_path / "sub" / "new.csv")
    assert run(capsys, "report", ckpt, "--csv", link)[0] == 0
    assert link.is_symlink()
    assert expected_csv_columns((tmp_path / "sub" / "new.csv").read_bytes()) == REPORT_COLUMNS


def test_a_socket_is_refused(capsys, tmp_path, ckpt):
    path = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(path))
        assert_refused(capsys, tmp_path, ["report", ckpt, "--csv", path], "--csv",
                       "must be a regular file", "socket")


# -- outputs that are inputs ---------------------------------------------------------------------
def test_report_refuses_to_write_the_csv_over_its_checkpoint(capsys, tmp_path, ckpt, plan):
    assert_refused(capsys, tmp_path, ["report", ckpt, "--csv", ckpt],
                   f"--csv {str(ckpt)!r} is the same file as CHECKPOINT", "refusing")
    assert_refused(capsys, tmp_path, ["report", ckpt, "--plan", plan, "--csv", plan],
                   "is the same file as --plan")


def test_apply_refuses_to_write_over_its_plan_or_checkpoint(capsys, tmp_path, ckpt, plan):
    assert_refused(capsys, tmp_path, ["apply", ckpt, plan, "-o", plan],
                   f"-o/--output {str(plan)!r} is the same file as PLAN")
    assert_refused(capsys, tmp_path, ["apply", ckpt, plan, "-o", ckpt],
                   "is the same file as CHECKPOINT")


def test_links_to_an_input_are_refused(capsys, tmp_path, ckpt, plan):
    (tmp_path / "soft.pt").symlink_to(ckpt)
    os.link(ckpt, tmp_path / "hard.pt")
    for alias in ("soft.pt", "hard.pt"):
        assert_refused(capsys, tmp_path, ["apply", ckpt, plan, "-o", tmp_path / alias],
                       "is the same file as CHECKPOINT")


# -- standard output -----------------------------------------------------------------------------
def test_csv_to_stdout_is_the_csv_alone(capsysbinary, ckpt):
    assert cli.main(["report", str(ckpt), "--csv", "-"]) == 0
    out, err = capsysbinary.readouterr()
    assert expected_csv_columns(out) == REPORT_COLUMNS
    assert b"TOTAL" in err  # the table went to stderr


def test_checkpoint_to_stdout(capsysbinary, ckpt, plan):
    assert cli.main(["apply", str(ckpt), str(plan), "-o", "-"]) == 0
    out, err = capsysbinary.readouterr()
    saved = torch.load(io.BytesIO(out), weights_only=True)
    assert int((saved["fc1.weight_mask"] == 0).sum()) == 4096
    assert b"Applied 1 step" in err


def child_env() -> dict[str, str]:
    """This environment with the sources under test first on the path."""
    return {**os.environ,
            "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}


def run_cli_subprocess(argv: list[object], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "prune_explorer.cli", *map(str, argv)],
                          env=child_env(), timeout=300, check=False, **kwargs)


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/fd")
def test_stdout_redirected_to_a_file_writes_into_that_file(tmp_path, ckpt):
    # /proc/self/fd/1 is what /dev/stdout links to; named directly so that a regression cannot
    # replace the system's /dev/stdout link when the tests run as root.
    log = tmp_path / "log.txt"
    with open(log, "wb") as file:
        inode = os.fstat(file.fileno()).st_ino
        done = run_cli_subprocess(["report", ckpt, "--csv", "/proc/self/fd/1"], stdout=file,
                                  stderr=subprocess.PIPE)
    assert done.returncode == 0, done.stderr
    assert log.stat().st_ino == inode  # the shell's file, not a new one renamed over it
    assert expected_csv_columns(log.read_bytes()) == REPORT_COLUMNS
    assert b"TOTAL" in done.stderr


# -- interruptions -------------------------------------------------------------------------------
def test_ctrl_c_during_the_write_leaves_the_old_file_and_no_temporary(
    capsys, tmp_path, ckpt, plan, monkeypatch
):
    out = tmp_path / "out.pt"
    out.write_bytes(b"previous result")

    def interrupted(fd: int) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", interrupted)
    before = files_in(tmp_path)
    code, _, err = run(capsys, "apply", ckpt, plan, "-o", out)
    assert (code, err) == (130, "prune-explorer apply: interrupted\n")
    assert files_in(tmp_path) == before


SLOW_WRITE = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    from prune_explorer.cli import main

    def slow_fsync(fd):  # the temporary file is written; stay here until killed
        Path(sys.argv[1]).write_text("writing")
        time.sleep(120)

    os.fsync = slow_fsync
    sys.exit(main(sys.argv[2:]))
""")


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(signal, "SIGTERM") or os.name == "nt", reason="POSIX signals")
def test_sigterm_during_the_write_leaves_the_old_file_and_no_temporary(tmp_path, ckpt, plan):
    work = tmp_path / "work"
    work.mkdir()
    out = work / "out.pt"
    out.write_bytes(b"previous result")
    marker = tmp_path / "marker"
    proc = subprocess.Popen(
        [sys.executable, "-c", SLOW_WRITE, str(marker), "apply", str(ckpt), str(plan), "-o",
         str(out)],
        env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 240
        while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert marker.exists(), proc.communicate(timeout=60)
        assert any(p.name.startswith(".out.pt.") for p in work.iterdir())  # mid-write indeed
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert b"terminated by SIGTERM" in err
    assert files_in(work) == {"out.pt": b"previous result"}
