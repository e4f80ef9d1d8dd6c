"""The explorer, /docs and /redoc in a real browser: Debian's chromium, driven by
Playwright, against a real ``python -m service``. Every request the page makes to another
host is refused and counted, so the pages are shown to work offline. A screenshot is saved
in ``artifacts/``. And a page of another origin reads the API (CORS)."""

from __future__ import annotations

import io
import json
import shlex
import shutil
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Final
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import numpy as np
import pytest
from PIL import Image
from playwright.sync_api import Browser, ConsoleMessage, Page, Request, Route, sync_playwright

from tests.support import (
    APPLY,
    CHROMIUM,
    FLAGS,
    ROOT,
    TABLE,
    WAIT,
    load,
    npy_bytes,
    requests_counted,
    running,
)

pytestmark = pytest.mark.slow
ARTIFACTS = ROOT / "artifacts"
ROTARY: Final = "/v1/encodings/rotary"
BIAS: Final = "/v1/biases/alibi"
# Llama 3.1's rope_theta and rope_scaling (its config.json)
LLAMA_31: Final = {
    "base": "500000",
    "scaling": "llama3",
    "factor": "8",
    "original_max_position_embeddings": "8192",
    "low_freq_factor": "1",
    "high_freq_factor": "4",
}
# Llama 3.1's own context, and 2^20: past what the page holds, so drawn every step-th
REAL_LENGTHS: Final = [pytest.param(131072, id="131072"), pytest.param(1 << 20, id="2^20")]
SAMPLES: Final = 512  # explorer.js's SAMPLES: the positions a sampled view fetches


@dataclass
class Visit:
    """A page of the explorer, and what it asked of the network and printed as errors."""

    page: Page
    url: str
    requests: list[str] = field(default_factory=list)
    off_host: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def ready(self, params: str) -> None:
        self.page.wait_for_selector(f'body[data-state="ready"][data-params="{params}"]')

    def dataset(self, selector: str) -> dict[str, str]:
        return self.page.eval_on_selector(selector, "e => ({...e.dataset})")  # type: ignore[no-any-return]

    def plot(self, canvas: str) -> dict[str, float]:
        """The canvas's plot area in page CSS pixels."""
        return self.page.eval_on_selector(  # type: ignore[no-any-return]
            f"#{canvas}",
            """c => { const b = c.getBoundingClientRect(), r = c.ratio, p = c.plot;
                      return {x: b.left + c.clientLeft + p.x / r, y: b.top + c.clientTop + p.y / r,
                              w: p.w / r, h: p.h / r}; }""",
        )

    def hover(self, canvas: str, fx: float, fy: float) -> dict[str, str]:
        """Move the mouse to a fraction of the plot area; the readout's data."""
        area = self.plot(canvas)
        self.page.mouse.move(area["x"] + fx * (area["w"] - 1), area["y"] + fy * (area["h"] - 1))
        return self.dataset("#readout")

    def distinct_colours(self, canvas: str) -> int:
        return self.page.eval_on_selector(  # type: ignore[no-any-return]
            f"#{canvas}",
            """c => { const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
                      const seen = new Set();
                      for (let i = 0; i < d.length; i += 4)
                        seen.add((d[i] << 24) | (d[i + 1] << 16) | (d[i + 2] << 8) | d[i + 3]);
                      return seen.size; }""",
        )


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with running() as base:
        yield base


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium (bash .ci/run does)")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield chromium
        chromium.close()


@contextmanager
def visiting(browser: Browser, url: str) -> Iterator[Visit]:
    """A new page on the service at ``url``, watched (:class:`Visit`)."""
    context = browser.new_context(
        viewport={"width": 1200, "height": 1400},
        permissions=["clipboard-read", "clipboard-write"],
    )
    context.set_default_timeout(WAIT * 1000)  # Playwright's 30 s: a loaded machine passes it
    page = context.new_page()
    seen = Visit(page, url)
    origin = urlsplit(url).netloc

    def guard(route: Route, request: Request) -> None:
        if urlsplit(request.url).netloc == origin:
            seen.requests.append(request.url)
            route.continue_()
        else:
            seen.off_host.append(request.url)
            route.abort()

    def console(message: ConsoleMessage) -> None:
        if message.type == "error":
            seen.errors.append(message.text)

    context.route("**/*", guard)
    page.on("console", console)
    page.on("pageerror", lambda error: seen.errors.append(str(error)))
    try:
        yield seen
    finally:
        context.close()


@pytest.fixture
def visit(browser: Browser, url: str) -> Iterator[Visit]:
    with visiting(browser, url) as seen:
        yield seen


def api_value(
    http: httpx.Client, layout: str, position: int, dimension: int, max_len: int = 2048
) -> np.float32:
    document = http.get(
        TABLE,
        params={
            "max_len": max_len,
            "d_model": 512,
            "layout": layout,
            "start": position,
            "stop": position + 1,
            "dim_start": dimension,
            "dim_stop": dimension + 1,
        },
    ).json()
    return np.float32(document["data"][0][0])


def test_the_explorer_draws_the_table_three_ways(visit: Visit, tmp_path: Path) -> None:
    page = visit.page
    page.goto(visit.url + "/")
    visit.ready("100x512@10000:interleaved")
    page.fill("#max_len", "2048")
    page.select_option("#layout", "split")
    page.click("button[type=submit]")
    visit.ready("2048x512@10000:split")
    table_requests = [u for u in visit.requests if urlsplit(u).path == TABLE]
    assert table_requests, visit.requests
    assert all("format=raw" in u for u in table_requests)  # binary, never JSON

    # drawn: the plots have many colours, not one
    assert visit.distinct_colours("heatmap") > 200
    page.fill("#dims", "0, 1, 300")
    page.wait_for_function("() => document.querySelectorAll('#legend span').length === 3")
    assert visit.distinct_colours("waves") > 20
    page.fill("#position", "700")
    page.wait_for_function("() => document.getElementById('similarity').position === 700")
    assert visit.distinct_colours("similarity") > 10

    with httpx.Client(base_url=visit.url, timeout=WAIT) as http:
        # the heatmap's corners are the table's corners; every value shown is the API's
        assert visit.hover("heatmap", 0, 0) | {"value": ""} == {
            "view": "heatmap",
            "position": "0",
            "dimension": "0",
            "value": "",
        }
        corner = visit.hover("heatmap", 1, 1)  # a pixel covers several of the 2048 rows
        assert corner["dimension"] == "511"
        assert 2040 <= int(corner["position"]) <= 2047
        for fx, fy in [(0, 0), (1, 1), (0.5, 0.5), (0.13, 0.77), (0.91, 0.05), (0.6, 0.3)]:
            shown = visit.hover("heatmap", fx, fy)
            position, dimension = int(shown["position"]), int(shown["dimension"])
            assert np.float32(shown["value"]) == api_value(http, "split", position, dimension)
            assert f"position {position}" in page.text_content("#readout")  # type: ignore[operator]

        waves = visit.hover("waves", 0.4, 0.5)
        values = json.loads(waves["values"])
        assert sorted(values) == ["0", "1", "300"]
        for dimension, value in values.items():
            expected = api_value(http, "split", int(waves["position"]), int(dimension))
            assert np.float32(value) == expected

        table = np.load(
            io.BytesIO(
                http.get(
                    TABLE,
                    params={"max_len": 2048, "d_model": 512, "layout": "split", "format": "npy"},
                ).content
            ),
            allow_pickle=False,
        ).astype(np.float64)
        for fx in (0, 0.2, 0.3418, 0.75, 1):
            shown = visit.hover("similarity", fx, 0.5)
            assert shown["p"] == "700"
            q = int(shown["position"])
            np.testing.assert_allclose(float(shown["value"]), table[700] @ table[q], rtol=1e-9)

        # the copied curl command fetches the table shown
        page.click("#copy-curl")
        copied = page.evaluate("navigator.clipboard.readText()")
        assert copied == page.text_content("#curl")
        assert copied.startswith("curl ")
        assert shutil.which("curl"), "curl is needed to run the copied command"
        subprocess.run(
            shlex.split(copied), cwd=tmp_path, check=True, capture_output=True, timeout=WAIT
        )
        fetched = np.load(tmp_path / "pe.npy", allow_pickle=False)
        np.testing.assert_array_equal(fetched, table.astype(np.float32))

        # the picture links work too
        for link in ("#heatmap-png", "#similarity-png"):
            href = page.get_attribute(link, "href")
            assert href is not None
            response = http.get(href)
            assert response.headers["content-type"] == "image/png"
            assert Image.open(io.BytesIO(response.content)).size == (800, 600)

    visit.hover("heatmap", 0.55, 0.45)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "explorer.png"), full_page=True)
    timing = visit.dataset("body")
    print(f"2048x512: fetched in {timing['fetchMs']} ms, heatmap drawn in {timing['heatmapMs']} ms")
    assert visit.off_host == []
    assert visit.errors == []


