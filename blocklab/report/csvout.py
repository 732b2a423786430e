"""The per-second series as CSV text, formatted in bulk (a site of 10,000 runs writes
millions of rows). The output is what csv.writer writes: quoted where needed, floats
by repr, None empty, CRLF line ends. The site stores them gzip-compressed (`gz`): a
.csv.gz downloads from file:// as any file, and gunzip, zcat, pandas and spreadsheets
read it."""

from __future__ import annotations

import csv
import gzip
import io
from collections.abc import Sequence
from typing import Any

Series = dict[str, list[tuple[float, float | None]]]


GZIP_LEVEL = 6


def gz(text: str) -> bytes:
    """`text` as one gzip member, the same bytes for the same text (no time stamp, no
    name): members written one after the other make one valid .gz file, so series.csv.gz
    grows by appending a member per run, and an update gives a full rebuild's bytes."""
    return gzip.compress(text.encode(), compresslevel=GZIP_LEVEL, mtime=0)


def csv_line(values: Sequence[Any]) -> str:
    """One CSV line (quoting by the csv module), with its CRLF."""
    buf = io.StringIO()
    csv.writer(buf).writerow(values)
    return buf.getvalue()


def wide(series: Series) -> str:
    """t_s, then one column per series (sorted), one line per second."""
    names = sorted(series)
    head = csv_line(["t_s", *names])
    cols = [series[n] for n in names]
    ts = [p[0] for p in cols[0]] if cols else []
    aligned = ts == sorted(ts) and all(len(c) == len(ts) and [p[0] for p in c] == ts for c in cols)
    if aligned:
        # the usual case: every series sampled at the same seconds, in order
        vals = [["" if v is None else str(v) for _, v in c] for c in cols]
        return head + "".join(f"{t},{','.join(row)}\r\n" for t, *row in zip(ts, *vals, strict=True))
    table: dict[float, list[str]] = {}
    for i, points in enumerate(cols):
        for t, v in points:
            row = table.get(t)
            if row is None:
                row = table[t] = [""] * len(names)
            row[i] = "" if v is None else str(v)
    return head + "".join(f"{t},{','.join(table[t])}\r\n" for t in sorted(table))


def long(prefix: Sequence[Any], series: Series) -> str:
    """One line per (series, second): prefix columns, series name, t_s, value."""
    out: list[str] = []
    for name, points in series.items():
        head = csv_line([*prefix, name])[:-2]
        out.extend(f"{head},{t},{'' if v is None else v}\r\n" for t, v in points)
    return "".join(out)
