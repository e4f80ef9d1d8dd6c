"""What transformers' config class of each ``model_type`` gives a ``config.json`` that leaves a
field out, one record a class, as transformers 5.23 declares it (``src/transformers/``).

A published config holds the fields its model changed and leaves the rest to its class: Gemma
3 4B's ``text_config`` has no ``head_dim``, ``num_attention_heads`` or
``max_position_embeddings``; GPT-J's names its own (``n_embd``, ``n_head``, ``rotary_dim``).
Only the fields the rotary reading uses are listed, and only where the class's default is not
what a config of no class gets (``rope_theta`` 10000, ``partial_rotary_factor`` 1: the
``RotaryEmbeddingConfigMixin``'s).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from service.encodings.rotary import Convention


@dataclass(frozen=True, slots=True)
class ConfigClass:
    """A config class: ``source``, its file and class under ``src/transformers/``;
    ``defaults``, by the config's own names, what it takes for a field left out; ``names``,
    its ``attribute_map`` (the common name, as ``hidden_size``, to the config's own, as
    ``n_embd``); ``convention``, how its attention pairs a head's dimensions where that is
    not ``rotate_half``'s."""

    source: str
    defaults: Mapping[str, Any] = field(default_factory=dict)
    names: Mapping[str, str] = field(default_factory=dict)
    convention: Convention | None = None


_GEMMA3 = ConfigClass(
    # the pattern is __post_init__'s kwargs.get("sliding_window_pattern", 6)
    "models/gemma3/configuration_gemma3.py, Gemma3TextConfig",
    {
        "head_dim": 256,
        "max_position_embeddings": 131_072,
        "num_hidden_layers": 26,
        "sliding_window_pattern": 6,
    },
)
_LLAMA4 = ConfigClass(
    # its apply_rotary_emb turns complex pairs (2i, 2i + 1)
    "models/llama4/modeling_llama4.py, Llama4TextRotaryEmbedding",
    convention="interleaved",
)

CLASSES: Final[Mapping[str, ConfigClass]] = {
    "gemma": ConfigClass(
        "models/gemma/configuration_gemma.py, GemmaConfig",
        {"head_dim": 256, "max_position_embeddings": 8192},
    ),
    "gemma2": ConfigClass(
        "models/gemma2/configuration_gemma2.py, Gemma2Config",
        {"head_dim": 256, "max_position_embeddings": 8192},
    ),
    "gemma3": _GEMMA3,  # Gemma3Config: its text_config is a Gemma3TextConfig
    "gemma3_text": _GEMMA3,
    "gptj": ConfigClass(
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
    ),
    "gpt_neox": ConfigClass(
        # convert_rope_params_to_dict: partial_rotary_factor from rotary_pct, default 0.25
        "models/gpt_neox/configuration_gpt_neox.py, GPTNeoXConfig",
        {
            "hidden_size": 6144,
            "num_attention_heads": 64,
            "max_position_embeddings": 2048,
            "rotary_pct": 0.25,
        },
    ),
    "llama": ConfigClass(
        "models/llama/configuration_llama.py, LlamaConfig",
        {"hidden_size": 4096, "num_attention_heads": 32, "max_position_embeddings": 2048},
    ),
    "llama4": _LLAMA4,
    "llama4_text": _LLAMA4,
    "mistral": ConfigClass(
        "models/mistral/configuration_mistral.py, MistralConfig",
        {"hidden_size": 4096, "num_attention_heads": 32, "max_position_embeddings": 131_072},
    ),
    "qwen2": ConfigClass(
        "models/qwen2/configuration_qwen2.py, Qwen2Config",
        {"hidden_size": 4096, "num_attention_heads": 32, "max_position_embeddings": 32_768},
    ),
    "phi3": ConfigClass(
        # a class attribute: standardize_rope_params gives it precedence over rope_scaling's
        "models/phi3/configuration_phi3.py, Phi3Config",
        {
            "hidden_size": 3072,
            "num_attention_heads": 32,
            "max_position_embeddings": 4096,
            "original_max_position_embeddings": 4096,
        },
    ),
}