def test_the_explorer_restores_its_view_from_the_address(visit: Visit) -> None:
    page = visit.page
    page.goto(visit.url + "/?max_len=64&d_model=16&base=100&layout=split&dims=1,2,20&position=10")
    visit.ready("64x16@100:split")
    assert page.input_value("#base") == "100"
    assert page.input_value("#layout") == "split"
    assert page.eval_on_selector("#similarity", "c => c.position") == 10
    assert page.locator("#legend span").count() == 2
    assert "not in 0..15: 20" in page.text_content("#legend")  # type: ignore[operator]
    corner = visit.hover("heatmap", 1, 1)
    assert (corner["position"], corner["dimension"]) == ("63", "15")
    page.fill("#d_model", "4")
    page.press("#d_model", "Enter")
    visit.ready("64x4@100:split")
    assert "d_model=4" in page.url  # the address follows the view, so it can be shared
    assert "not in 0..3: 20" in page.text_content("#legend")  # type: ignore[operator]
    assert visit.off_host == []
    assert visit.errors == []


def test_the_explorer_shows_the_services_problems(visit: Visit) -> None:
    page = visit.page
    page.goto(visit.url + "/")
    visit.ready("100x512@10000:interleaved")
    page.fill("#d_model", "0")
    page.click("button[type=submit]")
    page.wait_for_selector('body[data-state="error"]')
    assert "d_model" in page.text_content("#problem")  # type: ignore[operator]
    assert page.is_visible("#problem")
    page.fill("#d_model", "4")
    page.fill("#max_len", str(2**31 + 1))  # sampled, and its last position refused
    page.click("button[type=submit]")
    page.wait_for_function(
        "() => document.getElementById('problem').textContent.includes('PE_MAX_POSITION')"
    )
    page.fill("#max_len", "10")
    page.click("button[type=submit]")
    visit.ready("10x4@10000:interleaved")
    assert not page.is_visible("#problem")
    assert visit.off_host == []
    # the browser reports the refused request itself; nothing else went wrong
    assert all("422" in error for error in visit.errors), visit.errors


def test_hovering_off_the_plot_hides_the_readout(visit: Visit) -> None:
    page = visit.page
    page.goto(visit.url + "/?max_len=32&d_model=8")
    visit.ready("32x8@10000:interleaved")
    visit.hover("heatmap", 0.5, 0.5)
    assert page.is_visible("#readout")
    area: Any = visit.plot("heatmap")
    page.mouse.move(area["x"] - 20, area["y"] + 10)  # in the margin, left of the plot
    assert not page.is_visible("#readout")


def test_the_explorer_draws_a_presets_table(visit: Visit) -> None:
    """Choosing a preset fetches that library's table (the values shown are the API's), and
    the controls the preset does not take are disabled, so no request is refused."""
    page = visit.page
    page.goto(visit.url + "/?max_len=64&d_model=16")
    visit.ready("64x16@10000:interleaved")
    page.select_option("#preset", "tensor2tensor")
    visit.ready("64x16@10000:interleaved:tensor2tensor:library")
    assert page.is_disabled("#base")
    assert page.is_disabled("#layout")
    assert page.is_enabled("#rounding")
    assert "preset=tensor2tensor" in page.url
    with httpx.Client(base_url=visit.url, timeout=WAIT) as http:
        query: dict[str, str | int] = {
            "max_len": 64,
            "d_model": 16,
            "preset": "tensor2tensor",
            "format": "json",
        }
        table = np.array(http.get(TABLE, params=query).json()["data"], dtype=np.float32)
        for fx, fy in [(0.2, 0.3), (0.9, 0.9), (0.55, 0.1)]:
            shown = visit.hover("heatmap", fx, fy)
            position, dimension = int(shown["position"]), int(shown["dimension"])
            assert np.float32(shown["value"]) == table[position, dimension]
    page.select_option("#rounding", "exact")
    visit.ready("64x16@10000:interleaved:tensor2tensor:exact")
    assert "rounding=exact" in page.url
    assert page.is_hidden("#similarity-png")  # similarity.png draws the paper's table only
    assert not [u for u in visit.requests if "base=" in u and "preset=" in u]
    assert visit.off_host == []
    assert visit.errors == []


def test_the_explorer_draws_the_rope_and_alibi_views(visit: Visit) -> None:
    """The RoPE view draws the angles and the wavelengths of the table the service serves,
    for a scaling chosen in the page; the ALiBi view draws the bias of every head."""
    page = visit.page
    page.goto(visit.url + "/?view=rope")
    page.wait_for_selector('#rope-view[data-state="ready"]')
    assert visit.distinct_colours("rope-angles") > 50
    assert visit.distinct_colours("rope-wavelengths") > 2
    page.select_option("#rope-scaling", "llama3")
    page.wait_for_selector('#rope-view[data-state="ready"][data-params*="scaling=llama3"]')
    assert "scaling=llama3" in page.url
    assert any("/v1/encodings/rotary?" in u and "scaling=llama3" in u for u in visit.requests)
    page.goto(visit.url + "/?view=alibi")
    page.wait_for_selector('#alibi-view[data-state="ready"]')
    assert visit.distinct_colours("alibi-bias") > 20
    assert visit.distinct_colours("alibi-heads") > 20
    page.select_option("#alibi-form", "symmetric")
    page.wait_for_selector('#alibi-view[data-state="ready"][data-params*="form=symmetric"]')
    assert visit.off_host == []
    assert visit.errors == []


TIMESTEP: Final = "/v1/encodings/timestep"


def test_the_timestep_view_draws_flux_and_what_its_embedding_receives(visit: Visit) -> None:
    """The timestep view lists the service's presets, draws FLUX's table (raw) as a heatmap
    and as lines, reads back that timesteps 750 and 900 reach the embedding as 752 and 900
    (σ = t / 1000 in bfloat16, times 1000 in bfloat16), and links to the table's audit,
    which the audit view draws."""
    page = visit.page
    page.goto(f"{visit.url}/?view=timestep&preset=flux&max_len=1000&dim=256&values=750,900")
    page.wait_for_selector('#timestep-view[data-state="ready"]')
    page.wait_for_selector('#timestep-received-view[data-state="ready"]')
    listed = page.eval_on_selector_all("#timestep-preset option", "o => o.map(e => e.value)")
    with httpx.Client(base_url=visit.url, timeout=WAIT) as http:
        presets = http.get("/v1/presets").json()["families"]["timestep"]
        assert listed == [preset["name"] for preset in presets]
        table = load(http.get(TIMESTEP, params={"preset": "flux", "max_len": 1000, "dim": 256}))
    flux = next(preset for preset in presets if preset["name"] == "flux")
    assert flux["summary"] in (page.text_content("#timestep-summary") or "")
    assert "time_factor=1000" in (page.text_content("#timestep-fixes") or "")
    assert page.is_disabled("#timestep-time_factor")  # fixed by the preset
    assert page.is_enabled("#timestep-timestep_dtype")  # the one it takes
    assert all(
        "format=raw" in u
        for u in visit.requests
        if urlsplit(u).path == TIMESTEP and "format=json" not in u
    )
    assert visit.distinct_colours("timestep-heatmap") > 200
    assert visit.distinct_colours("timestep-lines") > 20
    shown = visit.hover("timestep-heatmap", 0.6, 0.3)
    assert np.float32(shown["value"]) == table[int(shown["position"]), int(shown["dimension"])]
    received = page.eval_on_selector_all(
        "#timestep-received tr", "rows => rows.map(r => [r.dataset.received, r.dataset.difference])"
    )
    assert received == [["752", "0"], ["900", "0"]]
    assert "values=750%2C900" in page.url
    assert "'http" in (page.text_content("#timestep-curl") or "")
    page.click("#timestep-audit")
    page.wait_for_selector('#audit-view[data-state="ready"][data-family="timestep"]')
    assert visit.dataset("#audit-view")["params"] == "preset=flux&dim=256&max_len=1000"
    assert visit.distinct_colours("audit-plot") > 3
    assert visit.off_host == []
    assert visit.errors == []


SINCOS: Final = "/v1/encodings"


