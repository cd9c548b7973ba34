"""Grounding: a fabricated quote is caught, gets one mend, then is kept ungrounded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sleuth.agent.brains.anthropic import AnthropicBrain
from sleuth.agent.brains.openai import OpenAIBrain
from sleuth.agent.evidence.lines import shown_conversation, span_text
from sleuth.agent.findings import (
    REPORT_FINDING,
    CallRecord,
    Grounder,
    ground_lines,
    ground_quote,
    report_finding_spec,
    summarise,
)
from sleuth.agent.history import tool_result_block
from sleuth.agent.protocols import Request
from sleuth.agent.session import tool_specs
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
    assert not prefix.grounded and prefix.failure == "cut_in_word" and prefix.line == 3


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


# ---------------------------------------------------------------- quotes as models write them

PRETTY = json.dumps({"quantization_config": {"quant_method": "modelopt", "bits": 4}}, indent=2)
PRETTY_CALL = CallRecord("p1", "read_json", {"path": "config.json"}, PRETTY, True, 1)
SUMMARY_OUT = (
    "checkpoint /m (via local-python)\n"
    "quantization: method=modelopt, algorithm=NVFP4, ignore (2): [lm_head; mtp*]\n"
    "mtp: declared 1 (num_nextn_predict_layers=1); found 0 tensors\n"
    "params: 41,228 logical (41.2K)\n"
)
SUMMARY_CALL = CallRecord("s1", "checkpoint_summary", {"model_dir": "/m"}, SUMMARY_OUT, True, 1)


def test_whitespace_never_decides_a_match() -> None:
    one_line = '{"quantization_config": {"quant_method": "modelopt", "bits": 4}}'
    assert ground_quote(one_line, PRETTY_CALL, claim="modelopt", turn=2).grounded
    spaced = '"quant_method" :   "modelopt" ,'
    assert ground_quote(spaced, PRETTY_CALL, claim="modelopt", turn=2).grounded
    glued = '"quant_method":"modelopt","bits":4'
    assert ground_quote(glued, PRETTY_CALL, claim="modelopt", turn=2).grounded
    words_glued = "quantization:method=modelopt,algorithm=NVFP4"
    assert ground_quote(words_glued, SUMMARY_CALL, claim="NVFP4", turn=2).grounded
    # Between two words whitespace still separates them: "algorithmNVFP4" is not there.
    fused = "method=modelopt, algorithmNVFP4"
    assert ground_quote(fused, SUMMARY_CALL, claim="NVFP4", turn=2).failure == "not_found"


def test_an_elided_quote_needs_its_parts_in_order_on_consecutive_lines() -> None:
    def check(quote: str) -> str | None:
        verdict = ground_quote(quote, SUMMARY_CALL, claim="NVFP4", turn=2)
        return None if verdict.grounded else verdict.failure

    assert check("quantization: method=modelopt ... ignore (2): [lm_head; mtp*]") is None
    assert check("algorithm=NVFP4, ignore (2) … mtp: declared 1 (num_nextn") is None
    assert check("… algorithm=NVFP4, ignore (2)") is None  # a leading gap marks a cut
    assert check("ignore (2): [lm_head; mtp*] ... quantization: method=modelopt") == "not_found"
    # Lines 2 and 4 are not consecutive: an elision may not glue distant lines together.
    assert check("quantization: method=modelopt ... params: 41,228 logical") == "not_found"
    short = ground_quote("quantization: method=modelopt ... NVFP4", SUMMARY_CALL, claim="x", turn=2)
    assert short.failure == "too_short" and "'NVFP4'" in short.why
    assert check("a … b") == "too_short"


def test_a_long_quote_cut_inside_a_word_is_trimmed_only_while_enough_is_left() -> None:
    quote = "ntization: method=modelopt, algorithm=NVFP4, ign"
    cut = ground_quote(quote, SUMMARY_CALL, claim="x", turn=2)
    assert cut.grounded and cut.text == "method=modelopt, algorithm=NVFP4,"
    word = CallRecord("w1", "grep", {}, "a\nsupercalifragilisticexpialidocious: 42\n", True, 1)
    little = ground_quote("ercalifragilisticexpialidocious: 42", word, claim="x", turn=2)
    assert little.failure == "cut_in_word" and little.line == 2
    assert "too short after trimming" in little.why and "what is left is '42'" in little.why
    # Cutting a number in two quotes another number: never trimmed.
    number = ground_quote("found 0 tensors\nparams: 41,22", SUMMARY_CALL, claim="41,22", turn=2)
    assert number.failure == "cut_in_word" and "number" in number.why
    short = ground_quote("method=modelopt, algori", SUMMARY_CALL, claim="x", turn=2)
    assert short.failure == "cut_in_word" and "under 24 characters" in short.why


def test_a_quote_copied_with_the_line_numbers_shown_grounds() -> None:
    line = "quantization: method=modelopt, algorithm=NVFP4, ignore (2): [lm_head; mtp*]"
    copied = f"2| {line}\n3| mtp: declared 1"
    assert ground_quote(copied, SUMMARY_CALL, claim="x", turn=2).grounded


# ---------------------------------------------------------------- evidence by reference

READ_OUT = "/x/model.py lines 11-13 of 40\n    11\tclass A:\n    12\t    pass\n    13\t\n"
READ_CALL = CallRecord("r9", "read_lines", {"path": "/x/model.py"}, READ_OUT, True, 1)
GREP_OUT = "a.py:12:foo = 1\nb.py:12:foo = 2\n2 matching lines in 2 files\n"
GREP_CALL = CallRecord("g9", "grep", {"pattern": "foo"}, GREP_OUT, True, 1)


def test_lines_are_the_numbers_the_output_showed() -> None:
    # read_lines shows the file's line numbers; they are what a reference cites.
    file_lines = ground_lines("11-12", READ_CALL, claim="A exists", turn=2)
    assert file_lines.grounded and file_lines.text == "    11\tclass A:\n    12\t    pass"
    header = ground_lines("1", READ_CALL, claim="A exists", turn=2)
    assert header.failure == "lines_out_of_range" and "shows lines 11-13" in header.why
    assert ground_lines("13", READ_CALL, claim="x", turn=2).failure == "too_short"  # blank
    # Every other tool's lines count from 1 (grep's `path:12:` repeat across files).
    grep = ground_lines("2", GREP_CALL, claim="foo is 2 in b.py", turn=2)
    assert grep.grounded and grep.text == "b.py:12:foo = 2"
    assert ground_lines("12", GREP_CALL, claim="x", turn=2).failure == "lines_out_of_range"
    assert ground_lines("1", GREP_CALL, claim="x", turn=1).failure == "same_turn"


def test_a_reference_to_a_failed_call_grounds_only_a_claim_about_the_failure() -> None:
    failed = CallRecord(
        "f9", "read_json", {"path": "/m/c.json"}, "file not found: /m/c.json", False, 1
    )
    assert ground_lines("1", failed, claim="c.json is missing", turn=2).grounded
    assert ground_lines("1", failed, claim="MTP is on", turn=2).failure == "error_result"


@pytest.mark.parametrize(
    ("raw", "span"),
    [("12", "12"), ("12-14", "12-14"), ("L12–L14", "12-14"), ("lines 3 to 5", "3-5"),
     (12, "12"), ([12, 14], "12-14"), (" 7 - 7 ", "7")],
)  # fmt: skip
def test_a_span_is_read_as_models_write_it(raw: object, span: str) -> None:
    assert span_text(raw) == span


@pytest.mark.parametrize("raw", ["twelve", "14-12", True, [1, 2, 3], "1,3"])
def test_a_span_that_is_not_one_is_invalid(raw: object) -> None:
    with pytest.raises(ValueError):
        span_text(raw)


def test_evidence_gives_a_quote_or_lines_and_quotes_only_refuses_lines() -> None:
    grounder = Grounder()
    grounder.record(GREP_CALL)
    both = {"call_id": "g9", "quote": "foo = 2", "lines": "2"}
    report = {"claim": "foo", "verdict": "yes", "confidence": 0.5, "evidence": [both]}
    refused = grounder.report("r1", report, 2)
    assert refused.kind == "invalid_input" and "not both" in refused.feedback
    quotes_only = Grounder(references=False)
    quotes_only.record(GREP_CALL)
    lines = {**report, "evidence": [{"call_id": "g9", "lines": "2"}]}
    assert quotes_only.report("r2", lines, 2).kind == "invalid_input"
    assert grounder.report("r3", lines, 2).finding is not None
    schema = json.dumps(report_finding_spec(references=False).input_schema)
    assert '"lines"' not in schema and '"lines"' in json.dumps(report_finding_spec().input_schema)


def test_a_language_model_is_shown_each_successful_output_numbered() -> None:
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "Question"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "a", "name": "grep", "input": {}},
                {"type": "tool_use", "id": "b", "name": "read_lines", "input": {}},
                {"type": "tool_use", "id": "c", "name": "read_json", "input": {}},
                {"type": "tool_use", "id": "d", "name": "list_dir", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                tool_result_block("a", GREP_OUT, False),
                tool_result_block("b", READ_OUT, False),
                tool_result_block("c", "file not found: c.json", True),
                tool_result_block("d", "", False),
            ],
        },
    ]
    sent = shown_conversation(messages)
    grep, read, failed, empty = sent[2]["content"]
    assert (
        grep["content"] == "1| a.py:12:foo = 1\n2| b.py:12:foo = 2\n3| 2 matching lines in 2 files"
    )
    assert read["content"] == READ_OUT and failed["content"] == "file not found: c.json"
    assert empty["content"] == "(no output)"
    assert messages[2]["content"][0]["content"] == GREP_OUT  # the conversation kept is untouched


def test_the_brains_declare_evidence_by_lines_and_send_numbered_outputs() -> None:
    request = Request(system="s", messages=[], tools=tool_specs(), question="Is MTP on?")
    anthropic = AnthropicBrain("claude-haiku-4-5", api_key="sk-ant-test-0123456789")
    (declared,) = [t for t in anthropic.body(request)["tools"] if t["name"] == "report_finding"]
    assert "lines" in json.dumps(declared["input_schema"])
    small = OpenAIBrain("smollm2", base_url="http://127.0.0.1:9/v1", context_window=2048)
    (compact,) = [
        f["function"]
        for f in small.body(request)["tools"]
        if f["function"]["name"] == REPORT_FINDING
    ]
    assert '"lines"' in json.dumps(compact["parameters"]) and "lines" in compact["description"]
