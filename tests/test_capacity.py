"""capacity_plan on checkpoints of real public model shapes: exact KV cells, verdicts, floors.

Every checkpoint is written as sparse shards whose headers hold each tensor the public
checkpoint holds; the numbers below are worked by hand from the models' config.json.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from sleuth.agent.calls import execute
from sleuth.config import HostConfig, Limits
from sleuth.hosts.host import LocalHost
from sleuth.hosts.policy import SandboxedHost
from sleuth.tools.capacity.launch_check import launch_input
from sleuth.tools.capacity.plan import CapacityPlan
from sleuth.tools.context import ToolContext
from sleuth.tools.environment.gpu_info import GpuInventory
from tests import checkpoint_fixtures as fx

MIB = 1 << 20
GIB = 1 << 30


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("models")
    fx.shaped_checkpoint(root / "DeepSeek-V3", fx.DEEPSEEK_V3, fx.deepseek_v3_tensors())
    fx.shaped_checkpoint(root / "Llama-3-70B", fx.LLAMA3_70B, fx.llama3_70b_tensors())
    modelopt_fp8 = {**fx.LLAMA3_70B, "quantization_config": {
        "quant_method": "modelopt", "quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}}  # fmt: skip
    fx.shaped_checkpoint(root / "Llama-3-70B-FP8", modelopt_fp8, fx.llama3_70b_tensors(fp8=True))
    fx.shaped_checkpoint(root / "gpt-oss-20b-BF16", fx.GPT_OSS_20B, fx.gpt_oss_20b_tensors())
    # Qwen3.5-397B-A17B's attention and layer plan in full; 16 of its 512 experts per layer.
    fx.big_moe(root / "Qwen3.5-NVFP4", experts=16, shard_bytes=2_000_000_000)
    return root


def plan(root: Path, model: str, **args: Any) -> dict[str, Any]:
    sandbox = SandboxedHost("local", LocalHost(), HostConfig(roots=[str(root)]), Limits())
    result = execute(
        ToolContext(hosts={"local": sandbox}),
        "capacity_plan",
        {"model_dir": str(root / model), **args},
    )
    assert result.ok, result.error
    CapacityPlan.model_validate(result.data)  # the data is the plan, for readers to validate
    data: dict[str, Any] = result.data
    data["_output"] = result.output
    return data


def reason(data: dict[str, Any], check: str) -> dict[str, Any]:
    (found,) = [r for r in data["reasons"] if r["check"] == check]
    return found


# ---------------------------------------------------------------- KV bytes per token per GPU


@pytest.mark.parametrize(
    ("model", "args", "expected"),
    [
        # MLA: (kv_lora_rank 512 + qk_rope_head_dim 64) × 61 layers × 2 B, not split by tp.
        ("DeepSeek-V3", {"tp": 8}, (512 + 64) * 61 * 2),  # 70,272
        ("DeepSeek-V3", {"tp": 8, "kv_cache_dtype": "fp8_e4m3"}, (512 + 64) * 61 * 1),
        ("DeepSeek-V3", {"tp": 8, "engine": "vllm"}, (512 + 64) * 61 * 2),
        # fp4 KV: half the cell plus one byte of scale per 16 values.
        ("DeepSeek-V3", {"tp": 8, "kv_cache_dtype": "fp4"}, 576 * 61 // 2 + 576 // 16 * 61),
        # GQA: max(1, 8 kv heads ÷ tp) × (128 + 128) × 80 layers × 2 B.
        ("Llama-3-70B", {"tp": 8}, 1 * 256 * 80 * 2),  # 40,960
        ("Llama-3-70B", {"tp": 4}, 2 * 256 * 80 * 2),  # 81,920
        ("Llama-3-70B", {"tp": 16}, 1 * 256 * 80 * 2),  # kv heads replicated past 8
        ("Llama-3-70B", {"tp": 4, "engine": "vllm"}, 2 * 256 * 80 * 2),
        # pp 2: each stage caches its own 40 layers.
        ("Llama-3-70B", {"tp": 4, "pp": 2}, 2 * 256 * 40 * 2),
        # Hybrid linear attention: only the 15 full-attention layers of 60 hold KV.
        ("Qwen3.5-NVFP4", {"tp": 8}, 1 * 512 * 15 * 2),  # 15,360
        ("Qwen3.5-NVFP4", {"tp": 1}, 2 * 512 * 15 * 2),  # 30,720
        # MTP: the draft's 1 layer adds 1/15 of the target's cell (SGLang's EAGLE rule).
        ("Qwen3.5-NVFP4", {"tp": 8, "speculative": "mtp"}, 15_360 + 15_360 // 15),
        # Sliding window (SGLang hybrid SWA): 12 full layers + 0.8 × 12 sliding layers.
        ("gpt-oss-20b-BF16", {"tp": 1}, int(8 * 128 * 12 * 2 + 0.8 * 8 * 128 * 12 * 2)),
        ("gpt-oss-20b-BF16", {"tp": 8}, int(1 * 128 * 12 * 2 + 0.8 * 1 * 128 * 12 * 2)),
        # vLLM pages every attention layer, sliding ones included.
        ("gpt-oss-20b-BF16", {"tp": 1, "engine": "vllm"}, 8 * 128 * 24 * 2),
    ],
)
def test_kv_bytes_per_token_per_gpu_match_the_hand_worked_cell(
    models: Path, model: str, args: dict[str, Any], expected: int
) -> None:
    gpus = args.get("tp", 1) * args.get("pp", 1)
    data = plan(models, model, gpus=f"{gpus}xH200", **args)
    assert data["kv_bytes_per_token_per_gpu"] == expected
    assert f"KV bytes per token per GPU: {expected:,}" in data["_output"]


# ---------------------------------------------------------------- weights and the pool


def test_llama_70b_on_8xh100_weights_pool_and_capacity_are_exact(models: Path) -> None:
    data = plan(models, "Llama-3-70B", gpus="8xH100", tp=8, context_length=8192)
    # Per GPU at tp 8: embeddings and lm_head vocab-parallel (128256 × 8192 × 2 B ÷ 8 each);
    # per layer q and o ÷ 8 (16,777,216 each), k and v ÷ 8 (2,097,152 each), gate, up and
    # down ÷ 8 (58,720,256 each), two norms whole (16,384 each); the final norm whole.
    per_layer = 2 * 16_777_216 + 2 * 2_097_152 + 3 * 58_720_256 + 2 * 16_384
    weights = 80 * per_layer + 2 * 262_668_288 + 16_384
    assert weights == 17_640_734_720
    assert data["weight_bytes_per_gpu"] == weights
    assert data["weight_bytes_total"] == sum(
        fx.nbytes(*s) for s in fx.llama3_70b_tensors().values()
    )
    # SGLang's default on an 81,559 MiB GPU at tp 8: reserve 512 + 8192 × 1.5 + 8 / 8 × 1024
    # + 512 × 2 = 14,848 MiB, so mem_fraction_static = round(66,711 / 81,559, 3) = 0.818.
    pool = data["pool"]
    assert pool["mem_fraction"] == 0.818
    # SGLang's pool: mem_fraction_static × (the CUDA total, 81,090 MiB on an H100, less what
    # was in use before the weights: 0.5 GiB context + 1.23 GiB NCCL at tp > 1 on an NVSwitch
    # Hopper node) - the weights - the rotary cache (8,192 positions × 128 × 2 B).
    budget = int(81_090 * MIB * 0.818)
    assert pool["static_budget_bytes"] == budget
    preload = int(0.5 * (1 << 30)) + int(1.23 * (1 << 30))
    kv_pool = budget - weights - 8192 * 128 * 2 - int(preload * 0.818)
    assert pool["kv_pool_bytes"] == kv_pool
    tokens = kv_pool // 40_960
    assert data["max_kv_tokens"] == tokens
    assert data["max_concurrent_at_context"] == tokens // 8192
    assert data["max_context_single"] == 8192  # the model's own limit, below the pool's
    k_size = tokens * 80 * 128 * 2 / (1 << 30)
    assert (
        f"predicted engine line: KV Cache is allocated. #tokens: {tokens}, "
        f"K size: {k_size:.2f} GB, V size: {k_size:.2f} GB" in data["_output"]
    )
    assert data["verdict"] == "fits"


def test_deepseek_v3_on_8xh200_fits_and_on_8xh100_does_not(models: Path) -> None:
    h200 = plan(models, "DeepSeek-V3", gpus="8xH200", tp=8)
    assert h200["verdict"] == "fits"
    assert h200["model_max_context"] == 4096 * 40  # yarn: original 4096 × factor 40
    # The MTP layer (layer 61) is not loaded without speculative decoding.
    with_mtp = plan(models, "DeepSeek-V3", gpus="8xH200", tp=8, speculative="nextn")
    assert with_mtp["weight_bytes_per_gpu"] > h200["weight_bytes_per_gpu"]
    assert reason(with_mtp, "mtp_weights_present")["ok"]
    h100 = plan(models, "DeepSeek-V3", gpus="8xH100", tp=8)
    assert h100["verdict"] == "does_not_fit"
    assert not reason(h100, "weights_fit")["ok"]
    assert h100["weight_bytes_per_gpu"] > 80 * 1e9  # ~686 GB of FP8 over 8 GPUs


def test_numbers_are_still_computed_when_incompatible(models: Path) -> None:
    data = plan(models, "Llama-3-70B", gpus="3xH100", tp=3)
    assert data["verdict"] == "incompatible"
    heads = reason(data, "heads_divisible_by_tp")
    assert not heads["ok"] and "64 attention heads ÷ tp 3 is not whole" in heads["detail"]
    assert heads["evidence"][0] == {
        "source": "config.json num_attention_heads",
        "quote": '"num_attention_heads": 64',
    }
    assert data["kv_bytes_per_token_per_gpu"] == 2 * 256 * 80 * 2  # 8 // 3 = 2 heads per GPU
    assert data["max_kv_tokens"] > 0


def test_context_past_the_model_limit_is_refused(models: Path) -> None:
    data = plan(models, "Llama-3-70B", gpus="8xH200", tp=8, context_length=131072)
    check = reason(data, "context_within_model")
    assert not check["ok"] and "max_position_embeddings = 8192" in check["detail"]
    assert data["verdict"] == "incompatible"


def test_hybrid_model_budgets_recurrent_state_apart(models: Path) -> None:
    data = plan(models, "Qwen3.5-NVFP4", gpus="8xH200", tp=8, context_length=131072)
    # Per request per GPU, 45 Gated-DeltaNet layers: conv (4 - 1) × (2·16·128 + 64·128) ÷ 8
    # × 2 B = 9,216 plus state 64 ÷ 8 × 128 × 128 × 4 B = 524,288.
    assert data["recurrent_state_bytes_per_request_per_gpu"] == 45 * (9_216 + 524_288)
    pool = data["pool"]
    terms = {t["name"]: t["bytes"] for t in data["engine_account"]["terms"]}
    before = (
        terms["rotary cos/sin cache"] + terms["memory in use before the weights load (× fraction)"]
    )
    rest = pool["static_budget_bytes"] - pool["weight_bytes"] - before
    assert pool["recurrent_state_bytes"] == int(rest * 0.9 / 1.9)
    assert data["max_kv_tokens"] == (rest - pool["recurrent_state_bytes"]) // 15_360
    slots = pool["recurrent_state_bytes"] // (45 * (9_216 + 524_288))
    assert data["max_concurrent_at_context"] == min(data["max_kv_tokens"] // 131072, slots // 3)
    assert reason(data, "recurrent_state")["ok"]
    vllm = plan(models, "Qwen3.5-NVFP4", gpus="8xH200", tp=8, context_length=131072, engine="vllm")
    assert vllm["pool"]["recurrent_state_bytes"] == 0  # vLLM: state in the same pool
    assert vllm["max_concurrent_at_context"] == vllm["max_kv_tokens"] // 131072 > 0


# ---------------------------------------------------------------- quantisation floor per GPU


@pytest.mark.parametrize(
    ("model", "gpu", "engine", "path", "verdict"),
    [
        ("Qwen3.5-NVFP4", "B200", "sglang", "native", "fits"),
        ("Qwen3.5-NVFP4", "GB200", "sglang", "native", "fits"),
        ("Qwen3.5-NVFP4", "H200", "sglang", "fallback (weight-only)", "fits"),
        ("Qwen3.5-NVFP4", "A100-80GB", "sglang", "fallback (weight-only)", "fits"),
        ("Qwen3.5-NVFP4", "H100", "vllm", "fallback (weight-only)", "fits"),
        ("DeepSeek-V3", "H200", "sglang", "native", "fits"),
        ("DeepSeek-V3", "A100-80GB", "sglang", "fallback (weight-only)", "does_not_fit"),
        ("Llama-3-70B-FP8", "L40S", "sglang", "native", "fits"),
        ("Llama-3-70B-FP8", "A100-80GB", "sglang", "refused", "incompatible"),
        ("Llama-3-70B-FP8", "A100-40GB", "vllm", "refused", "incompatible"),
    ],
)
def test_quantisation_floor_per_gpu(
    models: Path, model: str, gpu: str, engine: str, path: str, verdict: str
) -> None:
    data = plan(models, model, gpus=f"8x{gpu}", tp=8, engine=engine)
    check = reason(data, "quantization_on_gpu")
    assert check["detail"].endswith(f": {path}")
    assert check["ok"] == (path != "refused")
    assert data["verdict"] == verdict
    sources = [e["source"] for e in check["evidence"]]
    assert any("get_min_capability" in s or "quantization/" in s for s in sources)


BNB_FP4 = {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "fp4"}
CT_NVFP4 = {
    "quant_method": "compressed-tensors",
    "format": "nvfp4-pack-quantized",
    "config_groups": {
        "group_0": {
            "targets": ["Linear"],
            "weights": {"num_bits": 4, "type": "float", "group_size": 16},
            "input_activations": {"num_bits": 4, "type": "float"},
        }
    },
}
MODELOPT_FP8 = {"quant_method": "modelopt", "quant_algo": "FP8"}


@pytest.mark.parametrize(
    ("declared", "engine", "method"),
    [
        # An FP4 algorithm names ModelOpt's method only for a ModelOpt checkpoint.
        (BNB_FP4, "sglang", "bitsandbytes"),
        (BNB_FP4, "vllm", "bitsandbytes"),
        (CT_NVFP4, "vllm", "compressed-tensors"),
        (CT_NVFP4, "sglang", "compressed-tensors"),
        ({"quant_method": "modelopt", "quant_algo": "NVFP4"}, "vllm", "modelopt_fp4"),
        # ModelOpt FP8 is vLLM's `modelopt` and SGLang's `modelopt_fp8`.
        (MODELOPT_FP8, "vllm", "modelopt"),
        (MODELOPT_FP8, "sglang", "modelopt_fp8"),
        ({"quant_method": "awq", "bits": 4, "group_size": 128}, "vllm", "awq"),
    ],
)
def test_the_declared_method_is_named_as_the_engine_names_it(
    tmp_path: Path, declared: dict[str, Any], engine: str, method: str
) -> None:
    config = {**fx.LLAMA3_70B, "quantization_config": declared}
    fx.shaped_checkpoint(tmp_path / "model", config, fx.llama3_70b_tensors())
    data = plan(tmp_path, "model", gpus="8xH100", tp=8, engine=engine)
    assert data["quant_method"] == method
    if method in ("modelopt", "modelopt_fp8"):  # its floor is found under the engine's name
        assert reason(data, "quantization_on_gpu")["ok"]


def test_fp8_kv_cache_needs_sm89(models: Path) -> None:
    a100 = plan(models, "Llama-3-70B", gpus="8xA100", tp=8, kv_cache_dtype="fp8_e4m3")
    assert not reason(a100, "kv_cache_dtype_on_gpu")["ok"]
    assert a100["verdict"] == "incompatible"
    h100 = plan(models, "Llama-3-70B", gpus="8xH100", tp=8, kv_cache_dtype="fp8_e4m3")
    assert h100["kv_bytes_per_token_per_gpu"] == 1 * 256 * 80 * 1
    assert h100["verdict"] == "fits"


def test_sharded_intermediate_must_divide_the_quant_group(models: Path) -> None:
    # DeepSeek-V3: moe_intermediate_size 2048 ÷ tp 32 = 64, not a multiple of FP8's 128 block.
    data = plan(models, "DeepSeek-V3", gpus="32xH200", tp=32)
    check = reason(data, "moe_intermediate_size_divisible")
    assert not check["ok"] and "not a multiple of the FP8 block 128" in check["detail"]
    assert data["verdict"] == "incompatible"


def test_unknown_gpu_and_missing_gpus_say_what_to_do(models: Path) -> None:
    sandbox = SandboxedHost("local", LocalHost(), HostConfig(roots=[str(models)]), Limits())
    ctx = ToolContext(hosts={"local": sandbox})
    bad = execute(ctx, "capacity_plan", {"model_dir": str(models / "Llama-3-70B"), "gpus": "8xV99"})
    assert not bad.ok and "unknown GPU 'V99'" in (bad.error or "") and "8xH200" in (bad.error or "")
    # The refusal names what is missing and the inputs that give it.
    assert "gpu_memory_mib" in (bad.error or "") and "gpu_compute_capability" in (bad.error or "")


@pytest.mark.parametrize(
    ("name", "key", "memory_mib", "capability", "url"),
    [
        ("8xMI300X", "MI300X", 196592, "9.4", "amd.com/en/products/accelerators/instinct"),
        ("AMD Instinct MI325X", "MI325X", 262144, "9.4", "mi325x"),
        ("NVIDIA GH200 480GB", "GH200", 97871, "9.0", "grace-hopper-superchip"),
        ("GH200-144GB", "GH200-144GB", 146831, "9.0", "grace-hopper-superchip"),
        ("2xRTX-A5000", "RTX-A5000", 24564, "8.6", "rtx-a5000"),
        ("NVIDIA RTX 6000 Ada Generation", "RTX-6000-ADA", 49140, "8.9", "rtx-6000"),
        ("4xA40", "A40", 46068, "8.6", "data-center/a40"),
        ("RTX 4000 Ada", "RTX-4000-ADA", 20475, "8.9", "rtx-4000"),
    ],
)
def test_amd_grace_hopper_and_workstation_gpus_are_in_the_table(
    name: str, key: str, memory_mib: int, capability: str, url: str
) -> None:
    from sleuth.tools.capacity.gpus import parse_gpus

    spec = parse_gpus(name).spec
    assert (spec.key, spec.memory_mib, spec.compute_capability) == (key, memory_mib, capability)
    assert url in spec.source  # each row names the vendor page its figures come from


def test_mi300x_and_a5000_get_an_answer(models: Path) -> None:
    mi = plan(models, "Llama-3-70B", gpus="8xMI300X", tp=8, engine="vllm", context_length=8192)
    assert mi["verdict"] == "fits" and mi["gpu"]["key"] == "MI300X"
    assert mi["max_kv_tokens"] > 8 * 1024 * 1024 // 40  # 192 GB cards hold millions of tokens
    a5000 = plan(models, "Llama-3-70B", gpus="8xRTX-A5000", tp=8, context_length=8192)
    assert a5000["gpu"]["smi_name"] == "NVIDIA RTX A5000"


def test_an_unknown_gpu_with_its_memory_and_capability_given_is_planned(models: Path) -> None:
    data = plan(
        models, "Llama-3-70B", gpus="8xV99", tp=8, gpu_memory_mib=98304,
        gpu_compute_capability="9.0", context_length=8192,
    )  # fmt: skip
    assert data["gpu"]["memory_mib"] == 98304 and data["gpu"]["key"] == "V99"
    assert "given in the question" in data["gpu"]["source"]
    assert data["pool"]["gpu_memory_bytes"] == (98304 - 512) * MIB


# ---------------------------------------------------------------- engine rules at the source

OLD_MODELOPT = """\
class ModelOptFp8Config(QuantizationConfig):
    @classmethod
    def get_name(cls) -> str:
        return "modelopt_fp8"

    @classmethod
    def get_min_capability(cls) -> int:
        return 89  # Minimum hardware capability (e.g., Hopper GPUs).


