"""The explorer's page and files: served with their validators, from this origin only."""

from __future__ import annotations

import dataclasses
import html
import json
import math
import re
import shutil
import subprocess
import urllib.parse
from html.parser import HTMLParser
from typing import Any, Final

import httpx
import numpy as np
import pytest

from service.audit import paths
from service.encodings import (
    alibi,
    registry,
    rope_nd,
    rotary,
    scalings,
    sincos2d,
    sincos3d,
    timestep,
    vision_rotary,
)
from service.encodings.catalogue import PRESETS
from service.routes.explorer import FILES
from tests.support import SMALL_LIMITS, assert_problem, load

ROTARY = "/v1/encodings/rotary"
TIMESTEP = "/v1/encodings/timestep"
SINCOS = "/v1/encodings"
ROPE_ND = "/v1/encodings/rope-nd"
VISION = "/v1/encodings/vision-rotary"
SCRIPTS = [
    "explorer.js",
    "rope.js",
    "alibi.js",
    "timestep.js",
    "sincos.js",
    "ropend.js",
    "vision.js",
    "check.js",
    "audit.js",
]


def test_the_explorer_page_is_served_with_its_files(api: httpx.Client) -> None:
    page = api.get("/")
    assert page.status_code == 200
    assert page.headers["content-type"] == "text/html; charset=utf-8"
    policy = page.headers["content-security-policy"]
    assert "default-src 'none'" in policy
    assert "connect-src 'self'" in policy
    links = re.findall(r'(?:src|href)="([^"]*)"', page.text)
    assert "/explorer/explorer.css" in links
    # every view's script, the view switch (explorer.js) first: the others use its helpers
    scripts = re.findall(r'<script src="/explorer/([^"]+)" defer></script>', page.text)
    assert scripts == SCRIPTS
    # nothing from another host: every address is on this origin or inline
    assert all(link.startswith(("/", "#", "data:")) for link in links), links
    assets = [(name, "text/javascript") for name in SCRIPTS] + [("explorer.css", "text/css")]
    for name, kind in assets:
        asset = api.get(f"/explorer/{name}")
        assert asset.status_code == 200
        assert asset.headers["content-type"].startswith(kind)
        assert not re.search(r"""["'`(]\s*(https?:)?//""", asset.text), name  # no other host
        again = api.get(f"/explorer/{name}", headers={"if-none-match": asset.headers["etag"]})
        assert again.status_code == 304
    assert api.get("/", headers={"if-none-match": page.headers["etag"]}).status_code == 304


@pytest.mark.parametrize("name", ["index.html", "nope.js", "..%2Fviews.py", "explorer.JS"])
def test_only_the_explorer_files_are_served(api: httpx.Client, name: str) -> None:
    assert_problem(api.get(f"/explorer/{name}"), 404)


def test_the_preset_control_offers_every_preset(api: httpx.Client) -> None:
    control = api.get("/").text.split('id="preset"')[1].split("</select>")[0]
    assert re.findall(r'<option value="([^"]+)"', control) == list(PRESETS)


class _Controls(HTMLParser):
    """The page's form controls (input, select with its options) and labels, with their
    attributes, in document order."""

    def __init__(self) -> None:
        super().__init__()
        self.controls: dict[str, dict[str, str | None]] = {}
        self.options: dict[str, list[str]] = {}
        self.labels: list[dict[str, str | None]] = []  # a label's attributes, and its control's id
        self._select: str | None = None
        self._label: dict[str, str | None] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "label":
            self._label = found
            self.labels.append(found)
        elif tag in ("input", "select") and found.get("id"):
            self.controls[str(found["id"])] = found
            if self._label is not None:
                self._label["control"] = found["id"]
            if tag == "select":
                self._select = found["id"]
                self.options[str(found["id"])] = []
        elif tag == "option" and self._select:
            self.options[self._select].append(str(found["value"]))

    def handle_endtag(self, tag: str) -> None:
        if tag == "select":
            self._select = None
        elif tag == "label":
            self._label = None


def _controls(api: httpx.Client) -> _Controls:
    page = _Controls()
    page.feed(api.get("/").text)
    return page


VIEWS = [
    "sinusoidal",
    "rope",
    "alibi",
    "timestep",
    "sincos",
    "ropend",
    "vision",
    "audit",
    "compare",
    "check",
]


def test_the_page_has_a_view_each_for_the_tables_the_audit_and_the_comparison(
    api: httpx.Client,
) -> None:
    text = api.get("/").text
    tabs = re.findall(r'<a href="([^"]+)" data-view="([^"]+)">', text)
    assert tabs == [("/", "sinusoidal")] + [(f"/?view={view}", view) for view in VIEWS[1:]]
    for view in VIEWS:
        assert f'id="{view}-view"' in text
    # only the sinusoidal view shows before the script runs; the others are hidden
    for view in VIEWS[1:]:
        assert re.search(rf'id="{view}-view"[^>]*\shidden', text)
    assert not re.search(r'id="sinusoidal-view"[^>]*\shidden', text)
    # each view shows the service's problems in a place of its own, as the sinusoidal one
    for view in VIEWS[1:]:
        assert f'id="{view}-problem" class="problem" role="alert" hidden' in text
        assert f'id="{view}-status"' in text
    # and says in a place of its own when it draws every step-th position (hidden until then)
    for prefix in ("", "rope-", "alibi-", "timestep-", "sincos-", "ropend-", "vision-"):
        assert f'<p id="{prefix}sampling" class="sampling" hidden></p>' in text


