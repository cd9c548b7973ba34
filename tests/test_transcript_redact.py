"""Redaction: no planted secret reaches the transcript's bytes; ordinary content is untouched."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from sleuth.transcripts.events import SessionStarted, ToolExecuted
from sleuth.transcripts.redact import (
    clear_registered_secrets,
    redact,
    redact_data,
    redact_env,
    register_secret,
)
from sleuth.transcripts.store import TranscriptWriter
from sleuth.transcripts.verify import verify

# (kind, text holding the secret, the secret itself). Fake, but shaped like the real ones.
CORPUS = [
    (
        "anthropic-key",
        "key: sk-ant-api03-Zq9Xw2LmN4bV7cR1tY6uI3oP0aS5dF8gH-_jK2lQ",
        "sk-ant-api03-Zq9",
    ),
    ("openai-key", "OPENAI sk-proj-Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56Qr78", "Ab12Cd34Ef56Gh78"),
    ("openai-key", "old style sk-Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56Qr78St90", "Ij90Kl12Mn34"),
    ("huggingface-token", "token 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 ok", "hf_QwErTyUiOp"),
    ("aws-access-key-id", "id AKIAZ7QW3ERT5YUI9OPA in use", "AKIAZ7QW3ERT5YUI9OPA"),
    ("aws-access-key-id", "temp ASIAZ7QW3ERT5YUI9OPB", "ASIAZ7QW3ERT5YUI9OPB"),
    (
        "aws-secret-key",
        "aws_secret_access_key = kT9/pL2+mN5xQ8wR3zV6bY1cF4hJ7dS0aG2eK5uW",
        "kT9/pL2+mN5xQ8wR3zV6",
    ),
    ("github-token", "git clone with ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8", "ghp_A1b2C3d4E5"),
    ("github-token", "gho_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8", "gho_A1b2C3d4E5"),
    (
        "github-token",
        "github_pat_11AAAAAAA0abcdefghijkl_MNOPQRSTUVWXYZ0123456789",
        "github_pat_11A",
    ),
    ("slack-token", "xoxb-2048123456-4096123456789-Zx9Yw8Vu7Ts6Rq5Po4", "xoxb-2048123456"),
    (
        "bearer-token",
        "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOjF9.c2lnbmF0dXJl",
        "eyJhbGci",
    ),
    (
        "private-key",
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAx9Zq\nq8Lm2Nz0\n"
        "-----END RSA PRIVATE KEY-----",
        "MIIEowIBAAKCAQEAx9Zq",
    ),
    (
        "url-password",
        "DATABASE=postgres://svc:Tr0ub4dor&3xyz@db.internal:5432/app",
        "Tr0ub4dor&3xyz",
    ),
    ("env-secret", "export WANDB_API_KEY=9f8e7d6c5b4a39281706f5e4d3c2b1a0", "9f8e7d6c5b4a3928"),
    ("env-secret", 'DB_PASSWORD: "correct horse battery staple"', "horse battery"),
    ("env-secret", '{"client_secret": "s3cr3t-v4lue-here"}', "s3cr3t-v4lue"),
    ("env-secret", "MY_SERVICE_TOKEN=plainish-value-123", "plainish-value"),
    ("huggingface-token", "HF_TOKEN=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", "QwErTyUiOpAsDf"),
]

ORDINARY = [
    "model.layers.0.self_attn.k_proj.weight BF16 [1024, 7168]",
    "lm_head.weight model.embed_tokens.weight hf_quant_config.json",
    "sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "commit 3f2c1e9b8a7d6c5b4a39281706f5e4d3c2b1a098 (HEAD -> main)",
    '{"bos_token": "<s>", "eos_token": "</s>", "pad_token": null, "max_tokens": 512}',
    "/models/DeepSeek-V3/model-00001-of-000163.safetensors",
    "the key question is whether --api-key is required; token budget 4096",
    "http://127.0.0.1:8000/v1/models and https://huggingface.co/deepseek-ai/DeepSeek-V3",
    "task-queue-length 42 ask-for-review",
]


@pytest.fixture(autouse=True)
def _fresh_registry() -> Iterator[None]:
    clear_registered_secrets()
    yield
    clear_registered_secrets()


@pytest.mark.parametrize(("kind", "text", "secret"), CORPUS)
def test_each_kind_of_secret_is_replaced_and_named(kind: str, text: str, secret: str) -> None:
    cleaned = redact(text)
    assert secret not in cleaned
    assert f"[REDACTED:{kind}]" in cleaned


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_investigation_output_is_untouched(text: str) -> None:
    assert redact(text) == text


def test_registered_values_are_redacted_everywhere() -> None:
    register_secret("plain-looking-api-key-value")
    register_secret("short")
    assert redact("using plain-looking-api-key-value now") == "using [REDACTED:known-secret] now"
    assert redact("a short word") == "a short word"


def test_redact_data_walks_nested_data_and_secret_named_keys() -> None:
    data = {
        "env": {"HF_TOKEN": "unshaped-value", "PATH": "/usr/bin"},
        "argv": [["curl", "-H", "Authorization: Bearer abcdefghijklmnopqrstuvwxyz"]],
        "n": 3,
    }
    cleaned = redact_data(data)
    assert cleaned["env"] == {"HF_TOKEN": "[REDACTED:by-key token]", "PATH": "/usr/bin"}
    assert cleaned["argv"][0][2] == "Authorization: Bearer [REDACTED:bearer-token]"
    assert cleaned["n"] == 3


def test_no_planted_secret_reaches_the_written_bytes(tmp_path: Path) -> None:
    register_secret("the-api-key-in-use-0000")
    planted = "\n".join(text for _, text, _ in CORPUS) + "\nkey=the-api-key-in-use-0000\n"
    ordinary = "\n".join(ORDINARY)
    with TranscriptWriter.create(tmp_path, "secrets") as writer:
        writer.append(
            SessionStarted(
                session_id="secrets",
                question="why does login fail with " + CORPUS[0][1],
                hosts=[],
                brain="replay",
                policy={"env": {"OPENAI_API_KEY": "unshaped-but-secret-name"}},
            )
        )
        writer.append(
            ToolExecuted(
                call_id="c1",
                tool="read_lines",
                input={"path": "/etc/app.env"},
                ok=True,
                output=planted + ordinary,
                argv=[["cat", "--", "/etc/app.env"]],
            )
        )
    written = writer.path.read_text(encoding="utf-8")
    for _, _, secret in CORPUS:
        assert secret not in written
    assert "the-api-key-in-use-0000" not in written
    assert "unshaped-but-secret-name" not in written
    for text in ORDINARY:
        assert text.replace('"', '\\"') in written
    assert verify(writer.path).ok  # the envelope's own sha256 fields were left alone


def test_redact_env_hides_secret_names_and_their_echoes() -> None:
    env = {"HF_TOKEN": "plain-value-123", "GITHUB_PAT": "unshaped-pat-value", "TP": "2"}
    shown = redact_env(env)
    assert shown == {
        "HF_TOKEN": "[REDACTED:by-key token]",
        "GITHUB_PAT": "[REDACTED:by-key secret]",
        "TP": "2",
    }
    # A server log that echoes a launch env value is redacted too.
    assert "plain-value-123" not in redact("loading with token plain-value-123 from env")


def test_the_session_id_is_the_stores_own_and_stays_readable(tmp_path: Path) -> None:
    # `session_id` looks like a cookie's key to the by-key rule; the transcript's own id is not
    # one, and `show` and the audit need it.
    with TranscriptWriter.create(tmp_path, "0123abcd4567") as writer:
        writer.append(SessionStarted(session_id="0123abcd4567", question="q", hosts=[], brain="x"))
        writer.append(
            ToolExecuted(
                call_id="c1",
                tool="read_json",
                input={"path": "a.json", "session_id": "s3cr3t-cookie-value"},
                ok=True,
                output="{}",
            )
        )
    raw = [json.loads(line) for line in writer.path.read_text().splitlines()]
    assert raw[0]["session_id"] == "0123abcd4567"
    assert "s3cr3t-cookie-value" not in writer.path.read_text()  # a call's one still is
