"""The site's JSON text (blocklab.report.jsontext) against the standard library's encoder,
which wrote it before: the same values read back, where the standard library wrote JSON."""

from __future__ import annotations

import datetime as dt
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from markupsafe import Markup

from blocklab.report import jsontext, pagedata


@dataclass
class _Point:
    t: float


def _stdlib(value: object) -> object:
    return json.loads(json.dumps(value, separators=(",", ":"), default=str))


def test_page_data_reads_back_as_the_standard_librarys_did() -> None:
    value = {
        "t": [0, 1, 2.5, 1e-05, 1e16, -0.0, 123456789012345],
        "series": {"tps": [4012.7, None, 3999.1], "latency_ms": [1.25, 0.3333333333333333]},
        3: "an int key",
        "tuple": (1, 2),
        "numpy": [np.float64(2.5)],
        "when": dt.datetime(2026, 11, 29, 18, 5, 19),
        "path": Path("/var/lib/blocklab"),
        "markup": Markup("<b>x</b>"),
        "dataclass": _Point(1.0),
        "nested": [{"a": True, "b": False, "c": None}],
        "text": 'quotes " and \\ and unicode é ✓ and \u2028',
    }
    assert json.loads(jsontext.dumps(value)) == _stdlib(value)
    assert jsontext.text(value) == jsontext.dumps(value).decode()


def test_numpy_scalars_are_numbers_where_the_standard_library_wrote_strings() -> None:
    value = [np.int64(7), np.float32(0.5), np.bool_(True)]
    assert json.loads(jsontext.dumps(value)) == [7, 0.5, True]
    assert _stdlib(value) == ["7", "0.5", "True"]


def test_it_is_compact_and_keeps_the_keys_order() -> None:
    assert jsontext.text({"b": 1, "a": [1, 2]}) == '{"b":1,"a":[1,2]}'


def test_nan_and_infinities_are_null_which_json_parse_accepts() -> None:
    text = jsontext.text([math.nan, math.inf, -math.inf, np.float64("nan"), 1.0])
    assert text == "[null,null,null,null,1.0]"
    assert "NaN" in json.dumps([math.nan])  # what the standard library wrote


def test_an_int_beyond_64_bits_falls_back_to_the_standard_library_whole() -> None:
    big = 2**70 + 1
    assert json.loads(jsontext.dumps({"bytes": big, "x": [1.5]})) == {"bytes": big, "x": [1.5]}


def test_a_run_pages_packed_data_unpacks_to_its_value() -> None:
    import base64
    import gzip

    value = {"t": [0, 1], "series": {"tps": [1.5, None]}, "details": {"when": "x"}}
    packed = pagedata.pack(value)
    assert packed == pagedata.pack(dict(value))  # the same bytes for the same value
    assert json.loads(gzip.decompress(base64.b64decode(packed))) == value