class ModelOptFp4Config(QuantizationConfig):
    @classmethod
    def get_name(cls) -> str:
        return "modelopt_fp4"

    @classmethod
    def get_min_capability(cls) -> int:
        return 100
"""
OLD_RUNNER = """\
class ModelRunner:
    def profile_max_num_token(self, total_gpu_memory: int):
        cell_size = (
            self.model_config.get_num_kv_heads(get_attention_tp_size())
            * (self.model_config.head_dim + self.model_config.v_head_dim)
            * num_layers
            * torch._utils._element_size(self.kv_cache_dtype)
        )
"""


def fake_sglang(site: Path, version: str) -> None:
    """An installed SGLang as an older release wrote these two rules (NVFP4 needed SM100)."""
    pkg = site / "sglang"
    for rel, text in (
        ("__init__.py", ""),
        ("srt/layers/quantization/modelopt_quant.py", OLD_MODELOPT),
        ("srt/model_executor/model_runner.py", OLD_RUNNER),
    ):
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text(text)
    meta = site / f"sglang-{version}.dist-info"
    meta.mkdir(exist_ok=True)
    (meta / "METADATA").write_text(f"Metadata-Version: 2.1\nName: sglang\nVersion: {version}\n")


@pytest.mark.ssh
def test_installed_engine_source_is_quoted_and_its_rule_wins(
    models: Path, ssh_host_factory: Any
) -> None:
    site = models / "site"
    fake_sglang(site, "0.4.9")
    python = models / "bin" / "python3"  # the host's python3, seeing that site-packages
    python.parent.mkdir(exist_ok=True)
    python.write_text(f'#!/bin/sh\nPYTHONPATH={site} exec python3 "$@"\n')
    python.chmod(0o755)
    remote = ssh_host_factory("remote", [str(models)])
    remote.config.python = str(python)
    result = execute(
        ToolContext(hosts={"remote": remote}),
        "capacity_plan",
        {"host": "remote", "model_dir": str(models / "Qwen3.5-NVFP4"), "gpus": "8xH200", "tp": 8},
    )
    assert result.ok, result.error
    data = result.data
    assert data["rules_from"] == f"sglang 0.4.9 installed at {site / 'sglang'}"
    quant = reason(data, "quantization_on_gpu")
    assert quant["evidence"][0] == {
        "source": f"remote:{site}/sglang/srt/layers/quantization/modelopt_quant.py:18",
        "quote": "return 100",
    }
    assert not quant["ok"] and "refused at load" in quant["detail"]
    assert data["quant_min_capability"] == 100
    assert data["verdict"] == "incompatible"
    kv = reason(data, "kv_holds_one_request")
    assert kv["evidence"][0] == {
        "source": f"remote:{site}/sglang/srt/model_executor/model_runner.py:5",
        "quote": "* (self.model_config.head_dim + self.model_config.v_head_dim)",
    }
    assert data["kv_bytes_per_token_per_gpu"] == 15_360  # numbers still computed
    assert f"remote:{site}/sglang/srt/layers/quantization/modelopt_quant.py:18: return 100" in (
        result.output
    )


def test_without_the_engine_the_built_in_version_is_named(models: Path) -> None:
    data = plan(models, "Llama-3-70B", gpus="8xH100", tp=8)
    assert data["engine_source"] is None
    assert data["rules_from"].startswith("built-in rules of sglang 0.5.23")
    assert "rules: built-in rules of sglang 0.5.23" in data["_output"]


# ---------------------------------------------------------------- the host's own GPUs


@pytest.fixture
def eight_h100(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An nvidia-smi on PATH that reports 8 H100s with 81,000 MiB each (the table says 81,559)."""
    lines = "".join(f"{i}, NVIDIA H100 80GB HBM3, 81000, 3, 0, 550.54.15, 9.0\\n" for i in range(8))
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir()
    smi.write_text(f"#!/bin/sh\nprintf '{lines}'\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{smi.parent}:{os.environ['PATH']}")


