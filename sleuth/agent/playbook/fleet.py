"""Fleet drift: do all hosts of a group run the same engine versions, checkpoints, GPUs and
drivers, and server flags? Each question is one fleet call per tool (`host="@GROUP"`), and each
finding names the hosts that differ and quotes each side's own output.

Routed when the question is about many hosts ("all nodes", "which host", "drift", "the
same ...") and the run has a group of two or more hosts: the group the question names, else
`@all`. What it compares follows the question: versions (python_env), checkpoints
(checkpoint_summary and list_dir of each checkpoint found under the first root), GPUs and
drivers (gpu_info), server flags (server_processes); all four when it names none.
"""

from __future__ import annotations

from collections.abc import Generator

from sleuth.agent.playbook.drift import drift_reports, failure_reports, fleet_of
from sleuth.agent.playbook.plan import (
    Call,
    Family,
    Plan,
    Question,
    Report,
    Result,
    Step,
    summary_text,
)
from sleuth.config import ALL_HOSTS

FLEET_WORDS = (
    "all nodes", "all hosts", "all servers", "every node", "every host", "each node",
    "each host", "fleet", "which node", "which host", "which server", "nodes", "hosts",
    "drift", "differ", "different", "same", "consistent", "inconsistent", "mismatch",
    "across", "pool", "cluster", "outlier",
)  # fmt: skip
TOPICS: dict[str, tuple[str, ...]] = {
    "versions": ("version", "versions", "installed", "package", "packages", "sglang", "vllm",
                 "torch", "transformers", "flashinfer", "python"),
    "checkpoint": ("checkpoint", "checkpoints", "weights", "shard", "shards", "safetensors",
                   "model files", "model dir"),
    "gpu": ("gpu", "gpus", "driver", "drivers", "cuda", "nvidia", "hardware"),
    "flags": ("flag", "flags", "argument", "arguments", "command line", "cmdline", "launched",
              "launch", "started", "running", "engine config", "server config"),
}  # fmt: skip
MAX_CHECKPOINTS = 2


def target(q: Question) -> str | None:
    """The group to fan out to: one the question names, else `all`; None without two hosts."""
    named = [g for g in q.groups if g != ALL_HOSTS and q.has(g)]
    for group in [*named, ALL_HOSTS]:
        if len(q.groups.get(group, [])) >= 2:
            return group
    return None


def claims(q: Question) -> bool:
    return target(q) is not None and q.has(*FLEET_WORDS)


def topics(q: Question) -> list[str]:
    named = [topic for topic, words in TOPICS.items() if q.has(*words)]
    return named or list(TOPICS)


def plan_fleet(q: Question) -> Plan:
    group = f"@{target(q)}"
    wanted = topics(q)
    calls = {
        "versions": Call("python_env", {"host": group}),
        "gpu": Call("gpu_info", {"host": group}),
        "flags": Call("server_processes", {"host": group}),
        "checkpoint": Call(
            "list_dir", {"host": group, "path": ".", "depth": 4, "max_entries": 5000}
        ),
    }
    first = yield [calls[t] for t in wanted]
    results = dict(zip(wanted, first, strict=True))
    checkpoints: list[tuple[str, Result, Result]] = []
    if "checkpoint" in wanted:
        checkpoints = yield from _checkpoints(q, group, results.pop("checkpoint"))
    reports = _reports(results, checkpoints, list(first))
    yield reports
    return summary_text(reports)


def _checkpoints(
    q: Question, group: str, listing: Result
) -> Generator[Step, list[Result], list[tuple[str, Result, Result]]]:
    dirs = model_dirs(q, listing)
    if not dirs:
        return []
    found = yield [
        call
        for d in dirs
        for call in (
            Call("checkpoint_summary", {"host": group, "model_dir": d}),
            Call("list_dir", {"host": group, "path": d, "depth": 2}),
        )
    ]
    return [(d, found[2 * i], found[2 * i + 1]) for i, d in enumerate(dirs)]


def model_dirs(q: Question, listing: Result) -> list[str]:
    """Checkpoint folders (holding config.json) under the first root, relative to it so each
    host reads its own; those the question names first."""
    fleet = fleet_of(listing)
    names = {
        entry["name"][: -len("/config.json")]
        for g in (fleet.answers() if fleet else [])
        for entry in (g.data or {}).get("entries", [])
        if entry.get("name", "").endswith("/config.json")
    }
    named = [d for d in sorted(names) if d.rsplit("/", 1)[-1].lower() in q.text.lower()]
    return (named or sorted(names))[:MAX_CHECKPOINTS]


WHAT = {
    "versions": ("installed engine and library versions", ("sglang", "vllm", "torch")),
    "gpu": ("GPUs and driver", ("driver", "gpu")),
    "flags": ("inference server command lines", ("command:", "server")),
}


def _reports(
    results: dict[str, Result],
    checkpoints: list[tuple[str, Result, Result]],
    every: list[Result],
) -> list[Report]:
    reports: list[Report] = []
    for topic, result in results.items():
        what, needles = WHAT[topic]
        reports += drift_reports(result, what, needles)
    for model_dir, summary, listing in checkpoints:
        reports += _checkpoint_reports(model_dir, summary, listing)
        every += [summary, listing]
    seen: set[str] = set()
    for result in every:
        reports += failure_reports(result, seen)
    return reports


def _checkpoint_reports(model_dir: str, summary: Result, listing: Result) -> list[Report]:
    """Drift of one checkpoint: by its summary, and by its files where those show a drift the
    summary does not (one finding per set of hosts, quoting both where both differ)."""
    what = f"checkpoint {model_dir}"
    reports = drift_reports(summary, f"{what} (config, tensors, shards)", ("tensors:", "config:"))
    extras = drift_reports(listing, f"{what} files (names and sizes)", ("entries",))
    by_hosts = dict(zip(_outliers(summary), reports, strict=False))
    for hosts, extra in zip(_outliers(listing), extras, strict=False):
        same = by_hosts.get(hosts)
        if same is None:
            reports.append(extra)
        else:
            same.evidence = [*same.evidence, *extra.evidence]
    return reports


def _outliers(result: Result) -> list[frozenset[str]]:
    """The host sets of a fleet result's outlier groups, in the order drift_reports reports
    them (none when every host agrees)."""
    fleet = fleet_of(result)
    answers = fleet.answers() if fleet else []
    return [frozenset(g.hosts) for g in answers[1:]]


FAMILY = Family(
    name="fleet",
    help="fleet drift: do all hosts of a group run the same versions, checkpoints, GPUs and "
    "server flags (needs --hosts GROUP)",
    plan=plan_fleet,
    claims=claims,
    rank=5,
)
