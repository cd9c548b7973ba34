"""Checkpoint metadata analysis: configs, safetensors index and shard headers, never tensor data.

This one module is both Sleuth's local analysis and the fixed read-only program
sent to a host (`python3 - MODEL_DIR ROOT...`), so it uses the standard library
only (orjson when the host has it) and runs on Python 3.8+. On a host it prints
one JSON document: {"ok": true, "summary": {...}} or {"ok": false, "error": "..."}.

Speed matters: a 400B MoE has ~370k tensors, a 41 MB index and ~50 MB of headers.
Per-tensor work is done with whole-column C operations (map, set, sorted, bytes
translate/split), never a regex or Python loop per name where avoidable; headers are
compacted shard by shard; the cyclic GC is paused; and as a program it forks workers.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import gc
import itertools
import json
import math
import operator
import os
import pickle
import re
import struct
import sys
from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

try:
    import orjson

    _loads: Callable[[bytes], Any] = orjson.loads
except ImportError:  # the fallback is only slower
    _loads = json.loads

MAX_HEADER = 100_000_000
"""Same cap as the safetensors library: a larger header means a corrupt or hostile file."""

DTYPE_BITS = {
    "BOOL": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6, "U8": 8, "I8": 8,
    "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8, "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8,
    "I16": 16, "U16": 16, "F16": 16, "BF16": 16, "I32": 32, "U32": 32, "F32": 32,
    "C64": 64, "F64": 64, "I64": 64, "U64": 64,
}  # fmt: skip

INDEX_NAME = "model.safetensors.index.json"
SINGLE_NAME = "model.safetensors"
SAMPLE = 5
"""How many example names a consistency problem quotes."""

_DIGITS = re.compile(r"(\d+)")
_NUL_RUN = re.compile("\0+")
_AUX_LAST = {
    "weight_scale", "weight_scale_2", "weight_scale_inv", "input_scale", "output_scale",
    "k_scale", "v_scale", "q_scale", "scales", "qzeros", "g_idx", "weight_zero_point",
    "weight_g_idx", "weight_shape", "weight_global_scale", "input_global_scale",
    "pre_quant_scale", "absmax", "quant_map", "nested_absmax", "nested_quant_map", "SCB",
}  # fmt: skip
_NON_DECODER = re.compile(r"vision|visual|audio|encoder|mtp|vit|image")
_MTP_PREFIX = re.compile(r"(^|\.)mtp(_layers)?\.")
_DEEPSEEK_MTP_PARTS = ("enorm", "hnorm", "eh_proj", "shared_head")


class ProbeError(Exception):
    """A problem that stops the whole summary (no index and no single file, refused path)."""


class HeaderError(Exception):
    """A malformed safetensors header; the message names what and where."""


# ---------------------------------------------------------------- safetensors headers


def header_length(shard: str, first8: bytes, file_size: int) -> int:
    """The header length from the first 8 bytes, checked against the file and the cap."""
    if len(first8) < 8:
        raise HeaderError(f"{shard}: file is {file_size} bytes, too short for the 8-byte length")
    n: int = struct.unpack("<Q", first8[:8])[0]
    if n > MAX_HEADER:
        raise HeaderError(f"{shard}: header length {n} exceeds the {MAX_HEADER}-byte cap")
    if 8 + n > file_size:
        raise HeaderError(
            f"{shard}: header length {n} runs past the end of the file ({file_size} bytes); "
            "the file is truncated or not safetensors"
        )
    return n


def parse_header(shard: str, raw: bytes, file_size: int) -> dict[str, Any]:
    """Parse and validate one header; returns {"tensors": {...}, "metadata": {...}, ...}."""
    if raw[:1] != b"{" and raw.lstrip()[:1] != b"{":
        raise HeaderError(f"{shard}: header does not start with '{{'; not a safetensors file")
    fast = _canonical(raw, file_size - 8 - len(raw))
    return fast if fast is not None else parse_json_header(shard, raw, file_size)


def parse_json_header(shard: str, raw: bytes, file_size: int) -> dict[str, Any]:
    """parse_header through a JSON parser and per-tensor dicts: any form, exact errors."""
    try:
        doc = _loads(raw)
    except ValueError as exc:
        raise HeaderError(f"{shard}: header is not valid JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise HeaderError(f"{shard}: header is JSON but not an object")
    metadata = doc.pop("__metadata__", None)
    if metadata is not None and not isinstance(metadata, dict):
        raise HeaderError(f"{shard}: __metadata__ must be an object of strings")
    data_len = file_size - 8 - len(raw)
    columns: list[Any] = []
    declared = check_offsets(shard, doc, data_len, columns)
    return {"tensors": doc, "metadata": metadata or {}, "declared": declared, "data": data_len,
            "columns": columns}  # fmt: skip


_NUMBER = "(?:0|[1-9][0-9]{0,17})"  # under 2**63: every JSON parser reads it as the same int
_KIND = re.compile(r'([0-9A-Z_]{1,16})","shape":\[(' + f"(?:{_NUMBER}(?:,{_NUMBER})*)?)")
_METADATA = re.compile(rb'\{"__metadata__":(\{[^{}]*\}),')
_MARKS = b"\x01\x03\x04"
_SEPARATORS = ((b'":{"dtype":"', b"\x01"), (b'],"data_offsets":[', b"\x03"), (b']},"', b"\x04"))
_NOT_MARKS = bytes(c for c in range(256) if c not in _MARKS)
_MARKS_TO_TAB = bytes.maketrans(_MARKS, b"\t\t\t")


def _canonical(raw: bytes, data_len: int) -> dict[str, Any] | None:
    """parse_header's result for a header in the form every writer emits, else None.

    `{"__metadata__":{...},"name":{"dtype":"BF16","shape":[1,2],"data_offsets":[0,4]},...}`
    padded with spaces, names printable ASCII without escapes. Each separator between the
    columns becomes a marker byte the header lacks, so the markers map back to exactly one
    text: when they come in entry order and every column holds what the form allows, the
    header *is* that form and a JSON parser reads exactly these entries. No per-tensor
    dict is built. Anything else (and any invalid tensor) returns None, and the JSON parse
    and its per-tensor walk decide and word the errors.
    """
    meta = _METADATA.match(raw)
    start = meta.end() if meta else 1
    stop = len(raw.rstrip(b" ")) - 1
    if raw[:1] != b"{" or raw[stop : stop + 1] != b"}" or raw[start : start + 1] != b'"':
        return None
    body = raw[start + 1 : stop - 2]
    if raw[stop - 2 : stop] != b"]}" or not body.isascii() or b"\\" in body or b"\t" in body:
        return None
    for separator, mark in _SEPARATORS:
        if mark in body:
            return None
        body = body.replace(separator, mark)
    marks = body.translate(None, _NOT_MARKS)
    n = (len(marks) + 1) // 3
    if n < 1 or marks != _MARKS * (n - 1) + _MARKS[:2]:
        return None
    columns = body.translate(_MARKS_TO_TAB).decode("ascii").split("\t")
    names, kinds = columns[0::3], columns[1::3]
    joined = "".join(names)
    if '"' in joined or not joined.isprintable() or len(set(names)) != n:
        return None
    if "__metadata__" in names:  # JSON would read it as the metadata, not a tensor
        return None
    dtype_of, shape_of, size_of = _kinds(set(kinds))
    if not size_of:
        return None
    ends = list(itertools.accumulate(map(size_of.__getitem__, kinds)))
    if ends[-1] > data_len:
        return None
    if list(map("%d,%d".__mod__, zip([0, *ends[:-1]], ends))) != columns[2::3]:  # noqa: B905
        return None
    try:
        metadata = _loads(meta.group(1)) if meta else {}
    except ValueError:
        return None
    return {"tensors": names, "metadata": metadata, "declared": ends[-1], "data": data_len,
            "columns": [list(map(dtype_of.__getitem__, kinds)),
                        list(map(shape_of.__getitem__, kinds))]}  # fmt: skip


def _kinds(
    kinds: set[str],
) -> tuple[dict[str, str], dict[str, tuple[int, ...]], dict[str, int]]:
    """Dtype, shape and bytes of each distinct `BF16","shape":[1,2` text; empty if one is bad."""
    dtype_of, shape_of, size_of = {}, {}, {}
    for kind in kinds:
        match = _KIND.fullmatch(kind)
        if match is None or match.group(1) not in DTYPE_BITS:
            return {}, {}, {}
        dims = tuple(map(int, match.group(2).split(","))) if match.group(2) else ()
        bits = math.prod(dims) * DTYPE_BITS[match.group(1)]
        if bits % 8:
            return {}, {}, {}
        dtype_of[kind], shape_of[kind], size_of[kind] = match.group(1), dims, bits // 8
    return dtype_of, shape_of, size_of


def check_offsets(
    shard: str, tensors: dict[str, Any], data_len: int, columns: list[Any] | None = None
) -> int:
    """Every tensor well-formed, sized for its dtype, and all together tiling [0, end).

    `columns` receives the dtype and shape columns when the bulk check got them, for reuse.
    """
    end = _tiled_end(tensors, [] if columns is None else columns)
    if end is None:  # something is off: the per-tensor walk says what and where
        end = _check_each(shard, tensors)
    if end > data_len:
        last = next(n for n, i in tensors.items() if i["data_offsets"][1] == end)
        raise HeaderError(
            f"{shard}: tensor {last!r} ends at data offset {end} but the data section holds "
            f"{data_len} bytes; the file is truncated (incomplete download?)"
        )
    return end


_DTYPE = operator.itemgetter("dtype")
_SHAPE = operator.itemgetter("shape")
_OFFSETS = operator.itemgetter("data_offsets")
_FIRST = operator.itemgetter(0)
_SECOND = operator.itemgetter(1)


def _tiled_end(tensors: dict[str, Any], columns: list[Any]) -> int | None:
    """The end of the data when every entry is well-formed and they tile [0, end), else None.

    Whole-column operations (map, set, sorted, any) run in C: a shard holds ~10^4 tensors
    and a checkpoint ~10^6, too many for a Python-level loop per tensor. Sizes stay lazy
    (compared pairwise, never stored); contiguity is one list comparison of the starts
    against the ends, in offset order, which is header order for every known writer.
    """
    if not tensors:
        return 0
    flat = itertools.chain.from_iterable
    try:
        infos = list(tensors.values())
        shapes = list(map(_SHAPE, infos))
        offsets = list(map(_OFFSETS, infos))
        dtypes = list(map(_DTYPE, infos))
        if set(map(type, shapes)) != {list} or set(map(type, offsets)) != {list}:
            return None
        if set(map(len, offsets)) != {2}:
            return None
        starts, ends = list(map(_FIRST, offsets)), list(map(_SECOND, offsets))
        if set(map(type, starts)) != {int} or set(map(type, ends)) != {int}:
            return None
        dims = list(flat(shapes))
        if set(map(type, dims)) - {int} or min(dims, default=0) < 0:
            return None
        need = map(operator.mul, map(math.prod, shapes), map(DTYPE_BITS.__getitem__, dtypes))
        spans = map(operator.sub, ends, starts)
        if any(map(operator.ne, need, map(operator.mul, spans, itertools.repeat(8)))):
            return None
    except (KeyError, TypeError):
        return None
    if starts != sorted(starts):  # writers emit offset order: sorting is then one C pass
        order = sorted(range(len(starts)), key=starts.__getitem__)
        starts, ends = list(map(starts.__getitem__, order)), list(map(ends.__getitem__, order))
    # Equal starts (empty tensors) in the other order fail here; the walk then decides.
    if starts[0] != 0 or starts[1:] != ends[:-1]:
        return None
    end: int = ends[-1]
    columns[:] = [dtypes, shapes]
    return end


def _check_each(shard: str, tensors: dict[str, Any]) -> int:
    """The slow walk: raises HeaderError naming the first bad tensor, gap or overlap."""
    spans: list[tuple[int, int, str]] = []
    bits_of, prod = DTYPE_BITS.__getitem__, math.prod
    for name, info in tensors.items():
        try:
            shape = info["shape"]
            begin, stop = info["data_offsets"]
            ok = (
                type(begin) is int
                and type(stop) is int
                and 0 <= begin <= stop
                and (not shape or min(shape) >= 0)
                and prod(shape) * bits_of(info["dtype"]) == (stop - begin) * 8
            )
        except (KeyError, TypeError, ValueError):
            ok = False
        if not ok:
            _span(shard, name, info)
        spans.append((begin, stop, name))
    spans.sort()
    end, before = 0, ""
    for begin, stop, name in spans:
        if begin != end:
            _explain_gap(shard, tensors, name, before, end)
        end, before = stop, name
    return end


def _explain_gap(shard: str, tensors: dict[str, Any], here: str, before: str, end: int) -> None:
    """`here` starts off `end`, where the tensor `before` it in offset order stopped."""
    begin = tensors[here]["data_offsets"][0]
    if begin < end:
        raise HeaderError(
            f"{shard}: tensor {here!r} data_offsets {tensors[here]['data_offsets']} overlap "
            f"tensor {before!r} data_offsets {tensors[before]['data_offsets']}"
        )
    raise HeaderError(
        f"{shard}: gap of {begin - end} bytes before tensor {here!r} at data offset {begin}; "
        "data_offsets must be contiguous"
    )


def _span(shard: str, name: str, info: Any) -> tuple[int, int, str]:
    where = f"{shard}: tensor {name!r}"
    if not isinstance(info, dict):
        raise HeaderError(f"{where}: entry is not an object")
    dtype, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
    bits = DTYPE_BITS.get(dtype) if isinstance(dtype, str) else None
    if bits is None:
        raise HeaderError(f"{where}: unknown dtype {dtype!r}; known: {', '.join(DTYPE_BITS)}")
    if not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
        raise HeaderError(f"{where}: shape {shape!r} is not a list of non-negative integers")
    if (
        not isinstance(offsets, list)
        or len(offsets) != 2
        or not all(type(o) is int and o >= 0 for o in offsets)
    ):
        raise HeaderError(f"{where}: data_offsets {offsets!r} is not a pair of offsets")
    begin, stop = offsets
    if stop < begin:
        raise HeaderError(f"{where}: data_offsets [{begin}, {stop}] end before start")
    need_bits = math.prod(shape) * bits
    if need_bits != (stop - begin) * 8:
        raise HeaderError(
            f"{where}: shape {shape} of {dtype} needs {need_bits / 8:g} bytes but data_offsets "
            f"[{begin}, {stop}] span {stop - begin}"
        )
    return begin, stop, name


# ---------------------------------------------------------------- name patterns


def _ranges(values: Iterable[int]) -> str:
    """{0..511}, {0..2,5,7..9}, or the bare number when there is one."""
    ordered = sorted(set(values))
    if len(ordered) == 1:
        return str(ordered[0])
    parts: list[str] = []
    start = prev = ordered[0]
    for v in ordered[1:]:
        if v != prev + 1:
            parts.append(str(start) if start == prev else f"{start}..{prev}")
            start = v
        prev = v
    parts.append(str(start) if start == prev else f"{start}..{prev}")
    return "{" + ",".join(parts) + "}"


def _rectangles(rows: list[tuple[int, ...]]) -> list[list[list[int]]]:
    """Cover a set of index tuples with products of per-slot value sets.

    When the slots are independent (layers × experts) one product covers all;
    otherwise split on the first slot and merge first-slot values that share
    the same remainder, so dense layers 0..2 and MoE layers 3..60 stay apart.
    """
    if not rows or not rows[0]:
        return [[]]
    columns = [set(col) for col in zip(*rows)]  # noqa: B905
    # Names are unique within a checkpoint, so rows are distinct.
    if math.prod(len(c) for c in columns) == len(rows):
        return [[sorted(c) for c in columns]]
    by_first: dict[int, list[tuple[int, ...]]] = {}
    for row in rows:
        by_first.setdefault(row[0], []).append(row[1:])
    merged: dict[str, tuple[list[int], list[list[list[int]]]]] = {}
    for first, rest in by_first.items():
        sub = _rectangles(rest)
        key = repr(sub)
        merged.setdefault(key, ([], sub))[0].append(first)
    out: list[list[list[int]]] = []
    for firsts, sub in merged.values():
        for rect in sub:
            out.append([sorted(firsts), *rect])
    return out


def group_names(names: Iterable[str]) -> dict[tuple[str, ...], list[tuple[int, ...]]]:
    """Group names by their text with digit runs removed: the template and its indices."""
    groups: dict[tuple[str, ...], list[tuple[int, ...]]] = {}
    split = _DIGITS.split
    for name in names:
        parts = split(name)
        groups.setdefault(tuple(parts[0::2]), []).append(tuple(map(int, parts[1::2])))
    return groups


def render(texts: Sequence[str], rect: list[list[int]]) -> str:
    out = [texts[0]]
    for values, text in zip(rect, texts[1:]):  # noqa: B905
        out.append(_ranges(values))
        out.append(text)
    return "".join(out)


def collapse_names(names: Iterable[str]) -> list[dict[str, Any]]:
    """[{"pattern": "layers.{0..60}.w", "count": 61}, ...] in name order."""
    out = []
    for texts, rows in group_names(names).items():
        for rect in _rectangles(rows):
            out.append({"pattern": render(texts, rect), "count": math.prod(len(v) for v in rect)})
    out.sort(key=lambda p: _natural(str(p["pattern"])))
    return out


def _natural(text: str) -> list[Any]:
    return [int(p) if p.isdigit() else p for p in _DIGITS.split(text.replace("{", ""))]


# ---------------------------------------------------------------- config facts

_CONFIG_FIELDS = {
    "num_hidden_layers": ("num_hidden_layers", "n_layers", "num_layers"),
    "hidden_size": ("hidden_size", "d_model", "n_embd"),
    "intermediate_size": ("intermediate_size",),
    "moe_intermediate_size": ("moe_intermediate_size",),
    "num_attention_heads": ("num_attention_heads",),
    "num_key_value_heads": ("num_key_value_heads",),
    "head_dim": ("head_dim",),
    "vocab_size": ("vocab_size",),
    "max_position_embeddings": ("max_position_embeddings",),
    "num_experts": ("num_experts", "n_routed_experts", "num_local_experts", "moe_num_experts"),
    "num_experts_per_tok": ("num_experts_per_tok", "moe_topk", "num_experts_per_token"),
    "shared_experts": ("n_shared_experts", "num_shared_experts"),
    "shared_expert_intermediate_size": ("shared_expert_intermediate_size",),
    "first_k_dense_replace": ("first_k_dense_replace",),
    "full_attention_interval": ("full_attention_interval",),
    "dtype": ("torch_dtype", "dtype"),
    "tie_word_embeddings": ("tie_word_embeddings",),
}


def config_facts(config: dict[str, Any]) -> dict[str, Any]:
    """The architecture facts, looked up in text_config first (multimodal wrappers)."""
    text = config.get("text_config")
    text = text if isinstance(text, dict) else {}
    layers = [text, config]
    facts: dict[str, Any] = {
        "architectures": config.get("architectures") or text.get("architectures"),
        "model_type": config.get("model_type"),
        "text_model_type": text.get("model_type"),
        "nested_text_config": bool(text),
    }
    for field, keys in _CONFIG_FIELDS.items():
        facts[field] = _first(layers, keys)
    types = _first(layers, ("layer_types",))
    facts["layer_types"] = summarize_layer_types(types) if isinstance(types, list) else None
    mtp: dict[str, Any] = {}
    for src in (config, text):
        for key, value in src.items():
            if ("nextn" in key or "mtp" in key) and not isinstance(value, (dict, list)):
                mtp.setdefault(key, value)
    facts["mtp_keys"] = mtp
    facts["mtp_layers_declared"] = declared_mtp_layers(mtp)
    return facts


def _first(sources: list[dict[str, Any]], keys: Sequence[str]) -> Any:
    for src in sources:
        for key in keys:
            if src.get(key) is not None:
                return src[key]
    return None


def declared_mtp_layers(mtp: dict[str, Any]) -> int | None:
    for key in ("num_nextn_predict_layers", "mtp_num_hidden_layers", "num_mtp_layers"):
        value = mtp.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def summarize_layer_types(types: list[Any]) -> dict[str, Any]:
    counts: dict[str, int] = {}
    for t in types:
        counts[str(t)] = counts.get(str(t), 0) + 1
    n = len(types)
    period = next(p for p in range(1, n + 1) if all(types[i] == types[i % p] for i in range(n)))
    return {"count": len(types), "counts": counts, "period": [str(t) for t in types[:period]]}


# ---------------------------------------------------------------- quantization


def quant_facts(
    qc: dict[str, Any] | None, hf_quant: dict[str, Any] | None
) -> dict[str, Any] | None:
    """Method, algorithm, bits, group size and excluded modules from either source."""
    if not qc and not hf_quant:
        return None
    facts: dict[str, Any] = {"sources": []}
    if hf_quant:
        facts["sources"].append("hf_quant_config.json")
        q = hf_quant.get("quantization", hf_quant)
        producer = hf_quant.get("producer") or {}
        facts.update(
            method=str(producer.get("name") or "modelopt"),
            algorithm=q.get("quant_algo"),
            group_size=q.get("group_size"),
            kv_cache=q.get("kv_cache_quant_algo"),
            ignore=q.get("exclude_modules") or q.get("ignore") or [],
        )
    if qc:
        facts["sources"].append("config.json quantization_config")
        _from_config(qc, facts)
    algo = str(facts.get("algorithm") or "").upper()
    if facts.get("bits") is None:
        facts["bits"] = (
            4
            if "FP4" in algo or "INT4" in algo or "W4" in algo
            else (8 if "FP8" in algo or "INT8" in algo else None)
        )
    ignore = facts.get("ignore") or []
    facts["ignore_count"] = len(ignore)
    facts["ignore"] = collapse_names(str(m) for m in ignore)
    return facts


def _from_config(qc: dict[str, Any], facts: dict[str, Any]) -> None:
    method = str(qc.get("quant_method") or facts.get("method") or "unknown")
    facts["method"] = method
    if qc.get("quant_algo"):
        facts["algorithm"] = qc["quant_algo"]
    for key in ("group_size", "bits", "format", "weight_block_size", "kv_cache_quant_algo"):
        if qc.get(key) is not None:
            facts["kv_cache" if key == "kv_cache_quant_algo" else key] = qc[key]
    ignore = (
        qc.get("ignore")
        or qc.get("exclude_modules")
        or qc.get("modules_to_not_convert")
        or qc.get("llm_int8_skip_modules")
    )
    if ignore:
        facts["ignore"] = ignore
    if method == "fp8":
        facts.setdefault("bits", 8)
        block = qc.get("weight_block_size")
        facts.setdefault("algorithm", f"FP8 block-wise {block}" if block else "FP8 per-tensor")
    elif method == "compressed-tensors":
        _compressed_tensors(qc, facts)
    elif method in ("awq", "gptq"):
        bits = qc.get("bits") or qc.get("w_bit")
        facts["bits"] = bits
        facts["group_size"] = qc.get("group_size") or qc.get("q_group_size")
        facts.setdefault("algorithm", f"{method.upper()} int{bits}")
    elif method == "bitsandbytes":
        four = bool(qc.get("load_in_4bit"))
        facts["bits"] = 4 if four else 8
        kind = qc.get("bnb_4bit_quant_type", "fp4") if four else "int8"
        facts.setdefault("algorithm", f"bitsandbytes {kind}")
    elif method == "mxfp4":
        facts.update(bits=4, group_size=32)
        facts.setdefault("algorithm", "MXFP4")


def _compressed_tensors(qc: dict[str, Any], facts: dict[str, Any]) -> None:
    groups = qc.get("config_groups") or {}
    for group in groups.values():
        weights = (group or {}).get("weights") or {}
        acts = (group or {}).get("input_activations") or {}
        bits = weights.get("num_bits")
        facts["bits"] = bits
        facts["group_size"] = weights.get("group_size")
        facts["strategy"] = weights.get("strategy")
        fmt = str(qc.get("format") or "")
        act_bits = acts.get("num_bits", 16)
        kind = "NVFP4" if "nvfp4" in fmt else f"W{bits}A{act_bits} {weights.get('type', '')}"
        facts.setdefault("algorithm", kind.strip())
        break


# ---------------------------------------------------------------- the summary


def _is_aux(texts: tuple[str, ...]) -> bool:
    last = texts[-1].rsplit(".", 1)[-1]
    return last in _AUX_LAST or last.endswith("_scales") or "quant_state" in texts[-1]


def _values_per_element(dtype: str, aux: bool, quant: dict[str, Any] | None) -> int:
    """Logical parameters per stored element: packed 4-bit in U8, int4/int8 in I32."""
    if aux or not quant:
        return 1
    bits = quant.get("bits")
    if dtype == "U8" and bits == 4:
        return 2
    if dtype in ("I32", "U32") and isinstance(bits, int) and bits in (2, 3, 4, 8):
        return 32 // bits
    return 1


class _Tally:
    """Running totals over tensor groups: parameters, scales, dtypes, MTP."""

    def __init__(self, quant: dict[str, Any] | None, n_layers: int | None) -> None:
        self.quant, self.n_layers = quant, n_layers
        self.params = self.aux_elems = self.aux_bytes = self.tensors = 0
        self.dtypes: dict[str, int] = {}
        self.mtp: dict[str, Any] = {
            "tensors": 0, "params": 0, "bytes": 0, "dtypes": {}, "conventions": [],
            "layers": set(), "markers": set(),
        }  # fmt: skip

    def add(
        self, texts: tuple[str, ...], dtype: str, shape: tuple[int, ...], group: _Group
    ) -> None:
        numel = math.prod(shape)
        count = group.count
        aux = _is_aux(texts)
        self.tensors += count
        self.dtypes[dtype] = self.dtypes.get(dtype, 0) + count
        nbytes = numel * DTYPE_BITS.get(dtype, 0) // 8
        if aux:
            self.aux_elems += numel * count
            self.aux_bytes += nbytes * count
        else:
            self.params += numel * count * _values_per_element(dtype, aux, self.quant)
        mtp_count, layers, convention = self._mtp_rows(texts, group)
        if mtp_count:
            self._add_mtp(texts, dtype, mtp_count, layers, convention, numel, nbytes, aux)

    def _mtp_rows(self, texts: tuple[str, ...], group: _Group) -> tuple[int, set[int], str]:
        """How many of the group's tensors are MTP, their layer numbers, and the convention."""
        if _MTP_PREFIX.search(texts[0]):
            by_layer = len(texts) > 1 and texts[0].endswith("layers.")
            return group.count, set(group.firsts()) if by_layer else {0}, "qwen"
        if (
            self.n_layers is not None
            and len(texts) > 1
            and texts[0].endswith("layers.")
            and not _NON_DECODER.search(texts[0])
        ):
            extra = {v: c for v, c in group.firsts().items() if v >= self.n_layers}
            return sum(extra.values()), set(extra), "deepseek"
        return 0, set(), ""

    def _add_mtp(
        self,
        texts: tuple[str, ...],
        dtype: str,
        count: int,
        layers: set[int],
        convention: str,
        numel: int,
        nbytes: int,
        aux: bool,
    ) -> None:
        m = self.mtp
        m["tensors"] += count
        m["bytes"] += nbytes * count
        if not aux:
            m["params"] += numel * count * _values_per_element(dtype, aux, self.quant)
        m["dtypes"][dtype] = m["dtypes"].get(dtype, 0) + count
        if convention not in m["conventions"]:
            m["conventions"].append(convention)
        m["layers"].update(layers)
        joined = "#".join(texts)
        m["markers"].update(p for p in _DEEPSEEK_MTP_PARTS if p in joined)


