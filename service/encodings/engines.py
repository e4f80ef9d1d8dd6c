"""What a serving engine computes where it differs from transformers: the rotary tables of
vLLM 0.33.0 (commit 4ba787ec9, ``vllm/model_executor/layers/rotary_embedding/``), as the
parameters under which transformers' arithmetic gives the same table, and the dtype its
cache is stored in.

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

import math
from collections.abc import Mapping
from typing import Any, Final, Literal, get_args

import numpy as np
from numpy.typing import NDArray

from service.encodings import scalings
from service.encodings.scalings import Asked, Scaling
from service.errors import InvalidParameter

Engine = Literal["transformers", "vllm"]
ENGINES: Final[tuple[Engine, ...]] = get_args(Engine)
CacheDType = Literal["float32", "float16", "bfloat16"]
CACHE_DTYPES: Final[tuple[CacheDType, ...]] = get_args(CacheDType)
SOURCE: Final = "vllm 0.33.0 (4ba787ec9): vllm/model_executor/layers/rotary_embedding/"


def _mscale(scale: float, m: float) -> float:
    return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0


def adapt(
    engine: Engine,
    scaling: Asked,
    given: Mapping[str, Any],
    max_len: int,
    max_model_len: int | None,
) -> tuple[Scaling, dict[str, Any], int]:
    """The scaling, its parameters and the sequence length under which transformers'
    arithmetic gives ``engine``'s table for ``scaling`` with ``given`` at ``max_len``."""
    values = dict(given)
    if engine == "transformers" or scaling not in ("dynamic", "longrope", "deepseek_yarn"):
        if max_model_len is not None:
            raise InvalidParameter("max_model_len", "is for engine=vllm with scaling=longrope")
        return ("yarn" if scaling == "deepseek_yarn" else scaling), values, max_len
    if scaling == "dynamic":
        if values.get("seq_len") is not None:
            raise InvalidParameter(
                "seq_len", "engine=vllm builds one static dynamic table: it takes no seq_len"
            )
        if values.get("max_position_embeddings") is not None:
            values["seq_len"] = values["max_position_embeddings"]
        return scaling, values, max_len
    if scaling == "longrope":
        original = values.get("original_max_position_embeddings")
        deployed = max_model_len if max_model_len is not None else original
        return scaling, values, max_len if deployed is None else deployed
    if max_model_len is not None:
        raise InvalidParameter("max_model_len", "is for engine=vllm with scaling=longrope")
    factor = values.get("factor")
    if factor is None or not (math.isfinite(factor) and factor > 0):
        raise InvalidParameter("factor", "is required by scaling=deepseek_yarn (engine=vllm)")
    m, m_all = values.pop("mscale", None), values.pop("mscale_all_dim", None)
    above = _mscale(factor, 1.0 if m is None else m)
    below = _mscale(factor, 0.0 if m_all is None else m_all)
    if below == 0:
        raise InvalidParameter("mscale_all_dim", "makes the attention factor divide by 0")
    # attention_factor is not read here (vLLM does not): a factor out of range is blamed on
    # what was sent, mscale where its part is out of range, else mscale_all_dim, else factor
    wrong = not 0 < above <= scalings.MAX_ATTENTION or m_all is None
    blamed = "mscale" if m is not None and wrong else "mscale_all_dim"
    blamed = "factor" if m is None and m_all is None else blamed
    how = f"with factor {factor:g}, mscale(factor, mscale) / mscale(factor, mscale_all_dim)"
    values["attention_factor"] = scalings.checked_attention(above / below, (blamed, how))
    values["truncate"] = True
    return "yarn", values, max_len


def resolve(
    engine: Engine,
    scaling: Asked,
    given: Mapping[str, Any],
    r: int,
    max_len: int,
    rotated: int,
    max_model_len: int | None = None,
) -> tuple[Scaling, scalings.Params]:
    """The table's scaling and resolved parameters (:func:`scalings.resolve`) for ``engine``."""
    named, values, length = adapt(engine, scaling, given, max_len, max_model_len)
    return named, scalings.resolve(named, values, r, length, rotated)


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
