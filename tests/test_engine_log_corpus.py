"""The corpus of real engine start-up failure logs is whole and each entry says what it claims.

The logs under tests/fixtures/engine_logs are quoted from public threads and documents; these
checks keep index.json and the files in step so the diagnosis rules can be scored on them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Literal

import pytest
from pydantic import BaseModel, ConfigDict

from sleuth.tools.serving.diagnose_rules import FailureKind

CORPUS = Path(__file__).parent / "fixtures" / "engine_logs"

Kind = FailureKind  # the corpus is labelled in the diagnoser's own kinds


class Entry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    file: str
    url: str
    engine: Literal["vllm", "sglang"]
    version: str | None
    gpu: str | None
    cause: str
    kind: Kind
    headline: str
    knowable_before_launch: bool
    numbers: dict[str, float]
    phase: Literal["startup", "warm-up", "serving"] | None
    """How far the server had got when it failed, as the source shows; None where it does not."""
    date: str | None
    """The day the thread was opened (YYYY-MM-DD); None for the first gathering."""
    split: Literal["rules", "measure"]
    """rules: the rules were written from it; measure: later-dated, used only to score."""


ENTRIES = [Entry.model_validate(raw) for raw in json.loads((CORPUS / "index.json").read_text())]


def log_lines(entry: Entry) -> list[str]:
    return (CORPUS / entry.file).read_bytes().decode("utf-8").splitlines()


def test_every_log_file_is_indexed_once_and_every_entry_has_its_file() -> None:
    indexed = [entry.file for entry in ENTRIES]
    assert len(indexed) == len(set(indexed))
    assert sorted(indexed) == sorted(path.name for path in CORPUS.glob("*.log"))
    assert len({entry.url for entry in ENTRIES}) == len(ENTRIES)


@pytest.mark.parametrize("entry", ENTRIES, ids=[entry.file for entry in ENTRIES])
def test_each_entry_names_its_log_and_the_line_that_states_the_cause(entry: Entry) -> None:
    named = re.fullmatch(r"(\d{3})-(vllm|sglang)-(\w+)\.log", entry.file)
    assert named is not None
    number, engine, kind = named.groups()
    assert (engine, kind) == (entry.engine, entry.kind)
    assert entry.url.startswith("https://") and entry.cause.strip()
    lines = log_lines(entry)
    assert 2 <= len(lines) <= 200, f"{number}: {len(lines)} lines"
    assert any(line.rstrip("\r").endswith(entry.headline) for line in lines)
    if entry.date is not None:
        assert re.fullmatch(r"\d{4}-\d\d-\d\d", entry.date)


def test_every_measured_log_is_dated_after_every_dated_log_the_rules_were_written_from() -> None:
    written = [e.date for e in ENTRIES if e.split == "rules" and e.date]
    measured = [e.date for e in ENTRIES if e.split == "measure"]
    assert all(d is not None for d in measured)
    if measured:
        assert max(written) < min(d for d in measured if d)


def test_no_log_repeats_a_source_of_the_older_hand_picked_cases() -> None:
    hand_picked = (Path(__file__).parent / "test_diagnose_corpus.py").read_text()
    older = set(re.findall(r'"(https://[^"]+)"', hand_picked))
    assert older, "the older corpus names its sources"
    assert not older & {entry.url for entry in ENTRIES}