def _space(sample: Any) -> Any:
    return b" " if isinstance(sample, bytes) else " "


class _Group:
    """Tensors sharing one template, dtype and shape, held as the numbers in their names.

    Each member is the text of its name's digit runs separated by spaces; the numbers
    become ints per distinct value (per column), not per tensor.
    """

    def __init__(self, members: list[Any], slots: int, unique: bool = False) -> None:
        """`unique`: the names are known to be distinct, which spares hashing every member."""
        self.count, self.slots = len(members), slots
        # Within one template a name is its numbers: distinct members <=> distinct names.
        self.distinct = unique or len(set(members)) == self.count
        if slots and len(set(map(type, members))) > 1:  # bytes from ASCII shards, str from others
            members = [m.decode("ascii") if isinstance(m, bytes) else m for m in members]
        self.numbers: list[Any] = (_space(members[0]).join(members) if slots else "").split()

    def column(self, slot: int) -> list[Any]:
        return self.numbers[slot :: self.slots]

    def firsts(self) -> dict[int, int]:
        """Tensors per value of the first number (the layer, in `layers.N.` names)."""
        out: dict[int, int] = {}
        for text, n in Counter(self.column(0)).items():
            out[int(text)] = out.get(int(text), 0) + n
        return out

    def rectangles(self) -> list[list[list[int]]]:
        if self.slots and self.distinct:
            # Distinct names whose per-slot values multiply out to the count cover the whole
            # product (when int() keeps values apart: "01" and "1" would collide).
            texts = [set(self.column(j)) for j in range(self.slots)]
            values = [set(map(int, t)) for t in texts]
            if all(map(operator.eq, map(len, texts), map(len, values))) and (
                math.prod(map(len, values)) == self.count
            ):
                return [[sorted(v) for v in values]]
        return _rectangles(self.rows())

    def rows(self) -> list[tuple[int, ...]]:
        if not self.slots:
            return [()] * self.count
        numbers = iter(list(map(int, self.numbers)))
        return list(zip(*[numbers] * self.slots))  # noqa: B905


