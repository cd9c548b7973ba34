"""A question no family claims: say which families there are, and what answers open questions."""

from __future__ import annotations

from sleuth.agent.playbook import registry
from sleuth.agent.playbook.plan import Plan, Question


def plan_unroutable(q: Question) -> Plan:
    families = "\n".join(f"- {family.help}" for family in registry.families())
    left_out = "".join(f"\n{problem}" for problem in registry.problems())
    return (
        f"The offline playbook cannot route this question: {q.text!r}\n"
        f"It knows these families:\n{families}\n"
        "Open questions need a language model: set ANTHROPIC_API_KEY, or pass --base-url "
        f"for an OpenAI-compatible endpoint.{left_out}"
    )
    yield []  # never reached; makes this a generator like the other plans