@pytest.mark.usefixtures("eight_h100")
def test_gpu_info_gives_the_hosts_gpus_as_a_typed_inventory(tmp_path: Path) -> None:
    sandbox = SandboxedHost("local", LocalHost(), HostConfig(roots=[str(tmp_path)]), Limits())
    result = execute(ToolContext(hosts={"local": sandbox}), "gpu_info", {})
    inventory = GpuInventory.model_validate(result.data)
    assert inventory.reason is None
    assert [g.index for g in inventory.gpus] == list(range(8))
    first = inventory.gpus[0]
    assert (first.name, first.memory_total_mib, first.memory_used_mib) == (
        "NVIDIA H100 80GB HBM3",
        81000,
        3,
    )
    assert (first.driver, first.compute_capability, first.utilization_pct) == (
        "550.54.15",
        "9.0",
        0,
    )
    assert result.output.startswith("8 GPU(s) on local:\nGPU 0: NVIDIA H100 80GB HBM3, 3/81000")


def test_gpu_info_without_nvidia_smi_is_an_empty_inventory_with_its_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi anywhere on it
    sandbox = SandboxedHost("local", LocalHost(), HostConfig(roots=[str(tmp_path)]), Limits())
    result = execute(ToolContext(hosts={"local": sandbox}), "gpu_info", {})
    assert result.ok
    assert GpuInventory.model_validate(result.data) == GpuInventory(
        gpus=[], reason="nvidia-smi is not installed"
    )


