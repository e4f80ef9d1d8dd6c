"""Make the README's pictures from a running service: the explorer, as Debian's chromium
shows it, and the heatmap and similarity PNGs, each from the URL the README gives.

    .venv/bin/python docs/pictures.py
"""

from __future__ import annotations

from pathlib import Path

import httpx
from playwright.sync_api import sync_playwright

from tests.support import CHROMIUM, FLAGS, running

HERE = Path(__file__).resolve().parent
EXPLORER = (
    "/?max_len=2048&d_model=512&base=10000&layout=interleaved&dims=192,256,257,320&position=700"
)
PICTURES = {
    "heatmap.png": "/v1/encodings/sinusoidal/heatmap.png?max_len=2048&d_model=512",
    "similarity.png": "/v1/encodings/sinusoidal/similarity.png?max_len=512&d_model=128",
}


def main() -> None:
    with running() as url:
        for name, path in PICTURES.items():
            response = httpx.get(url + path, timeout=60)
            response.raise_for_status()
            (HERE / name).write_bytes(response.content)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
            page = browser.new_page(viewport={"width": 1100, "height": 1300})
            page.goto(url + EXPLORER)
            page.wait_for_selector('body[data-state="ready"]')
            box = page.locator("#heatmap").bounding_box()
            assert box is not None
            page.mouse.move(box["x"] + box["width"] * 0.45, box["y"] + box["height"] * 0.4)
            page.screenshot(path=str(HERE / "explorer.png"), full_page=True)
            browser.close()


if __name__ == "__main__":
    main()
