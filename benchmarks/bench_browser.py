"""Explorer latency as a user feels it: JupyterLab in headless Chromium, input event -> new picture.

For each layer shape and weight kind the script writes a notebook into a scratch folder (three
layers ``nn.Linear(IN, OUT)`` in an ``nn.Sequential``, weights filled and cast as asked, then
``explore(model)``), serves it with ``prune-explorer lab`` and drives it with Playwright. A probe
injected into the page records ``performance.now()`` at every input event (``event.timeStamp``
of keydown, mousedown/up, click, change) and, through a ``MutationObserver``, the moment the
``src`` of the explorer's picture (``img.pe-preview``, History: ``img.pe-history-image``)
changes. Each latency is the difference of the two, in the page's own clock, so it holds the
whole path: widget message to the kernel, preview, PNG, message back, new blob URL in the DOM.

Measured, per layer and weights:

* **first open** of a tensor (picker to first picture; one-time work such as sorting lands here),
  then **tensor switch** between tensors already visited;
* per method (``l1_unstructured``, ``random_unstructured``, ``ln_structured`` n=2 dim 0 and
  dim 1, ``random_structured``, ``global_unstructured`` over the three weights): the first
  picture after choosing the method, ``--steps`` arrow-key steps of the amount slider (median,
  p95), and a ``--drag-s`` mouse drag of the slider: pictures shown during the drag and the time
  from release to the last picture;
* **Apply** (click to the status line saying "Applied", and to the next picture) and **History
  scrub** (arrow key on the History slider to the new diff picture).

This is a measurement, not a test: nothing is asserted about the figures. The machine line
(nproc, load average before and after, torch, Chromium) is printed with the table, because on
a loaded machine every figure is slower and noisier.

Usage::

    python benchmarks/bench_browser.py --quick                  # one 1024x1024 layer, ~2 min
    python benchmarks/bench_browser.py                          # both layers, all weights
    python benchmarks/bench_browser.py --layers 4096x4096 --data normal --dtype float32 \\
        --steps 10 --json browser.json

Needs Chromium (``/usr/bin/chromium`` or ``$CHROMIUM``) and the ``playwright`` package (no
browser download); the helpers are the browser tests' own (``tests/helpers/browser.py``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from helpers.browser import (  # noqa: E402 -- the browser tests' helpers, one copy
    CHROMIUM,
    browser_skip_reason,
    chromium_page,
    open_and_run_all,
    quiet_lab_config,
    start_lab,
)

LAYERS = ("4096x4096", "4096x11008")  # nn.Linear(IN, OUT), weight OUT x IN
DATA = {
    "normal": "N(0, 0.02)",
    "default-init": "nn.Linear default init",
}
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
# (label, method option, dim or None); n stays the explorer's default "2".
METHOD_CASES = (
    ("l1_unstructured", "l1_unstructured", None),
    ("random_unstructured", "random_unstructured", None),
    ("ln_structured n=2 dim=0", "ln_structured", 0),
    ("ln_structured n=2 dim=1", "ln_structured", 1),
    ("random_structured dim=0", "random_structured", 0),
    ("global l1 over 3 layers", "global_unstructured", None),
)
NOTEBOOK_CODE = """\
import time
import torch
from torch import nn
from prune_explorer.widgets import explore

torch.manual_seed(0)
model = nn.Sequential(*[nn.Linear({inp}, {out}) for _ in range(3)])
if {data!r} == "normal":
    with torch.no_grad():
        for layer in model:
            layer.weight.normal_(0.0, 0.02)
