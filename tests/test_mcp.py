"""`sleuth mcp` driven by the official MCP client SDK, as Claude Code or Cursor would drive it:
over stdio and streamable HTTP, on the local host and over the test sshd."""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path
from typing import Any, Literal

import anyio
import mcp_types as types
import pytest

from sleuth.tools.registry import all_tools
from sleuth.transcripts.events import (
    ApprovalEvent,
    FindingEvent,
    SessionEnded,
    SessionStarted,
    ToolExecuted,
)
from sleuth.transcripts.verify import verify
from tests.mcp_support import (
    CLIENT,
    SECRET,
    Answering,
    McpProject,
    call_id_of,
    mcp_server_pid,
    text_of,
)
from tests.sshd import SSHServer

SERVER_ID = "srv-20261130-120000-abcdef"
"""A well-formed id no server has: an approved stop_server runs and says so."""


@pytest.fixture
def project(tmp_path: Path, sshd: SSHServer) -> McpProject:
    return McpProject.create(tmp_path, sshd)


@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize("host", ["local", "remote"])
def test_a_session_lists_reads_refuses_grounds_and_is_recorded(
    project: McpProject, transport: str, host: str
) -> None:
    seen: dict[str, Any] = {}

    async def session() -> None:
        async with project.client(transport) as client:
            listed = (await client.list_tools()).tools
            seen["tools"] = {t.name: t for t in listed}
            seen["inside"] = await client.call_tool(
                "read_lines", {"host": host, "path": "notes.txt"}
            )
            seen["outside"] = await client.call_tool(
                "read_lines", {"host": host, "path": str(project.outside)}
            )
            seen["mutating"] = await client.call_tool(
                "stop_server", {"host": host, "server_id": SERVER_ID}
            )
            inside_id = call_id_of(seen["inside"])
            seen["grounded"] = await client.call_tool(
                "report_finding",
                {
                    "claim": "notes.txt holds the magic word",
                    "verdict": "yes",
                    "confidence": 0.9,
                    "evidence": [{"call_id": inside_id, "quote": "magic word 42"}],
                },
            )
            seen["ungrounded"] = await client.call_tool(
                "report_finding",
                {
                    "claim": "notes.txt names a GPU",
                    "verdict": "yes",
                    "confidence": 0.5,
                    "evidence": [{"call_id": inside_id, "quote": "NVIDIA H100"}],
                },
            )

    anyio.run(session)

    tools = seen["tools"]
    assert set(tools) == {*all_tools(), "report_finding"}
    for name, spec in all_tools().items():
        assert tools[name].input_schema == spec.input_schema()
        assert tools[name].description == spec.description
        assert tools[name].annotations.read_only_hint is (not spec.mutating)
    assert tools["report_finding"].output_schema["properties"]["grounded"]["type"] == "boolean"

    inside = seen["inside"]
    assert not inside.is_error
    assert "magic word 42" in text_of(inside)
    assert inside.structured_content["total_lines"] == 3

    outside = seen["outside"]
    assert outside.is_error
    assert "outside the roots" in text_of(outside) and "roots = [" in text_of(outside)
    assert SECRET not in str(outside.model_dump())

    mutating = seen["mutating"]
    assert mutating.is_error
    assert "not allowed on host" in text_of(mutating) and "allow = [" in text_of(mutating)

    assert not seen["grounded"].is_error
    assert seen["grounded"].structured_content["grounded"] is True
    assert seen["ungrounded"].is_error
    assert "grounding check failed" in text_of(seen["ungrounded"])

    path = project.transcript_paths()[0]
    report = verify(path)
    assert report.ok and report.ended, report
    events = project.transcript()
    start = events[0]
    assert isinstance(start, SessionStarted) and start.brain == "mcp"
    assert start.client == {"name": CLIENT.name, "version": CLIENT.version}
    assert {h.name for h in start.hosts} == {"local", "remote"}
    calls = [e for e in events if isinstance(e, ToolExecuted)]
    assert [c.tool for c in calls] == [
        "read_lines",
        "read_lines",
        "stop_server",
        "report_finding",
        "report_finding",
    ]
    assert calls[0].call_id == call_id_of(inside) and "magic word 42" in calls[0].result.output
    assert SECRET not in path.read_text()
    findings = [e.finding for e in events if isinstance(e, FindingEvent)]
    assert [f.grounded for f in findings] == [True, False]
    end = events[-1]
    assert isinstance(end, SessionEnded) and end.status == "closed"
    assert end.totals.tool_calls == 3


