"""Helpers for the launch and real-browser tests (imported explicitly; not a conftest).

Server side (no browser needed): start ``prune-explorer lab --no-browser`` on a free port of
127.0.0.1 in a scratch folder, read the token from the URL JupyterLab prints, wait until the
server answers, and stop it by its own PID (SIGTERM: the CLI has exec'd JupyterLab, which
receives it and shuts its kernels down).

Browser side (Playwright, imported lazily): Debian's ``/usr/bin/chromium`` in headless mode,
with every request that is not to localhost aborted, so nothing depends on the network. The
recipe is the one in the project's BROWSER_TESTING notes.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helpers import REPO

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
NON_LOCAL = re.compile(r"^(?!(https?|wss?)://(127\.0\.0\.1|localhost)[:/]).*")
URL_IN_LOG = re.compile(r"http://127\.0\.0\.1:(\d+)/\S*[?&]token=([0-9a-f]+)")
SHOT_DIR = Path(os.environ.get("SHOT_DIR", REPO
                               / "test-artifacts"))
#: How long a browser test waits for what the page shows before it fails: generous, so a machine
#: busy with other work (a loaded CI runner) slows the test down instead of failing it. Every
#: wait is on the page's state (a locator's ``expect``, :func:`wait_for`), never a fixed time.
WAIT_MS = 120_000
WAIT_S = WAIT_MS / 1000


def console_script() -> str:
    """Path of the installed ``prune-explorer`` script (next to this Python, or on PATH)."""
    beside = Path(sys.executable).with_name("prune-explorer")
    if beside.exists():
        return str(beside)
    found = shutil.which("prune-explorer")
    if found is None:
        raise RuntimeError("the prune-explorer console script is not installed (pip install -e .)")
    return found


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def quiet_lab_config(folder: Path) -> Path:
    """A JUPYTER_CONFIG_DIR whose page config hides the "Jupyter news" toast."""
    labconfig = folder / "labconfig"
    labconfig.mkdir(parents=True, exist_ok=True)
    disabled = {"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}}
    (labconfig / "page_config.json").write_text(json.dumps(disabled), encoding="utf-8")
    return folder


def http_status(url: str, timeout: float = 5.0) -> tuple[int, dict[str, str], bytes]:
    """GET ``url`` without following redirects; returns (status, headers, body)."""

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any, **kwargs: Any) -> None:
            return None

    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(url, timeout=timeout) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), err.read()


@dataclass
class LabServer:
    """A running ``prune-explorer lab`` process and what the tests need to talk to it."""

    proc: subprocess.Popen[bytes]
    port: int
    workdir: Path
    log_path: Path
    started: float
    token: str = ""
    ready_s: float = 0.0
    printed_url: str = ""
    _log: Any = field(default=None, repr=False)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str, token: bool = True) -> str:
        sep = "&" if "?" in path else "?"
        return f"{self.base}{path}{sep}token={self.token}" if token else f"{self.base}{path}"

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM to the CLI's own PID (JupyterLab since the exec); wait for it to exit."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        if self._log is not None:
            self._log.close()
        return int(self.proc.returncode)


def start_lab(
    workdir: Path, scratch: Path, *, timeout: float = 90.0, config_dir: Path | None = None
) -> LabServer:
    """Run ``prune-explorer lab --no-browser --port P --dir workdir``; wait until it answers."""
    port = free_port()
    log_path = scratch / f"lab-{port}.log"
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env.pop("JUPYTER_TOKEN", None)  # the token must come from JupyterLab itself
    if config_dir is not None:
        env["JUPYTER_CONFIG_DIR"] = str(config_dir)
    log = open(log_path, "wb")  # noqa: SIM115 -- closed by LabServer.stop
    started = time.monotonic()
    proc = subprocess.Popen(
        [console_script(), "lab", "--no-browser", "--port", str(port), "--dir", str(workdir)],
        stdout=log, stderr=subprocess.STDOUT, env=env, cwd=scratch,
    )
    server = LabServer(proc, port, workdir, log_path, started, _log=log)
    deadline = started + timeout
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"prune-explorer lab exited with {proc.returncode}:\n"
                                   + server.log())
            if time.monotonic() > deadline:
                raise TimeoutError(f"JupyterLab did not answer in {timeout:.0f} s:\n"
                                   + server.log())
            found = [m for m in URL_IN_LOG.finditer(server.log()) if int(m.group(1)) == port]
            if found:
                server.token = found[0].group(2)
                server.printed_url = found[0].group(0)
                with contextlib.suppress(OSError):
                    status, _, _ = http_status(server.url("/api/status"), timeout=2)
                    if status == 200:
                        break
            time.sleep(0.25)
    except BaseException:
        server.stop()
        raise
    server.ready_s = time.monotonic() - started
    return server


def children_of(pid: int) -> list[int]:
    """PIDs whose parent is ``pid`` (Linux /proc; empty elsewhere)."""
    found = []
    for entry in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = entry.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid:
                found.append(int(entry.parent.name))
    return found


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    stat = Path(f"/proc/{pid}/stat")
    with contextlib.suppress(OSError, IndexError):
        return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has exited
    return True


# -- browser ------------------------------------------------------------------------------------
def browser_skip_reason() -> str | None:
    """Why the browser test cannot run here, or None."""
    if not Path(CHROMIUM).exists():
        return (f"no Chromium at {CHROMIUM}: install it with `apt-get install -y chromium` "
                "(or set CHROMIUM=/path/to/chromium)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed: pip install playwright (no browser download needed)"
    return None


@contextlib.contextmanager
def chromium_page(record: list[str], viewport: tuple[int, int] = (1400, 1000),
                  scale: float = 1.0):
    """A fresh headless Chromium page of ``viewport`` (width, height) CSS pixels at ``scale``
    device pixels each (1.5: a 150 % browser zoom of a screen 1.5 times as large);
    non-localhost requests aborted; JS errors in ``record``."""
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=WAIT_MS)  # an expect without its own timeout (5 s by default)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            context = browser.new_context(
                viewport={"width": viewport[0], "height": viewport[1]},
                device_scale_factor=scale)
            context.route(NON_LOCAL, lambda route: route.abort())
            page = context.new_page()
            page.on("pageerror", lambda exc: record.append(str(exc)))
            page.set_default_timeout(WAIT_MS)
            yield page
            context.close()
        finally:
            browser.close()


def open_and_run_all(page: Any, lab: LabServer, notebook: str) -> None:
    """Open ``notebook`` in JupyterLab (fresh workspace), wait for an idle kernel, Run All Cells."""
    from playwright.sync_api import expect

    page.goto(lab.url(f"/lab/tree/{notebook}?reset"), wait_until="domcontentloaded")
    expect(page.locator(".jp-Notebook")).to_be_visible(timeout=WAIT_MS)
    expect(page.locator("#jp-main-statusbar")).to_contain_text("Idle", timeout=WAIT_MS)
    page.get_by_role("menuitem", name="Run", exact=True).click()
    page.get_by_role("menuitem", name="Run All Cells", exact=True).click()


def write_notebook(path: Path, cells: list[str]) -> None:
    """A notebook at ``path`` with one code cell per string of ``cells`` (Python 3 kernel)."""
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code) for code in cells])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)",
                                 "language": "python"}
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)


@contextlib.contextmanager
def serving(scratch: Path, notebooks: dict[str, list[str]] | None = None):
    """The browser tests' lab: skipped without a browser; else ``prune-explorer lab`` on
    ``scratch/work`` (quiet config) holding ``notebooks`` ({file name: cells}) besides the
    bundled ones, stopped afterwards."""
    import pytest

    reason = browser_skip_reason()
    if reason:
        pytest.skip(reason)
    for name, cells in (notebooks or {}).items():
        write_notebook(scratch / "work" / name, cells)
    server = start_lab(scratch / "work", scratch, config_dir=quiet_lab_config(scratch / "cfg"))
    try:
        yield server
    finally:
        server.stop()


# -- measuring the explorer in the page (Playwright locators of a ``.pe-explorer``) -------------
# Elements that hide what does not fit (overflow hidden or an ellipsis) and do not fit.
CUT_JS = """root => [...root.querySelectorAll('*')]
  .filter(e => e.offsetParent !== null && e.clientWidth > 0)
  .filter(e => {
    const s = getComputedStyle(e);
    const hides = s.overflowX === 'hidden' || s.overflowX === 'clip'
      || s.textOverflow === 'ellipsis';
    return hides && e.scrollWidth > e.clientWidth + 1 && e.textContent.trim() !== ''
      && !e.classList.contains('pe-sr-only') && !e.closest('.pe-sr-only')
      && e.tagName !== 'SELECT' && !e.closest('select');
  })
  .map(e => e.className + ': ' + e.textContent.trim().slice(0, 60))"""

# Table rows whose cells run together: the text of neighbouring cells closer than 6 px.
CRAMMED_JS = """root => {
  const out = [];
  for (const row of root.querySelectorAll('table tr')) {
    if (row.offsetParent === null) { continue; }
    const boxes = [...row.children].map(cell => {
      const range = document.createRange();
      range.selectNodeContents(cell);
      return [range.getBoundingClientRect(), cell.textContent.trim()];
    }).filter(([box, text]) => text !== '' && box.width > 0);
    for (let i = 1; i < boxes.length; i++) {
      if (boxes[i][0].left - boxes[i - 1][0].right < 6) {
        out.push(boxes[i - 1][1] + ' | ' + boxes[i][1]);
      }
    }
  }
  return out;
}"""


def wait_for(read: Any, check: Any, what: str, timeout: float = WAIT_S, poll: float = 0.2) -> Any:
    """``read()`` again every ``poll`` s until ``check`` accepts its value (returned); fails
    the test after ``timeout`` s, naming ``what`` and the last value seen."""
    deadline = time.monotonic() + timeout
    while True:
        value = read()
        if check(value):
            return value
        assert time.monotonic() < deadline, f"{what}; last seen: {value!r}"
        time.sleep(poll)


# Whether the picture is drawn for the room it has now, as the size probe measures it (the
# column's width; the visible height of the notebook's scrolling area less what sits above the
# picture in its column, less 12 px): [settled, what was seen]. The probe ignores changes
# under 8 px, so within 8 px is drawn for it.
SETTLED_JS = """ex => {
  const image = ex.querySelector('.pe-preview');
  const column = ex.querySelector('.pe-explore-picture');
  const words = (ex.querySelector('.pe-picture-text') || {}).textContent || '';
  const room = /room: (\\d+) x (\\d+) px/.exec(words);
  if (!image || !column || !room || !image.complete || !image.naturalWidth) {
    return [false, 'not drawn', words];
  }
  let view = window.innerHeight, top = 0;
  for (let p = column.parentElement; p && p !== document.body; p = p.parentElement) {
    const s = getComputedStyle(p);
    if ((s.overflowY === 'auto' || s.overflowY === 'scroll') && p.clientHeight > 0
        && p.scrollHeight > p.clientHeight + 1) {
      top = Math.max(0, p.getBoundingClientRect().top);
      view = Math.min(p.clientHeight, window.innerHeight - top);
      break;
    }
  }
  if (image.classList.contains('pe-stale')) {  // not redrawn while invalid: only scaled
    const bottom = image.getBoundingClientRect().bottom;
    return [bottom <= top + view + 1, 'stale', Math.round(bottom)];
  }
  const above = image.getBoundingClientRect().top - column.getBoundingClientRect().top;
  const height = Math.max(160, Math.floor(view - above - 12));
  const width = column.clientWidth;
  const drawn = [Number(room[1]), Number(room[2])];
  const ok = Math.abs(drawn[0] - width) <= 12
    && (Math.abs(drawn[1] - height) < 8 || drawn[1] > height && height <= 160);
  return [ok, drawn, [width, height], image.src.length];
}"""


def head_to_top(explorer: Any, timeout: float = WAIT_S) -> None:
    """Scroll the slider's row of ``explorer`` to the top of the notebook; wait until the
    picture is drawn for the room it has there (what the page shows, not a fixed time): the
    room it was drawn for matches the room now, the same on two reads in a row."""
    head = explorer.locator(".pe-picture-head").first
    seen: list[Any] = []

    def read() -> Any:
        head.evaluate("e => e.scrollIntoView({block: 'start'})")
        return explorer.evaluate(SETTLED_JS)

    def settled(value: Any) -> bool:
        seen.append(value)
        return bool(value[0]) and len(seen) >= 2 and seen[-2] == value

    wait_for(read, settled, "the picture was not redrawn for its room", timeout=timeout,
             poll=0.25)


# Buttons, tab labels, dropdowns and table cells that overlap another of them, or reach past a
# box that clips them (overflow hidden or clip): what a projector must never show.
CLASH_JS = """root => {
  const name = e => (e.className && typeof e.className === 'string' ? e.className.split(' ')
      .filter(c => c.startsWith('pe-') || c.startsWith('lm-')).join('.') : '')
      + ' "' + (e.textContent || e.value || '').trim().slice(0, 30) + '"';
  const boxes = [...root.querySelectorAll(
      'button, .lm-TabBar-tab, .p-TabBar-tab, select, td, th, .widget-toggle-button')]
    .filter(e => e.offsetParent !== null)
    .map(e => [e, e.getBoundingClientRect()])
    .filter(([e, b]) => b.width > 0 && b.height > 0);
  const out = [];
  for (let i = 0; i < boxes.length; i++) {
    const [a, p] = boxes[i];
    for (let j = i + 1; j < boxes.length; j++) {
      const [b, q] = boxes[j];
      if (a.contains(b) || b.contains(a)) { continue; }
      const w = Math.min(p.right, q.right) - Math.max(p.left, q.left);
      const h = Math.min(p.bottom, q.bottom) - Math.max(p.top, q.top);
      if (w > 1 && h > 1) { out.push('overlap: ' + name(a) + ' x ' + name(b)); }
    }
    for (let up = a.parentElement; up && up !== document.body; up = up.parentElement) {
      const s = getComputedStyle(up);
      if (s.overflowX !== 'visible') {  // the first box that does not show overflow
        const r = up.getBoundingClientRect();  // (one that scrolls sideways is not a cut)
        if ((s.overflowX === 'hidden' || s.overflowX === 'clip')
            && (p.left < r.left - 1 || p.right > r.right + 1)) { out.push('cut: ' + name(a)); }
        break;
      }
    }
  }
  return out;
}"""


def matrix_share(page: Any, explorer: Any) -> float:
    """The share of the screen's device pixels the Explore picture's coloured matrix covers:
    its size in the picture (``matrix: W x H px`` of the picture in words, CSS px as drawn),
    times the scale the page shows the picture at, over the viewport."""
    words = explorer.locator(".pe-picture-text").first.text_content() or ""
    found = re.search(r"matrix: ([0-9.]+) x ([0-9.]+) px", words)
    ratio = re.search(r"pixel ratio ([0-9.]+)", words)
    assert found is not None, words
    assert ratio is not None, words
    shown, natural = explorer.locator(".pe-preview").first.evaluate(
        "i => [i.getBoundingClientRect().width, i.naturalWidth]")
    scale = shown / (natural / float(ratio.group(1)))  # page CSS px per drawn CSS px
    width, height = page.viewport_size["width"], page.viewport_size["height"]
    return float(found.group(1)) * float(found.group(2)) * scale * scale / (width * height)


def open_file_browser(page: Any) -> None:
    """JupyterLab's file browser open (its default on launch; a narrow window may start with
    it closed): wait until it shows."""
    from playwright.sync_api import expect

    browser = page.locator(".jp-FileBrowser").first
    if not browser.is_visible():
        page.keyboard.press("Control+Shift+F")
    expect(browser).to_be_visible(timeout=WAIT_MS)
