"""The fix for each diagnosis, written with the numbers the engine logged.

Each builder in `FIXES` turns the numbers the log states (diagnose_facts) into one
instruction, naming the engine's own flag when the engine is known; the memory failures'
builders are in diagnose_fixes_memory.
"""

from __future__ import annotations

from collections.abc import Callable

from sleuth.tools.serving import diagnose_fixes_memory as memory
from sleuth.tools.serving import diagnose_fixes_runtime as runtime
from sleuth.tools.serving.diagnose_facts import Facts, flag


def _context(f: Facts) -> str:
    n = f.numbers
    asked, derived = n.get("asked", "?"), n.get("derived", "?")
    return (
        f"{flag(f.engine, 'context')} {asked} is more than the model's own limit {derived} "
        f"(config.json): lower it to at most {derived}; a longer context needs RoPE scaling "
        f"the model supports (rope_scaling in config.json) and {flag(f.engine, 'long_env')}"
    )


def _gpu_capability(f: Facts) -> str:
    n = f.numbers
    gpu = n.get("gpu_name", "GPU")
    if "Bfloat16" in f.headline:
        return (
            f"bfloat16 needs compute capability {n.get('need_capability', '8.0')}; this {gpu} "
            f"has {n.get('gpu_capability', 'less')}: run with --dtype half (float16)"
        )
    if "need_sm" in n:
        need = int(n["need_sm"]) / 10
        return f"the engine needs compute capability {need:.1f} or newer: use a newer GPU"
    if "need_capability" in n and "gpu_capability" in n:
        need, have = float(n["need_capability"]) / 10, float(n["gpu_capability"]) / 10
        return (
            f"this quantization needs compute capability {need:.1f} and the GPU has {have:.1f}: "
            f"use a GPU of capability {need:.1f} or newer, or a checkpoint in a format this GPU "
            f"runs (e.g. AWQ or GPTQ instead of FP8)"
        )
    return (
        "the GPU is too old for this kernel (FlashAttention and FP8 need 8.0 and 8.9): choose "
        "another attention backend or dtype, or use a newer GPU"
    )


