"""The probe's bulk fast paths agree with its plain per-tensor paths, on odd inputs too."""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sleuth.hosts.program import checkpoint_probe as probe
from tests import checkpoint_fixtures as fx


def slow_end(tensors: dict[str, Any]) -> int | None:
    try:
        return probe._check_each("s", tensors)
    except probe.HeaderError:
        return None


def entry(dtype: Any, shape: Any, offsets: Any) -> dict[str, Any]:
    return {"dtype": dtype, "shape": shape, "data_offsets": offsets}


ODD_ENTRIES = [
    entry("BF16", [2, 3], [0, 12]),
    entry("BF16", [2.0, 3], [0, 12]),
    entry("BF16", [True, 3], [0, 6]),
    entry("BF16", [2, 3], [0.0, 12]),
    entry("BF16", [2, 3], [0, 12, 14]),
    entry("BF16", "ab", [0, 12]),
    entry("BF16", [], [0, 2]),
    entry("BF16", [0], [0, 0]),
    entry("BF16", [-1, -3], [0, 6]),
    entry("X99", [2], [0, 4]),
    entry(["BF16"], [2], [0, 4]),
    entry("F4", [3], [0, 1]),
    entry("U8", [[2]], [0, 2]),
    entry("U8", [2], {"0": 0, "1": 2}),
    "not an entry",
]


@pytest.mark.parametrize("odd", range(len(ODD_ENTRIES)))
def test_bulk_offset_check_never_accepts_what_the_walk_rejects(odd: int) -> None:
    tensors = {"a": entry("F32", [4], [0, 16]), "odd": ODD_ENTRIES[odd]}
    fast = probe._tiled_end(tensors, [])
    if fast is not None:
        assert slow_end(tensors) == fast


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["U8", "BF16", "F32", "F4"]), st.lists(st.integers(0, 5), max_size=3)
        ),
        min_size=1,
        max_size=8,
    ),
    st.lists(st.integers(-3, 3), min_size=8, max_size=8),
    st.randoms(use_true_random=False),
)
def test_bulk_offset_check_agrees_with_the_walk(
    specs: list[tuple[str, list[int]]], nudges: list[int], rng: Any
) -> None:
    """Contiguous layouts, shuffled, some offsets nudged into gaps and overlaps."""
    tensors, offset = {}, 0
    for i, (dtype, shape) in enumerate(specs):
        size = math.prod(shape) * probe.DTYPE_BITS[dtype] // 8
        begin = max(0, offset + (nudges[i] if i % 3 == 2 else 0))
        tensors[f"t{i}"] = entry(dtype, shape, [begin, begin + size])
        offset += size
    items = list(tensors.items())
    rng.shuffle(items)
    shuffled = dict(items)
    fast, slow = probe._tiled_end(shuffled, []), slow_end(shuffled)
    assert fast == slow or (fast is None and slow is not None)


def reference_patterns(names: list[str]) -> list[tuple[str, int]]:
    out = []
    for texts, rows in probe.group_names(names).items():
        for rect in probe._rectangles(rows):
            out.append((probe.render(texts, rect), math.prod(len(v) for v in rect)))
    return sorted(out)


def fast_patterns(names: list[str]) -> list[tuple[str, int]]:
    groups = probe.shard_groups(names, ["F32"] * len(names), [()] * len(names))
    out = []
    for (texts, _, _), numbers in groups.items():
        for rect in probe._Group(numbers, len(texts) - 1).rectangles():
            out.append((probe.render(texts, rect), math.prod(len(v) for v in rect)))
    return sorted(out)


NAME_SETS = {
    "product": [f"layers.{i}.experts.{j}.w" for i in range(12) for j in range(3)],
    "ragged": [f"layers.{i}.experts.{j}.w" for i in range(5) for j in range(i + 1)],
    "edge digits": ["7layers.0", "7layers.1", "8layers.0", "w12", "w3", "0", "10"],
    "leading zeros": ["l.01.w", "l.1.w", "l.2.w", "l.002.w"],
    "unicode digits": ["layers.\u0661.w", "layers.1.w", "layers.2.w", "é.3.w", "é.4.w"],
    "newline and nul": ["a.1\nb.2", "a.1", "a\x00.3", "a.2"],
    "no digits": ["embed.weight", "norm.weight"],
}


@pytest.mark.parametrize("case", sorted(NAME_SETS))
def test_translate_grouping_matches_the_per_name_regex(case: str) -> None:
    names = NAME_SETS[case]
    assert fast_patterns(names) == reference_patterns(names)


def test_groups_from_ascii_and_unicode_shards_merge() -> None:
    ascii_shard = probe.shard_groups(["l.1.w", "l.2.w"], ["F32"] * 2, [(2,)] * 2)
    other_shard = probe.shard_groups(["l.3.w", "é.1.w"], ["F32"] * 2, [(2,)] * 2)
    merged: dict[Any, list[Any]] = {}
    for groups in (ascii_shard, other_shard):
        for key, numbers in groups.items():
            merged.setdefault(key, []).extend(numbers)
    group = probe._Group(merged[(("l.", ".w"), "F32", (2,))], 1)
    assert group.rectangles() == [[[1, 2, 3]]] and group.firsts() == {1: 1, 2: 1, 3: 1}


# ---------------------------------------------------------------- canonical headers


def both_paths(raw: bytes, data: int) -> tuple[Any, Any]:
    """(fast result or None, JSON-path result or the HeaderError text), both compacted."""
    size = 8 + len(raw) + data
    fast = probe._canonical(raw, data)
    try:
        slow: Any = probe.compact(probe.parse_json_header("s", raw, size), "s", {}, None)
    except probe.HeaderError as exc:
        slow = str(exc)
    return (None if fast is None else probe.compact(fast, "s", {}, None)), slow


