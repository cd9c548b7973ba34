"""Fixes for failures of a server that was running: out of memory under load, an illegal
memory access, an NCCL collective that timed out, a scheduler that stopped making progress,
requests retracted for KV cache, and the cause a CUDA-graph capture failure hides."""

from __future__ import annotations

from sleuth.tools.serving.diagnose_facts import Facts, flag

_RUNNING = ("--max-num-seqs", "--max-running-requests")


def _now(f: Facts, key: str) -> str:
    value = f.numbers.get(key)
    return f" (now {value})" if value else ""


def oom_serving_fix(f: Facts) -> str:
    """Under load, the memory the engine reserved at start (weights, KV pool, graphs) left too
    little for a batch's activations: the opposite of a start-up OOM's fix for SGLang."""
    n = f.numbers
    asked = f" asking for {n['tried']}" if "tried" in n else ""
    free = f" with {n['gpu_free']} free" if "gpu_free" in n else ""
    running = flag(f.engine, "batch")
    if f.engine == "sglang":
        return (
            f"the GPU ran out of memory while serving{asked}{free}: the KV pool left too "
            f"little for activations; LOWER --mem-fraction-static"
            f"{_now(f, 'mem_fraction_static')} (at start-up an OOM wants it raised, under "
            f"load the opposite), and lower --chunked-prefill-size or --max-running-requests"
        )
    return (
        f"the GPU ran out of memory while serving{asked}{free}: a batch's activations did "
        f"not fit next to the KV cache; lower --gpu-memory-utilization"
        f"{_now(f, 'gpu_memory_utilization')} to leave headroom, or cap the batch "
        f"({running}, {_RUNNING[0]}; multimodal: --limit-mm-per-prompt)"
    )


def illegal_memory_access_fix(f: Facts) -> str:
    n = f.numbers
    backends = (
        f"another --attention-backend, {flag(f.engine, 'no_graphs')}, "
        f"--disable-custom-all-reduce for all-reduce kernels"
    )
    if "kernel" in n:
        return (
            f"kernel {n['kernel']} ({n.get('kernel_file', '?')}) failed its check "
            f"`{n.get('assertion', '?')}` ({f.phase}): an index past a tensor's end, most often "
            f"a token id or position beyond the model's vocabulary or context; check the "
            f"request that triggered it (and the tokenizer/model pair), or avoid that kernel "
            f"({backends}) until an engine release fixes it"
        )
    where = (
        f"the last op before it was {n['frame']}, but CUDA reports asynchronously"
        if "frame" in n
        else "the log does not name the kernel"
    )
    return (
        f"a GPU kernel accessed memory it should not ({f.phase}); {where}: rerun with "
        f"CUDA_LAUNCH_BLOCKING=1 to pin the kernel, then avoid it ({backends}) or upgrade to "
        f"an engine release that fixes it"
    )


def nccl_timeout_fix(f: Facts) -> str:
    n = f.numbers
    if "operation" in n:
        ranks = n.get("ranks", "?")
        minutes = int(n.get("ran_ms", n.get("timeout_ms", "0"))) / 60000
        what = (
            f"{n['operation']} (SeqNum {n.get('seq', '?')}) on rank(s) {ranks} waited "
            f"{minutes:.0f} min (timeout {n.get('timeout_ms', '?')} ms) for a peer that never "
            f"joined"
        )
    else:
        what = "an NCCL collective waited past its timeout for a peer that never joined"
    early = "" if f.phase == "serving" else " (before serving: the first collectives)"
    return (
        f"{what}{early}: one rank hung or died first; look for its own error above, check the "
        f"links (`nvidia-smi topo -m`, NCCL_DEBUG=INFO, NCCL_SOCKET_IFNAME for multi-node), "
        f"try --disable-custom-all-reduce, and on PCIe-only GPUs NCCL_P2P_DISABLE=1"
    )


def no_progress_fix(f: Facts) -> str:
    n = f.numbers
    since = n.get("seconds_since_batch")
    last = f"the last batch line was {since} s before" if since else "no batch line came after"
    return (
        f"the scheduler stopped making progress ({last}: {n.get('last_batch', '(none logged)')}"
        f"): a rank is stuck in a kernel or a collective; dump its stack (py-spy dump --pid), "
        f"check that every GPU is alive (nvidia-smi), and, if it recurs under one request "
        f"shape, disable the feature it uses (overlap scheduling, CUDA graphs, speculative "
        f"decoding); SGLang's --watchdog-timeout only sets how long it waits"
    )


def kv_exhaustion_fix(f: Facts) -> str:
    n = f.numbers
    if "retracted_reqs" in n:
        what = f"{n['retracted_reqs']} requests retracted in {n.get('events', '?')} retractions"
    elif "preemptions" in n:
        what = f"{n['preemptions']} preemptions so far (vLLM warns on every 50th)"
    else:
        what = f"{n.get('events', '?')} retractions"
    rate = f" ({n['per_minute']} a minute over {n['over_seconds']} s)" if "per_minute" in n else ""
    usage = f" at token usage {n['token_usage']}" if "token_usage" in n else ""
    running = f" with {n['running_reqs']} requests running" if "running_reqs" in n else ""
    cap, mem = flag(f.engine, "memory"), _RUNNING[1] if f.engine == "sglang" else _RUNNING[0]
    return (
        f"the KV cache ran out while serving: {what}{rate}{usage}{running}; "
        f"each one is recomputed, so throughput collapses: bound the running batch with {mem}, "
        f"raise {cap} if the GPU has room, or add GPUs; long generations need the "
        f"KV pool they will grow into"
    )


def capture_inner_fix(f: Facts) -> str | None:
    """The fix for the cause a capture failure wraps, or None where the log names none."""
    inner = f.numbers.get("inner_cause")
    graphs = flag(f.engine, "no_graphs")
    if inner == "custom all-reduce":
        return (
            "CUDA-graph capture failed inside the custom all-reduce kernel: start with "
            f"--disable-custom-all-reduce (NCCL does the all-reduce), or {graphs}"
        )
    if inner == "NCCL":
        return (
            "CUDA-graph capture failed inside an NCCL call: NCCL could not run under graph "
            "capture here (check NCCL_DEBUG=INFO and the NCCL version the engine pins); start "
            f"with --disable-custom-all-reduce, or {graphs} to serve without graphs"
        )
    return None
