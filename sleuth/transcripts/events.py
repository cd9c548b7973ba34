"""The transcript's event schema: plain pydantic data, versioned.

A transcript is JSON Lines, one event per line. Every event carries `seq`,
`ts`, `type`, its payload, `prev` (the previous event's hash, "" for the first)
and `hash` (sha256 of the canonical JSON of the event without `hash`). The
store fills the envelope; producers build payloads with the envelope left at
its defaults.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

SCHEMA_VERSION = 1
KNOWN_SCHEMA_VERSIONS = frozenset({1})
"""Transcript schema versions this release can read; `verify` rejects any other."""

Verdict = Literal["yes", "no", "partial", "unknown"]
SessionStatus = Literal[
    "answered", "budget_exhausted", "error", "interrupted", "refused", "unsupported", "closed"
]
"""unsupported: the run ended without a grounded finding (and no refusal ended it; a budget
that ended it is named in the answer). budget_exhausted: a budget ended a run that has at least
one grounded finding. closed: an MCP client ended its session (`sleuth mcp`), which has no
answer of its own."""


class _Event(BaseModel):
    model_config = ConfigDict(extra="forbid")
    seq: int = -1
    ts: str = ""
    prev: str = ""
    hash: str = ""


class HostInfo(BaseModel):
    name: str
    address: str = ""
    """user@host:port as resolved, "local" for this machine."""
    fingerprint: str = ""
    """The server's host key, SHA256:..., for SSH hosts."""
    call_mode: str = ""
    """How the file tools reached its files: "resident" (Sleuth's program for the connection),
    "exec" (that program per call), "posix" (POSIX tools), "local"; empty in older recordings."""
    roots: list[str] = Field(default_factory=list)
    allow: list[str] = Field(default_factory=list)


class ToolSpec(BaseModel):
    name: str
    description: str
    input_schema: dict[str, Any]
    mutating: bool = False


class BrainOptions(BaseModel):
    """How the brain was built, beyond its provider and model: what `sleuth resume` builds
    it with again. None where the brain has no such setting (the playbook)."""

    endpoint: str | None = None
    """The base URL requests went to."""
    max_tokens: int | None = None
    tool_choice: Literal["auto", "required", "none"] | None = None
    temperature: float | None = None
    attempts: int | None = None
    context_window: int | None = None
    """The served context the model probe read (`max_model_len`), if any."""
    seed: int | None = None


class SessionStarted(_Event):
    type: Literal["session_started"] = "session_started"
    schema_version: int = SCHEMA_VERSION
    session_id: str
    question: str
    hosts: list[HostInfo]
    brain: str
    """anthropic, openai, replay or playbook."""
    model: str | None = None
    policy: dict[str, Any] = Field(default_factory=dict)
    """Limits and the approval mode in force."""
    budget: dict[str, Any] = Field(default_factory=dict)
    versions: dict[str, str] = Field(default_factory=dict)
    tools: list[ToolSpec] = Field(default_factory=list)
    system_hash: str = ""
    """sha256 of the system prompt sent, so a replay can tell the prompt changed since."""
    tools_hash: str = ""
    """sha256 of the canonical JSON of `tools`, as declared to the model."""
    params_hash: str = ""
    """sha256 of the canonical JSON of the request parameters (brain, model, limits)."""
    resumed_from: str | None = None
    """Path of the transcript this session continues, for `sleuth resume`."""
    client: dict[str, str] | None = None
    """The MCP client's name and version, for a `sleuth mcp` session (brain "mcp")."""
    brain_options: BrainOptions | None = None
    """None in transcripts written before brains recorded their options."""


class ContentBlock(BaseModel):
    """One block of a model's response, in the Messages API's shape."""

    model_config = ConfigDict(extra="allow")
    type: Literal["text", "tool_use", "thinking", "redacted_thinking"]
    """Thinking blocks are kept as returned: the API wants them back, unchanged, next turn."""
    text: str | None = None
    id: str | None = None
    name: str | None = None
    input: dict[str, Any] | None = None


class ModelResponse(BaseModel):
    content: list[ContentBlock]
    stop_reason: str | None = None
    model: str | None = None


