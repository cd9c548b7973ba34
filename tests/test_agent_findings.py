"""Grounding: a fabricated quote is caught, gets one mend, then is kept ungrounded."""

from __future__ import annotations

from pathlib import Path

from sleuth.agent.findings import CallRecord, Grounder, ground_quote, summarise
from sleuth.tools.context import ToolContext
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
    assert recorded[0].result.ok is False


def test_quotes_match_across_whitespace_and_read_lines_numbers() -> None:
    grounder = Grounder()
    output = "/x lines 3-4 of 9\n     3\tclass A:\n     4\t    pass\n"
    grounder.record(CallRecord("c1", "read_lines", {"path": "/x"}, output, True, 1))
    ok = grounder.report(
        "r1",
        {
            "claim": "A exists",
            "verdict": "yes",
            "confidence": 0.9,
            "evidence": [{"call_id": "c1", "quote": "class A:   pass"}],
        },
        2,
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
        2,
    )
    assert unknown.finding is None and "'c9' is not a tool call" in unknown.feedback


def test_an_invalid_report_is_refused_with_the_field_named() -> None:
    outcome = Grounder().report("r1", {"claim": "x", "verdict": "maybe", "confidence": 2}, 1)
    assert outcome.is_error and outcome.finding is None
    assert "verdict" in outcome.feedback and "confidence" in outcome.feedback
    assert "evidence" in outcome.feedback


def test_summary_flags_ungrounded_findings() -> None:
    assert summarise([]) == "No findings were reported."


GREP_MISS = CallRecord(
    "g1",
    "grep",
    {"host": "local", "pattern": "num_nextn_predict_layers = 3", "path": "/d"},
    "no matches for 'num_nextn_predict_layers = 3' under /d",
    True,
    1,
)
CONFIG_OUT = '{\n  "num_nextn_predict_layers": 1,\n  "num_hidden_layers": 61\n}'
CONFIG_CALL = CallRecord("r1", "read_json", {"path": "config.json"}, CONFIG_OUT, True, 1)


def test_an_echo_of_the_calls_own_argument_does_not_ground() -> None:
    echo = ground_quote("num_nextn_predict_layers = 3", GREP_MISS, claim="MTP is 3", turn=2)
    assert not echo.grounded and echo.failure == "echo"
    quoted = ground_quote("'num_nextn_predict_layers = 3'", GREP_MISS, claim="MTP", turn=2)
    assert not quoted.grounded and quoted.failure == "echo"
    line = "no matches for 'num_nextn_predict_layers = 3' under /d"
    whole = ground_quote(line, GREP_MISS, claim="MTP is not declared", turn=2)
    assert whole.grounded, "the tool's own words around the echo are real output"


def test_a_one_character_quote_does_not_ground() -> None:
    short = ground_quote("n", CONFIG_CALL, claim="MTP is declared", turn=2)
    assert not short.grounded and short.failure == "too_short"


def test_a_quote_from_the_same_turn_does_not_ground() -> None:
    same = ground_quote('"num_nextn_predict_layers": 1', CONFIG_CALL, claim="MTP", turn=1)
    assert not same.grounded and same.failure == "same_turn"
    assert ground_quote('"num_nextn_predict_layers": 1', CONFIG_CALL, claim="MTP", turn=2).grounded


def test_a_bare_number_grounds_only_as_a_whole_token_beside_its_key() -> None:
    assert ground_quote("61", CONFIG_CALL, claim="num_hidden_layers is 61", turn=2).grounded
    wrong_key = ground_quote("61", CONFIG_CALL, claim="the vocabulary is 61", turn=2)
    assert not wrong_key.grounded and wrong_key.failure == "bare_number"
    partial = ground_quote("6", CONFIG_CALL, claim="num_hidden_layers is 6", turn=2)
    assert not partial.grounded
    prefix = ground_quote('"num_hidden_layers": 6', CONFIG_CALL, claim="6 layers", turn=2)
    assert not prefix.grounded and prefix.failure == "not_found"


def test_a_whole_short_key_value_grounds() -> None:
    call = CallRecord("e1", "python_env", {}, "torch: 2.5.1\nvllm: 0.6", True, 1)
    assert ground_quote("vllm: 0.6", call, claim="vLLM 0.6 is installed", turn=2).grounded


def test_an_error_result_grounds_only_a_claim_about_the_error() -> None:
    failed = CallRecord(
        "f1",
        "read_lines",
        {"path": "/m/config.json"},
        "file not found: /m/config.json (ENOENT)",
        False,
        1,
    )
    quote = "file not found: /m/config.json (ENOENT)"
    about_it = ground_quote(quote, failed, claim="config.json is missing on the host", turn=2)
    assert about_it.grounded
    other = ground_quote(quote, failed, claim="The model declares MTP heads", turn=2)
    assert not other.grounded and other.failure == "error_result"


def test_through_the_sdk_short_echo_and_same_turn_quotes_are_not_grounded(
    ctx: ToolContext, tmp_path: Path
) -> None:
    grep = tool_use(
        "toolu_g", "grep", host="local", pattern="num_nextn_predict_layers = 3", path="."
    )
    script = [
        message(READ["content"][0], grep),
        message(
            finding("toolu_2", "MTP is declared.", [("toolu_1", "n")]),
            finding("toolu_3", "MTP has 3 layers.", [("toolu_g", "num_nextn_predict_layers = 3")]),
        ),
        message(
            finding("toolu_4", "MTP is declared.", [("toolu_1", "n")], mends="toolu_2"),
            finding(
                "toolu_5",
                "MTP has 3 layers.",
                [("toolu_g", "num_nextn_predict_layers = 3")],
                mends="toolu_3",
            ),
            tool_use("toolu_6", "read_json", host="local", path="config.json"),
            finding("toolu_7", "MTP is declared here.", [("toolu_6", REAL)]),
        ),
        message(finding("toolu_8", "MTP is declared here.", [("toolu_6", REAL)], mends="toolu_7")),
        message(text("done")),
    ]
    with ScriptedAPI(script) as api:
        result, _ = run(api, ctx, tmp_path)
    grounded = {f.claim: f.grounded for f in result.findings}
    assert grounded == {
        "MTP is declared.": False,
        "MTP has 3 layers.": False,
        "MTP is declared here.": True,
    }
    same_turn = api.bodies()[3]["messages"][-1]["content"]
    feedback = next(b for b in same_turn if b["tool_use_id"] == "toolu_7")["content"]
    assert "same turn" in feedback
