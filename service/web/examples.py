"""The example of each posted body, as Swagger UI's "Try it out" sends it: a body the
service answers as it stands (a model's config.json, a layout, a batch), and the parameters
it needs, written into the app's OpenAPI document by operation id. Without one, Swagger UI
makes a body from the schema (``{}``, ``"string"``), which every POST refused with a 422;
``tests/routes/test_swagger.py`` sends each example and expects a 2xx."""

from __future__ import annotations

from typing import Any, Final, NamedTuple


class Example(NamedTuple):
    """What Swagger UI's "Try it out" fills in for an operation: its bodies, each a name,
    a summary and a JSON body that the service answers as it stands, and the values of the
    parameters it needs (a model's context is too long a table for a JSON answer)."""

    bodies: dict[str, tuple[str, Any]]
    parameters: dict[str, Any]


# the paper's table (d_model 8), rows 0 to 3, as GET /v1/encodings/sinusoidal writes them
_PAPER_ROWS: Final = [
    [0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0],
    [0.84147096, 0.5403023, 0.099833414, 0.9950042, 0.009999833, 0.99995, 0.0009999998, 0.9999995],
    [0.9092974, -0.41614684, 0.19866933, 0.9800666, 0.019998666, 0.9998, 0.0019999987, 0.999998],
    [0.14112, -0.9899925, 0.29552022, 0.9553365, 0.029995501, 0.99955004, 0.0029999956, 0.9999955],
]
# a rotary table (head_dim 8, base 10000), positions 0 to 3
_ROTARY_COS: Final = [
    [1.0] * 8,
    [0.5403023, 0.9950042, 0.99995, 0.9999995] * 2,
    [-0.41614684, 0.9800666, 0.9998, 0.999998] * 2,
    [-0.9899925, 0.9553365, 0.99955004, 0.9999955] * 2,
]
_ROTARY_SIN: Final = [
    [0.0] * 8,
    [0.84147096, 0.09983342, 0.009999833, 0.0009999999] * 2,
    [0.9092974, 0.19866933, 0.019998666, 0.0019999987] * 2,
    [0.14112, 0.29552022, 0.0299955, 0.0029999956] * 2,
]
# Llama 3.1 8B's config.json, the fields from-config and the audit read (and its dtype)
_LLAMA_31: Final[dict[str, Any]] = {
    "model_type": "llama",
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "max_position_embeddings": 131072,
    "rope_theta": 500000.0,
    "rope_scaling": {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    },
    "torch_dtype": "bfloat16",
}
# Llama 4 Scout's config.json: its text model's attention temperature and RoPE
_SCOUT: Final[dict[str, Any]] = {
    "model_type": "llama4",
    "text_config": {
        "model_type": "llama4_text",
        "head_dim": 128,
        "num_hidden_layers": 48,
        "max_position_embeddings": 10485760,
        "rope_theta": 500000.0,
        "rope_scaling": {
            "rope_type": "llama3",
            "factor": 16.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 1.0,
            "original_max_position_embeddings": 8192,
        },
        "attn_temperature_tuning": True,
        "floor_scale": 8192,
        "attn_scale": 0.1,
    },
}
# transformers' dynamic NTK scaling against vLLM's, past the trained context (the
# explorer's compare view and docs/http-api.md show the same)
_DYNAMIC: Final[dict[str, Any]] = {
    "family": "rotary",
    "parameters": {
        "head_dim": 64,
        "max_len": 16384,
        "max_position_embeddings": 4096,
        "scaling": "dynamic",
        "factor": 4,
    },
}
_EMBEDDINGS: Final = [[0.5, -0.25, 1.0, 0.0, 0.75, -1.0, 0.25, 0.5] for _ in range(4)]
_INFER: Final = Example(
    {
        "sinusoidal": (
            "The sinusoidal table's rows at positions 0 and 7 (d_model 4)",
            {
                "inputs": [
                    {"name": "positions", "shape": [2], "datatype": "INT64", "data": [0, 7]}
                ],
                "parameters": {"d_model": 4},
            },
        )
    },
    {"name": "sinusoidal", "version": "1"},
)
# Swagger UI sends an operation's example as it stands: without one it makes a body from
# the schema ({} or "string"), which every POST refused (422)
# FLUX.1-dev's transformer config.json (diffusers)
_FLUX_1_DEV: Final[dict[str, Any]] = {
    "_class_name": "FluxTransformer2DModel",
    "attention_head_dim": 128,
    "axes_dims_rope": [16, 56, 56],
    "guidance_embeds": True,
    "in_channels": 64,
    "joint_attention_dim": 4096,
    "num_attention_heads": 24,
    "num_layers": 19,
    "num_single_layers": 38,
    "patch_size": 1,
    "pooled_projection_dim": 768,
}
EXAMPLES: Final = {
    "getRotaryTableFromConfig": Example(
        {"llama-3.1": ("Llama 3.1 8B's config.json", _LLAMA_31)}, {"max_len": 16}
    ),
    "auditRotaryFromConfig": Example(
        {"llama-3.1": ("Llama 3.1 8B's config.json", _LLAMA_31)}, {"max_len": 4096}
    ),
    "getTemperatureTableFromConfig": Example(
        {"llama-4-scout": ("Llama 4 Scout's config.json", _SCOUT)}, {"max_len": 16}
    ),
    "auditTemperatureFromConfig": Example(
        {"llama-4-scout": ("Llama 4 Scout's config.json", _SCOUT)}, {"max_len": 65536}
    ),
    "getRotaryAtPositions": Example(
        {"ids": ("Four position ids", {"position_ids": [0, 1, 2, 4095]})},
        {"max_len": 4096, "head_dim": 128},
    ),
    "getTimestepTableFromConfig": Example(
        {"flux.1-dev": ("FLUX.1-dev's transformer config.json", _FLUX_1_DEV)},
        {"max_len": 1000, "start": 990},
    ),
    "auditTimestepFromConfig": Example(
        {"flux.1-dev": ("FLUX.1-dev's transformer config.json", _FLUX_1_DEV)},
        {"max_len": 1001},
    ),
    "getTimestepEmbeddingAt": Example(
        {
            "flux": (
                "FLUX.1's sampler at σ 0.75 and 0.9 (timesteps 750 and 900: the model "
                "embeds 752 and 900)",
                {"position_ids": [750, 900]},
            )
        },
        {"max_len": 1, "dim": 256, "preset": "flux"},
    ),
    "getRopeNdTableFromConfig": Example(
        {
            "flux.1-dev": (
                "FLUX.1-dev's transformer config.json, the fields its RoPE reads",
                {
                    "_class_name": "FluxTransformer2DModel",
                    "attention_head_dim": 128,
                    "axes_dims_rope": [16, 56, 56],
                    "patch_size": 1,
                },
            )
        },
        {"height": 256, "width": 256, "text_tokens": 4, "stop": 8},
    ),
    "getRopeNdAtIds": Example(
        {
            "flux": (
                "FLUX.1's ids (axes, L) of a text token and two image tokens",
                {"position_ids": [[0, 0, 0], [0, 0, 5], [0, 1, 7]]},
            )
        },
        {"grid": "1,1", "preset": "flux"},
    ),
    "getVisionRotaryTableFromConfig": Example(
        {
            "qwen2.5-vl-7b": (
                "Qwen2.5-VL-7B-Instruct's config.json, the fields its vision tower's RoPE "
                "reads (a 448 × 644 image)",
                {
                    "model_type": "qwen2_5_vl",
                    "vision_config": {
                        "hidden_size": 1280,
                        "num_heads": 16,
                        "patch_size": 14,
                        "spatial_merge_size": 2,
                        "temporal_patch_size": 2,
                        "window_size": 112,
                    },
                },
            )
        },
        {"height": 448, "width": 644, "stop": 8},
    ),
    "getVisionRotaryAtPatches": Example(
        {
            "qwen2.5-vl": (
                "Three patches (row, column) of a 4 x 8 grid, Qwen2.5-VL-7B's vision tower",
                {"position_ids": [[0, 1, 3], [0, 6, 7]]},
            )
        },
        {"model": "qwen2_5_vl", "grid": "4,8"},
    ),
    "getSincos2DTableFromConfig": Example(
        {
            "sd3.5-medium": (
                "Stable Diffusion 3.5 Medium's transformer config.json (a 1024 × 1024 picture)",
                {
                    "_class_name": "SD3Transformer2DModel",
                    "attention_head_dim": 64,
                    "num_attention_heads": 24,
                    "num_layers": 24,
                    "patch_size": 2,
                    "pos_embed_max_size": 384,
                    "sample_size": 128,
                },
            )
        },
        {"height": 1024, "width": 1024, "stop": 4},
    ),
    "getSincos3DTableFromConfig": Example(
        {
            "cogvideox-2b": (
                "CogVideoX-2b's transformer config.json (49 frames of 480 × 720)",
                {
                    "_class_name": "CogVideoXTransformer3DModel",
                    "attention_head_dim": 64,
                    "num_attention_heads": 30,
                    "sample_frames": 49,
                    "sample_height": 60,
                    "sample_width": 90,
                    "spatial_interpolation_scale": 1.875,
                    "use_rotary_positional_embeddings": False,
                },
            )
        },
        {"start": 226, "stop": 230},
    ),
    "getMropePositions": Example(
        {
            "qwen2.5-vl": (
                "Text, an image, text and a video, as Qwen2.5-VL lays them out",
                {
                    "segments": [
                        {"text": 5},
                        {"image": [1, 28, 28]},
                        {"text": 3},
                        {"video": [4, 28, 28], "seconds_per_grid": 1.0},
                    ],
                    "spatial_merge_size": 2,
                    "tokens_per_second": 2,
                },
            )
        },
        {},
    ),
    "compareTables": Example(
        {
            "dynamic": (
                "transformers' dynamic scaling against vLLM's, past the trained context",
                {
                    "a": _DYNAMIC,
                    "b": {**_DYNAMIC, "parameters": {**_DYNAMIC["parameters"], "engine": "vllm"}},
                    "start": 4096,
                    "stop": 16384,
                },
            )
        },
        {},
    ),
    "verifyTable": Example(
        {
            "sinusoidal": (
                "The paper's table of width 8, four rows, as a port computed it",
                {"family": "sinusoidal", "parameters": {"d_model": 8}, "data": _PAPER_ROWS},
            ),
            "swapped": (
                "The same rows with sin and cos swapped: diagnosed",
                {
                    "family": "sinusoidal",
                    "parameters": {"d_model": 8},
                    "data": [[row[i ^ 1] for i in range(8)] for row in _PAPER_ROWS],
                },
            ),
        },
        {},
    ),
    "identifyTable": Example(
        {
            "rotary": (
                "A rotary table of head_dim 8, four positions: named as its GET",
                {"cos": _ROTARY_COS, "sin": _ROTARY_SIN},
            )
        },
        {},
    ),
    "applySinusoidal": Example(
        {
            "batch": (
                "Four embeddings of 8 numbers, at positions 0 to 3",
                {"embeddings": _EMBEDDINGS},
            )
        },
        {},
    ),
    "applyRotary": Example(
        {
            "batch": (
                "Four heads' rows of 8 numbers, at positions 0 to 3",
                {"embeddings": _EMBEDDINGS},
            )
        },
        {},
    ),
    "applyRopeNd": Example(
        {
            "batch": (
                "A head's four tokens (a 2x2 grid) of 8 numbers, axes 4 and 4",
                {"embeddings": _EMBEDDINGS},
            )
        },
        {"grid": "2,2", "axes_dim": "4,4"},
    ),
    "applyVisionRotary": Example(
        {
            "batch": (
                "A head's four patches (a 2x2 grid) of 8 numbers, Pixtral's pairs",
                {"embeddings": _EMBEDDINGS},
            )
        },
        {"model": "pixtral", "grid": "2,2", "head_dim": 8},
    ),
    "inferModel": _INFER,
    "inferModelVersion": _INFER,
}


