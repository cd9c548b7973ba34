"""Workloads operators run: datasets, exact token lengths, arrival shapes, API keys, and the
A/B verdict of `sleuth bench compare`, against the synthetic server with known timing."""

from __future__ import annotations

import itertools
import json
import statistics
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import pytest
from bench_support import bench, free_port, run_loadgen, synthetic_server, train_tokenizer

from sleuth.hosts.program.loadgen import arrival_schedule
from sleuth.tools.bench.compare import compare
from sleuth.tools.bench.metrics import parse_lines
from sleuth.transcripts.verify import verify

PROFILES = {
    "fast": {"ttft_ms": 20, "itl_ms": 2},
    # A first token well above a loaded machine's scheduling jitter, so two runs of the same
    # server differ by less than the 3% that compare calls a change.
    "base": {"ttft_ms": 300, "itl_ms": 20},
    "slower": {"ttft_ms": 300, "itl_ms": 22},
}


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return train_tokenizer(tmp_path_factory.mktemp("model"))


@pytest.fixture(scope="module")
def server(tokenizer_dir: Path) -> Iterator[str]:
    with synthetic_server(
        PROFILES,
        "--tokenizer",
        str(tokenizer_dir),
        "--model-root",
        str(tokenizer_dir),
        realtime=False,
    ) as url:
        yield url


def records(lines: list[str]) -> list[dict]:  # type: ignore[type-arg]
    return [json.loads(x) for x in lines if json.loads(x)["type"] == "request"]


@pytest.mark.parametrize("api", ["completions", "chat"])
def test_prompts_are_exactly_input_len_tokens_with_a_tokenizer(
    server: str, tokenizer_dir: Path, tmp_path: Path, api: str
) -> None:
    lines = run_loadgen(
        server,
        "fast",
        "--api",
        api,
        "--tokenizer",
        str(tokenizer_dir),
        "--input-len",
        "37",
        "--output-len",
        "3",
        "--concurrency",
        "2",
        "--num-prompts",
        "6",
        tmp=tmp_path,
        realtime=False,
    )
    header, _, recs = parse_lines(lines)
    assert header["length_unit"] == "tokens"
    # The server counts with the same tokenizer: exact, and not the word count.
    assert [r.usage["prompt_tokens"] for r in recs] == [37] * 6  # type: ignore[index]
    assert [r.input_tokens_client for r in recs] == [37] * 6
    assert any(r.input_words != 37 for r in recs)


def test_auto_tokenizer_is_the_served_models_folder_inside_the_roots(
    server: str, tokenizer_dir: Path, tmp_path: Path
) -> None:
    args = ["--input-len", "21", "--output-len", "2", "--concurrency", "1", "--num-prompts", "2"]
    inside = run_loadgen(
        server,
        "fast",
        "--tokenizer",
        "auto",
        "--roots",
        str(tokenizer_dir.parent),
        *args,
        tmp=tmp_path,
        realtime=False,
    )
    assert parse_lines(inside)[0]["length_unit"] == "tokens"
    assert {r["usage"]["prompt_tokens"] for r in records(inside)} == {21}
    outside = run_loadgen(
        server,
        "fast",
        "--tokenizer",
        "auto",
        "--roots",
        str(tmp_path),
        *args,
        tmp=tmp_path,
        realtime=False,
    )
    assert parse_lines(outside)[0]["length_unit"] == "words"


def test_without_a_tokenizer_lengths_are_words_and_the_server_counts_are_shown(
    server: str, tmp_path: Path
) -> None:
    report = bench(
        server,
        "fast",
        "--input-len",
        "40",
        "--output-len",
        "2",
        "--concurrency",
        "1",
        "--num-prompts",
        "3",
        tmp=tmp_path,
        realtime=False,
    )
    assert report.header["length_unit"] == "words"
    phase = report.phases[0]
    assert phase.prompt_tokens_source == "server"
    assert phase.prompt_tokens.mean is not None and phase.prompt_tokens.mean != 40


