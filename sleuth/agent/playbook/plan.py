"""What a playbook family is made of: the question, the calls it plans, the results it reads,
the findings it reports, and the `Family` that names it for routing.

A plan is a generator: it yields a step (calls to run, or findings to report), is sent
the step's results, and returns the closing text.

```python
def plan(q: Question) -> Plan:
    (result,) = yield [Call("read_lines", {"host": q.host, "path": "notes.txt"})]
    report = Report("The notes mention rain.", "yes", 0.9, [(result, result.line("rain"))])
    yield [report]
    return summary_text([report])

FAMILY = Family(name="notes", help="notes: what notes.txt says", plan=plan, words=("notes",))
```
"""

from __future__ import annotations

import re
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from sleuth.agent.protocols import BrainError

M = TypeVar("M", bound=BaseModel)


@dataclass
class Result:
    """One tool call's outcome as the playbook sees it."""

    call_id: str
    output: str
    is_error: bool
    data: Any = None
    """The tool's structured result as JSON (`ToolResult.data`); read it with `model`."""

    def line(self, *needles: str) -> str | None:
        """The first output line containing every needle (case-insensitive), for quoting."""
        for raw in self.output.splitlines():
            low = raw.lower()
            if all(n.lower() in low for n in needles) and raw.strip():
                return raw.strip()
        return None

    def model(self, cls: type[M]) -> M | None:
        """The structured result as the tool's own model; None for a failed call or a call
        without data. Data that is not that model (a transcript from another version of the
        tool, say) ends the turn with a protocol error rather than a wrong answer."""
        if self.is_error or self.data is None:
            return None
        try:
            return cls.model_validate(self.data)
        except ValidationError as exc:
            raise BrainError(
                f"the result of call {self.call_id} is not the {cls.__name__} this playbook "
                f"reads: {exc}",
                kind="protocol",
            ) from exc


@dataclass
class Call:
    tool: str
    input: dict[str, Any]


Quote = tuple[Result, str | None] | tuple[Result, str | None, list[str]]
"""A result and the line quoted from it; for a fleet call, the hosts whose own output holds it."""


@dataclass
class Report:
    claim: str
    verdict: str
    confidence: float
    evidence: Sequence[Quote]
    next_steps: list[str] = field(default_factory=list)


Step = Sequence[Call | Report]
Plan = Generator[Step, list[Result], str]


@dataclass
class Question:
    text: str
    hosts: dict[str, list[str]]
    """Host name -> roots, as the opening message lists them."""
    groups: dict[str, list[str]] = field(default_factory=dict)
    """Host group -> members: the groups a fleet call (`host="@NAME"`) may name."""

    @property
    def host(self) -> str:
        remote = [h for h in self.hosts if h != "local"]
        return remote[0] if remote else "local"

    @property
    def paths(self) -> list[str]:
        """Absolute paths and relative ones with a folder part (models/X), as the question names
        them; relative ones are taken from the host's first root."""
        found = []
        for raw in re.findall(r"(?<![\w/])((?:/|\.{1,2}/|[\w.-]{2,}/)[^\s'\"`]*)", self.text):
            path = raw.rstrip(".,;:?!)'\"")
            if path.lower() in ("tok/s", "req/s", "tokens/s") or path.endswith("/s"):
                continue
            if not path.startswith("/"):
                path = f"{self.hosts.get(self.host, ['.'])[0].rstrip('/')}/{path}"
            found.append(path)
        return found

    def has(self, *words: str) -> bool:
        """Whether the question says any of `words`, not counting names of models or paths
        (so "DeepSeek-V3-FP8" does not make a question about FP8)."""
        low = " ".join(
            t
            for t in self.text.lower().split()
            if not (re.search(r"\d", t) and re.search(r"[-/]", t))
        )
        return any(re.search(rf"(?<![a-z0-9]){re.escape(w)}", low) for w in words)


@dataclass(frozen=True)
class Family:
    """A question family: what routes a question to it, what it says of itself, its plan."""

    name: str
    help: str
    """One line for the list of families an unroutable question is answered with."""
    plan: Callable[[Question], Plan]
    words: tuple[str, ...] = ()
    """The question is this family's when it says any of these (see `Question.has`)..."""
    claims: Callable[[Question], bool] | None = None
    """...or, when given, when this says so (and the words are not consulted)."""
    rank: int = 100
    """Families are asked in rank order, lowest first; the built-ins hold 10 to 70."""

    def routes(self, q: Question) -> bool:
        return self.claims(q) if self.claims is not None else q.has(*self.words)


def summary_text(reports: list[Report]) -> str:
    """A plan's closing text."""
    # The findings are shown (and recorded) once, as findings; the closing text only counts
    # them, so a terminal never prints each claim twice.
    n = len(reports)
    return f"The playbook reported {n} finding{'' if n == 1 else 's'}."
