"""Request size per turn: what each brain sends, full prompt and compact, against the context.

    python -m benchmarks.request_size [--out benchmarks/results/request_size.md]

One scripted investigation (read config.json, grep the source, read the lines around the hit,
report a finding, answer) runs through the real loop and each brain's real request builder,
against the scripted model servers on loopback. Every request body is measured as sent. No
tokenizer ships with the project, so tokens are estimated: at 4 characters a token (typical
for English and JSON) and with the brain's own high-side estimate that fits `max_tokens`.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from benchmarks import write_results
from sleuth.agent.brains.anthropic import AnthropicBrain
from sleuth.agent.brains.openai import OpenAIBrain
from sleuth.agent.session import start_investigation
from sleuth.config import HostConfig, Settings
from sleuth.tools.context import build_context
from tests.scripted_api import ScriptedAPI, finding, message, text, tool_use

QUESTION = "Does the checkpoint in this folder declare MTP heads?"
CONFIG = {"architectures": ["DeepseekV3ForCausalLM"], "num_nextn_predict_layers": 1}
SOURCE = "".join(f"# line {i}\n" for i in range(60)) + "class DeepseekV3ForCausalLMNextN:\n"


def script() -> Any:
    """The five turns; each reports the request's bytes/4 as its prompt tokens, a stand-in for
    a server's count (the OpenAI brain fits later turns from the count it was given)."""
    turns = [
        message(tool_use("c1", "read_json", path="config.json"), output_tokens=30),
        message(tool_use("c2", "grep", pattern="NextN", path="src"), output_tokens=30),
        message(tool_use("c3", "read_lines", path="src/model.py", start=50, end=61)),
        message(
            finding("c4", "One MTP layer is declared.", [("c1", '"num_nextn_predict_layers": 1')])
        ),
        message(text("Yes: the config declares one MTP (NextN) layer.")),
    ]

    def serve(body: Any, index: int) -> Any:
        turn = turns[index]
        turn["usage"]["input_tokens"] = len(json.dumps(body, ensure_ascii=False)) // 4
        return turn

    return serve


def measure(kind: str, root: Path) -> list[dict[str, Any]]:
    ctx = build_context(Settings(hosts={"local": HostConfig(roots=[str(root)])}), [])
    flavour = "anthropic" if kind == "anthropic" else "openai"
    with ScriptedAPI(script(), flavour=flavour) as api:
        brain: AnthropicBrain | OpenAIBrain
        if kind == "anthropic":
            brain = AnthropicBrain(
                "claude-haiku-4-5", api_key="sk-ant-bench-0123", base_url=api.url
            )
        else:
            window = 4096 if kind == "openai compact" else None
            brain = OpenAIBrain("m", base_url=api.url, context_window=window)
        inv = start_investigation(QUESTION, brain, ctx, Settings(), root / "transcripts")
        result = inv.run()
        assert result.status == "answered", result
    rows = []
    for i, request in enumerate(api.requests, 1):
        body = request.body
        chars = len(json.dumps(body, ensure_ascii=False))
        # The prompt the brain reserved room for: the context less the max_tokens it asked.
        estimate = 4096 - body["max_tokens"] if kind == "openai compact" else None
        rows.append(
            {
                "brain": kind,
                "turn": i,
                "bytes": chars,
                "tools": len(body["tools"]),
                "tokens4": chars // 4,
                "estimate": estimate,
                "max_tokens": body["max_tokens"],
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/request_size.md"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "src").mkdir()
        (root / "config.json").write_text(json.dumps(CONFIG, indent=2))
        (root / "src" / "model.py").write_text(SOURCE)
        rows = [
            r for kind in ("anthropic", "openai", "openai compact") for r in measure(kind, root)
        ]
    lines = [
        "## Request size per turn (`benchmarks/request_size.py`)",
        "",
        "`python -m benchmarks.request_size`: one five-turn investigation (read_json, grep, "
        "read_lines, report_finding, answer) through the real loop and each brain's request "
        "builder, against the scripted servers. Bytes are the request body as sent; tokens are "
        "estimated (no tokenizer ships here): bytes/4, and for the OpenAI brain its own high-side "
        "estimate (3 bytes a token + 10% + 64 on the first turn; later, the server's count of the "
        "previous prompt, here bytes/4, plus that estimate of what was added) that fits "
        "`max_tokens` to the served context. "
        "`openai compact` is the same brain with a 4,096-token context, where it switches to the "
        "compact prompt and the question family's tools.",
        "",
        "| brain | turn | tools | request bytes | ≈ tokens (bytes/4) | fitting estimate | "
        "max_tokens asked |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        estimate = f"{r['estimate']:,}" if r["estimate"] is not None else "—"
        lines.append(
            f"| {r['brain']} | {r['turn']} | {r['tools']} | {r['bytes']:,} | {r['tokens4']:,} | "
            f"{estimate} | {r['max_tokens']:,} |"
        )
    compact = [r for r in rows if r["brain"] == "openai compact"]
    full = [r for r in rows if r["brain"] == "openai"]
    lines += [
        "",
        f"The compact request is {compact[0]['bytes'] / full[0]['bytes']:.0%} of the full one "
        f"on the first turn ({compact[0]['bytes']:,} vs {full[0]['bytes']:,} bytes); every "
        "compact turn reserves at least its bytes/4 for the prompt within the 4,096-token "
        "context.",
    ]
    for r in compact:
        assert r["estimate"] >= r["tokens4"], r
    write_results(args.out, "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
