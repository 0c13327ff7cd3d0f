"""``prune-explorer lab``: copy the teaching notebooks and hand the process over to JupyterLab.

The notebooks are copied into a working folder, never over a copy you edited; then this
process *becomes* JupyterLab (``os.execv``), bound to 127.0.0.1 (or ``--ip``) with Jupyter's own
token authentication; off the loopback interface that authentication is mandatory
(:mod:`.lab_auth`). Ctrl-C, SIGTERM and SIGHUP therefore reach JupyterLab itself, which shuts its
kernels down; nothing is left in between to forward signals or to outlive the server.
"""

from __future__ import annotations

import argparse
import importlib.util
import ipaddress
import json
import os
import re
import subprocess
import sys
from collections.abc import MutableMapping, Sequence
from importlib import resources
from pathlib import Path
from typing import IO

from .errors import CLIError

__all__ = [
    "AUTH_REQUIRED",
    "DEFAULT_LAB_DIR",
    "LOCALHOST",
    "QUICKSTART",
    "add_command",
    "bundled_notebooks",
    "cmd_lab",
    "copy_notebooks",
    "exec_lab",
    "is_loopback",
    "lab_command",
    "quiet_news",
]

QUICKSTART = "01_quickstart.ipynb"
DEFAULT_LAB_DIR = "prune-explorer-notebooks"
LOCALHOST = "127.0.0.1"
#: JupyterLab's identity provider off loopback: token or password login, or no start at all.
AUTH_REQUIRED = "prune_explorer.cli.lab_auth.AuthRequiredIdentityProvider"


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an IP address or ``localhost``) names this machine's loopback interface.

    Any other name -- another host name, ``0.0.0.0`` (all interfaces), a LAN address -- counts
    as reachable from the network.

    Examples
    --------
    >>> is_loopback("127.0.0.1"), is_loopback("::1"), is_loopback("localhost")
    (True, True, True)
    >>> is_loopback("0.0.0.0"), is_loopback("192.168.1.20"), is_loopback("lab.example.org")
    (False, False, False)
    """
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


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
    directory: str | os.PathLike[str],
    port: int | None = None,
    open_browser: bool = True,
    ip: str = LOCALHOST,
) -> list[str]:
    """The command that starts JupyterLab on ``directory`` with the quickstart notebook open.

    Bound to ``ip`` (127.0.0.1 by default); the token Jupyter generates is left in place (it is
    printed in the URL JupyterLab shows) and never appears on the command line. Off loopback
    the identity provider is :data:`AUTH_REQUIRED`, so JupyterLab refuses to start if a config
    file switched the token off and no password is set. With an explicit ``port`` JupyterLab
    fails instead of silently moving to another port. As root, ``--allow-root`` is added
    (JupyterLab refuses to start otherwise).

    Examples
    --------
    >>> cmd = lab_command("notebooks", port=8899, open_browser=False)
    >>> "--ServerApp.ip=127.0.0.1" in cmd, "--ServerApp.port=8899" in cmd
    (True, True)
    >>> any("token" in part for part in cmd)
    False
    >>> f"--ServerApp.identity_provider_class={AUTH_REQUIRED}" in lab_command("nb", ip="0.0.0.0")
    True
    """
    root = Path(directory).resolve()
    cmd = [
        sys.executable,
        "-m",
        "jupyterlab",
        f"--ServerApp.ip={ip}",
        f"--ServerApp.root_dir={root}",
        f"--LabApp.default_url=/lab/tree/{QUICKSTART}",
    ]
    if not is_loopback(ip):
        cmd.append(f"--ServerApp.identity_provider_class={AUTH_REQUIRED}")
    if port is not None:
        cmd += [f"--ServerApp.port={port}", "--ServerApp.port_retries=0"]
    if not open_browser:
        cmd.append("--ServerApp.open_browser=False")
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")
    return cmd


#: JupyterLab settings the lab command gives as defaults: no "Would you like to get notified
#: about official Jupyter news?" toast over the quickstart (your own settings still win).
LAB_DEFAULTS = {"@jupyterlab/apputils-extension:notification": {"fetchNews": "false"}}


def quiet_news(directory: str | os.PathLike[str], env: MutableMapping[str, str]) -> Path:
    """Write :data:`LAB_DEFAULTS` as ``default_setting_overrides.json`` into a config folder
    of its own under ``directory`` and put that folder first on ``env["JUPYTER_CONFIG_PATH"]``,
    so JupyterLab started with ``env`` opens without the news pop-up. Your global Jupyter
    settings and config are neither read nor written. Returns the config folder.

    Examples
    --------
    >>> import json, tempfile
    >>> env = {}
    >>> folder = quiet_news(tempfile.mkdtemp(), env)
    >>> env["JUPYTER_CONFIG_PATH"] == str(folder)
    True
    >>> json.loads((folder / "labconfig" / "default_setting_overrides.json").read_text())
    {'@jupyterlab/apputils-extension:notification': {'fetchNews': 'false'}}
    """
    folder = Path(directory).resolve() / ".jupyter-config"
    labconfig = folder / "labconfig"
    try:
        labconfig.mkdir(parents=True, exist_ok=True)
        (labconfig / "default_setting_overrides.json").write_text(
            json.dumps(LAB_DEFAULTS, indent=1) + "\n", encoding="utf-8")
    except OSError as exc:
        raise CLIError(f"--dir: cannot write {str(labconfig)!r} ({exc.strerror})") from None
    old = env.get("JUPYTER_CONFIG_PATH")
    env["JUPYTER_CONFIG_PATH"] = str(folder) + (os.pathsep + old if old else "")
    return folder


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
    quiet_news(directory, os.environ)  # the exec'd JupyterLab inherits the environment
    ip = getattr(args, "ip", LOCALHOST)
    cmd = lab_command(directory, args.port, open_browser=not args.no_browser, ip=ip)
    if "--allow-root" in cmd:
        print("Running as root: passing --allow-root to JupyterLab.", file=out)
    where = f"{ip}:{args.port}" if args.port else ip
    if not is_loopback(ip):
        print(
            f"Serving on {ip}, reachable from the network: JupyterLab will require its token "
            "(or your password) and refuse to start without one. The connection is not "
            "encrypted; use it on a network you trust.",
            file=out,
        )
    print(
        f"Starting JupyterLab on {where} with {QUICKSTART}. Open the URL it prints below (it "
        "carries the access token); stop it with Ctrl-C.",
        file=out,
    )
    out.flush()
    return exec_lab(cmd, directory)


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer in [1, 65535]; got {text!r}") \
            from None
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be an integer in [1, 65535]; got {value}")
    return value


_HOST = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$")


def _ip(text: str) -> str:
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        pass
    if not _HOST.match(text):
        raise argparse.ArgumentTypeError(
            "must be an IP address (127.0.0.1, 0.0.0.0 for every interface, 192.168.1.20) or a "
            f"host name; got {text!r}"
        )
    return text


def add_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Declare ``lab`` and its arguments on the parser's ``commands``."""
    lab = commands.add_parser(
        "lab",
        help="open the teaching notebooks in JupyterLab",
        description="Copy the bundled notebooks into a working folder (never over an edited "
        "copy) and start JupyterLab on the quickstart notebook, on 127.0.0.1 (or --ip) with "
        "token authentication.",
    )
    lab.add_argument("--dir", default=DEFAULT_LAB_DIR,
                     help=f"working folder for the notebooks (default: ./{DEFAULT_LAB_DIR})")
    lab.add_argument("--port", type=_port, default=None,
                     help="port to serve on (default: JupyterLab's, 8888 or the next free one)")
    lab.add_argument("--no-browser", action="store_true", help="do not open a web browser")
    lab.add_argument("--ip", type=_ip, default=LOCALHOST, metavar="ADDRESS",
                     help="address to listen on (default: 127.0.0.1, this machine only); e.g. "
                     "0.0.0.0 for a classroom. Off loopback JupyterLab requires its token or a "
                     "password and refuses to start with authentication disabled")
