"""The transcript's event schema: plain pydantic data, versioned.

A transcript is JSON Lines, one event per line. Every event carries `seq`,
`ts`, `type`, its payload, `prev` (the previous event's hash, "" for the first)
and `hash` (sha256 of the canonical JSON of the event without `hash`). The
store fills the envelope; producers build payloads with the envelope left at
its defaults.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator

from sleuth.transcripts.results import ToolResult

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
    ssh: str = ""
    """The SSH alias or target the host was reached by ("" for this machine)."""
    real_roots: list[str] = Field(default_factory=list)
    """The roots as the host resolved them at the start ([] when it could not be reached).
    A fleet call masks these, the roots, the name and the alias in its comparison."""
    container: dict[str, str] = Field(default_factory=dict)
    """A container or pod host: what every call of the session read, as the runtime reported
    it at the start: via host, runtime, container or pod, container id, image, its id and
    digest, state. Empty for other hosts."""


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
    prefix_unchecked: str | None = None
    """Set when `sleuth resume --trust-unsigned` went on from events that no allowed
    signature vouched for: why not. `verify` never counts those events as signed."""
    client: dict[str, str] | None = None
    """The MCP client's name and version, for a `sleuth mcp` session (brain "mcp")."""
    brain_options: BrainOptions | None = None
    """None in transcripts written before brains recorded their options."""
    groups: dict[str, list[str]] = Field(default_factory=dict)
    """The host groups a fleet call (`host="@NAME"`) could name, with their members."""


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
    """Prompt tokens outside the prompt cache (the cached ones are counted below)."""
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0


class Retry(BaseModel):
    attempt: int
    """How many attempts had been sent before this one."""
    reason: str
    """What failed the last attempt: `HTTP <status>` (with its retry-after) or a connection
    error."""
    wait_s: float
    """Seconds from the last attempt's answer (or its sending) to this attempt."""


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
    """One tool call as it was answered: what was asked, and the result the model was given
    (capped and redacted), as the tool returned it."""

    type: Literal["tool_executed"] = "tool_executed"
    call_id: str
    tool: str
    input: dict[str, Any]
    host: str = ""
    result: ToolResult
    fleet: str | None = None
    """For one host's part of a fleet call (`host="@GROUP"`): the fleet call's id. The fleet
    call's own event, recorded after its parts, holds the grouped result."""

    @model_validator(mode="before")
    @classmethod
    def _lift_flat_result(cls, raw: Any) -> Any:
        """Transcripts written before the result was embedded carry its fields beside the
        call's; read them as the embedded result (the stored line, which the hash covers, is
        never rewritten)."""
        if not isinstance(raw, dict) or "result" in raw:
            return raw
        lifted = {k: v for k, v in raw.items() if k not in _RESULT_FIELDS}
        lifted["result"] = {k: v for k, v in raw.items() if k in _RESULT_FIELDS}
        return lifted


_RESULT_FIELDS = frozenset(ToolResult.model_fields)


class ApprovalEvent(_Event):
    type: Literal["approval"] = "approval"
    call_id: str = ""
    tool: str
    host: str
    input: dict[str, Any]
    """The call's input as shown for approval: environment values hidden."""
    argv: list[str] | None = None
    """The command line the call would run, computed before anything ran."""
    env: list[str] = Field(default_factory=list)
    """The names of the environment variables the call sets (their values are not shown)."""
    approved: bool
    by: str
    reason: str = ""
    rule: str = ""
    """The rule that decided (`hosts.H.approve.commands[0] = [...]`, `--yes ...`, `prompt`)."""


class Refusal(StrEnum):
    """Why the grounding check refused one piece of evidence: the rule it failed."""

    UNKNOWN_CALL = "unknown_call"
    """The call id names no tool call of the session."""
    SAME_TURN = "same_turn"
    """The call ran in the finding's own turn: the model had not seen its output yet."""
    ERROR_RESULT = "error_result"
    """The call failed, and the claim is not about that failure."""
    TOO_SHORT = "too_short"
    """Under 2 words or 8 characters, and not a whole line or a whole `key: value` (or a
    reference to blank lines)."""
    BARE_NUMBER = "bare_number"
    """A number quoted without its key, on no line that names what the claim is about."""
    CUT_IN_WORD = "cut_in_word"
    """Found only cut inside a word or a number, and not groundable once trimmed: shorter than
    24 characters, a number cut in two, or too short once the cut words are trimmed."""
    ECHO = "echo"
    """Found only inside an echo of the call's own arguments."""
    NOT_FOUND = "not_found"
    """Not in the output, even with whitespace ignored and `...` read as a gap."""
    LINES_OUT_OF_RANGE = "lines_out_of_range"
    """A reference to lines the call's output does not show."""
    TOO_MANY_LINES = "too_many_lines"
    """A reference to more lines than a reader can check at a glance."""
    LINES_CHANGED = "lines_changed"
    """(Replay) the lines a reference cites hold other text today than when recorded."""
    UNKNOWN_HOST = "unknown_host"
    """`hosts` names a host that has no output in the call (not a fleet call, or not a host
    of its group)."""


class Evidence(BaseModel):
    """One piece of a finding's evidence: a quote of a call's output, or a reference to its
    lines (as the output showed them to the model), with the grounding check's verdict."""

    call_id: str = Field(description="The id of the tool call whose output holds the evidence.")
    quote: str = Field("", description="Text copied from that call's output; empty for lines.")
    lines: str | None = Field(None, description='Lines of that output cited instead: "12-14".')
    text: str | None = Field(
        None,
        description="Set by the grounding check: a reference's lines as recorded, or what a quote "
        "cut inside a word was grounded on once trimmed to whole words.",
    )
    grounded: bool | None = Field(None, description="Set by the grounding check, not the model.")
    failure: Refusal | None = Field(None, description="The rule a refused piece failed.")
    line: int | None = Field(
        None, description="For a refused quote found in the output: the line it was found on."
    )
    hosts: list[str] = Field(
        default_factory=list,
        description="For a fleet call: the hosts (names or ranges like gpu-[01-06]) whose own "
        "output holds the evidence; each was checked.",
    )

    @property
    def shown(self) -> str:
        """What the evidence shows a reader: a reference's lines, else the quote."""
        return self.text if self.lines and self.text is not None else self.quote


class EvidenceCheck(Evidence):
    """The grounding check's verdict on one piece of evidence, with the sentence the model was
    told when it was refused (report_finding's `data.quotes`)."""

    grounded: bool
    why: str = ""


class Finding(BaseModel):
    claim: str
    verdict: Verdict
    confidence: float = Field(ge=0.0, le=1.0)
    evidence: list[Evidence] = Field(default_factory=list)
    next_steps: list[str] = Field(default_factory=list)
    grounded: bool = False
    """True when every piece of evidence passed the grounding check."""


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