def example_of(operation_id: str) -> Example | None:
    """The example of an operation: its own, or for a family's audit from a config, the
    family's from-config example without its rows (the audit of the same table)."""
    own = EXAMPLES.get(operation_id)
    audit = operation_id.startswith("audit") and operation_id.endswith("FromConfig")
    if own is not None or not audit:
        return own
    family = operation_id.removeprefix("audit").removesuffix("FromConfig")
    table = EXAMPLES.get(f"get{family}TableFromConfig")
    if table is None:
        return None
    rows = ("start", "stop")
    return Example(table.bodies, {k: v for k, v in table.parameters.items() if k not in rows})


def with_examples(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` (the app's OpenAPI) with :data:`EXAMPLES` written in, by operation id:
    each JSON body's ``examples``, and each parameter's ``example``. What it writes into is
    copied first: FastAPI may share an ``openapi_extra`` between operations."""
    for operations in document.get("paths", {}).values():
        for operation in operations.values():
            example = example_of(operation.get("operationId", ""))
            if example is None:
                continue
            body = operation["requestBody"] = dict(operation["requestBody"])
            content = body["content"] = dict(body["content"])
            content["application/json"] = {
                **content["application/json"],
                "examples": {
                    name: {"summary": summary, "value": value}
                    for name, (summary, value) in example.bodies.items()
                },
            }
            if "parameters" in operation:
                operation["parameters"] = [
                    {**parameter, "example": example.parameters[parameter["name"]]}
                    if parameter["name"] in example.parameters
                    else parameter
                    for parameter in operation["parameters"]
                ]
    return document
