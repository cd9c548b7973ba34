"""engine_probe.py on a host: the engine pages fetched there, as typed data.

The request travels on stdin (never the command line); the program connects only to the
host's own listening addresses, reads each body up to `PAGE_CAP` bytes within `PAGE_TIMEOUT_S`,
and redacts secret-named keys with Sleuth's rules before anything leaves the host.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from sleuth.hosts.policy import SandboxedHost
from sleuth.tools.files.keyed_secrets import RULES
from sleuth.tools.results import ToolError

PATHS = ["/v1/models", "/version", "/get_server_info", "/server_info", "/health", "/metrics"]
"""The pages read, in order; the first answers whether anything listens at all."""
PAGE_CAP = 2 << 20
PAGE_TIMEOUT_S = 5.0
ANSWER_CAP = 24 << 20
SAMPLE_EVERY_S = 1.0


class Page(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    status: int | None = None
    error: str | None = None
    cut: bool = False
    seconds: float = 0.0
    at: float = 0.0
    body: Any = Field(None, alias="json")
    """The body parsed as JSON (secret keys redacted on the host), else None."""
    text: str | None = None
    """The body when it is not JSON (Prometheus text)."""


class Target(BaseModel):
    host: str
    port: int
    address: str | None
    refused: str | None = None
    pages: dict[str, Page] = Field(default_factory=dict)
    window: list[Page] = Field(default_factory=list)


class Listener(BaseModel):
    address: str
    port: int
    pid: int | None = None


class ProbeAnswer(BaseModel):
    listening: list[Listener]
    targets: list[Target]


def probe(
    sandbox: SandboxedHost,
    targets: list[tuple[str, int]] | None,
    *,
    window_s: float = 0.0,
    pids: list[int] | None = None,
    ports: list[int] | None = None,
    gauge_prefixes: list[str] | None = None,
) -> tuple[ProbeAnswer, list[str]]:
    """Run engine_probe.py once: `targets` (host, port) as the host sees them, or None to
    probe the ports that the processes `pids` listen on and those of `ports` that listen."""
    request: dict[str, Any] = {
        "targets": None if targets is None else [{"host": h, "port": p} for h, p in targets],
        "pids": pids or [],
        "ports": ports or [],
        "paths": PATHS,
        "window_s": window_s,
        "sample_every_s": SAMPLE_EVERY_S,
        "gauge_prefixes": gauge_prefixes or [],
        "cap_bytes": PAGE_CAP,
        "timeout_s": PAGE_TIMEOUT_S,
        "key_rules": json.loads(RULES),
    }
    pages = len(PATHS) * max(1, len(targets or []) + len(pids or []) + len(ports or []))
    # A page may take its whole timeout and one last read past it (a starved engine answers
    # slowly, but answers): the cap is only there to end a probe that hangs.
    timeout = window_s + 2 * PAGE_TIMEOUT_S * (pages + 2) + 30.0
    run = sandbox.run_program(
        "engine_probe.py", [], secrets=request, timeout=timeout, max_bytes=ANSWER_CAP
    )
    where = f"the engine probe on host {sandbox.name!r}"
    if run.timed_out:
        raise ToolError(f"{where} timed out after {timeout:.0f} s")
    if run.exit_code != 0 or run.stdout_cut:
        err = run.stderr.decode(errors="replace").strip().splitlines()
        last = err[-1] if err else "no message"
        cut = f" (its answer passed {ANSWER_CAP:,} bytes)" if run.stdout_cut else ""
        raise ToolError(
            f"{where} failed (exit {run.exit_code}){cut}: {last}. It needs "
            f"{sandbox.config.python!r} on the host"
        )
    return ProbeAnswer.model_validate_json(run.stdout), run.argv
