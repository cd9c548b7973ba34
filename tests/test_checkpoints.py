"""checkpoint_summary and safetensors_header on real checkpoints, tiny and sparse-big, locally."""

from __future__ import annotations

import json
import math
import re
import struct
from pathlib import Path
from typing import Any

import pytest
from safetensors import safe_open

from sleuth.agent.calls import execute
from sleuth.agent.evidence.lines import with_gutter
from sleuth.config import HostConfig, Limits
from sleuth.hosts.host import LocalHost
from sleuth.hosts.policy import SandboxedHost
from sleuth.hosts.program.checkpoint_probe import _is_aux, group_names
from sleuth.tools.checkpoints.models import CheckpointSummary
from sleuth.tools.checkpoints.render import pattern_line
from sleuth.tools.context import ToolContext
from tests import checkpoint_fixtures as fx


def local_ctx(root: Path) -> ToolContext:
    host = SandboxedHost("local", LocalHost(), HostConfig(roots=[str(root)]), Limits())
    return ToolContext(hosts={"local": host})


def summary(
    root: Path, folder: Path, host: str = "local", ctx: ToolContext | None = None
) -> dict[str, Any]:
    result = execute(
        ctx or local_ctx(root), "checkpoint_summary", {"host": host, "model_dir": str(folder)}
    )
    assert result.ok, result.error
    data: dict[str, Any] = result.data
    data["_text"] = result.output
    return data


def listed_patterns(text: str) -> set[str]:
    """Every weight-map line of a summary as `pattern ×N DTYPE[shape]`, an indented name put
    back behind the prefix above it."""
    listed, prefix = set(), ""
    for line in text.split("weight map (", 1)[1].splitlines()[1:]:
        if line.startswith("    "):
            listed.add(prefix + line.strip())
        elif line.strip().endswith("."):
            prefix = line.strip()
        else:
            listed.add(line.strip())
    return listed


def safe_open_specs(folder: Path) -> dict[str, tuple[str, list[int]]]:
    """Every tensor's (dtype, shape) as the safetensors library itself reads them."""
    out = {}
    for path in sorted(folder.glob("*.safetensors")):
        with safe_open(str(path), framework="np") as f:
            for key in f.keys():  # noqa: SIM118 - safe_open has no __iter__
                sl = f.get_slice(key)
                out[key] = (sl.get_dtype(), list(sl.get_shape()))
    return out


def expected_params(specs: dict[str, tuple[str, list[int]]]) -> tuple[int, int]:
    """Logical params (U8 = two FP4 values) and scale elements, counted independently."""
    weights = [s for n, s in specs.items() if not _is_aux(next(iter(group_names([n]))))]
    aux = [s for n, s in specs.items() if _is_aux(next(iter(group_names([n]))))]
    return fx.logical_params(weights), sum(math.prod(shape) for _, shape in aux)


@pytest.fixture(scope="session")
def big_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("big")
    fx.big_moe(root / "qwen397b-nvfp4")
    return root / "qwen397b-nvfp4"


# ---------------------------------------------------------------- tiny, real checkpoints


def test_qwen_style_mtp_heads_found_and_tensors_match_safe_open(tmp_path: Path) -> None:
    folder = tmp_path / "qwen"
    arrays = fx.tiny_qwen_mtp(folder)
    s = summary(tmp_path, folder)
    specs = safe_open_specs(folder)
    assert set(specs) == set(arrays)
    assert s["tensor_count"] == len(specs)
    assert s["dtypes"] == {"F16": len(specs)}
    assert s["mtp"]["conventions"] == ["qwen"] and s["mtp"]["found_layers"] == [0]
    assert s["mtp"]["tensors"] == sum(1 for n in specs if n.startswith("mtp."))
    assert s["warnings"] == [] and s["errors"] == []
    assert s["params"]["logical"] == sum(math.prod(sh) for _, sh in specs.values())
    listed = listed_patterns(s["_text"])
    assert "model.layers.{0..1}.mlp.experts.{0..3}.down_proj.weight ×8 F16[16, 8]" in listed
    assert s["config"]["mtp_keys"] == {
        "mtp_num_hidden_layers": 1,
        "mtp_use_dedicated_embeddings": False,
    }
    assert s["via"] == "local-python"


