"""Assemble BENCHMARKS.md from the sections each benchmark writes to benchmarks/results/.

python -m benchmarks.collect
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).parent
ORDER = [
    "ssh_calls",
    "checkpoint_summary",
    "loadgen",
    "peers",
    "peers_normal",
    "transcripts",
    "signing",
    "replay",
]

INTRO = """# Benchmarks

Every figure here is measured by a script in `benchmarks/` against a baseline run in the
same process and moment (OpenSSH, the `safetensors` package, the synthetic server's
known timing), on this project's machine: 2 cores, 24 GiB, loopback only. Each section
names the command that reproduces it; `python -m benchmarks.collect` rebuilds this file
from `benchmarks/results/`.
"""


def main() -> None:
    found = {p.stem: p for p in (HERE / "results").glob("*.md")}
    names = [n for n in ORDER if n in found] + sorted(set(found) - set(ORDER))
    sections = [found[n].read_text().strip() for n in names]
    out = HERE.parent / "BENCHMARKS.md"
    out.write_text(INTRO + "\n" + "\n\n".join(sections) + "\n")
    print(f"wrote {out} from {len(sections)} sections")


if __name__ == "__main__":
    main()
