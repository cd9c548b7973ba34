"""Secrets reached by path: a pointer, a line range, a grep pattern or its context must not
lift a secret past redaction (issue 19).

A corpus of structured files (JSON, YAML block scalars, TOML, INI, .env, a kubeconfig with
base64-wrapped credentials, a netrc, XML) plus the shaped secrets of test_secrets.py is
planted once per module, with fresh random values. Hypothesis then draws read_lines
ranges, read_json pointers, grep patterns (prefixes of the planted values among them),
contexts and list_dir depths, on this machine and over the real sshd (and on a host
without python3, whose files are scanned over SFTP); not one planted value may appear in
what the model, the transcript or the terminal would get.
"""

from __future__ import annotations

import base64
import json
import secrets
import string
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sleuth.agent.calls import execute
from sleuth.config import HostConfig, Limits
from sleuth.hosts.host import LocalHost
from sleuth.hosts.policy import SandboxedHost
from sleuth.tools.context import ToolContext
from sleuth.transcripts.redact import clear_registered_secrets, redact_data
from sleuth.transcripts.secret_text import looks_random
from tests.sshd import SSHServer

from . import figures
from .test_secrets import corpus, fingerprints, plant
from .test_secrets_grep_oracle import fast_python

CI_EXAMPLES = {"local": 880, "remote": 40, "sftp": 80}
DEEP_FACTOR = 10


def _rand(n: int, alphabet: str = string.ascii_letters + string.digits) -> str:
    return "".join(secrets.choice(alphabet) for _ in range(n))


def _random_token(n: int = 32) -> str:
    while True:
        token = _rand(n)
        if looks_random(token):
            return token


def keyed_values() -> dict[str, str]:
    """name -> a value that only its key marks as secret (no shape gives it away)."""
    names = [
        "json_password",
        "json_api_key",
        "json_nested",
        "json_list_a",
        "json_list_b",
        "yaml_folded",
        "yaml_literal_1",
        "yaml_literal_2",
        "yaml_plain_next",
        "yaml_auth_user",
        "toml_multi",
        "toml_key",
        "toml_table",
        "ini_password",
        "ini_continued",
        "env_multi_1",
        "env_multi_2",
        "env_plain",
        "netrc",
        "xml",
        "jsonl",
        "kube_token",
        "compose",
        "properties_1",
        "properties_2",
        "jsonc_next",
        "pgpass",
    ]
    values = {name: f"{_rand(4, string.ascii_lowercase)}{_rand(12)}" for name in names}
    pem = "\n".join(_rand(64) for _ in range(4))
    values["kube_key"] = base64.b64encode(
        f"-----BEGIN EC PRIVATE KEY-----\n{pem}\n-----END EC PRIVATE KEY-----\n".encode()
    ).decode()
    values["generic_entropy"] = _random_token()
    values["py_pem_body"] = _rand(64)
    return values


def plant_structured(root: Path, v: dict[str, str]) -> list[str]:
    files = {
        "settings.json": json.dumps(
            {
                "server": {"api_key": v["json_api_key"], "password": v["json_password"]},
                "db": {"credentials": {"user": "svc", "pass": v["json_nested"]}, "port": 5432},
                "model": "deepseek-ai/DeepSeek-V3",
                "secrets": [v["json_list_a"], v["json_list_b"]],
                "build": {"id": v["generic_entropy"]},
            },
            indent=2,
        ),
        "app.yaml": (
            "server:\n  host: db.internal\n  password: >\n"
            f"    {v['yaml_folded']}\n"
            "  token: |\n"
            f"    {v['yaml_literal_1']}\n    {v['yaml_literal_2']}\n"
            "  client_secret:\n"
            f"    {v['yaml_plain_next']}\n"
            "auth:\n  type: basic\n"
            f"  user: {v['yaml_auth_user']}\n"
            "replicas: 2\n"
        ),
        "kubeconfig": (
            "apiVersion: v1\nkind: Config\nusers:\n- name: admin\n  user:\n"
            f"    client-key-data: {v['kube_key']}\n"
            f"    token: {v['kube_token']}\n"
            "clusters:\n- name: c\n  cluster:\n    server: https://10.0.0.1:6443\n"
        ),
        "service.toml": (
            '[server]\nname = "llm"\npassword = """\n'
            f"{v['toml_multi']}\n"
            '"""\n'
            f'api_key = "{v["toml_key"]}"\n'
            "[database.credentials]\n"
            f'user = "{v["toml_table"]}"\n'
            "[limits]\nmax_batch = 8\n"
        ),
        "db.ini": (
            "[db]\nhost = localhost\n"
            f"password = {v['ini_password']}\n"
            f"    {v['ini_continued']}\n"
            "port = 5432\n"
        ),
        "prod.env": (
            f'SECRET_KEY="{v["env_multi_1"]}\n{v["env_multi_2"]}"\n'
            "MODEL=meta-llama/Llama-3.1-8B-Instruct\n"
            f"DB_PASSWD={v['env_plain']}\n"
        ),
        ".netrc": f"machine hub.example.com login bot password {v['netrc']}\n",
        "app.xml": f"<config>\n  <password>{v['xml']}</password>\n  <port>80</port>\n</config>\n",
        "events.jsonl": (
            f'{{"event": "start"}}\n{{"event": "login", "session": {{"token": "{v["jsonl"]}"}}}}\n'
        ),
    }
    files |= {
        "docker-compose.yml": (
            "services:\n  db:\n    image: postgres:16\n    environment:\n"
            f"      - POSTGRES_PASSWORD={v['compose']}\n      - POSTGRES_DB=app\n"
        ),
        "app.properties": (
            "server.port=8080\n"
            f"db.password={v['properties_1']}\\\n    {v['properties_2']}\n"
            "db.user=svc\n"
        ),
        "settings.jsonc": (
            '{\n  // the service account\n  "password":\n'
            f'  "{v["jsonc_next"]}",\n  "port": 1\n}}\n'
        ),
        ".pgpass": f"db.internal:5432:app:svc:{v['pgpass']}\n",
        "embedded.py": (
            'KEY = """-----BEGIN PRIVATE KEY-----\n'
            f"{v['py_pem_body']}\n"
            '-----END PRIVATE KEY-----"""\nprint(KEY)\n'
        ),
    }
    for name, body in files.items():
        (root / name).write_text(body)
    return sorted(files)


