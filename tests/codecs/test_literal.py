"""The .npy header's literals read without the ast module, as ast.literal_eval reads them:
the same value for every literal of the kinds numpy writes (and their neighbours), and a
refusal wherever literal_eval refuses; safe to call from many threads at once."""

from __future__ import annotations

import ast
import threading
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.codecs import _literal
from tests.support import examples

# what repr writes without an escape (a header with an escape is refused before)
TEXT = st.text(
    alphabet=st.characters(
        whitelist_categories=("L", "N", "P", "S", "Zs"), blacklist_characters="'\"\\"
    ),
    max_size=8,
).filter(str.isprintable)
SCALARS = (
    TEXT
    | st.integers(-(10**20), 10**20)
    | st.booleans()
    | st.none()
    | st.floats(allow_nan=False, allow_infinity=False)
)
LITERALS = st.recursive(
    SCALARS,
    lambda inner: (
        st.tuples(inner, inner)
        | st.lists(inner, max_size=4)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(TEXT, inner, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=examples(500), derandomize=True, deadline=None)
@given(LITERALS)
def test_every_literal_reads_as_literal_eval_reads_it(value: Any) -> None:
    text = repr(value)
    assert _literal.parse(text, 64) == ast.literal_eval(text)


@pytest.mark.parametrize(
    "text",
    [
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
        "{'descr': '<f8', 'fortran_order': True, 'shape': (), }",
        '{"shape": (5,), "descr": "|u1", "fortran_order": False}',
        "(3)",
        "( 1 , 2 , )",
        "[]",
        "{}",
        "-7",
        "1e999",
        "  {'a': [1, (2,), {'b': None}]}   ",
    ],
)
def test_headers_and_their_neighbours(text: str) -> None:
    assert _literal.parse(text, 64) == ast.literal_eval(text)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "{",
        "{'a' 1}",
        "{'a': 1",
        "(1 2)",
        "2**70",
        "(2L, 3L)",
        "__import__('os')",
        "{[1]: 2}",
        "Truex",
        "'unterminated",
        "9" * 5000,
        "{'a': 1} {}",
        ",",
        "010",
        "1\xa0",
    ],
)
def test_what_literal_eval_refuses_is_refused(text: str) -> None:
    with pytest.raises((ValueError, TypeError, SyntaxError)):
        ast.literal_eval(text)
    with pytest.raises(_literal.NotALiteral):
        _literal.parse(text, 64)


def test_many_threads_at_once() -> None:
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"
    failures: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(2000):
                assert _literal.parse(header, 4) == {
                    "descr": "<f4",
                    "fortran_order": False,
                    "shape": (2, 3),
                }
        except BaseException as error:
            failures.append(error)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures


def test_nesting_past_the_depth_is_refused_not_recursed() -> None:
    assert _literal.parse("[" * 4 + "]" * 4, 4) == [[[[]]]]
    with pytest.raises(_literal.NotALiteral, match="nested"):
        _literal.parse("[" * 5 + "]" * 5, 4)
    with pytest.raises(_literal.NotALiteral, match="nested"):
        _literal.parse("[" * 5000 + "]" * 5000, 4)  # not a RecursionError
