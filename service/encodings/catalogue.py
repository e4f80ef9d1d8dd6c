"""The presets: the sinusoidal tables the libraries train with, one entry each, with the
library functions each follows and the parameters each takes (``GET /v1/presets`` lists
them). The wire's preset names and parameter fields are made from here."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import replace
from typing import Final

from service.encodings import _library
from service.encodings.parameters import (
    BASE,
    COS_FIRST,
    FULL_TURNS,
    MAX_FREQ,
    MAX_TIMESCALE,
    MAX_WAVELENGTH,
    MIN_FREQ,
    MIN_TIMESCALE,
    PADDING_IDX,
    SCALE,
    START_INDEX,
)
from service.encodings.presets import (
    Param,
    Preset,
    Source,
    frequency_range,
    halves,
    powers,
    timescales,
)

_HF: Final = "huggingface/transformers"
_ROOT_D: Final = "sqrt(d_model)"
TAU: Final = 2 * math.pi

PRESETS: Final[dict[str, Preset]] = {
    preset.name: preset
    for preset in (
        Preset(
            "vaswani",
            "The paper's table: sin and cos interleaved, pair k at base^(-2k/d).",
            (
                Source(
                    _HF,
                    "src/transformers/models/xlm/modeling_xlm.py",
                    "create_sinusoidal_embeddings",
                ),
            ),
            "the paper; Hugging Face DistilBERT, XLM, Flaubert; the old TensorFlow tutorial",
            "PE[p, 2k] = sin(p base^(-2k/d)), PE[p, 2k+1] = cos(p base^(-2k/d))",
            None,
            "sin",
            1,
            powers("base", lambda d: d),
            None,
            (BASE,),
            _ROOT_D,
            aliases=("distilbert", "xlm", "flaubert"),
        ),
        Preset(
            "pytorch-tutorial",
            "PyTorch's nn.Transformer tutorial: interleaved, frequencies in float32.",
            (
                Source(
                    "pytorch/tutorials",
                    "beginner_source/transformer_tutorial.py",
                    "PositionalEncoding",
                ),
            ),
            "models written from the PyTorch tutorial",
            "div_term = exp(2k (-ln base / d)); PE[p, 2k] = sin(p div_term), "
            "PE[p, 2k+1] = cos(p div_term)",
            "interleaved",
            "reject",
            2,
            powers("base", lambda d: d),
            _library.pytorch_tutorial,
            (BASE,),
            _ROOT_D,
            torch=True,
        ),
        Preset(
            "tf-tutorial",
            "TensorFlow's transformer tutorial: all sines, then all cosines, in float64.",
            (Source("tensorflow/text", "docs/tutorials/transformer.ipynb", "positional_encoding"),),
            "models written from the TensorFlow tutorial",
            "rates = base^(-k / (d/2)); PE[p] = [sin(p rates) | cos(p rates)]",
            "sin-cos",
            "reject",
            2,
            powers("base", lambda d: d),
            _library.tf_tutorial,
            (BASE,),
            _ROOT_D,
            computes_in="float64",
        ),
        Preset(
            "tensor2tensor",
            "tensor2tensor's timing signal: [sin | cos] of geometric timescales, float32.",
            (
                Source(
                    "tensorflow/tensor2tensor",
                    "tensor2tensor/layers/common_attention.py",
                    "get_timing_signal_1d",
                ),
            ),
            "tensor2tensor Transformer models",
            "inv_k = min_ts exp(-k ln(max_ts / min_ts) / max(n - 1, 1)); "
            "[sin(p inv) | cos(p inv) | 0 if d odd]",
            "sin-cos",
            "zero",
            1,
            timescales,
            _library.tensor2tensor,
            (MIN_TIMESCALE, MAX_TIMESCALE, START_INDEX),
            _ROOT_D,
            "row r is position r + start_index",
            shift=START_INDEX.name,
            # inv_k runs from min_ts to min_ts^2 / max_ts
            frequency=lambda p: max(
                p["min_timescale"], p["min_timescale"] ** 2 / p["max_timescale"]
            ),
            frequency_parameters=(MIN_TIMESCALE.name, MAX_TIMESCALE.name),
            frequency_formula="max(min_timescale, min_timescale^2 / max_timescale)",
            aliases=("t2t",),
        ),
        Preset(
            "fairseq",
            "fairseq's SinusoidalPositionalEmbedding: [sin | cos], float32, a zero padding row.",
            (
                Source(
                    "facebookresearch/fairseq",
                    "fairseq/modules/sinusoidal_positional_embedding.py",
                    "SinusoidalPositionalEmbedding.get_embedding",
                ),
                Source("facebookresearch/fairseq", "fairseq/utils.py", "make_positions"),
                Source(
                    _HF,
                    "src/transformers/models/m2m_100/modeling_m2m_100.py",
                    "M2M100SinusoidalPositionalEmbedding.get_embedding",
                ),
            ),
            "fairseq Transformers; Hugging Face M2M100, NLLB, Speech2Text, FSMT, XGLM",
            "w_k = exp(-k ln base / (n - 1)); [sin(p w) | cos(p w) | 0 if d odd]; "
            "row padding_idx is 0",
            "sin-cos",
            "zero",
            4,
            halves,
            _library.fairseq,
            (PADDING_IDX,),
            _ROOT_D,
            "row r is position id r: the first token is padding_idx + 1",
            zero_row=PADDING_IDX.name,
            first_row=lambda params: int(params["padding_idx"]) + 1,
            aliases=("nllb", "m2m100", "m2m-100", "speech2text", "fsmt", "xglm"),
            torch=True,
        ),
        Preset(
            "whisper",
            "Whisper's encoder positions: [sin | cos], float32.",
            (
                Source("openai/whisper", "whisper/model.py", "sinusoids"),
                Source(_HF, "src/transformers/models/whisper/modeling_whisper.py", "sinusoids"),
            ),
            "Whisper encoders (OpenAI and Hugging Face)",
            "w_k = exp(-k ln base / (n - 1)); [sin(p w) | cos(p w)]",
            "sin-cos",
            "reject",
            4,
            halves,
            _library.fairseq,
            (replace(BASE, description="max_timescale."),),
            torch=True,
        ),
        Preset(
            "musicgen",
            "MusicGen's positions: [cos | sin] (cosines first), float32.",
            (
                Source(
                    _HF,
                    "src/transformers/models/musicgen/modeling_musicgen.py",
                    "MusicgenSinusoidalPositionalEmbedding.get_embedding",
                ),
            ),
            "Hugging Face MusicGen, MusicGen Melody",
            "w_k = exp(-k ln base / (n - 1)); [cos(p w) | sin(p w) | 0 if d odd]",
            "cos-sin",
            "zero",
            4,
            halves,
            _library.fairseq,
            (BASE,),
            aliases=("musicgen-melody",),
            torch=True,
        ),
        Preset(
            "marian",
            "Marian's table: the ceil(d/2) sines, then the cosines, computed in float64.",
            (
                Source(
                    _HF,
                    "src/transformers/models/marian/modeling_marian.py",
                    "MarianSinusoidalPositionalEmbedding.create_weight",
                ),
            ),
            "Hugging Face Marian (opus-mt), Pegasus",
            "angle = p / base^(2 (j // 2) / d); [sin of the even j | cos of the odd j]",
            "split",
            "sin",
            1,
            powers("base", lambda d: d),
            _library.marian,
            (BASE,),
            _ROOT_D,
            computes_in="float64",
            aliases=("opus-mt", "pegasus"),
        ),
        Preset(
            "keras",
            "keras-hub's SinePositionEncoding: interleaved, float32.",
            (
                Source(
                    "keras-team/keras-hub",
                    "keras_hub/src/layers/modeling/sine_position_encoding.py",
                    "SinePositionEncoding",
                ),
            ),
            "Keras models using keras_hub.layers.SinePositionEncoding",
            "timescales = (1 / max_wavelength)^(2 (j // 2) / d); sin for even j, cos for odd j",
            "interleaved",
            "sin",
            1,
            powers("max_wavelength", lambda d: d),
            _library.keras,
            (MAX_WAVELENGTH, START_INDEX),
            positions="row r is position r + start_index",
            shift=START_INDEX.name,
            aliases=("keras-hub", "keras_hub"),
        ),
        Preset(
            "positional-encodings",
            "PyPI positional-encodings' PositionalEncoding1D: interleaved, float32.",
            (
                Source(
                    "tatp22/multidim-positional-encoding",
                    "positional_encodings/torch_encodings.py",
                    "PositionalEncoding1D",
                ),
            ),
            "models using the positional-encodings package",
            "C = 2 ceil(d/2); inv_freq = 1 / base^(2k / C); sin, cos interleaved; the first d "
            "columns",
            "interleaved",
            "sin",
            1,
            powers("base", lambda d: 2 * math.ceil(d / 2)),
            _library.positional_encodings,
            (BASE,),
            torch=True,
        ),
        Preset(
            "mlx",
            "mlx.nn.SinusoidalPositionalEncoding: [sin | cos] (or [cos | sin]), scaled, float32.",
            (
                Source(
                    "ml-explore/mlx",
                    "python/mlx/nn/layers/positional_encoding.py",
                    "SinusoidalPositionalEncoding",
                ),
            ),
            "MLX models",
            "sigma_k = exp((1 - k/(n-1)) (ln max_freq - ln min_freq) + ln min_freq); "
            "scale [sin(p sigma) | cos(p sigma)]",
            "sin-cos",
            "reject",
            2,
            frequency_range,
            _library.mlx,
            (MIN_FREQ, MAX_FREQ, SCALE, COS_FIRST, FULL_TURNS),
            scale=SCALE.name,
            # sigma_k runs from max_freq to min_freq (in turns with full_turns)
            frequency=lambda p: max(p["min_freq"], p["max_freq"]) * (TAU if p["full_turns"] else 1),
            frequency_parameters=(MIN_FREQ.name, MAX_FREQ.name, FULL_TURNS.name),
            frequency_formula="max(min_freq, max_freq) (times 2 pi with full_turns)",
        ),
    )
}


def parameters_of(presets: Iterable[Preset]) -> dict[str, Param]:
    """Every preset's parameters by name, in the order they first appear: the wire's fields
    (a preset may word one its own way, as whisper does base)."""
    found: dict[str, Param] = {}
    for param in (param for preset in presets for param in preset.params):
        found.setdefault(param.name, param)
    return found


PARAMETERS: Final = parameters_of(PRESETS.values())


def taking(name: str) -> tuple[str, ...]:
    """The presets that take parameter ``name``, in the catalogue's order."""
    return tuple(p.name for p in PRESETS.values() if any(q.name == name for q in p.params))
