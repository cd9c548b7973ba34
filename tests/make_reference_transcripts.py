"""Regenerate the reference transcripts in transcripts/: scripted Messages-API turns, the real
anthropic SDK over loopback, and real tools on a fixture deployment at a fixed path.

    python tests/make_reference_transcripts.py

The output is the same on every run except timestamps, hashes and session ids. The test suite
replays every transcripts/*.jsonl offline and expects the recorded findings back.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from scripted_api import ScriptedAPI, finding, message, text, tool_use  # noqa: E402

from sleuth.agent.brains.anthropic import AnthropicBrain  # noqa: E402
from sleuth.agent.playbook.brain import PlaybookBrain  # noqa: E402
from sleuth.config import Budget, HostConfig, Settings  # noqa: E402
from sleuth.demo_deployment import build_demo  # noqa: E402
from sleuth.testing import record  # noqa: E402
from sleuth.tools.context import build_context  # noqa: E402

OUT = HERE.parent / "transcripts"
ROOT = Path("/tmp/sleuth-reference/deploy")
CONFIG = {
    "architectures": ["DeepseekV3ForCausalLM"],
    "num_nextn_predict_layers": 1,
    "quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4"},
}
MODEL_PY = (
    "import torch\n\n\nclass DeepseekV3ForCausalLM(torch.nn.Module):\n    pass\n\n\n"
    "class DeepseekV3ForCausalLMNextN(torch.nn.Module):\n"
    '    """The multi-token prediction head."""\n'
)
NEXTN = "class DeepseekV3ForCausalLMNextN(torch.nn.Module):"


def deployment() -> None:
    shutil.rmtree(ROOT.parent, ignore_errors=True)
    (ROOT / "src").mkdir(parents=True)
    (ROOT / "config.json").write_text(json.dumps(CONFIG, indent=2) + "\n")
    (ROOT / "src" / "model.py").write_text(MODEL_PY)


MTP = [
    message(
        text("I will read the MTP layer count and look for the NextN class."),
        tool_use(
            "toolu_cfg",
            "read_json",
            host="local",
            path="config.json",
            pointer="/num_nextn_predict_layers",
        ),
        tool_use("toolu_grep", "grep", host="local", pattern="NextN", path="src"),
    ),
    message(
        finding(
            "toolu_f1",
            "The checkpoint declares one MTP layer and the source defines its NextN head class.",
            [("toolu_cfg", "num_nextn_predict_layers:\n1"), ("toolu_grep", NEXTN)],
        )
    ),
    message(text("Yes: one MTP layer, served by DeepseekV3ForCausalLMNextN.")),
]

MENDED = [
    message(
        tool_use(
            "toolu_q", "read_json", host="local", path="config.json", pointer="/quantization_config"
        )
    ),
    message(
        finding(
            "toolu_f1",
            "The checkpoint is quantized to NVFP4 with ModelOpt.",
            [("toolu_q", '"quant_algo": "FP8"')],
        )
    ),
    message(
        finding(
            "toolu_f2",
            "The checkpoint is quantized to NVFP4 with ModelOpt.",
            [("toolu_q", '"quant_algo": "NVFP4"'), ("toolu_q", '"quant_method": "modelopt"')],
            mends="toolu_f1",
        )
    ),
    message(text("NVFP4, by ModelOpt.")),
]

BUDGET = [
    message(tool_use("toolu_ls", "list_dir", host="local", path=".")),
    message(tool_use("toolu_src", "read_lines", host="local", path="src/model.py")),
    message(
        finding(
            "toolu_f1",
            "The source defines the main and the NextN model classes.",
            [("toolu_src", "class DeepseekV3ForCausalLM(torch.nn.Module):"), ("toolu_src", NEXTN)],
            verdict="partial",
            confidence=0.6,
        )
    ),
]

CASES: dict[str, tuple[str, list[Any], Budget]] = {
    "mtp-heads": (
        "Does the checkpoint carry MTP heads, and does the source define them?",
        MTP,
        Budget(),
    ),
    "mended-quote": ("How is the checkpoint quantized?", MENDED, Budget()),
    "budget-spent": ("Which model classes does the source define?", BUDGET, Budget(max_turns=2)),
}

# The offline playbook on the demo deployment; replayed both with the recorded turns and with
# PlaybookBrain re-driving them, so a change in the playbook's plan shows as a divergence.
PLAYBOOK_CASES = {
    "playbook-mtp-trap": "Does DeepSeek-V3-demo-FP8 still carry its MTP heads?",
    "playbook-quantisation": "What is Qwen3.5-MoE-demo-NVFP4 quantised to?",
}


def main() -> None:
    deployment()
    for name, (question, script, budget) in CASES.items():
        settings = Settings(hosts={"local": HostConfig(roots=[str(ROOT)])}, budget=budget)
        ctx = build_context(settings, [])
        with ScriptedAPI(script) as api:
            brain = AnthropicBrain(
                "claude-sonnet-4-5", api_key="sk-ant-reference-key", base_url=api.url
            )
            path = record(OUT / f"{name}.jsonl", question, brain, ctx, settings)
        print(f"wrote {path.relative_to(HERE.parent)}")
    demo = ROOT.parent / "demo"
    build_demo(demo)
    settings = Settings(hosts={"local": HostConfig(roots=[str(demo)])})
    for name, question in PLAYBOOK_CASES.items():
        path = record(
            OUT / f"{name}.jsonl", question, PlaybookBrain(), build_context(settings, []), settings
        )
        print(f"wrote {path.relative_to(HERE.parent)}")


if __name__ == "__main__":
    main()
