"""Regenerate the explorer screenshots in docs/img/ (used by README.md and docs/explorer.md).

One command, from the repository root, with the project's virtual environment::

    .venv/bin/python docs/screenshots.py            # writes docs/img/*.png

(``./dev test`` sets that environment up; Chromium must be at /usr/bin/chromium or in
``$CHROMIUM`` -- ``apt-get install -y chromium`` -- and Playwright installed: no browser download.)

What it does: starts ``prune-explorer lab`` on 127.0.0.1 (token on, a free port) in a scratch folder
holding one small notebook, opens it in headless Chromium at 1400x1000, at 1024x768 and at a
real 1024x768 projector at 150 % zoom (what Chrome does: a 683x512 CSS viewport at 1.5 device
pixels per CSS pixel; file ``...-683x512-zoom150.png``), the file browser open, runs it, and
photographs the JupyterLab window twice per size:
the explorer on the demo MLP (``fc1.weight``, l1_unstructured at 50 %) and on the demo CNN's
``features.3.weight`` in the kernels view (ln_structured, ``dim = 0``), and the MLP with a
global preview and the Model view, Magnitudes and Zoom panels open, each scrolled to the top
of the notebook (or, when the picture falls below the window, down to the slider over the
picture). The PNGs are
palette-compressed so each stays well under 200 KB. Options: ``--out DIR``,
``--sizes 1400x1000,683x512@1.5,...``.

Reuses the helpers of the launch and browser tests (``tests/helpers/browser.py``); nothing is
requested from outside 127.0.0.1.
"""

from __future__ import annotations

import argparse
import io
import re
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from helpers.browser import (  # noqa: E402
    browser_skip_reason,
    chromium_page,
    head_to_top,
    open_and_run_all,
    quiet_lab_config,
    start_lab,
    write_notebook,
)

NOTEBOOK = "screenshots.ipynb"
MAX_BYTES = 200_000
SIZES = "1400x1000,1024x768,683x512@1.5"
#: (file stem, code of the cell that shows that explorer)
SHOTS = {
    "explorer-mlp": """\
from prune_explorer import explore
from prune_explorer.demo import evaluate, load_mlp

mlp = explore(load_mlp(), tensor="fc1.weight", evaluate=evaluate)
mlp.ui.amount.value = 0.5
mlp.flush()  # preview and accuracy readout drawn before the cell ends
mlp""",
    "explorer-cnn-kernels": """\
from prune_explorer import explore
from prune_explorer.demo import evaluate, load_cnn

cnn = explore(load_cnn(), tensor="features.3.weight", view="kernels", evaluate=evaluate)
cnn.ui.method.value = "ln_structured"
cnn.ui.dim.value = 0
cnn.flush()
cnn""",
    "explorer-panels": """\
from prune_explorer import explore
from prune_explorer.demo import load_mlp

panels = explore(load_mlp(), tensor="fc2.weight")
panels.ui.method.value = "global_unstructured"
panels.ui.amount.value = 0.6
panels.explore_pane.panels.model_view.accordion.selected_index = 0
panels.explore_pane.panels.magnitudes.accordion.selected_index = 0
panels.ui.zoom_toggle.value = True
panels.flush()
panels""",
}


def save_png(png: bytes, path: Path) -> int:
    """Write ``png`` palette-compressed (256 colours, octree: small colour areas such as the
    lemon yellow of "pruned before" keep their hue; the UI is flat); return the size."""
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB")
    buffer = io.BytesIO()
    image.quantize(colors=256, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE).save(
        buffer, format="PNG", optimize=True)
    data = buffer.getvalue()
    path.write_bytes(data)
    return len(data)


def wait_until_drawn(page, explorer) -> None:
    """The preview image is loaded and the explorer stopped changing (background preview and
    accuracy readout done): its text and picture are the same over 1.5 s."""
    from playwright.sync_api import expect

    expect(explorer).to_be_visible(timeout=120_000)
    preview = explorer.locator(".pe-preview").first
    expect(preview).to_have_attribute("src", re.compile(r"^(blob:|data:image/png)"),
                                      timeout=60_000)
    page.wait_for_function("img => img.complete && img.naturalWidth > 0",
                           arg=preview.element_handle(), timeout=60_000)
    deadline = time.monotonic() + 90
    last, same = None, 0
    while same < 3:
        if time.monotonic() > deadline:
            raise SystemExit("the explorer kept changing for 90 s; no screenshot taken")
        now = (explorer.inner_text(), preview.get_attribute("src"))
        same = same + 1 if now == last else 0
        last = now
        time.sleep(0.5)