def _driver(f: Facts) -> str:
    n = f.numbers
    if "driver_cuda" in n:
        major, minor = divmod(int(n["driver_cuda"]) // 10, 100)
        return (
            f"the NVIDIA driver supports CUDA up to {major}.{minor} (found version "
            f"{n['driver_cuda']}) and the installed PyTorch needs a newer one: upgrade the "
            f"driver, or install the engine and PyTorch built for CUDA {major}.{minor}"
        )
    if "library" in n:
        return (
            f"{n['library']} is missing: the engine (or a kernel package such as sgl_kernel) was "
            f"built for CUDA, and this host or container has no CUDA driver/runtime libraries "
            f"(a ROCm or CPU host, or a container started without the NVIDIA runtime): install "
            f"the build for this platform, or run the container with --gpus"
        )
    if "gpu_sm" in n:
        major, minor = divmod(int(n["gpu_sm"]), 10)
        return (
            f"the installed PyTorch has no kernels for this GPU (compute capability "
            f"{major}.{minor}, sm_{n['gpu_sm']}): install a "
            f"PyTorch and engine build that includes sm_{n['gpu_sm']} (Blackwell needs CUDA "
            f"12.8 or newer wheels)"
        )
    return (
        "the engine's compiled code needs a newer NVIDIA driver than this host has (or was "
        "built for another CUDA): upgrade the driver, or install the engine build for the "
        "CUDA version `nvidia-smi` reports"
    )


def _kernel_image(f: Facts) -> str:
    return (
        "the installed build has no kernels for this GPU's architecture: a GPU newer than the "
        "build needs a build for its capability (sm_120 needs CUDA 12.8+ wheels); a GPU older "
        "than a kernel library supports needs another attention backend or a newer GPU. "
        "`nvidia-smi --query-gpu=compute_cap --format=csv` and torch.cuda.get_arch_list() "
        "tell which"
    )


def _nccl_shm(f: Facts) -> str:
    size = f.numbers.get("shm_bytes")
    need = f" a {int(size) / 2**20:.1f} MiB ({size} bytes)" if size else " a"
    return (
        f"NCCL could not create{need} shared-memory segment in /dev/shm: the container's "
        f"/dev/shm is too small (Docker's default is 64 MiB): run it with --shm-size=16g or "
        f"--ipc=host, or in Kubernetes mount an emptyDir (medium: Memory) at /dev/shm; "
        f"NCCL_SHM_DISABLE=1 works around it at a speed cost"
    )


def _nccl(f: Facts) -> str:
    return (
        "the GPUs could not talk to each other: check `nvidia-smi topo -m`, set "
        "NCCL_SOCKET_IFNAME/GLOO_SOCKET_IFNAME to the right interface, give the container "
        "enough /dev/shm, try --disable-custom-all-reduce, and rerun with NCCL_DEBUG=INFO to "
        "see which step fails"
    )


def _tp_divisibility(f: Facts) -> str:
    n, tp = f.numbers, flag(f.engine, "tp")
    if "heads" in n and "tp_size" in n:
        heads = int(n["heads"])
        fits = [str(d) for d in range(1, min(heads, 64) + 1) if heads % d == 0]
        return (
            f"{heads} attention heads cannot be split evenly over {n['tp_size']} GPUs: use a "
            f"{tp} that divides {heads} ({', '.join(fits)})"
        )
    if "slice" in n and "block" in n:
        return (
            f"each GPU's slice of a weight ({n['slice']}) is not a multiple of the "
            f"{n['block']}-wide quantization block: use a smaller {tp} (or expert parallelism "
            f"for MoE layers) so that every slice stays a multiple of {n['block']}"
        )
    return (
        f"the model cannot be split evenly over this many GPUs: choose a {tp} that divides "
        f"num_attention_heads and num_key_value_heads in config.json (and, for a quantized "
        f"checkpoint, keeps each slice a multiple of its quantization block)"
    )


def _speculative(f: Facts) -> str:
    key = f.numbers.get("weight_key")
    if key:
        return (
            f"the draft checkpoint has a weight ({key}) that the model class it was loaded as "
            "does not: the draft was loaded under the target's architecture, or was made for "
            "another engine or version; give a draft packaged for this engine (its config's "
            "architectures names the EAGLE/EAGLE3/MTP class) and the matching "
            "--speculative-algorithm, or an engine release that loads this draft format"
        )
    shapes = f.numbers.get("shapes")
    seen = f" (tensor shapes {shapes} do not match)" if shapes else ""
    return (
        f"the draft model{seen} (EAGLE, MTP or draft_model) does not fit the target: check "
        "that the draft was trained for this very target (hidden size, vocabulary, "
        "max_position_embeddings) and that the speculative options (method, "
        "num_speculative_tokens or num_steps/topk/num_draft_tokens) are ones this engine "
        "version accepts for it"
    )


def _quantization(f: Facts) -> str:
    n = f.numbers
    if "dtypes" in n:
        return (
            f"{n.get('method', 'this method')} runs only in {n['dtypes']}, not "
            f"{n.get('dtype', 'this dtype')}: pass --dtype float16 (or the listed dtype)"
        )
    if "quant_arg" in n:
        return (
            f"the checkpoint is {n.get('method', '?')}-quantized but --quantization "
            f"{n['quant_arg']} was given: drop --quantization (the engine reads it from "
            f"config.json) or give {n.get('method', 'the checkpoint')}'s own method"
        )
    if "requirement" in n:
        return f"install {n['requirement']} into the engine's environment for this checkpoint"
    if "compressed-tensors" in f.headline:
        return (
            "the installed engine has no kernel for this checkpoint's compressed-tensors scheme "
            "(the bits, strategy and layer types in quantization_config.config_groups): "
            "upgrade to an engine release whose compressed_tensors support lists it, or use a "
            "checkpoint quantized to a scheme this version runs (e.g. W8A8 or W4A16)"
        )
    return (
        "this engine has no kernel for the checkpoint's quantization here: check "
        "quantization_config in config.json against the engine's supported methods"
    )


def _architecture(f: Facts) -> str:
    arch = f.numbers.get("architecture", "the checkpoint's architecture")
    return (
        f"this engine version has no implementation of {arch}: use an engine release whose "
        f"model registry lists it (with a transformers release that knows its config), or a "
        f"checkpoint of a supported architecture"
    )


def _tokenizer(f: Facts) -> str:
    if "chat_template" in f.headline:
        return (
            "the tokenizer has no chat template (a base model?): pass --chat-template with a "
            "template file, or call /v1/completions instead of /v1/chat/completions"
        )
    return (
        "the tokenizer could not be built: check the tokenizer files in the model folder, "
        "upgrade transformers for a new model type, or pass --trust-remote-code / --tokenizer"
    )


def _weights_missing(f: Facts) -> str:
    if "Repo id" in f.headline or "not a local folder" in f.headline:
        return (
            "the model path does not exist where the engine runs (inside a container, mount "
            "it), so it was taken for a Hub repo id: model_path must be a model folder with "
            "config.json, tokenizer files and weights (list_dir it to check)"
        )
    if "header" in f.headline.lower() or "Safetensor" in f.headline:
        return (
            "a weights file is truncated or corrupt (an unfinished download, a git-lfs "
            "pointer): re-download the shard; checkpoint_summary checks every shard's header"
        )
    return (
        "model_path must be a model folder with config.json, tokenizer files and weights "
        "(list_dir it to check), or a repo id the host can download"
    )


def _weights_access(f: Facts) -> str:
    return (
        "the model's files could not be fetched from the Hub (a gated or private repo, or a "
        "wrong repo id): accept the licence and set HF_TOKEN for the server, or download the "
        "model and give its folder"
    )


def _argument(f: Facts) -> str:
    n = f.numbers
    if "env_url" in n:
        return (
            f"an environment variable that should hold a port number holds {n['env_url']}: "
            f"Kubernetes injects <SERVICE>_PORT=tcp://... for a Service named vllm or sglang; "
            f"rename the Service (e.g. vllm-api) or set the engine's port variable explicitly"
        )
    if "cannot be interpreted as an integer" in f.headline:
        return (
            "a port came from an environment variable holding a URL (Kubernetes sets "
            "<SERVICE>_PORT=tcp://... for a Service named sglang or vllm): rename the Service"
        )
    if "arguments" in n:
        return (
            f"this engine version does not accept {n['arguments']}: check the spelling (dashes, "
            f"not underscores) against the engine's --help"
        )
    if "option" in n and "value" in n:
        choices = f" (this version takes {n['choices']})" if "choices" in n else ""
        return f"{n['option']} does not take {n['value']!r}{choices}: give one it takes"
    return "an engine option has a value this engine version refuses: change the one named"


def _argument_checked(f: Facts) -> str:
    return (
        "the engine refused this configuration while checking its options (the headline says "
        "which): change or drop that option for this model"
    )


def _port_in_use(f: Facts) -> str:
    port = f.numbers.get("port")
    which = f"port {port}" if port else "the port"
    probe = f" (`ss -ltnp 'sport = :{port}'` shows it)" if port else ""
    return f"{which} is already taken: pick a free --port, or stop what holds it{probe}"


def _engine_missing(f: Facts) -> str:
    module = f.numbers.get("module", "")
    if "." in module:
        return (
            f"the installed engine has no {module}: the install is incomplete, or a plugin was "
            f"built for another engine version; install matching versions in the interpreter "
            f"that launches the server"
        )
    if module == "sgl_kernel":
        return "install sgl-kernel at the version the installed SGLang requires"
    return (
        "install the engine into the environment whose interpreter launches it, or point "
        "`python` at the engine environment's interpreter (e.g. /opt/vllm/bin/python)"
    )


def _trust_remote_code(f: Facts) -> str:
    repo = f.numbers.get("repo")
    named = f" ({repo})" if repo else ""
    return (
        f"the model{named} ships its own Python code (a config, tokenizer or model class "
        "transformers does not have): read that code, then start with --trust-remote-code; "
        "or upgrade transformers (and the engine) to a release that has this model type "
        "built in"
    )


def _kernel_arch(f: Facts) -> str:
    head = f.headline
    if "FlashAttention v3" in head:
        return (
            "SGLang's fa3 attention backend runs only on SM 8.x (non-MLA models) and SM 9.0 "
            "(Hopper): start with --attention-backend flashinfer (or triton; trtllm_mha on "
            "B200/GB200)"
        )
    if "TRTLLM" in head or "trtllm" in head:
        need = f.numbers.get("need_arch", "SM100")
        return (
            f"the TRT-LLM attention kernels are built for {need} (B200/GB200) only, not for "
            f"every GPU sold as Blackwell (RTX 50xx and RTX PRO are SM 120, GB10 is SM 121): "
            f"use --attention-backend (and --prefill-attention-backend) flashinfer or triton"
        )
    if "Assertion error" in head or "deep_gemm" in head.lower():
        return (
            "DeepGEMM has no kernels for this GPU's architecture (it is built for SM 90 and "
            "SM 100): turn it off (SGLang: SGL_ENABLE_JIT_DEEPGEMM=0; vLLM: VLLM_USE_DEEP_GEMM=0) "
            "so the Triton/CUTLASS path is used, or install a DeepGEMM/engine build that lists "
            "this architecture"
        )
    return (
        "a kernel library used here has no build for this GPU's architecture (FlashAttention-3, "
        "DeepGEMM, FlashMLA and TRT-LLM kernels are built for SM 90/100 only): choose another "
        "--attention-backend (flashinfer, triton) or turn the library off, or install an "
        "engine build for this architecture"
    )


def _unknown(f: Facts) -> str:
    return (
        "the log shows the failure but not its cause: read the candidate lines, and rerun with "
        "CUDA_LAUNCH_BLOCKING=1 (CUDA errors) or NCCL_DEBUG=INFO (multi-GPU) to locate it"
    )


FIXES: dict[str, Callable[[Facts], str]] = {
    "context": _context,
    "kv_cache": memory.kv_cache_fix,
    "gpu_oom": memory.gpu_oom_fix,
    "capture": memory.capture_fix,
    "gpu_capability": _gpu_capability,
    "driver": _driver,
    "kernel_image": _kernel_image,
    "nccl_shm": _nccl_shm,
    "nccl": _nccl,
    "tp_divisibility": _tp_divisibility,
    "speculative": _speculative,
    "quantization": _quantization,
    "architecture": _architecture,
    "tokenizer": _tokenizer,
    "weights_missing": _weights_missing,
    "weights_access": _weights_access,
    "argument": _argument,
    "argument_checked": _argument_checked,
    "host_memory": memory.host_memory_fix,
    "port_in_use": _port_in_use,
    "engine_missing": _engine_missing,
    "gpu_busy": memory.gpu_busy_fix,
    "unknown": _unknown,
    "trust_remote_code": _trust_remote_code,
    "kernel_arch": _kernel_arch,
    "illegal_memory_access": runtime.illegal_memory_access_fix,
    "nccl_timeout": runtime.nccl_timeout_fix,
    "no_progress": runtime.no_progress_fix,
    "kv_exhaustion": runtime.kv_exhaustion_fix,
}