def test_the_rope_controls_offer_what_the_service_takes(api: httpx.Client) -> None:
    page = _controls(api)
    assert page.options["rope-scaling"] == list(scalings.SCALINGS)
    assert page.options["rope-convention"] == list(rotary.CONVENTIONS)
    assert page.options["rope-rounding"] == list(registry.ROUNDINGS)
    # a scaling's parameter is shown (and sent) with exactly the scalings that take it, so
    # the page never sends a parameter the chosen scaling would refuse (422)
    shown = {
        str(page.controls[str(label["control"])]["name"]): str(label["data-scalings"]).split()
        for label in page.labels
        if label.get("data-scalings")
    }
    takes = {
        name: [s for s in scalings.SCALINGS if name in scalings.PARAMETERS[s]]
        for name in scalings.ALL_PARAMETERS
    }
    assert shown == takes
    for name in shown:
        assert page.controls[f"rope-{name}"]["name"] == name


def test_the_alibi_controls_offer_every_form(api: httpx.Client) -> None:
    page = _controls(api)
    assert page.options["alibi-form"] == list(alibi.FORMS)
    for name in ("num_heads", "max_len", "key_len"):
        assert page.controls[f"alibi-{name}"]["name"] == name


def test_the_timestep_controls_offer_what_the_service_takes(api: httpx.Client) -> None:
    """A control a parameter of the embedding (sent when the preset takes it, blank: the
    preset's), the dtypes and roundings the service knows; the preset offered before the
    script lists the service's is one of them."""
    page = _controls(api)
    box = api.get("/").text.split('id="timestep-parameters"')[1].split("</fieldset>")[0]
    names = re.findall(r'<(?:input|select) id="timestep-([a-z_]+)" name="\1"', box)
    assert names == list(timestep.PARAMETERS)
    assert page.options["timestep-timestep_dtype"] == ["", *timestep.TIMESTEP_DTYPES]
    assert page.options["timestep-flip_sin_to_cos"] == ["", "false", "true"]
    assert page.options["timestep-rounding"] == list(registry.ROUNDINGS)
    (offered,) = page.options["timestep-preset"]
    listed = api.get("/v1/presets").json()["families"]["timestep"]
    assert offered in [preset["name"] for preset in listed]
    for preset in listed:  # what timestep.js reads of each
        assert {"name", "summary", "follows", "fixes", "takes", "rows"} <= set(preset)
        assert set(preset["takes"]) <= set(names)
    for name in ("max_len", "dim"):
        assert page.controls[f"timestep-{name}"]["name"] == name


GRIDS: Final = {"sincos-2d": sincos2d.PARAMETERS, "sincos-3d": sincos3d.PARAMETERS}


def test_the_sincos_controls_offer_what_the_service_takes(api: httpx.Client) -> None:
    """A family each (its preset and a control a parameter, sent when the preset takes it,
    blank: the preset's), the grid's controls named as the query's; the preset offered
    before the script lists the service's is one of them."""
    page = _controls(api)
    text = api.get("/").text
    assert page.options["sincos-family"] == list(GRIDS)
    assert page.options["sincos-rounding"] == list(registry.ROUNDINGS)
    listed = api.get("/v1/presets").json()["families"]
    for family, parameters in GRIDS.items():
        box = text.split(f'id="{family}-parameters"')[1].split("</fieldset>")[0]
        names = re.findall(rf'<(?:input|select) id="{family}-([a-z_]+)" name="\1"', box)
        assert names == list(parameters)
        (offered,) = page.options[f"{family}-preset"]
        assert offered in [preset["name"] for preset in listed[family]]
        for preset in listed[family]:  # what sincos.js reads of each, through familyPresets
            assert {"name", "summary", "follows", "fixes", "takes", "rows"} <= set(preset)
            assert set(preset["takes"]) <= set(names)
        for name in names:
            if name in ("interleave_sin_cos", "reverse_coord"):
                assert page.options[f"{family}-{name}"] == ["", "false", "true"]
    for name in ("frames", "height", "width", "dim"):
        assert page.controls[f"sincos-{name}"]["name"] == name


def _grid_table(api: httpx.Client, family: str, **query: str) -> tuple[dict[str, Any], Any]:
    """The one-row JSON answer sincos.js reads the grid from, and the raw table."""
    document = api.get(f"{SINCOS}/{family}", params={**query, "start": "0", "stop": "1"})
    assert document.status_code == 200, document.text
    answer = api.get(f"{SINCOS}/{family}", params={**query, "format": "raw"})
    assert answer.status_code == 200, answer.text
    assert answer.headers["x-dtype"] == "float32"
    return document.json(), load(answer)


def _follows(table: Any, grid: dict[str, Any]) -> list[str]:
    """Each column's coordinates as sincos.js reads them: "x" when it changes along a grid
    row of the first frame, "y" down a grid column, "t" from the first frame's first patch
    to the last frame's, with the tokens placed as tokenAt places them."""
    frames, height, width = grid.get("frames", 1), grid["height"], grid["width"]
    zeros = grid.get("extra_tokens", grid.get("text_tokens", 0))
    tokens = table[zeros:].reshape(frames, -1, table.shape[1])
    if grid.get("reverse_coord"):  # column by column
        patches = tokens.reshape(frames, width, height, -1).transpose(0, 2, 1, 3)
    else:
        patches = tokens.reshape(frames, height, width, -1)
    first = patches[0]
    x = np.any(np.diff(first, axis=1) != 0, axis=(0, 1))
    y = np.any(np.diff(first, axis=0) != 0, axis=(0, 1))
    t = patches[0, 0, 0] != patches[-1, 0, 0]
    each = zip(t, x, y, strict=True)
    return ["".join(a for a, on in zip("txy", bits, strict=True) if on) for bits in each]