def analyse(inputs: dict[str, Any]) -> dict[str, Any]:
    """The compact summary from what `collect` gathered. Pure: no I/O."""
    config = inputs.get("config") or {}
    facts = config_facts(config) if config else None
    qc = config.get("quantization_config") or (config.get("text_config") or {}).get(
        "quantization_config"
    )
    quant = quant_facts(qc if isinstance(qc, dict) else None, inputs.get("hf_quant_config"))
    errors: list[str] = list(inputs.get("errors", []))
    warnings: list[str] = []
    n_layers = facts.get("num_hidden_layers") if facts else None
    tally = _Tally(quant, n_layers if isinstance(n_layers, int) else None)
    shards, patterns = _weights(inputs, tally, errors)
    quant = quant or tally.quant
    consistency = _consistency(inputs, errors, warnings)
    mtp = _mtp_summary(tally, facts, warnings)
    return {
        "model_dir": inputs["model_dir"],
        "files": inputs.get("files", {}),
        "config": facts,
        "quantization": quant,
        "tensor_count": tally.tensors,
        "dtypes": dict(sorted(tally.dtypes.items(), key=lambda kv: -kv[1])),
        "params": {
            "logical": tally.params,
            "quant_aux_elements": tally.aux_elems,
            "quant_aux_bytes": tally.aux_bytes,
            "mtp": tally.mtp["params"],
        },
        "shards": shards,
        "weight_map": patterns,
        "mtp": mtp,
        "consistency": consistency,
        "warnings": warnings,
        "errors": errors,
        "bytes_read": inputs.get("bytes_read", 0),
    }