def test_the_weight_map_reads_back_as_the_model_with_each_names_parts(tmp_path: Path) -> None:
    folder = tmp_path / "ds"
    tensors = fx.tiny_deepseek_mtp(folder)
    s = CheckpointSummary.model_validate(summary(tmp_path, folder))
    texts = {tuple(re.split(r"\d+", name)) for name in tensors}
    assert {tuple(p.parts) for p in s.weight_map} == texts
    for p in s.weight_map:  # the rendered pattern is the parts with the numbers between them
        assert re.fullmatch(r"(?:\d+|\{[\d.,]+\})".join(map(re.escape, p.parts)), p.pattern)
    assert sum(p.count for p in s.weight_map) == len(tensors)


def test_deepseek_style_mtp_layer_past_num_hidden_layers(tmp_path: Path) -> None:
    folder = tmp_path / "ds"
    tensors = fx.tiny_deepseek_mtp(folder)
    s = summary(tmp_path, folder)
    assert safe_open_specs(folder) == {n: (d, sh) for n, (d, sh) in tensors.items()}
    mtp = s["mtp"]
    assert mtp["conventions"] == ["deepseek"] and mtp["found_layers"] == [2]
    assert mtp["tensors"] == sum(1 for n in tensors if n.startswith("model.layers.2."))
    assert mtp["deepseek_markers"] == ["eh_proj", "enorm", "hnorm", "shared_head"]
    assert s["quantization"]["algorithm"] == "FP8 block-wise [128, 128]"
    assert s["consistency"]["names_match"] and s["shards"]["count"] > 1
    assert s["warnings"] == []


def test_nvfp4_single_file_counts_packed_params_and_scales(tmp_path: Path) -> None:
    folder = tmp_path / "nvfp4"
    tensors = fx.tiny_nvfp4(folder)
    specs = safe_open_specs(folder)
    assert specs == {n: (d, sh) for n, (d, sh) in tensors.items()}
    s = summary(tmp_path, folder)
    logical, scales = expected_params(specs)
    assert s["params"]["logical"] == logical
    assert s["params"]["quant_aux_elements"] == scales
    q = s["quantization"]
    assert (q["algorithm"], q["group_size"], q["bits"]) == ("NVFP4", 16, 4)
    assert s["consistency"]["index"] is False
    assert s["dtypes"]["U8"] == sum(1 for d, _ in specs.values() if d == "U8")
    listed = listed_patterns(s["_text"])
    assert "model.layers.{0..1}.mlp.experts.{0..1}.down_proj.weight ×4 U8[64, 16]" in listed


def test_safetensors_header_reports_exactly_what_safe_open_sees(tmp_path: Path) -> None:
    folder = tmp_path / "nvfp4"
    tensors = fx.tiny_nvfp4(folder)
    path = folder / "model.safetensors"
    result = execute(local_ctx(tmp_path), "safetensors_header", {"path": str(path)})
    assert result.ok, result.error
    data = result.data
    specs = safe_open_specs(folder)
    assert data["tensor_count"] == len(specs) == len(tensors)
    hist: dict[str, int] = {}
    for dtype, _ in specs.values():
        hist[dtype] = hist.get(dtype, 0) + 1
    assert data["dtypes"] == hist
    assert data["metadata"] == {"format": "pt"}
    n = struct.unpack("<Q", path.read_bytes()[:8])[0]
    assert data["header_bytes"] == n and data["bytes_read"] == 8 + n
    assert data["declared_data_bytes"] == data["data_section_bytes"] == path.stat().st_size - 8 - n
    assert data["logical_params"] == expected_params(specs)[0]


# ---------------------------------------------------------------- the trap


