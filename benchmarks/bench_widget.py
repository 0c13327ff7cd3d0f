"""Preview latency of the explorer: amount slider moved -> new PNG bytes in the Image widget.

For one ``Linear(4096, 4096)`` the script moves the amount slider ``--changes`` times (waiting
for each picture) and prints the median time from setting ``ui.amount.value`` to the moment the
preview ``Image.value`` changes, in the explorer's default background mode (worker thread,
``debounce=0``) and in synchronous mode. It also times the parts: ``Session.preview`` alone
(the mask computation) and the drawing (pooling + PNG) alone, so a slow total can be put on the
right layer. Target: median <= 150 ms.

``--weights default`` keeps ``nn.Linear``'s own initialisation (float32 uniform: 16.7 M values
hold many exact ties, and where ties fall at the cut the core reproduces ``torch.topk``'s choice
by calling it, which is slow); ``--weights tie-free`` gives every entry a distinct magnitude.

Usage::

    python benchmarks/bench_widget.py
    python benchmarks/bench_widget.py --weights tie-free
    python benchmarks/bench_widget.py --methods l1_unstructured ln_structured --changes 10
    python benchmarks/bench_widget.py --zoom    # with the Zoom panel open (it follows the slider)
    python benchmarks/bench_widget.py --room 560x590x1   # the picture sized as in a browser

``--zoom`` opens the Zoom panel before the slider moves, so each picture includes the zoom's
redraw of its window (64 x 64 entries: a large tensor opens on its top-left corner).
``--room WxHxR`` reports a picture column of W x H CSS pixels at pixel ratio R, as the
browser's size probe does (560x590x1: 1024x768 with the file browser open; 683x360x1.5: the
same at 150 % zoom); without it the picture keeps its default 384 x 320.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time

import torch

from prune_explorer.viz import MaskPreview
from prune_explorer.widgets import Explorer

TARGET_MS = 150.0


def _amounts(count: int) -> list[float]:
    # Distinct slider positions, so every change yields a different mask.
    return [round(0.05 + 0.85 * i / max(1, count - 1), 2) for i in range(count)]


def _ms(seconds: float) -> float:
    return 1000.0 * seconds


def slider_latency(ex: Explorer, amounts: list[float], timeout: float = 60.0) -> list[float]:
    """Seconds from ``ui.amount.value = a`` to the new image bytes, for each ``a``."""
    changed = threading.Event()
    ex.ui.preview.observe(lambda _: changed.set(), names="value")
    out = []
    for amount in amounts:
        changed.clear()
        start = time.perf_counter()
        ex.ui.amount.value = amount
        if ex.debounce is not None and not changed.wait(timeout):
            raise TimeoutError(f"no new preview within {timeout} s for amount={amount}")
        out.append(time.perf_counter() - start)
        if ex.preview_error:
            raise RuntimeError(f"preview failed: {ex.preview_error}")
    return out


def parts(ex: Explorer, method: str, amounts: list[float]) -> tuple[list[float], list[float]]:
    """Seconds of ``Session.preview`` alone and of drawing alone (pool + PNG), per amount."""
    request = ex.current_request()
    settings = dict(request.settings)
    picture = MaskPreview()
    compute, draw = [], []
    for amount in amounts:
        settings["amount"] = amount
        start = time.perf_counter()
        mask = ex.session.preview(request.target, method, **settings)
        compute.append(time.perf_counter() - start)
        start = time.perf_counter()
        picture.update(mask, name=request.target)
        picture.png()
        draw.append(time.perf_counter() - start)
    return compute, draw


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=4096, help="Linear(size, size)")
    parser.add_argument("--changes", type=int, default=10, help="slider moves per measurement")
    parser.add_argument("--methods", nargs="+",
                        choices=["l1_unstructured", "random_unstructured", "ln_structured",
                                 "random_structured"],
                        default=["l1_unstructured", "random_unstructured", "ln_structured",
                                 "random_structured"])
    parser.add_argument("--weights", choices=["default", "tie-free"], default="default")
    parser.add_argument("--zoom", action="store_true", help="open the Zoom panel first")
    parser.add_argument("--room", default=None,
                        help="WxHxR: the picture's column as a browser reports it")
    args = parser.parse_args()
    room = None
    if args.room:
        width, height, ratio = args.room.split("x")
        room = (int(width), int(height), float(ratio))

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(args.size, args.size))
    if args.weights == "tie-free":
        weight = model[0].weight
        # Distinct magnitudes 1..n (exact in float32 up to 2**24), half of them negative.
        with torch.no_grad():
            values = torch.randperm(weight.numel()).float().add_(1.0)
            values[::2].neg_()
            weight.copy_(values.view_as(weight) / weight.numel())
    amounts = _amounts(args.changes)
    print(f"Linear({args.size}, {args.size}), {args.weights} weights: {args.changes} slider "
          f"changes, torch threads {torch.get_num_threads()}, Zoom panel "
          f"{'open' if args.zoom else 'closed'}, room {args.room or 'default'}; target median "
          f"<= {TARGET_MS:.0f} ms")
    print(f"{'method':<22}{'mode':<14}{'median ms':>10}{'min':>8}{'max':>8}"
          f"{'preview ms':>12}{'draw ms':>9}")
    for method in args.methods:
        for mode, debounce in (("background", 0.0), ("synchronous", None)):
            ex = Explorer(model, debounce=debounce)
            ex.ui.method.value = method
            ex.ui.zoom_toggle.value = args.zoom
            if room is not None:  # as the size probe reports it from the browser
                probe = ex.explore_pane.probe
                probe.width, probe.height, probe.pixel_ratio = room
            ex.flush()
            latencies = slider_latency(ex, amounts)
            compute, draw = parts(ex, method, amounts[: max(3, args.changes // 3)])
            ex.close()
            print(f"{method:<22}{mode:<14}{_ms(statistics.median(latencies)):>10.1f}"
                  f"{_ms(min(latencies)):>8.1f}{_ms(max(latencies)):>8.1f}"
                  f"{_ms(statistics.median(compute)):>12.1f}{_ms(statistics.median(draw)):>9.1f}")


if __name__ == "__main__":
    main()
