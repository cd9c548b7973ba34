# ruff: noqa: E501  (log excerpts are quoted as posted, one log line per line)
"""Launch-failure diagnosis on real GPU failure logs from public SGLang and vLLM threads.

Each case is a short excerpt of a log as posted in the thread named by its URL (trimmed to the
lines around the failure), the kind it must get, and the text its headline must carry. The CPU
engine produces the other kinds for real (tests/engine/test_launch_failures.py).
"""

from __future__ import annotations

import pytest

from sleuth.tools.serving.diagnose import diagnose
from sleuth.tools.serving.diagnose_lines import split_lines

CORPUS: list[tuple[str, str, str, str]] = [
    (
        # vLLM: the weights do not fit (OOM while creating the layers, before loading ends).
        "https://github.com/vllm-project/vllm/issues/28143",
        "oom_weights",
        "Failed to create unquantized linear weights: CUDA out of memory",
        """\
(EngineCore_DP0 pid=12473) INFO 11-05 12:19:30 [gpu_model_runner.py:2602] Starting to load model /models/llama
(EngineCore_DP0 pid=12473) ERROR 11-05 12:19:32 [linear.py:210] Failed to create unquantized linear weights: CUDA out of memory. Tried to allocate 896.00 MiB. GPU 0 has a total capacity of 93.09 GiB of which 739.81 MiB is free. Including non-PyTorch memory, this process has 92.34 GiB memory in use.
(EngineCore_DP0 pid=12473) ERROR 11-05 12:19:32 [core.py:708] EngineCore failed to start.
(EngineCore_DP0 pid=12473) ERROR 11-05 12:19:32 [core.py:708] Traceback (most recent call last):
(EngineCore_DP0 pid=12473) ERROR 11-05 12:19:32 [core.py:708]   File "/home/localadmin/Documents/vllm/.venv/lib/python3.10/site-packages/vllm/model_executor/layers/linear.py", line 202, in create_weights
""",
    ),
    (
        # vLLM: the weights loaded (16.6 GiB), then the profile run asked for 33.75 GiB.
        "https://github.com/vllm-project/vllm/issues/23230",
        "oom_activation",
        "CUDA out of memory. Tried to allocate 33.75 GiB",
        """\
INFO 08-20 03:09:59 [default_loader.py:262] Loading weights took 2.66 seconds
INFO 08-20 03:10:00 [model_runner.py:1112] Model loading took 16.5557 GiB and 2.803817 seconds
ERROR 08-20 03:10:01 [engine.py:467] CUDA out of memory. Tried to allocate 33.75 GiB. GPU 0 has a total capacity of 44.40 GiB of which 26.88 GiB is free. Including non-PyTorch memory, this process has 17.52 GiB memory in use.
ERROR 08-20 03:10:01 [engine.py:467] Traceback (most recent call last):
ERROR 08-20 03:10:01 [engine.py:467]   File "/home/qingfu/py312/lib/python3.12/site-packages/vllm/engine/multiprocessing/engine.py", line 455, in run_mp_engine
""",
    ),
    (
        # SGLang: capture under torch.compile fails inside a kernel.
        "https://github.com/sgl-project/sglang/issues/7918",
        "cuda_graph_capture",
        "RuntimeError: CUDA error: operation not permitted when stream is capturing",
        """\
  File "/opt/conda/lib/python3.10/site-packages/torch/_ops.py", line 756, in __call__
    return self._op(*args, **kwargs)
RuntimeError: CUDA error: operation not permitted when stream is capturing
CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
For debugging consider passing CUDA_LAUNCH_BLOCKING=1


During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/opt/conda/lib/python3.10/site-packages/sglang/srt/model_executor/cuda_graph_runner.py", line 336, in __init__
    self.capture()
""",
    ),
    (
        # SGLang: an OOM while capturing is a capture failure, not a weights OOM.
        "https://github.com/sgl-project/sglang/issues/5285",
        "cuda_graph_capture",
        "Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 448.00 MiB.",
        """\
  File "/sgl-workspace/sglang/python/sglang/srt/model_executor/model_runner.py", line 934, in init_cuda_graphs
    self.cuda_graph_runner = CudaGraphRunner(self)
  File "/sgl-workspace/sglang/python/sglang/srt/model_executor/cuda_graph_runner.py", line 269, in __init__
    raise Exception(
Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 448.00 MiB. GPU 7 has a total capacity of 95.00
""",
    ),
    (
        # vLLM: FP8 on an SM 8.6 GPU: the method needs a newer GPU.
        "https://github.com/vllm-project/vllm/issues/4327",
        "gpu_capability",
        "ValueError: The quantization method fp8 is not supported for the current GPU. "
        "Minimum capability: 90. Current capability: 86.",
        """\
  File "/usr/local/lib/python3.10/dist-packages/vllm/config.py", line 300, in _verify_quantization
    raise ValueError(
ValueError: The quantization method fp8 is not supported for the current GPU. Minimum capability: 90. Current capability: 86.
""",
    ),
    (
        # A vLLM fork: the message arrives as a tuple of strings.
        "https://github.com/1CatAI/1Cat-vLLM/issues/255",
        "gpu_capability",
        "RuntimeError: ('Quantization scheme is not supported for ', 'the current GPU. Min "
        "capability: 75. ', 'Current capability: 70.')",
        """\
(EngineCore_DP0 pid=2211) ERROR 08-25 10:02:11 [core.py:708] EngineCore failed to start.
(EngineCore_DP0 pid=2211) ERROR 08-25 10:02:11 [core.py:708] RuntimeError: ('Quantization scheme is not supported for ', 'the current GPU. Min capability: 75. ', 'Current capability: 70.')
RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}
""",
    ),
    (
        # vLLM: tensor-parallel all-reduce never completes.
        "https://github.com/vllm-project/vllm/issues/6042",
        "nccl_timeout",
        "Watchdog caught collective operation timeout",
        """\
ERROR 07-01 13:54:43 multiproc_worker_utils.py:120] Worker VllmWorkerProcess pid 1159 died, exit code: -6
INFO 07-01 13:54:43 multiproc_worker_utils.py:123] Killing local vLLM worker processes
[rank0]:[E ProcessGroupNCCL.cpp:563] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=2, OpType=ALLREDUCE, NumelIn=134217728, NumelOut=134217728, Timeout(ms)=600000) ran for 600059 milliseconds before timing out.
""",
    ),
    (
        # vLLM: an architecture the registry does not know.
        "https://github.com/tenstorrent/tt-inference-server/issues/494",
        "unsupported_architecture",
        "ValueError: Model architectures ['TTLlamaForCausalLM'] are not supported for now.",
        """\
  File "/home/container_app_user/vllm/vllm/model_executor/models/registry.py", line 317, in _raise_for_unsupported
    raise ValueError(
ValueError: Model architectures ['TTLlamaForCausalLM'] are not supported for now. Supported architectures: ['AquilaModel', 'AquilaForCausalLM', 'LlamaForCausalLM']
""",
    ),
    (
        # vLLM (V0 wording): the KV cache holds fewer tokens than one full-length request.
        "https://github.com/vllm-project/vllm/issues/10517",
        "kv_cache_too_small",
        "The model's max seq len (29000) is larger than the maximum number of tokens that can "
        "be stored in KV cache (23648).",
        """\
Loading model weights took 14.9888 GB
Memory profiling results: total_gpu_memory=23.58GiB initial_memory_usage=15.34GiB peak_torch_memory=17.98GiB memory_usage_post_profile=15.35GiB non_torch_memory=0.35GiB kv_cache_size=2.89GiB gpu_memory_utilization=0.90
# GPU blocks: 1478, # CPU blocks: 2048
Maximum concurrency for 29000 tokens per request: 0.82x
ValueError: The model's max seq len (29000) is larger than the maximum number of tokens that can be stored in KV cache (23648). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.
""",
    ),
]


