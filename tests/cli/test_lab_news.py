"""``prune-explorer lab`` opens JupyterLab without the "official Jupyter news" pop-up.

The lab command layers one default setting (``fetchNews: "false"``) through a config folder of
its own on ``JUPYTER_CONFIG_PATH``; the user's global Jupyter settings are never written.
"""

from __future__ import annotations

import argparse
import io
import json
import os

import pytest

from prune_explorer import cli
from prune_explorer.cli.lab import LAB_DEFAULTS, quiet_news


def test_quiet_news_writes_a_default_that_jupyterlab_reads(tmp_path, monkeypatch):
    settings_utils = pytest.importorskip("jupyterlab_server.settings_utils")
    env: dict[str, str] = {"JUPYTER_CONFIG_PATH": "/somewhere/else"}
    folder = quiet_news(tmp_path, env)
    assert env["JUPYTER_CONFIG_PATH"] == f"{folder}{os.pathsep}/somewhere/else"
    monkeypatch.setenv("JUPYTER_CONFIG_PATH", env["JUPYTER_CONFIG_PATH"])
    overrides, error = settings_utils._get_overrides(str(tmp_path / "no-app-settings"))
    assert not error
    assert overrides["@jupyterlab/apputils-extension:notification"] == {"fetchNews": "false"}


def test_cmd_lab_hands_the_quiet_config_to_jupyterlab(tmp_path, monkeypatch):
    seen = {}

    def fake_exec(cmd, cwd):
        seen["path"] = os.environ.get("JUPYTER_CONFIG_PATH", "")
        return 0

    monkeypatch.setattr(cli.lab, "exec_lab", fake_exec)
    monkeypatch.delenv("JUPYTER_CONFIG_PATH", raising=False)
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    args = argparse.Namespace(dir=str(tmp_path / "nb"), port=None, no_browser=True)
    assert cli.lab.cmd_lab(args, io.StringIO()) == 0
    first = seen["path"].split(os.pathsep)[0]
    written = json.loads((tmp_path / "nb" / ".jupyter-config" / "labconfig" /
                          "default_setting_overrides.json").read_text())
    assert first == str((tmp_path / "nb" / ".jupyter-config").resolve())
    assert written == LAB_DEFAULTS
    assert not home.exists()  # nothing written to the user's own settings
