"""Checkpoint tools: `safetensors_header` and `checkpoint_summary`, from metadata alone.

The analysis lives in `sleuth.hosts.program.checkpoint_probe`, a stdlib-only
program run by this interpreter as a child process for the local host and sent to
a remote host that has python3; without python3 the same code runs here, in
process, on headers fetched by SFTP range reads. No byte of tensor data is ever read.
"""

from __future__ import annotations

import json
import posixpath
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

from pydantic import BaseModel, Field

from sleuth.errors import ErrorKind
from sleuth.hosts.host import HostError, LocalHost
from sleuth.hosts.policy import SandboxedHost
from sleuth.hosts.program import checkpoint_probe as probe
from sleuth.hosts.program import program
from sleuth.tools.context import ToolContext
from sleuth.tools.registry import ToolInput, tool
from sleuth.tools.results import ToolError, cap_output
from sleuth.transcripts.results import ToolResult

READ_THREADS = 16
PROBE_OUTPUT_CAP = 16 * 1024 * 1024


class WeightPattern(BaseModel):
    pattern: str
    count: int
    dtype: str
    shape: list[int]


class HeaderReport(BaseModel):
    path: str
    file_size: int
    header_bytes: int
    tensor_count: int
    dtypes: dict[str, int]
    metadata: dict[str, Any]
    declared_data_bytes: int
    data_section_bytes: int
    logical_params: int
    weight_map: list[WeightPattern]
    bytes_read: int


class QuantFacts(BaseModel):
    method: str | None = None
    algorithm: str | None = None
    bits: int | None = None
    group_size: int | None = None
    weight_block_size: list[int] | None = None
    format: str | None = None
    strategy: str | None = None
    kv_cache: str | None = None
    ignore: list[dict[str, Any]] = Field(default_factory=list)
    ignore_count: int = 0
    sources: list[str] = Field(default_factory=list)


class MtpFacts(BaseModel):
    declared_layers: int | None
    declared_by: dict[str, Any]
    found_layers: list[int]
    conventions: list[str]
    tensors: int
    params: int
    bytes: int
    dtypes: dict[str, int]
    deepseek_markers: list[str]


class Consistency(BaseModel):
    index: bool
    shards_missing: list[str]
    names_match: bool
    total_size_declared: int | None
    total_size_headers: int


class ParamCounts(BaseModel):
    logical: int
    """Parameters as the model sees them: packed FP4/int4 values unpacked."""
    quant_aux_elements: int
    """Scales, zero points and other quantisation side tensors, counted apart."""
    quant_aux_bytes: int
    mtp: int


class ShardTotals(BaseModel):
    count: int
    file_bytes: int
    declared_bytes: int
    missing: int
    invalid: int


class CheckpointSummary(BaseModel):
    model_dir: str
    via: Literal["local-python", "in-process", "host-python", "sftp"]
    bytes_read_on_host: int
    bytes_over_wire: int | None
    files: dict[str, int]
    config: dict[str, Any] | None
    quantization: QuantFacts | None
    tensor_count: int
    dtypes: dict[str, int]
    params: ParamCounts
    shards: ShardTotals
    weight_map: list[WeightPattern]
    mtp: MtpFacts
    consistency: Consistency
    warnings: list[str]
    errors: list[str]


class HeaderInput(ToolInput):
    path: str = Field(description="A .safetensors file; relative paths start at the first root.")


class SummaryInput(ToolInput):
    model_dir: str = Field(
        description="Folder holding config.json and model.safetensors(.index.json) + shards."
    )


# ---------------------------------------------------------------- safetensors_header


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
    st = sandboxed.host.stat(path)
    if st.kind != "file":
        raise ToolError(f"{path} is not a regular file on host {args.host!r} ({st.kind})")
    shard = posixpath.basename(path)
    try:
        n = probe.header_length(shard, sandboxed.host.read_range(path, 0, 8), st.size)
        raw = sandboxed.host.read_range(path, 8, n)
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
    return _result(ctx, header_text(report), report)


def header_text(r: HeaderReport) -> str:
    lines = [
        f"{r.path}: {r.tensor_count} tensors, header {r.header_bytes} bytes, "
        f"file {r.file_size} bytes",
        f"data: declared {r.declared_data_bytes} bytes, data section {r.data_section_bytes} bytes"
        + ("" if r.declared_data_bytes == r.data_section_bytes else " (MISMATCH)"),
        "dtypes: " + _hist(r.dtypes),
        f"logical params: {r.logical_params:,}",
        "metadata: " + json.dumps(r.metadata, sort_keys=True),
        "tensors:",
        *(_pattern_line(p) for p in r.weight_map),
    ]
    return "\n".join(lines)


