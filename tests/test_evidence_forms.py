"""Evidence as models write it, through the real Anthropic SDK against a scripted model: a long
quote cut inside a word, a quote with `...`, a reference by lines, and every refusal named."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from sleuth.agent.brains.anthropic import AnthropicBrain
from sleuth.agent.loop import RunResult
from sleuth.agent.replay.run import replay
from sleuth.agent.session import start_investigation
from sleuth.cli import app
from sleuth.config import HostConfig, Settings
from sleuth.tools.context import ToolContext, build_context
from sleuth.transcripts.events import Event, FindingEvent, Refusal, ToolExecuted
from sleuth.transcripts.store import load
from tests import checkpoint_fixtures as fx
from tests.scripted_api import ScriptedAPI, finding, message, text, tool_use

CONFIG = {"architectures": ["DeepseekV3ForCausalLM"], "num_nextn_predict_layers": 1}
MODEL_PY = "import torch\n\n\nclass DeepseekV3ForCausalLMNextN(torch.nn.Module):\n    pass\n"
SUMMARY = tool_use("toolu_s", "checkpoint_summary", host="local", model_dir="nvfp4")
READ = tool_use("toolu_r", "read_lines", host="local", path="src/model.py", start=3, end=5)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "deploy"
    (root / "src").mkdir(parents=True)
    (root / "config.json").write_text(json.dumps(CONFIG, indent=2))
    (root / "src" / "model.py").write_text(MODEL_PY)
    fx.tiny_nvfp4(root / "nvfp4")
    return root


@pytest.fixture
def ctx(root: Path) -> ToolContext:
    return build_context(Settings(hosts={"local": HostConfig(roots=[str(root)])}), [])


Script = Callable[[Any, int], dict[str, Any]]


def investigate(
    script: Script, ctx: ToolContext, tmp_path: Path
) -> tuple[RunResult, list[Event], ScriptedAPI]:
    with ScriptedAPI(script) as api:
        brain = AnthropicBrain(
            "claude-haiku-4-5", api_key="sk-ant-test-0123456789", base_url=api.url
        )
        inv = start_investigation("Is nvfp4 NVFP4?", brain, ctx, Settings(), tmp_path / "t")
        result = inv.run()
    return result, load(Path(result.transcript)).events, api


def shown(body: Any, call_id: str) -> str:
    """A tool's output as the model was sent it (numbered)."""
    return next(
        b["content"]
        for m in body["messages"]
        if m["role"] == "user" and isinstance(m["content"], list)
        for b in m["content"]
        if b.get("tool_use_id") == call_id
    )


def told(api: ScriptedAPI, call_id: str) -> dict[str, Any]:
    """What the model was told in answer to `call_id`, in the request after it."""
    for body in api.bodies():
        for m in body["messages"]:
            for b in m["content"] if isinstance(m["content"], list) else []:
                if b.get("tool_use_id") == call_id:
                    return dict(b)
    raise AssertionError(f"no answer to {call_id}")


def line_of(numbered: str, needle: str) -> str:
    return next(line for line in numbered.splitlines() if needle in line)


def scripted(*turns: Callable[[Any], dict[str, Any]]) -> Script:
    """Turns that read the request they answer (to quote what the model was shown)."""
    return lambda body, i: turns[i](body) if i < len(turns) else message(text("done"))


def test_a_120_character_prefix_cut_inside_a_word_is_grounded(
    ctx: ToolContext, tmp_path: Path
) -> None:
    cut: list[str] = []

    def report(body: Any) -> dict[str, Any]:
        # The model copies the first 120 characters of the line it was shown, gutter and all.
        line = line_of(shown(body, "toolu_s"), "quantization:")
        assert line[119].isalnum() and line[120].isalnum(), "the prefix must end inside a word"
        cut.append(line[:120])
        return message(finding("toolu_f", "It is NVFP4 (modelopt).", [("toolu_s", line[:120])]))

    result, events, api = investigate(scripted(lambda b: message(SUMMARY), report), ctx, tmp_path)
    (kept,) = result.findings
    assert kept.grounded and told(api, "toolu_f")["is_error"] is False
    (ev,) = kept.evidence
    words = cut[0].split("| ", 1)[1].split()
    assert ev.quote == cut[0] and ev.text == " ".join(words[:-1])  # the cut word trimmed
    assert "grounded on" in told(api, "toolu_f")["content"]
    recorded = next(e for e in events if isinstance(e, FindingEvent))
    assert recorded.finding.evidence[0].text == ev.text