@pytest.mark.parametrize(("url", "kind", "headline", "log"), CORPUS, ids=[c[0] for c in CORPUS])
def test_public_failure_logs_are_classified_and_quoted(
    url: str, kind: str, headline: str, log: str
) -> None:
    got = diagnose(split_lines(log))
    assert got.kind == kind, got
    assert headline in got.headline, got.headline
    assert not got.headline.startswith("Traceback")
    # The headline's line is quoted, as logged, among the evidence.
    assert any(got.headline in line or headline in line for line in got.evidence), got.evidence
    assert all(line in log for line in got.evidence)


def test_fixes_carry_the_numbers_the_engine_logged() -> None:
    by_url = {url: diagnose(split_lines(log)) for url, _, _, log in CORPUS}
    assert "at most 23648" in by_url["https://github.com/vllm-project/vllm/issues/10517"].fix
    quant = by_url["https://github.com/vllm-project/vllm/issues/4327"].fix
    assert "9.0" in quant and "8.6" in quant
    oom = by_url["https://github.com/vllm-project/vllm/issues/23230"].fix
    assert "33.75 GiB" in oom and "26.88 GiB" in oom


def test_a_carriage_return_that_ends_a_line_is_not_a_progress_bar() -> None:
    text = 'Traceback (most recent call last):\r\n  File "x.py", line 1\r\nValueError: boom\r\n'
    assert split_lines(text)[:3] == [
        "Traceback (most recent call last):",
        '  File "x.py", line 1',
        "ValueError: boom",
    ]
    assert split_lines("Loading 10%\rLoading 50%\rLoading 100%\n")[0] == "Loading 100%"


def test_an_unknown_failure_is_unknown_with_the_last_real_exception_as_headline() -> None:
    log = (
        "Traceback (most recent call last):\n"
        '  File "a.py", line 3, in <module>\n'
        "KeyError: 'rope_theta'\n"
        "RuntimeError: Engine core initialization failed. See root cause above. "
        "Failed core proc(s): {}\n"
    )
    got = diagnose(split_lines(log))
    assert (got.kind, got.confidence) == ("unknown", "low")
    assert got.headline == "KeyError: 'rope_theta'"
