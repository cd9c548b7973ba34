"""`sleuth demo`: real investigations of a small demo deployment, offline, in seconds."""

from __future__ import annotations

import json
import shlex
import tempfile
from pathlib import Path
from typing import Annotated

import typer

from sleuth.agent.loop import RunResult
from sleuth.agent.playbook.brain import PlaybookBrain
from sleuth.agent.replay.run import replay
from sleuth.agent.session import start_investigation
from sleuth.agent.view import findings_table
from sleuth.cli.common import (
    EXIT_ERROR,
    EXIT_USAGE,
    console,
    escape,
    fail,
    heading,
    invocation,
    print_json,
)
from sleuth.cli.shared_options import SharedOptions, shared_options
from sleuth.config import CONFIG_NAME, load_settings
from sleuth.demo_deployment import build_demo
from sleuth.tools.context import ToolContext, build_context
from sleuth.transcripts.verify import verify

DEPLOYMENT, TRANSCRIPTS = "deployment", "transcripts"
QUESTIONS = (
    "Does DeepSeek-V3-demo-FP8 still carry the MTP heads its config declares?",
    "Did the NVFP4 quantisation of Qwen3.5-MoE-demo-NVFP4 keep its MTP heads?",
    "What is Qwen3.5-MoE-demo-NVFP4 quantised to, and which modules were left out?",
)


@shared_options("as_json")
def demo(
    directory: Annotated[
        Path | None,
        typer.Option(
            "--dir",
            help="An empty folder to build the demo in (default: a new temporary folder).",
        ),
    ] = None,
    *,
    opts: SharedOptions,
) -> None:
    """Build a demo deployment and investigate it with the offline playbook (no API key).

    Two MoE checkpoints with real safetensors headers (sparse shards): one keeps
    its MTP heads, the other declares them in config.json but lost them on
    export. Each investigation is recorded, then one transcript is replayed
    (offline and live) and every one is verified. The folder holds the deployment,
    the transcripts beside it and a sleuth.toml, so the commands it suggests work
    after the `cd` it prints.

    Example: sleuth demo --dir sleuth-demo
    """
    root = _demo_folder(directory)
    build_demo(root / DEPLOYMENT)
    config = root / CONFIG_NAME
    config.write_text(_config_text(root))
    settings = load_settings(config, cwd=root)
    ctx = build_context(settings, [])
    results: list[RunResult] = []
    if not opts.as_json:
        console.print(
            f"Demo deployment built in {root}/{DEPLOYMENT}. Brain: playbook (offline, no API key).",
            highlight=False,
        )
    transcripts = root / TRANSCRIPTS
    try:
        for question in QUESTIONS:
            if not opts.as_json:
                console.print(heading(question))
            view = opts.view()
            inv = start_investigation(
                question, PlaybookBrain(), ctx, settings, transcripts, observer=view
            )
            with view:
                result = inv.run()
            results.append(result)
            if not opts.as_json:
                console.print(findings_table(result.findings, piped=not console.is_terminal))
        checks = _replay_and_verify(results, ctx)
    finally:
        ctx.close()
    if opts.as_json:
        print_json(
            {
                "folder": str(root),
                "deployment": str(root / DEPLOYMENT),
                "config": str(config),
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
    if not all(checks.values()) or any(r.status != "answered" or not r.findings for r in results):
        raise typer.Exit(EXIT_ERROR)


def _demo_folder(directory: Path | None) -> Path:
    """A new temporary folder, or the one asked for: empty, or a demo's own from before."""
    if directory is None:
        return Path(tempfile.mkdtemp(prefix="sleuth-demo-")).resolve()
    root = directory.resolve()
    config = root / CONFIG_NAME
    if config.exists() and config.read_text(encoding="utf-8") != _config_text(root):
        fail(
            f"{config} exists and is not a demo's; give --dir an empty folder (the demo writes "
            f"its own {CONFIG_NAME} there)",
            EXIT_USAGE,
        )
    ours = {CONFIG_NAME, DEPLOYMENT, TRANSCRIPTS}
    if root.is_dir() and not config.exists() and any(p.name not in ours for p in root.iterdir()):
        fail(f"{root} is not empty; give --dir an empty or new folder", EXIT_USAGE)
    root.mkdir(parents=True, exist_ok=True)
    return root


def _config_text(root: Path) -> str:
    # Roots are absolute, so the file means the same from wherever it is read; the
    # transcripts live beside the deployment, outside the roots, so recording an
    # investigation never changes what a live replay of it finds.
    return (
        "# Written by `sleuth demo`: the demo deployment is this host's only root.\n"
        f"[hosts.local]\nroots = [{json.dumps(str(root / DEPLOYMENT))}]\n"
    )


def _replay_and_verify(results: list[RunResult], ctx: ToolContext) -> dict[str, bool]:
    checks = {}
    for r in results:
        report = verify(Path(r.transcript))
        # Intact is not proven: say why an unsigned run is integrity only, as `verify` does.
        why = f" (integrity only: {report.integrity_only})" if report.integrity_only else ""
        checks[f"verify {Path(r.transcript).name}{why}"] = report.ok
    first = results[0].transcript
    checks[f"replay {Path(first).name}"] = replay(first, brain=PlaybookBrain()).ok
    checks[f"replay --live {Path(first).name}"] = replay(first, live_ctx=ctx).ok
    return checks


def _print_next_steps(root: Path, results: list[RunResult], checks: dict[str, bool]) -> None:
    console.print(heading("checks"))
    for name, ok in checks.items():
        console.print(f"{'[green]ok[/]' if ok else '[red]FAILED[/]'}  {escape(name)}")
    first = Path(results[0].transcript).relative_to(root)
    model = root / DEPLOYMENT / "models" / "DeepSeek-V3-demo-FP8"
    console.print(heading("next"))
    me = invocation()
    lines = [
        f"The demo's files are in {root}: {DEPLOYMENT}/ (what it investigated), "
        f"{TRANSCRIPTS}/ (what it recorded) and {CONFIG_NAME} (its host). Try:",
        f"  cd {shlex.quote(str(root))}",
        f"  {me} show {first}",
        f"  {me} show {first} --format html --output demo.html",
        f"  {me} verify {first}",
        f"  {me} replay {first} --live",
        f"  {me} tool checkpoint_summary model_dir={shlex.quote(str(model))}",
        f'  {me} ask "does {model} keep its MTP heads?"',
        "Set ANTHROPIC_API_KEY (or pass --base-url) and `sleuth ask` answers open questions "
        "too; hosts of your own go in sleuth.toml (see README).",
        f"Remove the demo with: rm -rf {shlex.quote(str(root))}",
    ]
    for line in lines:
        console.print(line, markup=False, highlight=False, soft_wrap=True)
