"""Every launch is one more check: the engine's KV line beside Sleuth's prediction for it.

launch_server (and server_status) hand `check_launch` the KV line the engine printed and the
launch's own settings (model folder, tp, memory fraction, engine arguments, environment);
it plans the same launch with capacity_plan's model on that host and returns both figures
side by side, with the error and the terms the prediction is least sure of.
"""

from __future__ import annotations

import re

from pydantic import BaseModel

from sleuth.hosts.host import HostError
from sleuth.hosts.policy import SandboxedHost
from sleuth.tools.capacity.capacity_plan import make_plan
from sleuth.tools.capacity.plan import CapacityInput
from sleuth.tools.results import ToolError

_TOKENS = re.compile(r"(?:GPU|CPU) KV cache size: ([\d,]+) tokens|#tokens: (\d+)")
_CONCURRENCY = re.compile(r"Maximum concurrency for [\d,]+ tokens per request: ([\d.]+)x")
# Engine flags that change the KV cache, by the CapacityInput field they set.
_FLAGS = {
    "--max-model-len": "context_length",
    "--context-length": "context_length",
    "--kv-cache-dtype": "kv_cache_dtype",
    "--max-num-seqs": "max_num_seqs",
    "--max-num-batched-tokens": "max_num_batched_tokens",
    "--block-size": "block_size",
    "--gpu-memory-utilization": "mem_fraction",
    "--mem-fraction-static": "mem_fraction",
    "--tensor-parallel-size": "tp",
    "--tp": "tp",
    "--pipeline-parallel-size": "pp",
    # Only fp8 changes what the weights weigh as they load (online_quant.py); a checkpoint's own
    # method is read from the checkpoint.
    "--quantization": "quantization",
    "-q": "quantization",
}


class KvCheck(BaseModel):
    """The engine's reported KV capacity beside Sleuth's prediction of it."""

    reported_line: str
    reported_tokens: int
    predicted_tokens: int
    error: float
    """(predicted - reported) / reported."""
    reported_concurrency: float | None
    predicted_concurrency: float
    predicted_lines: list[str]
    uncertain: list[str]
    rules: str

    def text(self) -> str:
        return (
            f"KV cache: the engine reports {self.reported_tokens:,} tokens; Sleuth predicted "
            f"{self.predicted_tokens:,} ({self.error:+.1%}, rules {self.rules})"
            + (f"; uncertain: {'; '.join(self.uncertain)}" if self.uncertain else "")
        )


def parse_kv_line(line: str) -> tuple[int, float | None] | None:
    """(tokens, max concurrency if printed) from vLLM's or SGLang's KV line."""
    found = _TOKENS.search(line)
    if found is None:
        return None
    tokens = int((found.group(1) or found.group(2)).replace(",", ""))
    conc = _CONCURRENCY.search(line)
    return tokens, float(conc.group(1)) if conc else None


def check_launch(
    host: SandboxedHost,
    engine: str,
    model_path: str,
    argv: list[str],
    env: dict[str, str],
    kv_line: str,
) -> KvCheck | None:
    """Plan this launch and set the prediction beside the engine's KV line; None when the
    line carries no figure or the checkpoint cannot be planned."""
    parsed = parse_kv_line(kv_line)
    if parsed is None or engine not in ("vllm", "sglang"):
        return None
    args = launch_input(engine, model_path, argv, env)
    try:
        plan = make_plan(host, args)
    except (ToolError, HostError, ValueError):
        return None
    acc = plan.engine_account
    tokens, conc = parsed
    return KvCheck(
        reported_line=kv_line.strip(),
        reported_tokens=tokens,
        predicted_tokens=acc.kv_tokens,
        error=(acc.kv_tokens - tokens) / tokens if tokens else 0.0,
        reported_concurrency=conc,
        predicted_concurrency=round(acc.max_concurrency, 2),
        predicted_lines=acc.lines,
        uncertain=acc.uncertain,
        rules=acc.rules,
    )


def launch_input(
    engine: str, model_path: str, argv: list[str], env: dict[str, str]
) -> CapacityInput:
    """capacity_plan's input for a launch: its engine flags (`--quantization fp8` among them),
    and for vLLM's CPU build the KV space from VLLM_CPU_KVCACHE_SPACE."""
    fields: dict[str, object] = {"model_dir": model_path, "engine": engine}
    for i, arg in enumerate(argv):
        flag, eq, value = arg.partition("=")
        field = _FLAGS.get(flag.replace("_", "-"))
        if field is None:
            if arg == "--enforce-eager":
                fields["enforce_eager"] = True
            continue
        text = value if eq else (argv[i + 1] if i + 1 < len(argv) else "")
        if field != "quantization" or text == "fp8":
            fields[field] = text
    if "VLLM_CPU_KVCACHE_SPACE" in env and engine == "vllm":
        fields["gpus"] = "cpu"
        fields["cpu_kv_space_gib"] = env["VLLM_CPU_KVCACHE_SPACE"]
    return CapacityInput.model_validate(fields)