@pytest.mark.parametrize(
    ("family", "query", "halves"),
    [
        # MAE's [w | h]: the first half follows the width, though its code calls it emb_h
        pytest.param(
            "sincos-2d",
            {"height": "6", "width": "9", "dim": "16", "extra_tokens": "1"},
            ["x"] * 8 + ["y"] * 8,
            id="mae",
        ),
        # timm: [sin h | sin w | cos h | cos w]; reverse_coord: w first, column by column
        pytest.param(
            "sincos-2d",
            {"height": "6", "width": "9", "dim": "16", "preset": "timm"},
            ["y"] * 4 + ["x"] * 4 + ["y"] * 4 + ["x"] * 4,
            id="timm",
        ),
        pytest.param(
            "sincos-2d",
            {"height": "6", "width": "9", "dim": "16", "preset": "timm", "reverse_coord": "true"},
            ["x"] * 4 + ["y"] * 4 + ["x"] * 4 + ["y"] * 4,
            id="timm-reverse",
        ),
        # CogVideoX: the frame's quarter, then the patch's [w | h]
        pytest.param(
            "sincos-3d",
            {"frames": "3", "height": "4", "width": "5", "dim": "32", "preset": "cogvideox"},
            ["t"] * 8 + ["x"] * 12 + ["y"] * 12,
            id="cogvideox",
        ),
    ],
)
def test_the_grid_reads_as_sincos_js_reads_it(
    api: httpx.Client, family: str, query: dict[str, str], halves: list[str]
) -> None:
    """The one-row JSON answer says the grid, its zero rows and its token order; the raw
    answer (rows, dim) holds them zero rows first; each column follows the coordinate the
    view's strip says."""
    grid, table = _grid_table(api, family, **query)
    zeros = grid.get("extra_tokens", grid.get("text_tokens", 0))
    assert table.shape == (grid["rows"], int(query["dim"]))
    assert grid["rows"] == zeros + grid.get("frames", 1) * grid["height"] * grid["width"]
    assert not table[:zeros].any()
    assert _follows(table, grid) == halves
    # tokenAt's patch (f, i, j): its width's columns are those of (0, 0, j), its height's
    # those of (0, i, 0), its frame's those of (f, 0, 0)
    f, i, j = grid.get("frames", 1) - 1, 3, 4
    for axis, same in (("x", (0, 0, j)), ("y", (0, i, 0)), ("t", (f, 0, 0))):
        columns = [c for c, a in enumerate(halves) if a == axis]
        assert np.array_equal(
            table[_token_at(grid, f, i, j), columns], table[_token_at(grid, *same), columns]
        )


def _token_at(grid: dict[str, Any], f: int, i: int, j: int) -> int:
    """sincos.js's tokenAt: the table row of the patch at grid row i, column j of frame f."""
    height, width = grid["height"], grid["width"]
    zeros = grid.get("extra_tokens", grid.get("text_tokens", 0))
    inside = j * height + i if grid.get("reverse_coord") else i * width + j
    return int(zeros + f * height * width + inside)


def test_the_ropend_controls_offer_what_the_service_takes(api: httpx.Client) -> None:
    """A control a parameter some preset takes (sent when the chosen one takes it, blank:
    the preset's), the dtypes, layouts and roundings the service knows; the preset offered
    before the script lists the service's is one of them."""
    page = _controls(api)
    box = api.get("/").text.split('id="ropend-parameters"')[1].split("</fieldset>")[0]
    names = re.findall(r'<(?:input|select) id="ropend-([a-z_]+)" name="\1"', box)
    listed = api.get("/v1/presets").json()["families"]["rope-nd"]
    taken = {name for preset in listed for name in preset["takes"]}
    assert set(names) == set(rope_nd.PARAMETERS) | taken
    assert page.options["ropend-freqs_dtype"] == ["", *rope_nd.FREQS_DTYPES]
    assert page.options["ropend-ids_dtype"] == ["", *rope_nd.IDS_DTYPES]
    assert page.options["ropend-layout"] == list(rope_nd.LAYOUTS)
    assert page.options["ropend-rounding"] == list(registry.ROUNDINGS)
    (offered,) = page.options["ropend-preset"]
    assert offered in [preset["name"] for preset in listed]
    for preset in listed:  # what ropend.js reads of each, through familyPresets
        assert {"name", "summary", "follows", "fixes", "takes", "rows"} <= set(preset)
    for name in ("grid", "head_dim", "layout", "rounding", "preset"):
        assert page.controls[f"ropend-{name}"]["name"] == name


