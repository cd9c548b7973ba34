"""The redaction corpus, over every surface a secret could leave by (issue 30, item 4).

Unique canaries are planted in the leak shapes that were found (a secret used as a JSON
key, values under escaped and look-alike keys, URL credentials in every form, secrets cut
by the 4 KiB line limit and by the 64 KB output cap, a file name with a newline, a launch
env value the server echoes) and in test_secrets.py's corpus of real credential formats,
in one folder that is a root of both this machine and the real sshd. Every tool that can
reach them is then called on both hosts through:

1. `sleuth tool NAME --json`, one process per call (so server_status runs in another
   process than the launch it reports on);
2. `sleuth mcp` through the official MCP client: structured content and text content;
3. the transcript files those calls wrote, byte for byte;
4. `sleuth show` of each transcript, as text, Markdown, HTML and JSON.

No 8 characters in a row of any canary may appear on any surface.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from typer.testing import CliRunner

from sleuth.cli import app
from tests.canaries import canary, leaked, plain
from tests.mcp_support import McpProject, text_of
from tests.sshd import SSHServer, free_port

from . import figures
from .test_secrets import corpus, fingerprints, plant

HOSTS = ("local", "remote")
LINE_LIMIT = 4096
FORMATS = ("text", "md", "html", "json")
ALLOW = ["launch_server", "server_status", "stop_server"]
URL_FORMS = [
    "redis://:{}@cache.internal:6379/0",
    "postgresql://svc:p@{}@db.internal/app",
    "amqp://guest:{}@[::1]:5672/",
    "//bot:{}@hub.example.com/models",
    "DATABASE_DSN=admin:{}@db.internal:5432/app",
    "redis-cli -u :{}@cache.internal:6379",
    "https://hub.example.com/m?rev=main&password={}",
    "https://hub.example.com/m?passwd={}",
    "https://hub.example.com/m?pwd={}",
    "https://hub.example.com/m?api_key={}",
    "https://acct.blob.core.windows.net/c/b?sv=2022-11-02&sig={}",
    "https://bucket.s3.amazonaws.com/k?X-Amz-Signature={}",
]
CUT_SHAPES = {
    "huggingface": ("hf_", 34),
    "openai": ("sk-proj-", 40),
    "github": ("ghp_", 36),
    "anthropic": ("sk-ant-api03-", 60),
}


@dataclass
class Corpus:
    """The planted files, their canaries, and the calls that reach them."""

    root: Path
    canaries: dict[str, str] = field(default_factory=dict)
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def add(self, name: str, value: str) -> str:
        self.canaries[name] = value
        return value

    def values(self) -> list[str]:
        legacy = [p for parts in fingerprints(self.legacy).values() for p in parts]
        return [*self.canaries.values(), *legacy]

    legacy: dict[str, str] = field(default_factory=dict)


def _plant(root: Path) -> Corpus:
    c = Corpus(root)
    structured = {
        "note": f"pulled with {c.add('note_hf', canary('hf_', 34))}",
        c.add("key_github", canary("ghp_", 36)): 1,
        "db": {"pass\\u0077ord": c.add("escaped_json_key", plain())},
        "cache": f"redis://:{c.add('redis', plain())}@cache.internal:6379/0",
    }
    # A JSON escape in a key decodes to `password`; written raw so the file holds it.
    (root / "settings.json").write_text(
        json.dumps(structured, indent=2).replace("pass\\\\u0077ord", "pass\\u0077ord")
    )
    (root / "urls.txt").write_text(
        "".join(form.format(c.add(f"url_{i}", plain())) + "\n" for i, form in enumerate(URL_FORMS))
    )
    long_lines = []
    for name, (prefix, length) in CUT_SHAPES.items():
        secret = c.add(f"line_cut_{name}", canary(prefix, length))
        for before in (LINE_LIMIT - 9, LINE_LIMIT - 3):
            long_lines.append(("lorem ipsum " * 400)[: before - 1] + " " + secret + " end\n")
    (root / "long.log").write_text("".join(long_lines))
    for pad in range(4):  # the 64 KB cap lands inside one of these secrets, whatever the pad
        secret = c.add(f"cap_cut_{pad}", canary("hf_", 34))
        (root / f"tokens{pad}.log").write_text(f"{'x' * pad} used {secret}\n" * 2000)
    compact = c.add("compact_escaped", plain())
    (root / "compact.json").write_text('{"model": "m", "pass\\u0077ord": "' + compact + '"}\n')
    yaml = c.add("yaml_escaped", plain())
    (root / "app.yaml").write_text('server:\n  "api\\u005fkey": ' + yaml + "\n  port: 80\n")
    (root / "fullwidth.yaml").write_text(f"ｐａｓｓｗｏｒｄ: {c.add('fullwidth', plain())}\n")
    crafted = root / "evil\n" / str(root).lstrip("/")
    crafted.mkdir(parents=True)
    (crafted / "settings.json").write_text(
        json.dumps({"a": 1, "b": 2, "password": ["x", c.add("newline_name", plain())]}, indent=2)
    )
    legacy = root / "legacy"
    legacy.mkdir()
    c.legacy = corpus()
    legacy_files = plant(legacy, c.legacy)
    c.add("env_token", plain())
    c.add("env_password", plain())

    reads = ["settings.json", "urls.txt", "compact.json", "app.yaml", "fullwidth.yaml"]
    reads += [f"legacy/{name}" for name in legacy_files]
    c.calls = [("read_lines", {"path": path}) for path in reads]
    c.calls += [
        ("read_json", {"path": "settings.json"}),
        ("read_json", {"path": "legacy/config.json"}),
        ("read_lines", {"path": "long.log", "end": len(long_lines)}),
        *(("read_lines", {"path": f"tokens{pad}.log", "end": 2000}) for pad in range(4)),
        ("grep", {"path": ".", "pattern": "used", "include_glob": "tokens*.log"}),
        ("grep", {"path": ".", "pattern": ".", "include_glob": "*.json"}),
        ("grep", {"path": ".", "pattern": ".", "include_glob": "*.yaml"}),
        ("grep", {"path": ".", "pattern": ".", "include_glob": "*.txt"}),
        ("grep", {"path": "legacy", "pattern": "."}),
        ("list_dir", {"path": ".", "depth": 6}),
    ]
    return c


def _toml(root: Path, sshd: SSHServer) -> str:
    """Both hosts allow the serving tools and approve them by rule (no one is asked)."""
    hosts = ""
    for name, ssh in (("local", None), ("remote", sshd.alias)):
        hosts += f"\n[hosts.{name}]\n" + (f'ssh = "{ssh}"\n' if ssh else "")
        hosts += f'roots = ["{root}"]\nallow = {json.dumps(ALLOW)}\n'
        hosts += f"[hosts.{name}.approve]\n"
        hosts += 'tools = ["server_status", "stop_server"]\ncommands = [["sh", "-c"]]\n'
        hosts += 'env = ["DB_PASSWORD", "SERVICE_TOKEN"]\n'
    return f'known_hosts = "{root.parent}/sleuth_known_hosts"\n' + hosts


@pytest.fixture(scope="module")
def world(
    tmp_path_factory: pytest.TempPathFactory, sshd: SSHServer
) -> Iterator[tuple[McpProject, Corpus]]:
    project = McpProject.create(tmp_path_factory.mktemp("surfaces"), sshd)
    (project.root / "sleuth.toml").write_text(_toml(project.root, sshd))
    yield project, _plant(project.root)


def _launch_args(c: Corpus) -> dict[str, Any]:
    script = 'echo "serving with $SERVICE_TOKEN and $DB_PASSWORD"; echo ready; exec sleep 120'
    return {
        "engine": "command",
        "command": ["sh", "-c", script],
        "env": {
            "SERVICE_TOKEN": c.canaries["env_token"],
            "DB_PASSWORD": c.canaries["env_password"],
        },
        "ready_log_line": "ready",
        "port": free_port(),
        "timeout_s": 30,
        "poll_s": 0.1,
    }


# ---- surface 1: `sleuth tool NAME --json`, one process per call ---------------------------


def _tool_json(project: McpProject, host: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    pairs = [f"{k}={json.dumps(v) if not isinstance(v, str) else v}" for k, v in args.items()]
    run = project.cli("tool", name, *pairs, "--host", host, "--yes", "--json")
    assert run.stdout, run.stderr
    out: dict[str, Any] = json.loads(run.stdout)
    out["_printed"] = run.stdout + run.stderr
    return out


def _cli_surface(project: McpProject, c: Corpus) -> list[dict[str, Any]]:
    jobs = [(host, name, args) for host in HOSTS for name, args in c.calls]
    with ThreadPoolExecutor(max_workers=3) as pool:
        results = list(pool.map(lambda job: _tool_json(project, *job), jobs))
    for host in HOSTS:  # launch in one process, report on it in others
        launched = _tool_json(project, host, "launch_server", _launch_args(c))
        assert launched["ok"], launched["_printed"]
        server = {"server_id": launched["data"]["server_id"]}
        results += [launched, _tool_json(project, host, "server_status", server)]
        results.append(_tool_json(project, host, "stop_server", server))
        results.append(_tool_json(project, host, "server_status", server))  # ended
    return results


# ---- surface 2: MCP structured content and text ------------------------------------------


def _mcp_surface(project: McpProject, c: Corpus) -> list[types.CallToolResult]:
    results: list[types.CallToolResult] = []

    async def session() -> None:
        async with project.client("stdio") as client:
            for host in HOSTS:
                for name, args in c.calls:
                    results.append(await client.call_tool(name, {"host": host, **args}))
                launched = await client.call_tool(
                    "launch_server", {"host": host, **_launch_args(c)}
                )
                assert not launched.is_error, text_of(launched)
                assert launched.structured_content is not None
                server = {"host": host, "server_id": launched.structured_content["server_id"]}
                results.append(launched)
                results.append(await client.call_tool("server_status", server))
                results.append(await client.call_tool("stop_server", server))
                results.append(await client.call_tool("server_status", server))

    anyio.run(session)
    return results


# ---- surfaces 3 and 4: transcripts and `sleuth show` -------------------------------------


def _shown(project: McpProject, transcript: Path) -> list[str]:
    runner = CliRunner()
    out = [runner.invoke(app, ["show", str(transcript), "--format", f]).output for f in FORMATS]
    assert all(out), transcript
    return out


def _unique_lines(texts: list[str]) -> str:
    """Many outputs repeat one redacted line thousands of times; each line once is enough."""
    return "\n".join(sorted({line for text in texts for line in text.splitlines()}))


@pytest.mark.ssh
def test_no_canary_leaves_by_any_surface_on_either_host(world: tuple[McpProject, Corpus]) -> None:
    project, c = world
    values = c.values()
    cli = _cli_surface(project, c)
    assert all(r["ok"] for r in cli), [r["_printed"][:300] for r in cli if not r["ok"]]
    mcp = _mcp_surface(project, c)
    assert not any(r.is_error for r in mcp), [text_of(r)[:300] for r in mcp if r.is_error]
    transcripts = sorted(project.transcripts.glob("*.jsonl"))
    assert len(transcripts) == len(cli) + 1  # a transcript per `sleuth tool`, one for MCP
    # One MCP transcript is shown by the real command line too, not only through typer.
    subprocess_shown = [
        project.cli("show", str(transcripts[-1]), "--format", f).stdout for f in FORMATS
    ]
    surfaces = {
        "sleuth tool --json": [r["_printed"] for r in cli],
        "MCP structuredContent": [json.dumps(r.structured_content) for r in mcp],
        "MCP text": [text_of(r) for r in mcp],
        "transcript bytes": [p.read_text() for p in transcripts],
        "sleuth show": [s for p in transcripts for s in _shown(project, p)] + subprocess_shown,
    }
    found = {name: leaked(values, _unique_lines(texts)) for name, texts in surfaces.items()}
    calls = len(cli) + len(mcp)
    figures.count("secrets_surface_calls", calls)
    figures.count("secrets_surface_leaks", sum(len(v) for v in found.values()))
    assert all("[REDACTED:" in _unique_lines(texts) for texts in surfaces.values())
    assert found == {name: [] for name in surfaces}, {
        name: [k for k, v in c.canaries.items() if v in hits] for name, hits in found.items()
    }
    # What the corpus is there to prove reached the surfaces: the cuts, the quoted name.
    everything = _unique_lines(surfaces["MCP text"])
    assert "[line cut:" in everything and "[truncated:" in everything
    assert "$'evil\\n" in everything