def _weights(
    inputs: dict[str, Any], tally: _Tally, errors: list[str]
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Merge every shard's tensor groups, tally them, collapse them into patterns."""
    headers: dict[str, Any] = inputs.get("headers", {})
    shard_info = {"count": len(headers), "file_bytes": 0, "declared_bytes": 0, "missing": 0,
                  "invalid": 0}  # fmt: skip
    merged: dict[Any, list[Any]] = {}
    for shard, h in headers.items():
        if h.get("error"):
            errors.append(h["error"])
            shard_info["invalid" if h.get("size") is not None else "missing"] += 1
            lost = index_names(inputs, shard)
            groups = shard_groups(lost, ["?"] * len(lost), [()] * len(lost))
        else:
            shard_info["file_bytes"] += h["size"]
            shard_info["declared_bytes"] += h["declared"]
            groups = h["groups"]
        for key, numbers in groups.items():
            merged.setdefault(key, []).extend(numbers)
    unique = _names_unique(inputs, headers)
    tensor_groups = {
        key: _Group(numbers, len(key[0]) - 1, unique) for key, numbers in merged.items()
    }
    if tally.quant is None and _looks_nvfp4(tensor_groups):
        tally.quant = {"method": "inferred", "bits": 4, "sources": ["tensor dtypes"],
                       "algorithm": "NVFP4 (U8 weights with F8_E4M3 weight_scale)"}  # fmt: skip
    patterns = []
    for (texts, dtype, shape), group in tensor_groups.items():
        tally.add(texts, dtype, shape, group)
        for rect in group.rectangles():
            patterns.append({
                "pattern": render(texts, rect),
                "count": math.prod(len(v) for v in rect),
                "dtype": dtype,
                "shape": list(shape),
                "parts": list(texts),
            })  # fmt: skip
    patterns.sort(key=lambda p: (_natural(str(p["pattern"])), str(p["dtype"])))
    return shard_info, patterns


def _names_unique(inputs: dict[str, Any], headers: dict[str, Any]) -> bool:
    """No name twice: one shard's names are distinct (JSON object keys, or checked), and
    the index gives each name one shard, so shards whose names are exactly the index's
    (or, failing, come from it) share none."""
    if len(headers) <= 1:
        return True
    if not inputs.get("index"):
        return False
    return all(h.get("error") or h.get("names_match") for h in headers.values())


_DIGIT_BYTES = bytes(range(48, 58))
_TO_NUL = bytes.maketrans(_DIGIT_BYTES, b"\0" * 10)
_KEEP_DIGITS = bytes(c if c in _DIGIT_BYTES or c == 10 else 32 for c in range(256))


def shard_groups(
    names: list[str], dtypes: list[str], shapes: list[tuple[int, ...]]
) -> dict[Any, list[Any]]:
    """{(template texts, dtype, shape): numbers of each member}, in order of first appearance.

    A member's numbers are its name's digit runs as one space-separated text. Byte-wise
    translate and split run over all names joined, not a regex per name (a regex pass
    alone costs ~1 s for 10^6 names). Each digit becomes a NUL, so names first group by
    template *and* digit count ("layers.7" apart from "layers.12"); those groups then merge.
    """
    joined = "\n".join(names)
    fast = joined.isascii() and "\0" not in joined and joined.count("\n") == len(names) - 1
    if fast:
        raw = joined.encode("ascii")
        templates: list[Any] = raw.translate(_TO_NUL).decode("ascii").split("\n")
        numbers: list[Any] = raw.translate(_KEEP_DIGITS).split(b"\n")
    else:  # unicode digits, NUL or newline in names: the same split, name by name
        parts = list(map(_DIGITS.split, names))
        templates = [tuple(p[0::2]) for p in parts]
        numbers = [" ".join(p[1::2]) for p in parts]
    # defaultdict lookups and list.append mapped over the columns: no Python-level loop.
    members: defaultdict[tuple[Any, str, tuple[int, ...]], list[Any]] = defaultdict(list)
    keys = map(members.__getitem__, zip(templates, dtypes, shapes))  # noqa: B905
    collections.deque(map(list.append, keys, numbers), maxlen=0)
    out: dict[Any, list[Any]] = {}
    for (template, dtype, shape), group in members.items():
        texts = _texts(template) if fast else template
        out.setdefault((texts, dtype, shape), []).extend(group)
    return out


@functools.lru_cache(maxsize=4096)
def _texts(template: str) -> tuple[str, ...]:
    return tuple(_NUL_RUN.sub("\0", template).split("\0"))


def compact(
    parsed: dict[str, Any], shard: str, inputs: dict[str, Any], listed: Counter[str] | None
) -> dict[str, Any]:
    """Replace a parsed header's tensors by their groups, checking names against the index.

    Done shard by shard as headers arrive, so only one shard's per-tensor dicts are alive
    at a time: the whole checkpoint's would take ~0.5 GB.
    """
    tensors = parsed.pop("tensors")
    columns = parsed.pop("columns", None) or [
        list(map(_DTYPE, tensors.values())),
        list(map(_SHAPE, tensors.values())),
    ]
    parsed["count"] = len(tensors)
    parsed["groups"] = shard_groups(list(tensors), columns[0], list(map(tuple, columns[1])))
    if listed is not None:
        check_names(parsed, shard, inputs, listed, tensors)
    return parsed


def check_names(
    parsed: dict[str, Any],
    shard: str,
    inputs: dict[str, Any],
    listed: Counter[str],
    names: Collection[str],
) -> None:
    """Record whether the shard's tensor names are exactly those the index gives it."""
    weight_map = inputs["index"]["weight_map"]
    parsed["names_match"] = _shard_matches(weight_map, shard, names, listed[shard])
    parsed["name_errors"] = []
    if not parsed["names_match"]:
        lookup = names if isinstance(names, (dict, set)) else set(names)
        _name_mismatch(inputs, shard, lookup, parsed["name_errors"])


def index_names(inputs: dict[str, Any], shard: str) -> list[str]:
    """Names the index assigns to `shard` (the slow path, only for problem shards)."""
    index = inputs.get("index")
    return [n for n, s in index["weight_map"].items() if s == shard] if index else []


def _looks_nvfp4(groups: dict[tuple[tuple[str, ...], str, tuple[int, ...]], Any]) -> bool:
    kinds = {(texts[-1].rsplit(".", 1)[-1], dtype) for texts, dtype, _ in groups}
    return ("weight", "U8") in kinds and ("weight_scale", "F8_E4M3") in kinds


def _consistency(inputs: dict[str, Any], errors: list[str], warnings: list[str]) -> dict[str, Any]:
    headers: dict[str, Any] = inputs.get("headers", {})
    index = inputs.get("index")
    ok = {s: h for s, h in headers.items() if not h.get("error")}
    out: dict[str, Any] = {
        "index": index is not None,
        "shards_missing": [s for s, h in headers.items() if h.get("size") is None],
        "names_match": True,
        "total_size_declared": None,
        "total_size_headers": sum(h["declared"] for h in ok.values()),
    }
    for shard, h in ok.items():
        if h["data"] > h["declared"]:
            warnings.append(
                f"{shard}: {h['data'] - h['declared']} bytes after the last tensor are not "
                "described by the header"
            )
    if index is None:
        return out
    for h in ok.values():
        if not h.get("names_match", True):
            out["names_match"] = False
            errors.extend(h["name_errors"])
    total = index["metadata"].get("total_size")
    out["total_size_declared"] = total
    if isinstance(total, int) and len(ok) == len(headers) and total != out["total_size_headers"]:
        warnings.append(
            f"index total_size {total} differs from the sum of shard headers "
            f"{out['total_size_headers']} (by {out['total_size_headers'] - total:+d} bytes)"
        )
    return out


def _shard_matches(
    weight_map: dict[str, str], shard: str, tensors: Collection[str], listed: int
) -> bool:
    """Header names == the index's names for this shard, with C-speed lookups."""
    if len(tensors) != listed:
        return False
    if not tensors:
        return True
    try:
        owners = operator.itemgetter(*tensors)(weight_map)
    except KeyError:
        return False
    return bool(owners == shard if len(tensors) == 1 else owners.count(shard) == len(tensors))


def _name_mismatch(
    inputs: dict[str, Any], shard: str, tensors: Collection[str], errors: list[str]
) -> None:
    listed = index_names(inputs, shard)
    lacking = [n for n in listed if n not in tensors]
    listed_set = set(listed)
    extra = [n for n in tensors if n not in listed_set]
    if lacking:
        errors.append(
            f"{shard}: the index names {len(lacking)} tensor(s) this shard lacks, e.g. "
            + ", ".join(lacking[:SAMPLE])
        )
    if extra:
        errors.append(
            f"{shard}: holds {len(extra)} tensor(s) the index does not assign to it, e.g. "
            + ", ".join(extra[:SAMPLE])
        )


def _mtp_summary(
    tally: _Tally, facts: dict[str, Any] | None, warnings: list[str]
) -> dict[str, Any]:
    m = tally.mtp
    declared = facts.get("mtp_layers_declared") if facts else None
    found_layers = sorted(m["layers"])
    summary = {
        "declared_layers": declared,
        "declared_by": {k: v for k, v in (facts or {}).get("mtp_keys", {}).items()},
        "found_layers": found_layers,
        "conventions": m["conventions"],
        "tensors": m["tensors"],
        "params": m["params"],
        "bytes": m["bytes"],
        "dtypes": m["dtypes"],
        "deepseek_markers": sorted(m["markers"]),
    }
    keys = ", ".join(f"{k}={v}" for k, v in summary["declared_by"].items())
    if declared and not m["tensors"]:
        warnings.append(
            f"config declares {declared} MTP layer(s) ({keys}) but the checkpoint has no MTP "
            "tensors: the MTP heads were stripped, so MTP speculative decoding cannot load them"
        )
    elif m["tensors"] and not declared:
        warnings.append(
            f"the checkpoint holds {m['tensors']} MTP tensors (layers {found_layers}) but "
            "config.json declares no MTP layers, so engines will ignore them"
        )
    elif declared and len(found_layers) != declared:
        warnings.append(
            f"config declares {declared} MTP layer(s) ({keys}) but tensors exist for "
            f"{len(found_layers)} (layers {found_layers})"
        )
    return summary


# ---------------------------------------------------------------- gathering


class LocalFs:
    """Reads files under `roots` on this machine, counting every byte it reads."""

    def __init__(self, roots: Sequence[str]) -> None:
        self.roots = [r.rstrip("/") for r in roots]
        self.bytes_read = 0

    def size(self, path: str) -> int | None:
        try:
            st = os.stat(self._inside(path))
        except FileNotFoundError:
            return None
        return st.st_size

    def read(self, path: str, offset: int, length: int) -> bytes:
        with open(self._inside(path), "rb") as fh:
            fh.seek(offset)
            data = fh.read(length)
        self.bytes_read += len(data)
        return data

    def listdir(self, path: str) -> list[str]:
        return os.listdir(self._inside(path))

    def _inside(self, path: str) -> str:
        real = os.path.realpath(path)
        if self.roots and not any(real == r or real.startswith(r + "/") for r in self.roots):
            # Where it leads is not said: a link's target outside the roots stays unseen.
            raise ProbeError(f"{path} leads outside the roots {self.roots}")
        return real


if TYPE_CHECKING:  # subscripted collections.abc types fail at runtime on Python 3.8 hosts
    Mapper = Callable[[Callable[[str], Any], list[str]], Iterable[Any]]


def collect(model_dir: str, fs: Any, pmap: Mapper = map, fork: bool = False) -> dict[str, Any]:
    """Read configs, the index and every shard header (8 + n bytes each) through `fs`.

    `fs` has size(path) -> int | None and read(path, offset, length) -> bytes;
    `pmap` maps a function over shard names (a thread pool for remote reads). `fork`
    (a local, single-threaded process only) starts workers on the shards found on disk
    before the index is parsed, so its parse overlaps their header work.
    """
    join = os.path.join
    names = ["config.json", "hf_quant_config.json", INDEX_NAME, SINGLE_NAME]
    sizes = dict(zip(names, pmap(lambda n: fs.size(join(model_dir, n)), names)))  # noqa: B905
    inputs: dict[str, Any] = {"model_dir": model_dir, "errors": [], "files": {}}
    raw_index, early = None, None
    if sizes[INDEX_NAME] is not None:
        raw_index = fs.read(join(model_dir, INDEX_NAME), 0, sizes[INDEX_NAME])
        if fork:
            early = Early.start(model_dir, fs, raw_index, inputs)
    for name, key in (("config.json", "config"), ("hf_quant_config.json", "hf_quant_config")):
        size = sizes[name]
        if size is not None:
            inputs[key] = _read_json(fs, join(model_dir, name), size, inputs["errors"])
            inputs["files"][name] = size
    try:
        shards = _shard_names(model_dir, fs, sizes, inputs, raw_index)
        index = inputs.get("index")
        listed = Counter(index["weight_map"].values()) if index else None

        def one(shard: str) -> dict[str, Any]:
            header = read_header(fs, join(model_dir, shard), shard)
            return header if header.get("error") else compact(header, shard, inputs, listed)

        done = early.finish(one, shards, inputs, listed or Counter()) if early else {}
    except BaseException:
        if early:
            early.abandon()
        raise
    rest = [s for s in shards if s not in done]
    done.update(zip(rest, pmap(one, rest)))  # noqa: B905
    inputs["headers"] = {shard: done[shard] for shard in shards}
    inputs["bytes_read"] = getattr(fs, "bytes_read", 0)
    return inputs


def _shard_names(
    model_dir: str,
    fs: Any,
    sizes: dict[str, int | None],
    inputs: dict[str, Any],
    raw_index: bytes | None = None,
) -> list[str]:
    """The shards to read: those the index names, else the single file."""
    index_size = sizes[INDEX_NAME]
    if index_size is None:
        if sizes[SINGLE_NAME] is None:
            raise ProbeError(
                f"{model_dir} holds neither {INDEX_NAME} nor {SINGLE_NAME}; "
                "give the folder that holds the checkpoint's safetensors files"
            )
        inputs["index"] = None
        return [SINGLE_NAME]
    inputs["files"][INDEX_NAME] = index_size
    path = os.path.join(model_dir, INDEX_NAME)
    index = _read_json(fs, path, index_size, inputs["errors"], raw_index)
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict):
        raise ProbeError(f"{INDEX_NAME} has no weight_map object; the index is malformed")
    metadata = index.get("metadata")
    inputs["index"] = {"metadata": metadata if isinstance(metadata, dict) else {},
                       "weight_map": weight_map}  # fmt: skip
    shards = list(dict.fromkeys(weight_map.values()))
    for shard in shards:
        if not isinstance(shard, str) or "/" in shard or shard in ("", ".", ".."):
            raise ProbeError(f"{INDEX_NAME} names shard {shard!r}, which is not a file name")
    return shards