@pytest.mark.parametrize(
    ("transport", "mode", "answer"),
    [
        ("stdio", "auto", "accept"),
        ("stdio", "auto", "decline"),
        ("stdio", "legacy", "accept"),
        ("stdio", "legacy", "decline"),
        ("http", "auto", "accept"),
        ("http", "legacy", "accept"),
    ],
)
def test_a_mutating_call_the_host_allows_asks_the_user_through_elicitation(
    tmp_path: Path, transport: str, mode: str, answer: Literal["accept", "decline"]
) -> None:
    """`auto` speaks 2026-07-28 (the answer comes back with a second call); `legacy` speaks
    2025-11-25 (the server asks inside the call)."""
    project = McpProject.create(tmp_path, allow=["stop_server"])
    elicit = Answering(answer)
    results: list[types.CallToolResult] = []

    async def session() -> None:
        async with project.client(transport, mode=mode, elicit=elicit) as client:
            results.append(
                await client.call_tool("stop_server", {"host": "local", "server_id": SERVER_ID})
            )

    anyio.run(session)

    [result] = results
    [asked] = elicit.asked
    assert "stop_server" in asked and SERVER_ID in asked
    assert result.is_error
    if answer == "accept":
        # It ran: the host answered that no such server exists.
        assert f"no server {SERVER_ID}" in text_of(result)
    else:
        assert "was not approved: declined by the user" in text_of(result)
    approvals = [e for e in project.transcript() if isinstance(e, ApprovalEvent)]
    assert [(a.approved, a.by) for a in approvals] == [(answer == "accept", "elicitation")]
    assert verify(project.transcript_paths()[0]).ok


def test_a_client_without_elicitation_gets_the_host_rules_which_refuse(tmp_path: Path) -> None:
    project = McpProject.create(tmp_path, allow=["stop_server"])
    results: list[types.CallToolResult] = []

    async def session() -> None:
        async with project.client("stdio") as client:
            results.append(
                await client.call_tool("stop_server", {"host": "local", "server_id": SERVER_ID})
            )

    anyio.run(session)

    assert results[0].is_error
    assert "[hosts.local.approve]" in text_of(results[0])
    [approval] = [e for e in project.transcript() if isinstance(e, ApprovalEvent)]
    assert not approval.approved and approval.rule == "no rule"


def test_a_host_rule_approves_a_call_no_client_was_asked_about(tmp_path: Path) -> None:
    project = McpProject.create(tmp_path, allow=["stop_server"])
    toml = project.root / "sleuth.toml"
    toml.write_text(toml.read_text() + '\n[hosts.local.approve]\ntools = ["stop_server"]\n')

    async def session() -> None:
        async with project.client("stdio") as client:
            await client.call_tool("stop_server", {"host": "local", "server_id": SERVER_ID})

    anyio.run(session)

    [approval] = [e for e in project.transcript() if isinstance(e, ApprovalEvent)]
    assert approval.approved and approval.rule == "hosts.local.approve.tools: stop_server"


def test_an_output_shows_its_line_numbers_and_a_reference_by_them_grounds(tmp_path: Path) -> None:
    project = McpProject.create(tmp_path)
    seen: dict[str, types.CallToolResult] = {}

    async def session() -> None:
        async with project.client("stdio") as client:
            found = await client.call_tool(
                "grep", {"host": "local", "path": "notes.txt", "pattern": "two|magic"}
            )
            # The number shown beside the line, as a model reads it: not grep's file line.
            shown = re.search(r"^(\d+)\| .*magic word 42$", text_of(found), re.M)
            assert shown is not None, text_of(found)
            seen["found"] = found
            seen["finding"] = await client.call_tool(
                "report_finding",
                {
                    "claim": "notes.txt holds the magic word",
                    "verdict": "yes",
                    "confidence": 0.9,
                    "evidence": [{"call_id": call_id_of(found), "lines": shown.group(1)}],
                },
            )

    anyio.run(session)

    finding = seen["finding"]
    assert not finding.is_error and finding.structured_content["grounded"] is True
    (evidence,) = finding.structured_content["evidence"]
    assert evidence["text"].endswith("notes.txt:3:magic word 42")
    # The structured result is the tool's data, untouched by the numbering.
    assert "|" not in str(seen["found"].structured_content)
    (grep,) = [e for e in project.transcript() if isinstance(e, ToolExecuted) and e.tool == "grep"]
    assert not re.search(r"^\d+\|", grep.result.output, re.M)  # recorded without the gutter


