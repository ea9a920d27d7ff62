"""Kubernetes resource quantities, parsed exactly.

A quantity is ``<signed number><suffix>``: a decimal SI suffix (``n u m k M G T P E``), a binary suffix
(``Ki Mi Gi Ti Pi Ei``) or a decimal exponent (``1e3``, ``2E-3``). Values are held as
:class:`fractions.Fraction` so ``"0.1"`` is one tenth, not a float near it.

The planner compares resources as integers in *milli-units* (``500m`` CPU is 500, ``1Gi`` memory is
1073741824000), rounding up as the API server does for ``MilliValue``: a request never shrinks.
"""

from __future__ import annotations

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
    r"^(?P<num>[+-]?(?:\d+(?:\.\d*)?|\.\d+))"
    r"(?:(?P<exp>[eE][+-]?\d+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$"
)

_cache: dict[str, int] = {}


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity."""


def parse_quantity(value: str | int | float) -> Fraction:
    """The exact value of a Kubernetes quantity (``"500m"`` is 1/2, ``"16Gi"`` is 17179869184)."""
    if isinstance(value, bool):
        raise QuantityError(f"not a quantity: {value!r}")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        return Fraction(str(value))
    match = _QUANTITY.match(value.strip())
    if match is None:
        raise QuantityError(f"not a quantity: {value!r}")
    number = Fraction(match["num"])
    if match["exp"]:
        exponent = int(match["exp"][1:])
        return number * (Fraction(10) ** exponent)
    suffix = match["suffix"] or ""
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    return number * _DECIMAL[suffix]


def to_milli(value: str | int | float) -> int:
    """A quantity in milli-units, rounded up (the API server's MilliValue)."""
    if isinstance(value, str):
        cached = _cache.get(value)
        if cached is not None:
            return cached
    exact = parse_quantity(value) * 1000
    milli = -((-exact.numerator) // exact.denominator)  # ceiling
    if isinstance(value, str) and len(_cache) < 65536:
        _cache[value] = milli
    return milli


def format_milli(resource: str, milli: int) -> str:
    """A readable quantity for reasons and reports: ``cpu`` in cores or millicores, memory in Gi/Mi."""
    if resource == "cpu":
        return f"{milli // 1000}" if milli % 1000 == 0 else f"{milli}m"
    if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-"):
        units = milli // 1000
        for suffix, size in (("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if units >= size and units % size == 0:
                return f"{units // size}{suffix}"
        if units >= 2**30:
            return f"{units / 2**30:.1f}Gi"
        if units >= 2**20:
            return f"{units / 2**20:.1f}Mi"
        return str(units)
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"
