"""Time the live mask preview: new amount -> mask -> pooled view -> PNG.

For a 4096 x 4096 Linear weight and a 512 x 512 x 3 x 3 Conv2d weight, and several amounts:

1. mask:   ``prune.preview_mask(module, "weight", prune.L1Unstructured(amount))`` -- the mask
           ``apply`` would install, computed without touching the module: what
           ``Session.preview`` (and so the explorer) calls on every slider move
2. view:   ``MaskPreview.update(mask)`` (2-D view, exact pooling to one cell per pixel, set_data)
   render: ``MaskPreview.png()`` (PNG bytes for the widget)
3. naive:  a new figure that ``imshow``-s the whole full-resolution mask (with a colour bar) and
   renders it to PNG -- what a straightforward slider callback does.

Prints the median of each part, the total against the 100 ms target, and the ratio of the naive
view+render time to ours. The mask time belongs to ``prune_explorer.prune``; it is reported
separately so the picture side can be judged on its own.

Run: ``/work/venv/bin/python benchmarks/bench_viz.py [--repeats N] [--amounts 0.1 0.5 ...]``
"""

from __future__ import annotations

import argparse
import io
import statistics
import time

import numpy as np
import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from prune_explorer import prune
from prune_explorer.viz import MaskPreview, style, tensor_view

TARGET_MS = 100.0
CASES = (
    ("Linear 4096x4096", (4096, 4096), "Linear"),
    ("Conv2d 512x512x3x3", (512, 512, 3, 3), "Conv2d"),
)


def naive_png(mask: torch.Tensor, figsize: tuple[float, float], dpi: float) -> bytes:
    """New figure, imshow of the full-resolution 2-D mask, colour bar, PNG."""
    fig = Figure(figsize=figsize, dpi=dpi)
    canvas = FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    data = mask.reshape(mask.shape[0], -1).numpy()
    image = ax.imshow(data, cmap="cividis_r", interpolation="nearest", aspect="auto")
    fig.colorbar(image, ax=ax)
    buffer = io.BytesIO()
    canvas.print_png(buffer)
    return buffer.getvalue()


def ms(seconds: float) -> float:
    return 1000.0 * seconds


def run_case(label: str, shape: tuple[int, ...], module_type: str, amounts: list[float],
             repeats: int) -> dict[str, float]:
    torch.manual_seed(0)
    weight = torch.randn(*shape)
    holder = torch.nn.Module()
    holder.weight = torch.nn.Parameter(weight)
    preview = MaskPreview()
    figsize = tuple(preview.figure.get_size_inches())
    dpi = preview.figure.dpi
    # Warm-up: fonts, caches, first full draw.
    warm = torch.ones_like(weight)
    preview.update(warm, module_type=module_type)
    preview.png()
    naive_png(warm, figsize, dpi)

    mask_t, view_t, render_t, naive_t = [], [], [], []
    for _ in range(repeats):
        for amount in amounts:
            t0 = time.perf_counter()
            mask = prune.preview_mask(holder, "weight", prune.L1Unstructured(amount))
            t1 = time.perf_counter()
            preview.update(
                mask,
                name="weight",
                method="l1_unstructured",
                settings={"amount": amount},
                module_type=module_type,
            )
            t2 = time.perf_counter()
            png = preview.png()
            t3 = time.perf_counter()
            naive_png(mask, figsize, dpi)
            t4 = time.perf_counter()
            assert png[:4] == b"\x89PNG"
            mask_t.append(t1 - t0)
            view_t.append(t2 - t1)
            render_t.append(t3 - t2)
            naive_t.append(t4 - t3)
    med = {
        "mask": ms(statistics.median(mask_t)),
        "view": ms(statistics.median(view_t)),
        "render": ms(statistics.median(render_t)),
        "view_render": ms(statistics.median(np.add(view_t, render_t).tolist())),
        "total": ms(statistics.median(np.add(np.add(mask_t, view_t), render_t).tolist())),
        "naive": ms(statistics.median(naive_t)),
    }
    cells = preview.pooled.shape if preview.pooled is not None else None
    source = tensor_view(torch.empty(shape)).shape
    ok_view = "PASS" if med["view_render"] <= TARGET_MS else "FAIL"
    ok_total = "PASS" if med["total"] <= TARGET_MS else "FAIL"
    ratio = med["naive"] / med["view_render"]
    print(f"{label}: 2-D view {source} pooled to {cells} cells, "
          f"{len(mask_t)} frames ({repeats} x amounts {amounts})")
    print(f"  mask (prune.preview_mask, L1)             median {med['mask']:8.1f} ms")
    print(f"  view (tensor_view + exact pooling)        median {med['view']:8.1f} ms")
    print(f"  render (PNG, blitted)                     median {med['render']:8.1f} ms")
    print(f"  view+render                               median {med['view_render']:8.1f} ms"
          f"   target <= {TARGET_MS:.0f} ms: {ok_view}"
          f"   naive full-res imshow+PNG {med['naive']:.1f} ms -> {ratio:.1f}x faster")
    print(f"  total (mask + view + render)              median {med['total']:8.1f} ms"
          f"   target <= {TARGET_MS:.0f} ms: {ok_total}"
          f"   naive total {med['mask'] + med['naive']:.1f} ms")
    return med


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=2, help="rounds over the amounts")
    parser.add_argument("--amounts", type=float, nargs="+", default=[0.1, 0.3, 0.5, 0.7, 0.9])
    args = parser.parse_args()
    print(f"bench_viz: torch {torch.__version__}, {torch.get_num_threads()} threads; "
          f"colours: kept {style.KEPT_COLOR}, pruned {style.PRUNED_COLOR}")
    for label, shape, module_type in CASES:
        run_case(label, shape, module_type, args.amounts, args.repeats)


if __name__ == "__main__":
    main()
