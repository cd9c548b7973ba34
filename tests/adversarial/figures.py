"""The figures SECURITY.md quotes, collected while the adversarial suite runs.

Tests call `figures.count(name, n)` (or `figures.note(name, value)`); with
`pytest tests/adversarial --figures PATH` the totals are written to PATH as JSON
when the session ends. Running this module prints them as the markdown table:

    python -m tests.adversarial.figures figures.json
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from typing import Any

FIGURES: dict[str, dict[str, str]] = {
    "fuzz_examples": {"what": "fuzzed tool calls over SSH", "expect": ">= 1000"},
    "fuzz_commands_executed": {"what": "injected commands executed (canary)", "expect": "0"},
    "fuzz_foreign_programs": {
        "what": "programs run that are not Sleuth's own (read-only tools)",
        "expect": "0",
    },
    "fuzz_reads_outside_roots": {"what": "outputs holding the SECRET marker", "expect": "0"},
    "fuzz_unhandled": {"what": "exceptions or internal errors", "expect": "0"},
    "fuzz_command_shell_runs": {
        "what": "engine=command argv run through a shell",
        "expect": "0",
    },
    "injection_unapproved_mutations": {
        "what": "mutating calls run without approval",
        "expect": "0",
    },
    "injection_outside_reads": {"what": "injected reads outside the roots served", "expect": "0"},
    "injection_attempts_recorded": {
        "what": "injected attempts missing from the transcript",
        "expect": "0",
    },
    "faults_hangs_or_corrupt": {
        "what": "faults ending in a hang or an unverifiable transcript",
        "expect": "0",
    },
    "bombs_over_cap": {"what": "tool outputs over their byte/line caps", "expect": "0"},
    "bombs_silent_cuts": {"what": "cuts not announced in the output", "expect": "0"},
    "secrets_leaked_bytes": {
        "what": "secret bytes in transcripts, model requests or terminal",
        "expect": "0",
    },
    "secrets_by_key_calls": {
        "what": "read-tool calls drawn over the planted by-key corpus",
        "expect": ">= 1000",
    },
    "secrets_surface_calls": {
        "what": "calls over the redaction corpus through `sleuth tool --json` and MCP",
        "expect": ">= 90",
    },
    "secrets_surface_leaks": {
        "what": "canaries (8+ characters) on any surface: --json, MCP, transcripts, show",
        "expect": "0",
    },
    "secrets_grep_oracle_differences": {
        "what": "prefix searches whose result told a right guess from a wrong one",
        "expect": "0",
    },
    "host_keys_accepted": {"what": "unknown, changed or revoked keys accepted", "expect": "0"},
    "consent_injected_commands_run": {
        "what": "injected custom commands run under --yes with no matching rule",
        "expect": "0",
    },
    "consent_answers_misapplied": {
        "what": "prompt answers applied to another call than the one shown",
        "expect": "0",
    },
    "mcp_forged_consent_variants": {
        "what": "forged or replayed MCP consent answers tried",
        "expect": ">= 19",
    },
    "mcp_forged_consent_runs": {
        "what": "mutating MCP calls run on a forged or replayed answer",
        "expect": "0",
    },
    "consent_model_python_runs": {
        "what": "model-chosen interpreters run for a refused call",
        "expect": "0",
    },
    "env_injection_variants": {
        "what": "start-up environment injections tried under --yes",
        "expect": ">= 20",
    },
    "env_injection_runs": {
        "what": "start-up environment injections that ran (canary)",
        "expect": "0",
    },
    "model_programs_variants": {
        "what": "a model-chosen `python` from a model folder given to a read-only tool",
        "expect": ">= 20",
    },
    "nested_inputs_variants": {
        "what": "a model-chosen `python` inside goodput_search's or ab_benchmark's `load`",
        "expect": ">= 10",
    },
    "model_programs_runs": {
        "what": "model-chosen interpreters that ran without a rule or a person (canary)",
        "expect": "0",
    },
    "http_unauthenticated_served": {
        "what": "sleuth mcp --http requests served without the token, or for a foreign Host/Origin",
        "expect": "0",
    },
    "terminal_control_surfaces": {
        "what": "surfaces fed host or model text with terminal control characters",
        "expect": ">= 10",
    },
    "terminal_raw_controls": {
        "what": "control, bidi or separator characters that reached a terminal or file raw",
        "expect": "0",
    },
    "mcp_form_raw_controls": {
        "what": "line separators, bidi overrides or escapes raw in the MCP approval form",
        "expect": "0",
    },
    "report_forged_structure": {
        "what": "report structure (calls, approvals, findings, marks) forged by model text",
        "expect": "0",
    },
    "otel_unregistered_names": {
        "what": "model-chosen tool or host names exported without --otel-content",
        "expect": "0",
    },
    "records_planted_tries": {
        "what": "server records someone else could have written, tried (local, sshd, MCP)",
        "expect": ">= 13",
    },
    "records_planted_obeyed": {
        "what": "planted records obeyed: a file they name shown, a process they name signalled",
        "expect": "0",
    },
    "outputs_secret_tries": {
        "what": "secrets put where server_processes, server_status and sleuth bench show them",
        "expect": ">= 7",
    },
    "outputs_secret_leaks": {
        "what": "runs of 6 secret characters in data, text, MCP, --json, transcripts, records",
        "expect": "0",
    },
    "probe_wrong_shape_tries": {
        "what": "host-program answers of the wrong shape, tried (local, sshd both modes, MCP)",
        "expect": ">= 30",
    },
    "probe_wrong_shape_internal": {
        "what": "wrong-shape answers ending in an internal error, a traceback or no host named",
        "expect": "0",
    },
    "resume_forged_prefixes_signed": {
        "what": "forged prefixes (recomputed chain) an honest resume signed or vouched for",
        "expect": "0",
    },
    "ledger_duplicates_hiding_rewrites": {
        "what": "rewrites that verify let pass for an appended or forged ledger entry",
        "expect": "0",
    },
    "reader_verdicts_missing": {
        "what": "readers (show x4, replay, resume, MCP resource) without verify's verdict first",
        "expect": "0",
    },
    "planted_links_written_through": {
        "what": "links planted in the transcripts folder written through by a resume",
        "expect": "0",
    },
    "cut_back_verified_complete": {
        "what": "transcripts cut back to a turn signature verified as a complete signed run",
        "expect": "0",
    },
}

_lock = threading.Lock()
_totals: dict[str, int] = {}


def count(name: str, n: int = 1) -> None:
    """Add `n` to figure `name` (created at 0 the first time it is touched)."""
    if name not in FIGURES:
        raise KeyError(f"unknown figure {name!r}; add it to FIGURES")
    with _lock:
        _totals[name] = _totals.get(name, 0) + n


def touch(name: str) -> None:
    """Mark a figure as measured even when nothing was counted (a true 0)."""
    count(name, 0)


def totals() -> dict[str, int]:
    with _lock:
        return dict(_totals)


def write(path: Path) -> None:
    rows = {name: {**FIGURES[name], "value": value} for name, value in totals().items()}
    path.write_text(json.dumps(rows, indent=2, sort_keys=True) + "\n")


def table(rows: dict[str, Any]) -> str:
    lines = ["| figure | expected | measured |", "|---|---|---|"]
    for name, row in rows.items():
        lines.append(f"| {row['what']} (`{name}`) | {row['expect']} | {row['value']} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(table(json.loads(Path(sys.argv[1]).read_text())))
