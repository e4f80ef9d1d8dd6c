"""A config read into rotary tables (:mod:`service.schemas.hf_layers`): the work of reading
is linear in the fields read, whatever their number."""

from __future__ import annotations

from typing import Any

import pytest

from service.schemas import hf_config, hf_layers


class Scanned(list[str]):
    """The record of the fields read, counting the entries its scans examine (``in``,
    ``index``, ``count``, ``remove``: each a pass over the list)."""

    examined = 0

    def __contains__(self, item: object) -> bool:
        Scanned.examined += len(self)
        return super().__contains__(item)

    def index(self, *args: Any) -> int:
        Scanned.examined += len(self)
        return super().index(*args)

    def count(self, item: Any) -> int:
        Scanned.examined += len(self)
        return super().count(item)

    def remove(self, item: Any) -> None:
        Scanned.examined += len(self)
        super().remove(item)


class Spied(hf_config.Reader):
    """A top-level reader whose record of the fields read is :class:`Scanned`."""

    def __init__(self, values: Any, path: str = "", read: Any = None, *rest: Any) -> None:
        super().__init__(values, path, Scanned() if read is None else read, *rest)


def per_layer(layers: int) -> dict[str, Any]:
    """Gemma 4's saved form: a head width for every layer, each a field read."""
    kinds = ["sliding_attention", "full_attention"]
    return {
        "head_dim": 8,
        "max_position_embeddings": 16,
        "layer_types": [kinds[i % 2] for i in range(layers)],
        "rope_parameters": {kind: {"rope_type": "default"} for kind in kinds},
        "per_layer_config": {str(i): {"head_dim": 8 * (1 + i % 2)} for i in range(layers)},
    }


@pytest.mark.parametrize("layers", [1000, 4000])
def test_each_field_read_is_recorded_without_a_scan(
    monkeypatch: pytest.MonkeyPatch, layers: int
) -> None:
    """Recording a field read costs a set look-up, not a pass over those read before: a
    config of 4,000 per-layer fields was 8 million comparisons (0.14 s of a loop)."""
    monkeypatch.setattr(hf_layers, "Reader", Spied)
    monkeypatch.setattr(Scanned, "examined", 0)
    read = hf_layers.rotary_query(per_layer(layers), {})
    assert len(read.fields) > layers  # every layer's head_dim is a field read
    assert Scanned.examined <= 4 * len(read.fields), Scanned.examined
