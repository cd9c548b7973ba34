"""The load generator's stream reading: SSE lines cut anywhere across socket reads, CRLF
line ends cut between \\r and \\n, and the token estimate's fast path.

A raw-socket server here writes one response in small pieces with a pause between
them, so each piece reaches the client in a read of its own; the records must be
the same whatever the cut.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from bench_support import free_port
from hypothesis import given
from hypothesis import strategies as st

from sleuth.hosts.program import program
from sleuth.hosts.program.loadgen import TOKEN_RE, estimate_tokens

WORDS = [" the", " cat", ",", " sat", " on the", " mat", ".", " don't", " 42"]
PIECE_GAP_S = 0.001


def sse_body(eol: bytes) -> bytes:
    def event(obj: dict[str, object]) -> bytes:
        return b"data: " + json.dumps(obj).encode() + eol + eol

    role = {"choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}]}
    out = [event(role)]
    for i, word in enumerate(WORDS):
        finish = "length" if i == len(WORDS) - 1 else None
        out.append(
            event({"choices": [{"index": 0, "delta": {"content": word}, "finish_reason": finish}]})
        )
    usage = {"prompt_tokens": 3, "completion_tokens": 11, "total_tokens": 14}
    out.append(event({"choices": [], "usage": usage}))
    out.append(b"data: [DONE]" + eol + eol)
    return b"".join(out)


def serve_in_pieces(port: int, piece: int, eol: bytes, ready: threading.Event) -> None:
    """Answer one request with `sse_body` written `piece` bytes at a time."""
    with socket.create_server(("127.0.0.1", port)) as srv:
        ready.set()
        conn, _ = srv.accept()
        with conn:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            request = b""
            while b"\r\n\r\n" not in request:
                request += conn.recv(65536)
            head, _, body = request.partition(b"\r\n\r\n")
            length = int(re.search(rb"(?i)content-length:\s*(\d+)", head).group(1))  # type: ignore[union-attr]
            while len(body) < length:
                body += conn.recv(65536)
            payload = sse_body(eol)
            conn.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(payload)
            )
            for start in range(0, len(payload), piece):
                conn.sendall(payload[start : start + piece])
                time.sleep(PIECE_GAP_S)


def run_once(tmp: Path, piece: int, eol: bytes) -> dict[str, object]:
    port = free_port()
    ready = threading.Event()
    thread = threading.Thread(target=serve_in_pieces, args=(port, piece, eol, ready))
    thread.start()
    ready.wait(5)
    out = tmp / f"p{piece}-{len(eol)}.jsonl"
    argv = [sys.executable, "-", "--url", f"http://127.0.0.1:{port}", "--model", "m"]
    argv += ["--concurrency", "1", "--num-prompts", "1", "--output-len", "11", "--out", str(out)]
    done = subprocess.run(argv, input=program("loadgen.py"), capture_output=True, timeout=60)
    thread.join(10)
    assert done.returncode == 0, done.stderr.decode()
    (rec,) = [r for r in map(json.loads, out.read_text().splitlines()) if r["type"] == "request"]
    return rec  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def whole(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    yield run_once(tmp_path_factory.mktemp("whole"), 1 << 20, b"\n")


def test_whole_response_is_read_right(whole: dict[str, object]) -> None:
    assert whole["error"] is None and whole["status"] == 200
    assert whole["done_marker"] is True and whole["finish_reason"] == "length"
    assert whole["usage"] == {"prompt_tokens": 3, "completion_tokens": 11, "total_tokens": 14}
    # The role-only frame carries no token; each word is one chunk, "on the" two tokens.
    assert whole["chunk_n"] == [1, 1, 1, 1, 2, 1, 1, 3, 1]
    assert whole["tokens_estimated"] is True


@pytest.mark.parametrize(("piece", "eol"), [(7, b"\n"), (1, b"\r\n"), (13, b"\r\n")])
def test_lines_cut_across_reads_give_the_same_record(
    whole: dict[str, object], tmp_path: Path, piece: int, eol: bytes
) -> None:
    cut = run_once(tmp_path, piece, eol)
    same = ("status", "error", "done_marker", "finish_reason", "usage", "chunk_n")
    assert {k: cut[k] for k in same} == {k: whole[k] for k in same}
    times = cut["chunk_t"]
    assert isinstance(times, list) and len(times) == len(WORDS)
    # Pieces arrive over time, so a chunk is stamped when its line completes.
    assert times == sorted(times) and times[-1] - times[0] > PIECE_GAP_S


@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=12))
def test_token_estimate_fast_path_agrees_with_the_regex(text: str) -> None:
    assert estimate_tokens(text) == max(1, len(TOKEN_RE.findall(text)))
