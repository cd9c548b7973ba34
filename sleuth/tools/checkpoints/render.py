"""The checkpoint tools' text: what the model reads of a header report or a summary."""

from __future__ import annotations

import json
from typing import Any

from sleuth.tools.checkpoints.models import (
    CheckpointSummary,
    HeaderReport,
    QuantFacts,
    WeightPattern,
)


def header_text(r: HeaderReport) -> str:
    lines = [
        f"{r.path}: {r.tensor_count} tensors, header {r.header_bytes} bytes, "
        f"file {r.file_size} bytes",
        f"data: declared {r.declared_data_bytes} bytes, data section {r.data_section_bytes} bytes"
        + ("" if r.declared_data_bytes == r.data_section_bytes else " (MISMATCH)"),
        "dtypes: " + _hist(r.dtypes),
        f"logical params: {r.logical_params:,}",
        "metadata: " + json.dumps(r.metadata, sort_keys=True),
        f"tensors ({GROUPED}):",
        *weight_map_lines(r.weight_map),
    ]
    return "\n".join(lines)


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
    lines.append(f"weight map ({len(s.weight_map)} patterns; {GROUPED}):")
    lines += weight_map_lines(s.weight_map)
    return "\n".join(lines)


GROUPED = "an indented name continues the prefix above it"


def weight_map_lines(patterns: list[WeightPattern]) -> list[str]:
    """The weight map, one line per pattern; patterns that share everything up to their last
    `{…}` set are listed under that prefix, written once (on a 397B MoE that is a third of
    the text: `layers.{0..2,4..6,…,56..58}.linear_attn.` six times over):

        model.layers.{0..59}.mlp.experts.{0..511}.
          down_proj.weight ×30720 U8[4096, 512]
          up_proj.weight ×30720 U8[1024, 2048]
    """
    lines: list[str] = []
    shared = ""
    for i, p in enumerate(patterns):
        prefix = _set_prefix(p.pattern)
        runs = prefix and any(
            _set_prefix(q.pattern) == prefix for q in patterns[max(i - 1, 0) : i + 2] if q is not p
        )
        if not runs:
            shared = ""
            lines.append(f"  {pattern_line(p)}")
            continue
        if prefix != shared:
            shared = prefix
            lines.append(f"  {prefix}")
        lines.append(f"    {pattern_line(p)[len(prefix) :]}")
    return lines


def _set_prefix(pattern: str) -> str:
    """The pattern up to the dot after its last `{…}` set; "" when it has none."""
    end = pattern.rfind("}.")
    return pattern[: end + 2] if end >= 0 else ""


def pattern_line(p: WeightPattern) -> str:
    """One weight-map pattern as the summary lists it: `layers.{0..60}.w ×61 BF16[64, 32]`."""
    count = f" ×{p.count}" if p.count > 1 else ""
    return f"{p.pattern}{count} {p.dtype}{p.shape}"


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


def _hist(h: dict[str, int]) -> str:
    return ", ".join(f"{k}×{v}" for k, v in h.items()) or "none"


def _kv(d: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in d.items()) or "no MTP keys"


def _human(n: int) -> str:
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f}{unit}"
    return str(n)
