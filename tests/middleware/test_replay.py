"""Replay: any immutable, strongly tagged answer is answered again from memory, byte for
byte; what decides is the answer, and the key is the one view negotiation reads."""

from __future__ import annotations

import httpx
import pytest

from service.app import create_app
from service.middleware.replay import MAX_KEYED_BYTES, _replayable
from service.settings import Settings
from tests.support import HEATMAP, TABLE, cache_stats, in_process


def hits(api: httpx.Client) -> int:
    return int(cache_stats(api)["response_hits"])


@pytest.mark.parametrize(
    ("query", "headers"),
    [
        pytest.param("max_len=40&d_model=12&base=91&format=npy", {}, id="npy"),
        pytest.param("max_len=40&d_model=12&base=91&format=raw", {}, id="raw"),
        pytest.param("max_len=40&d_model=12&base=91", {"accept": "application/json"}, id="json"),
        pytest.param("max_len=40&d_model=12&base=91", {"accept-encoding": "gzip"}, id="gzip"),
        pytest.param("max_len=40&d_model=12&base=91&start=3&dim_stop=5", {}, id="slice"),
    ],
)
def test_a_repeat_is_replayed_identically(
    api: httpx.Client, query: str, headers: dict[str, str]
) -> None:
    first = api.get(f"{TABLE}?{query}", headers=headers)
    before = hits(api)
    second = api.get(f"{TABLE}?{query}", headers=headers)
    assert hits(api) == before + 1
    assert second.status_code == first.status_code == 200
    assert second.content == first.content
    without_date = [{k: v for k, v in r.headers.items() if k != "date"} for r in (first, second)]
    assert without_date[0] == without_date[1]


def test_a_replayed_answer_still_honours_if_none_match(api: httpx.Client) -> None:
    url = f"{TABLE}?max_len=41&d_model=12&format=npy"
    etag = api.get(url).headers["etag"]
    api.get(url)
    before = hits(api)
    response = api.get(url, headers={"if-none-match": f'"x", W/{etag}'})
    assert hits(api) == before + 1
    assert response.status_code == 304
    assert response.content == b""
    assert response.headers["etag"] == etag
    assert response.headers["cache-control"] == "public, max-age=31536000, immutable"
    assert api.get(url, headers={"if-none-match": '"other"'}).status_code == 200


def test_another_accept_header_is_another_answer(api: httpx.Client) -> None:
    url = f"{TABLE}?max_len=42&d_model=12"
    as_json = api.get(url, headers={"accept": "application/json"})
    as_npy = api.get(url, headers={"accept": "application/x-npy"})
    again = api.get(url, headers={"accept": "application/x-npy"})
    assert as_json.headers["content-type"] == "application/json"
    assert as_npy.headers["content-type"] == again.headers["content-type"] == "application/x-npy"


def test_answers_to_long_accept_headers_are_not_kept(api: httpx.Client) -> None:
    """Distinct long Accept values would each keep a copy of an answer under a key as long
    (3,000 distinct 30 KB values held 89 MiB of the budget): they are answered, not kept."""
    url = f"{TABLE}?max_len=43&d_model=12"
    before = cache_stats(api)["responses"]
    for i in range(5):
        accept = f"application/json, text/x-{i}-{'a' * MAX_KEYED_BYTES};q=0.1"
        response = api.get(url, headers={"accept": accept})
        assert response.headers["content-type"] == "application/json"
    assert cache_stats(api)["responses"] == before
    api.get(url, headers={"accept": "application/json"})
    assert cache_stats(api)["responses"] == before + 1


def test_errors_are_never_replayed(api: httpx.Client) -> None:
    url = f"{TABLE}?max_len=0&d_model=12"
    before = hits(api)
    assert [api.get(url).status_code for _ in range(3)] == [422] * 3
    assert hits(api) == before


