"""Sleuth's configuration: `sleuth.toml` here, else `~/.config/sleuth/hosts.toml`.

```toml
[hosts.gpu1]
ssh = "gpu1"                         # an alias from ~/.ssh/config, or user@host:port
roots = ["/root/sglang-main", "/models"]
allow = ["launch_server", "stop_server", "run_benchmark"]

[hosts.gpu1.approve]                 # approved without asking (else: a prompt, or --yes)
tools = ["stop_server"]
engines = ["sglang"]
commands = [["python3", "-m", "sglang.launch_server"]]
env = ["CUDA_VISIBLE_DEVICES", "HF_HOME", "NCCL_DEBUG"]  # what a launch's `env` may set

[groups]                             # host groups: names and glob patterns over the hosts
decode = ["gpu-d*"]                  # above and the aliases of ~/.ssh/config

[groups.prefill]                     # the long form: defaults for members known only from
hosts = ["gpu-p*"]                   # ~/.ssh/config, and the rules a fleet call of a
roots = ["/models"]                  # mutating tool needs (`host = "@prefill"`)
[groups.prefill.approve]
tools = ["stop_server"]

[fleet]
concurrency = 32                     # hosts a fleet call reaches at once
host_timeout_s = 120                 # one host's share of a fleet call

[limits]
timeout_s = 30

[budget]
max_turns = 30

[brain]                              # optional: flags and environment win over these
provider = "openai"                  # anthropic | openai | playbook
model = "Qwen/Qwen3-8B"
base_url = "http://gpu1:8000/v1"

[prices."Qwen/Qwen3-8B"]             # USD per million tokens, for the cost budget
input = 0.10
output = 0.40

[sign]                               # transcripts are signed with ssh-agent's key by default
key = "~/.ssh/id_ed25519"            # or this key (the agent's copy when it holds it)
allowed_signers = "~/.config/sleuth/allowed_signers"   # what `sleuth verify` checks against

[ledger]
path = "~/.local/state/sleuth/ledger.jsonl"   # the default ($XDG_STATE_HOME/sleuth/...)
```
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from sleuth.config.containers import (
    Runtime,
    pods_problem,
    reach_problem,
)
from sleuth.config.prometheus import PrometheusSettings as PrometheusSettings

CONFIG_NAME = "sleuth.toml"
_ENV_RULE = re.compile(r"[A-Z_][A-Z0-9_]*\*?|\*")
"""An approve.env entry: a name, or a name prefix ending in `*`."""
_GROUP_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
ALL_HOSTS = "all"
"""The group every run has: all of its hosts but `local`; sleuth.toml cannot redefine it."""
USER_CONFIG = Path("~/.config/sleuth/hosts.toml")
LOCAL = "local"


class ConfigError(Exception):
    """The configuration file is wrong; the message names the file, line and key."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ApprovalRules(_Strict):
    """Calls approved without asking, per host: data, read by `tools.policy`.

    `allow` says which mutating tools may run on a host at all; these rules say which of
    those calls need no person to say yes. A custom command (`launch_server` with
    `engine = "command"`) runs unasked only when its argv starts with one of `commands`,
    and `--yes` never approves one that no rule matches.
    """

    tools: list[str] = Field(default_factory=list)
    """Mutating tools approved without asking, whatever their input (not launch_server,
    which is approved per engine and per command)."""
    engines: list[Literal["sglang", "vllm"]] = Field(default_factory=list)
    """launch_server presets approved without asking."""
    commands: list[list[str]] = Field(default_factory=list)
    """Argument-vector prefixes: a custom launch_server command whose argv starts with one
    of these is approved without asking, e.g. [["python3", "-m", "sglang.launch_server"]];
    so is any tool's model-chosen interpreter (python_env, preflight, run_benchmark, a
    benchmark's `load.python`) named by one, e.g. [["/opt/venv/bin/python"]]."""
    env: list[str] = Field(default_factory=list)
    """Environment variable names a model may set for a launch, e.g. ["CUDA_VISIBLE_DEVICES",
    "HF_HOME", "NCCL_DEBUG"]. A glob covers ordinary names only: a variable that makes a
    program load or run something (LD_PRELOAD, PYTHONPATH, SGLANG_LOGGING_CONFIG_PATH,
    TRITON_PTXAS_PATH, a code cache, a proxy; tools/startup_env.py) must be named exactly."""


