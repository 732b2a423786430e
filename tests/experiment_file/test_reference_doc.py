"""docs/EXPERIMENT_FILE.md is the one reference for the experiment file: each of its key
tables holds exactly the keys the validation code accepts (read from the code, so a key
added there fails this test until the doc names it), and its glossary every metric of
blocklab.analysis.metrics."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from blocklab.analysis.metrics import KNOWN_METRICS
from blocklab.experiment_file import (
    dataset,
    design,
    fleet,
    loader,
    matrix,
    postgres,
    storage,
    workload,
)
from blocklab.workloads import queries, sysbench_driver, tpcc_driver

DOC = Path(__file__).parents[2] / "docs" / "EXPERIMENT_FILE.md"

# the doc's heading (or the sentence before a table) -> the keys the code accepts there
SECTIONS: dict[str, tuple[str, ...]] = {
    "## Top-level tables": loader.TOP_KEYS,
    "## [experiment]": loader.EXPERIMENT_KEYS,
    "## [matrix]": matrix.MATRIX_KEYS,
    "### matrix.postgres table": postgres.KEYS,
    "### matrix.storage table": storage.KEYS,
    "### matrix.workload table": workload.KEYS,
    "sysbench tables take:": sysbench_driver.KEYS,
    "tpcc (go-tpc) tables take:": tpcc_driver.KEYS,
    "queries (your own statements": queries.RUN_KEYS,
    "### matrix.dataset table": dataset.KEYS,
    "## [design]": design.DESIGN_KEYS,
    "## [placement]": design.PLACEMENT_KEYS,
    "## [fleet]": fleet.FLEET_KEYS,
}


def table_keys(text: str, heading: str) -> list[str]:
    """The first column of the first table after `heading`: `key` cells."""
    start = text.index(heading)
    lines = text[start:].splitlines()[1:]
    rows = []
    for line in lines:
        if line.startswith("|"):
            rows.append(line)
        elif rows:
            break
    keys = [re.match(r"\|\s*`([^`]+)`", r) for r in rows[2:]]  # past header and rule
    return [m.group(1) for m in keys if m]


@pytest.mark.parametrize("heading", list(SECTIONS))
def test_each_table_holds_exactly_the_keys_the_code_accepts(heading: str) -> None:
    text = DOC.read_text()
    assert heading in text, heading
    assert sorted(table_keys(text, heading)) == sorted(SECTIONS[heading])


def test_the_glossary_names_every_known_metric() -> None:
    glossary = table_keys(DOC.read_text(), "## Metrics")
    missing = {m.key for m in KNOWN_METRICS} - set(glossary)
    assert missing == set()


def test_the_check_sees_a_missing_and_an_unknown_key() -> None:
    text = "## [x]\n\n| key | what |\n| --- | --- |\n| `a` | one |\n| `zz` | two |\n\nafter\n"
    assert table_keys(text, "## [x]") == ["a", "zz"]
    assert sorted(table_keys(text, "## [x]")) != sorted(("a", "b"))


def test_the_verdicts_are_documented() -> None:
    text = DOC.read_text()
    verdicts = text[text.index("## Verdicts") :]
    for word in ("faster", "slower", "equal within ±X %", "undecided", "equivalence"):
        assert word in verdicts
