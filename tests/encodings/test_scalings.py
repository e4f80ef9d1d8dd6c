"""The scalings' table: one record each, and the lists made from it."""

from __future__ import annotations

from typing import Any, get_args

import numpy as np
import pytest

from service.encodings import scalings
from service.schemas import hf_rope

# parameters that resolve every scaling at a rotary dimension of 8
GIVEN: dict[str, dict[str, Any]] = {
    "none": {},
    "linear": {"factor": 2.0},
    "ntk": {"factor": 2.0},
    "dynamic": {"factor": 2.0, "max_position_embeddings": 16, "seq_len": 64},
    "yarn": {"factor": 4.0, "original_max_position_embeddings": 16},
    "longrope": {
        "short_factor": [1.0, 1.5, 2.0, 2.5],
        "long_factor": [2.0, 3.0, 4.0, 5.0],
        "original_max_position_embeddings": 16,
        "factor": 2.0,
    },
    "llama3": {
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 16,
    },
    "proportional": {"factor": 2.0},
}


def test_every_scaling_has_one_record() -> None:
    assert get_args(scalings.Scaling) == scalings.SCALINGS
    assert tuple(scalings.RULES) == scalings.SCALINGS


def test_what_a_request_names_is_a_record_or_a_variant_of_one() -> None:
    assert tuple(scalings.ASKED) == get_args(scalings.Asked)
    assert scalings.rule_of("deepseek_yarn") is scalings.RULES["yarn"]


@pytest.mark.parametrize("name", scalings.SCALINGS)
def test_a_record_requires_only_what_it_takes(name: scalings.Scaling) -> None:
    rule = scalings.RULES[name]
    assert set(rule.required) <= set(rule.parameters)


def test_config_rope_types_are_the_records() -> None:
    for name, rule in scalings.RULES.items():
        if rule.rope_type is not None:
            assert hf_rope.ROPE_TYPES[rule.rope_type] == name
    assert set(hf_rope.ROPE_TYPES.values()) <= set(scalings.SCALINGS)


@pytest.mark.parametrize("name", scalings.SCALINGS)
def test_exact_and_library_arithmetic_agree(name: scalings.Scaling) -> None:
    params = scalings.resolve(name, GIVEN[name], 8, 64)
    hi, lo = scalings.exact_frequencies(name, 10000.0, 8, params)
    library = scalings.library_frequencies(name, 10000.0, 8, params)
    assert library.dtype == np.float32
    assert library.shape == (4,)
    np.testing.assert_allclose(library, hi + lo, rtol=1e-6)


@pytest.mark.parametrize("name", scalings.SCALINGS)
def test_preparing_costs_only_for_factors_of_its_own(name: scalings.Scaling) -> None:
    params = scalings.resolve(name, GIVEN[name], 8, 64)
    cost = scalings.preparation(name, 12345.0, 8, params)
    assert (cost > 0) == scalings.RULES[name].factors
    scalings.exact_frequencies(name, 12345.0, 8, params)
    assert scalings.preparation(name, 12345.0, 8, params) == 0