def test_bad_input_and_unknown_tools_are_error_results_not_protocol_errors(
    tmp_path: Path,
) -> None:
    project = McpProject.create(tmp_path)
    results: dict[str, types.CallToolResult] = {}

    async def session() -> None:
        async with project.client("stdio") as client:
            results["bad"] = await client.call_tool("read_lines", {"host": "local", "pat": "x"})
            results["unknown"] = await client.call_tool("rm_rf", {"host": "local"})
            results["host"] = await client.call_tool(
                "read_lines", {"host": "nowhere", "path": "notes.txt"}
            )

    anyio.run(session)

    assert results["bad"].is_error and "invalid input for read_lines" in text_of(results["bad"])
    assert results["unknown"].is_error and "unknown tool 'rm_rf'" in text_of(results["unknown"])
    assert results["host"].is_error and "unknown host 'nowhere'" in text_of(results["host"])


def test_resources_list_and_read_transcripts_and_hosts_and_nothing_else(tmp_path: Path) -> None:
    project = McpProject.create(tmp_path)
    seen: dict[str, Any] = {}

    async def session() -> None:
        async with project.client("stdio") as client:
            await client.call_tool("read_lines", {"host": "local", "path": "notes.txt"})
            listed = (await client.list_resources()).resources
            seen["uris"] = [str(r.uri) for r in listed]
            transcript = next(u for u in seen["uris"] if u.startswith("sleuth://transcripts/"))
            seen["transcript"] = await client.read_resource(transcript)
            seen["hosts"] = await client.read_resource("sleuth://hosts")
            with pytest.raises(Exception) as escaped:
                await client.read_resource("sleuth://transcripts/../sleuth.toml")
            seen["escaped"] = str(escaped.value)
            prompt = await client.get_prompt("investigate", {"question": "is MTP there?"})
            seen["prompt"] = prompt.messages[0].content

    anyio.run(session)

    assert "sleuth://hosts" in seen["uris"]
    verdict, transcript = seen["transcript"].contents
    assert verdict.text.startswith("INTEGRITY ONLY: not signed"), "verify's verdict first"
    assert transcript.text.startswith('{"seq":0')
    assert "magic word 42" in transcript.text
    assert '"name": "local"' in seen["hosts"].contents[0].text
    assert "no resource" in seen["escaped"]
    assert "Question: is MTP there?" in seen["prompt"].text
    assert "report_finding" in seen["prompt"].text


def test_a_killed_server_leaves_a_transcript_that_verifies_up_to_its_last_event(
    tmp_path: Path,
) -> None:
    project = McpProject.create(tmp_path)

    async def session() -> None:
        async with project.client("stdio") as client:
            for _ in range(3):
                await client.call_tool("read_lines", {"host": "local", "path": "notes.txt"})
            os.kill(mcp_server_pid(), signal.SIGKILL)

    anyio.run(session)

    [path] = project.transcript_paths()
    report = verify(path)
    assert report.ok and not report.ended
    calls = [e for e in project.transcript() if isinstance(e, ToolExecuted)]
    assert 1 <= len(calls) <= 3


def test_sigterm_ends_the_session_with_its_session_ended(tmp_path: Path) -> None:
    project = McpProject.create(tmp_path)

    async def session() -> None:
        async with project.client("stdio") as client:
            await client.call_tool("read_lines", {"host": "local", "path": "notes.txt"})
            os.kill(mcp_server_pid(), signal.SIGTERM)

    anyio.run(session)

    [path] = project.transcript_paths()
    report = verify(path)
    assert report.ok and report.ended
    end = project.transcript()[-1]
    assert isinstance(end, SessionEnded) and end.totals.tool_calls == 1
