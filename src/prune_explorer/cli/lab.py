"""``prune-explorer lab``: copy the teaching notebooks and hand the process over to JupyterLab.

The notebooks are copied into a working folder, never over a copy you edited; then this
process *becomes* JupyterLab (``os.execv``), bound to 127.0.0.1 with Jupyter's own token
authentication. Ctrl-C, SIGTERM and SIGHUP therefore reach JupyterLab itself, which shuts its
kernels down; nothing is left in between to forward signals or to outlive the server.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import IO

from .errors import CLIError

__all__ = [
    "DEFAULT_LAB_DIR",
    "LOCALHOST",
    "QUICKSTART",
    "bundled_notebooks",
    "cmd_lab",
    "copy_notebooks",
    "exec_lab",
    "lab_command",
]

QUICKSTART = "01_quickstart.ipynb"
DEFAULT_LAB_DIR = "prune-explorer-notebooks"
LOCALHOST = "127.0.0.1"


def bundled_notebooks() -> dict[str, bytes]:
    """The notebooks shipped inside the package, file name -> contents, sorted by name.

    Examples
    --------
    >>> "01_quickstart.ipynb" in bundled_notebooks()
    True
    """
    folder = resources.files("prune_explorer") / "notebooks"
    found = {}
    if folder.is_dir():
        for item in folder.iterdir():
            if item.name.endswith(".ipynb") and item.is_file():
                found[item.name] = item.read_bytes()
    if QUICKSTART not in found:
        raise CLIError(
            f"the package has no bundled {QUICKSTART} in {folder}; reinstall prune-explorer "
            "(the notebooks are package data)"
        )
    return dict(sorted(found.items()))


def copy_notebooks(directory: str | os.PathLike[str]) -> dict[str, str]:
    """Copy the bundled notebooks into ``directory`` without overwriting anything.

    Parameters
    ----------
    directory : path
        Working folder; created (with parents) if missing.

    Returns
    -------
    dict of str to str
        File name -> ``"copied"`` (new file), ``"unchanged"`` (already identical) or
        ``"kept"`` (a different file of that name exists -- your edited copy -- and was left
        alone).

    Examples
    --------
    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> copy_notebooks(folder)["01_quickstart.ipynb"]
    'copied'
    >>> copy_notebooks(folder)["01_quickstart.ipynb"]
    'unchanged'
    """
    target = Path(directory)
    if target.exists() and not target.is_dir():
        raise CLIError(f"--dir must be a folder; {str(target)!r} is a file")
    notebooks = bundled_notebooks()
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CLIError(f"--dir: cannot create folder {str(target)!r} ({exc.strerror})") from None
    status = {}
    for name, data in notebooks.items():
        path = target / name
        try:
            with open(path, "xb") as file:  # exclusive create: an existing file is never replaced
                file.write(data)
            status[name] = "copied"
        except FileExistsError:
            try:
                same = path.is_file() and path.read_bytes() == data
            except OSError:
                same = False
            status[name] = "unchanged" if same else "kept"
        except OSError as exc:
            raise CLIError(f"--dir: cannot write {str(path)!r} ({exc.strerror})") from None
    return status


def lab_command(
    directory: str | os.PathLike[str], port: int | None = None, open_browser: bool = True
) -> list[str]:
    """The command that starts JupyterLab on ``directory`` with the quickstart notebook open.

    Bound to 127.0.0.1; the token Jupyter generates is left in place (it is printed in the
    URL JupyterLab shows). With an explicit ``port`` JupyterLab fails instead of silently
    moving to another port. As root, ``--allow-root`` is added (JupyterLab refuses to start
    otherwise).

    Examples
    --------
    >>> cmd = lab_command("notebooks", port=8899, open_browser=False)
    >>> "--ServerApp.ip=127.0.0.1" in cmd, "--ServerApp.port=8899" in cmd
    (True, True)
    >>> any("token" in part for part in cmd)
    False
    """
    root = Path(directory).resolve()
    cmd = [
        sys.executable,
        "-m",
        "jupyterlab",
        f"--ServerApp.ip={LOCALHOST}",
        f"--ServerApp.root_dir={root}",
        f"--LabApp.default_url=/lab/tree/{QUICKSTART}",
    ]
    if port is not None:
        cmd += [f"--ServerApp.port={port}", "--ServerApp.port_retries=0"]
    if not open_browser:
        cmd.append("--ServerApp.open_browser=False")
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")
    return cmd


def exec_lab(cmd: Sequence[str], cwd: Path) -> int:
    """Replace this process with ``cmd`` run in ``cwd`` (returns only where exec cannot be used).

    On POSIX ``os.execv`` keeps the PID, the terminal and the signals: stopping the
    ``prune-explorer`` process stops JupyterLab. Windows has no real exec (its ``os.execv``
    starts a new process and exits, detaching the console), so there JupyterLab runs as a child
    and its exit status is returned.
    """
    sys.stdout.flush()  # exec discards Python's buffers
    sys.stderr.flush()
    try:
        if os.name == "nt":
            return subprocess.call(list(cmd), cwd=cwd)
        os.chdir(cwd)  # kernels start in the notebook folder
        os.execv(cmd[0], list(cmd))
    except OSError as exc:
        raise CLIError(f"cannot start JupyterLab with {cmd[0]!r} ({exc.strerror})") from None
    raise AssertionError("unreachable: os.execv returns only by raising")  # pragma: no cover


def cmd_lab(args: argparse.Namespace, out: IO[str]) -> int:
    """Run ``prune-explorer lab`` (see the module docstring)."""
    if importlib.util.find_spec("jupyterlab") is None:
        raise CLIError(
            f"JupyterLab is not installed for {sys.executable}; install it with "
            "`pip install jupyterlab` (or reinstall prune-explorer, which depends on it)"
        )
    directory = Path(args.dir)
    status = copy_notebooks(directory)
    print(f"Notebooks in {directory.resolve()}:", file=out)
    notes = {
        "copied": "copied",
        "unchanged": "already there, unchanged",
        "kept": "kept your edited copy (delete it to get the bundled version back)",
    }
    for name, state in status.items():
        print(f"  {name}: {notes[state]}", file=out)
    cmd = lab_command(directory, args.port, open_browser=not args.no_browser)
    if "--allow-root" in cmd:
        print("Running as root: passing --allow-root to JupyterLab.", file=out)
    where = f"{LOCALHOST}:{args.port}" if args.port else LOCALHOST
    print(
        f"Starting JupyterLab on {where} with {QUICKSTART}. Open the http://{LOCALHOST} URL "
        "it prints below (it carries the access token); stop it with Ctrl-C.",
        file=out,
    )
    out.flush()
    return exec_lab(cmd, directory)
