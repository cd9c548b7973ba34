"""What investigations quote stays visible (issue 19): git SHAs in `git log`, sha256 digests
in a manifest, GPU UUIDs from nvidia-smi, model ids, architecture names, safetensors
offsets, special tokens. Each is read through the same tools and redaction a model gets,
beside random tokens in the same positions, which the generic detector must hide.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import string
import subprocess
from pathlib import Path
from typing import Any

import pytest

from sleuth.agent.calls import execute
from sleuth.config import HostConfig, Limits
from sleuth.hosts.host import LocalHost
from sleuth.hosts.policy import SandboxedHost
from sleuth.tools.context import ToolContext
from sleuth.transcripts.redact import redact, redact_data
from sleuth.transcripts.secret_text import looks_random

GPU_UUIDS = [
    "GPU-5a3c1b2e-8f7d-4e6a-9b1c-2d3e4f5a6b7c",
    "GPU-0f9e8d7c-6b5a-4938-8271-605f4e3d2c1b",
    "MIG-7d2a4c1e-93b8-5f60-a1e2-3c4d5e6f7a8b",
]
MODEL_IDS = [
    "deepseek-ai/DeepSeek-V3",
    "nvidia/DeepSeek-R1-0528-FP4-v2",
    "meta-llama/Llama-3.1-8B-Instruct",
    "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8",
]
ARCHITECTURES = ["Qwen2VLForConditionalGeneration", "DeepseekV3ForCausalLM"]


def _random_token(n: int = 32) -> str:
    while True:
        token = "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(n))
        if looks_random(token):
            return token


@pytest.fixture
def ctx_root(tmp_path: Path) -> tuple[ToolContext, Path]:
    root = tmp_path / "deploy"
    root.mkdir()
    sandbox = SandboxedHost("local", LocalHost(), HostConfig(roots=[str(root)]), Limits())
    return ToolContext(hosts={"local": sandbox}), root


def shown(ctx: ToolContext, name: str, **args: Any) -> str:
    """What a model would read: the tool's output and data after the pipeline's redaction."""
    result = execute(ctx, name, {"host": "local", **args})
    assert result.ok, result.error
    return json.dumps(redact_data(result.model_dump(exclude={"argv"})))


def test_git_shas_in_git_log_stay_visible(ctx_root: tuple[ToolContext, Path]) -> None:
    ctx, root = ctx_root
    repo = root / "repo"
    repo.mkdir()
    env = {"GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@x", "GIT_COMMITTER_NAME": "a"}
    env |= {"GIT_COMMITTER_EMAIL": "a@x", "HOME": str(root), "PATH": "/usr/bin:/bin"}
    for i in range(3):
        (repo / "f.txt").write_text(str(i))
        subprocess.run(["git", "init", "-q"], cwd=repo, env=env, check=True)
        subprocess.run(["git", "add", "."], cwd=repo, env=env, check=True)
        subprocess.run(["git", "commit", "-qm", f"change {i}"], cwd=repo, env=env, check=True)
    log = subprocess.run(
        ["git", "log", "--format=commit %H%nTree: %T%n%s"],
        cwd=repo,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    (root / "git-log.txt").write_text(log)
    shas = [line.split()[1] for line in log.splitlines() if line.startswith(("commit", "Tree"))]
    assert len(shas) == 6
    assert redact(log) == log
    for text in (
        shown(ctx, "read_lines", path="git-log.txt"),
        shown(ctx, "grep", pattern="commit|Tree", path="git-log.txt"),
    ):
        for sha in shas:
            assert sha in text


def test_sha256_digests_in_a_manifest_stay_visible(ctx_root: tuple[ToolContext, Path]) -> None:
    ctx, root = ctx_root
    digests = {
        f"model-0000{i}-of-00004.safetensors": hashlib.sha256(bytes([i])).hexdigest()
        for i in range(1, 5)
    }
    (root / "manifest.json").write_text(
        json.dumps({"files": {n: {"sha256": d, "size": 4_976_698_672} for n, d in digests.items()}})
    )
    (root / "SHA256SUMS").write_text("".join(f"{d}  {n}\n" for n, d in digests.items()))
    for text in (
        shown(ctx, "read_json", path="manifest.json"),
        shown(ctx, "read_json", path="manifest.json", pointer="/files"),
        shown(ctx, "read_lines", path="manifest.json"),
        shown(ctx, "read_lines", path="SHA256SUMS"),
        shown(ctx, "grep", pattern="sha256|safetensors", path="."),
    ):
        for digest in digests.values():
            assert digest in text


def test_gpu_uuids_from_nvidia_smi_stay_visible(ctx_root: tuple[ToolContext, Path]) -> None:
    ctx, root = ctx_root
    listing = "".join(
        f"GPU {i}: NVIDIA H100 80GB HBM3 (UUID: {uuid})\n" for i, uuid in enumerate(GPU_UUIDS)
    )
    query = "index, name, uuid, memory.total [MiB]\n" + "".join(
        f"{i}, NVIDIA H100 80GB HBM3, {uuid}, 81559 MiB\n" for i, uuid in enumerate(GPU_UUIDS)
    )
    (root / "nvidia-smi-L.txt").write_text(listing)
    (root / "gpus.csv").write_text(query)
    (root / "gpus.json").write_text(json.dumps({"gpus": [{"uuid": u} for u in GPU_UUIDS]}))
    assert redact(listing) == listing and redact(query) == query
    for text in (
        shown(ctx, "read_lines", path="nvidia-smi-L.txt"),
        shown(ctx, "read_lines", path="gpus.csv"),
        shown(ctx, "grep", pattern="GPU-|MIG-", path="."),
        shown(ctx, "read_json", path="gpus.json"),
    ):
        for uuid in GPU_UUIDS:
            assert uuid in text


def test_model_ids_architectures_offsets_and_special_tokens_stay_visible(
    ctx_root: tuple[ToolContext, Path],
) -> None:
    ctx, root = ctx_root
    config = {
        "_name_or_path": MODEL_IDS[0],
        "architectures": ARCHITECTURES,
        "bos_token_id": 0,
        "eos_token_id": 1,
        "num_nextn_predict_layers": 1,
    }
    tokenizer = {
        "bos_token": "<|begin_of_sentence|>",
        "eos_token": "<|end_of_sentence|>",
        "pad_token": "<pad>",
        "image_token": "<image>",
        "model_max_length": 163840,
    }
    header = {
        "model.layers.61.eh_proj.weight": {
            "dtype": "BF16",
            "shape": [7168, 14336],
            "data_offsets": [0, 205520896],
        },
        "__metadata__": {"format": "pt"},
    }
    (root / "config.json").write_text(json.dumps(config, indent=2))
    (root / "tokenizer_config.json").write_text(json.dumps(tokenizer, indent=2))
    (root / "header.json").write_text(json.dumps(header))
    (root / "models.yaml").write_text("".join(f"- model: {m}\n" for m in MODEL_IDS))
    everything = (
        "".join(
            shown(ctx, tool, path=path)
            for tool in ("read_json", "read_lines")
            for path in ("config.json", "tokenizer_config.json", "header.json")
        )
        + shown(ctx, "read_lines", path="models.yaml")
        + shown(ctx, "grep", pattern=".", path=".")
    )
    for value in [*MODEL_IDS, *ARCHITECTURES, "205520896", "<|begin_of_sentence|>", "<image>"]:
        assert value in everything, value
    assert "REDACTED" not in everything


def test_random_tokens_in_the_same_positions_are_hidden(ctx_root: tuple[ToolContext, Path]) -> None:
    ctx, root = ctx_root
    tokens = [_random_token(n) for n in (24, 32, 40, 64)]
    (root / "build.json").write_text(json.dumps({"build": {"id": tokens[0]}, "ref": tokens[1]}))
    (root / "run.sh").write_text(f"RUN_REF={tokens[2]} ./serve\nlaunch --ref '{tokens[3]}'\n")
    everything = "".join(
        [
            shown(ctx, "read_json", path="build.json"),
            shown(ctx, "read_lines", path="build.json"),
            shown(ctx, "read_lines", path="run.sh"),
            shown(ctx, "grep", pattern="ref|REF|id", path=".", ignore_case=True),
        ]
    )
    assert "[REDACTED:high-entropy]" in everything
    for token in tokens:
        assert token not in everything


def test_ssh_host_key_fingerprints_stay_visible() -> None:
    lines = [
        "256 SHA256:/BA9hQQgnT2fbNZQJJy36hPGHxeh8WGfgac7M13LJRA root@gpu1 (ED25519)",
        "fingerprint: SHA256:Xk39sLqPz81mNvBc7TeWq2RaYu5JhQQgnT2fbNZQJJy",
        '"integrity": "sha512-Xk39sLqPz81mNvBc7TeWq2RaYu5JhXk39sLqPz81mNvBc7TeWq2RaYu5Jh=="',
    ]
    for line in lines:
        assert redact(line) == line
