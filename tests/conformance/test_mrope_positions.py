"""Conformance: M-RoPE's position ids (``POST /v1/positions/mrope``) against transformers'
own ``get_rope_index``, transformers 5.23.0: ``Qwen2VLModel.get_rope_index`` and
``get_vision_position_ids`` (``models/qwen2_vl/modeling_qwen2_vl.py``), ``Qwen2_5_VLModel``'s
(``models/qwen2_5_vl/modeling_qwen2_5_vl.py``: ``tokens_per_second`` times the float32
``second_per_grid_ts`` the processor gives), ``Qwen3VLModel``'s
(``models/qwen3_vl/modeling_qwen3_vl.py``: a video split into its frames) and ``Glm4vModel``'s
(``models/glm4v/modeling_glm4v.py``, which the service maps to qwen3_vl). Each model is built
from a tiny config (no weights) and run on ``input_ids`` holding the config's image and video
token ids (a text run ends with the vision start token before an image or video; Qwen3-VL's
frames have ``frame_text`` text tokens between them), with ``mm_token_type_ids`` as
``ProcessorMixin.create_mm_token_type_ids`` makes them. Seeded random layouts and the API's
example: position ids equal integer for integer, rope delta equal; the settings given in the
body or read from the model's ``config.to_dict()``. The layouts the real code cannot process
are refused (422). A summary is written to ``artifacts/conformance-mrope-positions.json``.
Needs the conformance extra."""

from __future__ import annotations

import functools
import importlib
import importlib.util
import io
import json
import os
from collections.abc import Iterator
from typing import Any, Final

import httpx
import numpy as np
import pytest

from tests.support import ROOT

pytestmark = [pytest.mark.conformance, pytest.mark.slow]

_missing = [name for name in ("torch", "transformers") if importlib.util.find_spec(name) is None]
if _missing and not os.environ.get("CONFORMANCE_REQUIRED"):
    pytest.skip(
        f"the conformance extra is not installed (no {', '.join(_missing)})",
        allow_module_level=True,
    )

PATH: Final = "/v1/positions/mrope"
ARTIFACT: Final = ROOT / "artifacts" / "conformance-mrope-positions.json"
TEXT_ID: Final = 1000
LAYOUTS: Final = 40
# transformers' model, its config, and the arithmetic the service names for it
MODELS: Final = {
    "qwen2_vl": ("qwen2_vl", "Qwen2VLConfig", "Qwen2VLModel", "qwen2_vl"),
    "qwen2_5_vl": ("qwen2_5_vl", "Qwen2_5_VLConfig", "Qwen2_5_VLModel", "qwen2_5_vl"),
    "qwen3_vl": ("qwen3_vl", "Qwen3VLConfig", "Qwen3VLModel", "qwen3_vl"),
    "glm4v": ("glm4v", "Glm4vConfig", "Glm4vModel", "qwen3_vl"),
}
SECONDS: Final = (1 / 3, 0.7, 2 / 29.97, 0.5, 1.0, 2.0, 1.25, 4 / 30, 0.9, 2 / 24)
Segments = list[dict[str, Any]]
EXAMPLE: Final[Segments] = [
    {"text": 5},
    {"image": [1, 28, 28]},
    {"text": 3},
    {"video": [4, 28, 28], "seconds_per_grid": 1.0},
]


@functools.cache
def lib(name: str) -> Any:
    return importlib.import_module(name)


def build(name: str, merge: int, rate: int) -> Any:
    """The model, from a tiny config (real ``__init__``, real ``get_rope_index``)."""
    module, config_name, model_name, _ = MODELS[name]
    text: dict[str, Any] = {
        "vocab_size": 151936,
        "hidden_size": 16,
        "intermediate_size": 16,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
    }
    vision: dict[str, Any] = {"depth": 1, "num_heads": 1, "spatial_merge_size": merge}
    if name == "qwen2_vl":
        vision |= {"embed_dim": 8, "hidden_size": 16, "mlp_ratio": 1}
    else:
        vision |= {"hidden_size": 8, "out_hidden_size": 16, "intermediate_size": 8}
    if name == "qwen2_5_vl":
        vision |= {"tokens_per_second": rate, "fullatt_block_indexes": [0]}
    if name in ("qwen3_vl", "glm4v"):
        rope = {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 1, 1]}
        text |= {"rope_parameters": rope}
    if name == "qwen3_vl":
        text["head_dim"] = 8
        vision |= {"deepstack_visual_indexes": [0], "num_position_embeddings": 16}
    if name == "glm4v":
        text["rope_parameters"] |= {"partial_rotary_factor": 0.5}
    config = getattr(lib("transformers"), config_name)(vision_config=vision, text_config=text)
    model = getattr(lib(f"transformers.models.{module}.modeling_{module}"), model_name)(config)
    return model.eval()


