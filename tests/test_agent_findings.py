"""Grounding: a fabricated quote is caught, gets one mend, then is kept ungrounded."""

from __future__ import annotations

from pathlib import Path

from sleuth.agent.findings import Grounder, summarise
from sleuth.tools.registry import ToolContext
from sleuth.transcripts.events import FindingEvent, ToolExecuted
from tests.scripted_api import ScriptedAPI, finding, message, text, tool_use
from tests.test_agent_anthropic import ctx, run, workspace

__all__ = ["ctx", "workspace"]  # fixtures shared with the Anthropic tests

READ = message(tool_use("toolu_1", "read_json", path="config.json"))
FAKE = '"num_mtp_modules": 3'
REAL = '"num_nextn_predict_layers": 1'


def test_a_fabricated_quote_is_caught_and_mended_in_the_second_round(
    ctx: ToolContext, tmp_path: Path
) -> None:
    script = [
        READ,
        message(finding("toolu_2", "MTP is declared.", [("toolu_1", FAKE)])),
        message(finding("toolu_3", "MTP is declared.", [("toolu_1", REAL)], mends="toolu_2")),
        message(text("done")),
    ]
    with ScriptedAPI(script) as api:
        result, events = run(api, ctx, tmp_path)
    feedback = api.bodies()[2]["messages"][-1]["content"][0]
    assert feedback["tool_use_id"] == "toolu_2" and feedback["is_error"] is True
    assert FAKE in feedback["content"] and "toolu_1 (read_json)" in feedback["content"]
    assert "mends='toolu_2'" in feedback["content"]
    mended = api.bodies()[3]["messages"][-1]["content"][0]
    assert mended["is_error"] is False
    assert len(result.findings) == 1 and result.findings[0].grounded
    assert [e.call_id for e in events if isinstance(e, FindingEvent)] == ["toolu_3"]


def test_a_quote_that_stays_wrong_is_kept_and_marked_ungrounded(
    ctx: ToolContext, tmp_path: Path
) -> None:
    script = [
        READ,
        message(finding("toolu_2", "MTP is declared.", [("toolu_1", FAKE)])),
        message(finding("toolu_3", "MTP is declared.", [("toolu_1", REAL), ("toolu_1", FAKE)])),
        message(text("done")),
    ]
    with ScriptedAPI(script) as api:
        result, events = run(api, ctx, tmp_path)
    (kept,) = result.findings
    assert not kept.grounded
    assert [e.grounded for e in kept.evidence] == [True, False]
    assert "UNGROUNDED" in api.bodies()[3]["messages"][-1]["content"][0]["content"]
    assert "[UNGROUNDED]" in events[-1].summary  # type: ignore[union-attr]


def test_a_finding_never_mended_is_kept_ungrounded_at_the_end(
    ctx: ToolContext, tmp_path: Path
) -> None:
    script = [
        READ,
        message(finding("toolu_2", "MTP is declared.", [("toolu_1", FAKE)])),
        message(text("done")),
    ]
    with ScriptedAPI(script) as api:
        result, events = run(api, ctx, tmp_path)
    assert [f.grounded for f in result.findings] == [False]
    recorded = [e for e in events if isinstance(e, ToolExecuted) and e.tool == "report_finding"]
    assert recorded[0].ok is False


def test_quotes_match_across_whitespace_and_read_lines_numbers() -> None:
    grounder = Grounder()
    grounder.record("c1", "read_lines", "/x lines 3-4 of 9\n     3\tclass A:\n     4\t    pass\n")
    ok = grounder.report(
        "r1",
        {
            "claim": "A exists",
            "verdict": "yes",
            "confidence": 0.9,
            "evidence": [{"call_id": "c1", "quote": "class A:   pass"}],
        },
    )
    assert ok.finding is not None and ok.finding.grounded
    unknown = grounder.report(
        "r2",
        {
            "claim": "B",
            "verdict": "no",
            "confidence": 0.5,
            "evidence": [{"call_id": "c9", "quote": "x"}],
        },
    )
    assert unknown.finding is None and "'c9' is not a tool call" in unknown.feedback


def test_an_invalid_report_is_refused_with_the_field_named() -> None:
    outcome = Grounder().report("r1", {"claim": "x", "verdict": "maybe", "confidence": 2})
    assert outcome.is_error and outcome.finding is None
    assert "verdict" in outcome.feedback and "confidence" in outcome.feedback
    assert "evidence" in outcome.feedback


def test_summary_flags_ungrounded_findings() -> None:
    assert summarise([]) == "No findings were reported."
