"""Failures carry a kind; a bug inside a tool is an internal error with its traceback, shown
and recorded as an error event, never passed off as an ordinary failed call."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sleuth.agent.brains.anthropic import AnthropicBrain
from sleuth.agent.calls import execute
from sleuth.agent.protocols import Quiet
from sleuth.agent.session import start_investigation
from sleuth.config import HostConfig, Settings
from sleuth.errors import ErrorKind
from sleuth.tools import registry
from sleuth.tools.context import ToolContext, build_context
from sleuth.tools.registry import ToolInput, tool
from sleuth.transcripts.events import ErrorEvent, ToolExecuted
from sleuth.transcripts.results import ToolResult
from sleuth.transcripts.store import load
from tests.scripted_api import ScriptedAPI, message, text, tool_use


class ParseInput(ToolInput):
    path: str


@pytest.fixture
def buggy() -> Iterator[str]:
    """A test-only tool with a real bug: it indexes a key its input file does not have."""

    @tool()
    def parse_manifest(ctx: ToolContext, args: ParseInput) -> ToolResult:
        """Read a manifest's version."""
        sandbox = ctx.host(args.host)
        doc = json.loads(sandbox.host.read_range(sandbox.resolve(args.path), 0, 4096))
        return ToolResult(ok=True, output=str(doc["version"]))

    yield "parse_manifest"
    registry._TOOLS.pop("parse_manifest", None)


@pytest.fixture(autouse=True)
def mark_host() -> Iterator[None]:
    """A test-only tool that would change the host, so it needs permission and approval."""

    @tool(mutating=True)
    def mark_host(ctx: ToolContext, args: ParseInput) -> ToolResult:
        """Mark the host."""
        return ToolResult(ok=True, output="marked")

    yield
    registry._TOOLS.pop("mark_host", None)


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    (tmp_path / "manifest.json").write_text('{"name": "x"}')
    settings = Settings(hosts={"local": HostConfig(roots=[str(tmp_path)])})
    return build_context(settings, [])


def test_a_bug_in_a_tool_is_an_internal_error_with_its_traceback(
    ctx: ToolContext, buggy: str
) -> None:
    result = execute(ctx, buggy, {"path": "manifest.json"})
    assert not result.ok and result.error_kind == ErrorKind.INTERNAL
    assert "internal error in parse_manifest (a bug in Sleuth): KeyError" in (result.error or "")
    assert result.traceback is not None
    assert 'doc["version"]' in result.traceback and "KeyError: 'version'" in result.traceback


CASES: list[tuple[str, dict[str, Any], ErrorKind]] = [
    ("read_lines", {"path": "missing.txt"}, ErrorKind.NOT_FOUND),
    ("read_lines", {"path": "/etc/passwd"}, ErrorKind.POLICY),
    ("read_lines", {}, ErrorKind.INVALID_INPUT),
    ("read_lines", {"path": "manifest.json", "host": "gpu9"}, ErrorKind.UNKNOWN_HOST),
    ("no_such_tool", {}, ErrorKind.INVALID_INPUT),
    ("mark_host", {"path": "manifest.json"}, ErrorKind.POLICY),
]


@pytest.mark.parametrize(("name", "inputs", "kind"), CASES, ids=[str(c[2]) for c in CASES])
def test_ordinary_failures_carry_their_kind_and_no_traceback(
    ctx: ToolContext, name: str, inputs: dict[str, Any], kind: ErrorKind
) -> None:
    result = execute(ctx, name, inputs)
    assert not result.ok and result.error_kind == kind, result.error
    assert result.traceback is None


def test_an_unapproved_call_is_not_approved(tmp_path: Path) -> None:
    settings = Settings(hosts={"local": HostConfig(roots=[str(tmp_path)], allow=["mark_host"])})
    result = execute(build_context(settings, []), "mark_host", {"path": "x"})
    assert result.error_kind == ErrorKind.NOT_APPROVED, result.error


class Notes(Quiet):
    """An observer that keeps what the run told the user."""

    def __init__(self) -> None:
        self.notes: list[str] = []

    def note(self, text: str) -> None:
        self.notes.append(text)


def test_the_loop_records_the_bug_as_an_error_event_and_goes_on(
    ctx: ToolContext, buggy: str, tmp_path: Path
) -> None:
    script = [
        message(tool_use("toolu_b", buggy, path="manifest.json")),
        message(text("The manifest has no version.")),
    ]
    notes = Notes()
    with ScriptedAPI(script) as api:
        brain = AnthropicBrain(
            "claude-haiku-4-5", api_key="sk-ant-test-0123456789", base_url=api.url
        )
        inv = start_investigation(
            "Which version?", brain, ctx, Settings(), tmp_path, observer=notes
        )
        result = inv.run()
    events = load(Path(result.transcript)).events
    assert result.status == "unsupported"  # it reported no finding; the run went on to its end
    executed = next(e for e in events if isinstance(e, ToolExecuted) and e.call_id == "toolu_b")
    assert not executed.result.ok and "internal error" in executed.result.output
    (error,) = [e for e in events if isinstance(e, ErrorEvent) and e.where == "tool"]
    assert error.message.startswith("toolu_b internal error in parse_manifest")
    assert "Traceback (most recent call last)" in error.message
    assert "KeyError: 'version'" in error.message
    assert notes.notes == [
        "internal error in parse_manifest (a bug in Sleuth): KeyError: 'version' "
        "(traceback in the transcript)"
    ]