def theirs(model: Any, name: str, segments: Segments) -> tuple[list[list[int]], int]:
    """``get_rope_index`` of the model on the input the layout stands for."""
    torch, config = lib("torch"), model.config
    merge = config.vision_config.spatial_merge_size
    image, video = config.image_token_id, config.video_token_id
    start = {
        "image": getattr(config, "vision_start_token_id", None) or config.image_start_token_id,
        "video": getattr(config, "vision_start_token_id", None) or config.video_start_token_id,
    }
    per_frame = MODELS[name][3] == "qwen3_vl"
    ids: list[int] = []
    images, videos, seconds = [], [], []
    for index, segment in enumerate(segments):
        if "text" in segment:
            following = segments[index + 1] if index + 1 < len(segments) else {}
            run = [TEXT_ID] * segment["text"]
            kind = next((k for k in ("image", "video") if k in following), None)
            if run and kind:
                run[-1] = start[kind]
            ids += run
        elif "image" in segment:
            t, h, w = segment["image"]
            images.append([t, h, w])
            ids += [image] * (t * h * w // merge**2)
        else:
            t, h, w = segment["video"]
            videos.append([t, h, w])
            seconds.append(segment.get("seconds_per_grid", 1.0))
            for frame in range(t if per_frame else 1):
                ids += [TEXT_ID] * segment.get("frame_text", 0) if frame else []
                ids += [video] * ((1 if per_frame else t) * h * w // merge**2)
    input_ids = torch.tensor([ids], dtype=torch.long)
    types = torch.zeros_like(input_ids, dtype=torch.int32)
    types[input_ids == image] = 1
    types[input_ids == video] = 2
    given: dict[str, Any] = {
        "mm_token_type_ids": types,
        "image_grid_thw": torch.tensor(images, dtype=torch.long) if images else None,
        "video_grid_thw": torch.tensor(videos, dtype=torch.long) if videos else None,
    }
    if name == "qwen2_5_vl" and videos:
        given["second_per_grid_ts"] = torch.tensor(seconds, dtype=torch.float32)
    with torch.no_grad():
        positions, deltas = model.get_rope_index(input_ids, **given)
    return positions[:, 0].tolist(), int(deltas.reshape(-1)[0])


def draw(rng: np.random.Generator, name: str) -> tuple[Segments, int, int]:
    """A valid layout: text runs, images and videos (text between two of a kind), merge 1..4,
    tokens_per_second 1..41."""
    merge, rate = int(rng.integers(1, 5)), int(rng.integers(1, 42))
    per_frame = MODELS[name][3] == "qwen3_vl"
    segments: Segments = []
    if rng.random() < 0.8:
        segments.append({"text": int(rng.integers(1, 9))})
    for _ in range(int(rng.integers(1, 7))):
        kind = "image" if rng.random() < 0.5 else "video"
        before = next((k for k in ("text", "image", "video") if segments and k in segments[-1]), "")
        if before and before != "text" and (before == kind or rng.random() < 0.6):
            segments.append({"text": int(rng.choice([1, 2, 3, 5, 8, 40]))})
        t = int(rng.choice([1, 1, 1, 2])) if kind == "image" else int(rng.integers(1, 6))
        h, w = (merge * int(rng.integers(1, 7)) for _ in range(2))
        segment: dict[str, Any] = {kind: [t, h, w]}
        if kind == "video" and rng.random() < 0.8:
            segment["seconds_per_grid"] = float(rng.choice(SECONDS))
        if kind == "video" and per_frame and (t > 1 or rng.random() < 0.3):
            segment["frame_text"] = int(rng.integers(1, 5))
        segments.append(segment)
    if rng.random() < 0.7:
        segments.append({"text": int(rng.integers(1, 6))})
    return segments, merge, rate


def ours(http: httpx.Client, body: dict[str, Any], **params: str) -> httpx.Response:
    answer = http.post(PATH, json=body, params=params)
    assert answer.status_code == 200, answer.text
    return answer


@pytest.fixture(scope="module")
def summary() -> Iterator[dict[str, Any]]:
    found: dict[str, Any] = {}
    yield found
    if found:
        ARTIFACT.parent.mkdir(exist_ok=True)
        ARTIFACT.write_text(json.dumps(found, indent=2, sort_keys=True) + "\n")


@pytest.mark.parametrize("name", list(MODELS))
def test_random_layouts_match_get_rope_index(
    service: httpx.Client, summary: dict[str, Any], name: str
) -> None:
    rng = np.random.default_rng(list(MODELS).index(name))
    failures, tokens, longest = [], 0, 0
    for number in range(LAYOUTS):
        segments, merge, rate = draw(rng, name)
        model = MODELS[name][3]
        body = {
            "segments": segments,
            "model": model,
            "spatial_merge_size": merge,
            "tokens_per_second": rate if model == "qwen2_5_vl" else None,
        }
        answer = ours(service, body).json()
        ids, delta = theirs(build(name, merge, rate), name, segments)
        assert (answer["model"], answer["spatial_merge_size"]) == (model, merge)
        assert answer["length"] == len(ids[0])
        assert answer["tokens_per_second"] == body["tokens_per_second"]
        if answer["position_ids"] != ids or answer["rope_delta"] != delta:
            failures.append((number, body, answer["rope_delta"], delta))
        tokens, longest = tokens + len(ids[0]), max(longest, len(ids[0]))
    summary[name] = {"layouts": LAYOUTS, "tokens": tokens, "longest": longest}
    summary[name]["equal"] = not failures
    assert not failures, failures[:3]


def test_the_example_matches_qwen2_5_vl(service: httpx.Client, summary: dict[str, Any]) -> None:
    body = {"segments": EXAMPLE, "spatial_merge_size": 2, "tokens_per_second": 2}
    answer = ours(service, body).json()
    ids, delta = theirs(build("qwen2_5_vl", 2, 2), "qwen2_5_vl", EXAMPLE)
    assert answer["model"] == "qwen2_5_vl"
    assert (answer["position_ids"], answer["rope_delta"]) == (ids, delta)
    assert answer["length"] == 5 + 196 + 3 + 4 * 196
    # the same as .npy, the delta in X-Rope-Delta
    npy = ours(service, body, format="npy")
    assert np.load(io.BytesIO(npy.content)).tolist() == ids
    assert npy.headers["x-rope-delta"] == str(delta)
    summary["example"] = {"length": answer["length"], "rope_delta": delta, "equal": True}


CONFIGS: Final = (
    ("qwen2_5_vl", None),  # the example, merge 2, tokens_per_second 2
    ("qwen2_5_vl", 101),
    ("qwen2_vl", 102),
    ("qwen3_vl", 103),
    ("glm4v", 104),
    ("glm4v", 105),
)


@pytest.mark.parametrize(("name", "seed"), CONFIGS)
def test_settings_read_from_the_models_config(
    service: httpx.Client, name: str, seed: int | None
) -> None:
    """The body's ``config``: the real ``config.to_dict()`` of the model compared with."""
    if seed is None:
        segments, merge, rate = EXAMPLE, 2, 2
    else:
        segments, merge, rate = draw(np.random.default_rng(seed), name)
    model = build(name, merge, rate)
    config = model.config.to_dict()
    json.dumps(config)  # serializable as it is
    answer = ours(service, {"segments": segments, "config": config}).json()
    ids, delta = theirs(model, name, segments)
    assert (answer["model"], answer["spatial_merge_size"]) == (MODELS[name][3], merge)
    assert answer["tokens_per_second"] == (rate if name == "qwen2_5_vl" else None)
    assert (answer["position_ids"], answer["rope_delta"]) == (ids, delta)
    if seed is None:  # and the two fields a config.json must hold
        vision = {"spatial_merge_size": 2, "tokens_per_second": 2}
        small = {"segments": segments, "config": {"model_type": name, "vision_config": vision}}
        assert ours(service, small).json() == answer


REFUSED: Final = (
    pytest.param(
        "qwen2_vl",
        [{"text": 2}, {"image": [1, 4, 4]}, {"image": [1, 4, 4]}, {"text": 1}],
        id="image-image",
    ),
    pytest.param(
        "qwen2_vl",
        [{"text": 2}, {"image": [1, 4, 4]}, {"text": 0}, {"image": [1, 4, 4]}],
        id="image-no-text-image",
    ),
    pytest.param("qwen2_5_vl", [{"video": [2, 4, 4]}, {"video": [2, 4, 4]}], id="video-video"),
    pytest.param(
        "qwen3_vl", [{"text": 2}, {"video": [3, 4, 4]}, {"text": 1}], id="frames-without-text"
    ),
    pytest.param("qwen2_vl", [{"text": 2}, {"image": [1, 6, 5]}, {"text": 1}], id="w-not-merged"),
)


@pytest.mark.parametrize(("name", "segments"), REFUSED)
def test_layouts_the_real_code_fails_on_are_refused(
    service: httpx.Client, name: str, segments: Segments
) -> None:
    try:
        theirs(build(name, 2, 2), name, segments)
    except Exception:  # the real code's failure: a shape mismatch or an exhausted grid list
        failed = True
    else:
        failed = False
    assert failed, "transformers processes this layout"
    body = {"segments": segments, "model": name, "spatial_merge_size": 2, "tokens_per_second": 2}
    answer = service.post(PATH, json=body)
    assert answer.status_code == 422, answer.text
