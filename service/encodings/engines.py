"""What a serving engine computes where it differs from transformers: the rotary tables of
vLLM 0.33.0 (commit 4ba787ec9, ``vllm/model_executor/layers/rotary_embedding/``), as the
parameters under which transformers' arithmetic gives the same table (each scaling's record
in :data:`.scalings.RULES` carries its engines' variants), and the dtype its cache is
stored in.

- ``dynamic`` (``dynamic_ntk_scaling_rope.py``, ``DynamicNTKScalingRotaryEmbedding``): one
  static table built once, its base ``base * (factor * max_position / max_trained -
  (factor - 1)) ** (d / (d - 2))`` with ``max_trained = max_position`` (the model's
  ``max_position_embeddings``): transformers' table at ``seq_len = max_position_embeddings``,
  whatever the sequence, where transformers rescales past it.
- ``longrope`` (``phi3_long_rope_scaled_rope.py``, ``Phi3LongRoPEScaledRotaryEmbedding``): the
  long factors for every position once the deployment's ``max_model_len`` passes
  ``original_max_position_embeddings`` (its default is that length: short factors),
  where transformers picks them per sequence; the attention factor is the same.
- ``yarn`` (``yarn_scaling_rope.py``): the same arithmetic and keys as transformers 5.23
  (``attention_factor``, ``mscale``, ``mscale_all_dim``, ``truncate``; older vLLMs read
  ``attn_factor`` instead).
- ``deepseek_yarn`` (``deepseek_scaling_rope.py``, ``DeepseekScalingRotaryEmbedding``, which
  ``models/deepseek_v2.py`` gives DeepSeek-V2/V3 for any scaled rope): yarn whose cos and sin
  are multiplied by ``mscale(factor, mscale) / mscale(factor, mscale_all_dim)`` (``mscale``
  1 and ``mscale_all_dim`` 0 by default, ``attention_factor`` not read), the correction
  range always truncated. In transformers, DeepSeek-V3's rope is plain ``yarn``.
- the cache (``base.py``, ``RotaryEmbeddingBase.__init__``): computed in float32, then
  stored in the model's dtype (``cache.to(dtype)``): ``cache_dtype``.
"""

from __future__ import annotations

from typing import Final, Literal, get_args

import numpy as np
from numpy.typing import NDArray

Engine = Literal["transformers", "vllm"]
ENGINES: Final[tuple[Engine, ...]] = get_args(Engine)
CacheDType = Literal["float32", "float16", "bfloat16"]
CACHE_DTYPES: Final[tuple[CacheDType, ...]] = get_args(CacheDType)
SOURCE: Final = "vllm 0.33.0 (4ba787ec9): vllm/model_executor/layers/rotary_embedding/"


def stored(rows: NDArray[np.floating], cache_dtype: CacheDType) -> None:
    """``rows`` rounded in place to ``cache_dtype`` (to nearest, ties to even, as torch's
    ``Tensor.to``), kept in their own dtype."""
    if cache_dtype == "float16":
        rows[...] = rows.astype(np.float16)
    elif cache_dtype == "bfloat16":
        bits = rows.astype(np.float32).view(np.uint32)
        bits += np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))
        bits &= np.uint32(0xFFFF0000)
        rows[...] = bits.view(np.float32)