def pointers(doc: Any, prefix: str = "") -> Iterator[str]:
    yield prefix
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield from pointers(value, f"{prefix}/{key.replace('~', '~0').replace('/', '~1')}")
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            yield from pointers(value, f"{prefix}/{i}")


class World:
    def __init__(self, root: Path, shaped: dict[str, str], keyed: dict[str, str]) -> None:
        self.root = root
        self.prints = fingerprints(shaped)
        self.prints.update({name: [value] for name, value in keyed.items()})
        self.values = [p for parts in self.prints.values() for p in parts]
        self.files = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
        self.json_pointers = {
            name: sorted(set(pointers(json.loads((root / name).read_text()))))
            for name in ("settings.json", "config.json")
        }
        self.hosts: dict[str, SandboxedHost] = {}

    def leaks(self, blob: str) -> list[str]:
        return [name for name, parts in self.prints.items() if any(p in blob for p in parts)]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    root = tmp_path_factory.mktemp("bykey") / "deploy"
    root.mkdir()
    shaped = corpus()
    keyed = keyed_values()
    plant(root, shaped)
    plant_structured(root, keyed)
    made = World(root, shaped, keyed)
    made.hosts["local"] = SandboxedHost(
        "local", LocalHost(), HostConfig(roots=[str(root)]), Limits()
    )
    return made


def _ssh(sshd: SSHServer, world: World, tmp: Path, python: str) -> SandboxedHost:
    from sleuth.hosts.ssh import SSHHost

    host = SSHHost(
        "remote",
        sshd.alias,
        known_hosts=tmp / "kh",
        ssh_config_path=sshd.ssh_config_path,
        user_known_hosts=sshd.known_hosts_path,
    )
    return SandboxedHost(
        "remote", host, HostConfig(roots=[str(world.root)], python=python), Limits()
    )


def calls(world: World, host: str) -> st.SearchStrategy[tuple[str, dict[str, Any]]]:
    files = st.sampled_from(world.files)
    fragments = st.sampled_from(world.values).flatmap(
        lambda v: st.integers(1, min(len(v), 24)).map(lambda n: v[:n])
    )
    keys = st.sampled_from(["password", "api_key", "token", "secret", "user", "auth", "key"])
    patterns = st.one_of(
        fragments,
        st.tuples(keys, st.sampled_from(['": "', ": ", "=", " = ", ""]), fragments).map(
            lambda t: "".join(t)
        ),
        st.sampled_from([".", "^", "[A-Za-z0-9]{8}", "REDACTED", "=", ":", "-----", "[a-z]+"]),
    )
    read_lines = st.builds(
        lambda f, s, n: ("read_lines", {"host": host, "path": f, "start": s, "end": s + n}),
        files,
        st.integers(1, 30),
        st.integers(0, 12),
    )
    grep = st.builds(
        lambda p, f, fixed, ic, c: (
            "grep",
            {
                "host": host,
                "pattern": p,
                "path": f,
                "fixed_string": fixed,
                "ignore_case": ic,
                "context": c,
            },
        ),
        patterns,
        st.one_of(st.just("."), files),
        st.booleans(),
        st.booleans(),
        st.integers(0, 3),
    )
    read_json = st.sampled_from(
        [(name, p) for name, ps in world.json_pointers.items() for p in ps]
    ).map(lambda np: ("read_json", {"host": host, "path": np[0], "pointer": np[1]}))
    list_dir = st.integers(1, 3).map(
        lambda d: ("list_dir", {"host": host, "path": ".", "depth": d})
    )
    return st.one_of(read_lines, grep, grep, read_json, list_dir)


