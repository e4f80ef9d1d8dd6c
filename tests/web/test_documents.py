"""A posted document (:mod:`service.web.documents`): parsed and read in a worker thread,
never on the event loop that answers every other client."""

from __future__ import annotations

import asyncio
from typing import Any, Final

import orjson
import pytest

from service import codecs
from service.app import create_app
from service.schemas import hf_config
from service.settings import Settings
from tests.support import in_process

GEMMA3 = {
    "model_type": "gemma3_text",
    "head_dim": 8,
    "max_position_embeddings": 16,
    "layer_types": ["sliding_attention", "full_attention"],
    "rope_parameters": {
        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
        "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0},
    },
}


def on_a_loop() -> bool:
    """Whether the calling thread runs an event loop (a worker thread does not)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


COMPARED: Final = {
    "family": "rotary",
    "config": GEMMA3,
    "parameters": {"layer_type": "full_attention"},
}


@pytest.mark.parametrize(
    ("path", "body"),
    [
        pytest.param("/v1/encodings/rotary/from-config?format=npz", GEMMA3, id="from-config"),
        pytest.param(
            "/v1/encodings/rotary/from-config?layer_type=full_attention&format=npz",
            GEMMA3,
            id="from-config-one-type",
        ),
        pytest.param(
            "/v1/audit/rotary/from-config?layer_type=full_attention&max_len=64",
            GEMMA3,
            id="audit",
        ),
        pytest.param("/v1/compare", {"a": COMPARED, "b": COMPARED, "stop": 4}, id="compare"),
    ],
)
def test_a_config_is_read_off_the_event_loop(
    monkeypatch: pytest.MonkeyPatch, path: str, body: dict[str, Any]
) -> None:
    """from-config, the audit's and compare read every field of a config (thousands of
    layers: tens of milliseconds) in a worker thread: the loop only awaits it."""
    where: list[bool] = []
    get = hf_config.Reader.get

    def spied(self: hf_config.Reader, name: str) -> Any:
        where.append(on_a_loop())
        return get(self, name)

    monkeypatch.setattr(hf_config.Reader, "get", spied)
    with in_process(create_app(Settings())) as http:
        answer = http.post(
            path, content=orjson.dumps(body), headers={"content-type": "application/json"}
        )
    assert answer.status_code == 200, answer.text
    assert where  # the config was read, field by field
    assert not any(where), f"{sum(where)} of {len(where)} fields read on the event loop"


def test_json_position_ids_are_parsed_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """A JSON body of ids (a million lists: a third of a second) is parsed in a worker
    thread, in the lane its size takes."""
    where: list[bool] = []
    parse = codecs.json.positions

    def spied(*args: Any) -> Any:
        where.append(on_a_loop())
        return parse(*args)

    monkeypatch.setattr(codecs.json, "positions", spied)
    with in_process(create_app(Settings())) as http:
        answer = http.post(
            "/v1/encodings/rotary/positions?max_len=64&head_dim=2&format=npy",
            content=orjson.dumps({"position_ids": [[1], [2]]}),
            headers={"content-type": "application/json"},
        )
    assert answer.status_code == 200, answer.text
    assert where == [False]
