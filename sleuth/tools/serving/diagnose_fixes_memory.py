"""Fixes for the memory failures: the KV cache, GPU out-of-memory by phase, CUDA graph
capture, a GPU held by another process, and host RAM."""

from __future__ import annotations

from sleuth.tools.serving import diagnose_fixes_runtime as runtime
from sleuth.tools.serving.diagnose_facts import Facts, flag, gib_of, int_of


def _now(n: dict[str, str], *keys: str) -> str:
    """ " (now 0.9)": the memory setting the log stated, under the first of `keys` it has."""
    setting = next((n[key] for key in keys if n.get(key)), None)
    return f" (now {setting})" if setting else ""


def kv_cache_fix(f: Facts) -> str:
    n, ctx, mem = f.numbers, flag(f.engine, "context"), flag(f.engine, "memory")
    length = n.get("max_model_len")
    if length and "kv_needed" in n and "kv_available" in n:
        fits = n.get("kv_fits") or str(
            int(int_of(length) * gib_of(n["kv_available"]) / gib_of(n["kv_needed"]))
        )
        return (
            f"the model needs {n['kv_needed']} for KV at max_model_len {length}, "
            f"{n['kv_available']} available: lower {ctx} to at most {int_of(fits)} or raise {mem}"
        )
    if length and "kv_cache_tokens" in n:
        return (
            f"the KV cache holds {n['kv_cache_tokens']} tokens, fewer than one request at "
            f"max_model_len {length}: lower {ctx} to at most {int_of(n['kv_cache_tokens'])} or "
            f"raise {mem}"
        )
    if "kv_fits" in n:
        holds = int_of(n["kv_fits"])
        return f"lower {ctx} to at most {holds} (what the KV cache holds) or raise {mem}"
    if length and "kv_needed" in n:
        return (
            f"one request at max_model_len {length} needs {n['kv_needed']} of KV cache, more "
            f"than was left: lower {ctx} or raise {mem}"
        )
    now = _now(n, "gpu_memory_utilization", "mem_fraction_static")
    return (
        f"after the weights (and the profile run) no memory was left for the KV cache within "
        f"{mem}{now}: raise it, lower {ctx} or {flag(f.engine, 'batch')}, or use more GPUs "
        f"({flag(f.engine, 'tp')}) or a smaller or quantized checkpoint"
    )


def gpu_oom_fix(f: Facts) -> str:
    if f.kind == "oom_serving":
        return runtime.oom_serving_fix(f)
    n = f.numbers
    asked = f" it asked for {n['tried']}" if "tried" in n else ""
    free = f" with {n['gpu_free']} free" if "gpu_free" in n else ""
    total = f" of {n['gpu_total']}" if "gpu_total" in n else ""
    head = f"the GPU ran out of memory:{asked}{free}{total}".rstrip(":")
    mem = flag(f.engine, "memory")
    if f.kind == "oom_activation":
        loaded = f" ({n['weights_loaded']})" if "weights_loaded" in n else ""
        return (
            f"{head}; the weights loaded{loaded} but the profile run (one full batch) did not "
            f"fit: lower "
            f"{flag(f.engine, 'batch')} or {flag(f.engine, 'context')} (multimodal models: "
            f"--limit-mm-per-prompt), or use more GPUs ({flag(f.engine, 'tp')})"
        )
    if f.kind == "cuda_graph_capture":
        now = _now(n, "mem_fraction_static", "gpu_memory_utilization")
        return (
            f"{head}, while capturing CUDA graphs: lower {mem}{now} to leave room for the "
            f"graphs, lower --cuda-graph-max-bs (SGLang) / --max-cudagraph-capture-size (vLLM), "
            f"or run without graphs ({flag(f.engine, 'no_graphs')})"
        )
    before = n.get("free_before_load")
    had = f" ({before} was free before loading)" if before else ""
    return (
        f"{head}; the weights do not fit{had}: use more GPUs ({flag(f.engine, 'tp')}), a "
        f"smaller or quantized checkpoint, and check with nvidia-smi that no other process "
        f"holds the GPU"
    )


def capture_fix(f: Facts) -> str:
    if "out of memory" in f.headline or f.numbers.get("inner_cause") == "out of memory":
        return gpu_oom_fix(Facts(f.headline, f.numbers, f.engine, "cuda_graph_capture", f.phase))
    inner = runtime.capture_inner_fix(f)
    if inner:
        return inner
    n = f.numbers
    if "head_dim" in n:
        return (
            f"the attention kernel has no variant for this model's head_dim {n['head_dim']}: "
            f"use another --attention-backend (e.g. triton), or a kernel release that has it"
        )
    if "shared_memory" in n:
        return (
            f"a Triton kernel (torch.compile) needs {n['shared_memory']} bytes of shared memory "
            f"and this GPU has {n.get('hardware_limit', 'less')}: drop --enable-torch-compile "
            f"(or lower --torch-compile-max-bs), or capture without it"
        )
    return (
        f"CUDA graph capture failed on the error in the headline: run once with "
        f"{flag(f.engine, 'no_graphs')} to see whether the model runs without graphs, and "
        f"drop --enable-torch-compile if set; lower --cuda-graph-max-bs (SGLang) to capture "
        f"fewer batch sizes; a kernel that fails here (FlashInfer, Triton) may not support "
        f"this model's shapes or this GPU: try another --attention-backend"
    )


def host_memory_fix(f: Facts) -> str:
    n = f.numbers
    if "Ray" in f.headline or "node running low" in f.headline:
        used = (
            f" ({n['host_used']} of {n.get('host_total', '?')} in use)" if "host_used" in n else ""
        )
        swap = f", now {n['swap_space']}" if "swap_space" in n else ""
        return (
            f"the host ran out of RAM{used} and Ray killed a worker: lower --swap-space{swap} "
            f"and --cpu-offload-gb, use fewer worker processes, or give the host more memory"
        )
    return (
        "the host could not allocate memory: check `free -g`, the container's memory limit and "
        "pinned-memory limits (WSL caps pinned memory), and lower --swap-space, "
        "--cpu-offload-gb or the number of processes"
    )


def gpu_busy_fix(f: Facts) -> str:
    n = f.numbers
    free, total = n.get("free_on_start", "?"), n.get("total_on_start", "?")
    return (
        f"only {free} of {total} GiB was free when the engine started, less than "
        f"--gpu-memory-utilization asks for: another process holds the GPU (nvidia-smi shows "
        f"which); stop it, or lower --gpu-memory-utilization"
    )