@pytest.mark.usefixtures("eight_h100")
def test_the_hosts_gpus_are_used_when_none_are_named(models: Path) -> None:
    data = plan(models, "Llama-3-70B", tp=8, context_length=8192)
    assert data["gpus_from"] == "nvidia-smi on local"
    assert data["gpu_count"] == 8 and data["gpu"]["memory_mib"] == 81000
    # CUDA's total: nvidia-smi's 81,000 MiB less the 469 MiB an H100's driver reserves
    # (the table's 81,559 nvidia-smi MiB against the 81,090 MiB vLLM logs).
    assert data["pool"]["gpu_memory_bytes"] == (81000 - 469) * MIB
    (fit,) = [r for r in data["reasons"] if r["check"] == "weights_fit"]
    assert fit["evidence"][0] == {
        "source": "nvidia-smi on local",
        "quote": "GPU 0: NVIDIA H100 80GB HBM3, 3/81000 MiB used, util 0%, driver 550.54.15, "
        "compute capability 9.0",
    }


@pytest.mark.usefixtures("eight_h100")
def test_the_hosts_real_gpu_wins_over_the_table_row(models: Path) -> None:
    named = plan(models, "Llama-3-70B", gpus="8xH100-SXM", tp=8)
    assert named["gpu"]["memory_mib"] == 81000  # measured, not the table's 81,559
    assert named["gpus_from"] == "gpus=8xH100-SXM, measured by nvidia-smi on local"
    other = plan(models, "Llama-3-70B", gpus="8xH200", tp=8)  # not the host's part: the table
    assert other["gpu"]["memory_mib"] == 143771 and "built-in table" in other["gpus_from"]


def test_an_engine_outside_the_roots_still_picks_its_releases_rule(
    models: Path, tmp_path: Path
) -> None:
    site = tmp_path / "site"  # outside the roots: its source cannot be read, its version can
    fake_sglang(site, "0.5.9")
    python = tmp_path / "python3"
    python.write_text(f'#!/bin/sh\nPYTHONPATH={site} exec python3 "$@"\n')
    python.chmod(0o755)
    config = HostConfig(roots=[str(models)], python=str(python))
    ctx = ToolContext(hosts={"local": SandboxedHost("local", LocalHost(), config, Limits())})
    args = {"model_dir": str(models / "Qwen3.5-NVFP4"), "gpus": "8xH200", "tp": 8}
    data = execute(ctx, "capacity_plan", args).data
    assert data["rules_from"] == (
        "built-in rules of sglang 0.5.23 (sglang 0.5.9 is installed outside the host's roots)"
    )
    quant = reason(data, "quantization_on_gpu")
    assert quant["evidence"][0]["source"].startswith("sglang 0.5.12 python/sglang/srt/")
    assert "sglang 0.5.9 requires compute capability ≥ 10.0" in quant["detail"]
    assert data["verdict"] == "incompatible"
    newer = SandboxedHost("local", LocalHost(), HostConfig(roots=[str(models)]), Limits())
    assert (
        execute(ToolContext(hosts={"local": newer}), "capacity_plan", args).data["verdict"]
        == "fits"
    )  # without an install: 0.5.23's rule, the weight-only fallback


# ---------------------------------------------------------------- online FP8 (--quantization fp8)

TINY = {
    "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 64,
    "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
    "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 256,
    "max_position_embeddings": 4096, "torch_dtype": "bfloat16", "tie_word_embeddings": False,
}  # fmt: skip
LINEAR = ("q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight",
          "gate_proj.weight", "up_proj.weight", "down_proj.weight")  # fmt: skip