def test_the_sincos_view_draws_a_grids_halves_and_a_frame(visit: Visit) -> None:
    """The sin-cos grid view lists the service's presets, draws MAE's table (raw, its cls
    row first) and says its first half follows the width; a column over the grid is the
    service's value at each patch. A CogVideoX video: its frame's quarter, the frame chosen
    drawn, and the link to its audit, which the audit view draws without max_len."""
    page = visit.page
    mae = {"height": "6", "width": "10", "dim": "64", "preset": "mae", "extra_tokens": "1"}
    page.goto(f"{visit.url}/?view=sincos&family=sincos-2d&{urlencode(mae)}&column=5")
    page.wait_for_selector('#sincos-view[data-state="ready"][data-family="sincos-2d"]')
    listed = page.eval_on_selector_all("#sincos-2d-preset option", "o => o.map(e => e.value)")
    with httpx.Client(base_url=visit.url, timeout=WAIT) as http:
        presets = http.get("/v1/presets").json()["families"]
        table = load(http.get(f"{SINCOS}/sincos-2d", params=mae))
    assert listed == [preset["name"] for preset in presets["sincos-2d"]]
    assert page.is_enabled("#sincos-2d-extra_tokens")  # the one mae takes
    assert page.is_disabled("#sincos-2d-base_size")
    assert page.is_hidden("#sincos-3d-box")
    assert visit.dataset("#sincos-view")["zeros"] == "1"
    assert page.text_content("#sincos-halves-counts") == "width (x) 0–31, height (y) 32–63"
    assert visit.distinct_colours("sincos-heatmap") > 100
    shown = visit.hover("sincos-heatmap", 0.3, 0.6)
    assert np.float32(shown["value"]) == table[int(shown["position"]), int(shown["dimension"])]
    page.locator("#sincos-grid").scroll_into_view_if_needed()  # below the page's fold
    shown = visit.hover("sincos-grid", 0.75, 0.4)  # grid row 2, column 7: token 1 + 27
    assert (shown["row"], shown["column"], shown["position"]) == ("2", "7", "28")
    assert np.float32(shown["value"]) == table[28, 5]
    assert "'http" in (page.text_content("#sincos-curl") or "")
    video = {"frames": "3", "height": "4", "width": "6", "dim": "64", "preset": "cogvideox"}
    page.goto(f"{visit.url}/?view=sincos&family=sincos-3d&{urlencode(video)}&frame=2&column=44")
    page.wait_for_selector('#sincos-view[data-state="ready"][data-family="sincos-3d"]')
    with httpx.Client(base_url=visit.url, timeout=WAIT) as http:
        frames = load(http.get(f"{SINCOS}/sincos-3d", params=video))
    assert page.is_disabled("#sincos-3d-text_tokens")  # cogvideox fixes its 226
    assert visit.dataset("#sincos-view")["zeros"] == "226"
    counts = page.text_content("#sincos-halves-counts")
    assert counts == "frame (t) 0–15, width (x) 16–39, height (y) 40–63"
    page.locator("#sincos-grid").scroll_into_view_if_needed()
    shown = visit.hover("sincos-grid", 0.9, 0.9)  # frame 2, grid row 3, column 5
    assert (shown["frame"], shown["row"], shown["column"]) == ("2", "3", "5")
    assert int(shown["position"]) == 226 + 2 * 24 + 3 * 6 + 5
    assert np.float32(shown["value"]) == frames[int(shown["position"]), 44] != 0
    page.fill("#sincos-frame", "1")  # another frame: drawn from the table held
    page.wait_for_selector("#sincos-grid-note:text-matches('of frame 1$')")
    shown = visit.hover("sincos-grid", 0.9, 0.9)
    assert (shown["frame"], shown["position"]) == ("1", str(226 + 24 + 3 * 6 + 5))
    assert "frame=1" in page.url
    assert all(
        "format=raw" in u
        for u in visit.requests
        if urlsplit(u).path.startswith(SINCOS) and "format=json" not in u
    )
    page.click("#sincos-audit")
    page.wait_for_selector('#audit-view[data-state="ready"][data-family="sincos-3d"]')
    assert visit.dataset("#audit-view")["params"] == urlencode(video)  # no max_len
    assert page.is_disabled("#audit-max_len")
    assert visit.distinct_colours("audit-plot") > 3
    assert visit.off_host == []
    assert visit.errors == []


ROPE_ND: Final = "/v1/encodings/rope-nd"
VISION: Final = "/v1/encodings/vision-rotary"


def test_the_ropend_view_draws_flux_and_a_wan_frame(visit: Visit) -> None:
    """The multi-axis RoPE view lists the service's presets, draws FLUX's tables (raw, cos
    and sin) with its text tokens first, a token's columns named by their grid cell, and a
    pair's angle at each cell, the service's; Wan's video: a frame chosen, and the link to
    its audit, which the audit view draws without max_len."""
    page = visit.page
    flux = {"preset": "flux", "grid": "8,12", "text_tokens": "4"}
    page.goto(f"{visit.url}/?view=ropend&{urlencode(flux)}&token=30&pair=40")
    page.wait_for_selector('#ropend-view[data-state="ready"]')
    listed = page.eval_on_selector_all("#ropend-preset option", "o => o.map(e => e.value)")
    with httpx.Client(base_url=visit.url, timeout=WAIT) as http:
        presets = http.get("/v1/presets").json()["families"]["rope-nd"]
        # the angles as ropend.js takes them: atan2 in float64, kept in float32
        cos, sin = load(http.get(ROPE_ND, params={**flux, "format": "npy"})).astype(np.float64)
    assert listed == [preset["name"] for preset in presets]
    assert page.is_disabled("#ropend-theta")  # fixed by the preset
    assert page.is_enabled("#ropend-text_tokens")
    assert visit.dataset("#ropend-view")["textTokens"] == "4"
    axes = page.text_content("#ropend-axes")
    assert axes == "axis 0: pairs 0–7, axis 1: pairs 8–35, axis 2: pairs 36–63; tokens 0–3: text"
    assert page.text_content("#ropend-where") == "token 30: grid row 2, column 2"  # 4 + 26
    assert visit.distinct_colours("ropend-heatmap") > 100
    shown = visit.hover("ropend-heatmap", 0.7, 0.6)
    token, pair = int(shown["position"]), int(shown["pair"])
    angle = np.arctan2(sin[token, 2 * pair], cos[token, 2 * pair])
    assert np.float32(shown["value"]) == np.float32(angle)
    page.locator("#ropend-grid-angles").scroll_into_view_if_needed()  # below the fold
    shown = visit.hover("ropend-grid-angles", 0.9, 0.2)  # grid row 1, column 10
    assert (shown["row"], shown["column"], shown["position"]) == ("1", "10", str(4 + 22))
    angle = np.arctan2(sin[26, 80], cos[26, 80])  # pair 40: columns 80, 81
    assert np.float32(shown["value"]) == np.float32(angle) != 0
    wan = {"preset": "wan", "grid": "3,4,6"}
    page.goto(f"{visit.url}/?view=ropend&{urlencode(wan)}&pair=5&frame=2")
    page.wait_for_selector('#ropend-view[data-state="ready"]')
    assert page.is_visible("#ropend-frame-control")
    assert (page.text_content("#ropend-grid-note") or "").endswith("of frame 2")
    page.fill("#ropend-frame", "1")
    page.wait_for_selector("#ropend-grid-note:text-matches('of frame 1$')")
    assert "frame=1" in page.url
    assert all(
        "format=raw" in u
        for u in visit.requests
        if urlsplit(u).path == ROPE_ND and "format=json" not in u
    )
    page.click("#ropend-audit")
    page.wait_for_selector('#audit-view[data-state="ready"][data-family="rope-nd"]')
    assert visit.dataset("#audit-view")["params"] == urlencode({**wan, "layout": "interleaved"})
    assert page.is_disabled("#audit-max_len")
    assert visit.distinct_colours("audit-plot") > 3
    assert visit.off_host == []
    assert visit.errors == []


