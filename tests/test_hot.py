"""Hot responses: repeated table requests are replayed from memory, byte for byte."""

from __future__ import annotations

from typing import Any

import pytest

TABLE = "/v1/encodings/sinusoidal"


def hits(api: Any) -> int:
    return int(api.get("/v1/cache").json()["response_hits"])


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
def test_a_repeat_is_replayed_identically(api: Any, query: str, headers: dict[str, str]) -> None:
    first = api.get(f"{TABLE}?{query}", headers=headers)
    before = hits(api)
    second = api.get(f"{TABLE}?{query}", headers=headers)
    assert hits(api) == before + 1
    assert second.status_code == first.status_code == 200
    assert second.content == first.content
    without_date = [{k: v for k, v in r.headers.items() if k != "date"} for r in (first, second)]
    assert without_date[0] == without_date[1]


def test_a_replayed_answer_still_honours_if_none_match(api: Any) -> None:
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


def test_another_accept_header_is_another_answer(api: Any) -> None:
    url = f"{TABLE}?max_len=42&d_model=12"
    as_json = api.get(url, headers={"accept": "application/json"})
    as_npy = api.get(url, headers={"accept": "application/x-npy"})
    again = api.get(url, headers={"accept": "application/x-npy"})
    assert as_json.headers["content-type"] == "application/json"
    assert as_npy.headers["content-type"] == again.headers["content-type"] == "application/x-npy"


def test_errors_are_never_replayed(api: Any) -> None:
    url = f"{TABLE}?max_len=0&d_model=12"
    before = hits(api)
    assert [api.get(url).status_code for _ in range(3)] == [422] * 3
    assert hits(api) == before


def test_replayed_answers_count_in_the_budget_and_in_metrics(api: Any) -> None:
    url = f"{TABLE}?max_len=43&d_model=12&format=npy"
    api.get(url)
    api.get(url)
    stats = api.get("/v1/cache").json()
    assert stats["responses"] >= 1
    tables = sum(entry["bytes"] for entry in stats["entries"])
    assert stats["bytes"] == tables + stats["response_bytes"] <= stats["budget_bytes"]
    metrics = api.get("/metrics").text
    assert 'route="/v1/encodings/sinusoidal"' in metrics
    assert 'route="unmatched",status="200"' not in metrics
