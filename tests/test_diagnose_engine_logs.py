"""Launch diagnosis measured on the corpus of real start-up failure logs (issue 31).

Every log under tests/fixtures/engine_logs is diagnosed; top-1 (kind and headline right) must
reach 90 % and no diagnosis may be confidently wrong. The per-kind table is the same one
`python -m benchmarks.diagnosis` writes, printed here so a failing run shows where.
"""

from __future__ import annotations

import json

import pytest

from benchmarks.diagnosis import CORPUS, accuracy, report, score
from sleuth.tools.serving.diagnose import diagnose
from sleuth.tools.serving.diagnose_lines import split_lines

ENTRIES = json.loads((CORPUS / "index.json").read_text())


def test_top1_on_the_written_from_logs_is_at_least_90_percent_with_no_confident_wrong() -> None:
    rows = [r for r in score(CORPUS) if r.split == "rules"]
    table = report(rows, CORPUS)
    print(table)
    assert len(rows) == sum(e["split"] == "rules" for e in ENTRIES) >= 80
    assert accuracy(rows) >= 0.90, table
    assert [r.file for r in rows if r.confident_wrong] == [], table


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["file"] for e in ENTRIES])
def test_each_diagnosis_quotes_the_log_and_never_a_traceback_header(entry: dict[str, str]) -> None:
    text = (CORPUS / entry["file"]).read_bytes().decode("utf-8")
    got = diagnose(split_lines(text))
    lines = split_lines(text)
    # The headline is the tail of one log line; the evidence is lines as logged.
    assert any(line.rstrip().endswith(got.headline) for line in lines), got.headline
    assert all(any(ev in line for line in lines) for ev in got.evidence), got.evidence
    assert not got.headline.startswith("Traceback")
    assert got.fix.strip()
    if got.kind == "unknown":
        assert got.confidence == "low"
