"""The README's launch command, for real: ``prune-explorer lab`` brings up JupyterLab.

Starts the installed console script as a subprocess (``--no-browser``, a free port, a scratch
folder), reads the token from the URL JupyterLab prints, checks the quickstart notebook is
served by the contents API, that requests without the token are refused and that the server
listens on 127.0.0.1 only, that the CLI process has become JupyterLab (``os.execv``: same PID,
no child left in between), then stops it by that PID and checks the server went away.
"""

from __future__ import annotations

import json
import socket
import sys
import time
from pathlib import Path

import pytest

from helpers.browser import children_of, http_status, pid_alive, start_lab
from prune_explorer.cli import bundled_notebooks

nbformat = pytest.importorskip("nbformat")  # optional: absent on a bare torch machine

pytestmark = pytest.mark.slow


@pytest.fixture
def lab(tmp_path):
    server = start_lab(tmp_path / "work", tmp_path)
    yield server
    server.stop()


def refused(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(3)
        try:
            sock.connect((host, port))
        except OSError:
            return True
    return False


def test_lab_serves_the_quickstart_behind_a_token(lab):
    bundled = bundled_notebooks()
    assert sorted(p.name for p in lab.workdir.glob("*.ipynb")) == sorted(bundled)
    assert "01_quickstart.ipynb: copied" in lab.log()
    assert lab.printed_url.startswith(
        f"http://127.0.0.1:{lab.port}/lab/tree/01_quickstart.ipynb?token="
    )
    assert len(lab.token) >= 32

    status, _, body = http_status(lab.url("/api/contents/01_quickstart.ipynb"))
    assert status == 200
    served = json.loads(body)
    assert (served["name"], served["type"]) == ("01_quickstart.ipynb", "notebook")
    expected = nbformat.reads(bundled["01_quickstart.ipynb"].decode("utf-8"), as_version=4)
    assert [c["source"] for c in served["content"]["cells"]] == [c.source for c in expected.cells]

    status, _, _ = http_status(lab.url("/api/contents/01_quickstart.ipynb", token=False))
    assert status == 403
    status, _, _ = http_status(f"{lab.base}/api/contents/01_quickstart.ipynb?token={'0' * 48}")
    assert status == 403
    status, headers, _ = http_status(lab.url("/lab/tree/01_quickstart.ipynb", token=False))
    assert status == 302
    assert "/login" in headers["Location"]

    if sys.platform.startswith("linux"):  # all of 127/8 is loopback there; bound to .1 only
        assert refused("127.0.0.2", lab.port)


def cmdline(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_stopping_the_cli_stops_jupyterlab(lab):
    # The CLI replaced itself with JupyterLab: the PID we started serves the port and runs
    # `python -m jupyterlab`; there is no intermediate process to forward signals.
    assert cmdline(lab.proc.pid)[1:3] == ["-m", "jupyterlab"]
    assert "--ServerApp.ip=127.0.0.1" in cmdline(lab.proc.pid)
    assert not any("prune-explorer" in " ".join(cmdline(pid)) for pid in children_of(lab.proc.pid))
    assert lab.stop() == 0
    assert not pid_alive(lab.proc.pid)
    deadline = time.monotonic() + 20
    while not refused("127.0.0.1", lab.port) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert refused("127.0.0.1", lab.port)
