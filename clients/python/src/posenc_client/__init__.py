"""A typed client for the positional-encoding service, sync (:class:`Client`) and async
(:class:`AsyncClient`), on httpx. Arrays travel as ``.npy`` (``.npz`` for a batch with its
position ids) and come back as NumPy arrays; an error answer raises :class:`ProblemError`
with its RFC 9457 problem document. It imports nothing from the service.

    from posenc_client import Client

    with Client("http://127.0.0.1:8000") as pe:
        table = pe.table(2048, 512)                      # numpy (2048, 512) float32
        y = pe.apply(x, position_ids=ids)                # x * sqrt(d_model) + PE[ids]
        cos, sin = pe.rotary(4096, 128, base=500000.0)   # RoPE, each (4096, 128)
        cos, sin = pe.from_config("config.json", max_len=4096)  # a model's own RoPE
        gemma = pe.rotary_layers("config.json")          # {"tables": {type: (cos, sin)}, ...}
        cos, sin = pe.rotary_positions(ids, max_len=4096, head_dim=128)  # at position ids
        ids, delta = pe.mrope_positions([{"text": 5}, {"image": [1, 28, 28]}])  # (3, L)
        scales = pe.temperature(65536)                   # Llama 4's query scales, (65536,)
        bias = pe.alibi_bias(8, 512)                     # (8, 512, 512), -inf masked
        audit = pe.audit("rotary", 131072, head_dim=128)  # each path's error by band
        diff = pe.compare(a, b, stop=4096)               # {"family", "parameters"}s, by band
        check = pe.verify({"cos": cos, "sin": sin}, "rotary", head_dim=128, base=5e5)
        found = pe.identify({"cos": cos, "sin": sin})     # the GETs that give it, best first
"""

from posenc_client._async import AsyncClient
from posenc_client._encoding import ProblemError, RotaryLayers, Value, read_npy, write_npy
from posenc_client._sync import Client

__all__ = [
    "AsyncClient",
    "Client",
    "ProblemError",
    "RotaryLayers",
    "Value",
    "read_npy",
    "write_npy",
]
__version__ = "1.0.0"