def check(world: World, ctx: ToolContext, name: str, raw: dict[str, Any]) -> None:
    result = execute(ctx, name, raw)
    figures.count("secrets_by_key_calls")
    assert "internal error" not in (result.error or ""), result.error
    # What the model, the transcript and the terminal get: the tool's result after the
    # pattern redaction every face applies (loop.py, tools_cmd.py, the transcript store).
    seen = redact_data(result.model_dump(exclude={"argv"}))
    if name == "grep":  # the model's own pattern, echoed back, tells it nothing new
        seen["output"] = seen["output"].replace(f"no matches for {raw['pattern']!r}", "")
    shown = json.dumps(seen, ensure_ascii=False)
    leaked = world.leaks(shown)
    figures.count("secrets_leaked_bytes", sum(len(world.prints[n][0]) for n in leaked))
    assert not leaked, f"{name} {raw!r} leaked {leaked}: {shown[:600]}"


def run_property(world: World, host: str, deep: bool) -> None:
    ctx = ToolContext(hosts={host: world.hosts[host]})

    @settings(
        max_examples=CI_EXAMPLES[host] * (DEEP_FACTOR if deep else 1),
        deadline=None,
        derandomize=not deep,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(call=calls(world, host))
    def prop(call: tuple[str, dict[str, Any]]) -> None:
        check(world, ctx, *call)

    prop()


def test_no_planted_value_reaches_any_read_tool_output_locally(world: World, deep: bool) -> None:
    figures.touch("secrets_leaked_bytes")
    run_property(world, "local", deep)


@pytest.mark.ssh
def test_no_planted_value_reaches_any_read_tool_output_over_sshd(
    world: World, sshd: SSHServer, tmp_path: Path, deep: bool
) -> None:
    world.hosts["remote"] = _ssh(sshd, world, tmp_path, fast_python(tmp_path))
    try:
        run_property(world, "remote", deep)
    finally:
        world.hosts["remote"].host.close()


@pytest.mark.ssh
def test_a_host_without_python_is_scanned_over_sftp(
    world: World, sshd: SSHServer, tmp_path: Path, deep: bool
) -> None:
    world.hosts["sftp"] = _ssh(sshd, world, tmp_path, "/nonexistent/python3")
    try:
        run_property(world, "sftp", deep)
    finally:
        world.hosts["sftp"].host.close()


@pytest.fixture(autouse=True)
def _fresh_registry() -> Iterator[None]:
    clear_registered_secrets()
    yield
    clear_registered_secrets()


@pytest.mark.ssh
def test_no_planted_value_reaches_the_transcript_or_the_model(
    world: World, sshd: SSHServer, tmp_path: Path
) -> None:
    """One investigation through the real SDK: every file read whole and from each line,
    every JSON pointer, greps for each value's prefix; the model then repeats all it saw."""
    from sleuth.agent.brains.anthropic import AnthropicBrain
    from sleuth.agent.session import start_investigation
    from sleuth.config import Settings
    from tests.scripted_api import ScriptedAPI, message, text, tool_use

    remote = _ssh(sshd, world, tmp_path, fast_python(tmp_path))
    ctx = ToolContext(hosts={"local": world.hosts["local"], "remote": remote})
    wanted: list[tuple[str, dict[str, Any]]] = []
    for host in ("local", "remote"):
        wanted += [
            ("read_lines", {"host": host, "path": f, "start": s})
            for f in world.files
            for s in (1, 3, 4)
        ]
        wanted += [
            ("read_json", {"host": host, "path": f, "pointer": p})
            for f, ps in world.json_pointers.items()
            for p in ps
        ]
        wanted += [
            ("grep", {"host": host, "path": ".", "pattern": v[:3], "context": 1})
            for v in world.values[:12]
        ]
    calls = [tool_use(f"toolu_{i}", name, **args) for i, (name, args) in enumerate(wanted)]

    def script(body: Any, index: int) -> Any:
        if index == 0:
            return message(text("Reading every configuration file."), *calls)
        seen = [
            b.get("content")
            for m in body["messages"]
            if isinstance(m["content"], list)
            for b in m["content"]
            if b.get("type") == "tool_result"
        ]
        return message(text("Everything I was shown:\n" + json.dumps(seen)))

    settings = Settings.model_validate({"budget": {"max_tool_calls": len(calls) + 5}})
    with ScriptedAPI(script) as api:
        brain = AnthropicBrain("claude-haiku-4-5", api_key="test-key-0000", base_url=api.url)
        inv = start_investigation("Which credentials?", brain, ctx, settings, tmp_path / "t")
        result = inv.run()
    remote.host.close()
    transcript = Path(result.transcript).read_text()
    requests = json.dumps(api.bodies())
    assert "[REDACTED:by-key password]" in transcript and "[REDACTED:by-key" in requests
    # The model's own grep patterns (3-character prefixes) are its input, not a leak; the
    # whole values are what must never appear.
    leaked = world.leaks(transcript + requests + result.answer)
    figures.count("secrets_leaked_bytes", sum(len(world.prints[n][0]) for n in leaked))
    assert leaked == []
