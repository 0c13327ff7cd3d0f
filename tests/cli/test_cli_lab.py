"""``prune-explorer lab`` set-up: the working folder stays out of git, ``--ip`` and its refusal.

No server is started here; the refusal is checked on Jupyter's own identity provider, called the
way JupyterLab calls it before it binds a port.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from helpers import REPO
from prune_explorer import cli
from prune_explorer.cli.lab import AUTH_REQUIRED, is_loopback

REPO = REPO
PROVIDER_OPTION = f"--ServerApp.identity_provider_class={AUTH_REQUIRED}"


@pytest.fixture
def launched(monkeypatch):
    calls = []
    monkeypatch.setattr(cli.lab, "exec_lab", lambda cmd, cwd: calls.append(list(cmd)) or 0)
    return calls


def git(folder: Path, *args: str) -> str:
    done = subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=folder,
                          capture_output=True, text=True, check=True, timeout=60)
    return done.stdout


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_lab_in_a_checkout_leaves_git_status_clean(tmp_path, monkeypatch, launched):
    # `./dev lab` run from the repository root: the copied notebooks must not show up as
    # untracked files (they are ignored, as the user's working copies).
    git(tmp_path, "init", "-q")
    shutil.copy(REPO / ".gitignore", tmp_path / ".gitignore")
    git(tmp_path, "add", ".gitignore")
    git(tmp_path, "commit", "-q", "-m", "ignore")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["lab", "--no-browser"]) == 0
    assert (tmp_path / cli.DEFAULT_LAB_DIR / cli.QUICKSTART).is_file()
    assert git(tmp_path, "status", "--porcelain", "--untracked-files=all") == ""
    assert len(launched) == 1


@pytest.mark.parametrize(
    ("host", "local"),
    [("127.0.0.1", True), ("127.3.4.5", True), ("::1", True), ("localhost", True),
     ("LOCALHOST", True), ("0.0.0.0", False), ("::", False), ("192.168.1.20", False),
     ("10.0.0.1", False), ("lab.example.org", False), ("", False)],
)
def test_is_loopback(host, local):
    assert is_loopback(host) is local


def test_lab_ip_on_the_command_line(capsys, tmp_path, launched):
    assert cli.main(["lab", "--dir", str(tmp_path / "w"), "--ip", "0.0.0.0", "--no-browser"]) == 0
    out = capsys.readouterr().out
    [cmd] = launched
    assert "--ServerApp.ip=0.0.0.0" in cmd
    assert "--ServerApp.ip=127.0.0.1" not in cmd
    assert PROVIDER_OPTION in cmd
    # the token is Jupyter's own: never on the command line (other users can read it there)
    assert not [part for part in cmd if "token" in part.lower() or "password" in part.lower()]
    assert "reachable from the network" in out
    assert "require its token" in out


@pytest.mark.parametrize("ip", ["127.0.0.1", "localhost", "::1"])
def test_lab_loopback_ip_keeps_jupyters_own_provider(tmp_path, launched, ip):
    assert cli.main(["lab", "--dir", str(tmp_path / "w"), "--ip", ip]) == 0
    [cmd] = launched
    assert f"--ServerApp.ip={ip}" in cmd
    assert not [part for part in cmd if "identity_provider" in part]


@pytest.mark.parametrize("bad", ["*", "", "a b", "host;rm", "-x.org"])
def test_lab_bad_ip_is_a_usage_error(capsys, tmp_path, launched, bad):
    assert cli.main(["lab", "--dir", str(tmp_path / "w"), f"--ip={bad}"]) == 2
    err = capsys.readouterr().err
    assert "argument --ip: must be an IP address" in err
    assert repr(bad) in err
    assert launched == []


# -- the refusal, as JupyterLab runs it (validate_security, before binding) --------------------
def provider(**settings):
    from prune_explorer.cli.lab_auth import AuthRequiredIdentityProvider

    return AuthRequiredIdentityProvider(log=logging.getLogger("test_cli_lab"), **settings)


def app(ip: str) -> SimpleNamespace:
    return SimpleNamespace(ip=ip, log=logging.getLogger("test_cli_lab"))


@pytest.mark.parametrize("ip", ["0.0.0.0", "", "192.168.1.20", "lab.example.org"])
def test_non_local_address_without_token_or_password_is_refused(ip, caplog):
    with pytest.raises(SystemExit) as stop:
        provider(token="").validate_security(app(ip))
    assert stop.value.code == 1
    assert "refusing to serve a non-local address with authentication disabled" in caplog.text


@pytest.mark.parametrize("ip", ["0.0.0.0", "192.168.1.20"])
def test_non_local_address_with_token_or_password_starts(ip):
    from jupyter_server.auth.security import passwd

    provider(token="a" * 48).validate_security(app(ip))
    provider(token="", hashed_password=passwd("secret")).validate_security(app(ip))
    generated = provider()  # nothing configured: Jupyter generates a token
    assert generated.token
    assert generated.token_generated
    generated.validate_security(app(ip))


def test_loopback_keeps_jupyters_choice():
    provider(token="").validate_security(app("127.0.0.1"))  # only Jupyter's warning


def test_an_empty_token_from_config_reaches_the_check():
    # The provider reads the same config sections as Jupyter's (by class hierarchy), so an
    # empty token set in a config file reaches the check rather than slipping past it.
    from traitlets.config import Config

    config = Config()
    config.IdentityProvider.token = ""
    with pytest.raises(SystemExit):
        provider(config=config).validate_security(app("0.0.0.0"))


def test_the_provider_is_importable_by_the_name_on_the_command_line():
    module, _, name = AUTH_REQUIRED.rpartition(".")
    done = subprocess.run([sys.executable, "-c", f"from {module} import {name}"],
                          capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(REPO / "src"), "PATH": ""})
    assert done.returncode == 0, done.stderr


@pytest.mark.slow
def test_jupyterlab_refuses_before_binding(tmp_path):
    # The real server, with a config file that switches the token off, asked for 192.0.2.1
    # (TEST-NET-1: documentation only, never an address of this machine, so nothing can be
    # bound even if the check failed). It must stop with our message, not a bind error.
    config = tmp_path / "config"
    config.mkdir()
    (config / "jupyter_server_config.py").write_text(
        "c.IdentityProvider.token = ''\n", encoding="utf-8")
    env = {
        "PATH": str(Path(sys.executable).parent),
        "PYTHONPATH": str(REPO / "src"),
        "HOME": str(tmp_path),
        "JUPYTER_CONFIG_DIR": str(config),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
        "JUPYTER_TOKEN": "",
    }
    cmd = cli.lab_command(tmp_path, port=9, open_browser=False, ip="192.0.2.1")
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 1, done.stderr[-3000:]
    assert "refusing to serve a non-local address with authentication disabled" in done.stderr
    assert "Cannot assign requested address" not in done.stderr
