"""Sleuth's benchmarks: each module measures one target and writes its results file."""

from pathlib import Path


def write_results(out: Path, text: str) -> None:
    """Write a benchmark's Markdown to `out` (its folder made if needed) and print it."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(text, end="" if text.endswith("\n") else "\n")
