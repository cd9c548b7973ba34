"""Names a model makes up, carried out in telemetry, tried as an attacker would: through the
real SDK against a scripted API, a model calls a tool that does not exist and a registered
tool on a host that is not configured, each name spelling out what it read
(`exfil_<value>`, `<value>.attacker.example`). Without `--otel-content` neither may leave in
a span name, an attribute or a metric, live or through `sleuth export otel`, sent to a real
OTLP/HTTP receiver; registered tools and configured hosts still do. With `--otel-content`
they leave, as content."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.otlp_receiver import OtlpReceiver
from tests.scripted_api import ScriptedAPI, finding, message, text, tool_use
from tests.test_telemetry import ask_claude, by_name, everything_sent, sleuth

from . import figures

TOOL = "exfil_max_model_len_8192_sk4f9e"
HOST = "sk4f9e-8192.attacker.example"
NOTES = "max_model_len = 8192\n"


def script() -> list[Any]:
    return [
        message(
            text("Reading."),
            tool_use("toolu_1", "read_lines", path="notes.txt"),
            tool_use("toolu_2", TOOL, path="notes.txt"),
            tool_use("toolu_3", "read_lines", host=HOST, path="notes.txt"),
        ),
        message(finding("toolu_4", "8192 tokens.", [("toolu_1", "max_model_len = 8192")])),
        message(text("8192.")),
    ]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "notes.txt").write_text(NOTES)
    (tmp_path / "sleuth.toml").write_text(f"[hosts.local]\nroots = [{json.dumps(str(tmp_path))}]\n")
    return tmp_path


def leaked(sent: bytes) -> list[str]:
    found = [name for name in (TOOL, HOST) if name.encode() in sent]
    found += [part for part in ("exfil_", "attacker.example", "sk4f9e") if part.encode() in sent]
    figures.count("otel_unregistered_names", len(found))
    return found


def test_model_chosen_tool_and_host_names_stay_home_without_otel_content(project: Path) -> None:
    with ScriptedAPI(script()) as api, OtlpReceiver() as receiver:
        done = ask_claude(project, api.url, receiver.url)
    assert done.returncode == 0, done.stderr
    assert leaked(everything_sent(receiver)) == []
    named = by_name(receiver.spans())
    # Registered tools and configured hosts still go out; the others are marked, unnamed.
    [read, elsewhere] = sorted(
        named["execute_tool read_lines"], key=lambda s: s.attributes["gen_ai.tool.call.id"]
    )
    assert read.attributes["gen_ai.tool.name"] == "read_lines"
    assert read.attributes["sleuth.host"] == "local"
    assert "sleuth.host" not in elsewhere.attributes
    assert elsewhere.attributes["sleuth.host.configured"] is False
    [unknown] = named["execute_tool"]
    assert "gen_ai.tool.name" not in unknown.attributes
    assert unknown.attributes["sleuth.tool.registered"] is False
    transcript = json.loads(done.stdout)["transcript"]
    with OtlpReceiver() as later:
        exported = sleuth(project, "export", "otel", transcript, "--endpoint", later.url)
    assert exported.returncode == 0, exported.stderr
    assert leaked(everything_sent(later)) == []
    assert len(later.spans()) == len(receiver.spans())


def test_with_otel_content_the_names_leave_as_content(project: Path) -> None:
    with ScriptedAPI(script()) as api, OtlpReceiver() as receiver:
        done = ask_claude(project, api.url, receiver.url, "--otel-content")
    assert done.returncode == 0, done.stderr
    named = by_name(receiver.spans())
    assert named[f"execute_tool {TOOL}"][0].attributes["gen_ai.tool.name"] == TOOL
    hosts = {s.attributes.get("sleuth.host") for s in named["execute_tool read_lines"]}
    assert hosts == {"local", HOST}
