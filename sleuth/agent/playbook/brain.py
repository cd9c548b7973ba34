"""The playbook brain: a question's family drives the same tools, loop, policy and transcript
as any other brain, and reports grounded findings whose quotes are lines of the tool output.

It is stateless: each turn re-runs the family's plan against the results recorded so
far, so a resumed run picks up where it stopped.

```python
brain = PlaybookBrain()
reply = brain.complete(Request(system, messages, tools, question=q, hosts=hosts))
```
"""

from __future__ import annotations

from typing import Any

from sleuth.agent.findings import REPORT_FINDING
from sleuth.agent.playbook import registry
from sleuth.agent.playbook.plan import Call, Question, Quote, Result, Step
from sleuth.agent.playbook.unroutable import plan_unroutable
from sleuth.agent.protocols import BrainReply, Request
from sleuth.transcripts.events import ContentBlock, ModelResponse


class PlaybookBrain:
    """A brain with no language model, for offline use and `sleuth demo`."""

    name = "playbook"
    model: str | None = None

    def complete(self, request: Request) -> BrainReply:
        question, turns = _read_conversation(request)
        family = registry.claimant(question)
        plan = family.plan(question) if family else plan_unroutable(question)
        try:
            step: Step | str = next(plan)
            for results in turns:
                step = plan.send(results)
        except StopIteration as done:
            step = str(done.value)
        if request.final and not isinstance(step, str) and step and isinstance(step[0], Call):
            step = "The budget ran out before the plan finished."
        response = _response(step, len(turns))
        if not turns and family is not None:
            # Said on the first turn, so the view shows it and the transcript keeps it.
            notes = [ContentBlock(type="text", text=p) for p in registry.problems()]
            response.content[:0] = notes
        return BrainReply(response=response)


def _response(step: Step | str, turn: int) -> ModelResponse:
    if isinstance(step, str):
        return ModelResponse(content=[ContentBlock(type="text", text=step)], stop_reason="end_turn")
    blocks = [ContentBlock(type="text", text=f"Playbook step {turn + 1}.")]
    for i, item in enumerate(step):
        call_id = f"pb_{turn + 1}_{i + 1}"
        if isinstance(item, Call):
            blocks.append(
                ContentBlock(type="tool_use", id=call_id, name=item.tool, input=item.input)
            )
        else:
            evidence = [_evidence(quote) for quote in item.evidence if quote[1]]
            blocks.append(
                ContentBlock(
                    type="tool_use",
                    id=call_id,
                    name=REPORT_FINDING,
                    input={
                        "claim": item.claim,
                        "verdict": item.verdict,
                        "confidence": item.confidence,
                        "evidence": evidence
                        or [
                            {"call_id": item.evidence[0][0].call_id, "quote": "(no line to quote)"}
                        ],
                        "next_steps": item.next_steps,
                    },
                )
            )
    return ModelResponse(content=blocks, stop_reason="tool_use")


def _evidence(quote: Quote) -> dict[str, Any]:
    item: dict[str, Any] = {"call_id": quote[0].call_id, "quote": quote[1]}
    if len(quote) == 3 and quote[2]:
        item["hosts"] = quote[2]
    return item


def _read_conversation(request: Request) -> tuple[Question, list[list[Result]]]:
    """The question and hosts as the request gives them; every earlier turn's results."""
    hosts = {h.name: list(h.roots) or ["."] for h in request.hosts}
    turns: list[list[Result]] = []
    for message in request.messages[1:]:
        if message["role"] != "user":
            continue
        results = [
            Result(
                b["tool_use_id"],
                _text(b.get("content")),
                bool(b.get("is_error")),
                request.tool_data.get(b["tool_use_id"]),
            )
            for b in message["content"]
            if b.get("type") == "tool_result"
        ]
        if results:
            turns.append(results)
    return Question(request.question, hosts, dict(request.groups)), turns


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content or [])