class HostConfig(_Strict):
    """One host tools may act on."""

    ssh: str | None = None
    """An alias from ~/.ssh/config or user@host:port; None for the local host."""
    via: str | None = None
    """A container or pod host: the host (`local` or another [hosts] entry) that runs its
    runtime (`containers.py`)."""
    container: str | None = None
    runtime: Runtime | None = None
    """None: whichever of docker, podman and nerdctl the via host has, in that order."""
    pod: str | None = None
    """`NAMESPACE/NAME`, with `runtime = "kubectl"`."""
    context: str | None = None
    """The kubeconfig context, with `runtime = "kubectl"`."""
    roots: list[str] = Field(default_factory=list)
    """The folders tools may read; everything else is refused."""
    allow: list[str] = Field(default_factory=list)
    """Mutating tools permitted on this host (launch_server, stop_server, run_benchmark)."""
    python: str = "python3"
    """The interpreter Sleuth's own read-only helper programs run with on this host."""
    approve: ApprovalRules = Field(default_factory=ApprovalRules)
    """Which of the allowed mutating calls are approved without asking."""


class GroupConfig(_Strict):
    """A named group of hosts: `--hosts NAME` picks them, `host = "@NAME"` runs a read-only
    tool on all of them at once (a fleet call). `decode = ["gpu-d*"]` is short for
    `[groups.decode] hosts = ["gpu-d*"]`."""

    hosts: list[str] = Field(default_factory=list)
    """Host names and glob patterns (`gpu-d*`, `node-[0-7]`) over the hosts of [hosts] and the
    aliases of ~/.ssh/config."""
    pods: str | None = None
    """Instead of `hosts`: `NAMESPACE/SELECTOR` (`serving/app=sglang`), one host per pod,
    listed by kubectl on `via` when a run starts (`containers.py`)."""
    via: str | None = None
    container: str | None = None
    context: str | None = None
    roots: list[str] = Field(default_factory=list)
    """Roots of the members known only from ~/.ssh/config; a member with its own [hosts.NAME]
    keeps its own."""
    python: str = "python3"
    """The interpreter of the members known only from ~/.ssh/config."""
    allow: list[str] = Field(default_factory=list)
    """Mutating tools permitted on the members known only from ~/.ssh/config."""
    approve: ApprovalRules = Field(default_factory=ApprovalRules)
    """The rules a fleet call of a mutating tool on this group needs: it is never fanned out
    without one (no `--yes`, no prompt), and each member must still `allow` the tool."""

    @model_validator(mode="before")
    @classmethod
    def _short_form(cls, raw: Any) -> Any:
        return {"hosts": raw} if isinstance(raw, list) else raw


class FleetSettings(_Strict):
    """How a fleet call (`host = "@GROUP"`) reaches its hosts."""

    concurrency: int = Field(32, ge=1, le=1024)
    """Hosts a fleet call runs on at once (`--fleet-concurrency`)."""
    host_timeout_s: float = Field(120.0, gt=0)
    """A host that has not answered this long after its call began is reported as timed out;
    the others' answers do not wait for it."""


class Limits(_Strict):
    """Caps applied to every tool call unless the call asks for less."""

    timeout_s: float = Field(30.0, gt=0)
    max_output_bytes: int = Field(64_000, ge=1)
    max_output_lines: int = Field(2_000, ge=1)


class Budget(_Strict):
    """When an investigation must stop. A field set in sleuth.toml or by a flag is in
    `model_fields_set`: a cost limit the user chose needs a priced model."""

    # The bounds are the flags' (--max-turns, --max-cost, ...): sleuth.toml may not set what
    # the command line refuses.
    max_turns: int = Field(30, ge=1)
    max_tool_calls: int = Field(120, ge=1)
    max_input_tokens: int = Field(2_000_000, ge=1)
    """Prompt tokens summed over all turns, cached ones included: how much the model read."""
    max_output_tokens: int = Field(100_000, ge=1)
    max_cost_usd: float = Field(5.0, ge=0)
    """USD, priced with the model's [prices] entry."""
    max_wall_s: float = Field(1_800.0, ge=1)
    """Wall-clock seconds from the start of the run, resumed runs counting their past time."""


class ModelPrice(_Strict):
    """USD per million tokens."""

    input: float = Field(ge=0)
    """Per million prompt tokens not read from or written to the provider's prompt cache."""
    output: float = Field(ge=0)
    cache_write: float = Field(0.0, ge=0)
    """Per million prompt tokens written to the prompt cache."""
    cache_read: float = Field(0.0, ge=0)
    """Per million prompt tokens read from the prompt cache."""


Provider = Literal["anthropic", "openai", "playbook"]
ToolChoice = Literal["auto", "required", "none"]


class BrainSettings(_Strict):
    """Which brain answers and how it talks to its provider; flags and environment win."""

    provider: Provider | None = None
    """None picks by what is configured: an Anthropic key, else an OpenAI key or base URL, else
    the offline playbook."""
    model: str | None = None
    base_url: str | None = None
    """An OpenAI-compatible endpoint (http://gpu1:8000/v1); OPENAI_BASE_URL also sets it."""
    max_tokens: int = Field(4096, ge=1)
    """Output tokens per turn; fitted down to what an OpenAI-compatible server has room for."""
    attempts: int = Field(3, ge=1, le=20)
    """HTTP attempts per turn (the SDK's own retries are off), within the wall-time budget."""
    tool_choice: ToolChoice | None = None
    """OpenAI-compatible only: `required` asks for a call on the first turn and `auto` after."""