def tiny_tensors(dtype: str = "BF16") -> dict[str, fx.Spec]:
    """A two-layer Qwen2-shaped checkpoint (biased q/k/v) whose linear weights are `dtype`."""
    h, kv, inter, vocab = 64, 32, 128, 256
    out: dict[str, fx.Spec] = {"model.embed_tokens.weight": ("BF16", [vocab, h])}
    for i in range(2):
        p = f"model.layers.{i}"
        out[f"{p}.input_layernorm.weight"] = ("BF16", [h])
        for proj, o, n in (("q_proj", h, h), ("k_proj", kv, h), ("v_proj", kv, h)):
            out[f"{p}.self_attn.{proj}.weight"] = (dtype, [o, n])
            out[f"{p}.self_attn.{proj}.bias"] = ("BF16", [o])
        out[f"{p}.self_attn.o_proj.weight"] = (dtype, [h, h])
        out[f"{p}.post_attention_layernorm.weight"] = ("BF16", [h])
        for proj, o, n in (("gate_proj", inter, h), ("up_proj", inter, h), ("down_proj", h, inter)):
            out[f"{p}.mlp.{proj}.weight"] = (dtype, [o, n])
    out["model.norm.weight"] = ("BF16", [h])
    out["lm_head.weight"] = ("BF16", [vocab, h])
    return out


def tiny(root: Path, name: str, quant: dict[str, Any] | None = None, dtype: str = "BF16") -> Path:
    """The tiny checkpoint with its data: one real safetensors file and its config.json."""
    folder = root / name
    folder.mkdir()
    fx.write_safetensors(folder / "model.safetensors", tiny_tensors(dtype))
    fx.write_config(folder, {**TINY, **({"quantization_config": quant} if quant else {})})
    return folder


def is_linear(name: str) -> bool:
    return name.startswith("model.layers.") and name.endswith(LINEAR)


