"""Findings from a fleet call's grouped result: what the hosts agree on, which hosts differ and
how, which failed, which could not be reached. Each quote names the hosts whose own output
holds it, so the grounding check reads it in each of those hosts' outputs.

```python
reports = drift_reports(result, "installed packages", needles=("sglang",))
```
"""

from __future__ import annotations

from collections.abc import Sequence

from sleuth.agent.playbook.plan import Quote, Report, Result
from sleuth.transcripts.fleet import FleetGroup, FleetResult
from sleuth.transcripts.hostlist import compress

QUOTED_PAIRS = 2
"""How many changed lines (the majority's and the outlier's) a drift finding quotes."""
LONG_LINE = 80


def fleet_of(result: Result) -> FleetResult | None:
    return result.model(FleetResult) if result.data is not None else None


def drift_reports(result: Result, what: str, needles: Sequence[str] = ()) -> list[Report]:
    """One finding when every answering host agrees; else one per outlier group, quoting the
    lines where it differs from the largest group. Failures are `failure_reports`."""
    fleet = fleet_of(result)
    answers = fleet.answers() if fleet else []
    if fleet is None or not answers:
        return []
    base = answers[0]
    answered = sum(len(g.hosts) for g in answers)
    if len(answers) == 1:
        line = _line(base.output, needles)
        return [
            Report(
                f"All {answered} hosts of {fleet.group} that answered report the same {what}"
                + (f": {line.strip()}" if line else "."),
                "yes",
                0.9,
                [(result, line, [compress(base.hosts)])],
            )
        ]
    return [_outlier(result, fleet, base, group, answered, what) for group in answers[1:]]


def _outlier(
    result: Result,
    fleet: FleetResult,
    base: FleetGroup,
    group: FleetGroup,
    answered: int,
    what: str,
) -> Report:
    pairs = changed_lines(group.diff)
    evidence: list[Quote] = []
    for was, now in pairs[:QUOTED_PAIRS]:
        if was:
            evidence.append((result, was, [compress(base.hosts)]))
        if now:
            evidence.append((result, now, [compress(group.hosts)]))
    first_was, first_now = pairs[0] if pairs else ("", "")
    change = (
        f"{first_now.strip()!r} where the others have {first_was.strip()!r}"
        if first_was and first_now
        else f"{first_now.strip()!r}, which the others lack"
        if first_now
        else f"no {first_was.strip()!r}, which the others have"
    )
    hosts = compress(group.hosts)
    verb = "differs" if len(group.hosts) == 1 else "differ"
    return Report(
        f"{hosts} {verb} from the {base.verdict} ({len(base.hosts)} of {answered} hosts of "
        f"{fleet.group}) in {what}: {change}.",
        "no",
        0.9,
        evidence or [(result, None)],
        [f"compare {fleet.tool} on {hosts} with {compress(base.hosts[:1])} directly"],
    )


def changed_lines(diff: str) -> list[tuple[str, str]]:
    """The diff's changes as (majority line, outlier line) pairs, "" where a side has none:
    each run of removed lines paired in order with the run of added lines after it. In the
    diff's order, but a line longer than LONG_LINE (a whole command line, a summary) after
    the short ones: a finding names the most specific change."""
    pairs: list[tuple[str, str]] = []
    removed: list[str] = []
    added: list[str] = []

    def flush() -> None:
        width = max(len(removed), len(added))
        for i in range(width):
            was = removed[i] if i < len(removed) else ""
            now = added[i] if i < len(added) else ""
            if was.strip() or now.strip():
                pairs.append((was, now))
        removed.clear()
        added.clear()

    for line in diff.splitlines():
        if line.startswith(("---", "+++")):
            continue
        if line.startswith("-"):
            if added:
                flush()
            removed.append(line[1:])
        elif line.startswith("+"):
            added.append(line[1:])
        else:
            flush()
    flush()
    return sorted(pairs, key=lambda p: max(len(p[0].strip()), len(p[1].strip())) > LONG_LINE)


def failure_reports(result: Result, seen: set[str]) -> list[Report]:
    """The hosts of a fleet call that failed or could not be reached, not yet in `seen` (a
    host that cannot be reached is said once, not once per call)."""
    fleet = fleet_of(result)
    if fleet is None:
        return []
    reports = []
    for group in fleet.verdict_of("failed", "unreachable"):
        hosts = [h for h in group.hosts if h not in seen]
        if not hosts:
            continue
        seen.update(hosts)
        error = group.output.splitlines()[0] if group.output else "no message"
        what = "unreachable" if group.verdict == "unreachable" else f"failed {fleet.tool}"
        verb = "is" if len(hosts) == 1 else "are"
        reports.append(
            Report(
                f"{compress(hosts)} {verb} {what}: {error}",
                "yes" if group.verdict == "unreachable" else "unknown",
                0.9,
                [(result, _error_line(result, hosts[0]), [compress(hosts)])],
            )
        )
    return reports


def _error_line(result: Result, host: str) -> str | None:
    """A line of the host's own error as the grouped result shows it (masked)."""
    fleet = fleet_of(result)
    for group in fleet.groups if fleet else []:
        if host in group.hosts and group.output:
            return group.output.splitlines()[0]
    return None


def _line(output: str, needles: Sequence[str]) -> str | None:
    lines = [line for line in output.splitlines() if line.strip()]
    for needle in needles:
        found = next((line for line in lines if needle.lower() in line.lower()), None)
        if found:
            return found
    return lines[0] if lines else None