@pytest.mark.parametrize(
    "query",
    [
        pytest.param({"grid": "6,10", "preset": "flux", "text_tokens": "3"}, id="flux"),
        pytest.param({"grid": "6,10", "preset": "flux", "layout": "half"}, id="flux-half"),
        pytest.param({"grid": "3,4,6", "preset": "wan"}, id="wan"),
    ],
)
def test_the_rope_nd_table_reads_as_ropend_js_reads_it(
    api: httpx.Client, query: dict[str, str]
) -> None:
    """The one-row JSON answer says the axes' widths, the text tokens, the grid and the
    layout; the raw answer is (2, tokens, head_dim), cos first, pair i in column 2i
    (interleaved; its other member 2i + 1) or i (half; i + head_dim/2); axis k's pairs
    (axes_dim[k] / 2 of them, in turn) keep their angle along every grid axis but their
    own, the cells in row-major order after the text tokens."""
    document = api.get(ROPE_ND, params={**query, "start": "0", "stop": "1", "format": "json"})
    assert document.status_code == 200, document.text
    key = document.json()
    answer = api.get(ROPE_ND, params={**query, "format": "raw"})
    assert answer.status_code == 200, answer.text
    assert answer.headers["x-dtype"] == "float32"
    head = key["head_dim"]
    assert answer.headers["x-shape"] == f"2,{key['tokens']},{head}"
    cos, sin = load(answer)
    pairs = np.arange(head // 2)
    first, other = (
        (2 * pairs, 2 * pairs + 1)
        if key["layout"] == "interleaved"
        else (
            pairs,
            pairs + head // 2,
        )
    )
    assert np.array_equal(cos[:, first], cos[:, other])  # a pair's members share their cos
    angles = np.arctan2(sin[:, first], cos[:, first])
    sizes = key["grid"]
    cells = angles[key["text_tokens"] :].reshape(*sizes, head // 2)  # row-major
    assert key["tokens"] == key["text_tokens"] + math.prod(sizes)
    axis_of = np.repeat(np.arange(len(key["axes_dim"])), np.array(key["axes_dim"]) // 2)
    # the grid's axes are the ids' last ones (FLUX's first id is 0 for every cell)
    own = {k: k - (len(key["axes_dim"]) - len(sizes)) for k in range(len(key["axes_dim"]))}
    for k in range(len(key["axes_dim"])):
        chosen = cells[..., axis_of == k]
        for g in range(len(sizes)):
            moves = np.any(np.diff(chosen, axis=g) != 0)
            assert moves == (g == own[k]), (k, g)


def test_the_vision_controls_offer_what_the_service_takes(api: httpx.Client) -> None:
    """A control for each parameter some model takes (sent when the chosen one takes it,
    blank: its checkpoint's), the choices the service knows; the model offered before the
    script lists the service's is one of them."""
    page = _controls(api)
    box = api.get("/").text.split('id="vision-parameters"')[1].split("</fieldset>")[0]
    names = re.findall(r'<(?:input|select) id="vision-([a-z_]+)" name="\1"', box)
    listed = api.get("/v1/presets").json()["families"]["vision-rotary"]
    assert set(names) == {name for preset in listed for name in preset["takes"]}
    assert set(names) == set(vision_rotary.PARAMETERS)
    assert page.options["vision-implementation"] == ["", *vision_rotary.IMPLEMENTATIONS]
    assert page.options["vision-normalize_coords"] == ["", *vision_rotary.NORMALIZATIONS]
    assert page.options["vision-periods_dtype"] == ["", *vision_rotary.PERIODS_DTYPES]
    assert page.options["vision-window_index"] == ["", "false", "true"]
    assert page.options["vision-rounding"] == list(registry.ROUNDINGS)
    (offered,) = page.options["vision-preset"]
    assert offered in vision_rotary.MODELS
    assert page.controls["vision-preset"]["name"] == "model"
    assert page.controls["vision-grid"]["name"] == "grid"


# vision.js in Node: its functions alone (no explorer.js: it wires no page)
_VISION: Final = """
const fs = require("node:fs");
const vm = require("node:vm");
const { source, call, cases } = JSON.parse(fs.readFileSync(0, "utf8"));
const page = {};
page.window = page;
vm.createContext(page);
vm.runInContext(source, page);
const tower = page.visionTower;
const made = cases.map((given) => call === "patchOf"
  ? Array.from({ length: given.tokens }, (_, r) => tower.patchOf(given, r))
  : tower.imageTokens(given.layout, given.answer));
process.stdout.write(JSON.stringify(made));
"""


def vision_js(call: str, cases: list[dict[str, Any]]) -> list[Any]:
    """vision.js's ``call`` (``patchOf`` of every row of each key, or ``imageTokens`` of
    each layout and its answer) run in Node."""
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is missing: apt-get install nodejs (bash .ci/run does)")
    source = (FILES / "vision.js").read_text()
    given = json.dumps({"source": source, "call": call, "cases": cases})
    done = subprocess.run(
        [node, "-e", _VISION], input=given, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    made: list[Any] = json.loads(done.stdout)
    return made


_ORDERS: Final = [
    {"model": "qwen2_5_vl", "grid": "2,12,20"},
    {"model": "qwen2_5_vl", "grid": "1,20,28", "window_index": "true"},  # windows cut short
    {"model": "qwen2_5_vl", "grid": "2,8,12", "window_index": "true", "window_size": "56"},
    {"model": "qwen2_vl", "grid": "1,6,4"},
    {"model": "qwen3_vl", "grid": "3,4,4", "spatial_merge_size": "1"},
    {"model": "pixtral", "grid": "3,5"},
    {"model": "llama4", "grid": "4,4"},
    {"model": "dinov3", "grid": "5,3"},
    {"model": "eva02", "grid": "4,6"},
]


def test_vision_js_places_each_token_where_the_service_says(api: httpx.Client) -> None:
    """vision.js's ``patchOf`` (the patches' picture, the hover, the layout's patches) is the
    service's token order: ``vision_rotary.patches`` of every row of each model's table, as
    the one-row JSON answer resolves it (Qwen-VL's blocks and windows, Llama 4's class)."""
    keys = []
    for query in _ORDERS:
        answer = api.get(VISION, params={**query, "start": "0", "stop": "1", "format": "json"})
        assert answer.status_code == 200, answer.text
        keys.append(answer.json())
    for key, query, made in zip(keys, _ORDERS, vision_js("patchOf", keys), strict=True):
        fields = {field.name for field in dataclasses.fields(vision_rotary.VisionRotaryKey)}
        resolved = {name: value for name, value in key.items() if name in fields}
        table = vision_rotary.VisionRotaryKey(
            **{
                **resolved,
                "grid": tuple(key["grid"]),
                "ref_feat_shape": tuple(key["ref_feat_shape"]),
            }
        )
        expected = vision_rotary.patches(table, np.arange(table.tokens))
        assert made == expected.tolist(), query


def test_a_layouts_images_show_their_ids_and_tower_rows(api: httpx.Client) -> None:
    """For a Qwen-VL layout (two images, a video between them), vision.js's ``imageTokens``
    gives each image's tokens in the sequence with the (t, h, w) ids the service answers,
    and the vision tower's rows each merges: merged token j of an image is rows j·m² ..
    (j+1)·m² - 1 after the earlier images' patches, at the patches the service's order puts
    there; the page's own layout is one the service takes."""
    layout = {
        "model": "qwen3_vl",
        "spatial_merge_size": 2,
        "segments": [
            {"text": 3},
            {"image": [1, 4, 6]},
            {"text": 2},
            {"video": [2, 4, 4], "frame_text": 3},
            {"text": 1},
            {"image": [1, 2, 2]},
            {"text": 1},
        ],
    }
    answer = api.post("/v1/positions/mrope", json=layout)
    assert answer.status_code == 200, answer.text
    ids = np.array(answer.json()["position_ids"])
    (images,) = vision_js("imageTokens", [{"layout": layout, "answer": answer.json()}])
    # 3 text, 6 image, 2 text, 2 x 4 video + 3 between its frames, 1 text: then the image
    assert [(image["first"], image["firstRow"]) for image in images] == [
        (3, 0),
        (3 + 6 + 2 + 11 + 1, 24),
    ]
    for image in images:
        t, h, w = image["grid"]
        key = vision_rotary.preset_key("qwen3_vl", (t, h, w), {}, "library", "float32")
        assert len(image["tokens"]) == t * h * w // 4
        for j, token in enumerate(image["tokens"]):
            assert token["token"] == image["first"] + j
            assert token["ids"] == ids[:, token["token"]].tolist()
            frame, i, k = token["merged"]
            start = image["tokens"][0]["ids"][0]  # where the image's ids start
            assert token["ids"] == [start + frame, start + i, start + k]
            first = image["firstRow"] + 4 * j
            assert token["rows"] == [first, first + 4]
            rows = np.arange(4 * j, 4 * j + 4)
            assert token["patches"] == vision_rotary.patches(key, rows).tolist()
            assert {(p // 2, q // 2) for p, q in token["patches"]} == {(i, k)}  # one block
    text = api.get("/").text
    found = re.search(r'<textarea id="vision-layout"[^>]*>([^<]*)</textarea>', text)
    assert found
    shown = api.post("/v1/positions/mrope", json=json.loads(html.unescape(found[1])))
    assert shown.status_code == 200, shown.text


def _rows_at(api: httpx.Client, values: list[float], **query: str) -> np.ndarray[Any, Any]:
    answer = api.post(
        f"{TIMESTEP}/positions",
        params={"max_len": "1000", "dim": "256", **query, "format": "raw"},
        json={"position_ids": values},
    )
    assert answer.status_code == 200, answer.text
    assert answer.headers["x-shape"] == f"{len(values)},256"
    return load(answer)


def test_the_received_timesteps_read_back_as_timestep_js_reads_them(api: httpx.Client) -> None:
    """FLUX's sampler takes timesteps 900 and 750 as σ = t / 1000 in bfloat16, times 1000
    in bfloat16: its embedding receives 900 and 752, and its rows are bitwise those of the
    float32 path
    (preset diffusers with FLUX's frequencies, time_factor 1, float32 timesteps) at them,
    and at no neighbouring float32 timestep; the path's row at t = 1 holds each pair's
    frequency as its angle, the slowest pair's angle then giving t (timestep.js's read)."""
    path = {
        "preset": "diffusers",
        "flip_sin_to_cos": "true",
        "downscale_freq_shift": "0.0",
        "max_period": "10000.0",
        "time_factor": "1",
        "timestep_dtype": "float32",
    }
    flux = _rows_at(api, [900, 750], preset="flux")
    assert np.array_equal(flux, _rows_at(api, [900, 752], **path))
    near = [float(np.nextafter(np.float32(t), np.float32(d))) for t in (900, 752) for d in (0, 1e4)]
    assert not any(
        np.array_equal(row, flux[i // 2]) for i, row in enumerate(_rows_at(api, near, **path))
    )
    (unit,) = _rows_at(api, [1], **path).astype(np.float64)
    frequencies = np.arctan2(unit[128:], unit[:128])  # [cos | sin]: sines second
    slowest = int(np.argmin(frequencies))
    angles = np.arctan2(flux[:, 128 + slowest], flux[:, slowest]).astype(np.float64)
    np.testing.assert_allclose(angles / frequencies[slowest], [900, 752], rtol=1e-6)


def test_the_views_ask_for_raw_answers_from_their_endpoints(api: httpx.Client) -> None:
    rope = api.get("/explorer/rope.js").text
    alibi = api.get("/explorer/alibi.js").text
    assert f'"{ROTARY}"' in rope
    assert '"/v1/biases/alibi/slopes"' in alibi
    assert '"/v1/biases/alibi"' in alibi
    for script in (rope, alibi):  # the table views
        assert 'format: "raw"' in script
        assert '"json"' not in script  # binary answers only, as the sinusoidal view
        assert "window.explorer" in script  # the helpers of explorer.js, not copies
    steps = api.get("/explorer/timestep.js").text
    assert f'"{TIMESTEP}"' in steps
    assert "`${TABLE}/positions`" in steps
    assert 'format: "raw"' in steps
    # JSON once: the embedding's parameters as resolved, from one row
    assert re.findall(r"format: \"json\"", steps) == ['format: "json"']
    assert 'start: 0, stop: 1, format: "json"' in steps
    assert "E.familyPresets(VIEW," in steps  # the presets are the service's, as listed
    assert ".families[family]" in api.get("/explorer/explorer.js").text
    assert "window.explorer" in steps
    # the heatmap and the lines are explorer.js's, as the sinusoidal view draws them
    assert "E.drawGrid(" in steps
    assert "E.drawColumns(" in steps
    grids = api.get("/explorer/sincos.js").text
    assert f'const ENCODINGS = "{SINCOS}";' in grids
    assert f"const FAMILIES = {json.dumps(list(GRIDS))};" in grids  # the families' endpoints
    assert grids.count('format: "raw"') == 3  # the table, a grid's line, a token's row
    # JSON once: the grid as resolved (its zero rows, its token order), from one row
    assert re.findall(r"format: \"json\"", grids) == ['format: "json"']
    assert 'start: 0, stop: 1, format: "json"' in grids
    assert "E.familyPresets(name, name," in grids
    assert "E.fetchRows(" in grids
    assert grids.count("E.drawGrid(") == 2  # the table, and a column over the grid
    multi = api.get("/explorer/ropend.js").text
    assert f'const TABLE = "{ROPE_ND}";' in multi
    assert multi.count('format: "raw"') == 2  # the table, and a grid's row
    assert re.findall(r"format: \"json\"", multi) == ['format: "json"']
    assert 'start: 0, stop: 1, format: "json"' in multi
    assert 'E.familyPresets("rope-nd", VIEW,' in multi
    assert "E.fetchRows(" in multi
    assert multi.count("scale: E.ANGLES") == 2  # angles in the cyclic map, as rope.js's
    assert "const LUT = E.ANGLES.lut;" in rope
    towers = api.get("/explorer/vision.js").text
    assert f'const TABLE = "{VISION}";' in towers
    assert 'const MROPE = "/v1/positions/mrope";' in towers
    assert towers.count('format: "raw"') == 1  # the table
    assert re.findall(r"format: \"json\"", towers) == ['format: "json"']
    assert 'start: 0, stop: 1, format: "json"' in towers
    assert 'E.familyPresets("vision-rotary", VIEW,' in towers
    assert "E.fetchRows(" in towers
    assert towers.count("scale: E.ANGLES") == 2  # the tokens' angles, and the patches'


def test_the_audit_and_compare_views_read_json_answers(api: httpx.Client) -> None:
    """An audit and a comparison are documents, not tables: audit.js asks for their JSON
    answers, from the audit and compare endpoints, with explorer.js's helpers."""
    script = api.get("/explorer/audit.js").text
    assert '"/v1/audit"' in script
    assert '"/v1/compare"' in script
    assert 'Accept: "application/json"' in script
    assert '"Content-Type": "application/json"' in script  # the comparison is posted as JSON
    assert 'format: "raw"' not in script
    assert 'search.delete("format")' in script  # whatever the parameters say: the JSON
    assert "window.explorer" in script
    assert "E.problemOf" in script  # the service's problem, as the other views show it


def test_the_check_view_posts_the_file_as_npy(api: httpx.Client) -> None:
    """check.js posts the .npy file as it is to verify (the claim as its query) or identify,
    asks for the JSON answer and shows the service's problems as the other views do; its
    default claim is one the service takes, for a file of the claim's table."""
    script = api.get("/explorer/check.js").text
    assert '"/v1/verify"' in script
    assert '"/v1/identify"' in script
    assert '"application/x-npy"' in script
    assert 'Accept: "application/json"' in script
    assert 'search.delete("format")' in script
    assert "E.problemOf" in script
    found = re.search(r'<input id="check-claim"[^>]*value="([^"]*)"', api.get("/").text)
    assert found is not None
    claim = html.unescape(found.group(1))
    parameters = dict(urllib.parse.parse_qsl(claim))
    family = parameters.pop("family")
    table = api.get(f"/v1/encodings/{family}", params={**parameters, "max_len": 8, "format": "npy"})
    answer = api.post(
        f"/v1/verify?{claim}", content=table.content, headers={"content-type": "application/x-npy"}
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["match"] == "bitwise"


def _audit_defaults(api: httpx.Client) -> tuple[list[str], str, dict[str, str]]:
    page = _controls(api)
    parameters = page.controls["audit-parameters"]
    defaults = {f: str(parameters[f"data-{f}"]) for f in page.options["audit-family"]}
    return page.options["audit-family"], str(page.controls["audit-max_len"]["value"]), defaults


def _gridded(api: httpx.Client) -> list[str]:
    """The audit view's families whose grid decides their rows (``data-rows="grid"``):
    audit.js sends them no max_len."""
    return re.findall(r'<option value="([^"]+)" data-rows="grid">', api.get("/").text)


def test_the_audit_views_defaults_are_llama_31s(api: httpx.Client) -> None:
    """The audit view offers rotary, sinusoidal, timestep and the sin-cos grids (rotary:
    Llama 3.1's, shown first); the grids' audits take no max_len (a 422 names it), and the
    view sends none for them."""
    families, max_len, defaults = _audit_defaults(api)
    assert families == ["rotary", "sinusoidal", "timestep", *GRIDS, "rope-nd", "vision-rotary"]
    assert _gridded(api) == [*GRIDS, "rope-nd", "vision-rotary"]
    for family in _gridded(api):
        refused = api.get(f"/v1/audit/{family}?{defaults[family]}&max_len={max_len}")
        assert_problem(refused, 422, "max_len")
    script = api.get("/explorer/audit.js").text
    assert 'if (!gridded(params.family)) search.set("max_len", params.max_len);' in script
    assert max_len == "131072"
    shown = str(_controls(api).controls["audit-parameters"]["value"])
    assert shown == defaults["rotary"]
    llama = dict(item.split("=") for item in shown.split("&"))
    assert llama == {
        "head_dim": "128",
        "base": "500000",
        "scaling": "llama3",
        "factor": "8",
        "low_freq_factor": "1",
        "high_freq_factor": "4",
        "original_max_position_embeddings": "8192",
    }


# two audits over Llama 3.1's whole context: the full run's
@pytest.mark.slow
def test_the_service_takes_the_audit_views_defaults(api: httpx.Client) -> None:
    """Each family's parameters are ones the service takes, and its answer reads as
    audit.js reads it."""
    families, max_len, defaults = _audit_defaults(api)
    gridded = _gridded(api)
    for family in families:
        rows = "" if family in gridded else f"&max_len={max_len}"
        answer = api.get(f"/v1/audit/{family}?{defaults[family]}{rows}")
        assert answer.status_code == 200, answer.text
        assert answer.headers["content-type"].startswith("application/json")
        document = answer.json()
        if family in gridded:  # the rows the status line counts
            parameters = document["parameters"]
            assert parameters.get("rows", parameters.get("tokens")) > 0
            assert all(path["first_over"]["1e-1"] is None for path in document["paths"])
            continue
        assert document["parameters"]["max_len"] == int(max_len)
        for path in document["paths"]:
            assert set(path["first_over"]) == {"1e-3", "1e-2", "1e-1"}
            # the families whose entries are angles say where a path first misdirects one
            assert ("first_misdirected" in path) == (family != "sinusoidal")  # else "—"
            assert all({"start", "stop", "max_error"} <= set(b) for b in path["bands"])
        first = {path["name"]: path["first_over"]["1e-3"] for path in document["paths"]}
        narrow = "bf16-timesteps" if family == "timestep" else "bf16-positions"
        assert first[narrow] == 257  # bfloat16 holds integers to 256


def test_the_compare_views_defaults_are_taken(api: httpx.Client) -> None:
    """The compare view's tables (transformers' dynamic scaling against vLLM's) and range
    are a comparison the service makes, rotary: with each band's angle drift."""
    text = api.get("/").text
    tables = {}
    for name in ("a", "b"):
        found = re.search(rf'<textarea id="compare-{name}"[^>]*>([^<]*)</textarea>', text)
        assert found, name
        tables[name] = json.loads(html.unescape(found[1]))
    assert tables["b"] == {
        **tables["a"],
        "parameters": {**tables["a"]["parameters"], "engine": "vllm"},
    }
    page = _controls(api)
    start, stop = (int(str(page.controls[f"compare-{n}"]["value"])) for n in ("start", "stop"))
    assert (start, stop) == (4096, 16384)
    answer = api.post("/v1/compare", json={**tables, "start": start, "stop": stop})
    assert answer.status_code == 200, answer.text
    document = answer.json()
    assert set(document["first_over"]) == {"1e-3", "1e-2", "1e-1"}
    assert document["bands"]
    assert all("max_angle_drift" in band for band in document["bands"])


def test_the_audit_view_says_which_path_a_bf16_model_follows(api: httpx.Client) -> None:
    """transformers computes a bfloat16 model's RoPE table in float32 and casts cos and sin
    to bfloat16 (LlamaRotaryEmbedding.forward: cos.to(x.dtype)): the page names that path,
    bf16-table, and only paths the rotary audit has."""
    found = re.search(r'<p id="audit-bf16" class="hint">(.*?)</p>', api.get("/").text, re.S)
    assert found, "no note"
    note = " ".join(found[1].split())
    assert "the <code>bf16-table</code> path" in note
    assert "<code>cos.to(x.dtype)</code>" in note
    named = set(re.findall(r"<code>([a-z0-9]+-[a-z0-9-]+)</code>", note))
    assert named <= {path.name for path in paths.COMMON + paths.ANGLES}, named
    (table,) = [path for path in paths.COMMON if path.name == "bf16-table"]
    assert "cos.to(x.dtype)" in table.description  # the path as the service describes it


def _page_query(page: _Controls, scaling: str) -> dict[str, str]:
    """The query the RoPE view sends for ``scaling`` with the page's own defaults: the basic
    controls, and the non-blank parameters the scaling takes (blank ones filled by
    ``data-fill``; a short list of factors spread over the pairs, as rope.js spreads it)."""
    query = {
        name: str(page.controls[f"rope-{name}"].get("value") or "")
        for name in ("max_len", "head_dim", "base", "partial_rotary_factor")
    }
    query |= {"convention": "half", "rounding": "library", "scaling": scaling}
    pairs = int(int(query["head_dim"]) * float(query["partial_rotary_factor"])) // 2
    for name in scalings.PARAMETERS[scaling]:  # type: ignore[index]
        control = page.controls[f"rope-{name}"]
        value = str(control.get("value") or "")
        fills = dict(item.split("=") for item in str(control.get("data-fill") or "").split())
        value = value or fills.get(scaling, "")
        if name in ("short_factor", "long_factor"):
            given = [float(v) for v in re.split(r"[\s,]+", value) if v]
            spread = np.interp(np.linspace(0, len(given) - 1, pairs), range(len(given)), given)
            value = ",".join(f"{v:.6g}" for v in spread)
        if value:
            query[name] = value
    return query


@pytest.mark.parametrize("scaling", scalings.SCALINGS)
def test_the_rope_views_defaults_and_readings_hold_for_every_scaling(
    api: httpx.Client, scaling: str
) -> None:
    """The service takes the page's defaults for every scaling, and the raw answers read as
    rope.js reads them: (2, rows, r), cos first; pair k in column k (half) or 2k
    (interleaved); its inverse frequency, the angle at position 1, in (0, pi); the attention
    factor sqrt(cos^2 + sin^2) at position 0, as the JSON answer reports it."""
    query = _page_query(_controls(api), scaling)
    readings = []
    for convention in rotary.CONVENTIONS:
        first = {**query, "convention": convention, "start": "0", "stop": "2", "format": "raw"}
        answer = api.get(ROTARY, params=first)
        assert answer.status_code == 200, answer.text
        r = int(int(query["head_dim"]) * float(query["partial_rotary_factor"]))
        assert answer.headers["x-shape"] == f"2,2,{r}"
        assert answer.headers["x-dtype"] == "float32"
        cos, sin = load(answer).astype(np.float64)
        columns = np.arange(r // 2) * (2 if convention == "interleaved" else 1)
        inverse = np.arctan2(sin[1, columns], cos[1, columns])
        assert np.all((inverse > 0) & (inverse < math.pi))
        factor = math.hypot(cos[0, 0], sin[0, 0])
        document = api.get(ROTARY, params={**first, "format": "json"}).json()
        assert np.float32(factor) == np.float32(document["attention_factor"])
        readings.append(inverse)
    np.testing.assert_allclose(readings[0], readings[1], rtol=1e-6)


@pytest.mark.parametrize("form", alibi.FORMS)
def test_the_alibi_views_defaults_and_readings_hold_for_every_form(
    api: httpx.Client, form: str
) -> None:
    """The service takes the page's defaults, and the raw answers read as alibi.js reads
    them: slopes (H,), the bias (H, max_len, key_len) with -inf where masked, one slope per
    head along each row."""
    page = _controls(api)
    heads, max_len = (
        int(str(page.controls[f"alibi-{n}"]["value"])) for n in ("num_heads", "max_len")
    )
    query: dict[str, str | int] = {"num_heads": heads, "max_len": max_len, "form": form}
    slopes = api.get("/v1/biases/alibi/slopes", params={"num_heads": heads, "format": "raw"})
    assert slopes.status_code == 200, slopes.text
    assert (slopes.headers["x-shape"], slopes.headers["x-dtype"]) == (str(heads), "float32")
    answer = api.get("/v1/biases/alibi", params={**query, "format": "raw"})
    assert answer.status_code == 200, answer.text
    assert answer.headers["x-shape"] == f"{heads},{max_len},{max_len}"
    assert answer.headers["x-dtype"] == "float32"
    bias, m = load(answer), load(slopes)
    later = np.triu(np.ones((max_len, max_len), dtype=bool), 1)
    masked = np.isneginf(bias)
    assert np.all(masked == (later if form != "symmetric" else False))
    assert np.all(np.isfinite(bias[~masked]))
    # the last query sees every key; in every form its bias grows by the slope per key
    steps = np.diff(bias[:, -1, :].astype(np.float64), axis=1)
    np.testing.assert_allclose(steps, np.repeat(m[:, None], max_len - 1, axis=1), rtol=1e-6)


def test_the_page_carries_the_services_element_limit(small_api: httpx.Client) -> None:
    """The page says the PE_MAX_ELEMENTS it was served with, for its curl commands."""
    page = small_api.get("/")
    limit = SMALL_LIMITS["max_elements"]
    assert f'<meta name="pe-max-elements" content="{limit}">' in page.text
    assert small_api.get("/", headers={"if-none-match": page.headers["etag"]}).status_code == 304


# explorer.js in Node, with the little of a page it reads as it loads: the <meta> of the limit
_CURL: Final = """
const fs = require("node:fs");
const vm = require("node:vm");
const { source, limit, cases } = JSON.parse(fs.readFileSync(0, "utf8"));
const meta = { content: limit };
const page = {
  location: { origin: "http://127.0.0.1:8000", search: "" },
  document: {
    querySelector: (selector) => (selector === 'meta[name="pe-max-elements"]' ? meta : null),
    addEventListener() {},
  },
  URLSearchParams,
};
page.window = page;
vm.createContext(page);
vm.runInContext(source, page);
const address = (range) => `/t?${new URLSearchParams(range || {})}`;
const made = cases.map(([start, stop, width]) =>
  page.explorer.curlCommand({ address, file: "t.npy", start, stop, width }));
process.stdout.write(JSON.stringify(made));
"""


def curl_commands(limit: str, *cases: tuple[int, int, int]) -> list[dict[str, str]]:
    """explorer.js's ``curlCommand`` for answers of rows ``start .. stop-1`` of ``width``
    numbers, the page served with PE_MAX_ELEMENTS ``limit`` ("" for none said)."""
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is missing: apt-get install nodejs (bash .ci/run does)")
    source = (FILES / "explorer.js").read_text()
    given = json.dumps({"source": source, "limit": limit, "cases": cases})
    done = subprocess.run(
        [node, "-e", _CURL], input=given, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    made: list[dict[str, str]] = json.loads(done.stdout)
    return made


ORIGIN: Final = "http://127.0.0.1:8000"


def _sent(command: str) -> tuple[str, dict[str, Any]]:
    """The curl command's flags and file, and the query of the address it asks."""
    match = re.fullmatch(rf"curl --fail-with-body -o t\.npy '{ORIGIN}/t\?([^']*)'", command)
    assert match, command
    return command, {k: int(v) for k, v in (p.split("=") for p in match[1].split("&") if p)}


def test_a_curl_command_within_the_limit_asks_for_the_whole_answer() -> None:
    """--fail-with-body: a refusal is curl's error (exit 22), not a file that looks saved."""
    (within,) = curl_commands(str(1 << 26), (0, 2048, 512))
    assert _sent(within["command"])[1] == {}
    assert within["url"] == "/t?"
    (unknown,) = curl_commands("", (0, 1 << 20, 1 << 20))  # no limit said: the whole
    assert _sent(unknown["command"])[1] == {}


@pytest.mark.parametrize(
    ("start", "stop", "width", "rows"),
    [
        pytest.param(0, 131072, 4096, 16384, id="131072x4096"),
        pytest.param(100, 100_000, 1000, 67108, id="from-100"),
    ],
)
def test_a_curl_command_over_the_limit_asks_for_the_rows_it_allows_and_says_so(
    start: int, stop: int, width: int, rows: int
) -> None:
    """A 131,072 × 4,096 table is over the default PE_MAX_ELEMENTS (2^26): the command asks
    for as many of its first rows as the limit allows, after a comment that says so."""
    limit = 1 << 26
    (over,) = curl_commands(str(limit), (start, stop, width))
    note, command = over["command"].split("\n")
    assert note.startswith("#")
    assert f"{(stop - start) * width:,} numbers" in note
    assert f"PE_MAX_ELEMENTS ({limit:,})" in note
    assert f"rows {start:,} to {start + rows - 1:,}" in note
    assert _sent(command)[1] == {"start": start, "stop": start + rows}
    assert rows * width <= limit < (rows + 1) * width
    assert over["url"] == f"/t?start={start}&stop={start + rows}"


def test_no_curl_command_when_one_row_is_over_the_limit() -> None:
    (none,) = curl_commands("1000", (0, 10, 1001))
    assert none["command"].startswith("# none: one row is 1,001 numbers")
    assert "curl" not in none["command"]
    assert none["url"] == ""
