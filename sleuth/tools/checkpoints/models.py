"""What the checkpoint tools return: a shard's header report and a checkpoint's summary.

Both are the `data` of their tools' results (dumped as JSON); a reader validates the data
back into these models.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field


class WeightPattern(BaseModel):
    """Tensors sharing a name template, dtype and shape, e.g. `layers.{0..60}.w ×61`."""

    pattern: str
    """The names collapsed for reading, their numbers as ranges."""
    count: int
    dtype: str
    shape: list[int]
    parts: list[str] = []
    """The names' text around their numbers (`layers.`, `.mlp.experts.`, `.w`): what a
    reader classifies the tensors by. Summaries recorded before it existed carry none."""


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
