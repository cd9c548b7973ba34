"""safetensors_header: one .safetensors file's header read and validated, never its data."""

from __future__ import annotations

import posixpath

from pydantic import Field

from sleuth.hosts.program import checkpoint_probe as probe
from sleuth.tools.checkpoints.models import HeaderReport
from sleuth.tools.checkpoints.render import header_text
from sleuth.tools.context import ToolContext
from sleuth.tools.registry import ToolInput, tool
from sleuth.tools.results import ToolError, cap_output
from sleuth.transcripts.results import ToolResult


class HeaderInput(ToolInput):
    path: str = Field(description="A .safetensors file; relative paths start at the first root.")


@tool()
def safetensors_header(ctx: ToolContext, args: HeaderInput) -> ToolResult:
    """Read and validate one .safetensors file's header (8-byte length + JSON), never its data.

    Use it to inspect a single shard: which tensors it holds, their dtypes (U8, F8_E4M3, BF16,
    F32, ...) and shapes, its __metadata__, and whether the header is intact (header length
    inside the file, valid JSON, known dtypes, data_offsets contiguous and inside the file).
    Returns the tensor count, a dtype histogram, declared data bytes against the file size and
    the tensor names collapsed into patterns like `layers.{0..60}.mlp.experts.{0..255}.w ×15616`.
    For a whole checkpoint folder use checkpoint_summary instead.
    """
    sandboxed = ctx.host(args.host)
    path = sandboxed.resolve(args.path)
    st = sandboxed.files.stat(path)
    if st.kind != "file":
        raise ToolError(f"{path} is not a regular file on host {args.host!r} ({st.kind})")
    shard = posixpath.basename(path)
    try:
        n = probe.header_length(shard, sandboxed.files.read_range(path, 0, 8), st.size)
        raw = sandboxed.files.read_range(path, 8, n)
        if len(raw) < n:
            raise probe.HeaderError(f"{shard}: header cut short: read {len(raw)} of {n} bytes")
        parsed = probe.parse_header(shard, raw, st.size)
    except probe.HeaderError as exc:
        raise ToolError(f"malformed safetensors file {path}: {exc}") from None
    parsed["size"] = st.size
    metadata = parsed["metadata"]
    parsed = probe.compact(parsed, shard, {}, None)
    summary = probe.analyse({"model_dir": posixpath.dirname(path), "headers": {shard: parsed}})
    report = HeaderReport(
        path=path,
        file_size=st.size,
        header_bytes=n,
        tensor_count=summary["tensor_count"],
        dtypes=summary["dtypes"],
        metadata=metadata,
        declared_data_bytes=parsed["declared"],
        data_section_bytes=parsed["data"],
        logical_params=summary["params"]["logical"],
        weight_map=summary["weight_map"],
        bytes_read=8 + len(raw),
    )
    output, cut = cap_output(
        header_text(report), ctx.limits.max_output_bytes, ctx.limits.max_output_lines
    )
    return ToolResult(ok=True, output=output, data=report.model_dump(mode="json"), bytes_cut=cut)
