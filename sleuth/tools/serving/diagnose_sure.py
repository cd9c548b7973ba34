"""What would make a low-confidence reading sure, by kind: the one check or rerun that turns
the likely cause into a stated one."""

from __future__ import annotations

SURE_IF: dict[str, str] = {
    "illegal_memory_access": (
        "CUDA reports the fault asynchronously, so the traceback may name the wrong op: rerun "
        "with CUDA_LAUNCH_BLOCKING=1 (and --enforce-eager / --disable-cuda-graph) and the "
        "failing kernel is the last frame"
    ),
    "kv_exhaustion": (
        "one retraction or preemption is normal under load; a storm (several a minute, in "
        "the scheduler's warnings) or a crash in retract_decode makes it the cause"
    ),
    "no_progress": (
        "the last batch line before the stall and a stack dump of the scheduler (py-spy dump "
        "--pid, or SGLang's watchdog dump) show where it stopped"
    ),
    "no_failure": (
        "if the server did stop, its exit status (systemctl status, docker inspect "
        "State.ExitCode) and the kernel log (dmesg: the OOM killer) say why"
    ),
    "driver_mismatch": (
        "`nvidia-smi --query-gpu=compute_cap --format=csv` against "
        "`python -c 'import torch; print(torch.cuda.get_arch_list())'` tells whether the build "
        "lacks this GPU's architecture"
    ),
    "weights_missing": "the same download with HF_TOKEN set (huggingface-cli download) shows "
    "whether the repo is gated or absent",
    "oom_weights": "the lines before the error (loading weights, profiling, capture) or its "
    "traceback frames say in which phase memory ran out",
    "bad_argument": "the engine's --help for the option named shows whether this version takes it",
    "speculative_config": "the draft's config.json against the target's (hidden_size, "
    "vocab_size, max_position_embeddings) shows whether they match",
    "gpu_capability": "`nvidia-smi --query-gpu=name,compute_cap --format=csv` shows the GPU's "
    "capability against the one the kernel needs",
    "unknown": (
        "the full log from the launch command to the exit (the first exception, not the "
        "last), rerun with CUDA_LAUNCH_BLOCKING=1 for CUDA errors or NCCL_DEBUG=INFO for "
        "multi-GPU ones"
    ),
}
