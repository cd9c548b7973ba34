"""Launch, benchmark, stop: the steps both serve plans share, and the line a run is quoted by."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from sleuth.agent.playbook.plan import Call, Question, Report, Result, Step
from sleuth.tools.bench.models import BenchRun


def serve_and_bench(
    q: Question,
    engine: str,
    model: str,
    port: int,
    concurrency: int,
    speculative: dict[str, Any] | None,
    output_len: int,
) -> Generator[Step, list[Result], Report | tuple[Result, Result]]:
    """Launch, benchmark, stop; a Report when the server did not start."""
    launch_input: dict[str, Any] = {
        "host": q.host,
        "engine": engine,
        "model_path": model,
        "port": port,
    }
    if speculative:
        launch_input["speculative"] = speculative
    (launch,) = yield [Call("launch_server", launch_input)]
    which = "with speculative decoding" if speculative else "without speculative decoding"
    if launch.is_error:
        # Refused or failed, the finding is about that failure and quotes it (its first line
        # says which): a claim about a failed call is the one claim its output grounds.
        said = launch.line()
        return Report(
            f"launch_server on {q.host} failed and the {engine} server for {model} ({which}) "
            f"did not start: {said}",
            "unknown",
            0.7,
            [(launch, said)],
        )
    # launch_server has no model of its own: its data is a dict holding the server_id.
    server_id = (launch.data or {}).get("server_id", "")
    (bench,) = yield [
        Call(
            "run_benchmark",
            {
                "host": q.host,
                "endpoint": f"http://127.0.0.1:{port}",
                "model": model,
                "concurrency": [concurrency],
                "num_prompts": max(16, 4 * concurrency),
                "input_len": 256,
                "output_len": output_len,
                "label": which,
            },
        )
    ]
    (stop,) = yield [Call("stop_server", {"host": q.host, "server_id": server_id})]
    return bench, stop


def phase_line(bench: Result) -> str | None:
    """The output's table row of the run's first phase (`0 c=8  32/32 ...`), for quoting."""
    run = bench.model(BenchRun)
    if run is None or not run.report.phases:
        return None
    first = run.report.phases[0]
    row = f"{first.phase} c={first.concurrency_target} "
    return next(
        (ln.strip() for ln in bench.output.splitlines() if ln.strip().startswith(row)), None
    )
