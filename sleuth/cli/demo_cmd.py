"""`sleuth demo`: real investigations of a small demo deployment, offline, in seconds."""

from __future__ import annotations

import tempfile
from pathlib import Path

import typer
from rich.markup import escape
from rich.rule import Rule

from sleuth.agent.loop import RunResult
from sleuth.agent.playbooks import PlaybookBrain
from sleuth.agent.protocols import Quiet
from sleuth.agent.replay import replay
from sleuth.agent.session import start_investigation
from sleuth.agent.view import LiveView, findings_table
from sleuth.cli.common import EXIT_ERROR, JsonOption, console, err_console, print_json
from sleuth.config import HostConfig, Settings
from sleuth.demo_deployment import build_demo
from sleuth.tools.connect import build_context
from sleuth.transcripts.verify import verify

QUESTIONS = (
    "Does DeepSeek-V3-demo-FP8 still carry the MTP heads its config declares?",
    "Did the NVFP4 quantisation of Qwen3.5-MoE-demo-NVFP4 keep its MTP heads?",
    "What is Qwen3.5-MoE-demo-NVFP4 quantised to, and which modules were left out?",
)


def register(app: typer.Typer) -> None:
    app.command("demo")(demo)


def demo(
    directory: Path | None = typer.Option(
        None, "--dir", help="Where to build the demo deployment (default: a new temporary folder)."
    ),
    as_json: bool = JsonOption,
) -> None:
    """Build a demo deployment and investigate it with the offline playbook (no API key).

    Two MoE checkpoints with real safetensors headers (sparse shards): one keeps
    its MTP heads, the other declares them in config.json but lost them on
    export. Each investigation is recorded, then one transcript is replayed and
    every one is verified.
    """
    root = directory or Path(tempfile.mkdtemp(prefix="sleuth-demo-"))
    build_demo(root)
    settings = Settings(hosts={"local": HostConfig(roots=[str(root)])})
    ctx = build_context(settings, [])
    results: list[RunResult] = []
    if not as_json:
        console.print(
            f"Demo deployment built in {root}. Brain: playbook (offline, no API key).",
            highlight=False,
        )
    transcripts = root / "transcripts"
    for question in QUESTIONS:
        if not as_json:
            console.print(Rule(f"[bold]{escape(question)}"))
        view: Quiet | LiveView = Quiet() if as_json else LiveView(err_console)
        inv = start_investigation(
            question, PlaybookBrain(), ctx, settings, transcripts, observer=view
        )
        with view:
            result = inv.run()
        results.append(result)
        if not as_json:
            console.print(findings_table(result.findings))
    checks = _replay_and_verify(results)
    if as_json:
        print_json(
            {
                "deployment": str(root),
                "investigations": [
                    {
                        "question": q,
                        "status": r.status,
                        "transcript": r.transcript,
                        "findings": [f.model_dump(mode="json") for f in r.findings],
                    }
                    for q, r in zip(QUESTIONS, results, strict=True)
                ],
                "checks": checks,
            }
        )
    else:
        _print_next_steps(root, results, checks)
    if not all(checks.values()) or any(r.status != "answered" for r in results):
        raise typer.Exit(EXIT_ERROR)


def _replay_and_verify(results: list[RunResult]) -> dict[str, bool]:
    checks = {f"verify {Path(r.transcript).name}": verify(Path(r.transcript)).ok for r in results}
    replayed = replay(results[0].transcript, brain=PlaybookBrain())
    checks[f"replay {Path(results[0].transcript).name}"] = replayed.ok
    return checks


def _print_next_steps(root: Path, results: list[RunResult], checks: dict[str, bool]) -> None:
    console.print(Rule("[bold]checks"))
    for name, ok in checks.items():
        console.print(f"{'[green]ok[/]' if ok else '[red]FAILED[/]'}  {escape(name)}")
    first = results[0].transcript
    console.print(Rule("[bold]next"))
    console.print(
        f"The demo deployment is in {root}. Try:\n"
        f"  sleuth show {first}\n"
        f"  sleuth show {first} --format html --output demo.html\n"
        f"  sleuth verify {first}\n"
        f"  sleuth replay {first}\n"
        f"  sleuth tool checkpoint_summary model_dir={root}/models/DeepSeek-V3-demo-FP8\n"
        '  sleuth ask "does /models/X keep its MTP heads?" --host gpu1   '
        "(hosts in sleuth.toml; see README)\n"
        "Set ANTHROPIC_API_KEY (or pass --base-url) and `sleuth ask` answers open questions too.",
        highlight=False,
    )