def test_an_ellipsis_quote_across_two_parts_is_grounded(ctx: ToolContext, tmp_path: Path) -> None:
    same_line = "quantization: method=modelopt, algorithm=NVFP4 ... ignore (1): [lm_head]"
    two_lines = "tensors: 52; dtypes F32×24 … shards: 1 (0 missing, 0 invalid)"
    wrong_order = "shards: 1 (0 missing, 0 invalid) … tensors: 52; dtypes F32×24"
    script = [
        message(SUMMARY),
        message(
            finding("toolu_f", "NVFP4, lm_head left out.", [("toolu_s", same_line)]),
            finding("toolu_g", "52 tensors in one shard.", [("toolu_s", two_lines)]),
            finding("toolu_h", "One shard, 52 tensors.", [("toolu_s", wrong_order)]),
        ),
        message(text("done")),
    ]
    result, _, api = investigate(lambda body, i: script[i], ctx, tmp_path)
    grounded = {f.claim: f.grounded for f in result.findings}
    assert grounded == {
        "NVFP4, lm_head left out.": True,
        "52 tensors in one shard.": True,
        "One shard, 52 tensors.": False,
    }
    assert "- not_found:" in told(api, "toolu_h")["content"]


def test_a_reference_by_lines_is_grounded_and_the_report_shows_the_lines(
    ctx: ToolContext, tmp_path: Path
) -> None:
    cited: list[str] = []

    def report(body: Any) -> dict[str, Any]:
        line = line_of(shown(body, "toolu_s"), "quantization:")
        number = line.split("|", 1)[0]
        cited.append(line.split("| ", 1)[1])
        evidence = [{"call_id": "toolu_s", "lines": number}, {"call_id": "toolu_r", "lines": "4-5"}]
        return message(
            tool_use(
                "toolu_f",
                "report_finding",
                claim="NVFP4 by modelopt; the NextN class is defined.",
                verdict="yes",
                confidence=0.9,
                evidence=evidence,
            )
        )

    result, _, api = investigate(scripted(lambda b: message(SUMMARY, READ), report), ctx, tmp_path)
    (kept,) = result.findings
    assert kept.grounded and [e.grounded for e in kept.evidence] == [True, True]
    quant, source = kept.evidence
    assert quant.text == cited[0] and quant.quote == ""
    nextn = "class DeepseekV3ForCausalLMNextN(torch.nn.Module):"
    assert source.lines == "4-5" and source.text == f"     4\t{nextn}\n     5\t    pass"
    assert nextn in told(api, "toolu_f")["content"]  # the model sees what it cited
    path = result.transcript
    runner = CliRunner()
    for fmt in ("text", "md", "html", "json"):
        out = runner.invoke(app, ["show", path, "--format", fmt])
        assert out.exit_code == 0, out.output
        assert cited[0] in out.stdout and nextn in out.stdout, fmt
        assert "lines 4-5" in out.stdout or fmt == "json"
    shown_json = json.loads(runner.invoke(app, ["show", path, "--format", "json"]).stdout)
    recorded = [e for e in shown_json["events"] if e["type"] == "finding"]
    assert recorded[0]["finding"]["evidence"][1]["text"] == source.text


def test_a_reference_whose_lines_changed_no_longer_holds_on_a_live_replay(
    root: Path, ctx: ToolContext, tmp_path: Path
) -> None:
    evidence = [{"call_id": "toolu_r", "lines": "4"}]
    script = [
        message(READ),
        message(
            tool_use(
                "toolu_f", "report_finding", claim="A NextN class.", verdict="yes",
                confidence=0.9, evidence=evidence,
            )
        ),
        message(text("done")),
    ]  # fmt: skip
    result, _, _ = investigate(lambda body, i: script[i], ctx, tmp_path)
    assert result.findings[0].grounded
    assert replay(result.transcript, live_ctx=ctx).ok
    (root / "src" / "model.py").write_text(MODEL_PY.replace("NextN", "Draft"))
    (drift,) = replay(result.transcript, live_ctx=ctx).finding_drift
    assert drift.was_grounded and not drift.holds
    assert drift.quotes[0].failure == Refusal.LINES_CHANGED


