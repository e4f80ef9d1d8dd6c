"""How the config readers read each ``model_type``, where it differs from any other's: one
record a model type (:class:`ModelType`) in one table (:data:`MODELS`), as transformers 5.23
and vLLM 0.33.0 declare it (``src/transformers/``, ``vllm/``).

A published config holds the fields its model changed and leaves the rest to its class: Gemma
3 4B's ``text_config`` has no ``head_dim``, ``num_attention_heads`` or
``max_position_embeddings``; GPT-J's names its own (``n_embd``, ``n_head``, ``rotary_dim``).
Only the fields the readings use are listed, and only where the class's default is not
what a config of no class gets (``rope_theta`` 10000, ``partial_rotary_factor`` 1: the
``RotaryEmbeddingConfigMixin``'s). A model's layers differ in kind (Gemma's sliding and full
attention, Llama 4's layers without RoPE) by a pattern its class knows where the config lists
none. A model's vision tower is read by the same table (Qwen-VL's M-RoPE position ids, from
its ``vision_config``): a reading of another kind of model (a diffusers ``config.json``, a
vision tower's rope) is one more record.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from service.encodings.mrope_positions import Model
from service.encodings.rotary import Convention
from service.schemas.hf_config import Reader


@dataclass(frozen=True, slots=True)
class ModelType:
    """A model type as the readers read it. ``source``: its file and class under
    ``src/transformers/`` (or vLLM's, where only vLLM reads it differently).

    What its config class gives a config: ``defaults``, by the config's own names, what it
    takes for a field left out; ``names``, its ``attribute_map`` (the common name, as
    ``hidden_size``, to the config's own, as ``n_embd``); ``convention``, how its attention
    pairs a head's dimensions where that is not ``rotate_half``'s; ``unset``, the fields its
    class holds as plain integers, which a config may not set to null (transformers refuses
    the config), each with why: elsewhere a null is read as the field left out.

    Where its layers' kinds come from, where the config lists none (``layer_types``):
    ``pattern``, every ``pattern``-th layer full attention and the others sliding (the
    config's ``sliding_window_pattern`` first); ``last_layer``, the last layer's kind whatever
    the pattern says; ``nope_interval``, every ``nope_interval``-th layer without RoPE (the
    config's ``no_rope_layer_interval`` first). ``older``: its rope parameters per layer type
    from the fields its config had before transformers 5; ``global_head_dim``: the head width
    of its full-attention layers where the config gives none.

    What other readers read: ``vllm``, the scaling vLLM runs for a transformers one;
    ``positions``, whose ``get_rope_index`` makes its M-RoPE position ids (its vision tower's
    settings read from ``vision_config``)."""

    source: str
    defaults: Mapping[str, Any] = field(default_factory=dict)
    names: Mapping[str, str] = field(default_factory=dict)
    convention: Convention | None = None
    unset: Mapping[str, str] = field(default_factory=dict)
    pattern: int | None = None
    last_layer: str | None = None
    nope_interval: int | None = None
    older: Callable[[Reader], dict[str, Reader]] | None = None
    global_head_dim: int | None = None
    vllm: Mapping[str, str] = field(default_factory=dict)  # rope scaling -> vLLM's
    positions: Model | None = None


# Gemma 3's defaults before transformers 5: rope_theta for full attention, rope_local_base_freq
# for sliding
_GEMMA3_THETA: Final = {"full_attention": 1_000_000.0, "sliding_attention": 10_000.0}


def gemma3_rope(text: Reader) -> dict[str, Reader]:
    """Gemma 3's fields before transformers 5 as its config converts them
    (``Gemma3TextConfig.convert_rope_params_to_dict``): ``rope_theta`` and ``rope_scaling``
    for ``full_attention``, ``rope_local_base_freq`` for ``sliding_attention``; a
    ``rope_scaling`` without ``rope_type`` is lost there, so here too."""
    full: dict[str, Any] = {"rope_type": "default"}
    scaling = text.object("rope_scaling")
    if scaling is not None:
        full |= {name: scaling.get(name) for name in scaling.values}
    if "rope_theta" not in full:
        full["rope_theta"] = text.get_or("rope_theta", _GEMMA3_THETA["full_attention"])
    sliding = {
        "rope_type": "default",
        "rope_theta": text.get_or("rope_local_base_freq", _GEMMA3_THETA["sliding_attention"]),
    }
    # what they were read from is recorded already: these stand for the converted parameters
    return {
        "full_attention": Reader(full, "rope_parameters.full_attention.", []),
        "sliding_attention": Reader(sliding, "rope_parameters.sliding_attention.", []),
    }


_GEMMA3 = ModelType(
    # the pattern is __post_init__'s kwargs.get("sliding_window_pattern", 6): without
    # layer_types, layer i is full_attention where (i + 1) % 6 == 0
    "models/gemma3/configuration_gemma3.py, Gemma3TextConfig",
    {
        "head_dim": 256,
        "max_position_embeddings": 131_072,
        "num_hidden_layers": 26,
        "sliding_window_pattern": 6,
    },
    pattern=6,
    older=gemma3_rope,
)
_GEMMA4 = ModelType(
    # __post_init__: Gemma 3's pattern, the last layer always full_attention, whose heads
    # are global_head_dim wide
    "models/gemma4/configuration_gemma4.py, Gemma4TextConfig",
    pattern=6,
    last_layer="full_attention",
    global_head_dim=512,
)
_LLAMA4 = ModelType(
    # its apply_rotary_emb turns complex pairs (2i, 2i + 1); Llama4TextConfig.__post_init__:
    # without no_rope_layers, every 4th layer has no RoPE
    "models/llama4/modeling_llama4.py, Llama4TextRotaryEmbedding",
    convention="interleaved",
    nope_interval=4,
)
# vLLM runs their scaled rope with its DeepseekScalingRotaryEmbedding
_DEEPSEEK = ModelType("vllm/model_executor/models/deepseek_v2.py", vllm={"yarn": "deepseek_yarn"})

MODELS: Final[Mapping[str, ModelType]] = {
    "gemma": ModelType(
        "models/gemma/configuration_gemma.py, GemmaConfig",
        {"head_dim": 256, "max_position_embeddings": 8192},
    ),
    "gemma2": ModelType(
        "models/gemma2/configuration_gemma2.py, Gemma2Config",
        {"head_dim": 256, "max_position_embeddings": 8192},
    ),
    "gemma3": _GEMMA3,  # Gemma3Config: its text_config is a Gemma3TextConfig
    "gemma3_text": _GEMMA3,
    "gemma4": _GEMMA4,
    "gemma4_text": _GEMMA4,
    "gptj": ModelType(
        # modeling_gptj.py's create_sinusoidal_positions over rotary_dim (base 10000), and
        # rotate_every_two: pairs (2i, 2i + 1)
        "models/gptj/configuration_gptj.py, GPTJConfig",
        {"n_positions": 2048, "n_embd": 4096, "n_head": 16, "n_layer": 28, "rotary_dim": 64},
        {
            "max_position_embeddings": "n_positions",
            "hidden_size": "n_embd",
            "num_attention_heads": "n_head",
            "num_hidden_layers": "n_layer",
        },
        "interleaved",
        {
            # GPTJConfig's rotary_dim is an int (a strict field: from_dict refuses None);
            # GPTJAttention, were it None, would make its table n_embd wide
            # (pos_embd_dim = rotary_dim or embed_dim) and turn whole heads with it, which
            # fits a head only when n_head is 1
            "rotary_dim": "transformers' GPTJConfig refuses it (an integer); without it, "
            "GPT-J's attention would turn whole heads by a table n_embd wide, which runs with "
            "one head only: give the dimensions of a head rotated",
        },
    ),
    "gpt_neox": ModelType(
        # convert_rope_params_to_dict: partial_rotary_factor from rotary_pct, default 0.25
        "models/gpt_neox/configuration_gpt_neox.py, GPTNeoXConfig",
        {
            "hidden_size": 6144,
            "num_attention_heads": 64,
            "max_position_embeddings": 2048,
            "rotary_pct": 0.25,
        },
    ),
    "llama": ModelType(
        "models/llama/configuration_llama.py, LlamaConfig",
        {"hidden_size": 4096, "num_attention_heads": 32, "max_position_embeddings": 2048},
    ),
    "llama4": _LLAMA4,
    "llama4_text": _LLAMA4,
    "mistral": ModelType(
        "models/mistral/configuration_mistral.py, MistralConfig",
        {"hidden_size": 4096, "num_attention_heads": 32, "max_position_embeddings": 131_072},
    ),
    "qwen2": ModelType(
        "models/qwen2/configuration_qwen2.py, Qwen2Config",
        {"hidden_size": 4096, "num_attention_heads": 32, "max_position_embeddings": 32_768},
    ),
    "phi3": ModelType(
        # a class attribute: standardize_rope_params gives it precedence over rope_scaling's
        "models/phi3/configuration_phi3.py, Phi3Config",
        {
            "hidden_size": 3072,
            "num_attention_heads": 32,
            "max_position_embeddings": 4096,
            "original_max_position_embeddings": 4096,
        },
    ),
    "deepseek_v2": _DEEPSEEK,
    "deepseek_v3": _DEEPSEEK,
    # the arithmetic of each one's get_rope_index (GLM-4V's is Qwen3-VL's)
    "qwen2_vl": ModelType("models/qwen2_vl/modeling_qwen2_vl.py", positions="qwen2_vl"),
    "qwen2_5_vl": ModelType("models/qwen2_5_vl/modeling_qwen2_5_vl.py", positions="qwen2_5_vl"),
    "qwen3_vl": ModelType("models/qwen3_vl/modeling_qwen3_vl.py", positions="qwen3_vl"),
    "qwen3_vl_moe": ModelType("models/qwen3_vl_moe/modeling_qwen3_vl_moe.py", positions="qwen3_vl"),
    "glm4v": ModelType("models/glm4v/modeling_glm4v.py", positions="qwen3_vl"),
    "glm4v_moe": ModelType("models/glm4v_moe/modeling_glm4v_moe.py", positions="qwen3_vl"),
}


def model_of(kind: str | None) -> ModelType | None:
    """The record of the model type ``kind`` names, or None (a config of no known type)."""
    return None if kind is None else MODELS.get(kind)
