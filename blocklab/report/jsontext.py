"""The site's JSON text (run pages' packed data, page data, grid shards, plots' data), by
orjson: at 10,000 runs the standard library's encoder took a third of a millisecond of each
run page's CPU, orjson about a tenth of that (bench/bench_pack.py compares them).

What it writes is what `json.dumps(value, separators=(",", ":"), default=str)` wrote:
compact, keys in their order, a value neither encodes as its str() (sets, paths, dates).
Three differences: NaN and infinities are null (`JSON.parse` refuses `NaN`); numpy's int
and float32 scalars are numbers (the standard library made them strings); floats are in
their shortest exponent form (`1e-5`, not `1e-05`). A value orjson refuses (an int beyond
64 bits) falls back to the standard library, which writes it whole.

The manifest (blocklab.report.manifest) is written and read by it too (at 10,000 runs the
standard library took 86 ms to write it and 60 ms to read it): the statistics it keeps
mark their NaN and infinities (report.cell_cache), and no other part of it holds one (the
store keeps none).
"""

from __future__ import annotations

import json
from typing import Any

import orjson

_OPTIONS = (
    orjson.OPT_NON_STR_KEYS
    | orjson.OPT_SERIALIZE_NUMPY
    | orjson.OPT_PASSTHROUGH_DATETIME  # as str(), like the standard library's default=str
    | orjson.OPT_PASSTHROUGH_DATACLASS
)


def _default(value: Any) -> Any:
    if isinstance(value, float):
        return float(value)
    if isinstance(value, int):
        return int(value)
    return str(value)


def dumps(value: Any) -> bytes:
    """`value` as compact JSON in UTF-8 (see the module's docstring)."""
    try:
        return orjson.dumps(value, default=_default, option=_OPTIONS)
    except orjson.JSONEncodeError:
        text = json.dumps(value, separators=(",", ":"), default=str, allow_nan=True)
        return text.encode()


def text(value: Any) -> str:
    """dumps(value) as a str."""
    return dumps(value).decode()


def loads(data: bytes | str) -> Any:
    """The value of JSON text (orjson: NaN and infinities refused, a ValueError)."""
    return orjson.loads(data)
