"""The explorer's page and files: served with their validators, from this origin only."""

from __future__ import annotations

import re

import httpx
import pytest

from service.encodings.catalogue import PRESETS
from tests.support import assert_problem


def test_the_explorer_page_is_served_with_its_files(api: httpx.Client) -> None:
    page = api.get("/")
    assert page.status_code == 200
    assert page.headers["content-type"] == "text/html; charset=utf-8"
    policy = page.headers["content-security-policy"]
    assert "default-src 'none'" in policy
    assert "connect-src 'self'" in policy
    links = re.findall(r'(?:src|href)="([^"]*)"', page.text)
    assert "/explorer/explorer.js" in links
    assert "/explorer/explorer.css" in links
    # nothing from another host: every address is on this origin or inline
    assert all(link.startswith(("/", "#", "data:")) for link in links), links
    for name, kind in [("explorer.js", "text/javascript"), ("explorer.css", "text/css")]:
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
