"""``PE_PRELOAD``: parsed once into family keys, checked against the limits, computed
before the service says it is ready."""

from __future__ import annotations

import pytest

from service import preload
from service.app import create_app
from service.encodings.sinusoidal import SinusoidalKey
from service.limits import Limits
from service.settings import Settings


@pytest.mark.parametrize(
    ("text", "tables"),
    [
        pytest.param("", [], id="empty"),
        pytest.param("512x512", [preload.Preload(SinusoidalKey(512), 512)], id="one"),
        pytest.param(
            "512x512, 2048x1024@10000:split:float64",
            [
                preload.Preload(SinusoidalKey(512), 512),
                preload.Preload(SinusoidalKey(1024, 10000.0, "split", "float64"), 2048),
            ],
            id="two",
        ),
        pytest.param(
            "4x5:float16:split",
            [preload.Preload(SinusoidalKey(5, 10000.0, "split", "float16"), 4)],
            id="any-order",
        ),
    ],
)
def test_preload_syntax(text: str, tables: list[preload.Preload]) -> None:
    assert preload.parse(text) == tables


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("4x5:float16@", id="bad-order"),
        pytest.param("4x5@1", id="base-one"),
        pytest.param("4x5@inf", id="base-inf"),
        pytest.param("4x5@ten", id="base-text"),
        pytest.param("4x5:int8", id="bad-dtype"),
        pytest.param("4x5:split:interleaved", id="two-layouts"),
        pytest.param("0x5", id="zero-rows"),
        pytest.param("4x0", id="zero-width"),
        pytest.param("4by5", id="syntax"),
    ],
)
def test_bad_preloads_name_the_setting_and_the_item(text: str) -> None:
    with pytest.raises(ValueError, match="PE_PRELOAD") as caught:
        preload.parse(text)
    assert text.split(":")[0].split("@")[0] in str(caught.value)


@pytest.mark.parametrize(
    ("text", "setting"),
    [
        pytest.param("2000x1000", "PE_MAX_ELEMENTS", id="elements"),
        pytest.param("4294967296x1", "PE_MAX_POSITION", id="position"),
    ],
)
def test_a_preload_over_the_limits_stops_start_up(text: str, setting: str) -> None:
    settings = Settings(
        preload=text, max_elements=1 << 20 if setting == "PE_MAX_ELEMENTS" else 1 << 40
    )
    with pytest.raises(ValueError, match=setting):
        preload.check(preload.parse(text), Limits.of(settings), settings.cache_bytes)
    with pytest.raises(ValueError, match=setting):
        create_app(settings)


def test_a_preload_the_cache_cannot_keep_stops_start_up() -> None:
    # 1024 x 512 float32 is 2 MiB of rows: a 1 MiB cache would compute and drop them
    settings = Settings(preload="1024x512", cache_bytes=1 << 20)
    with pytest.raises(ValueError, match="PE_CACHE_BYTES") as caught:
        preload.check(preload.parse(settings.preload), Limits.of(settings), settings.cache_bytes)
    assert "1,048,576" in str(caught.value)
    with pytest.raises(ValueError, match="PE_CACHE_BYTES"):
        create_app(settings)
    # the same tables fit a budget their pages fit
    roomy = Settings(preload="1024x512,16x16", cache_bytes=4 << 20)
    preload.check(preload.parse(roomy.preload), Limits.of(roomy), roomy.cache_bytes)


def test_any_cached_family_is_preloaded_by_its_query_string() -> None:
    from service.routes import FAMILIES
    from service.web.families import readers

    tables = preload.parse(
        "rotary?max_len=64&head_dim=8&scaling=longrope&short_factor=1%2C1%2C1%2C1&long_factor=2%2C2%2C2%2C2"
        "&original_max_position_embeddings=32&factor=2,"
        "sinusoidal?max_len=16&d_model=4&preset=fairseq",
        readers(FAMILIES),
    )
    rotary, sinusoidal = tables
    assert rotary.rows == 64
    assert rotary.key == FAMILIES[1].key(
        FAMILIES[1].query(
            max_len=64,
            head_dim=8,
            scaling="longrope",
            short_factor="1,1,1,1",
            long_factor="2,2,2,2",
            original_max_position_embeddings=32,
            factor=2,
        )
    )
    assert sinusoidal.rows == 16
    assert sinusoidal.key == FAMILIES[0].key(
        FAMILIES[0].query(max_len=16, d_model=4, preset="fairseq")
    )


@pytest.mark.parametrize(
    ("text", "words"),
    [
        pytest.param("alibi?num_heads=8&max_len=4", "computed per request", id="per-request"),
        pytest.param("rotary?max_len=64", "head_dim", id="missing"),
        pytest.param("rotary?max_len=64&head_dim=8&head_dim=16", "more than once", id="repeated"),
        pytest.param("rotary?max_len=64&head_dim=7", "head_dim", id="refused-by-the-key"),
    ],
)
def test_a_family_query_it_refuses_is_one_line(text: str, words: str) -> None:
    from service.routes import FAMILIES
    from service.web.families import readers

    with pytest.raises(ValueError, match="PE_PRELOAD") as caught:
        preload.parse(text, {"alibi": FAMILIES[3].preloaded, **readers(FAMILIES)})
    assert words in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_shifted_table_is_bounded_at_its_last_position() -> None:
    from service.routes import FAMILIES
    from service.web.families import readers

    settings = Settings(max_position=1000)
    tables = preload.parse(
        "sinusoidal?max_len=1000&d_model=4&preset=tensor2tensor&start_index=500",
        readers(FAMILIES),
    )
    with pytest.raises(ValueError, match="1,499"):
        preload.check(tables, Limits.of(settings), settings.cache_bytes)