def specs_header(tensors: dict[str, tuple[str, list[int]]], meta: bool = True) -> bytes:
    return fx.header_bytes(tensors, {"format": "pt"} if meta else None)


def test_fast_path_matches_the_json_path_on_a_big_realistic_shard() -> None:
    tensors = dict(list(fx.big_moe_tensors(layers=2, experts=16).items())[:2000])
    raw = specs_header(tensors)
    data = sum(fx.nbytes(d, s) for d, s in tensors.values())
    fast, slow = both_paths(raw, data)
    assert fast is not None and fast == slow
    assert fast["count"] == len(tensors) and fast["declared"] == data


def test_fast_path_reads_what_the_safetensors_package_writes(tmp_path: Path) -> None:
    fx.tiny_qwen_mtp(tmp_path / "q")
    for path in sorted((tmp_path / "q").glob("*.safetensors")):
        blob = path.read_bytes()
        n = struct.unpack("<Q", blob[:8])[0]
        raw, data = blob[8 : 8 + n], len(blob) - 8 - n
        fast, slow = both_paths(raw, data)
        assert fast is not None and fast == slow


ONE = b'{"dtype":"F32","shape":[4],"data_offsets":[0,16]}'
NOT_CANONICAL = {
    "spaces": b'{"a.0": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}',
    "reordered keys": b'{"a.0":{"shape":[4],"dtype":"F32","data_offsets":[0,16]}}',
    "escaped quote": b'{"a.\\"0\\"":' + ONE + b"}",
    "escaped unicode": b'{"\\u00e9.0":' + ONE + b"}",
    "unicode name": '{"é.0":'.encode() + ONE + b"}",
    "tab in name": b'{"a\t0":' + ONE + b"}",
    "marker byte in name": b'{"a\x010":' + ONE + b"}",
    "duplicate names": b'{"a":' + ONE + b',"a":' + ONE + b"}",
    "metadata last": b'{"a":' + ONE + b',"__metadata__":{"format":"pt"}}',
    "metadata as tensor": b'{"__metadata__":' + ONE + b"}",
    "leading zero": b'{"a":{"dtype":"F32","shape":[04],"data_offsets":[0,16]}}',
    "float offset": b'{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16.0]}}',
    "extra key": b'{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16],"x":1}}',
    "newline padding": b'{"a":' + ONE + b"}\n",
    "trailing garbage": b'{"a":' + ONE + b"}x",
    "offsets out of order": b'{"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]},'
    b'"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}',
    "unknown dtype": b'{"a":{"dtype":"Q4","shape":[4],"data_offsets":[0,16]}}',
    "gap": b'{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},'
    b'"b":{"dtype":"F32","shape":[1],"data_offsets":[12,16]}}',
    "no tensors": b'{"__metadata__":{"format":"pt"}}',
    "cut short": b'{"a":' + ONE[:-3],
}


@pytest.mark.parametrize("case", sorted(NOT_CANONICAL))
def test_fast_path_declines_what_is_not_the_canonical_form(case: str) -> None:
    raw = NOT_CANONICAL[case]
    fast, slow = both_paths(raw, 16)
    assert fast is None
    if case in ("spaces", "reordered keys", "unicode name", "newline padding"):
        assert slow["count"] == 1  # valid all the same: the JSON path reads it


def test_a_name_mimicking_the_separators_stays_one_name() -> None:
    name = 'x"},"y":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"z'
    raw = b'{"' + name.replace('"', '\\"').encode() + b'":' + ONE + b"}"
    fast, slow = both_paths(raw, 16)
    assert fast is None and slow["count"] == 1
    plain = "x},y:{dtype:F32,shape:[4],data_offsets:[0,16]},z ]}"
    fast, slow = both_paths(b'{"' + plain.encode() + b'":' + ONE + b"}", 16)
    assert fast is not None and fast == slow and list(slow["groups"]) == list(fast["groups"])


PLAIN = st.lists(st.sampled_from(list("ab.0129_")), min_size=1, max_size=6).map("".join)
ODD_CHARS = [*'ab.0 "\\é\t\x01\x03\x04]},:{[', '":{"dtype":"']
ODD = st.lists(st.sampled_from(ODD_CHARS), min_size=1, max_size=6).map("".join)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.one_of(PLAIN, ODD),
            st.sampled_from(["U8", "BF16", "F32", "F4", "X1"]),
            st.lists(st.integers(0, 4), max_size=3),
        ),
        min_size=1,
        max_size=6,
    ),
    st.booleans(),
    st.sampled_from(["orjson", "json", "json compact"]),
    st.integers(-2, 2),
)
def test_fast_path_agrees_with_the_json_path(
    entries: list[tuple[str, str, list[int]]], meta: bool, writer: str, slack: int
) -> None:
    """Whatever it accepts, the JSON path reads the same; whatever that rejects, it declines."""
    doc: dict[str, Any] = {"__metadata__": {"format": "pt"}} if meta else {}
    offset = 0
    for name, dtype, shape in entries:
        size = math.ceil(math.prod(shape) * probe.DTYPE_BITS.get(dtype, 8) / 8)
        doc[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    if writer == "orjson":
        raw = orjson.dumps(doc)
    elif writer == "json":
        raw = json.dumps(doc).encode()
    else:
        raw = json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()
    fast, slow = both_paths(raw + b" " * (-len(raw) % 8), max(0, offset + slack))
    if fast is not None:
        assert fast == slow
    if isinstance(slow, str):
        assert fast is None