def test_mtp_declared_but_stripped_gives_warning(tmp_path: Path) -> None:
    folder = tmp_path / "stripped"
    fx.tiny_qwen_mtp(folder, with_mtp=False)
    s = summary(tmp_path, folder)
    assert s["mtp"]["tensors"] == 0
    assert any("declares 1 MTP layer" in w and "stripped" in w for w in s["warnings"])
    assert "WARNING: config declares 1 MTP layer(s)" in s["_text"]


def test_mtp_tensors_without_config_keys_gives_warning(tmp_path: Path) -> None:
    folder = tmp_path / "undeclared"
    fx.tiny_qwen_mtp(folder)
    config = json.loads((folder / "config.json").read_text())
    del config["mtp_num_hidden_layers"]
    fx.write_config(folder, config)
    s = summary(tmp_path, folder)
    assert any("declares no MTP layers" in w for w in s["warnings"])


def test_stripped_sparse_moe_gives_warning(tmp_path: Path) -> None:
    folder = tmp_path / "small-moe"
    fx.big_moe(folder, with_mtp=False, layers=4, experts=16, shard_bytes=1_000_000_000)
    s = summary(tmp_path, folder)
    assert s["mtp"]["tensors"] == 0 and s["config"]["mtp_layers_declared"] == 1
    assert any("no MTP tensors" in w for w in s["warnings"])


# ---------------------------------------------------------------- big sparse checkpoint


def test_big_sparse_moe_summary_is_complete_and_compact(big_checkpoint: Path) -> None:
    folder = big_checkpoint
    s = summary(folder.parent, folder)
    specs = fx.big_moe_tensors()
    assert s["tensor_count"] == len(specs) > 370_000
    assert s["shards"]["count"] >= 45 and s["consistency"]["names_match"]
    logical, scales = expected_params(specs)
    assert s["params"]["logical"] == logical and 390e9 < logical < 410e9
    assert s["params"]["quant_aux_elements"] == scales
    assert s["mtp"]["tensors"] == sum(1 for n in specs if n.startswith("mtp."))
    assert s["warnings"] == [] and s["errors"] == []
    assert len(s["_text"].encode()) < 16_000
    experts = "model.language_model.layers.{0..59}.mlp.experts.{0..511}."
    assert experts + "down_proj.weight ×30720 U8[4096, 512]" in listed_patterns(s["_text"])
    assert s["config"]["architectures"] == ["Qwen3_5MoeForConditionalGeneration"]
    assert s["config"]["num_experts"] == 512
    assert s["bytes_read_on_host"] == metadata_bytes(folder)


def test_the_big_summary_a_model_reads_is_under_8000_characters_with_every_fact(
    big_checkpoint: Path,
) -> None:
    s = summary(big_checkpoint.parent, big_checkpoint)
    text = s["_text"]
    # What a language model is shown: the output with its lines numbered.
    assert len(with_gutter(text)) < 8_000 and len(text) < 8_000
    lines = text.splitlines()
    mtp = next(line for line in lines if line.startswith("mtp: "))
    assert "declared 1 (mtp_num_hidden_layers=1" in mtp
    assert f"found {s['mtp']['tensors']} tensors in layers [0] (qwen)" in mtp
    quant = next(line for line in lines if line.startswith("quantization: "))
    assert "method=modelopt, algorithm=NVFP4, bits=4, group_size=16" in quant
    assert "ignore (4): [*.mlp.gate; *.shared_expert_gate; lm_head; mtp*]" in quant
    # Every pattern of the weight map, with its count, dtype and shape, and nothing else.
    model = CheckpointSummary.model_validate(s)
    assert listed_patterns(text) == {pattern_line(p) for p in model.weight_map}
    assert sum(p.count for p in model.weight_map) == len(fx.big_moe_tensors())


def metadata_bytes(folder: Path) -> int:
    """Configs + index + (8 + header length) per shard: all a summary may read."""
    names = ("config.json", "hf_quant_config.json", "model.safetensors.index.json")
    total = sum((folder / n).stat().st_size for n in names if (folder / n).exists())
    for shard in folder.glob("*.safetensors"):
        with open(shard, "rb") as fh:
            total += 8 + struct.unpack("<Q", fh.read(8))[0]
    return total