def _read_json(fs: Any, path: str, size: int, errors: list[str], raw: bytes | None = None) -> Any:
    try:
        return _loads(fs.read(path, 0, size) if raw is None else raw)
    except ValueError as exc:
        errors.append(f"{os.path.basename(path)} is not valid JSON: {exc}")
        return None


def read_header(fs: Any, path: str, shard: str) -> dict[str, Any]:
    """8 bytes, then exactly the header: never a byte of tensor data."""
    size = fs.size(path)
    if size is None:
        return {"size": None, "error": f"{shard}: shard is named by the index but missing on disk"}
    try:
        n = header_length(shard, fs.read(path, 0, 8), size)
        raw = fs.read(path, 8, n)
        if len(raw) < n:
            raise HeaderError(f"{shard}: header cut short: read {len(raw)} of {n} bytes")
        parsed = parse_header(shard, raw, size)
    except HeaderError as exc:
        return {"size": size, "error": str(exc)}
    parsed["size"] = size
    return parsed


def summarise(model_dir: str, fs: Any, pmap: Mapper = map, fork: bool = False) -> dict[str, Any]:
    """collect + analyse with the cyclic GC paused.

    A big checkpoint's headers become ~10^6 dicts and lists, none in a cycle; with the
    collector on, each generation-2 pass rescans all of them, which doubles the time.
    """
    paused = gc.isenabled()
    gc.disable()
    try:
        return analyse(collect(model_dir, fs, pmap, fork))
    finally:
        if paused:
            gc.enable()


