"""What "the same output" means across hosts: the masks a fleet call applies before comparing.

```python
mask = Masker.for_host(info)        # info: the host's HostInfo from session_started
mask("python3 on gpu-07 at /srv/gpu-07/venv (pid 4242)")
# -> "python3 on <host> at <root>/venv (pid <pid>)"
```

Each host's output is compared after masking what is that host's own and not an answer: its
name, SSH alias and address; its roots, as configured and as resolved (hosts often keep the
same tree under different mount points); timestamps; PIDs; live load (GPU memory in use,
utilisation); and the call's own cost (milliseconds, bytes over the wire). The rules are
`transcripts.fleet.SAME_MEANS`; the raw output is recorded per host, unmasked.

The other way round, `localise` reads `<root>` and `<rootN>` at the start of a fleet call's
input as each host's own root, so a path can be given as the grouped result shows it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sleuth.transcripts.events import HostInfo

_MONTH = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    # timestamps: ISO 8601 / RFC 3339 date-times, syslog dates, clock times
    (
        re.compile(
            r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2}|\s?UTC)?"
        ),
        "<time>",
    ),
    (
        re.compile(
            rf"(?:(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun),? )?{_MONTH} +\d{{1,2}},? "
            r"\d{1,2}:\d{2}:\d{2}(?: \d{4})?"
        ),
        "<time>",
    ),
    (re.compile(r"(?<![\d:.])\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?(?![\d:])"), "<time>"),
    # PIDs: `pid 4242`, `PID: 4242`, `pid=4242`
    (re.compile(r"\b([Pp][Ii][Dd]s?)(\s*[:=#]?\s*)\d+\b"), r"\1\2<pid>"),
    # live load: gpu_info's `1234/81559 MiB used, util 37%`
    (re.compile(r"\b\d+(/\d+ MiB used)"), r"<load>\1"),
    (re.compile(r"\butil \d+%"), "util <load>%"),
    # the call's own cost
    (re.compile(r"\b\d[\d,]*(?:\.\d+)? ?ms\b"), "<cost> ms"),
    (re.compile(r"\b\d[\d,]* bytes over the wire"), "<cost> bytes over the wire"),
)
MIN_NAME = 3
"""A host name shorter than this is not masked: it would match ordinary words."""


@dataclass(frozen=True)
class Masker:
    """One host's masks: its roots and names, then the rules every host shares."""

    roots: tuple[tuple[re.Pattern[str], str], ...]
    names: re.Pattern[str] | None

    @classmethod
    def for_host(cls, info: HostInfo | None, name: str = "") -> Masker:
        """The masks of the host `info` describes (only its `name` when there is no info)."""
        if info is None:
            return cls((), _names([name]))
        labelled: list[tuple[str, str]] = []
        for i, root in enumerate(info.roots):
            label = "<root>" if i == 0 else f"<root{i + 1}>"
            real = info.real_roots[i] if i < len(info.real_roots) else ""
            labelled += [(path.rstrip("/"), label) for path in {root, real} if _maskable(path)]
        labelled.sort(key=lambda pair: -len(pair[0]))
        roots = tuple(
            (re.compile(rf"(?<![\w./-]){re.escape(path)}(?![\w.-])"), label)
            for path, label in labelled
        )
        return cls(roots, _names([info.name, info.ssh, _address_host(info.address)]))

    def __call__(self, text: str) -> str:
        for pattern, label in self.roots:
            text = pattern.sub(label, text)
        if self.names is not None:
            text = self.names.sub("<host>", text)
        for pattern, replacement in RULES:
            text = pattern.sub(replacement, text)
        return "\n".join(line.rstrip() for line in text.splitlines())


_ROOT_TOKEN = re.compile(r"^<root(\d*)>(?=/|$)")


def localise(raw: dict[str, Any], info: HostInfo | None) -> dict[str, Any]:
    """A fleet call's input for one host: a string input that starts with `<root>` or
    `<rootN>` (as masked outputs show paths) starts with that host's own first or Nth root,
    so `path="<root2>/models"` reads each host's own second root."""
    roots = info.roots if info is not None else []

    def own(value: Any) -> Any:
        found = _ROOT_TOKEN.match(value) if isinstance(value, str) else None
        if found is None:
            return value
        index = int(found[1] or 1) - 1
        if not 0 <= index < len(roots):
            return value
        return roots[index].rstrip("/") + value[found.end() :]

    return {key: own(value) for key, value in raw.items()}


def _maskable(path: str) -> bool:
    return len(path.rstrip("/")) > 1


def _names(names: Sequence[str]) -> re.Pattern[str] | None:
    kept = sorted({n for n in names if len(n) >= MIN_NAME}, key=len, reverse=True)
    if not kept:
        return None
    return re.compile(r"(?<![\w-])(?:" + "|".join(map(re.escape, kept)) + r")(?![\w-])")


def _address_host(address: str) -> str:
    """`root@10.0.0.7:22` -> `10.0.0.7`; nothing for an unreachable host's reason."""
    if not address or " " in address:
        return ""
    host = address.rsplit("@", 1)[-1]
    return host.rsplit(":", 1)[0].strip("[]") if ":" in host else host