class SignSettings(_Strict):
    """Signing transcripts (SSHSIG, namespace `sleuth-transcript`); `--no-sign` turns it off."""

    key: str | None = None
    """A private key file, or its `.pub` when ssh-agent holds the private half. None: the
    agent's first key (Ed25519 before ECDSA before RSA); no agent key, no signature."""
    allowed_signers: str | None = None
    """An OpenSSH allowed_signers file `sleuth verify` checks signers against when
    `--allowed-signers` is not given."""


class LedgerSettings(_Strict):
    """The local ledger each session's final chain head is appended to."""

    path: str | None = None
    """None: $XDG_STATE_HOME/sleuth/ledger.jsonl, else ~/.local/state/sleuth/ledger.jsonl."""


DEFAULT_PRICES: dict[str, ModelPrice] = {
    "claude-sonnet-5-5": ModelPrice(input=2.0, output=10.0, cache_write=2.5, cache_read=0.20),
    "claude-sonnet-5": ModelPrice(input=2.0, output=10.0, cache_write=2.5, cache_read=0.20),
    "claude-sonnet-4-5": ModelPrice(input=3.0, output=15.0, cache_write=3.75, cache_read=0.30),
    "claude-opus-4-1": ModelPrice(input=15.0, output=75.0, cache_write=18.75, cache_read=1.50),
    "claude-haiku-4-5": ModelPrice(input=1.0, output=5.0, cache_write=1.25, cache_read=0.10),
}


class Settings(_Strict):
    hosts: dict[str, HostConfig] = Field(default_factory=dict)
    groups: dict[str, GroupConfig] = Field(default_factory=dict)
    fleet: FleetSettings = Field(default_factory=FleetSettings)
    limits: Limits = Field(default_factory=Limits)
    budget: Budget = Field(default_factory=Budget)
    brain: BrainSettings = Field(default_factory=BrainSettings)
    prices: dict[str, ModelPrice] = Field(default_factory=lambda: dict(DEFAULT_PRICES))
    sign: SignSettings = Field(default_factory=SignSettings)
    ledger: LedgerSettings = Field(default_factory=LedgerSettings)
    prometheus: PrometheusSettings = Field(default_factory=PrometheusSettings)
    known_hosts: str = "~/.config/sleuth/known_hosts"
    """Sleuth's own known_hosts file, consulted after ~/.ssh/known_hosts."""
    source: str | None = None
    """The file these settings came from, for error messages that point at it."""


def find_config(cwd: Path | None = None) -> Path | None:
    """The config file in force: ./sleuth.toml, else ~/.config/sleuth/hosts.toml."""
    here = (cwd or Path.cwd()) / CONFIG_NAME
    if here.is_file():
        return here
    user = USER_CONFIG.expanduser()
    return user if user.is_file() else None


def load_settings(path: Path | None = None, cwd: Path | None = None) -> Settings:
    """Load settings and add the built-in `local` host rooted at the working directory."""
    cwd = cwd or Path.cwd()
    path = path or find_config(cwd)
    settings = Settings() if path is None else _parse(path)
    local = settings.hosts.get(LOCAL, HostConfig())
    if local.ssh is not None:
        raise ConfigError(f"{path}: host 'local' is built in and cannot have an `ssh` key")
    if not local.roots:
        local = local.model_copy(update={"roots": [str(cwd)]})
    settings.hosts[LOCAL] = local
    return settings


def _parse(path: Path) -> Settings:
    text = path.read_text(encoding="utf-8")
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    groups: dict[str, Any] = raw["groups"] if isinstance(raw.get("groups"), dict) else {}
    inventory = groups.pop("from_inventory", None)
    inventory_roots = groups.pop("from_inventory_roots", [])
    try:
        settings = Settings.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        keys = [str(k) for k in first["loc"]]
        line = locate_key(text, keys)
        where = f"{path}:{line}" if line else str(path)
        raise ConfigError(f"{where}: key `{'.'.join(keys)}`: {first['msg']}") from exc
    settings.source = str(path)
    if inventory is not None:
        from sleuth.config.inventory_hosts import add_inventory

        line = locate_key(text, ["groups", "from_inventory"])
        add_inventory(settings, path.parent, inventory, inventory_roots, f"{path}:{line}")
    for name, host in settings.hosts.items():
        if name != LOCAL and not host.ssh and host.via is None:
            line = locate_key(text, ["hosts", name])
            raise ConfigError(
                f'{path}:{line}: host `{name}` needs `ssh = "alias or user@host:port"` '
                "(or `via` and `container` for a container)"
            )
        if unreachable := reach_problem(name, host, settings.hosts):
            keys, why = unreachable
            line = locate_key(text, ["hosts", name, *keys])
            raise ConfigError(f"{path}:{line}: host `{name}`: {why}")
        for root in host.roots:
            if not os.path.isabs(root):
                line = locate_key(text, ["hosts", name, "roots"])
                raise ConfigError(f"{path}:{line}: host `{name}`: root {root!r} must be absolute")
        if problem := approval_problem(host):
            key, why = problem
            line = locate_key(text, ["hosts", name, "approve", key])
            raise ConfigError(f"{path}:{line}: host `{name}`: {why}")
    for name, group in settings.groups.items():
        if found := group_problem(name, group, settings):
            keys, reason = found
            line = locate_key(text, ["groups", name, *keys])
            raise ConfigError(f"{path}:{line}: group `{name}`: {reason}")
    return settings