# ---------------------------------------------------------------- checkpoint_summary


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
    model_dir = sandboxed.resolve(args.model_dir)
    if sandboxed.host.stat(model_dir).kind != "dir":
        raise ToolError(
            f"{model_dir} is not a folder on host {args.host!r}; give the checkpoint "
            "folder that holds config.json and the safetensors files"
        )
    summary = summarize(sandboxed, model_dir)
    return _result(ctx, summary_text(summary), summary)


def summarize(sandboxed: SandboxedHost, model_dir: str) -> CheckpointSummary:
    """Run the analysis where the data is: in-process, on the host's python3, or over SFTP.

    A slower path taken because the faster one failed is stated in `warnings`, with why.
    """
    if isinstance(sandboxed.host, LocalHost):
        # As its own process: it forks workers (unsafe in this threaded process) and its
        # ~0.2 GB of parsed headers go back to the OS when it exits.
        local = _on_host_python(sandboxed, model_dir, sys.executable, "local-python")
        if isinstance(local, CheckpointSummary):
            return local
        fs = probe.LocalFs(sandboxed.real_roots)
        raw = _analyse(lambda: probe.summarise(model_dir, fs))
        return _fell_back(_validated(raw, "in-process", raw["bytes_read"], None), local)
    remote = _on_host_python(sandboxed, model_dir, sandboxed.config.python, "host-python")
    if isinstance(remote, CheckpointSummary):
        return remote
    sftp = SftpFs(sandboxed)
    with ThreadPoolExecutor(READ_THREADS) as pool:
        raw = _analyse(lambda: probe.summarise(model_dir, sftp, pool.map))
    return _fell_back(_validated(raw, "sftp", sftp.bytes_read, sftp.bytes_read), remote)


def _fell_back(summary: CheckpointSummary, why: str) -> CheckpointSummary:
    summary.warnings.insert(0, f"fell back to the {summary.via} path (slower): {why}")
    return summary


def _analyse(run: Any) -> dict[str, Any]:
    try:
        result: dict[str, Any] = run()
    except probe.ProbeError as exc:
        raise ToolError(str(exc)) from None
    return result


def _on_host_python(
    sandboxed: SandboxedHost, model_dir: str, python: str, via: str
) -> CheckpointSummary | str:
    """The probe run by the host's python3, or why it could not be (the caller falls back)."""
    try:
        run = sandboxed.run_program(
            "checkpoint_probe.py",
            [model_dir, *sandboxed.real_roots],
            python=python,
            max_bytes=PROBE_OUTPUT_CAP,
        )
    except HostError as exc:
        if exc.kind is ErrorKind.COMMAND_NOT_FOUND:
            return f"{python} was not found on host {sandboxed.name!r}"
        raise
    if run.exit_code == 127:
        return f"{python} was not found on host {sandboxed.name!r} (exit 127)"
    if run.timed_out:
        raise ToolError(
            f"the checkpoint probe timed out on host {sandboxed.name!r}; raise "
            "[limits] timeout_s in sleuth.toml for very large checkpoints"
        )
    try:
        doc = json.loads(run.stdout)
    except ValueError:  # an interpreter too old or broken: the slower path still works
        tail = run.stderr.decode(errors="replace").strip().splitlines()
        return (
            f"{python} on host {sandboxed.name!r} gave no answer (exit {run.exit_code}"
            + (f": {tail[-1][:200]}" if tail else "")
            + ")"
        )
    if doc.get("crash"):
        return f"the checkpoint probe failed on host {sandboxed.name!r}: {doc['crash']}"
    if not doc.get("ok"):
        raise ToolError(str(doc.get("error")))
    raw = doc["summary"]
    wire = None if via == "local-python" else len(program("checkpoint_probe.py")) + len(run.stdout)
    return _validated(raw, via, raw["bytes_read"], wire)


def _validated(
    raw: dict[str, Any], via: str, host_bytes: int, wire: int | None
) -> CheckpointSummary:
    raw = {**raw, "via": via, "bytes_read_on_host": host_bytes, "bytes_over_wire": wire}
    raw.pop("bytes_read", None)
    return CheckpointSummary.model_validate(raw)


