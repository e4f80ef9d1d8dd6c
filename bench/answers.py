"""The digest of every answer in a catalogue of requests: one line per request, its status,
its headers (but ``date``) and a hash of its body, so that a restructuring can show it changed
no byte a client sees. The app runs in process with the default settings.

    .venv/bin/python bench/answers.py > after.txt
    git stash; .venv/bin/python bench/answers.py > before.txt; git stash pop
    diff before.txt after.txt     # nothing, when no answer changed

``--full`` prints each answer's headers in full instead of one hash of them. Headers are
compared as a set, sorted: the order of fields with different names carries no meaning in
HTTP (RFC 9110, section 5.3).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
from collections.abc import Iterator
from typing import Any

import numpy as np
from fastapi.testclient import TestClient

from service.app import create_app
from service.settings import Settings

Request = tuple[str, str, dict[str, str], bytes | None]

_LLAMA = {
    "model_type": "llama",
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "max_position_embeddings": 131072,
    "rope_theta": 500000.0,
    "rope_scaling": {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    },
}
_GEMMA3 = {
    "model_type": "gemma3_text",
    "head_dim": 256,
    "rope_theta": 1000000.0,
    "rope_local_base_freq": 10000.0,
    "rope_scaling": {"rope_type": "linear", "factor": 8.0},
    "max_position_embeddings": 131072,
    "sliding_window_pattern": 6,
}
_GEMMA4 = {
    "model_type": "gemma4_text",
    "head_dim": 256,
    "global_head_dim": 512,
    "layer_types": ["sliding_attention", "full_attention"],
    "rope_parameters": {
        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
        "full_attention": {
            "rope_type": "proportional",
            "rope_theta": 1000000.0,
            "partial_rotary_factor": 0.25,
        },
    },
    "max_position_embeddings": 131072,
}
_DEEPSEEK = {
    "model_type": "deepseek_v3",
    "qk_rope_head_dim": 64,
    "rope_theta": 10000,
    "max_position_embeddings": 163840,
    "rope_scaling": {
        "type": "yarn",
        "factor": 40,
        "original_max_position_embeddings": 4096,
        "beta_fast": 32,
        "beta_slow": 1,
        "mscale": 1.0,
        "mscale_all_dim": 1.0,
    },
}
_QWEN_VL = {
    "model_type": "qwen2_5_vl",
    "hidden_size": 3584,
    "num_attention_heads": 28,
    "rope_theta": 1000000.0,
    "max_position_embeddings": 128000,
    "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
}
_SCOUT = {
    "model_type": "llama4",
    "text_config": {
        "model_type": "llama4_text",
        "head_dim": 128,
        "max_position_embeddings": 10485760,
        "rope_theta": 500000.0,
        "attn_temperature_tuning": True,
        "floor_scale": 8192,
        "attn_scale": 0.1,
    },
}
_DYNAMIC: dict[str, Any] = {
    "family": "rotary",
    "parameters": {
        "head_dim": 64,
        "max_len": 2048,
        "max_position_embeddings": 512,
        "scaling": "dynamic",
        "factor": 4,
    },
}
_MROPE = {
    "segments": [{"text": 5}, {"image": [1, 28, 28]}, {"text": 3}, {"video": [4, 28, 28]}],
    "spatial_merge_size": 2,
    "tokens_per_second": 2,
}


def _npy(array: np.ndarray[Any, Any]) -> bytes:
    out = io.BytesIO()
    np.save(out, array)
    return out.getvalue()


def _json(document: Any) -> bytes:
    return json.dumps(document).encode()


JSON = {"content-type": "application/json"}
NPY = {"content-type": "application/x-npy"}


def catalogue() -> Iterator[Request]:
    """Tables in every format and rounding, slices, 304s, HEAD, pictures, presets, apply,
    positions, from-config (per-layer-type, M-RoPE, Llama 4), audits, compare, M-RoPE ids,
    the inference protocol, and refusals of each kind."""
    tables = [
        "/v1/encodings/sinusoidal?max_len=16&d_model=8",
        "/v1/encodings/sinusoidal?max_len=4&d_model=4&base=100",
        "/v1/encodings/sinusoidal?max_len=64&d_model=33&start=5&stop=40&dim_start=3&dim_stop=9",
        "/v1/encodings/sinusoidal?max_len=8&d_model=16&preset=fairseq",
        "/v1/encodings/sinusoidal?max_len=8&d_model=16&preset=tensor2tensor&rounding=library",
        "/v1/encodings/sinusoidal?max_len=8&d_model=16&dtype=float64",
        "/v1/encodings/sinusoidal?max_len=8&d_model=16&dtype=float16",
        "/v1/encodings/rotary?max_len=16&head_dim=8",
        "/v1/encodings/rotary?max_len=16&head_dim=8&convention=interleaved&rounding=library",
        "/v1/encodings/rotary?max_len=64&head_dim=16&scaling=yarn&factor=4"
        "&original_max_position_embeddings=16",
        "/v1/encodings/rotary?max_len=64&head_dim=16&scaling=llama3&factor=8"
        "&original_max_position_embeddings=16&low_freq_factor=1&high_freq_factor=4",
        "/v1/encodings/rotary?max_len=64&head_dim=16&scaling=dynamic&factor=2"
        "&max_position_embeddings=16&engine=vllm",
        "/v1/encodings/rotary?max_len=16&head_dim=16&mrope_section=2,3,3",
        "/v1/encodings/rotary?max_len=32&head_dim=8&partial_rotary_factor=0.5&start=3&stop=9",
        "/v1/biases/alibi/slopes?num_heads=12",
        "/v1/biases/alibi?num_heads=4&max_len=8",
        "/v1/biases/alibi?num_heads=4&max_len=8&form=bloom&dtype=float64",
        "/v1/biases/alibi?num_heads=3&max_len=6&key_len=9&form=symmetric",
        "/v1/encodings/temperature?max_len=16",
        "/v1/encodings/temperature?max_len=20000&start=8190&stop=8200&rounding=library",
    ]
    formats = ["json", "npy", "npz", "safetensors", "raw"]
    for url in tables:
        for fmt in formats:
            yield "GET", f"{url}&format={fmt}", {}, None
        yield "GET", url, {"accept": "application/x-npy"}, None
        yield "GET", url, {"accept": "text/html"}, None
        yield "GET", url, {"accept-encoding": "gzip"}, None
        yield "HEAD", url, {}, None
    yield "GET", "/v1/encodings/sinusoidal/heatmap.png?max_len=16&d_model=8", {}, None
    yield "GET", "/v1/encodings/sinusoidal/similarity.png?max_len=16&d_model=8", {}, None
    yield "GET", "/v1/presets", {}, None
    # refusals of each kind
    for url in [
        "/v1/encodings/sinusoidal?max_len=0&d_model=8",
        "/v1/encodings/sinusoidal?max_len=8",
        "/v1/encodings/sinusoidal?max_len=8&d_model=8&d_model=9",
        "/v1/encodings/sinusoidal?max_len=8&d_model=8&colour=red",
        "/v1/encodings/sinusoidal?max_len=8&d_model=8&start=9",
        "/v1/encodings/sinusoidal?max_len=100000000&d_model=8192",
        "/v1/encodings/sinusoidal?max_len=100000&d_model=1024&format=json",
        "/v1/encodings/rotary?max_len=8&head_dim=7",
        "/v1/encodings/rotary?max_len=8&head_dim=8&scaling=yarn",
        "/v1/encodings/rotary?max_len=8&head_dim=8&scaling=bogus",
        "/v1/biases/alibi?num_heads=0&max_len=8",
        "/v1/audit/rotary?head_dim=7&max_len=8",
        "/v1/encodings/nope?max_len=8",
    ]:
        yield "GET", url, {}, None
    # apply
    batch = np.linspace(-1, 1, 2 * 5 * 8, dtype=np.float32).reshape(2, 5, 8)
    for path in ["/v1/encodings/sinusoidal/apply", "/v1/encodings/rotary/apply"]:
        yield "POST", path, NPY, _npy(batch)
        yield "POST", path + "?offset=3&format=json", NPY, _npy(batch)
        yield "POST", path, JSON, _json({"embeddings": batch[0].tolist()})
        yield (
            "POST",
            path,
            JSON,
            _json({"embeddings": batch.tolist(), "position_ids": [4, 1, 7, 0, 2]}),
        )
        yield "POST", path, {"content-type": "text/plain"}, b"x"
        yield "POST", path, JSON, b"{"
    yield (
        "POST",
        "/v1/encodings/rotary/apply?format=raw&shape=2,5,8",
        {"content-type": "application/octet-stream"},
        batch.tobytes(),
    )
    # positions
    positions = "/v1/encodings/rotary/positions?max_len=4096&head_dim=16"
    for fmt in formats:
        yield "POST", f"{positions}&format={fmt}", JSON, _json({"position_ids": [0, 1, 2, 4095]})
    yield "POST", positions, JSON, _json({"position_ids": [[0, 5], [9, 2]]})
    yield (
        "POST",
        positions + "&mrope_section=2,3,3",
        JSON,
        _json({"position_ids": [[0, 1], [0, 2], [0, 3]]}),
    )
    yield "POST", positions, NPY, _npy(np.arange(6, dtype=np.int64))
    yield "POST", positions, JSON, _json({"position_ids": [4096]})
    # from-config
    configs = [
        ("/v1/encodings/rotary/from-config?max_len=16", _LLAMA),
        ("/v1/encodings/rotary/from-config?max_len=16&rounding=library", _LLAMA),
        ("/v1/encodings/rotary/from-config?max_len=16", _GEMMA3),
        ("/v1/encodings/rotary/from-config?max_len=16&layer_type=sliding_attention", _GEMMA3),
        ("/v1/encodings/rotary/from-config?max_len=16", _GEMMA4),
        ("/v1/encodings/rotary/from-config?max_len=16&layer_type=full_attention", _GEMMA4),
        ("/v1/encodings/rotary/from-config?max_len=16", _DEEPSEEK),
        ("/v1/encodings/rotary/from-config?max_len=16&engine=vllm", _DEEPSEEK),
        ("/v1/encodings/rotary/from-config?max_len=16", _QWEN_VL),
        ("/v1/encodings/rotary/from-config?max_len=16", _SCOUT),
        ("/v1/encodings/temperature/from-config?max_len=16", _SCOUT),
        ("/v1/encodings/rotary/from-config?max_len=16", {"model_type": "llama"}),
        ("/v1/encodings/rotary/from-config?max_len=16", {"head_dim": 8, "rope_theta": "x"}),
        ("/v1/encodings/rotary/from-config?max_len=16", {"model_type": 3}),
        ("/v1/encodings/temperature/from-config?max_len=16", _LLAMA),
        ("/v1/audit/rotary/from-config?max_len=4096", _LLAMA),
        ("/v1/audit/rotary/from-config?max_len=4096&format=png", _LLAMA),
        ("/v1/audit/rotary/from-config?max_len=4096", _GEMMA3),
        ("/v1/audit/rotary/from-config?max_len=4096&layer_type=full_attention", _GEMMA4),
        ("/v1/audit/temperature/from-config?max_len=65536", _SCOUT),
        ("/v1/audit/rotary/from-config?max_len=4096", {"model_type": "llama"}),
    ]
    for url, config in configs:
        for fmt in ["json", "npz", "safetensors"] if "encodings" in url else ["json"]:
            sep = "&" if "?" in url else "?"
            yield (
                "POST",
                f"{url}{sep}format={fmt}" if "format=" not in url else url,
                JSON,
                _json(config),
            )
    # audits
    for url in [
        "/v1/audit/sinusoidal?max_len=4096&d_model=64",
        "/v1/audit/sinusoidal?max_len=4096&d_model=64&preset=fairseq&format=png",
        "/v1/audit/rotary?max_len=8192&head_dim=64",
        "/v1/audit/rotary?max_len=8192&head_dim=64&scaling=yarn&factor=4"
        "&original_max_position_embeddings=2048&bands=4",
        "/v1/audit/rotary?max_len=8192&head_dim=64&format=png",
        "/v1/audit/alibi?num_heads=8&max_len=512",
        "/v1/audit/temperature?max_len=65536",
    ]:
        yield "GET", url, {}, None
        yield "GET", url, {"accept": "image/png"}, None
        yield "HEAD", url, {}, None
    # compare
    vllm = {**_DYNAMIC, "parameters": {**_DYNAMIC["parameters"], "engine": "vllm"}}
    compare = {"a": _DYNAMIC, "b": vllm, "stop": 2048}
    yield "POST", "/v1/compare", JSON, _json({**compare, "start": 256})
    yield "POST", "/v1/compare?format=png", JSON, _json(compare)
    yield "POST", "/v1/compare", {**JSON, "accept": "image/png"}, _json(compare)
    yield (
        "POST",
        "/v1/compare",
        JSON,
        _json(
            {
                "a": {"family": "sinusoidal", "parameters": {"max_len": 64, "d_model": 16}},
                "b": {
                    "family": "sinusoidal",
                    "parameters": {"max_len": 64, "d_model": 16, "preset": "fairseq"},
                },
                "stop": 64,
            }
        ),
    )
    yield (
        "POST",
        "/v1/compare",
        JSON,
        _json(
            {
                "a": {"family": "rotary", "config": _LLAMA, "parameters": {"max_len": 64}},
                "b": {"family": "rotary", "parameters": {"head_dim": 128, "max_len": 64}},
                "stop": 64,
            }
        ),
    )
    yield "POST", "/v1/compare", JSON, _json({"a": _DYNAMIC, "stop": 8})
    yield "POST", "/v1/compare", JSON, _json({"a": _DYNAMIC, "b": {"family": "nope"}, "stop": 8})
    # M-RoPE ids
    for fmt in formats:
        yield "POST", f"/v1/positions/mrope?format={fmt}", JSON, _json(_MROPE)
    yield "POST", "/v1/positions/mrope", JSON, _json({"segments": []})
    # the inference protocol
    for url in ["/v2", "/v2/health/ready", "/v2/models/sinusoidal", "/v2/models/sinusoidal-apply"]:
        yield "GET", url, {}, None
    infer = {
        "inputs": [{"name": "positions", "shape": [2], "datatype": "INT64", "data": [0, 7]}],
        "parameters": {"d_model": 4},
    }
    yield "POST", "/v2/models/sinusoidal/infer", JSON, _json(infer)
    yield "POST", "/v2/models/sinusoidal/infer", JSON, _json({"inputs": []})
    yield "GET", "/healthz", {}, None
    yield "GET", "/openapi.json", {}, None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--full", action="store_true", help="print every header in full")
    full = parser.parse_args().full
    with TestClient(create_app(Settings()), raise_server_exceptions=False) as client:
        for method, url, headers, body in catalogue():
            shown = f"{method} {url} {sorted(headers.items())}"
            for _ in range(2):  # a cold answer, then the same from the cache
                answer = client.request(method, url, headers=headers, content=body)
                kept = sorted((k, v) for k, v in answer.headers.items() if k != "date")
                digest = hashlib.sha256(answer.content).hexdigest()[:16]
                said = repr(kept) if full else hashlib.sha256(repr(kept).encode()).hexdigest()[:16]
                print(shown, answer.status_code, said, digest)
                etag = answer.headers.get("etag")
                if etag and method == "GET":
                    again = client.request(method, url, headers={**headers, "if-none-match": etag})
                    print(shown, "if-none-match", again.status_code, again.headers.get("etag"))


if __name__ == "__main__":
    main()
