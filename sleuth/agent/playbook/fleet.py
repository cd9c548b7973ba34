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
    "across", "pool", "cluster", "outlier", "every", "each", "machines", "group", "compare",
    "everywhere",
)  # fmt: skip
TOPICS: dict[str, tuple[str, ...]] = {
    "versions": ("version", "versions", "installed", "package", "packages", "sglang", "vllm",
                 "torch", "transformers", "flashinfer", "python"),
    "checkpoint": ("checkpoint", "checkpoints", "weights", "shard", "shards", "safetensors",
                   "model", "models"),
    "gpu": ("gpu", "gpus", "driver", "drivers", "cuda", "nvidia", "hardware"),
    "flags": ("flag", "flags", "argument", "arguments", "command line", "cmdline", "launched",
              "launch", "started", "running", "engine config", "server config", "serve",
              "serving", "servers"),
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
    name = target(q) or ALL_HOSTS
    group = f"@{name}"
    wanted = [t for t in topics(q) if t != "checkpoint"]
    calls = {
        "versions": Call("python_env", {"host": group}),
        "gpu": Call("gpu_info", {"host": group}),
        "flags": Call("server_processes", {"host": group}),
    }
    # Checkpoints are looked for under every root: `<root2>` is each host's own second root.
    roots = root_tokens(q, name) if "checkpoint" in topics(q) else []
    listings = [
        Call("list_dir", {"host": group, "path": root, "depth": 4, "max_entries": 5000})
        for root in roots
    ]
    first = yield [*(calls[t] for t in wanted), *listings]
    results = dict(zip(wanted, first, strict=False))
    checkpoints: list[tuple[str, Result, Result]] = []
    if roots:
        found = zip(roots, first[len(wanted) :], strict=True)
        checkpoints = yield from _checkpoints(q, group, list(found))
    reports = _reports(results, checkpoints, list(first))
    yield reports
    return summary_text(reports)


def root_tokens(q: Question, group: str) -> list[str]:
    """How a fleet call names each root of every member: `.` (the first), `<root2>`, ..."""
    most = max((len(q.hosts.get(h, [])) for h in q.groups.get(group, [])), default=1)
    return ["."] + [f"<root{i}>" for i in range(2, most + 1)]


def _checkpoints(
    q: Question, group: str, listings: list[tuple[str, Result]]
) -> Generator[Step, list[Result], list[tuple[str, Result, Result]]]:
    dirs = model_dirs(q, listings)
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


def model_dirs(q: Question, listings: list[tuple[str, Result]]) -> list[str]:
    """Checkpoint folders (holding config.json) under the roots, named the way each host
    reads its own (relative to the first root, `<rootN>/...` under the others); those the
    question names first."""
    names: set[str] = set()
    for root, listing in listings:
        fleet = fleet_of(listing)
        for g in fleet.answers() if fleet else []:
            for entry in (g.data or {}).get("entries", []):
                name = str(entry.get("name", ""))
                if name.endswith("/config.json"):
                    folder = name[: -len("/config.json")]
                    names.add(folder if root == "." else f"{root}/{folder}")
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