class SftpFs:
    """The probe's file interface over a sandboxed remote host: stat and range reads."""

    def __init__(self, sandboxed: SandboxedHost) -> None:
        self.sandboxed = sandboxed
        self.bytes_read = 0

    def size(self, path: str) -> int | None:
        st = self.sandboxed.host.stat(path)
        if st.kind == "symlink":  # follow it only where the policy allows
            try:
                st = self.sandboxed.host.stat(self.sandboxed.resolve(path))
            except ToolError as exc:
                if exc.kind is ErrorKind.NOT_FOUND:
                    return None
                raise probe.ProbeError(str(exc)) from None
        return None if st.kind == "missing" else st.size

    def read(self, path: str, offset: int, length: int) -> bytes:
        data = self.sandboxed.host.read_range(path, offset, length)
        self.bytes_read += len(data)
        return data


# ---------------------------------------------------------------- text


def summary_text(s: CheckpointSummary) -> str:
    wire = "" if s.bytes_over_wire is None else f", {s.bytes_over_wire:,} bytes over the wire"
    lines = [
        f"checkpoint {s.model_dir} (via {s.via}: {s.bytes_read_on_host:,} bytes read"
        f"{wire}; no tensor data read)"
    ]
    lines += [f"WARNING: {w}" for w in s.warnings]
    lines += [f"ERROR: {e}" for e in s.errors]
    if s.config:
        lines.append("config: " + _config_line(s.config))
    lines.append("quantization: " + _quant_line(s.quantization))
    m = s.mtp
    lines.append(
        f"mtp: declared {m.declared_layers} ({_kv(m.declared_by)}); found {m.tensors} tensors "
        f"in layers {m.found_layers} ({', '.join(m.conventions) or 'none'}), "
        f"dtypes {_hist(m.dtypes)}, {m.params:,} params"
        + (f", markers {m.deepseek_markers}" if m.deepseek_markers else "")
    )
    p, sh, c = s.params, s.shards, s.consistency
    lines.append(
        f"params: {p.logical:,} logical ({_human(p.logical)}), quant scales "
        f"{p.quant_aux_elements:,} elements / {p.quant_aux_bytes:,} bytes, "
        f"mtp {p.mtp:,}"
    )
    lines.append(f"tensors: {s.tensor_count:,}; dtypes {_hist(s.dtypes)}")
    lines.append(
        f"shards: {sh.count} ({sh.missing} missing, {sh.invalid} invalid), "
        f"{sh.file_bytes:,} bytes on disk, {sh.declared_bytes:,} declared; index "
        f"total_size {c.total_size_declared}, headers sum {c.total_size_headers}; "
        f"names match index: {c.names_match}"
    )
    lines.append(f"weight map ({len(s.weight_map)} patterns):")
    lines += [_pattern_line(w) for w in s.weight_map]
    return "\n".join(lines)


def _config_line(c: dict[str, Any]) -> str:
    keys = (
        "architectures",
        "model_type",
        "text_model_type",
        "num_hidden_layers",
        "hidden_size",
        "num_experts",
        "num_experts_per_tok",
        "moe_intermediate_size",
        "shared_experts",
        "first_k_dense_replace",
        "vocab_size",
        "dtype",
    )
    parts = [f"{k}={c[k]}" for k in keys if c.get(k) is not None]
    lt = c.get("layer_types")
    if lt:
        parts.append(f"layer_types={_kv(lt['counts'])} repeating {lt['period']}")
    return ", ".join(parts)


def _quant_line(q: QuantFacts | None) -> str:
    if q is None:
        return "none declared (no quantization_config, no hf_quant_config.json)"
    parts = [
        f"method={q.method}",
        f"algorithm={q.algorithm}",
        f"bits={q.bits}",
        f"group_size={q.group_size}",
    ]
    parts += [
        f"{k}={v}"
        for k, v in (("block", q.weight_block_size), ("format", q.format), ("kv_cache", q.kv_cache))
        if v
    ]
    ignored = "; ".join(
        f"{i['pattern']}" + (f" ×{i['count']}" if i["count"] > 1 else "") for i in q.ignore
    )
    parts.append(f"ignore ({q.ignore_count}): [{ignored}]")
    parts.append(f"from {' + '.join(q.sources)}")
    return ", ".join(parts)


def _pattern_line(p: WeightPattern) -> str:
    count = f" ×{p.count}" if p.count > 1 else ""
    return f"  {p.pattern}{count} {p.dtype}{p.shape}"


def _hist(h: dict[str, int]) -> str:
    return ", ".join(f"{k}×{v}" for k, v in h.items()) or "none"


def _kv(d: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in d.items()) or "no MTP keys"


def _human(n: int) -> str:
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f}{unit}"
    return str(n)


def _result(ctx: ToolContext, text: str, model: BaseModel) -> ToolResult:
    output, cut = cap_output(text, ctx.limits.max_output_bytes, ctx.limits.max_output_lines)
    return ToolResult(ok=True, output=output, data=model.model_dump(mode="json"), bytes_cut=cut)