def test_the_vision_view_draws_qwens_windows_and_a_layouts_images(visit: Visit) -> None:
    """The vision towers' view lists the service's models, draws Qwen2.5-VL's table in its
    windows' order (raw, cos and sin) and a pair's angle at each patch, each row where its
    patch is; the default layout's images list their ids and the tower's rows; a Llama 4
    model chosen disables what it does not take."""
    page = visit.page
    qwen = {"model": "qwen2_5_vl", "grid": "8,12", "window_index": "true", "window_size": "56"}
    page.goto(f"{visit.url}/?view=vision&{urlencode(qwen)}&pair=30")
    page.wait_for_selector('#vision-view[data-state="ready"]')
    listed = page.eval_on_selector_all("#vision-preset option", "o => o.map(e => e.value)")
    with httpx.Client(base_url=visit.url, timeout=WAIT) as http:
        models = http.get("/v1/presets").json()["families"]["vision-rotary"]
        cos, sin = load(http.get(VISION, params={**qwen, "format": "npy"})).astype(np.float64)
    assert listed == [model["name"] for model in models]
    assert page.is_enabled("#vision-window_size")
    assert page.is_disabled("#vision-ref_feat_shape")  # EVA-02's
    assert visit.dataset("#vision-view")["tokens"] == "96"
    assert visit.distinct_colours("vision-heatmap") > 50
    page.locator("#vision-grid-angles").scroll_into_view_if_needed()
    shown = visit.hover("vision-grid-angles", 0.45, 0.3)  # patch row 2, column 5
    assert (shown["row"], shown["column"]) == ("2", "5")
    # windows of 2 x 2 merged tokens: patch (2, 5) is merged token (1, 2), the 3rd of the
    # 2nd window (6th in the plain order, row-major over 6 columns: 8th), its 2nd patch
    token = int(shown["position"])
    assert token == 6 * 4 + 1
    angle = np.arctan2(sin[token, 30], cos[token, 30])  # pair 30: rotate-half, column 30
    assert np.float32(shown["value"]) == np.float32(angle) != 0
    page.wait_for_selector('#vision-mrope[data-state="ready"]')
    images = json.loads(visit.dataset("#vision-images")["images"])
    assert images == [
        {"first": 3, "firstRow": 0, "tokens": 6},
        {"first": 11, "firstRow": 24, "tokens": 1},
    ]
    cells = page.eval_on_selector_all(
        "table.vision-image tr", "rows => rows.map(r => [...r.cells].map(c => c.textContent))"
    )
    assert cells[1] == ["3", "3, 3, 3", "0, 0, 0", "0–3", "(0, 0) (0, 1) (1, 0) (1, 1)"]
    assert cells[2] == ["4", "3, 3, 4", "0, 0, 1", "4–7", "(0, 2) (0, 3) (1, 2) (1, 3)"]
    page.select_option("#vision-preset", "llama4")
    assert page.is_disabled("#vision-window_index")
    assert all(
        "format=raw" in u
        for u in visit.requests
        if urlsplit(u).path == VISION and "format=json" not in u
    )
    page.click("#vision-audit")
    page.wait_for_selector('#audit-view[data-state="ready"][data-family="vision-rotary"]')
    assert visit.distinct_colours("audit-plot") > 3
    # a family chosen brings its defaults (data-{family}: vision-rotary's, rope-nd's)
    page.goto(f"{visit.url}/?view=audit")
    page.wait_for_selector('#audit-view[data-state="ready"]')
    for family, defaults in [
        ("vision-rotary", "model=pixtral&grid=32,48"),
        ("rope-nd", "grid=64,64&preset=flux&text_tokens=512"),
    ]:
        page.select_option("#audit-family", family)
        assert page.input_value("#audit-parameters") == defaults
    assert visit.off_host == []
    assert visit.errors == []


@pytest.mark.parametrize(
    ("interleaved", "first"),
    [("false", [0, 0, 1, 1, 1, 2, 2, 2]), ("true", [0, 1, 2, 0, 1, 2, 0, 1])],
)
def test_the_rope_view_shows_which_axis_turns_each_pair(
    visit: Visit, interleaved: str, first: list[int]
) -> None:
    """M-RoPE: the view asks the service for the rows at each axis's unit position ids and
    colours each pair by the axis that moved it, in order or interleaved (Qwen3-VL)."""
    page = visit.page
    query = f"view=rope&head_dim=16&mrope_section=2,3,3&mrope_interleaved={interleaved}"
    page.goto(f"{visit.url}/?{query}")
    page.wait_for_selector('#rope-view[data-state="ready"]')
    assert page.is_visible("#rope-axes-view")
    axes = page.eval_on_selector("#rope-axes", "c => Array.from(c.axes)")
    assert axes == first
    counts = page.text_content("#rope-axes-counts") or ""
    said = ", ".join(
        f"{name} {first.count(i)}" for i, name in enumerate(["temporal", "height", "width"])
    )
    assert said in counts
    assert visit.distinct_colours("rope-axes") > 3
    assert any("/v1/encodings/rotary/positions?" in u for u in visit.requests)
    page.goto(f"{visit.url}/?view=rope&head_dim=16")
    page.wait_for_selector('#rope-view[data-state="ready"]')
    assert page.is_hidden("#rope-axes-view")
    assert visit.errors == []


def _requested(visit: Visit, path: str) -> list[dict[str, str]]:
    """The queries of the page's requests to ``path``, one value a name."""
    return [
        {name: values[-1] for name, values in parse_qs(urlsplit(u).query).items()}
        for u in visit.requests
        if urlsplit(u).path == path
    ]


def _sampled(visit: Visit, prefix: str, note: str) -> None:
    """The view says how it sampled, and shows no problem."""
    page = visit.page
    assert page.is_visible(f"#{prefix}sampling")
    said = page.text_content(f"#{prefix}sampling") or ""
    assert note in said, said
    assert page.is_hidden(f"#{prefix}problem")


def _one_row_each(queries: list[dict[str, str]], max_len: int, step: int) -> None:
    """Every step-th position of ``max_len``, one row a request: within every limit."""
    assert sorted(int(q["start"]) for q in queries) == list(range(0, max_len, step))
    assert all(int(q["stop"]) == int(q["start"]) + 1 for q in queries)


@pytest.mark.parametrize("max_len", REAL_LENGTHS)
def test_the_sinusoidal_view_draws_a_long_table_from_every_step_th_position(
    visit: Visit, max_len: int
) -> None:
    """Past the entries the page holds, it fetches every step-th row, draws the three views
    from them, says so, and every value it shows is the service's at the position named."""
    page = visit.page
    page.goto(f"{visit.url}/?max_len={max_len}&d_model=512&position=70000")
    visit.ready(f"{max_len}x512@10000:interleaved")
    step = max_len // SAMPLES
    assert visit.dataset("body")["step"] == str(step)
    _sampled(visit, "", f"every {step:,}th position of {max_len:,} ({SAMPLES} rows")
    _one_row_each(_requested(visit, TABLE), max_len, step)
    assert visit.distinct_colours("heatmap") > 200
    assert visit.distinct_colours("waves") > 20
    assert visit.distinct_colours("similarity") > 10
    # the position asked for is the nearest drawn
    assert page.eval_on_selector("#similarity", "c => c.position") == round(70000 / step) * step
    assert page.input_value("#position") == str(round(70000 / step) * step)
    with httpx.Client(base_url=visit.url, timeout=WAIT) as http:
        for fx, fy in [(0, 0), (0.5, 0.5), (0.13, 0.77), (1, 1)]:
            shown = visit.hover("heatmap", fx, fy)
            position, dimension = int(shown["position"]), int(shown["dimension"])
            assert position % step == 0
            expected = api_value(http, "interleaved", position, dimension, max_len)
            assert np.float32(shown["value"]) == expected
        assert int(visit.hover("heatmap", 1, 1)["position"]) > max_len - 4 * step
        waves = visit.hover("waves", 1, 0.5)
        assert int(waves["position"]) == max_len - step  # the last position drawn
        for dimension, value in json.loads(waves["values"]).items():
            expected = api_value(http, "interleaved", max_len - step, int(dimension), max_len)
            assert np.float32(value) == expected
    assert visit.off_host == []
    assert visit.errors == []


@pytest.mark.parametrize("max_len", REAL_LENGTHS)
def test_the_rope_view_draws_llama_31_at_its_context_and_past_it(
    visit: Visit, max_len: int
) -> None:
    """Llama 3.1's RoPE at 131,072 positions and at 2^20: the wavelengths from positions 0
    and 1 alone (no table), the angles from every step-th position, each value the
    service's."""
    page = visit.page
    page.goto(f"{visit.url}/?view=rope&max_len={max_len}&{urlencode(LLAMA_31)}")
    page.wait_for_selector('#rope-view[data-state="ready"]')
    step = max_len // SAMPLES
    assert visit.dataset("#rope-view")["step"] == str(step)
    _sampled(visit, "rope-", f"every {step:,}th position of {max_len:,} ({SAMPLES} rows")
    assert visit.distinct_colours("rope-angles") > 50
    assert visit.distinct_colours("rope-wavelengths") > 2
    # scaled, 32 of the 64 pairs (29 unscaled) never turn once in the 8192 positions Llama 3
    # was first trained on
    legend = page.text_content("#rope-legend") or ""
    assert "32 of 64 pairs turn less than once in the original context" in legend, legend
    asked = _requested(visit, ROTARY)
    first = [q for q in asked if (q["start"], q["stop"]) == ("0", "2")]
    assert sorted(q["scaling"] for q in first) == ["llama3", "none"]  # the wavelengths
    _one_row_each([q for q in asked if q not in first], max_len, step)
    query: dict[str, str | int] = {**LLAMA_31, "max_len": max_len, "head_dim": 128}
    with httpx.Client(base_url=visit.url, timeout=WAIT) as http:
        for fx, fy in [(0, 0), (0.31, 0.93), (0.77, 0.5), (1, 1)]:
            shown = visit.hover("rope-angles", fx, fy)
            position, pair = int(shown["position"]), int(shown["pair"])
            assert position % step == 0
            row = {**query, "start": position, "stop": position + 1, "format": "npy"}
            cos, sin = load(http.get(ROTARY, params=row))[:, 0, pair]
            assert (np.float32(shown["cos"]), np.float32(shown["sin"])) == (cos, sin)
    assert visit.off_host == []
    assert visit.errors == []


