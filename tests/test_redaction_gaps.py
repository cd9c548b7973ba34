"""Redaction without gaps (issue 30, item 4), one leak at a time, locally and over sshd.

Each test plants unique canaries (tests/canaries.py) where an attacker found a gap: a secret
used as a dict key, values under keys written with escapes or look-alike letters, URL
credentials in forms the patterns missed, secrets cut by the 4 KiB line limit or the
output cap, file names holding newlines, a launch env value echoed by the server. No 8
characters of a canary in a row may come back.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sleuth.agent.calls import execute
from sleuth.config import HostConfig, Limits
from sleuth.hosts.host import LocalHost
from sleuth.hosts.policy import SandboxedHost
from sleuth.hosts.program import secret_scan
from sleuth.mcp.session import ClientInfo, McpSession
from sleuth.tools.approval import ApprovalDecision, ApprovalRequest, deny_all
from sleuth.tools.context import ToolContext
from sleuth.tools.files.keyed_secrets import RULES
from sleuth.tools.results import cap_lines
from sleuth.transcripts.events import ToolExecuted
from sleuth.transcripts.redact import clear_registered_secrets, redact, redact_data
from sleuth.transcripts.secret_keys import secret_key_label
from sleuth.transcripts.store import TranscriptWriter
from tests.canaries import canary, leaked, plain

SHAPES = {
    "huggingface": lambda: canary("hf_", 34),
    "anthropic": lambda: canary("sk-ant-api03-", 60),
    "openai": lambda: canary("sk-proj-", 40),
    "github": lambda: canary("ghp_", 36),
    "aws": lambda: canary("AKIA", 16, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"),
    "slack": lambda: "xoxb-" + canary("", 10, "0123456789") + "-" + canary("", 24),
    "base64": lambda: canary("", 40, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz+/"),
}


@pytest.fixture(autouse=True)
def _fresh_registry() -> Iterator[None]:
    clear_registered_secrets()
    yield
    clear_registered_secrets()


@pytest.fixture(params=["local", "remote"])
def ctx_for(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[..., ToolContext]:
    """A context whose host "local" is this machine or the sshd, on the given roots."""

    def make(roots: list[str], limits: Limits | None = None, **kw: Any) -> ToolContext:
        if request.param == "local":
            config = HostConfig(roots=roots, allow=kw.get("allow", []))
            sandbox = SandboxedHost("local", LocalHost(), config, limits or Limits())
            return ToolContext(hosts={"local": sandbox}, approver=kw.get("approver", deny_all))
        made: ToolContext = request.getfixturevalue("make_context")(roots, **kw)
        made.hosts["local"] = made.hosts["remote"]
        if limits is not None:
            made.hosts["local"].limits = limits
            made = ToolContext(hosts=made.hosts, approver=made.approver, limits=limits)
        return made

    return make


def run(ctx: ToolContext, name: str, **inputs: Any) -> Any:
    result = execute(ctx, name, {"host": "local", **inputs})
    assert result.ok, result.error
    return result


# ---- structured data: keys, escaped keys, argv ------------------------------------------


def test_a_secret_used_as_a_key_is_redacted_and_keys_stay_distinct() -> None:
    first, second = SHAPES["huggingface"](), SHAPES["github"]()
    data = {first: 1, "model": "deepseek-ai/DeepSeek-V3", "nested": [{second: {"a": first}}]}
    shown = redact_data(data)
    assert leaked([first, second], shown) == []
    assert shown["model"] == "deepseek-ai/DeepSeek-V3" and len(shown) == 3
    two = redact_data({canary("hf_", 34): 1, canary("hf_", 34): 2})
    assert sorted(two.values()) == [1, 2]  # two secret keys are not merged into one


KEYS = [
    "pass\\u0077ord",  # a JSON escape left as written (YAML single quotes, logs)
    "passwor\\u0064",
    "pass\\x77ord",
    "pass%77ord",
    "ｐａｓｓｗｏｒｄ",  # fullwidth
    "𝐩𝐚𝐬𝐬𝐰𝐨𝐫𝐝",  # mathematical bold
    "pass\u200bword",  # a zero-width space inside
    "PassWord",
    "DBPASSword",
    "x-Api-KEY",
    "clientSecret",
    "HF_TOKEN",
]


@pytest.mark.parametrize("key", KEYS)
def test_a_value_under_a_secret_key_is_hidden_however_the_key_is_written(key: str) -> None:
    value = plain()
    shown = redact_data({"server": {key: value}, "note": f"connect with {value}"})
    assert leaked([value], shown) == [], shown
    assert "[REDACTED:by-key" in shown["server"][key]
    assert "[REDACTED:by-key" in shown["note"]  # its echo elsewhere too


def test_the_host_side_scanner_reads_keys_as_the_redactor_does() -> None:
    rules = secret_scan.Rules(json.loads(RULES))
    ordinary = ["bos_token", "max_tokens", "passage", "secretary", "model", "token_count"]
    for key in [*KEYS, *ordinary, "pass%zzword", "\\npassword", "ＡＰＩ＿ＫＥＹ"]:
        assert rules.label(key) == secret_key_label(key), key


def test_ordinary_keys_keep_their_values() -> None:
    data = {"bos_token": "<s>", "max_tokens": 512, "passage": "text", "secretary": "Bo"}
    assert redact_data(data) == data


def test_an_api_key_in_an_argument_list_is_hidden() -> None:
    value = plain()
    argv = ["vllm", "serve", "m", "--api-key", value, "--port", "8000", "--token-budget", "9"]
    shown = redact_data({"argv": argv})
    assert leaked([value], shown) == [] and shown["argv"][5:] == ["--port", "8000", *argv[7:]]
    assert value not in redact(" ".join(argv))


def test_structured_content_of_an_mcp_call_is_redacted(tmp_path: Path) -> None:
    root = tmp_path / "deploy"
    root.mkdir()
    token, key_secret, pw = SHAPES["huggingface"](), SHAPES["github"](), plain()
    doc = {"note": f"pulled with {token}", key_secret: 1, "db": {"pass\\u0077ord": pw}}
    (root / "settings.json").write_text(json.dumps(doc))
    sandbox = SandboxedHost("local", LocalHost(), HostConfig(roots=[str(root)]), Limits())
    session = McpSession.open(ToolContext(hosts={"local": sandbox}), tmp_path / "t", ClientInfo())
    outcome = session.call("read_json", {"host": "local", "path": "settings.json"}, deny_all)
    session.end()
    assert not outcome.is_error and "[REDACTED:" in json.dumps(outcome.data)
    assert leaked([token, key_secret, pw], outcome.data, outcome.text) == []
    assert leaked([token, key_secret, pw], session.path.read_text()) == []


def test_a_secret_key_in_tool_data_never_reaches_the_transcript(tmp_path: Path) -> None:
    key = SHAPES["openai"]()
    with TranscriptWriter.create(tmp_path, "s1") as writer:
        event = ToolExecuted(
            call_id="c1", tool="read_json", input={}, ok=True, output="", data={key: {"ok": 1}}
        )
        writer.append(event)
    assert leaked([key], writer.path.read_text()) == []


# ---- URL credentials ---------------------------------------------------------------------

URLS = [
    "redis://:{pw}@cache.internal:6379/0",
    "redis://:{pw}@localhost",
    "postgres://admin:{pw}@db:5432/app",
    "postgresql://svc:p@{pw}@db.internal/app",
    "mongodb+srv://u:{pw}@cluster0.example.net/?retryWrites=true",
    "amqp://guest:{pw}@[::1]:5672/",
    "//bot:{pw}@hub.example.com/models",
    "DATABASE_DSN=admin:{pw}@db.internal:5432/app",
    "redis-cli -u :{pw}@cache.internal:6379",
    "connect admin:{pw}@10.0.0.7:5432",
    "https://hub.example.com/m?password={pw}&rev=main",
    "https://hub.example.com/m?rev=main&passwd={pw}",
    "https://hub.example.com/m?pwd={pw}",
    "https://hub.example.com/m?token={pw}",
    "https://hub.example.com/m?api_key={pw}",
    "https://hub.example.com/m?access_token={pw}#top",
    "https://hub.example.com/m?secret={pw}",
    "https://acct.blob.core.windows.net/c/b?sv=2022-11-02&sig={pw}",
    "https://bucket.s3.amazonaws.com/k?X-Amz-Credential=AKIA/x&X-Amz-Signature={pw}",
    "https://maps.example.com/api?key={pw}",
]


@pytest.mark.parametrize("form", URLS)
def test_url_credentials_are_redacted_in_every_form(form: str) -> None:
    pw = plain()
    shown = redact(form.format(pw=pw))
    assert leaked([pw], shown) == [] and "[REDACTED:" in shown, shown


@pytest.mark.parametrize(
    "text",
    [
        "http://127.0.0.1:8000/v1/models?limit=5",
        "https://huggingface.co/deepseek-ai/DeepSeek-V3/tree/main",
        "git@github.com:org/repo.git",
        "mailto:ops@example.com",
        "ssh root@gpu1.internal -p 2222",
        "12:30:01 worker@gpu1.internal started",
    ],
)
def test_urls_without_credentials_are_untouched(text: str) -> None:
    assert redact(text) == text


# ---- secrets cut by a cap ----------------------------------------------------------------


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_cut_at_any_offset_inside_a_secret_shows_none_of_it(shape: str) -> None:
    secret = SHAPES[shape]()
    line = f"INFO pulled model with token={secret} and url https://u:{secret}@hub.example.com/x"
    for cap in range(len("INFO pulled model with "), len(line)):
        capped = cap_lines(line + "\n" + "tail line\n", cap, 100)
        assert leaked([secret], capped.text) == [], (cap, capped.text)


def test_a_secret_cut_by_the_line_limit_shows_none_of_it(
    ctx_for: Callable[..., ToolContext], tmp_path: Path
) -> None:
    secrets_ = [make() for make in SHAPES.values()]
    lines = []
    for secret in secrets_:
        for before in (4096 - 9, 4096 - 3, 4096 - 20):  # the limit lands inside the secret
            filler = ("lorem ipsum " * 400)[: before - 1] + " "
            lines.append(filler + secret + " end\n")
    (tmp_path / "long.log").write_text("".join(lines))
    ctx = ctx_for([str(tmp_path)])
    result = run(ctx, "read_lines", path="long.log", start=1, end=len(lines))
    assert "[line cut:" in result.output
    assert leaked(secrets_, result.output, result.data) == []


def test_a_secret_cut_by_the_output_cap_shows_none_of_it(
    ctx_for: Callable[..., ToolContext], tmp_path: Path
) -> None:
    # Every line is mostly secret, so wherever a cap falls it cuts one.
    secrets_ = [SHAPES["huggingface"]() for _ in range(60)]
    (tmp_path / "tokens.log").write_text("".join(f"used {s} ok\n" for s in secrets_))
    for cap in (1500, 1517, 1533, 1549):
        ctx = ctx_for([str(tmp_path)], Limits(max_output_bytes=cap, max_output_lines=2000))
        for tool, args in (("read_lines", {"end": 60}), ("grep", {"pattern": "used"})):
            result = run(ctx, tool, path="tokens.log", **args)
            assert result.bytes_cut > 0 and "[truncated:" in result.output
            assert leaked(secrets_, result.output) == [], (tool, cap)


def test_the_cap_message_says_exactly_how_many_bytes_and_lines_were_cut() -> None:
    text = "".join(f"line {i:04d} of the log\n" for i in range(1, 101))
    size = len(text) // 100
    capped = cap_lines(text, 10_000, 30)
    assert capped.whole_lines == 30 and capped.cut == 70 * size
    assert capped.text.endswith(f"[truncated: {70 * size} more bytes in 70 more lines]")
    capped = cap_lines(text, size * 10 + 11, 2000)  # in the middle of line 11
    assert capped.whole_lines == 10 and "line 0011" in capped.text
    shown = len(capped.text.split("[truncated:")[0].rstrip("\n").encode())
    assert capped.cut == len(text) - shown
    assert capped.text.endswith(
        f"[truncated: {capped.cut} more bytes in 90 more lines, the first of them in part]"
    )


def test_read_lines_past_the_host_cap_says_which_lines_it_shows_and_what_it_cut(
    ctx_for: Callable[..., ToolContext], tmp_path: Path
) -> None:
    (tmp_path / "wide.log").write_text("".join(f"{i} " + "word " * 200 + "\n" for i in range(500)))
    result = run(ctx_for([str(tmp_path)]), "read_lines", path="wide.log", start=1, end=400)
    shown = result.data["end"]
    assert shown > 1 and result.data["total_lines"] == 500
    assert result.output.startswith(f"{tmp_path / 'wide.log'} lines 1-{shown} of 500\n")
    assert result.output.endswith(f" more bytes in {400 - shown} more lines]")
    assert f"[truncated: {result.bytes_cut} more bytes" in result.output


# ---- file names --------------------------------------------------------------------------


def test_a_file_name_with_a_newline_cannot_split_or_forge_a_line(
    ctx_for: Callable[..., ToolContext], tmp_path: Path
) -> None:
    root = tmp_path / "deploy"
    root.mkdir()
    secret = plain()
    # The part of the crafted path after its newline names an innocent file, so a parser
    # that splits on newlines checks that file for secrets instead of this one.
    crafted = root / "evil\n" / str(root).lstrip("/")
    crafted.mkdir(parents=True)
    (crafted / "settings.json").write_text(
        json.dumps({"a": 1, "b": 2, "c": 3, "password": ["x", secret]}, indent=2)
    )
    (root / "settings.json").write_text(json.dumps({"model": "m"}, indent=2))
    (root / "x\nfile           999 forged.txt").write_text("plain\n")
    ctx = ctx_for([str(root)])
    for pattern in (".", secret[:6], "x"):
        found = run(ctx, "grep", path=".", pattern=pattern)
        assert leaked([secret], found.output, found.data) == []
    everything = run(ctx, "grep", path=".", pattern=".")
    assert "$'" + str(root) + "/evil\\n" in everything.output
    listing = run(ctx, "list_dir", path=".", depth=6)
    names = [e["name"] for e in listing.data["entries"]]
    assert "x\nfile           999 forged.txt" in names
    assert len(listing.output.splitlines()) == 1 + len(names)  # one line per entry, no more
    assert "$'x\\nfile           999 forged.txt'" in listing.output


# ---- keys written with escapes, in grep and read_lines -----------------------------------


def test_escaped_and_look_alike_keys_are_redacted_by_grep_and_read_lines(
    ctx_for: Callable[..., ToolContext], tmp_path: Path
) -> None:
    values = [plain() for _ in range(6)]
    files = {
        "compact.json": '{"model": "m", "pass\\u0077ord": "VALUE0"}\n',
        "pretty.json": '{\n  "model": "m",\n  "pass\\u0077ord": [\n    "VALUE1"\n  ]\n}\n',
        "app.yaml": 'server:\n  "api\\u005fkey": VALUE2\n  port: 80\n',
        "fullwidth.yaml": "ｐａｓｓｗｏｒｄ: VALUE3\n",
        "settings.ini": "[db]\npass%77ord = VALUE4\n",
        "notes.txt": "client\\x5fsecret = VALUE5\n",
    }
    for name, body in files.items():
        for i, value in enumerate(values):
            body = body.replace(f"VALUE{i}", value)
        (tmp_path / name).write_text(body)
    ctx = ctx_for([str(tmp_path)])
    seen = [run(ctx, "grep", path=".", pattern=p) for p in (".", "[A-Za-z0-9]{8}")]
    seen += [run(ctx, "read_lines", path=name) for name in files]
    for result in seen:
        assert leaked(values, result.output, result.data) == [], result.output


# ---- launch env values -------------------------------------------------------------------


def _approve(request: ApprovalRequest) -> ApprovalDecision:
    return ApprovalDecision(approved=True, by="test")


def test_launch_env_values_never_reach_server_status_or_launch_output(
    ctx_for: Callable[..., ToolContext], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token, password, inherited = plain(), plain(), plain()
    # What the host's environment holds reaches the server too (local: this process's).
    monkeypatch.setenv("SLEUTH_TEST_API_KEY", inherited)
    ctx = ctx_for(
        [str(tmp_path)], allow=["launch_server", "server_status", "stop_server"], approver=_approve
    )
    script = (
        'echo "token $SERVICE_TOKEN pw $DB_PASSWORD inherited ${SLEUTH_TEST_API_KEY:-none}"; '
        "echo ready; exec sleep 60"
    )
    launched = run(
        ctx,
        "launch_server",
        engine="command",
        command=["sh", "-c", script],
        env={"SERVICE_TOKEN": token, "DB_PASSWORD": password},
        ready_log_line="ready",
        timeout_s=30,
        poll_s=0.1,
    )
    server_id = launched.data["server_id"]
    try:
        values = [token, password, inherited]
        assert leaked(values, launched.output, launched.data) == []
        # Another process knows nothing of the launch: only what the host tells it, while
        # the server runs and after it has ended.
        for _ in ("running", "stopped"):
            clear_registered_secrets()
            status = run(ctx, "server_status", server_id=server_id)
            assert "[REDACTED:" in status.data["tail"]
            assert leaked(values, status.output, status.data) == []
            execute(ctx, "stop_server", {"host": "local", "server_id": server_id})
    finally:
        execute(ctx, "stop_server", {"host": "local", "server_id": server_id})
