"""Numbers in their unit, the same in the terminal and the report (pure, no I/O).

Bytes use PostgreSQL's prefixes (1 kB = 1024 bytes, as in block_size and pg_size_pretty),
so a data block of 4 kB and a file-system block of 4096 bytes read alike: "4 kB".
Values carry three significant digits; fractions print as percentages with one decimal.
"""

from __future__ import annotations

import math

BYTE_UNITS = ("B", "kB", "MB", "GB", "TB")
TIME_UNITS = (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9))
NO_VALUE = "–"


def sig3(x: float) -> str:
    """Three significant digits without exponent; 1,000 and above as a whole number."""
    return _significant(x, 3, strip=False)


def fmt_number(x: float, digits: int = 3) -> str:
    """A plain number for the terminal, as the summary prints them: `digits` significant
    digits, thousands separators, whole numbers from 10**digits on, no exponent and no
    trailing zeros: 5250 -> '5,250', 0.013111 -> '0.0131', 129.99 (digits=6) -> '129.99'."""
    return _significant(x, digits, strip=True)


def fmt_p_value(p: float | None) -> str:
    """A p-value: two significant digits, '< 0.001' below that, 'n/a' when there is none."""
    if p is None or not math.isfinite(p):
        return "n/a"
    return "< 0.001" if p < 0.001 else fmt_number(p, 2)


def _significant(x: float, digits: int, *, strip: bool) -> str:
    if not math.isfinite(x):
        return NO_VALUE
    if x == 0:
        return "0"
    decimals = digits - 1 - math.floor(math.log10(abs(x)))
    if abs(round(x, decimals)) >= 10 ** (digits - decimals):  # 9.996 rounds up to 10.0
        decimals -= 1
    if decimals <= 0:
        return f"{x:,.0f}"
    text = f"{x:,.{decimals}f}"
    return text.rstrip("0").rstrip(".") if strip else text


def fmt_bytes(x: float) -> str:
    """8765 -> '8.56 kB', 760 -> '760 B', 1000 -> '0.977 kB' (1 kB = 1024 bytes)."""
    if not math.isfinite(x):
        return NO_VALUE
    step = 0
    while step < len(BYTE_UNITS) - 1 and _rounds_to_1000(x / 1024**step):
        step += 1
    return f"{sig3(x / 1024**step)} {BYTE_UNITS[step]}"


def _rounds_to_1000(x: float) -> bool:
    return x != 0 and abs(float(sig3(x).replace(",", ""))) >= 1000


def fmt_seconds(x: float) -> str:
    """0.000123 -> '123 µs'; the largest of s, ms, µs, ns that keeps the value at 1 or more."""
    if not math.isfinite(x):
        return NO_VALUE
    for name, size in TIME_UNITS:
        if abs(x) >= size or size == TIME_UNITS[-1][1]:
            return f"{sig3(x / size)} {name}"
    raise AssertionError("unreachable")  # pragma: no cover


def fmt_value(x: float | None, unit: str) -> str:
    """One value of a metric in its unit (MetricInfo.unit)."""
    if x is None or not math.isfinite(x):
        return NO_VALUE
    if unit == "bytes":
        return fmt_bytes(x)
    if unit == "fraction":
        return f"{x * 100:.1f} %"
    if unit == "%":
        return f"{x:.1f} %"
    if unit == "s":
        return fmt_seconds(x)
    if unit == "ms":
        return f"{sig3(x)} ms"
    return sig3(x)


def fmt_difference(x: float | None, unit: str) -> str:
    """A signed difference in the metric's unit; of fractions, in percentage points (pp)."""
    if x is None or not math.isfinite(x):
        return NO_VALUE
    if unit == "fraction":
        return f"{x * 100:+.1f} pp"
    if unit == "%":
        return f"{x:+.1f} pp"
    sign = "+" if x > 0 else ("-" if x < 0 else "")
    return sign + fmt_value(abs(x), unit)


def fmt_size(n_bytes: int) -> str:
    """An exact size for labels: 1024 -> '1 kB', 65536 -> '64 kB', 512 -> '512 B'."""
    step = 0
    while step < len(BYTE_UNITS) - 1 and n_bytes >= 1024 ** (step + 1):
        step += 1
    return f"{n_bytes / 1024**step:g} {BYTE_UNITS[step]}"
