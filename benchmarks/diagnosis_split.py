"""The diagnosis scores by split and group: the logs the rules were written from against the
later-dated logs kept only to measure, start-up failures against failures of running
servers, per kind, with the confusion between kinds and the confident-wrong count.

    python -m benchmarks.diagnosis_split [--corpus DIR] [--out FILE]

Rows come from benchmarks.diagnosis.score; a log's group is runtime when the index gives its
phase as warm-up or serving (or gives none and its kind only a running server has).
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from benchmarks.diagnosis import Scored

RESULTS = Path(__file__).parent / "results" / "diagnosis_split.md"
SPLITS = (("rules", "written-from set"), ("measure", "later-dated set, used only to measure"))


def split_report(rows: list[Scored]) -> str:
    lines = ["## By split and group (issue 42)", ""]
    for split, title in SPLITS:
        for group in ("startup", "runtime"):
            mine = [r for r in rows if r.split == split and r.group == group]
            if mine:
                lines += _section(f"{title}, {group}", mine)
    return "\n".join(lines)


def _section(title: str, rows: list[Scored]) -> list[str]:
    right = sum(r.right for r in rows)
    wrong = sum(r.confident_wrong for r in rows)
    phased = [r for r in rows if r.want_phase is not None]
    phase_right = sum(r.got_phase == r.want_phase for r in phased)
    out = [
        f"### {title}: {right}/{len(rows)} right ({right / len(rows):.0%}), "
        f"{wrong} confident-wrong, phase right {phase_right}/{len(phased)}",
        "",
        "| kind | logs | right | low confidence | confident-wrong |",
        "|---|---:|---:|---:|---:|",
    ]
    for kind in sorted({r.want for r in rows}):
        k = [r for r in rows if r.want == kind]
        out.append(
            f"| {kind} | {len(k)} | {sum(r.right for r in k)} | "
            f"{sum(r.confidence == 'low' for r in k)} | {sum(r.confident_wrong for r in k)} |"
        )
    confused = Counter((r.want, r.got, r.confidence) for r in rows if not r.kind_right)
    headline_only = [r.file for r in rows if r.kind_right and not r.headline_right]
    out.append("")
    if confused:
        out.append("Confusion (expected -> given, confidence: logs):")
        out += [f"- {w} -> {g} ({c}): {n}" for (w, g, c), n in sorted(confused.items())]
    else:
        out.append("Confusion: none (every kind right).")
    if headline_only:
        out.append(f"Kind right, headline another line: {', '.join(headline_only)}")
    wrong_phase = [
        f"{r.file} ({r.want_phase} -> {r.got_phase})" for r in phased if r.got_phase != r.want_phase
    ]
    if wrong_phase:
        out.append(f"Phase wrong: {', '.join(wrong_phase)}")
    out.append("")
    return out


def main() -> None:
    from benchmarks.diagnosis import CORPUS, score

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    text = split_report(score(args.corpus))
    out = args.out or (RESULTS if args.corpus == CORPUS else None)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