def test_random_range_ratio_spreads_lengths_reproducibly(server: str, tmp_path: Path) -> None:
    args = [
        "--input-len",
        "20",
        "--output-len",
        "10",
        "--range-ratio",
        "0.5",
        "--concurrency",
        "4",
        "--num-prompts",
        "40",
        "--seed",
        "3",
    ]
    first = records(run_loadgen(server, "fast", *args, tmp=tmp_path, realtime=False))
    again = records(run_loadgen(server, "fast", *args, tmp=tmp_path, realtime=False))
    outs = [r["requested_output"] for r in first]
    ins = [r["input_words"] for r in first]
    assert all(5 <= o <= 15 for o in outs) and len(set(outs)) > 3
    assert all(10 <= i <= 30 for i in ins) and len(set(ins)) > 3
    assert [r["requested_output"] for r in again] == outs
    assert [r["usage"]["completion_tokens"] for r in first] == outs  # ignore_eos: exactly


def test_jsonl_dataset_cycles_its_prompts_with_their_output_lengths(
    server: str, tmp_path: Path
) -> None:
    data = tmp_path / "prompts.jsonl"
    rows = [{"prompt": f"question number {i} " * (i + 1), "output_len": i + 2} for i in range(5)]
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    recs = records(
        run_loadgen(
            server,
            "fast",
            "--dataset",
            "jsonl",
            "--dataset-path",
            str(data),
            "--concurrency",
            "2",
            "--num-prompts",
            "10",
            tmp=tmp_path,
            realtime=False,
        )
    )
    by_len = defaultdict(list)
    for r in recs:
        by_len[r["requested_output"]].append(r["input_words"])
    assert sorted(by_len) == [2, 3, 4, 5, 6]
    assert all(words == [3 * (out - 1)] * 2 for out, words in by_len.items())


def test_sharegpt_dataset_takes_human_turns_and_reply_lengths(server: str, tmp_path: Path) -> None:
    data = tmp_path / "sharegpt.json"
    convs = [
        {
            "conversations": [
                {"from": "human", "value": "hi there"},
                {"from": "gpt", "value": "one two three four"},
            ]
        },
        {"conversations": [{"from": "human", "value": "only a question"}]},
    ]
    data.write_text(json.dumps(convs))
    recs = records(
        run_loadgen(
            server,
            "fast",
            "--dataset",
            "sharegpt",
            "--dataset-path",
            str(data),
            "--concurrency",
            "1",
            "--num-prompts",
            "3",
            tmp=tmp_path,
            realtime=False,
        )
    )
    assert [(r["input_words"], r["requested_output"]) for r in recs] == [(2, 4)] * 3


def test_prefix_groups_share_a_system_prefix_and_the_server_counts_hits(
    server: str, tmp_path: Path
) -> None:
    report = bench(
        server,
        "fast",
        "--dataset",
        "prefix",
        "--prefix-groups",
        "3",
        "--prefix-len",
        "16",
        "--input-len",
        "8",
        "--output-len",
        "2",
        "--concurrency",
        "1",
        "--num-prompts",
        "12",
        "--spec-counters",
        tmp=tmp_path,
        realtime=False,
    )
    server_side = report.phases[0].server
    assert server_side is not None
    # Three first sightings miss; the other nine requests hit their group's prefix.
    assert server_side.prefix_cache_hit_rate == pytest.approx(9 / 12)


def test_multiturn_conversations_grow_and_run_in_order(server: str, tmp_path: Path) -> None:
    lines = run_loadgen(
        server,
        "fast",
        "--dataset",
        "multiturn",
        "--turns",
        "3",
        "--input-len",
        "10",
        "--output-len",
        "4",
        "--concurrency",
        "2",
        "--num-prompts",
        "6",
        tmp=tmp_path,
        realtime=False,
    )
    convs = defaultdict(list)
    for r in records(lines):
        convs[r["conv"]].append(r)
    assert len(convs) == 2
    for turns in convs.values():
        turns.sort(key=lambda r: r["turn"])
        assert [r["turn"] for r in turns] == [0, 1, 2]
        prompts = [r["usage"]["prompt_tokens"] for r in turns]
        # Each turn resends the earlier turns and their replies, then one new prompt.
        assert prompts[0] < prompts[1] < prompts[2]
        assert {r["input_words"] for r in turns} == {10}
        assert all(b["t_send"] >= a["t_done"] for a, b in itertools.pairwise(turns))