def test_the_rope_wavelengths_need_no_table(visit: Visit) -> None:
    """A range of positions the service refuses leaves the angles blank and says why; the
    wavelengths, from positions 0 and 1, are drawn all the same."""
    page = visit.page
    page.goto(f"{visit.url}/?view=rope&max_len=131072&start=5&stop=3&{urlencode(LLAMA_31)}")
    page.wait_for_selector('#rope-view[data-state="error"]')
    assert "stop" in page.text_content("#rope-problem")  # type: ignore[operator]
    assert visit.distinct_colours("rope-wavelengths") > 2
    assert visit.distinct_colours("rope-angles") == 1  # blank
    assert visit.off_host == []
    assert all("422" in error for error in visit.errors), visit.errors


@pytest.mark.parametrize("max_len", REAL_LENGTHS)
def test_the_alibi_view_draws_a_long_bias_from_its_last_row(visit: Visit, max_len: int) -> None:
    """A bias of max_len² entries a head: every step-th query and key, read from the last
    query row (an entry depends on i - j alone), one request; each value the service's."""
    page = visit.page
    page.goto(f"{visit.url}/?view=alibi&max_len={max_len}")
    page.wait_for_selector('#alibi-view[data-state="ready"]')
    step = max_len // SAMPLES
    assert visit.dataset("#alibi-view")["step"] == f"{step},{step}"
    _sampled(
        visit,
        "alibi-",
        f"every {step:,}th query and every {step:,}th key of {max_len:,} × {max_len:,}",
    )
    assert _requested(visit, BIAS) == [
        {
            "num_heads": "8",
            "max_len": str(max_len),
            "form": "causal",
            "start": str(max_len - 1),
            "stop": str(max_len),
            "format": "raw",
        }
    ]
    assert visit.distinct_colours("alibi-bias") > 20
    assert visit.distinct_colours("alibi-heads") > 20
    shown = visit.hover("alibi-bias", 0.3, 0.8)
    query, key = int(shown["query"]), int(shown["key"])
    assert (query % step, key % step) == (0, 0)
    assert key <= query  # not masked
    with httpx.Client(base_url=visit.url, timeout=WAIT) as http:
        row: dict[str, str | int] = {
            "num_heads": 8,
            "max_len": max_len,
            "start": query,
            "stop": query + 1,
            "format": "npy",
        }
        assert np.float32(shown["value"]) == load(http.get(BIAS, params=row))[0, 0, key]
    assert visit.off_host == []
    assert visit.errors == []


def test_the_views_keep_under_the_services_element_limit(browser: Browser) -> None:
    """A table the page would hold whole but the service refuses whole (PE_MAX_ELEMENTS)
    comes in slices under the limit, every row of it; an ALiBi bias, from its last row."""
    limit = 100_000
    with running({"PE_MAX_ELEMENTS": str(limit)}) as small, visiting(browser, small) as visit:
        page = visit.page
        page.goto(f"{small}/?max_len=2048&d_model=512")
        visit.ready("2048x512@10000:interleaved")
        assert visit.dataset("body")["step"] == "1"
        assert page.is_hidden("#sampling")
        slices = [q for q in _requested(visit, TABLE) if "start" in q]
        assert sum(int(q["stop"]) - int(q["start"]) for q in slices) == 2048
        assert all((int(q["stop"]) - int(q["start"])) * 512 <= limit for q in slices)
        with httpx.Client(base_url=small, timeout=WAIT) as http:
            for fx, fy in [(0.2, 0.3), (0.9, 0.95)]:
                shown = visit.hover("heatmap", fx, fy)
                position, dimension = int(shown["position"]), int(shown["dimension"])
                expected = api_value(http, "interleaved", position, dimension)
                assert np.float32(shown["value"]) == expected
        page.goto(f"{small}/?view=rope")
        page.wait_for_selector('#rope-view[data-state="ready"]')
        assert visit.dataset("#rope-view")["step"] == "1"
        assert visit.distinct_colours("rope-angles") > 50
        page.goto(f"{small}/?view=alibi&max_len=256")
        page.wait_for_selector('#alibi-view[data-state="ready"]')
        _sampled(visit, "alibi-", "Every entry of 256 × 256, read from the last query row")
        with httpx.Client(base_url=small, timeout=WAIT) as http:
            shown = visit.hover("alibi-bias", 0.4, 0.7)
            query, key = int(shown["query"]), int(shown["key"])
            row = {"num_heads": 8, "max_len": 256, "start": query, "stop": query + 1}
            bias = load(http.get(BIAS, params={**row, "format": "npy"}))
            assert np.float32(shown["value"]) == bias[0, 0, key]
        assert visit.off_host == []
        # the browser reports the refused whole requests itself; nothing else went wrong
        assert all("422" in error for error in visit.errors), visit.errors


# each view with a table over PE_MAX_ELEMENTS = 100,000, its curl command's file, the rows
# the limit allows of it, and the shape saved: sinusoidal 2048 × 512, RoPE 2048 × (64 cos, 64
# sin), ALiBi 8 heads × 256 queries × 256 keys, timestep 1000 × 256, a sin-cos grid 1,536
# tokens × 1152, FLUX's RoPE 4,096 tokens × (128 cos, 128 sin)
_OVER: Final = [
    pytest.param("/?max_len=2048&d_model=512", "", "pe.npy", 195, (195, 512), id="sinusoidal"),
    pytest.param(
        "/?view=rope&max_len=2048&head_dim=64", "rope-", "rope.npz", 781, (781, 64), id="rope"
    ),
    pytest.param("/?view=alibi&max_len=256", "alibi-", "alibi.npy", 48, (8, 48, 256), id="alibi"),
    pytest.param(
        "/?view=timestep&max_len=1000&dim=256",
        "timestep-",
        "timestep.npy",
        390,
        (390, 256),
        id="timestep",
    ),
    pytest.param(
        "/?view=sincos&height=32&width=48&dim=1152",
        "sincos-",
        "sincos-2d.npy",
        86,
        (86, 1152),
        id="sincos",
    ),
    pytest.param(
        "/?view=ropend&grid=64,64", "ropend-", "rope-nd.npz", 390, (390, 128), id="ropend"
    ),
]


@pytest.mark.parametrize(("address", "prefix", "file", "rows", "shape"), _OVER)
def test_the_copied_curl_command_keeps_under_the_services_limit(
    browser: Browser,
    tmp_path: Path,
    address: str,
    prefix: str,
    file: str,
    rows: int,
    shape: tuple[int, ...],
) -> None:
    """A table the service refuses whole: the curl command copied asks for the first rows
    the limit allows and says so in a comment; run as copied, it saves those rows (curl
    --fail-with-body: a refusal would be curl's error, not a file that looks saved)."""
    limit = 100_000
    with running({"PE_MAX_ELEMENTS": str(limit)}) as small, visiting(browser, small) as visit:
        page = visit.page
        page.goto(small + address)
        view = f"#{prefix}view" if prefix else "body"
        page.wait_for_selector(f'{view}[data-state="ready"]')
        page.click(f"#{prefix}copy-curl")
        copied = page.evaluate("navigator.clipboard.readText()")
        assert copied == page.text_content(f"#{prefix}curl")
        note, command = copied.split("\n")
        assert note.startswith("# "), note
        assert f"PE_MAX_ELEMENTS ({limit:,})" in note, note
        assert f"rows 0 to {rows - 1:,}" in note, note
        assert command.startswith(f"curl --fail-with-body -o {file} ")
        done = subprocess.run(
            ["bash", "-c", copied], cwd=tmp_path, capture_output=True, timeout=WAIT
        )
        assert done.returncode == 0, done.stderr
        saved = tmp_path / file
        if file.endswith(".npz"):
            with np.load(saved, allow_pickle=False) as arrays:  # closed now, not when collected
                first = arrays["cos"]
        else:
            first = np.load(saved, allow_pickle=False)
        assert first.shape == shape
        href = page.get_attribute(f"#{prefix}copy-curl", "href")
        assert href is not None
        assert f"start=0&stop={rows}" in href
        with httpx.Client(base_url=small, timeout=WAIT) as http:
            assert http.get(href).content == saved.read_bytes()  # the link: the same rows
        assert visit.off_host == []
        assert all("422" in error for error in visit.errors), visit.errors


