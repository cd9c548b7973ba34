"""Trace replay: Mooncake JSONL and CSV read with errors that name the line, retimed and cut,
prompts whose shared hash ids become shared prefixes, arrivals on schedule to within 5 ms at
p99 against the synthetic server, and the shared-prefix generator."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from bench_support import run_loadgen, server_arrivals, synthetic_server

from sleuth.errors import ToolError
from sleuth.hosts.program import loadgen
from sleuth.tools.bench.metrics import parse_lines
from sleuth.tools.bench.traces import (
    parse_speed,
    read_trace,
    replay_rows,
    shared_prefix_trace,
    to_mooncake,
)

SAMPLE = Path(__file__).parent / "fixtures" / "traces" / "mooncake_sample.jsonl"
PROFILES = {"fast": {"ttft_ms": 5, "itl_ms": 1}}


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with synthetic_server(PROFILES) as url:
        yield url


def test_mooncake_sample_is_read_in_time_order_with_its_prefix_blocks() -> None:
    trace = read_trace(SAMPLE.read_bytes(), str(SAMPLE))
    assert trace.format == "mooncake" and len(trace.requests) == 120
    stamps = [r.timestamp_ms for r in trace.requests]
    assert stamps == sorted(stamps) and stamps[0] == 0
    for r in trace.requests:  # each id is one 512-token block; the last may be partial
        assert (len(r.hash_ids) - 1) * 512 < r.input_length <= len(r.hash_ids) * 512
    firsts = [r.hash_ids[0] for r in trace.requests]
    assert len(set(firsts)) < len(firsts)  # some requests share their first block


def test_csv_trace_takes_named_columns_and_errors_name_the_line() -> None:
    text = "Timestamp,Input_Length,Output_Length\n200,30,5\n0,10,4\n\n"
    trace = read_trace(text.encode(), "t.csv")
    assert trace.format == "csv"
    assert [(r.timestamp_ms, r.input_length, r.output_length) for r in trace.requests] == [
        (0, 10, 4),
        (200, 30, 5),
    ]
    bad = [
        (b"timestamp,input\n0,1\n", "t.csv:1 has no output column"),
        (b"timestamp,input,output\n0,x,4\n", "t.csv:2 has 'x' where a number belongs"),
        (b"timestamp,input,output\n0,2.5,4\n", "t.csv:2 needs input_length as an integer"),
        (b'{"timestamp": 1, "input_length": 3, "output_length": 2}\n{oops\n', "t.csv:2 is not"),
        (b'{"timestamp": 1, "input_length": 3, "output_length": 2, "hash_ids": [1.5]}\n', "hash"),
        (b"\n\n", "holds no requests"),
    ]
    for data, message in bad:
        with pytest.raises(ToolError, match=message.replace("(", r"\(")):
            read_trace(data, "t.csv")


def test_replay_rows_scale_time_and_honour_both_caps() -> None:
    requests = read_trace(SAMPLE.read_bytes(), "s").requests
    rows = replay_rows(requests, speed=2.0)
    assert len(rows) == 120
    assert rows[-1][0] == pytest.approx(requests[-1].timestamp_ms / 2000.0)
    assert rows[5][1:] == [
        requests[5].input_length,
        requests[5].output_length,
        requests[5].hash_ids,
    ]
    assert len(replay_rows(requests, speed=2.0, max_requests=7)) == 7
    capped = replay_rows(requests, speed=2.0, max_duration_s=1.0)
    assert capped and all(r[0] < 1.0 for r in capped) and len(capped) < 120
    assert parse_speed("2x") == 2.0 and parse_speed("0.5") == 0.5
    with pytest.raises(ToolError, match="2y"):
        parse_speed("2y")


def test_shared_prefix_generator_makes_n_system_prompts_times_m_questions() -> None:
    trace = shared_prefix_trace(
        systems=3, questions=4, system_len=1000, question_len=40, block_size=512
    )
    assert len(trace) == 12
    by_system: dict[tuple[int, ...], list[list[int]]] = {}
    for r in trace:
        assert r.input_length == 2 * 512 + 40  # a system prompt fills whole blocks
        by_system.setdefault(tuple(r.hash_ids[:2]), []).append(r.hash_ids[2:])
    assert len(by_system) == 3 and all(len(q) == 4 for q in by_system.values())
    questions = [tuple(q) for qs in by_system.values() for q in qs]
    assert len(set(questions)) == 12  # every question its own block
    alone = shared_prefix_trace(systems=12, questions=1, system_len=1000, question_len=40)
    assert len({tuple(r.hash_ids[:2]) for r in alone}) == 12
    again = read_trace(to_mooncake(trace).encode(), "round trip")
    assert sorted(r.hash_ids for r in again.requests) == sorted(r.hash_ids for r in trace)


def workload(rows: list[list[object]], block: int, tokens: object = None) -> loadgen.Workload:
    args = loadgen.parse_args(["--url", "x", "--model", "m", "--concurrency", "1"])
    args.block_size, args.warmup = block, 0
    return loadgen.Workload(args, None, rows)  # type: ignore[arg-type]


def prompt(w: loadgen.Workload, i: int) -> str:
    item = w.item(i)
    item.index = i
    w.fill(item)
    return item.prompt


def test_equal_hash_ids_in_equal_places_make_equal_prompt_prefixes() -> None:
    rows: list[list[object]] = [
        [0.0, 24, 4, [1, 2, 3]],
        [0.0, 20, 4, [1, 2, 9]],  # shares two blocks with the first, its last block cut
        [0.0, 30, 4, [2, 1]],  # the same blocks in another order: no shared prefix
        [0.0, 8, 4, [1]],
    ]
    w = workload(rows, block=8)
    first, second, third, fourth = (prompt(w, i).split() for i in range(4))
    assert [len(p) for p in (first, second, third, fourth)] == [24, 20, 30, 8]
    assert first[:16] == second[:16] and first[16:20] != second[16:20]
    assert third[:8] == first[8:16] and third[:8] != first[:8]
    assert fourth == first[:8]
    # Another process (the load generator on another host) builds the same text.
    assert prompt(workload(rows, block=8), 0).split() == first


def test_replayed_trace_arrives_on_its_scaled_schedule_within_5_ms_at_p99(
    server: str, tmp_path: Path
) -> None:
    rows = replay_rows(read_trace(SAMPLE.read_bytes(), "sample").requests, speed=2.0)
    data = {"trace": {"rows": rows, "source": "sample", "speed": 2.0}}
    # The warm-up goes all at once, so the trace's first burst finds its connections open.
    argv = ["--dataset", "trace", "--num-prompts", str(len(rows)), "--warmup", "5"]
    lines = run_loadgen(server, "fast", *argv, "--output-len", "4", tmp=tmp_path, stdin_data=data)
    header, phases, records = parse_lines(lines)
    arrived = server_arrivals(server)[-len(rows) :]
    records = [r for r in records if not r.warmup]
    assert header["trace"]["speed"] == 2.0 and phases[0]["request_rate"] is None
    assert len(records) == len(rows) and all(r.ok for r in records)
    # The schedule is the trace's, halved: row k is due its timestamp / 2 after the first.
    scheduled = sorted(r.t_sched for r in records)
    offsets = [t - scheduled[0] for t in scheduled]
    assert offsets == pytest.approx([row[0] for row in rows], abs=1e-6)
    errors = sorted(abs(a - s) * 1000 for a, s in zip(sorted(arrived), scheduled, strict=True))
    p99 = errors[int(0.99 * (len(errors) - 1))]
    assert p99 <= 5.0, f"arrival error p99 {p99:.2f} ms (p50 {errors[len(errors) // 2]:.2f})"


def sleuth(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "sleuth.cli", *args]
    return subprocess.run(argv, capture_output=True, text=True, cwd=cwd, timeout=300)


def test_sleuth_bench_replays_a_trace_file_with_speed_and_caps(server: str, tmp_path: Path) -> None:
    # The trace files lie in the folder sleuth runs in: the local host's default root.
    (tmp_path / "t.csv").write_text("timestamp,input,output\n0,12,3\n100,20,3\n300,8,3\n")
    (tmp_path / "m.jsonl").write_bytes(SAMPLE.read_bytes())
    run = ("bench", server, "-m", "fast", "--warmup", "1", "--json", "--trace")
    done = sleuth(*run, "m.jsonl", "--speed", "4x", "--max-requests", "30", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    phase = data["report"]["phases"][0]
    assert phase["completed"] == 30 and phase["request_rate"] is None
    meta = data["report"]["header"]["trace"]
    assert meta["speed"] == 4.0 and meta["format"] == "mooncake"
    assert meta["requests_in_source"] == 120
    closed = sleuth(*run, "t.csv", "-c", "2", cwd=tmp_path)
    assert closed.returncode == 0, closed.stderr
    got = json.loads(closed.stdout)["report"]["phases"][0]
    assert got["completed"] == 3 and got["concurrency_target"] == 2 and got["failed"] == 0
    assert got["prompt_tokens"]["mean"] == pytest.approx((12 + 20 + 8) / 3)


def test_shared_prefix_workload_sends_n_system_prompts_times_m_questions(
    server: str, tmp_path: Path
) -> None:
    done = sleuth(
        *("bench", server, "-m", "fast", "--shared-prefix", "3,4", "--prefix-len", "16"),
        *("--input-len", "8", "--block-size", "8", "-c", "2", "--warmup", "0", "--json"),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    phase = data["report"]["phases"][0]
    assert phase["completed"] == 12 and phase["prompt_tokens_source"] == "server"
    assert phase["prompt_tokens"]["mean"] == 16 + 8  # two 8-word system blocks, one question
    meta = data["report"]["header"]["trace"]
    assert meta["source"] == "shared_prefix 3x4" and meta["requests_in_source"] == 12
    records = [json.loads(x) for x in Path(data["jsonl"]).read_text().splitlines()]
    assert sum(r["type"] == "request" for r in records) == 12
