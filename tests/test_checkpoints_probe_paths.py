"""The probe's bulk fast paths agree with its plain per-tensor paths, on odd inputs too."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sleuth.tools.remote import checkpoint_probe as probe


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