AUDIT: Final = "/v1/audit/rotary"
LLAMA_31_AUDIT: Final = {"head_dim": "128", **LLAMA_31, "max_len": "131072"}


def test_the_audit_view_draws_llama_31s_audit(visit: Visit) -> None:
    """The audit view asks for Llama 3.1's audit at its context (JSON), draws a line a path
    and lists where each first passes a threshold: each the service's."""
    page = visit.page
    page.goto(visit.url + "/?view=audit")
    page.wait_for_selector('#audit-view[data-state="ready"]')
    asked = _requested(visit, AUDIT)
    assert asked == [LLAMA_31_AUDIT]  # the page's defaults, no format: the JSON answer
    assert visit.distinct_colours("audit-plot") > 3
    cell = '#audit-table tr[data-path="bf16-positions"] td[data-name="1e-3"]'
    assert page.text_content(cell) == "257"  # bfloat16 holds the integers to 256
    assert "family=rotary" in page.url
    with httpx.Client(base_url=visit.url, timeout=WAIT) as http:
        document = http.get(AUDIT, params=LLAMA_31_AUDIT).json()
    paths = document["paths"]
    assert page.locator("#audit-legend span").count() == len(paths)
    for path in paths:
        row = page.locator(f'#audit-table tr[data-path="{path["name"]}"] td')
        cells = row.evaluate_all(
            "c => Object.fromEntries(c.map(e => [e.dataset.name, e.dataset.value]))"
        )
        expected = {**path["first_over"], "misdirected": path["first_misdirected"]}
        assert cells == {k: "" if v is None else str(v) for k, v in expected.items()}
    # hovering reads each path's largest error in the band under the mouse
    shown = visit.hover("audit-plot", 0.7, 0.5)
    band = int(shown["start"]), int(shown["stop"])
    values = json.loads(shown["values"])
    for path in paths:
        (at,) = [b for b in path["bands"] if (b["start"], b["stop"]) == band]
        assert values[path["name"]] == at["max_error"]
    # the other family takes its own parameters; the address keeps what is drawn
    page.select_option("#audit-family", "sinusoidal")
    page.wait_for_selector('#audit-view[data-state="ready"][data-family="sinusoidal"]')
    assert page.input_value("#audit-parameters") == "d_model=512"
    assert visit.distinct_colours("audit-plot") > 3
    assert page.text_content(cell) == "257"
    page.goto(f"{visit.url}/?view=audit&family=sinusoidal&max_len=4096&parameters=d_model%3D64")
    page.wait_for_selector('#audit-view[data-state="ready"][data-params="d_model=64&max_len=4096"]')
    assert page.input_value("#audit-family") == "sinusoidal"
    assert visit.off_host == []
    assert visit.errors == []


def test_the_audit_view_audits_a_pasted_config(visit: Visit) -> None:
    """A config.json pasted is posted to the audit's from-config; bad JSON is not sent."""
    page = visit.page
    page.goto(visit.url + "/?view=audit")
    page.wait_for_selector('#audit-view[data-state="ready"]')
    config = {
        "head_dim": 64,
        "max_position_embeddings": 8192,
        "rope_theta": 10000.0,
        "rope_scaling": {"rope_type": "linear", "factor": 2.0},
    }
    page.fill("#audit-config", json.dumps(config))
    page.fill("#audit-max_len", "8192")
    page.click("#audit-controls button[type=submit]")
    page.wait_for_selector('#audit-view[data-state="ready"][data-params="max_len=8192"]')
    with httpx.Client(base_url=visit.url, timeout=WAIT) as http:
        document = http.post(f"{AUDIT}/from-config", params={"max_len": 8192}, json=config).json()
    cell = '#audit-table tr[data-path="library"] td[data-name="1e-3"]'
    expected = document["paths"][0]["first_over"]["1e-3"]
    assert page.text_content(cell) == ("—" if expected is None else str(expected))
    page.fill("#audit-config", "{not json")
    page.click("#audit-controls button[type=submit]")
    page.wait_for_selector('#audit-view[data-state="error"]')
    assert "not JSON" in (page.text_content("#audit-problem") or "")
    assert visit.off_host == []
    assert visit.errors == []


def test_the_audit_view_shows_the_services_problems(visit: Visit) -> None:
    page = visit.page
    page.goto(f"{visit.url}/?view=audit&max_len=0")
    page.wait_for_selector('#audit-view[data-state="error"]')
    assert "max_len" in page.text_content("#audit-problem")  # type: ignore[operator]
    assert page.is_visible("#audit-problem")
    page.fill("#audit-max_len", "4096")
    page.click("#audit-controls button[type=submit]")
    page.wait_for_selector('#audit-view[data-state="ready"]')
    assert page.is_hidden("#audit-problem")
    assert visit.off_host == []
    # the browser reports the refused request itself; nothing else went wrong
    assert all("422" in error for error in visit.errors), visit.errors


def _colour_pixels(visit: Visit, canvas: str, colour: str) -> int:
    """How many pixels of ``canvas`` are ``colour`` (#rrggbb), within anti-aliasing's reach."""
    return visit.page.eval_on_selector(  # type: ignore[no-any-return]
        f"#{canvas}",
        """(c, hex) => {
             const want = [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16));
             const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
             let found = 0;
             for (let i = 0; i < d.length; i += 4) {
               const near = want.every((v, k) => Math.abs(d[i + k] - v) <= 24);
               if (near && d[i + 3] > 200) found += 1;
             }
             return found; }""",
        colour,
    )


def test_every_path_of_the_audit_shows(visit: Visit) -> None:
    """Llama 3.1's audit: float32-positions has library's error at every band (and bf16- and
    fp16-positions to 256 and 2048): each path's line still shows on the chart, and the view
    says which path a model loaded in bfloat16 by transformers follows."""
    page = visit.page
    page.goto(visit.url + "/?view=audit")
    page.wait_for_selector('#audit-view[data-state="ready"]')
    drawn = page.eval_on_selector("#audit-plot", "c => c.series.map((s) => [s.name, s.color])")
    assert page.locator("#audit-legend span").all_text_contents() == [name for name, _ in drawn]
    hidden = [name for name, colour in drawn if _colour_pixels(visit, "audit-plot", colour) < 10]
    assert hidden == [], hidden
    assert page.is_visible("#audit-bf16")
    assert "the bf16-table path" in " ".join((page.text_content("#audit-bf16") or "").split())
    page.select_option("#audit-family", "sinusoidal")
    page.wait_for_selector('#audit-view[data-state="ready"][data-family="sinusoidal"]')
    assert page.is_hidden("#audit-bf16")  # a RoPE table's note
    assert visit.off_host == []
    assert visit.errors == []


@dataclass(frozen=True)
class Drawn:
    """What a view's answer draws, and a value of one of its controls the service refuses."""

    address: str
    state: str  # the element whose data-state the view keeps
    form: str
    canvases: list[str]
    readings: list[str]  # legends, readings, notes and links of the answer
    refused: tuple[str, str]
    kept: tuple[str, ...] = ()  # canvases the refused request drew itself, which stay


