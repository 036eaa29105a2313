"""One way to write a number for people: 4 significant digits, fixed notation from 1e-4 up to 1e6,
scientific outside that range, trailing zeros dropped (``34.63``, ``0.0001204``, ``1.235e6``).

A metric, a hyperparameter, a difference and a chart tick read the same on every page. The UI's
pages write numbers in the browser with ``metricText`` (``ui/static/common.js``), the same
algorithm on the same digits; this is the one for pages the server renders (the local service's
console). Both round half away from zero, as JavaScript's ``toExponential`` does, and both are
tested against one table of cases.
"""

from __future__ import annotations

import math
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

DIGITS = 4
FIXED_FROM = -4  # the smallest exponent written in fixed notation (1e-4)
FIXED_BELOW = 6  # the first exponent written in scientific notation (1e6)
MISSING = "—"


def _special(x: float) -> str:
    """What JavaScript's ``String`` writes for a float that is no number."""
    if math.isnan(x):
        return "NaN"
    return "Infinity" if x > 0 else "-Infinity"


def _rounded(x: float) -> tuple[str, str, int]:
    """Sign, the DIGITS significant digits and the decimal exponent of ``x`` (not zero)."""
    exact = Decimal(x)
    exponent = exact.adjusted()
    mantissa = exact.copy_abs().scaleb(-exponent).quantize(Decimal(1).scaleb(1 - DIGITS), ROUND_HALF_UP)
    if mantissa >= 10:  # 9.9996 -> 10.00: one more digit before the point
        exponent += 1
        mantissa = (mantissa / 10).quantize(Decimal(1).scaleb(1 - DIGITS), ROUND_HALF_UP)
    digits = str(mantissa).replace(".", "")
    return ("-" if x < 0 else ""), digits, exponent


def _fixed(digits: str, exponent: int) -> str:
    if exponent < 0:
        text = "0." + "0" * (-exponent - 1) + digits
    elif exponent >= len(digits) - 1:
        text = digits + "0" * (exponent - len(digits) + 1)
    else:
        text = digits[: exponent + 1] + "." + digits[exponent + 1 :]
    return text.rstrip("0").rstrip(".") if "." in text else text


def number_text(value: Any) -> str:
    """``value`` (a number, or a numeric string) written the one way; "—" for None or "".

    Text that is no number is returned as it is: a hyperparameter may be categorical.
    """
    if value is None or value == "":
        return MISSING
    if isinstance(value, bool):
        return str(value).lower()
    try:
        x = float(value)
    except (TypeError, ValueError):
        return str(value)
    if not math.isfinite(x):
        return _special(x)
    if x == 0:
        return "0"
    sign, digits, exponent = _rounded(x)
    if FIXED_FROM <= exponent < FIXED_BELOW:
        return sign + _fixed(digits, exponent)
    mantissa = (digits[0] + "." + digits[1:]).rstrip("0").rstrip(".")
    return f"{sign}{mantissa}e{exponent}"


def signed_text(value: Any) -> str:
    """A difference: its sign always written (``+0.02222``, ``-1.5``, ``0``)."""
    text = number_text(value)
    return "+" + text if text[0].isdigit() and text != "0" else text
