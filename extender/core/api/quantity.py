"""Kubernetes resource quantities, parsed exactly and rounded as Kubernetes rounds them."""

from __future__ import annotations

import math
import re
from fractions import Fraction

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_QUANTITY = re.compile(
    r"^(?P<sign>[+-]?)(?P<num>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?$"
)
# Kubernetes keeps at most nanounit precision: anything finer is rounded up.
_NANO = Fraction(1, 10**9)
# The resources Kueue accounts in milli-units (resources.ResourceValue); all others in units.
MILLI_RESOURCES = frozenset({"cpu"})


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity."""


def parse_quantity(value: str | int | float) -> Fraction:
    """Parse a Kubernetes quantity ("500m", "8Gi", "1e3", "0.5", 4) into an exact Fraction."""
    if isinstance(value, bool):
        raise QuantityError(f"{value!r} is not a quantity")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(f"{value!r} is not a quantity")
        # YAML turns `0.5` into a float; its decimal spelling is what the user wrote.
        return parse_quantity(repr(value))
    if not isinstance(value, str):
        raise QuantityError(f"{value!r} is not a quantity")
    match = _QUANTITY.match(value.strip())
    if match is None or value.strip() != value:
        raise QuantityError(f"{value!r} is not a quantity")
    number = Fraction(match["num"] if not match["num"].endswith(".") else match["num"][:-1])
    suffix = match["suffix"] or ""
    if suffix in _BINARY:
        scale = Fraction(_BINARY[suffix])
    elif suffix in _DECIMAL:
        scale = _DECIMAL[suffix]
    else:
        exponent = int(suffix[1:])
        if abs(exponent) > 100:
            raise QuantityError(f"{value!r} is out of range")
        scale = Fraction(10) ** exponent
    result = number * scale
    if match["sign"] == "-":
        result = -result
    # Round up to nanounits, as resource.ParseQuantity does for finer values.
    if result.denominator != 1 and (result / _NANO).denominator != 1:
        result = Fraction(math.ceil(result / _NANO)) * _NANO
    return result


def to_amount(resource: str, value: str | int | float) -> int:
    """The integer Kueue accounts for one quantity: milli-units for cpu, units (rounded up) else."""
    quantity = parse_quantity(value)
    if resource in MILLI_RESOURCES:
        return math.ceil(quantity * 1000)
    return math.ceil(quantity)


def format_amount(resource: str, amount: int) -> str:
    """Spell an accounted amount the way a person writes it: 3, 500m, 8Gi, 1500Mi."""
    if resource in MILLI_RESOURCES:
        if amount % 1000 == 0:
            return str(amount // 1000)
        return f"{amount}m"
    bytes_like = resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-")
    if bytes_like and amount != 0:
        for suffix, size in reversed(_BINARY.items()):
            if amount % size == 0:
                return f"{amount // size}{suffix}"
    return str(amount)