REFUSED: Final = [
    pytest.param(
        Drawn(
            "/?max_len=64&d_model=16",
            "body",
            "#controls",
            ["heatmap", "waves", "similarity"],
            ["#legend", "#sampling", "#curl", "#heatmap-png"],
            ("#d_model", "0"),
        ),
        id="sinusoidal",
    ),
    pytest.param(
        Drawn(
            "/?view=rope&max_len=256&mrope_section=16,24,24",
            "#rope-view",
            "#rope-controls",
            ["rope-angles", "rope-wavelengths", "rope-axes"],
            [
                "#rope-legend",
                "#rope-attention",
                "#rope-axes-counts",
                "#rope-sampling",
                "#rope-curl",
            ],
            ("#rope-head_dim", "0"),
        ),
        id="rope",
    ),
    pytest.param(
        Drawn(
            "/?view=rope&max_len=256",
            "#rope-view",
            "#rope-controls",
            ["rope-angles"],
            ["#rope-sampling", "#rope-curl"],
            ("#rope-stop", "0"),
            kept=("rope-wavelengths",),  # positions 0 and 1 are not refused
        ),
        id="rope-table",
    ),
    pytest.param(
        Drawn(
            "/?view=alibi",
            "#alibi-view",
            "#alibi-controls",
            ["alibi-bias", "alibi-heads"],
            ["#alibi-slopes", "#alibi-sampling", "#alibi-curl"],
            ("#alibi-num_heads", "0"),
        ),
        id="alibi",
    ),
    pytest.param(
        Drawn(
            "/?view=timestep&max_len=64&dim=16",
            "#timestep-view",
            "#timestep-controls",
            ["timestep-heatmap", "timestep-lines"],
            ["#timestep-legend", "#timestep-sampling", "#timestep-curl", "#timestep-received"],
            ("#timestep-dim", "0"),
        ),
        id="timestep",
    ),
    pytest.param(
        Drawn(
            "/?view=sincos&height=8&width=12&dim=64",
            "#sincos-view",
            "#sincos-controls",
            ["sincos-heatmap", "sincos-halves", "sincos-grid"],
            ["#sincos-halves-counts", "#sincos-grid-note", "#sincos-sampling", "#sincos-curl"],
            ("#sincos-dim", "0"),
        ),
        id="sincos",
    ),
    pytest.param(
        Drawn(
            "/?view=ropend&grid=8,12",
            "#ropend-view",
            "#ropend-controls",
            ["ropend-heatmap", "ropend-columns", "ropend-grid-angles"],
            ["#ropend-axes", "#ropend-where", "#ropend-grid-note", "#ropend-curl"],
            ("#ropend-grid", "0"),
        ),
        id="ropend",
    ),
    pytest.param(
        Drawn(
            "/?view=vision&grid=8,12",
            "#vision-view",
            "#vision-controls",
            ["vision-heatmap", "vision-grid-angles"],
            ["#vision-grid-note", "#vision-curl"],
            ("#vision-grid", "0"),
        ),
        id="vision",
    ),
    pytest.param(
        Drawn(
            "/?view=audit",
            "#audit-view",
            "#audit-controls",
            ["audit-plot"],
            ["#audit-legend", "#audit-reach", "#audit-firsts"],
            ("#audit-max_len", "0"),
        ),
        id="audit",
    ),
    pytest.param(
        Drawn(
            "/?view=compare",
            "#compare-view",
            "#compare-controls",
            ["compare-plot"],
            ["#compare-legend", "#compare-first"],
            ("#compare-stop", "1"),
        ),
        id="compare",
    ),
]


@pytest.mark.parametrize("drawn", REFUSED)
def test_a_refusal_takes_the_earlier_chart_down(visit: Visit, drawn: Drawn) -> None:
    """After a request the service refuses, every view shows the problem, and none of what
    the earlier answer drew: its charts are blank, its legends, readings, notes and links
    are gone (empty or hidden), and hovering a chart reads nothing."""
    page = visit.page
    page.goto(visit.url + drawn.address)
    page.wait_for_selector(f'{drawn.state}[data-state="ready"]')
    for canvas in drawn.canvases:
        assert visit.distinct_colours(canvas) > 3, canvas
    assert any(_shown(page, reading) for reading in drawn.readings)
    control, value = drawn.refused
    page.fill(control, value)
    page.click(f"{drawn.form} button[type=submit]")
    page.wait_for_selector(f'{drawn.state}[data-state="error"]')
    problem = page.locator(f"{drawn.state} .problem").first
    assert problem.is_visible()
    assert control.split("-")[-1].lstrip("#") in (problem.text_content() or "")
    blank = {canvas: visit.distinct_colours(canvas) for canvas in drawn.canvases}
    assert blank == dict.fromkeys(drawn.canvases, 1)  # each canvas transparent throughout
    assert [r for r in drawn.readings if _shown(page, r)] == []
    for canvas in drawn.kept:
        assert visit.distinct_colours(canvas) > 3, canvas
    for canvas in drawn.canvases:
        box = page.locator(f"#{canvas}").bounding_box()
        if box and box["width"] and box["height"]:  # the M-RoPE strip is hidden with it
            page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
            assert page.is_hidden("#readout"), canvas  # nothing to read
    assert visit.off_host == []
    assert all("422" in error for error in visit.errors), visit.errors


def _shown(page: Page, selector: str) -> bool:
    """Whether ``selector`` is on show with something in it."""
    element = page.locator(selector)
    return element.is_visible() and bool((element.text_content() or "").strip())


def test_the_compare_view_draws_two_engines_difference(visit: Visit) -> None:
    """transformers' dynamic scaling against vLLM's: the largest difference and angle drift
    per band, and where the difference first passes each threshold, as the service says."""
    page = visit.page
    page.goto(visit.url + "/?view=compare")
    page.wait_for_selector('#compare-view[data-state="ready"]')
    assert visit.distinct_colours("compare-plot") > 3
    assert page.locator("#compare-legend span").count() == 2  # difference, angle drift
    tables = {name: json.loads(page.input_value(f"#compare-{name}")) for name in ("a", "b")}
    assert tables["b"]["parameters"] == {**tables["a"]["parameters"], "engine": "vllm"}
    with httpx.Client(base_url=visit.url, timeout=WAIT) as http:
        body = {**tables, "start": 4096, "stop": 16384}
        document = http.post("/v1/compare", json=body).json()
    first = json.loads(visit.dataset("#compare-view")["firstOver"])
    assert first == document["first_over"]
    said = page.text_content("#compare-first") or ""
    for threshold, at in first.items():
        assert (f"{threshold} at {at:,}" if at is not None else f"{threshold} never") in said
    shown = visit.hover("compare-plot", 0.75, 0.5)
    (band,) = [b for b in document["bands"] if b["start"] == int(shown["start"])]
    values = json.loads(shown["values"])
    assert values["largest difference"] == band["max_difference"]
    assert values["largest angle drift (radians)"] == band["max_angle_drift"]
    assert [urlsplit(u).path for u in visit.requests].count("/v1/compare") == 1
    # a table that is not JSON is said so, and nothing is asked
    page.fill("#compare-a", "{not json")
    page.click("#compare-controls button[type=submit]")
    page.wait_for_selector('#compare-view[data-state="error"]')
    assert "table a: not JSON" in page.text_content("#compare-problem")  # type: ignore[operator]
    assert [urlsplit(u).path for u in visit.requests].count("/v1/compare") == 1
    assert visit.off_host == []
    assert visit.errors == []


def test_the_check_view_verifies_and_identifies_a_users_table(visit: Visit, tmp_path: Path) -> None:
    """A .npy of Llama 3.1's tables without their scaling, picked in the check view, is
    posted as it is to /v1/verify with the claim's parameters: the match, a row a band and
    the scaling's diagnosis, linked to the GET that makes the file, are the service's.
    A small table dropped on the view and identified names the preset that makes it; a file
    that is not .npy is said so without a request."""
    page = visit.page
    claim = {"family": "rotary", "head_dim": "64", **LLAMA_31}
    with httpx.Client(base_url=visit.url, timeout=WAIT) as http:
        table = http.get(
            ROTARY,
            params={"max_len": 4096, "head_dim": 64, "base": 500000},
            headers={"accept": "application/x-npy"},
        ).content
        document = http.post(
            "/v1/verify", params=claim, content=table, headers={"content-type": "application/x-npy"}
        ).json()
    (tmp_path / "mine.npy").write_bytes(table)
    page.goto(f"{visit.url}/?{urlencode({'view': 'check', 'claim': urlencode(claim)})}")
    page.wait_for_selector('#check-view[data-state="idle"]')
    page.set_input_files("#check-file", str(tmp_path / "mine.npy"))
    page.wait_for_selector('#check-view[data-state="ready"]')
    assert "float32, (2, 4096, 64), cos and sin" in (page.text_content("#check-file-said") or "")
    assert _requested(visit, "/v1/verify") == [claim]
    assert document["match"] == "different"
    assert page.get_attribute("#check-match", "data-match") == "different"
    shown = page.locator("#check-bands tr").evaluate_all(
        "rows => rows.map(r => [Number(r.dataset.start), Number(r.querySelector("
        "'td[data-name=max]').dataset.value)])"
    )
    assert shown == [[b["start"], b["max_difference"]] for b in document["bands"]]
    said = page.text_content("#check-firsts") or ""
    assert f"1e-3 at {document['first_over']['1e-3']:,}" in said
    mistakes = [d["mistake"] for d in document["diagnoses"]]
    assert "scaling" in mistakes
    assert (
        page.locator("#check-diagnoses li").evaluate_all(
            "items => items.map(i => i.dataset.mistake)"
        )
        == mistakes
    )
    href = page.get_attribute('#check-diagnoses li[data-mistake="scaling"] a', "href") or ""
    (diagnosis,) = [d for d in document["diagnoses"] if d["mistake"] == "scaling"]
    assert urlsplit(href).path == f"/v1/encodings/{diagnosis['family']}"
    got = {name: values[-1] for name, values in parse_qs(urlsplit(href).query).items()}
    assert got == {name: str(value) for name, value in diagnosis["parameters"].items()}
    # identify: a small sinusoidal table, dropped on the view
    with httpx.Client(base_url=visit.url, timeout=WAIT) as http:
        small = http.get(TABLE, params={"max_len": 64, "d_model": 64, "format": "npy"}).content
    page.evaluate(
        """bytes => { const file = new File([new Uint8Array(bytes)], "small.npy");
                      const data = new DataTransfer(); data.items.add(file);
                      document.getElementById("check-drop").dispatchEvent(
                        new DragEvent("drop", {dataTransfer: data, bubbles: true})); }""",
        list(small),
    )
    page.wait_for_selector('#check-file-said:has-text("small.npy")')
    page.wait_for_selector('#check-view[data-state="ready"]')  # verified against the claim
    page.select_option("#check-mode", "identify")
    page.wait_for_selector('#check-view[data-state="ready"][data-params="mode=identify"]')
    assert page.is_hidden("#check-claim-box")
    assert page.get_attribute("#check-candidates li", "data-family") == "sinusoidal"
    assert len(_requested(visit, "/v1/identify")) == 1
    assert "view=check" in page.url
    assert "mode=identify" in page.url
    # not an .npy file: the page says so and asks nothing
    asked = len(visit.requests)
    (tmp_path / "table.npy").write_bytes(b"not a table")
    page.set_input_files("#check-file", str(tmp_path / "table.npy"))
    page.wait_for_selector('#check-view[data-state="error"]')
    assert "not an .npy file" in (page.text_content("#check-problem") or "")
    assert page.locator("#check-bands tr").count() == 0
    assert len(visit.requests) == asked
    assert visit.off_host == []
    assert visit.errors == []