@pytest.mark.parametrize("shape", [0.25, 1.0, 4.0])
def test_burstiness_is_the_gamma_shape(shape: float) -> None:
    times = arrival_schedule(10.0, 4000, seed=1, burstiness=shape)
    gaps = [b - a for a, b in itertools.pairwise(times)]
    cv = statistics.pstdev(gaps) / statistics.fmean(gaps)
    assert cv == pytest.approx(shape**-0.5, rel=0.1)
    assert len(gaps) / times[-1] == pytest.approx(10.0, rel=0.08)


def test_ramp_up_raises_the_rate_over_the_run() -> None:
    times = arrival_schedule(5.0, 400, seed=2, ramp=(5.0, 50.0))
    quarter = len(times) // 4
    first = quarter / (times[quarter] - times[0])
    last = quarter / (times[-1] - times[-1 - quarter])
    assert first < 15 and last > 35


def test_bursty_open_loop_run_sends_with_the_asked_spread(server: str, tmp_path: Path) -> None:
    recs = records(
        run_loadgen(
            server,
            "fast",
            "--request-rate",
            "40",
            "--burstiness",
            "0.5",
            "--num-prompts",
            "120",
            "--input-len",
            "4",
            "--output-len",
            "2",
            "--seed",
            "5",
            tmp=tmp_path,
            realtime=False,
        )
    )
    sched = sorted(r["t_sched"] for r in recs)
    gaps = [b - a for a, b in itertools.pairwise(sched)]
    assert statistics.pstdev(gaps) / statistics.fmean(gaps) == pytest.approx(2**0.5, rel=0.3)


def test_duration_bounds_a_phase(server: str, tmp_path: Path) -> None:
    lines = run_loadgen(
        server,
        "base",
        "--concurrency",
        "2",
        "--duration",
        "1",
        "--num-prompts",
        "1000",
        "--output-len",
        "5",
        "--input-len",
        "4",
        tmp=tmp_path,
        realtime=False,
    )
    _, phases, recs = parse_lines(lines)
    # Each request takes about 300 + 4*20 = 380 ms: two workers fit about 6 in one second.
    assert 3 <= len(recs) <= 10
    assert phases[0]["wall_s"] < 1.5


def sleuth(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sleuth.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
    )


