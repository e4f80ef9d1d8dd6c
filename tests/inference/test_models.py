"""The protocol's models, without a transport: the repository an app serves (one model a
family, the apply models, names unique), its index and statistics, a model's configuration
as Triton states it."""

from __future__ import annotations

import pytest

from service.errors import InvalidInput
from service.inference import models
from service.inference.models import Repository, Statistics, UnknownModel
from service.routes import FAMILIES
from tests import seam


def test_one_model_a_family_and_the_apply_models() -> None:
    repository = Repository.of(FAMILIES)
    assert list(repository.models) == [
        *(declared.family.name for declared in FAMILIES),
        *(model.name for model in models.APPLY),
    ]
    with_stubs = Repository.of([*FAMILIES, *seam.stubs()])
    assert {"ramp", "grid", "phases", "distances"} <= set(with_stubs.models)


def test_two_models_of_one_name_are_refused() -> None:
    with pytest.raises(TypeError, match="two models are named 'rotary'"):
        Repository.of([*FAMILIES, FAMILIES[1]])


def test_the_index_says_each_model_s_state() -> None:
    repository = Repository.of(FAMILIES)
    ready = repository.index(True)
    assert {(entry["version"], entry["state"], entry["reason"]) for entry in ready} == {
        ("1", "READY", "")
    }
    loading = repository.index(False)
    assert {entry["state"] for entry in loading} == {"UNAVAILABLE"}
    assert "PE_PRELOAD" in loading[0]["reason"]
    assert repository.index(False, only_ready=True) == []
    assert repository.index(True, only_ready=True) == ready
    with pytest.raises(InvalidInput, match="one repository"):
        repository.index(True, repository="models")


def test_statistics_count_successes_and_failures() -> None:
    statistics = Statistics()
    statistics.record(True, 30)
    statistics.record(True, 20)
    statistics.record(False, 7)
    document = statistics.document("rotary")
    assert document["inference_count"] == document["execution_count"] == 2
    assert document["inference_stats"]["success"] == {"count": 2, "ns": 50}
    assert document["inference_stats"]["fail"] == {"count": 1, "ns": 7}
    assert document["inference_stats"]["queue"] == {"count": 0, "ns": 0}
    assert document["last_inference"] > 0
    repository = Repository.of(FAMILIES)
    assert [entry["name"] for entry in repository.stats()["model_stats"]] == list(repository.models)
    assert repository.stats("rotary", "1")["model_stats"][0]["name"] == "rotary"
    with pytest.raises(UnknownModel):
        repository.stats("rotary", "2")
    with pytest.raises(InvalidInput, match="model's name"):
        repository.stats(None, "1")


def test_a_model_s_config_is_triton_s() -> None:
    rotary = Repository.of(FAMILIES).model("rotary")
    config = rotary.config()
    assert config["max_batch_size"] == 0
    assert config["input"] == [
        {"name": "positions", "data_type": "TYPE_INT64", "dims": [-1], "optional": False}
    ]
    assert [(o["name"], o["data_type"], o["dims"]) for o in config["output"]] == [
        ("cos", "TYPE_FP32", [-1, -1]),
        ("sin", "TYPE_FP32", [-1, -1]),
    ]
    names = config["parameters"]["request"]["string_value"].split(",")
    assert names == rotary.parameters
    assert "max_len" in names
    assert "start" not in names