class Usage(BaseModel):
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0


class Retry(BaseModel):
    attempt: int
    reason: str
    wait_s: float


class ModelTurn(_Event):
    type: Literal["model_turn"] = "model_turn"
    turn: int
    request_messages: int
    request_hash: str
    """sha256 of the exact request body sent, so a replay can tell if the conversation drifted."""
    response: ModelResponse
    usage: Usage = Field(default_factory=Usage)
    cost_usd: float = 0.0
    latency_s: float = 0.0
    retries: list[Retry] = Field(default_factory=list)


class ToolExecuted(_Event):
    type: Literal["tool_executed"] = "tool_executed"
    call_id: str
    tool: str
    input: dict[str, Any]
    host: str = ""
    ok: bool
    output: str
    """Exactly the text the model was given (after capping and redaction)."""
    error: str | None = None
    error_kind: str | None = None
    """The ErrorKind of a failed call (invalid_input, policy, not_found...), for programs."""
    data: Any = None
    argv: list[list[str]] = Field(default_factory=list)
    exit_code: int | None = None
    bytes_cut: int = 0
    duration_s: float = 0.0
    reconnected: bool = False


class ApprovalEvent(_Event):
    type: Literal["approval"] = "approval"
    call_id: str = ""
    tool: str
    host: str
    input: dict[str, Any]
    approved: bool
    by: str
    reason: str = ""
    rule: str = ""
    """The rule that decided (`hosts.H.approve.commands[0] = [...]`, `--yes ...`, `prompt`)."""


class Evidence(BaseModel):
    call_id: str = Field(description="The id of the tool call whose output holds the quote.")
    quote: str = Field(description="Text copied exactly from that call's output.")
    grounded: bool | None = Field(None, description="Set by the grounding check, not the model.")


class Finding(BaseModel):
    claim: str
    verdict: Verdict
    confidence: float = Field(ge=0.0, le=1.0)
    evidence: list[Evidence] = Field(default_factory=list)
    next_steps: list[str] = Field(default_factory=list)
    grounded: bool = False
    """True when every quote was found in the output of the call it names."""


class FindingEvent(_Event):
    type: Literal["finding"] = "finding"
    call_id: str
    finding: Finding


class ErrorEvent(_Event):
    type: Literal["error"] = "error"
    where: str
    """brain, tool, store, budget..."""
    message: str


class BudgetNotice(_Event):
    type: Literal["budget_notice"] = "budget_notice"
    reason: str
    """The limit reached, said for a person; the model was told its next turn is the last."""


class Totals(BaseModel):
    turns: int = 0
    tool_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float = 0.0
    wall_s: float = 0.0


class SessionEnded(_Event):
    type: Literal["session_ended"] = "session_ended"
    status: SessionStatus
    summary: str = ""
    totals: Totals = Field(default_factory=Totals)


class SignatureEvent(_Event):
    """An SSHSIG signature over the chain head just before this event (see `sign.py`),
    written at each turn boundary; the end's signature is in the `.sig` file beside the
    transcript, since nothing may follow session_ended."""

    type: Literal["signature"] = "signature"
    head_seq: int
    head_hash: str
    signer: str
    """The key's fingerprint, SHA256:..., for people; `sshsig` carries the key itself."""
    sshsig: str
    """The armored signature, as `ssh-keygen -Y sign -n sleuth-transcript` writes it."""


class Repaired(_Event):
    """`sleuth resume` cut off a torn last line (the run died mid-event) before going on."""

    type: Literal["repaired"] = "repaired"
    dropped_bytes: int
    dropped_sha256: str
    backup: str
    """The file as it was, kept beside it: `<name>.torn`."""


Event = Annotated[
    SessionStarted
    | ModelTurn
    | ToolExecuted
    | ApprovalEvent
    | FindingEvent
    | ErrorEvent
    | BudgetNotice
    | SignatureEvent
    | Repaired
    | SessionEnded,
    Field(discriminator="type"),
]
EVENT_ADAPTER: TypeAdapter[Event] = TypeAdapter(Event)


def parse_event(raw: dict[str, Any]) -> Event:
    return EVENT_ADAPTER.validate_python(raw)