def test_api_key_protected_endpoint_needs_the_key_and_the_key_never_shows(
    tmp_path: Path,
) -> None:
    key = "sk-test-51f0c2d9a8e7b6"
    with synthetic_server(PROFILES, "--api-key", key, realtime=False) as url:
        ok = sleuth(
            "bench",
            url,
            "-m",
            "fast",
            "-c",
            "1",
            "-n",
            "2",
            "--output-len",
            "2",
            "--api-key",
            key,
            "--json",
            cwd=tmp_path,
        )
        refused = sleuth("bench", url, "-m", "fast", "-c", "1", "-n", "2", cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["report"]["phases"][0]["completed"] == 2
    assert key not in ok.stdout + ok.stderr
    saved = Path(json.loads(ok.stdout)["jsonl"]).read_text()
    assert key not in saved and "Authorization" in saved  # the header's name, not its value
    assert refused.returncode == 1
    assert "no request succeeded: HTTP 401" in refused.stderr
    assert "Invalid API key" in refused.stderr


def test_every_request_failing_exits_1_naming_the_first_error(tmp_path: Path) -> None:
    port = free_port()
    done = sleuth(
        "bench", f"http://127.0.0.1:{port}", "-m", "m", "-c", "1", "-n", "2", cwd=tmp_path
    )
    assert done.returncode == 1
    assert "no request succeeded" in done.stderr and f"127.0.0.1:{port}" in done.stderr
    assert "CLIENT-LIMITED" not in done.stdout + done.stderr


def test_results_are_saved_as_csv_with_the_asked_percentiles(server: str, tmp_path: Path) -> None:
    done = sleuth(
        "bench",
        server,
        "-m",
        "fast",
        "-c",
        "1,2",
        "-n",
        "4",
        "--output-len",
        "3",
        "--percentiles",
        "50,99.9",
        "--json",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    jsonschema.validate(data, json.loads(sleuth("schema", "bench", cwd=tmp_path).stdout))
    assert data["schema_version"] == 1 and verify(Path(tmp_path / data["transcript"])).ok
    rows = Path(data["csv"]).read_text().splitlines()
    assert len(rows) == 3 and "ttft_p99.9_ms" in rows[0] and "ttft_p90_ms" not in rows[0]
    assert data["report"]["phases"][0]["ttft"]["pcts"].keys() == {"p50", "p99.9"}


def _run(server: str, model: str, tmp: Path) -> Path:
    lines = run_loadgen(
        server,
        model,
        "--concurrency",
        "4",
        "--num-prompts",
        "32",
        "--output-len",
        "16",
        "--input-len",
        "8",
        "--warmup",
        "4",
        tmp=tmp,
        realtime=False,
    )
    path = tmp / f"{model}-{len(list(tmp.iterdir()))}.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_compare_calls_two_runs_of_one_server_the_same(server: str, tmp_path: Path) -> None:
    # Medians: a loaded two-core machine stretches the tail of one run and not the other's.
    report = compare(_run(server, "base", tmp_path), _run(server, "base", tmp_path), stats=("p50",))
    assert not any(m.significant for p in report.phases for m in p.metrics), report.summary
    assert "no significant difference" in report.summary


def test_compare_detects_a_ten_percent_slower_itl_with_sign_and_size(
    server: str, tmp_path: Path
) -> None:
    a, b = _run(server, "base", tmp_path), _run(server, "slower", tmp_path)
    report = compare(a, b, factor=["model", "url"])
    itl = next(m for m in report.phases[0].metrics if (m.metric, m.stat) == ("itl", "p50"))
    assert itl.significant and itl.rel_diff == pytest.approx(0.10, abs=0.03)
    assert itl.ci_low is not None and itl.ci_low > 0
    assert "higher" in itl.sentence
    ttft = next(m for m in report.phases[0].metrics if (m.metric, m.stat) == ("ttft", "p50"))
    assert not ttft.significant
    assert not report.settings_differ
    # Without naming the factor, the differing model is a warning.
    assert "model" in compare(a, b).settings_differ


def test_compare_cli_json_and_a_wrong_file(server: str, tmp_path: Path) -> None:
    a, b = _run(server, "base", tmp_path), _run(server, "slower", tmp_path)
    done = sleuth("bench", "compare", str(a), str(b), "--factor", "model", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    jsonschema.validate(data, json.loads(sleuth("schema", "bench-compare", cwd=tmp_path).stdout))
    assert data["schema_version"] == 1 and data["phases"][0]["metrics"]
    text = sleuth("bench", "compare", str(a), str(b), cwd=tmp_path)
    assert "ITL p50 is" in text.stdout
    junk = tmp_path / "notes.txt"
    junk.write_text("hello\n")
    bad = sleuth("bench", "compare", str(a), str(junk), cwd=tmp_path)
    assert bad.returncode == 2 and "notes.txt" in bad.stderr


def test_html_report_shows_tables_plots_and_timeline_in_chromium(
    server: str, tmp_path: Path
) -> None:
    from browser import rendered_dom

    done = sleuth(
        "bench",
        server,
        "-m",
        "fast",
        "-c",
        "1,2,4",
        "-n",
        "6",
        "--output-len",
        "4",
        "--percentiles",
        "50,99.9",
        "--json",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    page = Path(json.loads(done.stdout)["html"])
    dom = rendered_dom(page)
    assert "Benchmark of fast on local" in dom
    for cell in ("c=1", "c=2", "c=4", "TTFT p99.9", "6/6"):
        assert cell in dom
    assert dom.count("<svg") == 5  # three latency plots, throughput vs latency, timeline
    assert dom.count("<title>request ") == 18  # one bar per measured request
    source = page.read_text()
    assert "src=" not in source and "href=" not in source  # self-contained: nothing fetched