@pytest.mark.parametrize(
    ("engine", "rule"),
    [
        ("vllm", "vllm 0.19.0 vllm/model_executor/layers/quantization/fp8.py:547"),
        ("sglang", "sglang 0.5.23 python/sglang/srt/layers/quantization/fp8.py:1160"),
    ],
)
def test_online_fp8_counts_the_decoder_linear_weights_at_one_byte(
    tmp_path: Path, engine: str, rule: str
) -> None:
    tiny(tmp_path, "tiny")
    tensors = tiny_tensors()
    linear = {n: s for n, s in tensors.items() if is_linear(n)}
    kept = {n: s for n, s in tensors.items() if not is_linear(n)}
    args = {"gpus": "1xH100", "engine": engine, "mem_fraction": 0.9}
    bf16 = plan(tmp_path, "tiny", **args)
    fp8 = plan(tmp_path, "tiny", **args, quantization="fp8")
    # Embeddings, lm_head, norms and biases as stored; each linear weight 1 B an element.
    elements = sum(fx.nbytes(*s) // 2 for s in linear.values())
    assert fp8["weight_bytes_per_gpu"] == sum(fx.nbytes(*s) for s in kept.values()) + elements
    assert bf16["weight_bytes_per_gpu"] - fp8["weight_bytes_per_gpu"] == elements
    assert fp8["weight_bytes_total"] == bf16["weight_bytes_total"]  # the checkpoint's own
    assert fp8["pool"]["kv_pool_bytes"] - bf16["pool"]["kv_pool_bytes"] == elements
    check = reason(fp8, "online_quantization")
    assert (
        check["ok"]
        and f"the decoder layers' {len(linear)} linear weight tensors" in (check["detail"])
    )
    assert "embeddings, lm_head, norms, biases and routers stay bfloat16" in check["detail"]
    assert rule in [e["source"] for e in check["evidence"]]
    # The engine's fp8 method now runs, so its capability floor is checked too.
    assert fp8["quant_method"] == "fp8" and reason(fp8, "quantization_on_gpu")["ok"]
    (term,) = [t for t in fp8["engine_account"]["terms"] if t["name"] == "weights"]
    assert term["bytes"] == fp8["weight_bytes_per_gpu"] and rule in term["source"]
    assert "the decoder layers' linear weights at 1 B each" in term["how"]
    out = fp8["_output"]
    assert "--quantization fp8" in out.splitlines()[0]
    assert f"  - weights: {term['bytes']:,} B" in out and "[ok] online_quantization:" in out
    assert "online_quantization" not in bf16["_output"]


def test_online_fp8_on_llama_70b_halves_only_the_layers_sharded_by_tp(models: Path) -> None:
    data = plan(models, "Llama-3-70B", gpus="8xH100", tp=8, engine="vllm", quantization="fp8")
    # Per GPU at tp 8, as the bf16 plan but each linear weight at 1 B: q and o 8192 × 8192 ÷ 8,
    # k and v 1024 × 8192 ÷ 8, gate, up and down 28672 × 8192 ÷ 8; the two norms (16,384 B
    # each), embeddings and lm_head (262,668,288 B each) and the final norm unchanged.
    per_layer = 2 * 8_388_608 + 2 * 1_048_576 + 3 * 29_360_128 + 2 * 16_384
    assert data["weight_bytes_per_gpu"] == 80 * per_layer + 2 * 262_668_288 + 16_384
    assert data["verdict"] == "fits"


def test_online_fp8_stores_fused_experts_at_one_byte_and_keeps_routers_and_biases(
    models: Path,
) -> None:
    data = plan(models, "gpt-oss-20b-BF16", gpus="1xH200", engine="vllm", quantization="fp8")
    matrices = (".q_proj.weight", ".k_proj.weight", ".v_proj.weight", ".o_proj.weight",
                ".experts.gate_up_proj", ".experts.down_proj")  # fmt: skip
    total = sum(
        fx.nbytes(*s) // 2 if n.endswith(matrices) else fx.nbytes(*s)
        for n, s in fx.gpt_oss_20b_tensors().items()
    )
    # The 3-D expert tensors at 1 B; router weights and biases, the 2-D expert biases, sinks,
    # norms, embeddings and lm_head as stored.
    assert data["weight_bytes_per_gpu"] == total
    assert (
        "the decoder layers' 144 linear weight tensors"
        in reason(data, "online_quantization")["detail"]
    )


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_a_checkpoint_that_declares_fp8_or_modelopt_is_not_requantised(
    models: Path, tmp_path: Path, engine: str
) -> None:
    own = plan(models, "Llama-3-70B-FP8", gpus="8xH100", tp=8, engine=engine)
    given = plan(models, "Llama-3-70B-FP8", gpus="8xH100", tp=8, engine=engine, quantization="fp8")
    assert given["weight_bytes_per_gpu"] == own["weight_bytes_per_gpu"]
    check = reason(given, "online_quantization")
    assert check["ok"] and "nothing is re-quantised" in check["detail"]
    assert f"declares {own['quant_method']}" in check["detail"]
    assert given["verdict"] == own["verdict"] == "fits"
    tiny(tmp_path, "tiny-fp8", {"quant_method": "fp8", "activation_scheme": "dynamic"}, "F8_E4M3")
    fp8_args = {"gpus": "1xH100", "engine": engine}
    serialized = plan(tmp_path, "tiny-fp8", **fp8_args, quantization="fp8")
    assert (
        serialized["weight_bytes_per_gpu"]
        == plan(tmp_path, "tiny-fp8", **fp8_args)["weight_bytes_per_gpu"]
    )
    assert reason(serialized, "online_quantization")["ok"]
    (term,) = [t for t in serialized["engine_account"]["terms"] if t["name"] == "weights"]
    assert "1 B each" not in term["how"]


@pytest.mark.parametrize(
    ("engine", "rule"),
    [
        ("vllm", "vllm 0.19.0 vllm/config/model.py:989"),
        ("sglang", "sglang 0.5.23 python/sglang/srt/configs/model_config.py:2143"),
    ],
)
def test_fp8_on_a_checkpoint_of_another_method_is_refused_as_the_engine_does(
    tmp_path: Path, engine: str, rule: str
) -> None:
    tiny(tmp_path, "tiny-ct", {"quant_method": "compressed-tensors", "format": "int-quantized"})
    data = plan(tmp_path, "tiny-ct", gpus="1xH100", engine=engine, quantization="fp8")
    check = reason(data, "online_quantization")
    assert not check["ok"] and "declares compressed-tensors" in check["detail"]
    assert check["evidence"][0]["source"] == rule
    assert "does not match the quantization method" in check["evidence"][0]["quote"]
    assert data["verdict"] == "incompatible"
    assert data["max_kv_tokens"] > 0  # the numbers are still there


def test_a_launch_with_quantization_fp8_is_planned_with_it(models: Path) -> None:
    path = str(models / "Llama-3-70B")
    argv = ["vllm", "serve", "M", "--tensor-parallel-size", "8", "--quantization", "fp8"]
    assert launch_input("vllm", path, argv, {}).quantization == "fp8"
    assert launch_input("sglang", path, ["--tp", "8", "--quantization=fp8"], {}).quantization == (
        "fp8"
    )
    # Another method is the checkpoint's to declare: the launch's flag is not an input.
    assert launch_input("vllm", path, ["--quantization", "awq"], {}).quantization is None


# ---------------------------------------------------------------- the engine version (issue 43)


def fake_vllm(site: Path, version: str) -> None:
    """An installed vLLM: its package folder and its distribution's METADATA, nothing more."""
    (site / "vllm").mkdir(parents=True, exist_ok=True)
    (site / "vllm" / "__init__.py").write_text("")
    meta = site / f"vllm-{version}.dist-info"
    meta.mkdir(exist_ok=True)
    (meta / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n")


def host_with(models: Path, tmp_path: Path, version: str) -> ToolContext:
    site = tmp_path / "site"  # outside the roots: its version is read, its source is not
    fake_vllm(site, version)
    python = tmp_path / "python3"
    python.write_text(f'#!/bin/sh\nPYTHONPATH={site} exec python3 "$@"\n')
    python.chmod(0o755)
    config = HostConfig(roots=[str(models)], python=str(python))
    return ToolContext(hosts={"local": SandboxedHost("local", LocalHost(), config, Limits())})


LLAMA_ON_H100 = {"gpus": "8xH100", "tp": 8, "engine": "vllm", "context_length": 8192}


def test_the_answer_says_the_newest_rules_were_assumed_without_a_version(models: Path) -> None:
    data = plan(models, "Llama-3-70B", **LLAMA_ON_H100)
    version = data["engine_version"]
    assert version["source"] == "assumed" and version["version"] is None
    assert version["rules"] == "v1-0.32"
    assert "engine version: vllm (version unknown), no version given and none found on the " \
        "host: the newest rules assumed" in data["_output"]  # fmt: skip


def test_the_hosts_installed_version_picks_the_rules_and_is_named(
    models: Path, tmp_path: Path
) -> None:
    ctx = host_with(models, tmp_path, "0.10.1")
    args = {"model_dir": str(models / "Llama-3-70B"), **LLAMA_ON_H100}
    result = execute(ctx, "capacity_plan", args)
    assert result.ok, result.error
    version = result.data["engine_version"]
    assert (version["version"], version["source"], version["rules"]) == (
        "0.10.1", "host", "v1-0.19"
    )  # fmt: skip
    assert result.data["engine_account"]["rules"] == "v1-0.19"
    terms = result.data["engine_account"]["terms"]
    assert not any(t["name"].startswith("CUDA graph") for t in terms)
    assert "vllm 0.10.1, installed on the host (python_env)" in result.output
    newest = plan(models, "Llama-3-70B", **LLAMA_ON_H100)  # 0.21+ subtracts the CUDA graphs
    assert newest["max_kv_tokens"] < result.data["max_kv_tokens"]


def test_the_questions_version_wins_and_an_old_release_is_said_plainly(models: Path) -> None:
    data = plan(models, "Llama-3-70B", engine_version="0.6.3", **LLAMA_ON_H100)
    version = data["engine_version"]
    assert (version["source"], version["rules"], version["older"]) == ("question", "v0", True)
    assert any("predates the V1 engine" in w for w in data["warnings"])
    sg = plan(models, "Llama-3-70B", gpus="8xH100", tp=8, engine_version="0.4.6")
    assert sg["engine_version"]["older"] and "older than the rules" in sg["_output"]


def test_older_sglang_releases_take_their_own_default_fraction_and_name_the_rules(
    models: Path,
) -> None:
    """sglang 0.4.3.post4 server_args.py: the default --mem-fraction-static is 0.81 at tp 8;
    0.5.x reserves by GPU size instead (0.874 on an H100): the same launch differs."""
    old = plan(models, "Llama-3-70B", gpus="8xH100", tp=8, engine_version="0.4.3.post4")
    new = plan(models, "Llama-3-70B", gpus="8xH100", tp=8, engine_version="0.5.9")
    assert (old["engine_version"]["rules"], new["engine_version"]["rules"]) == (
        "sglang-0.4",
        "sglang-0.5",
    )
    assert old["pool"]["mem_fraction"] == 0.81
    assert new["pool"]["mem_fraction"] != 0.81
    assert old["max_kv_tokens"] < new["max_kv_tokens"]
    assert "rules sglang-0.4 applied" in old["_output"]
    assert "sglang 0.4.3.post4 python/sglang/srt/server_args.py" in old["rules_from"]
    # 0.4.7.post1 to 0.5.2 reserve by GPU size: (9.5 + 8 / 2) GiB on an 81,559 MiB H100
    tiers = plan(models, "Llama-3-70B", gpus="8xH100", tp=8, engine_version="0.4.9")
    assert tiers["engine_version"]["rules"] == "sglang-0.4.7"
    assert tiers["pool"]["mem_fraction"] == round((81559 - 13.5 * 1024) / 81559, 3)
    assert "rules sglang-0.4.7 applied" in tiers["_output"]
    given = {"mem_fraction": 0.85}  # the pool rule itself reads the same in both releases
    same = [
        plan(models, "Llama-3-70B", gpus="8xH100", tp=8, engine_version=v, **given)
        for v in ("0.4.3.post4", "0.5.9")
    ]
    assert same[0]["max_kv_tokens"] == same[1]["max_kv_tokens"]


def activation_term(data: dict[str, Any]) -> dict[str, Any]:
    (term,) = [t for t in data["engine_account"]["terms"] if t["name"].startswith("activation")]
    return term


def test_vllm_v0_profiles_its_own_batch_default_by_release(models: Path) -> None:
    """V0 profile_run runs max_num_batched_tokens tokens: max(max_model_len, 2048) up to 32K;
    past 32K chunked prefill is on by default, 512 tokens before 0.6.5 and 2048 from it
    (vllm/config.py SchedulerConfig). The V1 default on an H100 would be 8192. Eight
    sequences keep the sampler's share below the forward's."""
    args = {"gpus": "8xH100", "tp": 8, "engine": "vllm", "max_num_seqs": 8}
    short = plan(models, "Llama-3-70B", engine_version="0.6.3", context_length=16384, **args)
    long_old = plan(models, "Llama-3-70B", engine_version="0.6.3", context_length=65536, **args)
    long_new = plan(models, "Llama-3-70B", engine_version="0.6.6", context_length=65536, **args)
    assert "16384 tokens" in activation_term(short)["how"]
    assert "512 tokens" in activation_term(long_old)["how"]
    assert "2048 tokens" in activation_term(long_new)["how"]
    assert activation_term(long_old)["bytes"] < activation_term(long_new)["bytes"]
    assert long_old["max_kv_tokens"] > long_new["max_kv_tokens"]


def test_releases_that_charged_the_cuda_context_are_told_apart(models: Path) -> None:
    """vLLM 0.8.0-0.9.0 (v1/worker/gpu_worker.py) and 0.6.4.x (worker/worker.py) charged every
    non-torch byte on the device, the CUDA context too; 0.9.1 and 0.6.5 measure from a snapshot
    taken after it. A 0.6.4 pre-release is not 0.6.4."""
    from sleuth.tools.capacity import vllm_profile

    def pair(old: str, new: str) -> tuple[dict[str, Any], dict[str, Any]]:
        return (
            plan(models, "Llama-3-70B", engine_version=old, **LLAMA_ON_H100),
            plan(models, "Llama-3-70B", engine_version=new, **LLAMA_ON_H100),
        )

    for old, new in (("0.8.5", "0.9.1"), ("0.6.4.post1", "0.6.4.dev9+g5d264f4a")):
        charged, spared = pair(old, new)
        gap = non_torch_term(charged)["bytes"] - non_torch_term(spared)["bytes"]
        assert charged["max_kv_tokens"] < spared["max_kv_tokens"], (old, new)
        assert gap == vllm_profile.CUDA_CONTEXT, (old, new)
        assert "charged the CUDA context" in charged["engine_version"]["note"]
        assert "CUDA context" not in spared["engine_version"]["note"]


def test_vllm_v1_batch_defaults_follow_the_release(models: Path) -> None:
    """EngineArgs' serve defaults: 0.8.0-0.8.4 looked for "h100"/"h200" in the GPU's name,
    0.8.5 took any GPU of 70 GiB or more, and from 0.9.0 A100s are left out."""
    args = {"tp": 8, "engine": "vllm", "context_length": 8192}

    def tokens(gpus: str, version: str) -> str:
        data = plan(models, "Llama-3-70B", gpus=gpus, engine_version=version, **args)
        return str(activation_term(data)["how"])

    assert "8192 tokens" in tokens("8xA100-80GB", "0.8.5")
    assert "2048 tokens" in tokens("8xA100-80GB", "0.9.0")
    assert "2048 tokens" in tokens("8xA100-80GB", "0.8.4")
    assert "8192 tokens" in tokens("8xH100", "0.8.0")
    # ROCm ran V0 by default before 0.9.2: V0's batch, max(max_model_len, 2048), not V1's.
    assert "8192 tokens" in tokens("8xMI300X", "0.8.4")


# ------------------------------------------------------------ links: custom all-reduce (issue 43)


@pytest.mark.parametrize(
    ("tp", "nodes", "interconnect", "gpu_nvlink", "runs"),
    [
        (8, 1, "auto", True, True),  # HGX H100: NVSwitch, one node
        (4, 1, "auto", False, False),  # 4× L40S: more than two PCIe-only GPUs
        (2, 1, "auto", False, True),  # a PCIe pair still runs it
        (8, 2, "auto", True, False),  # tp across two nodes
        (3, 1, "nvlink", True, False),  # world size 3 is not supported
        (4, 1, "nvlink", False, True),  # the question's interconnect wins over the table
        (4, 1, "pcie", True, False),
    ],
)
def test_custom_all_reduce_runs_where_vllm_runs_it(
    tp: int, nodes: int, interconnect: Any, gpu_nvlink: bool, runs: bool
) -> None:
    from sleuth.tools.capacity.topology import topology

    assert topology(tp, nodes, interconnect, gpu_nvlink, "X").custom_all_reduce is runs


def non_torch_term(data: dict[str, Any]) -> dict[str, Any]:
    (term,) = [t for t in data["engine_account"]["terms"] if t["name"].startswith("non-torch")]
    return term


def test_pcie_cards_and_multi_node_tp_are_not_charged_the_nvlink_reserve(models: Path) -> None:
    args = {"engine": "vllm", "tp": 4, "context_length": 8192}
    pcie = plan(models, "Llama-3-70B", gpus="4xL40S", **args)
    bridged = plan(models, "Llama-3-70B", gpus="4xL40S", interconnect="nvlink", **args)
    assert pcie["topology"]["custom_all_reduce"] is False
    assert "PCIe-only" in pcie["topology"]["links_from"]
    assert non_torch_term(bridged)["bytes"] - non_torch_term(pcie)["bytes"] == 24 * MIB
    # L40S is not the Hopper NVSwitch node the figure was measured on, bridged or not
    assert non_torch_term(pcie)["spread"] == non_torch_term(bridged)["spread"] == 1.0
    assert pcie["max_kv_tokens"] > bridged["max_kv_tokens"]
    assert "4 PCIe-only GPUs (more than two): custom all-reduce is off" in pcie["_output"]
    nodes = plan(models, "Llama-3-70B", gpus="8xH100", nodes=2, engine="vllm", tp=8,
                 context_length=8192)  # fmt: skip
    assert nodes["topology"]["custom_all_reduce"] is False
    assert "spans 2 nodes" in non_torch_term(nodes)["how"]


def test_the_tp_reserve_follows_the_collective_library_the_links_allow(models: Path) -> None:
    """One NVSwitch node of Hopper/Blackwell GPUs adds the 1.85 GiB measured on H100 SXM at
    tp > 1. An A100 node adds the 0.12 GiB measured with vLLM 0.10.1.1, and so does a Hopper
    group across nodes; AMD's RCCL keeps the H100 figure, as uncertain as itself. Each answer
    says which it charged."""
    args = {"engine": "vllm", "tp": 2, "context_length": 8192, "engine_version": "0.10.1"}
    h100 = non_torch_term(plan(models, "Llama-3-70B", gpus="2xH100", **args))
    a100 = non_torch_term(plan(models, "Llama-3-70B", gpus="2xA100-80GB", **args))
    mi300 = non_torch_term(plan(models, "Llama-3-70B", gpus="2xMI300X", **args))
    split = non_torch_term(plan(models, "Llama-3-70B", gpus="2xH100", nodes=2, **args))
    base = int(0.25 * GIB)
    assert h100["bytes"] == mi300["bytes"] == base + int(1.85 * GIB)
    assert a100["bytes"] == base + int(0.12 * GIB)
    assert split["bytes"] == base + int(0.12 * GIB) - 24 * MIB  # custom all-reduce is off too
    assert (h100["spread"], a100["spread"], mi300["spread"]) == (0.12, 1.0, 1.0)
    assert "on an NVSwitch Hopper node" in h100["how"] and "A100 80GB at tp 2" in a100["how"]
    assert "RCCL" in mi300["how"] and "off NVSwitch Hopper/Blackwell nodes" in split["how"]


# ------------------------------------------------------------ CUDA graph captures (issue 43)


def graph_term(data: dict[str, Any]) -> dict[str, Any]:
    (term,) = [t for t in data["engine_account"]["terms"] if t["name"].startswith("CUDA graph")]
    return term


def test_a_smaller_cuda_graph_capture_reserves_less(models: Path) -> None:
    from sleuth.tools.capacity.vllm_profile import capture_sizes

    assert len(capture_sizes(512)) == 51 and len(capture_sizes(256)) == 35
    assert capture_sizes(64)[-1] == 64 and len(capture_sizes(64)) == 11
    full = plan(models, "Llama-3-70B", **LLAMA_ON_H100)  # max_num_seqs 1024: captures to 512
    capped = plan(models, "Llama-3-70B", max_num_seqs=128, **LLAMA_ON_H100)  # 2 × 128 = 256
    given = plan(models, "Llama-3-70B", max_cudagraph_capture_size=64, **LLAMA_ON_H100)
    per_layer = 12 * MIB * 80
    assert graph_term(full)["bytes"] == 512 * MIB + per_layer
    assert graph_term(capped)["bytes"] == 512 * MIB + per_layer * 35 // 51
    assert graph_term(given)["bytes"] == 512 * MIB + per_layer * 11 // 51
    assert "batch sizes up to 256" in graph_term(capped)["how"]
    assert full["max_kv_tokens"] < given["max_kv_tokens"]  # only the graphs changed
    assert full["max_kv_tokens"] < capped["max_kv_tokens"]  # graphs and sampler rows


def test_a_v1_era_release_runs_v0_where_it_falls_back(models: Path) -> None:
    """arg_utils.py _is_v1_supported_oracle: 0.8.0 to 0.10.1.1 fall back to V0 below compute
    capability 8.0; 0.8.0 to 0.9.1 also on ROCm; 0.10.2 has no fallback left."""
    args = {"engine": "vllm", "tp": 8, "context_length": 2048}
    t4 = plan(models, "Llama-3-70B", gpus="8xT4", engine_version="0.8.2", **args)
    assert t4["engine_version"]["rules"] == "v0" and t4["engine_account"]["rules"] == "v0"
    assert "Falling back to V0" in t4["engine_version"]["note"]
    assert "predates" not in t4["engine_version"]["note"]
    mi300 = plan(models, "Llama-3-70B", gpus="8xMI300X", engine_version="0.9.1", **args)
    assert mi300["engine_version"]["rules"] == "v0" and "ROCm" in mi300["engine_version"]["note"]
    for gpus, version in (("8xMI300X", "0.9.2"), ("8xA100-80GB", "0.8.2"), ("8xT4", "0.10.2")):
        data = plan(models, "Llama-3-70B", gpus=gpus, engine_version=version, **args)
        assert data["engine_version"]["rules"] == "v1-0.19", (gpus, version)


def test_v0_on_rocm_from_080_profiles_a_full_length_prefill(models: Path) -> None:
    """Past 32K tokens V0 turns chunked prefill on only where current_platform.is_cuda()
    (0.8.0 on); up to 0.7.3 the test was device_type == "cuda", which ROCm reports too."""
    args = {"engine": "vllm", "tp": 8, "context_length": 65536, "gpus": "8xMI300X"}
    new = plan(models, "Llama-3-70B", engine_version="0.9.1", **args)
    old = plan(models, "Llama-3-70B", engine_version="0.7.3", **args)
    cuda = plan(models, "Llama-3-70B", engine_version="0.7.3", **{**args, "gpus": "8xH100"})
    assert "65536 tokens" in activation_term(new)["how"]
    assert "2048 tokens" in activation_term(old)["how"]
    assert "2048 tokens" in activation_term(cuda)["how"]


def test_sglang_holds_before_its_weights_what_the_links_hold(models: Path) -> None:
    """What a tp group holds before SGLang loads its weights is taken at the fraction: 1.23 GB
    of NCCL/all-reduce buffers on an NVSwitch Hopper node (SGLang 0.5.12 at tp 8 on H200),
    0.12 GiB elsewhere; the CUDA context (0.5 GiB) on every GPU."""

    def preload(gpus: str) -> dict[str, Any]:
        data = plan(models, "Llama-3-70B", gpus=gpus, tp=8, context_length=8192)
        (term,) = [t for t in data["engine_account"]["terms"] if t["name"].startswith("memory")]
        fraction = data["pool"]["mem_fraction"]
        return {"bytes": term["bytes"], "fraction": fraction, "how": term["how"]}

    h200, l40s = preload("8xH200"), preload("8xL40S")
    assert h200["bytes"] == int((int(0.5 * GIB) + int(1.23 * GIB)) * h200["fraction"])
    assert l40s["bytes"] == int((int(0.5 * GIB) + int(0.12 * GIB)) * l40s["fraction"])
    assert "1.23 GB" in h200["how"] and "off NVSwitch Hopper nodes" in l40s["how"]


def test_v0_profiles_its_sampler_at_top_k_over_the_whole_vocabulary(models: Path) -> None:
    """V0's _dummy_run samples every sequence with top_k = vocab - 1 and top_p = 0.99, so
    _apply_top_k_top_p holds 32 B per logit (bf16 logits, their float copy, sorted values and
    int64 indices, masks, softmax, cumsum, the re-sorted logits): 256 rows × 128,256 × 32 B
    here, above the 2,048-token forward. Where a 0.8 release falls back to V0 its worker
    measures from a snapshot taken after the CUDA context, so the context is not charged."""
    args = {"engine": "vllm", "tp": 8, "context_length": 2048}
    v0 = activation_term(plan(models, "Llama-3-70B", gpus="8xH100", engine_version="0.6.6", **args))
    assert "sampler" in v0["how"] and "256 rows × 128256 vocab × 32 B" in v0["how"]
    assert v0["bytes"] >= 256 * 128256 * 32
    t4 = plan(models, "Llama-3-70B", gpus="8xT4", engine_version="0.8.2", **args)
    assert "CUDA context" not in non_torch_term(t4)["how"]
    a100 = plan(models, "Llama-3-70B", gpus="8xA100-80GB", engine_version="0.8.2", **args)
    assert "CUDA context" in non_torch_term(a100)["how"]  # V1 0.8.2 charged it


def test_an_engine_version_that_is_not_a_release_is_refused(models: Path) -> None:
    sandbox = SandboxedHost("local", LocalHost(), HostConfig(roots=[str(models)]), Limits())
    args = {"model_dir": str(models / "Llama-3-70B"), "engine": "vllm", "gpus": "8xH100"}
    for wrong in ("0.8.x", "latest", "0.19.0; rm -rf /"):
        result = execute(ToolContext(hosts={"local": sandbox}), "capacity_plan",
                         {**args, "engine_version": wrong})  # fmt: skip
        assert not result.ok and result.error is not None
        assert "is not a release number" in result.error, wrong
    for right in ("0.9.2.dev364+gb432b7a28", "0.6.4.post1", "v0.10.2"):
        assert plan(models, "Llama-3-70B", gpus="8xH100", tp=8, engine_version=right)
