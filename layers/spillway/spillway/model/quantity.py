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


def is_digits(text: str) -> bool:
    """Whether ``text`` is one or more ASCII digits: a number as Go's ``strconv.Atoi`` (Kubernetes,
    cluster-autoscaler, Karpenter), robfig/cron and JSON Pointer read one. ``str.isdigit`` and ``\\d``
    also take other scripts' digits (``"١٢"``, which ``int`` reads as 12) and superscripts (``"²"``,
    which ``int`` then refuses with a message naming no field)."""
    return text.isascii() and text.isdigit()


_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_QUANTITY = re.compile(
    r"^(?P<num>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?:(?P<exp>[eE][+-]?[0-9]+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$"
)

# Bounds, modelled on Kubernetes' resource.Quantity (k8s.io/apimachinery pkg/api/resource, quantity.go):
# - parsing keeps a value only down to nano, rounding a finer non-zero value away from zero ("0.9n" is 1n);
# - a binarySI quantity is capped at 2^63-1 and the int64 accessors the scheduler uses (Value,
#   MilliValue) overflow past it, so a value above 2^63-1 in magnitude is refused here, not capped;
# - the exponent of "1e3" is read as an integer and truncated to int32 there: no real quantity needs
#   more than a few digits of it, and here it is judged from the digits' position before any power
#   of ten is computed, so "1e999999999" is refused in constant time;
# - the API server's validation (pkg/apis/core/validation, ValidateNonnegativeQuantity) refuses negative
#   requests, limits, overhead and node capacity: ``to_milli`` refuses them too.
# Kubernetes sets no length limit; a quantity that fits int64 with nano precision needs under 40
# characters, so longer strings are refused before they are scanned.
MAX_VALUE = 2**63 - 1
MAX_CHARS = 64
_NANO = Fraction(1, 10**9)
_MAX_DIGITS_BEFORE_POINT = len(str(MAX_VALUE))  # 19: 10**19 > MAX_VALUE
_EXPONENT_OF = {
    "n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18,
}  # fmt: skip

_cache: dict[str, int] = {}


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity."""


class QuantityOutOfRange(QuantityError):
    """A quantity larger than Kubernetes holds (2^63-1 in magnitude), or absurdly long."""


class NegativeQuantity(QuantityError):
    """A negative resource amount: the API server refuses these in requests, limits and capacity."""


def _show(value: str) -> str:
    """The offending text, bounded: error messages stay one short line."""
    return repr(value if len(value) <= 32 else value[:32] + "...")


def parse_quantity(value: str | int | float) -> Fraction:
    """The exact value of a Kubernetes quantity (``"500m"`` is 1/2, ``"16Gi"`` is 17179869184).

    Values finer than nano round away from zero to the next nano, as Kubernetes parses them. Raises
    :class:`QuantityOutOfRange` past 2^63-1 in magnitude (decided before any large power is computed),
    :class:`QuantityError` for anything that is not a quantity.
    """
    if isinstance(value, bool):
        raise QuantityError(f"not a quantity: {value!r}")
    if isinstance(value, int):
        if not -MAX_VALUE <= value <= MAX_VALUE:
            raise QuantityOutOfRange(f"quantity out of range (larger than 2^63-1): {_show(str(value))}")
        return Fraction(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise QuantityOutOfRange(f"not a finite quantity: {value!r}")
        value = repr(value)
    if not isinstance(value, str):
        raise QuantityError(f"not a quantity: {type(value).__name__}")
    if len(value) > MAX_CHARS:
        raise QuantityOutOfRange(f"quantity longer than {MAX_CHARS} characters: {_show(value)}")
    match = _QUANTITY.match(value.strip())
    if match is None:
        raise QuantityError(f"not a quantity: {_show(value)}")
    return _exact(match, value)


def _exact(match: re.Match[str], text: str) -> Fraction:
    number = match["num"]
    negative = number.startswith("-")
    whole, _, frac = number.lstrip("+-").partition(".")
    suffix = match["suffix"] or ""
    exponent = int(match["exp"][1:]) if match["exp"] else _EXPONENT_OF.get(suffix, 0)
    binary = _BINARY.get(suffix, 1)
    # Digits before the decimal point of the mantissa (negative: zeros after it), then of the value.
    whole = whole.lstrip("0")
    if whole:
        digits = len(whole)
    elif frac.strip("0"):
        digits = -(len(frac) - len(frac.lstrip("0")))
    else:
        return Fraction(0)
    # Binary suffixes multiply by at most 2^60 < 10^19: add 19 digits for them.
    magnitude = digits + exponent + (_MAX_DIGITS_BEFORE_POINT if binary > 1 else 0)
    if digits + exponent > _MAX_DIGITS_BEFORE_POINT:
        raise QuantityOutOfRange(f"quantity out of range (larger than 2^63-1): {_show(text)}")
    if magnitude <= -9:  # below one nano: Kubernetes rounds it up to 1n
        return -_NANO if negative else _NANO
    exact = abs(Fraction(number)) * binary * Fraction(10) ** exponent  # |exponent| < 100 here
    nanos = -((-exact.numerator * 10**9) // exact.denominator)  # ceiling: away from zero
    if nanos > MAX_VALUE * 10**9:
        raise QuantityOutOfRange(f"quantity out of range (larger than 2^63-1): {_show(text)}")
    rounded = Fraction(nanos, 10**9)
    return -rounded if negative else rounded


def to_milli(value: str | int | float) -> int:
    """A resource amount in milli-units, rounded up (the API server's MilliValue).

    Raises :class:`NegativeQuantity` for a negative amount, as the API server's validation does.
    """
    if isinstance(value, str):
        cached = _cache.get(value)
        if cached is not None:
            return cached
    exact = parse_quantity(value) * 1000
    if exact < 0:
        shown = _show(value) if isinstance(value, str) else repr(value)
        raise NegativeQuantity(f"must not be negative: {shown}")
    milli = -((-exact.numerator) // exact.denominator)  # ceiling
    if isinstance(value, str) and len(_cache) < 65536:
        _cache[value] = milli
    return milli


def to_signed_milli(value: str | int | float) -> int:
    """A quantity in milli-units that may be negative (the API's quantity pattern admits a sign where
    no validation refuses it, e.g. a CapacityBuffer's ``spec.limits``), rounded away from zero as
    ``MilliValue`` rounds; malformed or out of range raises as :func:`parse_quantity` does."""
    exact = parse_quantity(value) * 1000
    magnitude = -((-abs(exact).numerator) // exact.denominator)  # ceiling of the magnitude
    return -magnitude if exact < 0 else magnitude


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
