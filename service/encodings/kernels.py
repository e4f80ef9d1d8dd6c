"""The float32 functions of ``rounding=library`` where the library is torch: exp, sin,
cos, pow and log1p computed by torch's own CPU kernels (the ``torch`` engine, with the
``torch`` extra) or correctly rounded (the ``numpy`` engine: the float64 function of the
float32 argument, rounded once). torch's are not correctly rounded (about 1 % of its
float32 sin and cos one ulp off, 5 % of a timestep table's entries), so only the torch
engine makes such a path bitwise against torch on CPU; without it the path stays within an
ulp of torch.

What torch gives for an entry depends on how it is called only for ``pow``: sin, cos, exp
and log1p are vectorized to the last element (``vml``'s ``vec::map``), and give the same
bits whatever the tensor's length, the entry's place in it, its strides or the threads
(measured over 10^6 arguments); ``pow`` is ``cpu_kernel_vec``, vectorized (SLEEF) over
blocks of twice the vector width and scalar (``std::pow``) for the rest, so its bits
depend on where the entry falls and on the CPU's vector width (1.6 % of scalar results
differ from the vectorized ones; with ``ATEN_CPU_CAPABILITY=default`` instead of AVX2, 1.8 %
of pow's results differ, and none of sin's, cos's or exp's). :func:`pow` is therefore
called with the exponents as the library makes them (the whole 1-D vector, a scalar base),
and the engine's :func:`label` names the CPU capability torch chose.

The engine is the process's, chosen once where the service starts (:func:`use`, from
``PE_LIBRARY_ENGINE``); within one engine every answer is a pure function of its
parameters. torch is imported only by :func:`use`: the numpy core never needs it.
"""

from __future__ import annotations

import importlib
import math
from types import ModuleType
from typing import Any, Final, Literal, get_args

import numpy as np
from numpy.typing import NDArray

F32 = np.float32
Float32Array = NDArray[np.float32]
Engine = Literal["torch", "numpy"]
Choice = Literal["auto", "torch", "numpy"]
CHOICES: Final[tuple[Choice, ...]] = get_args(Choice)


class EngineUnavailable(RuntimeError):
    """The torch engine was asked for and torch does not import."""


_torch: ModuleType | None = None
_state: dict[str, Engine] = {"engine": "numpy"}


def _import_torch() -> ModuleType | None:
    try:
        return importlib.import_module("torch")
    except ImportError:
        return None


def resolve(choice: Choice) -> Engine:
    """The engine ``choice`` means here: ``auto`` is torch when it imports, else numpy."""
    if choice == "numpy":
        return "numpy"
    if _torch is not None or _import_torch() is not None:
        return "torch"
    if choice == "torch":
        raise EngineUnavailable(
            "torch does not import: install the torch extra (pip install '.[torch]'), "
            "or give auto or numpy"
        )
    return "numpy"


def use(choice: Choice) -> Engine:
    """Make the engine ``choice`` means the process's (:func:`resolve`); it returns it."""
    global _torch
    engine = resolve(choice)
    if engine == "torch" and _torch is None:
        torch = _import_torch()
        assert torch is not None
        # the service's lanes are its parallelism; torch's bits do not depend on threads
        torch.set_num_threads(1)
        _torch = torch
    _state["engine"] = engine
    return engine


def engine() -> Engine:
    """The process's engine."""
    return _state["engine"]


def label() -> str:
    """The engine as answers name it: ``numpy``, or ``torch <version> <capability>`` (pow's
    bits depend on the CPU capability torch uses: AVX2 and AVX512 split its vectors
    differently)."""
    if _state["engine"] == "numpy" or _torch is None:
        return "numpy"
    capability = _torch.backends.cpu.get_cpu_capability()
    return f"torch {_torch.__version__} {capability}"


def _torch_of(x: NDArray[Any]) -> Any:
    assert _torch is not None
    return _torch.from_numpy(np.ascontiguousarray(x, dtype=F32))


def _narrow(x: float | np.floating[Any] | NDArray[Any]) -> NDArray[np.float64]:
    return np.asarray(x, dtype=F32).astype(np.float64)


def exp(x: NDArray[Any]) -> Float32Array:
    """float32 ``exp`` of float32 ``x``."""
    if _state["engine"] == "torch":
        return np.asarray(_torch_of(x).exp().numpy())
    with np.errstate(over="ignore"):
        return np.asarray(np.exp(_narrow(x)).astype(F32))


def sin(x: NDArray[Any]) -> Float32Array:
    """float32 ``sin`` of float32 ``x``."""
    if _state["engine"] == "torch":
        return np.asarray(_torch_of(x).sin().numpy())
    return np.asarray(np.sin(_narrow(x)).astype(F32))


def cos(x: NDArray[Any]) -> Float32Array:
    """float32 ``cos`` of float32 ``x``."""
    if _state["engine"] == "torch":
        return np.asarray(_torch_of(x).cos().numpy())
    return np.asarray(np.cos(_narrow(x)).astype(F32))


def polar(x: NDArray[Any]) -> tuple[Float32Array, Float32Array]:
    """float32 cos and sin of float32 ``x`` as ``torch.polar(ones, x)`` makes them: the
    real and imaginary parts of a complex64 (another kernel than :func:`cos` and
    :func:`sin`: nearly all its results are correctly rounded)."""
    if _state["engine"] == "torch":
        assert _torch is not None
        angles = _torch_of(x)
        turned = _torch.polar(_torch.ones_like(angles), angles)
        return np.array(turned.real.numpy()), np.array(turned.imag.numpy())
    return cos(x), sin(x)


def log1p(x: NDArray[Any]) -> Float32Array:
    """float32 ``log1p`` of float32 ``x``."""
    if _state["engine"] == "torch":
        return np.asarray(_torch_of(x).log1p().numpy())
    return np.asarray(np.log1p(_narrow(x)).astype(F32))


def pow(base: float | np.floating[Any] | NDArray[Any], exponents: NDArray[Any]) -> Float32Array:
    """float32 ``base ** exponents``, base and exponents rounded to float32 first (a Python
    number meets a float32 tensor as a float32). With the torch engine, give the exponents
    as the library makes them: the whole vector, in its order (see the module's note)."""
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        if _state["engine"] == "torch":
            assert _torch is not None
            # a base past float32's range is infinite there too, as torch takes a number
            wide = _torch.tensor(np.asarray(base, dtype=F32))
            return np.asarray(_torch.pow(wide, _torch_of(exponents)).numpy())
        return np.asarray(np.power(_narrow(base), _narrow(exponents)).astype(F32))


def arange(stop: float, step: float) -> Float32Array:
    """float32 ``arange(0, stop, step)`` of a fractional step (DINOv3's exponents in
    transformers). torch's CPU kernel fills whole vectors from float32 bases (``base + k *
    step`` rounded, the base itself ``step * index`` rounded), so some values are an ulp
    from ``k * step`` rounded once, which the numpy engine gives."""
    count = math.ceil(stop / step)
    if _state["engine"] == "torch":
        assert _torch is not None
        return np.asarray(_torch.arange(0, stop, step, dtype=_torch.float32).numpy())
    return np.asarray((np.arange(count, dtype=np.float64) * step).astype(F32))