# Each refusal, with the evidence that earns it. The first turn reads the config, greps for a
# string that is not there (its output echoes the pattern) and reads a file that is missing.
FIRST = message(
    tool_use("toolu_1", "read_json", host="local", path="config.json"),
    tool_use("toolu_g", "grep", host="local", pattern="num_nextn_predict_layers = 3", path="."),
    tool_use("toolu_x", "read_json", host="local", path="missing.json"),
)
MTP, REAL = "MTP is declared.", '"num_nextn_predict_layers": 1'
CASES: dict[Refusal, tuple[str, dict[str, str]]] = {
    Refusal.UNKNOWN_CALL: (MTP, {"call_id": "toolu_zz", "quote": "whatever it was"}),
    Refusal.SAME_TURN: (MTP, {"call_id": "toolu_6", "quote": REAL}),
    Refusal.ERROR_RESULT: (MTP, {"call_id": "toolu_x", "quote": "missing.json"}),
    Refusal.TOO_SHORT: (MTP, {"call_id": "toolu_1", "quote": "n"}),
    Refusal.BARE_NUMBER: ("There is 1 MTP layer.", {"call_id": "toolu_1", "quote": "1"}),
    Refusal.CUT_IN_WORD: ("DeepSeek.", {"call_id": "toolu_1", "quote": '"architectures": ["Deep'}),
    Refusal.ECHO: ("MTP has 3.", {"call_id": "toolu_g", "quote": "num_nextn_predict_layers = 3"}),
    Refusal.NOT_FOUND: (MTP, {"call_id": "toolu_1", "quote": '"num_mtp_modules": 3'}),
    Refusal.LINES_OUT_OF_RANGE: (MTP, {"call_id": "toolu_1", "lines": "40-41"}),
    Refusal.TOO_MANY_LINES: (MTP, {"call_id": "toolu_1", "lines": "1-30"}),
}
FOUND_ON = {Refusal.CUT_IN_WORD: '"architectures": [', Refusal.ECHO: "no matches for"}
"""The refusals of a quote that was found: the line the complaint must name."""


@pytest.mark.parametrize("reason", list(CASES), ids=str)
def test_each_refusal_is_named_in_the_complaint(
    reason: Refusal, ctx: ToolContext, tmp_path: Path
) -> None:
    claim, evidence = CASES[reason]
    report = tool_use(
        "toolu_f", "report_finding", claim=claim, verdict="yes", confidence=0.8,
        evidence=[evidence],
    )  # fmt: skip
    second = [tool_use("toolu_6", "read_json", host="local", path="config.json"), report]
    script = [FIRST, message(*second), message(text("done"))]
    result, events, api = investigate(lambda body, i: script[i], ctx, tmp_path)
    complaint = told(api, "toolu_f")
    assert complaint["is_error"] is True
    assert complaint["content"].count("\n- ") == 1 and f"\n- {reason}: " in complaint["content"]
    answered = next(e for e in events if isinstance(e, ToolExecuted) and e.call_id == "toolu_f")
    (check,) = answered.result.data["quotes"]
    assert check["failure"] == reason and check["grounded"] is False
    if reason in FOUND_ON:
        numbered = shown(api.bodies()[1], evidence["call_id"])
        number = int(line_of(numbered, FOUND_ON[reason]).split("|", 1)[0])
        assert check["line"] == number and f"(line {number})" in complaint["content"]
    (kept,) = result.findings  # never mended: kept, marked ungrounded, the reason recorded
    assert not kept.grounded and kept.evidence[0].failure == reason


def test_a_long_quote_cut_inside_its_only_word_is_refused_as_cut_and_mended_whole(
    root: Path, ctx: ToolContext, tmp_path: Path
) -> None:
    # One word of 34 characters, quoted as its first 31: long enough to be trimmed, and nothing
    # is left once the cut word goes. The refusal must name that rule (not "too short") so the
    # mend quotes the whole word.
    word = "Qwen3_5MoeForConditionalGeneration"
    (root / "qwen.json").write_text(json.dumps({"architectures": [word]}, indent=2))
    cut = word[:31]
    script = [
        message(tool_use("toolu_q", "read_json", host="local", path="qwen.json")),
        message(finding("toolu_f", "It is Qwen3.5 MoE.", [("toolu_q", cut)])),
        message(finding("toolu_g", "It is Qwen3.5 MoE.", [("toolu_q", word)], mends="toolu_f")),
        message(text("done")),
    ]
    result, events, api = investigate(lambda body, i: script[i], ctx, tmp_path)
    complaint = told(api, "toolu_f")
    assert complaint["is_error"] is True
    assert f"\n- {Refusal.CUT_IN_WORD}: " in complaint["content"]
    assert "cut inside a word, and too short after trimming" in complaint["content"]
    assert "nothing is left" in complaint["content"]
    assert "too short to ground anything" not in complaint["content"]
    number = int(line_of(shown(api.bodies()[1], "toolu_q"), word).split("|", 1)[0])
    assert f"(line {number})" in complaint["content"]
    answered = next(e for e in events if isinstance(e, ToolExecuted) and e.call_id == "toolu_f")
    (check,) = answered.result.data["quotes"]
    assert check["failure"] == Refusal.CUT_IN_WORD and check["line"] == number
    (kept,) = result.findings  # the mend quoting the whole word grounds
    assert kept.grounded and told(api, "toolu_g")["is_error"] is False
