"""How long a 2048 x 512 heatmap takes to draw: in the explorer (Debian's chromium, driven by
Playwright) and as ``heatmap.png``, each against a baseline measured in the same run.

    .venv/bin/python bench/explorer.py [rounds]

- **Explorer.** The page is loaded with ``max_len=2048&d_model=512``; each round clicks
  *Draw*, which fetches the raw table (from the browser's cache after the first round, as the
  answer is immutable) and redraws the three views. The page reports the milliseconds it
  spent on each. Baseline, in the same page: filling every pixel of the heatmap's plot area
  with one colour and putting it on the canvas, the least a per-pixel drawing costs.
- **heatmap.png**, 800 x 600. *Cold*: a table not computed before (a new ``base`` each
  round), computed and drawn. *Repeated*: the same picture again, from the service's cache.
  Baseline: the tutorials' own way, ``plt.imshow(PE, aspect="auto")`` with a colorbar and
  ``savefig`` of the same table at the same size, in this process.
"""

from __future__ import annotations

import io
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import httpx
import matplotlib.pyplot as plt
import numpy as np
from playwright.sync_api import sync_playwright

from service.encodings import registry
from service.encodings.sinusoidal import SinusoidalKey
from tests.support import CHROMIUM, FLAGS, running

PARAMS = "max_len=2048&d_model=512"
FLOOR = """() => {
  const c = document.getElementById("heatmap"), p = c.plot, ctx = c.getContext("2d");
  const image = ctx.createImageData(p.w, p.h), d = image.data;
  const times = [];
  for (let i = 0; i < 21; i++) {
    const t = performance.now();
    for (let j = 0; j < d.length; j += 4) {
      d[j] = 200; d[j + 1] = i; d[j + 2] = 100; d[j + 3] = 255;
    }
    ctx.putImageData(image, p.x, p.y);
    ctx.getImageData(p.x, p.y, 1, 1);  // wait for the drawing, as reading a pixel must
    times.push(performance.now() - t);
  }
  times.sort((a, b) => a - b);
  return times[10];
}"""


def median_ms(step: Callable[[], object], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def explorer(url: str, rounds: int) -> dict[str, float]:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        page = browser.new_page(viewport={"width": 1200, "height": 1400})
        page.goto(f"{url}/?{PARAMS}")
        page.wait_for_selector('body[data-state="ready"]')
        first = page.eval_on_selector("body", "b => ({...b.dataset})")
        rows: dict[str, list[float]] = {"fetchMs": [], "heatmapMs": [], "drawMs": []}
        for _ in range(rounds):
            page.evaluate("() => { document.body.dataset.state = 'again'; }")
            page.click("button[type=submit]")
            page.wait_for_selector('body[data-state="ready"]')
            data = page.eval_on_selector("body", "b => ({...b.dataset})")
            for name, values in rows.items():
                values.append(float(data[name]))
        floor = float(page.evaluate(FLOOR))
        plot = page.eval_on_selector("#heatmap", "c => [c.plot.w, c.plot.h]")
        browser.close()
    return {
        "first fetch": float(first["fetchMs"]),
        "first heatmap": float(first["heatmapMs"]),
        **{name: statistics.median(values) for name, values in rows.items()},
        "floor": floor,
        "plot_w": plot[0],
        "plot_h": plot[1],
    }


def seeds_way(table: np.ndarray[Any, Any]) -> bytes:
    figure = plt.figure(figsize=(8, 6), dpi=100)
    image = plt.imshow(table, aspect="auto")
    plt.title("Positional Encoding")
    plt.xlabel("Encoding Dimension")
    plt.ylabel("Position Index")
    plt.colorbar(image)
    out = io.BytesIO()
    figure.savefig(out, format="png")
    plt.close(figure)
    return out.getvalue()


def main(rounds: int) -> None:
    with running() as url:
        page = explorer(url, rounds)
        with httpx.Client(base_url=url, timeout=60) as http:
            picture = f"/v1/encodings/sinusoidal/heatmap.png?{PARAMS}"
            http.get(picture).raise_for_status()  # matplotlib imported, fonts loaded
            bases = iter(range(20_000, 20_000 + rounds))
            cold = median_ms(lambda: http.get(f"{picture}&base={next(bases)}"), rounds)
            repeated = median_ms(lambda: http.get(picture), rounds)
    table = registry.rows(SinusoidalKey(512), 0, 2048)
    seeds_way(table)
    baseline = median_ms(lambda: seeds_way(table), rounds)
    print(f"explorer, 2048 x 512 float32, plot area {page['plot_w']} x {page['plot_h']} px:")
    print(
        f"  first load: fetch {page['first fetch']:.1f} ms, heatmap {page['first heatmap']:.1f} ms"
    )
    print(
        f"  median of {rounds} redraws: fetch {page['fetchMs']:.1f} ms, heatmap "
        f"{page['heatmapMs']:.2f} ms, all three views {page['drawMs']:.2f} ms"
    )
    print(
        f"  floor (one colour into every pixel) {page['floor']:.2f} ms: heatmap is "
        f"{page['heatmapMs'] / page['floor']:.1f}x the floor"
    )
    print("heatmap.png, 2048 x 512 at 800 x 600:")
    print(f"  cold (compute + draw) {cold:.0f} ms, repeated {repeated:.1f} ms")
    print(
        f"  the seeds' plt.imshow + savefig in process {baseline:.0f} ms: cold is "
        f"{cold / baseline:.2f}x, repeated {repeated / baseline:.3f}x the baseline"
    )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10)