def test_swagger_ui_works_offline(visit: Visit) -> None:
    """/docs draws every operation of the API from its own assets, under its strict
    policy (no console error: nothing was refused), and runs a request from the page."""
    page = visit.page
    page.goto(visit.url + "/docs")
    page.wait_for_selector(".opblock")
    spec = httpx.get(visit.url + "/openapi.json", timeout=WAIT).json()
    operations = sum(len(methods) for methods in spec["paths"].values())
    assert page.locator(".opblock").count() == operations
    assert page.locator(".opblock-summary-path", has_text=TABLE).count() >= 1
    health = page.locator(".opblock", has=page.locator('[data-path="/healthz"]'))
    health.locator(".opblock-summary").click()
    health.locator("button.try-out__btn").click()
    health.locator("button.execute").click()
    status = health.locator(".live-responses-table tbody .response-col_status")
    status.wait_for()
    assert status.inner_text().strip().startswith("200")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "docs.png"))
    assert any(urlsplit(u).path == "/docs/assets/swagger-ui-bundle.js" for u in visit.requests)
    assert visit.off_host == []
    assert visit.errors == []


def test_swagger_uis_try_it_out_of_every_post_is_answered(visit: Visit) -> None:
    """In /docs, each POST's "Try it out" run as Swagger UI pre-fills it (its example body,
    the parameters it fills) is answered with a 2xx."""
    page = visit.page
    page.goto(visit.url + "/docs")
    page.wait_for_selector(".opblock")
    with httpx.Client(timeout=WAIT) as http:
        spec = http.get(visit.url + "/openapi.json").json()
    posts = [
        op["operationId"] for ops in spec["paths"].values() for m, op in ops.items() if m == "post"
    ]
    statuses = {}
    for operation in posts:
        block = page.locator(f'.opblock[id$="-{operation}"]')
        block.locator(".opblock-summary").click()
        block.locator("button.try-out__btn").click()
        block.locator("button.execute").click()
        # the answer's status, or at once the fields Swagger UI will not send blank
        status = block.locator(".live-responses-table tbody .response-col_status")
        blank = block.locator(".parameters .invalid")
        status.or_(blank).first.wait_for()
        statuses[operation] = "blank" if blank.count() else status.inner_text().strip()[:3]
        block.locator(".opblock-summary").click()  # folded again
    assert all(found.startswith("2") for found in statuses.values()), statuses
    assert visit.off_host == []
    assert visit.errors == []


def test_redoc_works_offline(visit: Visit) -> None:
    page = visit.page
    page.goto(visit.url + "/redoc")
    page.wait_for_selector(f'[data-section-id="operation/{"getSinusoidalTable"}"]')
    assert page.locator("[data-section-id^='operation/']").count() > 10
    assert any(urlsplit(u).path == "/docs/assets/redoc.standalone.js" for u in visit.requests)
    assert visit.off_host == []
    # ReDoc's one attempt to reach another host, its logo from a CDN, is refused by the page's
    # policy (before any request is made); ReDoc then leaves the logo out
    assert all("cdn.redoc.ly" in error for error in visit.errors), visit.errors


class _Page(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"<!doctype html><title>elsewhere</title><p>another origin</p>"
        self.send_response(200)
        self.send_header("content-type", "text/html")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def another_origin() -> Iterator[str]:
    """A page served from another origin (another port of this host)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


# what a page of another origin does with the API: a table, its shape from X-Shape; the
# table again with its ETag (If-None-Match needs a preflight); an apply of a posted .npy
# (so does its Content-Type); the HEAD of a table
_READ_THE_API = """async ({api, npy}) => {
  try {
    const url = api + "/v1/encodings/sinusoidal?max_len=6&d_model=4&format=raw";
    const table = await fetch(url);
    const values = Array.from(new Float32Array(await table.arrayBuffer()));
    const etag = table.headers.get("ETag");
    const again = await fetch(url, {headers: {"If-None-Match": etag}, cache: "no-store"});
    const apply = api + "/v1/encodings/sinusoidal/apply?max_len=6&scale=1&format=raw";
    const applied = await fetch(apply, {
      method: "POST", headers: {"Content-Type": "application/x-npy"}, body: new Uint8Array(npy)});
    const sum = Array.from(new Float32Array(await applied.arrayBuffer()));
    const head = await fetch(url.replace("max_len=6", "max_len=7"), {method: "HEAD"});
    return {status: table.status, shape: table.headers.get("X-Shape"),
            dtype: table.headers.get("X-Dtype"), etag, values, again: again.status,
            applied: applied.status, appliedShape: applied.headers.get("X-Shape"), sum,
            head: head.status, headShape: head.headers.get("X-Shape"),
            headLength: head.headers.get("Content-Length")};
  } catch (error) {
    return {error: String(error)};
  }
}"""


def _read_the_api(browser: Browser, api: str) -> dict[str, Any]:
    """What a page of another origin reads of the API at ``api``. The requests are watched,
    not intercepted: with interception, Playwright answers CORS preflights itself, and the
    service's own answers to them would go untested."""
    context = browser.new_context()
    context.set_default_timeout(WAIT * 1000)
    requested: list[str] = []
    context.on("request", lambda request: requested.append(request.url))
    try:
        with another_origin() as origin:
            page = context.new_page()
            page.goto(origin + "/")
            npy = list(npy_bytes(np.zeros((2, 4), dtype=np.float32)))
            found: dict[str, Any] = page.evaluate(_READ_THE_API, {"api": api, "npy": npy})
    finally:
        context.close()
    assert {urlsplit(u).hostname for u in requested} == {"127.0.0.1"}, requested
    return found


def _preflights(api: str) -> dict[str, float]:
    """Preflights answered (204), by route."""
    counted = requests_counted(httpx.get(api + "/metrics", timeout=WAIT).text)
    return {
        route: value
        for (method, route, status), value in counted.items()
        if method == "OPTIONS" and status == "204"
    }


def test_a_page_of_another_origin_reads_the_api(browser: Browser, url: str) -> None:
    before = _preflights(url)
    found = _read_the_api(browser, url)
    assert "error" not in found, found
    assert (found["status"], found["shape"], found["dtype"]) == (200, "6,4", "float32")
    table = np.array(found["values"], dtype=np.float32).reshape(6, 4)
    expected = httpx.get(
        url + TABLE, params={"max_len": 6, "d_model": 4, "format": "npy"}, timeout=WAIT
    )
    np.testing.assert_array_equal(table, load(expected))
    assert found["etag"].startswith('"')
    assert found["again"] == 304
    assert (found["applied"], found["appliedShape"]) == (200, "2,4")
    np.testing.assert_array_equal(np.array(found["sum"], dtype=np.float32).reshape(2, 4), table[:2])
    assert (found["head"], found["headShape"], found["headLength"]) == (200, "7,4", str(7 * 16))
    after = _preflights(url)
    for route in (TABLE, APPLY):  # If-None-Match and a Content-Type of .npy needed one
        assert after.get(route, 0) > before.get(route, 0), after


def test_without_cors_a_page_of_another_origin_cannot_read_the_api(browser: Browser) -> None:
    with running({"PE_CORS_ORIGINS": ""}) as closed:
        found = _read_the_api(browser, closed)
    assert "Failed to fetch" in found.get("error", ""), found