def frame(page, explorer) -> None:
    """Scroll the explorer to the top of the notebook; if its picture then reaches below the
    window (the narrow layout puts it under the controls), scroll the slider's row to the top
    instead: slider, count line and picture fill the screen, as a teacher projects it."""
    explorer.evaluate("e => e.scrollIntoView({block: 'start'})")
    if explorer.locator(".pe-explore-panels svg").count():  # the panels shot: panels at bottom
        explorer.locator(".pe-explore-panels").first.evaluate(
            "e => e.scrollIntoView({block: 'end'})")
        time.sleep(0.5)
        return
    preview = explorer.locator(".pe-preview").first
    box, height = preview.bounding_box(), page.viewport_size["height"]
    if box is not None and box["y"] + box["height"] > height - 30:
        head_to_top(explorer)  # and wait until the picture is drawn for the room it has there
        return
    time.sleep(0.5)


def shoot(lab, size: tuple[int, int, float], out: Path) -> list[Path]:
    from playwright.sync_api import expect

    errors: list[str] = []
    written = []
    with chromium_page(errors, viewport=size[:2], scale=size[2]) as page:
        open_and_run_all(page, lab, NOTEBOOK)
        browser = page.locator(".jp-FileBrowser").first
        if not browser.is_visible():
            page.keyboard.press("Control+Shift+F")
        expect(browser).to_be_visible(timeout=30_000)
        explorers = page.locator(".jp-OutputArea .pe-explorer")
        expect(explorers).to_have_count(len(SHOTS), timeout=180_000)
        for index, stem in enumerate(SHOTS):
            explorer = explorers.nth(index)
            wait_until_drawn(page, explorer)
            frame(page, explorer)
            path = out / f"{stem}-{size_name(size)}.png"
            size_bytes = save_png(page.screenshot(), path)
            print(f"wrote {path.relative_to(REPO) if path.is_relative_to(REPO) else path} "
                  f"({size_bytes / 1024:.0f} KB)")
            if size_bytes > MAX_BYTES:
                raise SystemExit(f"{path} is {size_bytes:,} bytes; keep screenshots under "
                                 f"{MAX_BYTES:,}")
            written.append(path)
    if errors:
        raise SystemExit(f"JavaScript errors in the page: {errors}")
    return written


def parse_size(text: str) -> tuple[int, int, float]:
    """``WIDTHxHEIGHT`` or ``WIDTHxHEIGHT@RATIO`` (CSS pixels, device pixels per CSS pixel)."""
    match = re.fullmatch(r"(\d{3,4})x(\d{3,4})(?:@([0-9.]+))?", text)
    if not match:
        raise argparse.ArgumentTypeError("a size is WIDTHxHEIGHT or WIDTHxHEIGHT@RATIO, e.g. "
                                         f"1400x1000 or 683x512@1.5; got {text!r}")
    return int(match.group(1)), int(match.group(2)), float(match.group(3) or 1.0)


def size_name(size: tuple[int, int, float]) -> str:
    """The size as the file names give it: ``1024x768``, ``683x512-zoom150``."""
    width, height, ratio = size
    return f"{width}x{height}" + ("" if ratio == 1.0 else f"-zoom{round(ratio * 100)}")


def parser_default_sizes() -> list[tuple[int, int, float]]:
    """The window sizes photographed by default."""
    return [parse_size(text) for text in SIZES.split(",")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "img",
                        help="folder for the PNGs (default: docs/img)")
    parser.add_argument("--sizes", default=SIZES,
                        help="comma-separated browser window sizes (default: %(default)s)")
    args = parser.parse_args(argv)
    sizes = [parse_size(text) for text in args.sizes.split(",")]
    reason = browser_skip_reason()
    if reason:
        raise SystemExit(f"cannot take screenshots: {reason}")
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="pe-shots-") as scratch:
        scratch_dir = Path(scratch)
        work = scratch_dir / "work"
        write_notebook(work / NOTEBOOK, list(SHOTS.values()))
        lab = start_lab(work, scratch_dir, config_dir=quiet_lab_config(scratch_dir / "cfg"))
        try:
            for size in sizes:
                shoot(lab, size, args.out)
        finally:
            lab.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