def group_problem(
    name: str, group: GroupConfig, settings: Settings
) -> tuple[list[str], str] | None:
    """The key of a group that cannot mean what it says, and why; or None."""
    if name == ALL_HOSTS:
        return [], f"`{ALL_HOSTS}` is built in (every host of the run); give the group another name"
    if not _GROUP_NAME.fullmatch(name):
        return [], "a group name is letters, digits, `_`, `.` and `-`"
    if name in settings.hosts:
        return [], f"a host is named `{name}` too; `--hosts {name}` would mean either: rename one"
    if bad := [root for root in group.roots if not os.path.isabs(root)]:
        return ["roots"], f"root {bad[0]!r} must be absolute"
    if not group.hosts and group.pods is None:
        return ["hosts"], f"groups.{name}.hosts is empty: give host names and patterns, or `pods`"
    if found := pods_problem(group.hosts, group.pods, group.via, group.container, group.context):
        return [found[0]], found[1]
    if group.via is not None and group.via not in (*settings.hosts, LOCAL):
        return ["via"], f"via {group.via!r} is not a host in [hosts] (nor `local`)"
    if problem := rules_problem(group.approve):
        key, why = problem
        return ["approve", key], why
    return None


def approval_problem(host: HostConfig) -> tuple[str, str] | None:
    """The key of a host's approval rules that cannot mean what it says, and why; or None."""
    if problem := rules_problem(host.approve):
        return problem
    rules = host.approve
    needs = [("tools", tool) for tool in rules.tools]
    needs += [("engines", "launch_server")] if rules.engines else []
    # `commands` approve a model-chosen program for any tool (a read-only one's `python` too).
    needs += [("env", "launch_server")] if rules.env else []
    for key, tool in needs:
        if tool not in host.allow:
            return key, (
                f"approve.{key} needs {tool} in `allow`: a call must be allowed before it can "
                f"be approved. Set `allow = {[*host.allow, tool]!r}`"
            )
    return None


def rules_problem(rules: ApprovalRules) -> tuple[str, str] | None:
    """The key of approval rules (a host's or a group's) that cannot mean what it says."""
    if "launch_server" in rules.tools:
        return "tools", (
            "approve.tools cannot list launch_server: it is approved per engine and per "
            'command; set approve.engines = ["sglang", "vllm"] and/or approve.commands'
        )
    if any(not prefix or not all(prefix) for prefix in rules.commands):
        return "commands", "approve.commands holds an empty argv or argument; give argv prefixes"
    if bad := [name for name in rules.env if not _ENV_RULE.fullmatch(name)]:
        return "env", (
            f"approve.env holds {bad[0]!r}: give variable names (A-Z, 0-9, _), a glob "
            'such as "NCCL_*" for ordinary names'
        )
    return None


def locate_key(text: str, keys: list[str]) -> int | None:
    """Best-effort line number (1-based) of a dotted key in TOML text."""
    lines = text.splitlines()
    table_line: int | None = None
    # Longest table header that prefixes the key path, e.g. [hosts.gpu1] for hosts.gpu1.roots.
    for depth in range(len(keys), 0, -1):
        header = re.compile(
            r"^\s*\[\s*" + r"\s*\.\s*".join(map(re.escape, keys[:depth])) + r"\s*\]"
        )
        for i, line in enumerate(lines):
            if header.match(line):
                table_line = i
                rest = keys[depth:]
                if not rest:
                    return i + 1
                key = re.compile(r"^\s*" + re.escape(rest[0]) + r"\s*=")
                for j in range(i + 1, len(lines)):
                    if lines[j].lstrip().startswith("["):
                        break
                    if key.match(lines[j]):
                        return j + 1
                return i + 1
    if table_line is None:
        key = re.compile(r"^\s*" + re.escape(keys[-1]) + r"\s*=")
        for i, line in enumerate(lines):
            if key.match(line):
                return i + 1
    return None
