"""checkpoint_summary: a Hugging Face checkpoint folder summarised from its metadata alone."""

from __future__ import annotations

from pydantic import Field

from sleuth.tools.checkpoints.render import summary_text
from sleuth.tools.checkpoints.summarize import summarize
from sleuth.tools.context import ToolContext
from sleuth.tools.registry import ToolInput, tool
from sleuth.tools.results import ToolError, cap_output
from sleuth.transcripts.results import ToolResult


class SummaryInput(ToolInput):
    model_dir: str = Field(
        description="Folder holding config.json and model.safetensors(.index.json) + shards."
    )


@tool()
def checkpoint_summary(ctx: ToolContext, args: SummaryInput) -> ToolResult:
    """Summarise a Hugging Face checkpoint folder from its metadata alone, in one call.

    Use it first for any question about a checkpoint: architecture, MTP heads, quantisation,
    experts, shard integrity. Reads config.json (incl. nested text_config), hf_quant_config.json,
    model.safetensors.index.json and every shard's header (never tensor data), on the host
    itself when it has python3. Reports: architectures, layers, hidden size, experts, layer
    types, every MTP key; quantisation method/algorithm/bits/group size/ignored modules; the
    weight map collapsed to patterns with dtype and shape; MTP tensors in both conventions
    (Qwen `mtp.*`, DeepSeek extra layers >= num_hidden_layers) with a WARNING when config and
    tensors disagree; logical parameter count (packed FP4/int4 unpacked, scales apart); and
    consistency problems (missing shards, names differing from the index, total_size).
    """
    sandboxed = ctx.host(args.host)
    model_dir = sandboxed.resolve(args.model_dir, folder=True)
    if sandboxed.files.stat(model_dir).kind != "dir":
        raise ToolError(
            f"{model_dir} is not a folder on host {args.host!r}; give the checkpoint "
            "folder that holds config.json and the safetensors files"
        )
    summary = summarize(sandboxed, model_dir)
    output, cut = cap_output(
        summary_text(summary), ctx.limits.max_output_bytes, ctx.limits.max_output_lines
    )
    return ToolResult(ok=True, output=output, data=summary.model_dump(mode="json"), bytes_cut=cut)