# ---------------------------------------------------------------- corrupt inputs


def _one_tensor_file(path: Path, header: bytes, data: int = 16) -> None:
    path.write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * data)


CORRUPT = {
    "truncated header": (
        b'{"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}',
        "cut",
        "header length",
    ),
    "length past EOF": (None, "huge", "runs past the end of the file"),
    "bad JSON": (
        b'{"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}',
        "",
        "not valid JSON",
    ),
    "overlap": (
        b'{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},'
        b'"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}',
        "",
        "overlap",
    ),
    "end before start": (
        b'{"a":{"dtype":"F32","shape":[0],"data_offsets":[10,5]}}',
        "",
        "end before start",
    ),
    "unknown dtype": (
        b'{"a":{"dtype":"F12","shape":[4],"data_offsets":[0,16]}}',
        "",
        "unknown dtype 'F12'",
    ),
    "shape vs bytes": (
        b'{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,16]}}',
        "",
        "needs 12 bytes",
    ),
}


@pytest.mark.parametrize("case", sorted(CORRUPT))
def test_corrupt_header_gives_clear_error(tmp_path: Path, case: str) -> None:
    header, how, expect = CORRUPT[case]
    path = tmp_path / "model.safetensors"
    if how == "huge":
        path.write_bytes(struct.pack("<Q", 10_000) + b"{}")
    else:
        assert header is not None
        _one_tensor_file(path, header)
        if how == "cut":
            path.write_bytes(path.read_bytes()[:20])
    result = execute(local_ctx(tmp_path), "safetensors_header", {"path": str(path)})
    assert not result.ok and expect in (result.error or ""), result.error
    assert "Traceback" not in (result.error or "")
    s = summary(tmp_path, tmp_path)
    assert any(expect in e for e in s["errors"]), s["errors"]


def test_missing_shard_is_reported_and_the_rest_summarised(tmp_path: Path) -> None:
    folder = tmp_path / "ds"
    fx.tiny_deepseek_mtp(folder)
    shards = sorted(folder.glob("model-*.safetensors"))
    shards[1].unlink()
    s = summary(tmp_path, folder)
    assert s["consistency"]["shards_missing"] == [shards[1].name]
    assert any("missing on disk" in e for e in s["errors"])
    assert s["shards"]["missing"] == 1
    assert any(p["dtype"] == "?" for p in s["weight_map"])  # its names still appear, from the index


def test_index_naming_tensors_a_shard_lacks(tmp_path: Path) -> None:
    folder = tmp_path / "ds"
    fx.tiny_deepseek_mtp(folder)
    index_path = folder / "model.safetensors.index.json"
    index = json.loads(index_path.read_text())
    first = next(iter(index["weight_map"].values()))
    index["weight_map"]["model.layers.0.ghost.weight"] = first
    index_path.write_text(json.dumps(index))
    s = summary(tmp_path, folder)
    assert not s["consistency"]["names_match"]
    assert any("lacks" in e and "model.layers.0.ghost.weight" in e for e in s["errors"])


def test_total_size_mismatch_warns(tmp_path: Path) -> None:
    folder = tmp_path / "ds"
    fx.tiny_deepseek_mtp(folder)
    index_path = folder / "model.safetensors.index.json"
    index = json.loads(index_path.read_text())
    index["metadata"]["total_size"] += 100
    index_path.write_text(json.dumps(index))
    s = summary(tmp_path, folder)
    assert any("total_size" in w and "-100 bytes" in w for w in s["warnings"])


def test_folder_without_checkpoint_is_a_clear_error(tmp_path: Path) -> None:
    result = execute(local_ctx(tmp_path), "checkpoint_summary", {"model_dir": str(tmp_path)})
    assert not result.ok and "neither model.safetensors.index.json" in (result.error or "")