MAX_WORKERS = 16
SHARDS_PER_WORKER = 4
"""Fewer shards than this per extra process are not worth a fork."""


QUEUE_LIMIT = 16_000
"""Shard numbers fit a pipe's 64 KB buffer, written at once before any worker starts."""


class Early:
    """Forked workers that read the headers of the shards on disk while the index is parsed.

    Parsing headers is CPU-bound and holds the GIL, so threads would not help. The shards
    come from the directory listing, and a worker takes one only when its quoted name is in
    the raw index text, so no other file is read. Workers and this process pull shard
    numbers from one pipe, 4 bytes each (pipe reads of whole records are atomic), which
    balances the work; this process joins once its index is parsed. Workers send back each
    shard's compact groups and its names (joined), pickled; the names are checked against
    the index here. A shard a worker did not finish, for any reason, is done here: a worker
    that fails only costs time. Only for a single-threaded process (the probe program).
    """

    def __init__(
        self, fs: Any, candidates: list[str], queue: int, children: list[tuple[int, int]]
    ) -> None:
        self.fs, self.candidates, self.queue, self.children = fs, candidates, queue, children

    @classmethod
    def start(cls, model_dir: str, fs: Any, raw_index: bytes, inputs: Any) -> Early | None:
        if not hasattr(os, "fork") or not hasattr(fs, "listdir"):
            return None
        try:
            candidates = sorted(n for n in fs.listdir(model_dir) if n.endswith(".safetensors"))
        except (OSError, ProbeError):
            return None
        workers = min(_cpus(), MAX_WORKERS, len(candidates) // SHARDS_PER_WORKER) - 1
        if workers < 1 or len(candidates) > QUEUE_LIMIT:
            return None
        read_fd, write_fd = os.pipe()
        os.write(write_fd, struct.pack(f"<{len(candidates)}I", *range(len(candidates))))
        os.close(write_fd)
        sys.stdout.flush()

        def work(send: Callable[[Any], None]) -> None:
            for shard in _pulled(read_fd, candidates):
                if b'"' + shard.encode() + b'"' not in raw_index:
                    continue
                try:
                    header = read_header(fs, os.path.join(model_dir, shard), shard)
                    if not header.get("error"):
                        names: Any = "\n".join(header["tensors"])
                        if names.count("\n") != max(0, len(header["tensors"]) - 1):
                            names = list(header["tensors"])
                        header = compact(header, shard, inputs, None)
                        header["names"] = names
                        header["groups"] = {k: _newline(v[0]).join(v)
                                            for k, v in header["groups"].items()}  # fmt: skip
                except Exception:  # left for this process, which meets and reports it
                    continue
                send((shard, header))

        children = [_fork_worker(work, fs) for _ in range(workers)]
        return cls(fs, candidates, read_fd, children)

    def finish(
        self,
        one: Callable[[str], Any],
        shards: list[str],
        inputs: dict[str, Any],
        listed: Counter[str],
    ) -> dict[str, Any]:
        """Pull the rest of the queue here, then gather the workers' shards."""
        wanted = set(shards)
        done: dict[str, Any] = {}
        inbox = {fd: bytearray() for _, fd in self.children}
        take = functools.partial(self._take, done, wanted, inputs, listed)
        for shard in _pulled(self.queue, self.candidates):
            if shard in wanted:
                done[shard] = one(shard)
            _receive(inbox, take, wait=False)  # the workers' shards are checked meanwhile
        _receive(inbox, take, wait=True)
        for pid, _ in self.children:
            os.waitpid(pid, 0)
        self.children = []
        os.close(self.queue)
        return done

    def _take(
        self,
        done: dict[str, Any],
        wanted: set[str],
        inputs: dict[str, Any],
        listed: Counter[str],
        record: tuple[str, dict[str, Any], int],
    ) -> None:
        shard, header, nbytes = record
        self.fs.bytes_read += nbytes
        if shard not in wanted:
            return
        if header.get("error"):  # a malformed shard: reported as such, like one done here
            done[shard] = header
            return
        header["groups"] = {k: v.split(_newline(v)) for k, v in header["groups"].items()}
        names = header.pop("names", None)
        if names is not None:
            if isinstance(names, str):
                names = names.split("\n") if header["count"] else []
            check_names(header, shard, inputs, listed, names)
        done[shard] = header

    def abandon(self) -> None:
        """Stop the workers (an error ends the summary): they must not outlive it."""
        for pid, fd in self.children:
            with contextlib.suppress(OSError):  # closed already when the worker was done
                os.close(fd)
            try:
                os.kill(pid, 9)
                os.waitpid(pid, 0)
            except OSError:  # already gone
                continue
        self.children = []


def _newline(sample: Any) -> Any:
    """A group's members travel as one text: a pickled list of 10^5 short bytes is slow."""
    return b"\n" if isinstance(sample, bytes) else "\n"


def _pulled(queue: int, candidates: list[str]) -> Iterator[str]:
    while record := os.read(queue, 4):
        yield candidates[struct.unpack("<I", record)[0]]


def _receive(inbox: dict[int, bytearray], take: Callable[[Any], None], wait: bool) -> None:
    """Hand each whole record the workers sent to `take`; `wait`: read until they close."""
    for fd in list(inbox):
        os.set_blocking(fd, wait)
        buf = inbox[fd]
        while True:
            try:
                chunk = os.read(fd, 1 << 20)
            except BlockingIOError:
                break
            buf += chunk
            while len(buf) >= 8 and len(buf) >= 8 + struct.unpack("<Q", buf[:8])[0]:
                end = 8 + struct.unpack("<Q", buf[:8])[0]
                try:
                    record = pickle.loads(buf[8:end])
                except Exception:  # a worker cut off mid-record: its shards are redone here
                    record = None
                del buf[:end]
                if record is not None:
                    take(record)
            if not chunk:
                os.close(fd)
                del inbox[fd]
                break


def _fork_worker(fn: Callable[[Callable[[Any], None]], None], fs: Any) -> tuple[int, int]:
    """A child running `fn(send)`: each sent record (with the bytes it took) goes back at once.

    The child writes without blocking and keeps what the pipe cannot take yet, so it never
    waits for this process, which reads between its own shards.
    """
    read_fd, write_fd = os.pipe()
    with contextlib.suppress(OSError, ImportError):
        import fcntl  # a 1 MB pipe (Linux): fewer wake-ups for the ~30 MB of answers

        fcntl.fcntl(write_fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), 1 << 20)
    pid = os.fork()
    if pid:
        os.close(write_fd)
        return pid, read_fd
    status = 1
    try:  # the child: never returns, never runs the parent's cleanup
        os.close(read_fd)
        os.set_blocking(write_fd, False)
        pending = bytearray()
        counted = [fs.bytes_read]

        def send(item: tuple[str, dict[str, Any]]) -> None:
            nbytes, counted[0] = fs.bytes_read - counted[0], fs.bytes_read
            blob = pickle.dumps((*item, nbytes), pickle.HIGHEST_PROTOCOL)
            pending.extend(struct.pack("<Q", len(blob)) + blob)
            with contextlib.suppress(BlockingIOError):
                while pending:
                    del pending[: os.write(write_fd, pending)]

        fn(send)
        os.set_blocking(write_fd, True)
        while pending:
            del pending[: os.write(write_fd, pending)]
        os.close(write_fd)
        status = 0
    finally:
        os._exit(status)


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def main(argv: list[str]) -> int:
    model_dir, roots = argv[1], argv[2:]
    try:
        fs = LocalFs(roots)
        doc: dict[str, Any] = {"ok": True, "summary": summarise(model_dir, fs, fork=True)}
    except (ProbeError, OSError) as exc:
        doc = {"ok": False, "error": str(exc)}
    except Exception as exc:  # a bug here: the caller says so and takes its slower path
        doc = {"ok": False, "crash": f"{type(exc).__name__}: {exc}"}
    sys.stdout.write(json.dumps(doc, separators=(",", ":")))
    sys.stdout.flush()
    # Tearing down the interpreter frees every parsed object one by one; the answer
    # is out already, so skip it.
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv)
