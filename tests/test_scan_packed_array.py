"""``scan.packed_array``: the arrays the pure-Python scanner builds through ``struct.pack`` are exactly what
``array(code, values)`` builds, and what array refuses is refused the same way."""

from __future__ import annotations

import math
from array import array

import pytest

from specdiag.ingest.scan import NA, packed_array


@pytest.mark.parametrize(("code", "values"), [
    ("q", [0, 1, -1, 2**63 - 1, -(2**63), NA]),
    ("Q", [0, 2**64 - 1, (2**32 - 1) << 32 | 12345]),
    ("I", [0, 7, 2**32 - 1]),
    ("b", [0, 1, -128, 127]),
    ("B", [0, 255]),
    ("d", [0.0, -0.0, 1.5, math.inf, 1e308, 5]),
    ("q", []),
])
def test_packed_arrays_equal_the_array_constructors(code: str, values: list) -> None:
    for given in (values, tuple(values), iter(values), map(int, values) if code != "d" else iter(values)):
        packed = packed_array(code, given)
        assert packed.typecode == code
        assert packed.tobytes() == array(code, values).tobytes()


def test_nan_is_packed_bit_for_bit() -> None:
    assert packed_array("d", [math.nan]).tobytes() == array("d", [math.nan]).tobytes()


@pytest.mark.parametrize(("code", "values", "error"), [
    ("q", [2**63], OverflowError),
    ("Q", [-1], OverflowError),
    ("b", [200], OverflowError),
    ("q", [1.5], TypeError),
    ("q", ["7"], TypeError),
    ("d", [None], TypeError),
])
def test_what_array_refuses_is_refused_with_its_error(code: str, values: list, error: type[Exception]) -> None:
    with pytest.raises(error):
        array(code, values)
    with pytest.raises(error):
        packed_array(code, values)