def test_replayed_answers_count_in_the_budget_and_in_metrics(api: httpx.Client) -> None:
    url = f"{TABLE}?max_len=43&d_model=12&format=npy"
    api.get(url)
    api.get(url)
    before = cache_stats(api)
    api.get(url.replace("43", "44"))
    api.get(url.replace("43", "44"))
    stats = cache_stats(api)
    assert stats["responses"] == before["responses"] + 1
    # (that the tables' bytes and the answers' add up to the total: tests/test_cache.py)
    assert stats["response_bytes"] <= stats["bytes"] <= stats["budget_bytes"]
    metrics = api.get("/metrics").text
    assert 'route="/v1/encodings/sinusoidal"' in metrics
    assert 'route="unmatched",status="200"' not in metrics


@pytest.mark.parametrize(
    ("path", "replayed"),
    [
        pytest.param(f"{TABLE}?max_len=45&d_model=12", True, id="table"),
        pytest.param(f"{HEATMAP}?max_len=8&d_model=8", True, id="picture"),
        pytest.param("/explorer/explorer.js", False, id="no-cache-asset"),
        pytest.param("/healthz", False, id="untagged"),
        pytest.param("/v1/cache", False, id="no-store"),
    ],
)
def test_the_answer_decides_what_is_replayed(api: httpx.Client, path: str, replayed: bool) -> None:
    """Replayed: 200s with ``immutable`` and a strong ETag, whatever their path."""
    api.get(path)
    before = hits(api)
    api.get(path)
    assert hits(api) == before + replayed


def test_repeated_accept_headers_cannot_poison_the_plain_answer() -> None:
    """``Accept: application/x-npy`` then an empty ``Accept:`` is keyed as the .npy it
    negotiates, never as the request without an Accept header (which gets JSON)."""
    with in_process(create_app(Settings())) as http:
        url = f"{TABLE}?max_len=46&d_model=12"
        headers = [("accept", "application/x-npy"), ("accept", "")]
        tricky = http.get(url, headers=headers)
        assert tricky.headers["content-type"] == "application/x-npy"
        assert http.get(url, headers=headers).headers["content-type"] == "application/x-npy"
        plain = http.get(url, headers={"accept": ""})
        assert plain.headers["content-type"] == "application/json"
        assert http.get(url).headers["content-type"] == "application/json"


def test_repeated_accept_encoding_headers_cannot_poison_either() -> None:
    with in_process(create_app(Settings())) as http:
        url = f"{TABLE}?max_len=47&d_model=12"
        headers = [("accept-encoding", "gzip"), ("accept-encoding", "identity")]
        assert http.get(url, headers=headers).headers["content-encoding"] == "gzip"
        plain = http.get(url, headers={"accept-encoding": "identity"})
        assert "content-encoding" not in plain.headers


@pytest.mark.parametrize(
    ("headers", "replayable"),
    [
        pytest.param([(b"etag", b'"a"'), (b"cache-control", b"public, immutable")], True, id="ok"),
        pytest.param(
            [(b"ETag", b'"a"'), (b"Cache-Control", b"immutable"), (b"Vary", b"Accept")],
            True,
            id="names-in-any-case",
        ),
        pytest.param([(b"etag", b'W/"a"'), (b"cache-control", b"immutable")], False, id="weak"),
        pytest.param([(b"cache-control", b"immutable")], False, id="untagged"),
        pytest.param(
            [(b"etag", b'"a"'), (b"etag", b'"b"'), (b"cache-control", b"immutable")],
            False,
            id="two-tags",
        ),
        pytest.param([(b"etag", b'"a"'), (b"cache-control", b"no-cache")], False, id="revalidated"),
        pytest.param(
            [(b"etag", b'"a"'), (b"cache-control", b"immutable"), (b"vary", b"Accept, Origin")],
            False,
            id="varies-on-more",
        ),
        pytest.param(
            [
                (b"etag", b'"a"'),
                (b"cache-control", b"immutable"),
                (b"vary", b"Accept"),
                (b"vary", b"Origin"),
            ],
            False,
            id="varies-on-more-in-a-second-field",
        ),
    ],
)
def test_what_makes_an_answer_replayable(
    headers: list[tuple[bytes, bytes]], replayable: bool
) -> None:
    message = {"type": "http.response.start", "status": 200, "headers": headers}
    assert (_replayable(message) is not None) is replayable
    assert _replayable({**message, "status": 203}) is None
