"""The question and hosts reach a brain as data: the playbook plans from Request fields, not
from the wording of the opening message."""

from __future__ import annotations

from sleuth.agent.playbook.brain import PlaybookBrain
from sleuth.agent.protocols import Request
from sleuth.transcripts.events import HostInfo


def test_the_playbook_plans_from_the_request_fields_not_the_opening_prose() -> None:
    # The opening message says something else entirely; only the fields carry the question.
    request = Request(
        system="",
        messages=[{"role": "user", "content": [{"type": "text", "text": "Question: hello\n\n"}]}],
        tools=[],
        question="Does /srv/models/DeepSeek-V3 still carry its MTP heads?",
        hosts=[HostInfo(name="gpu1", roots=["/srv/models"])],
    )
    reply = PlaybookBrain().complete(request)
    calls = [b for b in reply.response.content if b.type == "tool_use"]
    assert calls, reply.response
    assert all((b.input or {}).get("host") == "gpu1" for b in calls)
    assert any("/srv/models/DeepSeek-V3" in str(b.input) for b in calls)
