from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kubernetes.utils import parse_quantity as oracle

from extender.core.api.quantity import QuantityError, format_amount, parse_quantity, to_amount

CASES = [
    ("500m", Fraction(1, 2)),
    ("8Gi", Fraction(8 * 2**30)),
    ("1e3", Fraction(1000)),
    ("0.5", Fraction(1, 2)),
    ("1.5k", Fraction(1500)),
    ("100Mi", Fraction(100 * 2**20)),
    ("2E", Fraction(2 * 10**18)),
    ("12n", Fraction(12, 10**9)),
    (".5", Fraction(1, 2)),
    ("1.", Fraction(1)),
    ("-3", Fraction(-3)),
    ("+3", Fraction(3)),
    ("5E-3", Fraction(5, 1000)),
    (4, Fraction(4)),
    (0.25, Fraction(1, 4)),
]


@pytest.mark.parametrize(("text", "want"), CASES, ids=[str(c[0]) for c in CASES])
def test_parses_exactly(text, want):
    assert parse_quantity(text) == want


@pytest.mark.parametrize("bad", ["", "1.2.3", "abc", "1Zi", " 1", "1 ", "--1", "Gi", True, None])
def test_rejects_what_kubernetes_rejects(bad):
    with pytest.raises(QuantityError):
        parse_quantity(bad)
    # The Python client strips surrounding spaces; Go's resource.ParseQuantity does not.
    if isinstance(bad, str) and bad == bad.strip():
        with pytest.raises(ValueError, match=r".+"):
            oracle(bad)


@pytest.mark.parametrize(
    ("resource", "text", "want"),
    [
        ("cpu", "500m", 500),
        ("cpu", "3", 3000),
        ("cpu", "0.1m", 1),  # milli-value rounds up, as Quantity.MilliValue does
        ("memory", "8Gi", 8 * 2**30),
        ("memory", "0.5", 1),  # Value() rounds up
        ("nvidia.com/gpu", "2", 2),
    ],
)
def test_accounted_amounts_round_up_like_kueue(resource, text, want):
    assert to_amount(resource, text) == want


@pytest.mark.parametrize(
    ("resource", "amount", "want"),
    [
        ("cpu", 3000, "3"),
        ("cpu", 1500, "1500m"),
        ("memory", 8 * 2**30, "8Gi"),
        ("memory", 1000, "1000"),
        ("nvidia.com/gpu", 4, "4"),
        ("memory", 0, "0"),
    ],
)
def test_format_amount(resource, amount, want):
    assert format_amount(resource, amount) == want


_suffix = st.sampled_from(
    ["", "m", "k", "M", "G", "Ki", "Mi", "Gi", "Ti", "n", "u", "e3", "E2", "e-2"]
)
_number = st.one_of(
    st.integers(0, 10**6).map(str),
    st.tuples(st.integers(0, 10**4), st.integers(0, 10**4)).map(lambda t: f"{t[0]}.{t[1]}"),
)


@given(number=_number, suffix=_suffix, sign=st.sampled_from(["", "-", "+"]))
def test_matches_the_kubernetes_client_as_oracle(number, suffix, sign):
    text = f"{sign}{number}{suffix}"
    want = oracle(text)
    got = parse_quantity(text)
    # The client keeps full precision; Kubernetes (and we) round up to nanounits.
    nano = Decimal(10) ** -9
    rounded = (want / nano).to_integral_value(rounding="ROUND_CEILING") * nano
    assert got == Fraction(rounded)
