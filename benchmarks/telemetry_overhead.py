"""What live OpenTelemetry export costs a demo run: export on (a local OTLP/HTTP receiver that
decodes every request) against export off, runs interleaved, medians reported.

    python benchmarks/telemetry_overhead.py [--repeats 9] [--out benchmarks/results/telemetry.md]

The demo run is `sleuth demo`'s three investigations (the offline playbook on the demo
deployment) in one process, timed from the first session to the last span sent: with export on
that includes the tee into spans, the background sends and the flush before the command would
exit. The target (issue 29) is under 2 % of the run's wall time. The one-time cost of loading
the OpenTelemetry SDK and exporter, which a `sleuth ask --otlp-endpoint` process pays once, is
measured apart in fresh interpreters, and the whole command is timed end to end too.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

from sleuth.agent.playbook.brain import PlaybookBrain
from sleuth.agent.session import start_investigation
from sleuth.cli.demo_cmd import QUESTIONS
from sleuth.config import load_settings
from sleuth.demo_deployment import build_demo
from sleuth.telemetry.live import LiveExport
from sleuth.telemetry.settings import destination
from sleuth.tools.context import build_context
from tests.otlp_receiver import OtlpReceiver

HERE = Path(__file__).parent


def demo_folder(root: Path) -> Path:
    build_demo(root / "deployment")
    config = root / "sleuth.toml"
    config.write_text(f"[hosts.local]\nroots = [{json.dumps(str(root / 'deployment'))}]\n")
    return config


def one_run(config: Path, transcripts: Path, export: AbstractContextManager[object]) -> float:
    """The three demo investigations, with or without export; wall seconds."""
    settings = load_settings(config, cwd=config.parent)
    ctx = build_context(settings, [])
    began = time.perf_counter()
    with export as tracing:
        ctx.tracing = tracing  # type: ignore[assignment]
        for question in QUESTIONS:
            inv = start_investigation(question, PlaybookBrain(), ctx, settings, transcripts)
            assert inv.run().status == "answered"
    took = time.perf_counter() - began
    ctx.close()
    return took


def in_process(config: Path, url: str, repeats: int) -> dict[str, list[float]]:
    runs: dict[str, list[float]] = {"off": [], "on": []}
    on: Callable[[], AbstractContextManager[object]] = lambda: LiveExport(  # noqa: E731
        destination(url, False, {}), warn=print
    )
    one_run(config, config.parent / "warmup", on())  # imports and caches, not measured
    for i in range(repeats):
        order = ("off", "on") if i % 2 == 0 else ("on", "off")
        for mode in order:
            transcripts = config.parent / f"t-{i}-{mode}"
            export = on() if mode == "on" else nullcontext(None)
            runs[mode].append(one_run(config, transcripts, export))
    return runs


def imports(repeats: int) -> list[float]:
    """Fresh interpreters: the seconds `import sleuth.telemetry.live` adds to what `ask`
    already imports."""
    base = "import sleuth.agent.session, sleuth.cli.common, time; t = time.perf_counter(); "
    code = base + "import sleuth.telemetry.live; print(time.perf_counter() - t)"
    return [
        float(
            subprocess.run(
                [sys.executable, "-c", code], capture_output=True, text=True, check=True
            ).stdout
        )
        for _ in range(repeats)
    ]


def end_to_end(config: Path, url: str, repeats: int) -> dict[str, list[float]]:
    runs: dict[str, list[float]] = {"off": [], "on": []}
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    for i in range(repeats):
        for mode in ("off", "on") if i % 2 == 0 else ("on", "off"):
            flags = ["--otlp-endpoint", url] if mode == "on" else []
            argv = [
                sys.executable,
                "-m",
                "sleuth.cli",
                "ask",
                QUESTIONS[0],
                "--provider",
                "playbook",
                "--json",
                *flags,
            ]
            began = time.perf_counter()
            subprocess.run(argv, cwd=config.parent, env=env, capture_output=True, check=True)
            runs[mode].append(time.perf_counter() - began)
    return runs


def row(name: str, runs: dict[str, list[float]]) -> str:
    off, on = statistics.median(runs["off"]), statistics.median(runs["on"])
    share = (on - off) / off * 100
    return f"| {name} | {off * 1000:.0f} ms | {on * 1000:.0f} ms | {share:+.1f} % |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "telemetry.md")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="sleuth-otel-bench-") as tmp, OtlpReceiver() as rx:
        config = demo_folder(Path(tmp))
        inside = in_process(config, rx.url, args.repeats)
        spans_per_run = len(rx.spans()) // (args.repeats + 1)
        whole = end_to_end(config, rx.url, max(3, args.repeats // 2))
    loaded = imports(5)
    lines = [
        "## Telemetry overhead (issue 29)",
        "",
        f"`python benchmarks/telemetry_overhead.py --repeats {args.repeats}`: `sleuth demo`'s "
        "three playbook investigations in one process, export off and on (a local OTLP/HTTP "
        f"receiver decoding every request; {spans_per_run} spans and their metrics a run), "
        f"interleaved, {args.repeats} runs each; median wall time from the first session to "
        "the last span sent. Target: under 2 %.",
        "",
        "| run | export off | export on | overhead |",
        "|---|---|---|---|",
        row("demo investigations, in process", inside),
        row("`sleuth ask` (one question), whole command", whole),
        "",
        f"The whole command includes loading the OpenTelemetry SDK and OTLP exporter, once per "
        f"process: median {statistics.median(loaded) * 1000:.0f} ms in a fresh interpreter "
        f"(min {min(loaded) * 1000:.0f} ms, 5 runs). Every run: "
        f"off {', '.join(f'{t:.2f}' for t in inside['off'])} s; "
        f"on {', '.join(f'{t:.2f}' for t in inside['on'])} s.",
    ]
    args.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
