# ruff: noqa: E501, W291  (log excerpts are quoted as posted, trailing spaces included)
"""Failures of running servers (issue 42): each kind on a real log, and on a near-miss log
that must not be taken for it.

Logs are the corpus files under tests/fixtures/engine_logs (their threads in index.json) or
short excerpts quoted below with their URL.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sleuth.cli import app
from sleuth.tools.serving.diagnose import Diagnosis, diagnose
from sleuth.tools.serving.diagnose_lines import split_lines

CORPUS = Path(__file__).parent / "fixtures" / "engine_logs"
runner = CliRunner()

# https://github.com/GAIR-NLP/LIMO/issues/29 (2025-03-06): vLLM V0 evaluating a 32B model;
# the warning is logged on every 50th preemption, this one says 101.
KV_STORM = """\
 Sequence group 221 is preempted by PreemptionMode.RECOMPUTE mode because there is not enough KV cache space. This can affect the end-to-end performance. Increase gpu_memory_utilization or tensor_parallel_size to provide more KV cache memory. total_num_cumulative_preemption=101
"""
# https://github.com/vllm-project/vllm/pull/6102 (comment, 2024-08-20): one preemption, then
# a crash of the commenter's own modified engine: the preemption is not the failure.
KV_BLIP = """\
WARNING 08-20 10:18:39 scheduler.py:1141] Sequence group 147 is preempted by PreemptionMode.RECOMPUTE mode because there is not enough KV cache space. This can affect the end-to-end performance. Increase gpu_memory_utilization or tensor_parallel_size to provide more KV cache memory. total_num_cumulative_preemption=1
[rank0]: Traceback (most recent call last):
[rank0]:   File "/data/vllm/vattn/offline.py", line 89, in <module>
[rank0]:     test()
"""
# https://github.com/vllm-project/vllm/issues/19853 (2025-06-19): an NVFP4 compressed-tensors
# checkpoint on a vLLM without a kernel for that scheme.
NO_SCHEME = """\
ERROR 06-19 09:53:50 [core.py:515]     scheme = self._get_scheme_from_parts(  # type: ignore
ERROR 06-19 09:53:50 [core.py:515]              ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
ERROR 06-19 09:53:50 [core.py:515]   File "/home/ubuntu/git/polywhirl/.venv_temp/lib/python3.11/site-packages/vllm/model_executor/layers/quantization/compressed_tensors/compressed_tensors.py", line 414, in _get_scheme_from_parts
ERROR 06-19 09:53:50 [core.py:515]     raise NotImplementedError(
ERROR 06-19 09:53:50 [core.py:515] NotImplementedError: No compressed-tensors compatible scheme was found.
"""
# https://github.com/Tencent/AngelSlim/issues/39 (2025-08-13): an EAGLE3 draft for Qwen3-14B
# loaded by SGLang under the target's Qwen3 class.
DRAFT_KEY = """\
File "/opt/miniconda/envs/sglang/lib/python3.12/site-packages/sglang/srt/model_loader/loader.py", line 437, in load_model
    self.load_weights_and_postprocess(
File "/opt/miniconda/envs/sglang/lib/python3.12/site-packages/sglang/srt/model_loader/loader.py", line 445, in load_weights_and_postprocess
    model.load_weights(weights)
File "/opt/miniconda/envs/sglang/lib/python3.12/site-packages/sglang/srt/models/qwen3.py", line 493, in load_weights
    param = params_dict[name]
            ~~~~~~~~~~~^^^^^^
KeyError: 'midlayer.self_attn.qkv_proj.weight'
"""
# https://github.com/sgl-project/sglang/issues/10053 (2025-09-03): a healthy server's lines.
HEALTHY = """\
[2025-09-03 18:33:18 TP0] Prefill batch. #new-seq: 1, #new-token: 103, #cached-token: 1, token usage: 0.00, #running-req: 0, #queue-req: 0, 
[2025-09-03 18:33:19 TP0] Decode batch. #running-req: 1, #token: 137, token usage: 0.00, cuda graph: True, gen throughput (token/s): 1.06, #queue-req: 0, 
[2025-09-03 18:33:19 TP0] Decode batch. #running-req: 1, #token: 177, token usage: 0.00, cuda graph: True, gen throughput (token/s): 84.20, #queue-req: 0, 
[2025-09-03 18:33:31] INFO:     192.168.30.81:35262 - "POST /v1/chat/completions HTTP/1.1" 200 OK
"""


def of(name: str) -> Diagnosis:
    return diagnose(split_lines((CORPUS / name).read_bytes().decode()))


def of_text(text: str) -> Diagnosis:
    return diagnose(split_lines(text))


def test_an_oom_while_serving_says_serving_and_lowers_sglangs_memory_fraction() -> None:
    d = of("080-sglang-oom_serving.log")
    assert (d.kind, d.confidence, d.phase) == ("oom_serving", "high", "serving")
    assert "LOWER --mem-fraction-static" in d.fix and "764.00 MiB" in d.fix


def test_an_oom_at_start_is_not_one_while_serving_and_its_fix_goes_the_other_way() -> None:
    weights = of("022-vllm-oom_weights.log")
    assert (weights.kind, weights.phase) == ("oom_weights", "startup")
    kv = of("020-sglang-kv_cache_too_small.log")
    assert kv.kind == "kv_cache_too_small" and "--mem-fraction-static: raise it" in kv.fix


def test_a_vllm_oom_after_a_request_is_serving_with_the_numbers_it_logged() -> None:
    d = of("087-vllm-oom_serving.log")
    assert (d.kind, d.phase) == ("oom_serving", "serving")
    assert "1.27 GiB" in d.fix and "--gpu-memory-utilization" in d.fix


def test_a_device_side_assert_naming_its_kernel_is_sure_and_quotes_the_check() -> None:
    d = of("112-sglang-illegal_memory_access.log")
    assert (d.kind, d.confidence, d.phase) == ("illegal_memory_access", "high", "serving")
    assert d.numbers["kernel"] == "indexSelectSmallIndex"
    assert "srcIndex < srcSelectDimSize" in d.fix


def test_an_illegal_access_without_a_named_kernel_is_low_and_says_how_to_pin_it() -> None:
    d = of("086-vllm-illegal_memory_access.log")
    assert (d.kind, d.confidence) == ("illegal_memory_access", "low")
    assert d.numbers["frame"] == "backends/flash_attn.py:forward"
    assert "CUDA_LAUNCH_BLOCKING=1" in d.sure_if and "flash_attn.py:forward" in d.fix


def test_a_log_that_only_mentions_device_side_assertions_is_not_an_illegal_access() -> None:
    # Every CUDA error ends with "Compile with TORCH_USE_CUDA_DSA to enable device-side
    # assertions"; here the error is a missing kernel image.
    assert of("016-vllm-driver_mismatch.log").kind == "driver_mismatch"


def test_an_nccl_watchdog_timeout_names_rank_operation_and_time_waited() -> None:
    d = of("079-vllm-nccl_timeout.log")
    assert (d.kind, d.confidence) == ("nccl_timeout", "high")
    assert d.numbers["ranks"] == "3" and d.numbers["operation"] == "ALLREDUCE"
    assert "ALLREDUCE (SeqNum 31) on rank(s) 3 waited 10 min" in d.fix


def test_a_hard_wrapped_watchdog_line_still_gives_its_numbers() -> None:
    d = of("078-sglang-nccl_timeout.log")
    assert d.kind == "nccl_timeout" and d.numbers["ran_ms"] == "600050"
    assert d.headline.startswith("[Rank 6] Watchdog caught collective operation timeout")


def test_an_nccl_error_that_is_not_a_timeout_stays_nccl() -> None:
    assert of("040-sglang-nccl.log").kind == "nccl"


def test_a_stalled_scheduler_gives_its_last_batch_line_and_how_long_ago() -> None:
    d = of("081-sglang-no_progress.log")
    assert (d.kind, d.confidence, d.phase) == ("no_progress", "high", "serving")
    assert d.numbers["seconds_since_batch"] == "317"
    assert d.numbers["last_batch"].startswith("Prefill batch.")
    assert "317 s before" in d.fix


def test_a_watchdog_timeout_setting_in_the_server_args_is_not_a_stall() -> None:
    d = of("069-sglang-unknown.log")
    assert "watchdog_timeout=300" in (CORPUS / "069-sglang-unknown.log").read_text()
    assert d.kind != "no_progress"


def test_a_preemption_storm_is_kv_exhaustion_with_its_count_and_the_flag_that_bounds_it() -> None:
    d = of_text(KV_STORM)
    assert (d.kind, d.confidence, d.phase) == ("kv_exhaustion", "high", "serving")
    assert d.numbers["preemptions"] == "101"
    assert "101 preemptions" in d.fix and "--max-num-seqs" in d.fix


def test_one_preemption_before_another_crash_is_not_a_confident_kv_exhaustion() -> None:
    d = of_text(KV_BLIP)
    assert d.confidence == "low" and d.kind in ("kv_exhaustion", "unknown")
    assert d.sure_if


def test_a_capture_failure_names_the_nccl_call_it_hides() -> None:
    d = of("083-vllm-cuda_graph_capture.log")
    assert (d.kind, d.phase) == ("cuda_graph_capture", "warm-up")
    assert d.numbers["inner_cause"] == "NCCL" and "--disable-custom-all-reduce" in d.fix


def test_a_capture_failure_on_memory_lowers_the_memory_setting() -> None:
    d = of("025-sglang-cuda_graph_capture.log")
    assert d.kind == "cuda_graph_capture" and d.numbers["inner_cause"] == "out of memory"
    assert "--cuda-graph-max-bs" in d.fix


def test_a_failure_after_capture_began_is_not_a_capture_failure() -> None:
    assert of("043-sglang-port_in_use.log").kind == "port_in_use"


def test_a_model_with_its_own_code_asks_for_trust_remote_code() -> None:
    d = of("113-vllm-trust_remote_code.log")
    assert (d.kind, d.confidence) == ("trust_remote_code", "high")
    assert "--trust-remote-code" in d.fix and "Phi-3-small-128k-instruct" in d.fix


def test_a_log_that_passes_trust_remote_code_and_fails_otherwise_is_not_that() -> None:
    assert "trust_remote_code" in (CORPUS / "038-vllm-context_too_long.log").read_text()
    assert of("038-vllm-context_too_long.log").kind == "context_too_long"


def test_a_quantization_scheme_the_installed_version_lacks_says_upgrade() -> None:
    d = of_text(NO_SCHEME)
    assert (d.kind, d.confidence) == ("unsupported_quantization", "high")
    assert "compressed-tensors scheme" in d.fix and "upgrade" in d.fix


def test_a_not_implemented_error_from_another_check_is_not_a_quantization_scheme() -> None:
    # A NotImplementedError raised while vLLM checks its options (the Torchair graph mode of
    # vllm-ascend) is an option the engine refuses, not a checkpoint's scheme.
    assert of("026-vllm-bad_argument.log").kind == "bad_argument"


def test_a_draft_weight_its_class_lacks_is_a_speculative_config_error() -> None:
    d = of_text(DRAFT_KEY)
    assert (d.kind, d.confidence) == ("speculative_config", "high")
    assert "midlayer.self_attn.qkv_proj.weight" in d.fix and "--speculative-algorithm" in d.fix


def test_a_missing_weight_without_any_draft_in_sight_is_not_a_draft_error() -> None:
    plain = DRAFT_KEY.replace("midlayer.self_attn", "model.layers.0.self_attn")
    assert of_text(plain).kind != "speculative_config"


def test_deepgemm_without_a_build_for_the_gpu_is_kernel_arch() -> None:
    d = of("109-vllm-kernel_arch.log")
    assert (d.kind, d.confidence) == ("kernel_arch", "high")
    assert "VLLM_USE_DEEP_GEMM=0" in d.fix


def test_trtllm_attention_on_a_gpu_it_was_not_built_for_is_kernel_arch() -> None:
    # https://github.com/sgl-project/sglang/issues/9140 (2025-08-13), an RTX 5090 (sm_120a):
    line = "ValueError: TRTLLM MHA backend is only supported on Blackwell GPUs (SM100). Please use a different backend.\n"
    d = of_text(line)
    assert (d.kind, d.confidence) == ("kernel_arch", "high")
    assert "built for SM100" in d.fix and "--attention-backend" in d.fix


def test_a_backend_refused_for_another_reason_is_not_kernel_arch() -> None:
    # sglang attention_registry.py: trtllm_mha refuses MLA models whatever the GPU.
    line = "ValueError: trtllm_mha backend can only be used with non-MLA models.\n"
    assert of_text(line).kind != "kernel_arch"


def test_no_kernel_image_without_a_kernel_library_stays_a_low_driver_reading() -> None:
    d = of("030-vllm-driver_mismatch.log")
    assert (d.kind, d.confidence) == ("driver_mismatch", "low") and d.sure_if


def test_a_log_with_no_failure_says_so_and_how_far_the_server_got() -> None:
    d = of_text(HEALTHY)
    assert (d.kind, d.confidence, d.phase) == ("no_failure", "low", "serving")
    assert d.numbers["last_batch"].startswith("Decode batch.")
    assert "no failure" in d.fix and "dmesg" in d.sure_if


def test_a_log_that_ends_in_a_stall_is_not_taken_for_a_healthy_one() -> None:
    assert of("081-sglang-no_progress.log").kind != "no_failure"


def test_the_cli_prints_the_phase_and_json_carries_it(tmp_path: Path) -> None:
    log = tmp_path / "sglang.log"
    log.write_bytes((CORPUS / "080-sglang-oom_serving.log").read_bytes())
    text = runner.invoke(app, ["diagnose", str(log)])
    assert text.exit_code == 0 and "phase: serving" in text.output
    raw = runner.invoke(app, ["diagnose", str(log), "--json"])
    found = json.loads(raw.output)["diagnosis"]
    assert (found["kind"], found["phase"]) == ("oom_serving", "serving")


@pytest.mark.parametrize(
    ("name", "phase"),
    [
        ("022-vllm-oom_weights.log", "startup"),
        # SGLang's scheduler watchdog only fires while a batch runs: serving, with no other sign.
        ("096-sglang-no_progress.log", "serving"),
        ("082-sglang-cuda_graph_capture.log", "warm-up"),
        ("084-vllm-illegal_memory_access.log", "serving"),
    ],
)
def test_the_phase_is_read_from_milestones_and_else_from_the_traceback(
    name: str, phase: str
) -> None:
    assert of(name).phase == phase