model = model.to(torch.{dtype})
start = time.perf_counter()
ex = explore(model)
print(f"PE_OPEN_S={{time.perf_counter() - start:.3f}}")
ex
"""

# Injected before any page script: event times and picture changes in the page's own clock.
PROBE_JS = """
(() => {
  if (window.__pe) return;
  const pe = window.__pe = {frames: [], values: [], loads: [], events: {}, texts: [],
                            lastFrame: 0};
  const kindOf = el => !el.classList ? null
      : el.classList.contains('pe-preview') ? 'preview'
      : el.classList.contains('pe-history-image') ? 'history' : null;
  for (const type of ['keydown', 'mousedown', 'mouseup', 'click', 'change']) {
    window.addEventListener(type, e => {
      (pe.events[type] = pe.events[type] || []).push(e.timeStamp || performance.now());
    }, true);
  }
  new MutationObserver(records => {
    const t = performance.now();
    for (const r of records) {
      if (r.attributeName === 'aria-valuenow') {
        // a slider's value changed (echoes that set the same value again do not count)
        if (r.oldValue !== r.target.getAttribute('aria-valuenow')) pe.values.push(t);
        continue;
      }
      const kind = kindOf(r.target);
      if (kind && r.target.getAttribute('src')) {
        pe.frames.push({kind, t});
        pe.lastFrame = t;
      }
    }
  }).observe(document, {subtree: true, attributes: true, attributeOldValue: true,
                        attributeFilter: ['src', 'aria-valuenow']});
  document.addEventListener('load', e => {
    const kind = kindOf(e.target);
    if (kind) pe.loads.push({kind, t: performance.now()});
  }, true);
  pe.watchText = selector => {
    const el = document.querySelector(selector);
    new MutationObserver(() => pe.texts.push({t: performance.now(), text: el.innerText}))
        .observe(el, {subtree: true, childList: true, characterData: true});
  };
})();
"""


def ms_stats(values: list[float]) -> dict[str, Any]:
    """Median, p95 (nearest rank), min, max and count of ``values`` (ms), rounded."""
    if not values:
        return {"n": 0, "median": None, "p95": None, "min": None, "max": None}
    ordered = sorted(values)
    p95 = ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]
    return {"n": len(values), "median": round(statistics.median(ordered), 1),
            "p95": round(p95, 1), "min": round(ordered[0], 1), "max": round(ordered[-1], 1)}


def machine() -> dict[str, Any]:
    """What the figures were measured on: CPUs, load, torch, Chromium, JupyterLab."""
    cpu = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    chromium = subprocess.run([CHROMIUM, "--version"], capture_output=True, text=True,
                              check=False).stdout.strip()
    import jupyterlab

    return {"nproc": os.cpu_count(), "cpu": cpu, "torch": torch.__version__,
            "torch_threads": torch.get_num_threads(), "python": platform.python_version(),
            "platform": platform.platform(), "chromium": chromium,
            "jupyterlab": jupyterlab.__version__, "loadavg_start": os.getloadavg()}


@dataclass
class Config:
    """One model to measure: three ``nn.Linear(IN, OUT)`` (``layer`` is "INxOUT"), its weights."""

    layer: str
    data: str
    dtype: str

    @property
    def shape(self) -> tuple[int, int]:
        inp, out = (int(v) for v in self.layer.lower().split("x"))
        return inp, out

    @property
    def weights(self) -> str:
        return f"{self.dtype}, {DATA[self.data]}"

    def notebook(self) -> dict[str, Any]:
        inp, out = self.shape
        code = NOTEBOOK_CODE.format(inp=inp, out=out, data=self.data, dtype=self.dtype)
        return {
            "cells": [{"cell_type": "code", "execution_count": None, "id": "bench",
                       "metadata": {}, "outputs": [], "source": code}],
            "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                        "language": "python"}},
            "nbformat": 4, "nbformat_minor": 5,
        }


@dataclass
class Result:
    """What was measured on one :class:`Config` (ms unless named ``_s``); raw samples kept."""

    config: dict[str, Any]
    open_kernel_s: float | None = None
    run_all_to_first_picture_ms: float | None = None
    first_open_ms: dict[str, float] = field(default_factory=dict)
    switch_ms: list[float] = field(default_factory=list)
    methods: list[dict[str, Any]] = field(default_factory=list)
    apply_status_ms: list[float] = field(default_factory=list)
    apply_picture_ms: list[float] = field(default_factory=list)
    history_open_ms: float | None = None
    history_ms: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


class Driver:
    """Actions on the explorer in the page, each timed from its input event to its picture."""

    def __init__(self, page: Any, timeout_s: float) -> None:
        self.page = page
        self.timeout_ms = timeout_s * 1000
        self.ex = page.locator(".jp-OutputArea .pe-explorer").first

    def js(self, script: str, arg: Any = None) -> Any:
        return self.page.evaluate(script, arg)

    def frames(self, kind: str) -> list[float]:
        return self.js("k => window.__pe.frames.filter(f => f.kind === k).map(f => f.t)", kind)

    def events(self, kind: str) -> list[float]:
        return self.js("k => window.__pe.events[k] || []", kind)

    def wait_frames(self, kind: str, count: int) -> None:
        self.page.wait_for_function(
            "([k, n]) => window.__pe.frames.filter(f => f.kind === k).length >= n",
            arg=[kind, count], timeout=self.timeout_ms, polling=10)

    def quiet(self, seconds: float, limit_s: float = 300.0) -> None:
        """Wait until no picture has changed for ``seconds``."""
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            idle = self.js("() => performance.now() - window.__pe.lastFrame")
            if idle >= seconds * 1000:
                return
            time.sleep(max(0.02, seconds - idle / 1000))
        raise TimeoutError(f"pictures kept changing for {limit_s:.0f} s")

    def settle_after_values(self, settle: float) -> bool:
        """Wait for a picture newer than the slider's last value change, then for quiet.

        Returns False when no such picture came within the timeout.
        """
        while True:
            time.sleep(0.1)
            last_value = self.js("() => Math.max(0, ...window.__pe.values)")
            try:
                self.page.wait_for_function(
                    "v => window.__pe.frames.some(f => f.kind === 'preview' && f.t > v)",
                    arg=last_value, timeout=self.timeout_ms, polling=10)
            except Exception:  # Playwright's TimeoutError
                return False
            self.quiet(settle)
            if self.js("() => Math.max(0, ...window.__pe.values)") == last_value:
                return True

    def timed(self, action: Any, event: str, kind: str = "preview") -> float:
        """Run ``action``; ms from its ``event`` to the next ``kind`` picture."""
        before = len(self.frames(kind))
        action()
        self.wait_frames(kind, before + 1)
        start = self.events(event)[-1]
        return self.frames(kind)[before] - start

    # -- controls -------------------------------------------------------------------------------
    def select(self, css: str, *, label: str | None = None, prefix: str | None = None) -> None:
        select = self.ex.locator(f"{css} select").first
        if prefix is not None:
            index = select.evaluate(
                "(s, p) => [...s.options].findIndex(o => o.text.replace(/\\s+/g, ' ')"
                ".startsWith(p))", prefix)
            if index < 0:
                raise ValueError(f"no option starting with {prefix!r} in {css}")
            select.select_option(index=index)
        else:
            select.select_option(label=label)

    def selected(self, css: str) -> str:
        return " ".join(self.ex.locator(f"{css} select").first.evaluate(
            "s => s.options[s.selectedIndex].text").split())

    def open_tensor(self, name: str) -> float:
        return self.timed(lambda: self.select(".pe-tensor", prefix=f"{name} "), "change")

    def choose_method(self, method: str, dim: int | None) -> float | None:
        """Pick ``method`` (and ``dim``); ms to the pictures this needed (None: nothing to do)."""
        total = None
        if not self.selected(".pe-method").startswith(method):
            total = self.timed(lambda: self.select(".pe-method", label=method), "change")
        if dim is not None and self.selected(".pe-dim") != str(dim):
            self.quiet(0.2)
            total = (total or 0.0) + self.timed(
                lambda: self.select(".pe-dim", label=str(dim)), "change")
        return total

    def amount(self) -> float:
        return float(self.ex.locator(".pe-amount [role=slider]").first
                     .get_attribute("aria-valuenow"))

    def steps(self, count: int, slider: str = ".pe-amount", kind: str = "preview",
              low: float = 0.15, high: float = 0.85, settle: float = 0.15) -> list[float]:
        """``count`` arrow-key steps of ``slider``, turning around at ``low``/``high``."""
        handle = self.ex.locator(f"{slider} [role=slider]").first
        handle.scroll_into_view_if_needed()
        handle.focus()
        key = "ArrowRight"
        out = []
        for _ in range(count):
            value = float(handle.get_attribute("aria-valuenow"))
            lo = float(handle.get_attribute("aria-valuemin"))
            hi = float(handle.get_attribute("aria-valuemax"))
            span = hi - lo or 1.0
            if (value - lo) / span >= high:
                key = "ArrowLeft"
            elif (value - lo) / span <= low:
                key = "ArrowRight"
            self.quiet(settle)
            out.append(self.timed(lambda k=key: self.page.keyboard.press(k), "keydown", kind))
        return out

    def drag(self, seconds: float, settle: float) -> dict[str, Any]:
        """Drag the amount handle over 40 % of the track in ``seconds``; count pictures."""
        handle = self.ex.locator(".pe-amount .noUi-handle").first
        track = self.ex.locator(".pe-amount .noUi-base").first
        handle.scroll_into_view_if_needed()
        self.quiet(0.3)
        hb, tb = handle.bounding_box(), track.bounding_box()
        x0, y = hb["x"] + hb["width"] / 2, hb["y"] + hb["height"] / 2
        start_value = self.amount()
        direction = 1 if start_value < 0.5 else -1
        x1 = x0 + direction * 0.4 * tb["width"]
        before = len(self.frames("preview"))
        page = self.page
        page.mouse.move(x0, y)
        page.mouse.down()
        begin = time.monotonic()
        ticks = max(2, int(seconds / 0.04))
        for i in range(1, ticks + 1):
            page.mouse.move(x0 + (x1 - x0) * i / ticks, y)
            pause = begin + seconds * i / ticks - time.monotonic()
            if pause > 0:
                time.sleep(pause)
        page.mouse.up()
        down, up = self.events("mousedown")[-1], self.events("mouseup")[-1]
        final_shown = self.settle_after_values(settle)
        # The picture in words (the explorer's off-screen description) names its amount: the
        # picture left on show must be of the slider's final value -- the widget's value, which
        # its readout shows -- whether or not a frame came after the handle's last aria value
        # change. (Seen here: after a fast drag the handle's aria-valuenow can differ from the
        # widget's value and readout by 0.02; the picture, drawn by the kernel, has the
        # readout's value.)
        words = self.ex.locator(".pe-sr-only").first.inner_text()
        found = re.search(r"amount=([0-9.]+)", words)
        final_amount = self.amount()
        readout = self.ex.locator(".pe-amount .widget-readout").first
        shown_value = readout.inner_text() if readout.count() else None
        shown = self.frames("preview")[before:]
        during = [t for t in shown if down < t <= up]
        after = [t for t in shown if t > up]
        return {
            "drag_ms": round(up - down, 1),
            "amount_from": start_value,
            "amount_to": final_amount,
            "final_frame_seen": final_shown,
            "picture_amount": None if found is None else float(found.group(1)),
            "readout": shown_value,  # the number the slider shows next to its handle
            "final_picture_matches": found is not None and shown_value is not None
            and abs(float(found.group(1)) - float(shown_value)) < 1e-9,
            "handle_matches_readout": shown_value is not None
            and abs(final_amount - float(shown_value)) < 1e-9,
            "frames_during": len(during),
            "frames_after_release": len(after),
            # 0 when the last picture (drawn for the final value) came before the release
            "release_to_final_ms": round(after[-1] - up, 1) if after else 0.0,
        }


def run_config(lab: Any, workdir: Path, index: int, cfg: Config, args: argparse.Namespace
               ) -> Result:
    result = Result(config={**asdict(cfg), "weights": cfg.weights,
                            "model": f"nn.Sequential(3 x nn.Linear({cfg.shape[0]}, "
                                     f"{cfg.shape[1]}))"})
    name = f"bench_{index}_{cfg.layer}_{cfg.data}_{cfg.dtype}.ipynb"
    (workdir / name).write_text(json.dumps(cfg.notebook()), encoding="utf-8")
    errors: list[str] = []
    print(f"\n== {cfg.layer} · {cfg.weights}", flush=True)
    try:
        with chromium_page(errors) as page:
            page.add_init_script(PROBE_JS)
            open_and_run_all(page, lab, name)
            clicked = page.evaluate("() => (window.__pe.events.click || []).slice(-1)[0]")
            d = Driver(page, args.timeout)
            d.ex.wait_for(timeout=d.timeout_ms)
            d.wait_frames("preview", 1)
            if clicked is not None:
                result.run_all_to_first_picture_ms = round(d.frames("preview")[0] - clicked, 1)
            page.evaluate("() => window.__pe.watchText('.pe-explorer .pe-status')")
            out = page.locator(".jp-OutputArea").first.inner_text()
            for line in out.splitlines():
                if line.startswith("PE_OPEN_S="):
                    result.open_kernel_s = float(line.split("=", 1)[1])
            print(f"explore() {result.open_kernel_s} s; first picture "
                  f"{result.run_all_to_first_picture_ms} ms after Run All", flush=True)

            # Tensors: first open (one-time work), then switches between visited tensors.
            tensors = ["0.weight", "1.weight", "2.weight"]
            for tensor in tensors[1:]:
                d.quiet(0.2)
                result.first_open_ms[tensor] = round(d.open_tensor(tensor), 1)
            for i in range(args.switches):
                d.quiet(0.2)
                result.switch_ms.append(d.open_tensor(tensors[i % 3]))
            d.quiet(0.2)
            if not d.selected(".pe-tensor").startswith("0.weight "):
                d.open_tensor("0.weight")
            print(f"first open {result.first_open_ms} ms; switch "
                  f"{ms_stats(result.switch_ms)}", flush=True)

            for label, method, dim in METHOD_CASES:
                if args.methods and not any(m in label for m in args.methods):
                    continue
                d.quiet(0.2)
                case: dict[str, Any] = {"method": label}
                first = d.choose_method(method, dim)
                case["first_picture_ms"] = None if first is None else round(first, 1)
                steps = d.steps(args.steps)
                case["steps_ms"] = [round(s, 1) for s in steps]
                case["steps"] = ms_stats(steps)
                if args.drag_s > 0:
                    settle = max(1.5, 3 * case["steps"]["max"] / 1000)
                    case["drag"] = d.drag(args.drag_s, settle)
                result.methods.append(case)
                print(f"{label}: steps {case['steps']}; drag {case.get('drag')}", flush=True)

            # Apply (l1 on 0.weight), then the History tab.
            d.quiet(0.2)
            d.choose_method("l1_unstructured", None)
            for k in range(args.applies):
                d.quiet(0.3)
                texts = len(page.evaluate("() => window.__pe.texts"))
                before = len(d.frames("preview"))
                d.ex.locator(".pe-apply").first.click()
                page.wait_for_function(
                    "n => window.__pe.texts.slice(n).some(x => x.text.includes('Applied'))",
                    arg=texts, timeout=d.timeout_ms, polling=10)
                d.wait_frames("preview", before + 1)
                click = d.events("click")[-1]
                seen = page.evaluate("n => window.__pe.texts.slice(n)", texts)
                applied = next(x["t"] for x in seen if "Applied" in x["text"])
                result.apply_status_ms.append(applied - click)
                result.apply_picture_ms.append(d.frames("preview")[before] - click)
                print(f"apply {k + 1}: status {applied - click:.0f} ms, picture "
                      f"{result.apply_picture_ms[-1]:.0f} ms", flush=True)
            if args.applies:
                d.quiet(0.3)
                tab = d.ex.locator(".lm-TabBar-tab", has_text="History").first
                result.history_open_ms = round(
                    d.timed(lambda: tab.click(), "click", "history"), 1)
                result.history_ms = d.steps(args.history_steps, ".pe-history", "history",
                                            low=0.0, high=1.0)
                print(f"history: open {result.history_open_ms} ms; scrub "
                      f"{ms_stats(result.history_ms)}", flush=True)
    except Exception as err:  # report what was measured so far, and why it stopped
        result.errors.append(f"{type(err).__name__}: {err}")
        print(f"!! stopped: {type(err).__name__}: {err}", flush=True)
    finally:
        shutdown_kernels(lab)
    result.errors += [f"page error: {e}" for e in errors]
    return result


def shutdown_kernels(lab: Any) -> None:
    """Delete every session of the server (frees the model before the next configuration)."""
    headers = {"Authorization": f"token {lab.token}"}
    with contextlib.suppress(OSError, ValueError):
        request = urllib.request.Request(lab.url("/api/sessions", token=False), headers=headers)
        with urllib.request.urlopen(request, timeout=10) as response:
            sessions = json.load(response)
        for session in sessions:
            request = urllib.request.Request(
                lab.url(f"/api/sessions/{session['id']}", token=False), headers=headers,
                method="DELETE")
            urllib.request.urlopen(request, timeout=30).close()


# -- report -------------------------------------------------------------------------------------
def _f(value: Any, digits: int = 0) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def markdown(info: dict[str, Any], results: list[Result], args: argparse.Namespace) -> str:
    load = info["loadavg_start"], info.get("loadavg_end")
    lines = [
        "## Explorer latency in a real browser (benchmarks/bench_browser.py)",
        "",
        f"Machine: {info['nproc']} CPUs ({info['cpu'] or 'unknown CPU'}), torch {info['torch']} "
        f"({info['torch_threads']} threads), Python {info['python']}, {info['chromium']}, "
        f"JupyterLab {info['jupyterlab']}. Load average at start {load[0][0]:.1f}, at end "
        f"{_f(load[1] and load[1][0], 1)}. Model per row: nn.Sequential of 3 identical "
        f"nn.Linear(IN, OUT); latencies in ms from the input event (page clock) to the new "
        f"picture in the DOM; {args.steps} arrow-key steps per method, a {args.drag_s:g} s drag.",
        "",
        "| layer | weights | method | first picture | step median | step p95 | drag frames "
        "| release → final |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        c = r.config
        for m in r.methods:
            drag = m.get("drag") or {}
            final = _f(drag.get("release_to_final_ms"))
            if drag.get("final_picture_matches") is False:
                final += (f" (WRONG: picture of {drag.get('picture_amount')}, slider reads "
                          f"{drag.get('readout')})")
            elif drag.get("handle_matches_readout") is False:
                final += " (handle's aria value differs from the widget's)"
            elif drag.get("final_frame_seen") is False:
                final += " (final value shown before release)"
            lines.append(
                f"| {c['layer']} | {c['weights']} | {m['method']} | {_f(m['first_picture_ms'])} "
                f"| {_f(m['steps']['median'])} | {_f(m['steps']['p95'])} "
                f"| {drag.get('frames_during', '–')} | {final} |")
    lines += [
        "",
        "| layer | weights | explore() in kernel (s) | first open of a tensor | tensor switch "
        "median | Apply → status | Apply → picture | History tab open | History scrub median "
        "| History scrub p95 |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        c = r.config
        first = max(r.first_open_ms.values()) if r.first_open_ms else None
        sw, hs = ms_stats(r.switch_ms), ms_stats(r.history_ms)
        ap, ai = ms_stats(r.apply_status_ms), ms_stats(r.apply_picture_ms)
        lines.append(
            f"| {c['layer']} | {c['weights']} | {_f(r.open_kernel_s, 2)} | {_f(first)} "
            f"| {_f(sw['median'])} | {_f(ap['median'])} | {_f(ai['median'])} "
            f"| {_f(r.history_open_ms)} | {_f(hs['median'])} | {_f(hs['p95'])} |")
    errors = [f"- {r.config['layer']} {r.config['weights']}: {e}" for r in results
              for e in r.errors]
    if errors:
        lines += ["", "Errors:", *errors]
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--layers", nargs="+", default=list(LAYERS),
                        help="IN x OUT of nn.Linear(IN, OUT), e.g. 4096x11008 (default: both)")
    parser.add_argument("--data", nargs="+", choices=sorted(DATA), default=["normal",
                        "default-init"], help="weight values (default: both)")
    parser.add_argument("--dtype", nargs="+", choices=sorted(DTYPES),
                        default=["float32", "bfloat16"], help="weight dtype (default: both)")
    parser.add_argument("--methods", nargs="+", default=None,
                        help="only the method cases whose label contains one of these")
    parser.add_argument("--steps", type=int, default=20, help="arrow-key steps per method")
    parser.add_argument("--drag-s", type=float, default=2.0, help="drag duration (0: no drag)")
    parser.add_argument("--switches", type=int, default=6, help="tensor switches timed")
    parser.add_argument("--applies", type=int, default=3, help="Apply clicks timed")
    parser.add_argument("--history-steps", type=int, default=10, help="History slider steps")
    parser.add_argument("--timeout", type=float, default=120.0,
                        help="seconds to wait for any one picture")
    parser.add_argument("--quick", action="store_true",
                        help="one 1024x1024 float32 N(0, 0.02) layer, few steps (~2 min)")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args(argv)
    if args.quick:
        args.layers, args.data, args.dtype = ["1024x1024"], ["normal"], ["float32"]
        args.steps, args.switches, args.applies, args.history_steps = 4, 2, 2, 2
        args.drag_s = 1.0
    for layer in args.layers:
        parts = layer.lower().split("x")
        if len(parts) != 2 or not all(p.isdigit() and int(p) > 0 for p in parts):
            parser.error(f"--layers: each layer is IN x OUT like 4096x11008; got {layer!r}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    reason = browser_skip_reason()
    if reason:
        print(f"cannot run: {reason}", file=sys.stderr)
        return 2
    # The kernel must import this checkout's prune_explorer.
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT / "src"), os.environ.get("PYTHONPATH", "")) if p)
    info = machine()
    configs = [Config(layer, data, dtype) for layer in args.layers for dtype in args.dtype
               for data in args.data]
    started = time.monotonic()
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="bench_browser_") as scratch:
        root = Path(scratch)
        workdir = root / "work"
        lab = start_lab(workdir, root, config_dir=quiet_lab_config(root / "cfg"))
        try:
            print(f"JupyterLab up in {lab.ready_s:.1f} s", flush=True)
            for index, cfg in enumerate(configs):
                results.append(run_config(lab, workdir, index, cfg, args))
        finally:
            lab.stop()
    info["loadavg_end"] = os.getloadavg()
    info["wall_s"] = round(time.monotonic() - started, 1)
    print("\n" + markdown(info, results, args))
    print(f"\n(wall time {info['wall_s']:.0f} s)")
    if args.json is not None:
        payload = {"machine": info, "args": {k: str(v) if isinstance(v, Path) else v
                                             for k, v in vars(args).items()},
                   "results": [asdict(r) for r in results]}
        args.json.write_text(json.dumps(payload, indent=2), encoding="utf-8")
    return 1 if any(r.errors for r in results) else 0


if __name__ == "__main__":
    raise SystemExit(main())
