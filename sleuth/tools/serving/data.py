"""What the serving tools return as data: `ToolResult.data` is one of these, dumped.

A reader of a result validates it back, e.g. `ServerStatus.model_validate(result.data)`.
A part that is absent (a vLLM server has no SGLang server info) is left out of the data,
not written as null.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, SerializerFunctionWrapHandler, model_serializer

from sleuth.tools.capacity.launch_check import KvCheck
from sleuth.tools.serving.ctl import IgnoredRecord, ServerProcess
from sleuth.tools.serving.diagnose import Diagnosis
from sleuth.tools.serving.engines import VllmEntry
from sleuth.tools.serving.preflight import PreflightReport


class _Data(BaseModel):
    OPTIONAL: ClassVar[tuple[str, ...]] = ()
    """Fields left out of the data when None."""

    @model_serializer(mode="wrap")
    def _leave_out_absent(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        return {k: v for k, v in data.items() if k not in self.OPTIONAL or v is not None}


class Milestone(BaseModel):
    t_s: float
    """Seconds after launch, to within one poll."""
    name: str
    line: str
    """The log line that marks it."""


class LaunchData(_Data):
    """launch_server's data: the server, how its start went, and on failure why."""

    OPTIONAL = ("entry_point", "diagnosis", "stopped", "kv_check", "preflight")
    server_id: str
    ready: bool
    outcome: Literal["ready", "failed", "exited", "timeout"]
    engine: str
    port: int
    pid: int
    pgid: int
    argv: list[str]
    env_names: list[str]
    log: str
    elapsed_s: float
    milestones: list[Milestone]
    failure_line: str | None
    exit_code: int | None
    host: str
    entry_point: VllmEntry | None = None
    """vLLM only: its console script, or the module form when the script cannot run."""
    diagnosis: Diagnosis | None = None
    stopped: str | None = None
    """Not ready: what stopping its process group did."""
    kv_check: KvCheck | None = None
    """The engine's KV line beside capacity_plan's prediction for this launch."""
    preflight: PreflightReport | None = None
    """The checks run before the launch (absent when preflight=false)."""


class RefusedLaunch(_Data):
    """launch_server's data when nothing was started: preflight found a failure, the port
    is in use, the engine is not there."""

    OPTIONAL = ("preflight",)
    ready: Literal[False] = False
    outcome: Literal["refused"] = "refused"
    argv: list[str]
    diagnosis: Diagnosis
    preflight: PreflightReport | None = None


class VllmMetrics(_Data):
    """vLLM's /metrics lines on load, KV cache and speculative decoding; counters are
    cumulative since launch."""

    OPTIONAL = ("mean_accept_length_since_launch", "acceptance_rate_since_launch")
    lines: list[str]
    mean_accept_length_since_launch: float | None = None
    acceptance_rate_since_launch: float | None = None


class ServerStatus(_Data):
    """server_status's data for one server."""

    OPTIONAL = ("models", "server_info", "metrics")
    server_id: str
    engine: str
    port: int
    pid: int
    alive: bool
    exit_code: int | None
    processes: list[ServerProcess]
    """Its live processes: group, session and descendants (workers that left the group)."""
    uptime_s: float
    stopped: bool
    """stop_server stopped it."""
    stopped_at: str | None
    ended_at: str | None
    log: str
    tail: str
    ready: bool | None
    """The health check answered 200; None when there is none to ask."""
    models: list[str] | str | None = None
    """/v1/models' ids, or why they could not be read."""
    server_info: dict[str, Any] | None = None
    """SGLang: the parts of /get_server_info about the run and speculative decoding."""
    metrics: VllmMetrics | None = None


class ServerSummary(BaseModel):
    """One server in server_status's list."""

    server_id: str
    engine: str
    port: int
    alive: bool
    exit_code: int | None
    uptime_s: float
    stopped: bool
    started_at: str | None
    stop_command: str
    """What a person runs to stop it."""


class ServerList(BaseModel):
    servers: list[ServerSummary]
    """Every live server and the newest that ended, oldest first."""
    older_not_shown: int = 0
    """Ended servers older than those, left out; their records stay on the host."""
    folder: str = ""
    """Where the records are on the host."""
    ignored: list[IgnoredRecord] = []
    """Records not read: someone other than the login user could have written them."""


class StopData(BaseModel):
    """stop_server's data."""

    server_id: str
    was_running: list[int]
    """The server's live processes when the stop began (group, session, descendants)."""
    signals: list[str]
    remaining: list[int]
    gone: bool
    waited_s: float
