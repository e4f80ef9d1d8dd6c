"""The nginx template (deploy/nginx/nginx.conf.template) against the OpenAPI document:
every GET that answers ``immutable`` is cached, every POST passes through uncached, and a
family's POSTs are retried on another replica, read from the document of an app with the
stub families of ``tests/seam/`` too, so a new family is covered with no edit to the
template, or this fails. (tests/system/test_proxy.py runs the real nginx on the template.)"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

import pytest

from service.app import create_app
from service.routes import FAMILIES
from service.settings import Settings
from tests import seam
from tests.support import HEATMAP, ROOT, SIMILARITY

TEMPLATE: Final = ROOT / "deploy" / "nginx" / "nginx.conf.template"
# the GET routes of their own that answer immutable and whose documents do not say so
PICTURES: Final = {HEATMAP, SIMILARITY}
IMMUTABLE: Final = "public, max-age=31536000, immutable"


@dataclass(frozen=True)
class Location:
    modifier: str  # "=", "~", "~*", "^~" or "" (a prefix)
    pattern: str
    body: str

    @property
    def cached(self) -> bool:
        return re.search(r"^\s*proxy_cache\s+\w+;", self.body, re.MULTILINE) is not None

    @property
    def retried(self) -> bool:
        """Retried on another replica even when the method is not idempotent (a POST)."""
        return "non_idempotent" in self.body


def locations(text: str) -> list[Location]:
    """The server's locations in order (none nests a block; named ones left out)."""
    found = re.finditer(r"^\s*location\s+(?:(=|~\*|~|\^~)\s+)?(\S+)\s*\{([^{}]*)\}", text, re.M)
    return [Location(m[1] or "", m[2], m[3]) for m in found if not m[2].startswith("@")]


def resolve(every: list[Location], uri: str) -> Location:
    """The location nginx picks for a URI: an exact match; else the longest prefix, if it is
    ``^~``; else the first regular expression that matches; else the longest prefix."""
    for location in every:
        if location.modifier == "=" and location.pattern == uri:
            return location
    prefixes = [each for each in every if each.modifier in ("", "^~")]
    longest = max(
        (each for each in prefixes if uri.startswith(each.pattern)),
        key=lambda each: len(each.pattern),
    )
    if longest.modifier == "^~":
        return longest
    for location in every:
        if location.modifier in ("~", "~*"):
            flags = re.IGNORECASE if location.modifier == "~*" else 0
            if re.search(location.pattern, uri, flags):
                return location
    return longest


def test_the_resolver_picks_as_nginx_does() -> None:
    every = locations(
        "location = /a { x; }\nlocation ~ ^/a { y; }\nlocation ^~ /b/ { z; }\n"
        "location ~ ^/b/c { w; }\nlocation / { v; }\nlocation @named { u; }\n"
    )
    assert [resolve(every, uri).body.strip() for uri in ("/a", "/ab", "/b/c", "/c")] == [
        "x;",
        "y;",
        "z;",
        "v;",
    ]


@pytest.fixture(scope="module")
def served() -> tuple[dict[str, Any], set[str]]:
    """The OpenAPI paths of an app with the stub families beside its own, and the GETs its
    declarations make immutable: each family's table and audit."""
    with seam.served() as stubs:
        document = create_app(Settings(), families=stubs).openapi()
    declared = [*FAMILIES, *stubs]
    immutable = {each.resource for each in declared} | {
        f"/v1/audit/{each.family.name}" for each in declared if each.audit
    }
    return document["paths"], immutable


def uri(path: str) -> str:
    """A path of the document as a request names it: ``{name}`` filled in."""
    return re.sub(r"\{[^}]+\}", "x", path)


def documented_immutable(operation: dict[str, Any]) -> bool:
    headers = operation["responses"].get("200", {}).get("headers", {})
    return str(headers.get("Cache-Control", {}).get("description", "")).startswith(IMMUTABLE)


def test_every_immutable_get_is_cached_and_no_other(
    served: tuple[dict[str, Any], set[str]],
) -> None:
    paths, declared = served
    every = locations(TEMPLATE.read_text())
    gets = {path: ops["get"] for path, ops in paths.items() if "get" in ops}
    immutable = declared | PICTURES | {p for p, op in gets.items() if documented_immutable(op)}
    assert {"/v1/encodings/ramp", "/v1/encodings/grid", "/v1/biases/alibi/slopes"} <= immutable
    assert immutable <= set(gets)
    cached = {path for path in gets if resolve(every, uri(path)).cached}
    assert cached == immutable


def test_every_post_passes_through_and_a_familys_is_retried(
    served: tuple[dict[str, Any], set[str]],
) -> None:
    paths, _ = served
    every = locations(TEMPLATE.read_text())
    posts = [path for path, ops in paths.items() if "post" in ops]
    assert {"/v1/encodings/levels/from-config", "/v1/encodings/grid/positions"} <= set(posts)
    for path in posts:
        location = resolve(every, uri(path))
        assert not location.cached, path
        # a family's POST (a table or audit from a config, rows at positions, an apply)
        if path.startswith(("/v1/encodings/", "/v1/audit/")):
            assert location.retried, path
