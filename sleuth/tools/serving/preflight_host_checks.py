"""Preflight checks on the host: the engine and its entry point, the port, the launch's
environment, the GPUs against the dtype, the quantisation and the engine's CUDA build, the
driver, /dev/shm and disk space."""

from __future__ import annotations

import re

from sleuth.tools.capacity import rules
from sleuth.tools.capacity.quant_rules import quant_rules
from sleuth.tools.capacity.source import confirm
from sleuth.tools.serving.diagnose import Diagnosis
from sleuth.tools.serving.preflight_checks import (
    PreflightCheck,
    effective_dtype,
    failed,
    passed,
    quant_method,
    shape_of,
    skipped,
)
from sleuth.tools.serving.preflight_facts import ENTRY_FILES, Facts, cite

MIB = 1 << 20
# NVIDIA's CUDA compatibility guide, minor version compatibility (Linux x86_64): the oldest
# driver each CUDA major release runs on.
MIN_DRIVER = {11: (450, 80, 2), 12: (525, 60, 13), 13: (580, 65, 6)}
# The first CUDA release with kernels for a GPU generation (CUDA 12.8: sm_100, sm_120).
MIN_CUDA_FOR_CAPABILITY = ((10.0, (12, 8)), (9.0, (11, 8)), (8.9, (11, 8)), (8.6, (11, 1)))
SGL_KERNEL_SINCE = (0, 4, 1)


def version(text: str | None) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", (text or "").split("+")[0])[:3])


def host_checks(facts: Facts) -> list[PreflightCheck]:
    if facts.args.engine == "command":
        return [_port(facts), _env(facts)]
    return [
        _engine(facts),
        _port(facts),
        _env(facts),
        _gpu_count(facts),
        _dtype_on_gpu(facts),
        _quant_on_gpu(facts),
        _driver(facts),
        _shm(facts),
        _disk(facts),
    ]


def _engine(facts: Facts) -> PreflightCheck:
    engine, probe = facts.settings.engine, facts.probe
    if probe is None:
        why = facts.errors.get("probe", "the engine's interpreter did not run")
        return failed("engine_installed", "engine_missing", why, _python_fix(facts))
    pkg = probe.packages.get(engine)
    if pkg is None or not pkg.installed:
        return failed(
            "engine_installed",
            "engine_missing",
            f"No module named {engine!r} under {probe.python}",
            _python_fix(facts),
        )
    if isinstance(facts.entry, Diagnosis):
        return failed("engine_installed", "engine_missing", facts.entry.headline, facts.entry.fix)
    if not probe.files.get(ENTRY_FILES[engine], False):
        return failed(
            "engine_installed",
            "engine_missing",
            f"{engine} {pkg.version} at {pkg.path} has no {ENTRY_FILES[engine]}: the install is "
            "incomplete",
            f"reinstall {engine} into the environment of {probe.python}",
        )
    kernel = probe.packages.get("sgl_kernel")
    if (
        engine == "sglang"
        and version(pkg.version) >= SGL_KERNEL_SINCE
        and not (kernel and kernel.installed)
    ):
        return failed(
            "engine_installed",
            "engine_missing",
            f"sglang {pkg.version} imports sgl_kernel, which {probe.python} does not have",
            "install sgl-kernel at the version this SGLang requires (on ROCm, its ROCm build)",
            cite(facts, ("srt/layers/moe/fused_moe_triton/fused_moe.py", "srt/utils.py"),
                 "sgl_kernel") or "sglang >= 0.4.1 imports sgl_kernel at start-up",
        )  # fmt: skip
    entry = f", entry point {facts.entry}" if facts.entry else ""
    return passed("engine_installed", f"{engine} {pkg.version} at {pkg.path}{entry}")


def _python_fix(facts: Facts) -> str:
    return (
        f"install {facts.settings.engine} into the environment that launches it, or give "
        "`python` as that environment's interpreter (e.g. /opt/vllm/bin/python)"
    )


def _port(facts: Facts) -> PreflightCheck:
    if facts.probe is None:
        return skipped("port_free", "the host probe did not run")
    port = facts.probe.port
    if not port.free:
        return failed(
            "port_free",
            "port_in_use",
            f"port {port.port} on the host is taken "
            f"({port.error or 'something accepts connections'})",
            f"pick a free port, or stop what holds {port.port} (`ss -ltnp 'sport = :{port.port}'`)",
            "uvicorn: '[Errno 98] error while attempting to bind on address ...: address "
            "already in use'",
        )
    return passed("port_free", f"port {port.port} is free")


def _env(facts: Facts) -> PreflightCheck:
    for name, value in facts.args.env.items():
        if name.endswith("_PORT") and not value.strip().isdigit():
            return failed(
                "environment",
                "bad_argument",
                f"{name}={value!r} is not a port number",
                f"set {name} to a number, or unset it (Kubernetes sets <SERVICE>_PORT=tcp://... "
                "for a Service named like the engine: rename the Service)",
                cite(facts, ("envs.py",), f'"{name}"') or f"the engine reads {name} with int()",
            )
    return passed("environment", "no port variable holds anything but a number")


def _gpu_count(facts: Facts) -> PreflightCheck:
    st = facts.settings
    need = st.tp * st.pp
    if not facts.gpus:
        return skipped("gpu_count", "no NVIDIA GPU reported by nvidia-smi")
    if need > len(facts.gpus):
        return failed(
            "gpu_count",
            "bad_argument",
            f"tp {st.tp} × pp {st.pp} = {need} GPUs, the host has {len(facts.gpus)}",
            f"lower the tensor/pipeline parallel size to at most {len(facts.gpus)} GPUs",
        )
    return passed("gpu_count", f"{need} of {len(facts.gpus)} GPU(s) used")


def _dtype_on_gpu(facts: Facts) -> PreflightCheck:
    if not facts.gpus:
        return skipped("dtype_on_gpu", "no NVIDIA GPU to check")
    gpu = min(facts.gpus, key=lambda g: float(g.compute_capability))
    cc, engine = float(gpu.compute_capability), facts.settings.engine
    if engine == "sglang":
        rule = cite(facts, ("srt/model_executor/model_runner.py",), "only supports sm75")
        if cc < 7.5:
            return failed(
                "dtype_on_gpu",
                "gpu_capability",
                f"{gpu.name} has compute capability {cc}; SGLang needs 7.5 or newer",
                "use a GPU of compute capability 7.5 or newer (T4, A10, L4, A100, H100, ...)",
                rule or "SGLang model_runner.py: 'SGLang only supports sm75 and above.'",
            )
        return passed("dtype_on_gpu", f"{gpu.name} (compute capability {cc})", rule)
    dtype = effective_dtype(facts)
    if dtype != "bfloat16" or cc >= 8.0:
        return passed("dtype_on_gpu", f"{dtype} on {gpu.name} (compute capability {cc})")
    explicit = facts.settings.dtype not in ("auto", "")
    files = ("config.py", "config/model.py", "worker/worker.py", "platforms/interface.py")
    falls_back = cite(facts, files, "def _resolve_auto_dtype")
    if falls_back and not explicit:
        return passed("dtype_on_gpu", "vLLM picks float16 for bfloat16 weights here", falls_back)
    refuses = cite(facts, files, "Bfloat16 is only supported on GPUs")
    return failed(
        "dtype_on_gpu",
        "gpu_capability",
        f"bfloat16 needs compute capability 8.0; {gpu.name} has {cc}",
        "run with --dtype half (float16)",
        refuses
        or "vLLM: 'Bfloat16 is only supported on GPUs with compute capability of at least 8.0'",
        confidence="high" if explicit or refuses else "low",
    )


def _quant_on_gpu(facts: Facts) -> PreflightCheck:
    method = quant_method(facts)
    engine: rules.Engine = "sglang" if facts.settings.engine == "sglang" else "vllm"
    if not facts.gpus:
        return skipped("quantization_on_gpu", "no NVIDIA GPU to check")
    cc = min(round(float(g.compute_capability) * 10) for g in facts.gpus)
    kv_min = rules.kv_dtype_min_capability(facts.settings.kv_cache_dtype)
    if cc < kv_min:
        return failed(
            "quantization_on_gpu",
            "gpu_capability",
            f"KV cache {facts.settings.kv_cache_dtype} needs compute capability "
            f"{kv_min / 10:.1f}; the GPU has {cc / 10:.1f}",
            "use --kv-cache-dtype auto on this GPU",
        )
    rule = quant_rules(engine).get(method or "")
    if rule is None:
        return skipped("quantization_on_gpu", f"{method or 'no quantisation'}: no floor known")
    pkg, root, shape = facts.engine_package, facts.engine_source, shape_of(facts)
    found = confirm(facts.host, engine, pkg.version if pkg else None, root, method, bool(
        shape and shape.mla)).min_capability if root else None  # fmt: skip
    if found is not None:
        need, cited = found.value, f"{found.evidence.source}: {found.evidence.quote}"
    else:
        need, line = rule.for_version(pkg.version if pkg else None)
        cited = f"built-in rule of {line.source}: {line.quote}"
    if cc < need:
        return failed(
            "quantization_on_gpu",
            "gpu_capability",
            f"{method} needs compute capability {need / 10:.1f}; the GPU has {cc / 10:.1f}",
            f"use a GPU of capability {need / 10:.1f} or newer, or a checkpoint in a format "
            "this GPU runs",
            cited,
        )
    return passed(
        "quantization_on_gpu", f"{method} needs {need / 10:.1f}, GPU has {cc / 10:.1f}", cited
    )


def _driver(facts: Facts) -> PreflightCheck:
    cuda = version(facts.probe.torch_cuda if facts.probe else None)
    if not cuda:
        return skipped("driver_and_cuda", "torch is not a CUDA build (or is not installed)")
    built = ".".join(map(str, cuda))
    if not facts.gpus:
        return failed(
            "driver_and_cuda",
            "driver_mismatch",
            f"torch is built for CUDA {built} but the host reports no NVIDIA GPU or driver",
            "install the engine build for this platform (ROCm, CPU), or run where the NVIDIA "
            "driver is (in a container: the NVIDIA runtime, --gpus)",
            confidence="low",
        )
    gpu = facts.gpus[0]
    floor = MIN_DRIVER.get(cuda[0])
    if floor and version(gpu.driver) < floor:
        return failed(
            "driver_and_cuda",
            "driver_mismatch",
            f"driver {gpu.driver} is older than CUDA {built} needs ({'.'.join(map(str, floor))})",
            f"upgrade the NVIDIA driver to {'.'.join(map(str, floor))} or newer, or install "
            f"torch and the engine built for the CUDA this driver supports",
            "NVIDIA CUDA compatibility (minor version compatibility): oldest driver per CUDA major",
        )
    cc = float(gpu.compute_capability)
    need = next((c for floor_cc, c in MIN_CUDA_FOR_CAPABILITY if cc >= floor_cc), None)
    if need and cuda[:2] < need:
        return failed(
            "driver_and_cuda",
            "driver_mismatch",
            f"{gpu.name} (compute capability {cc}) needs a CUDA {need[0]}.{need[1]}+ build; "
            f"torch is built for CUDA {built}",
            f"install torch and the engine built for CUDA {need[0]}.{need[1]} or newer",
            "CUDA 12.8 is the first toolkit with sm_100/sm_120 (Blackwell) kernels",
        )
    return passed("driver_and_cuda", f"driver {gpu.driver} runs CUDA {built} on {gpu.name}")


def _shm(facts: Facts) -> PreflightCheck:
    shm = facts.probe.shm if facts.probe else None
    ranks = facts.settings.tp * facts.settings.pp
    if shm is None or ranks == 1:
        return skipped("dev_shm", "one GPU process: NCCL needs no shared memory")
    if shm.free < 1024 * MIB:
        return failed(
            "dev_shm",
            "nccl",
            f"/dev/shm has {shm.free / MIB:.0f} MiB free for {ranks} GPU processes",
            "give the container a larger /dev/shm (docker --shm-size=16g or --ipc=host; "
            "Kubernetes: an emptyDir with medium Memory at /dev/shm)",
            "NCCL: 'Error while creating shared memory segment /dev/shm/nccl-*'",
            confidence="high" if shm.free < 128 * MIB else "low",
        )
    return passed("dev_shm", f"/dev/shm has {shm.free / MIB:,.0f} MiB free")


def _disk(facts: Facts) -> PreflightCheck:
    disks = facts.probe.disks if facts.probe else []
    low = [d for d in disks if not d.error and d.free < 2 * 1024 * MIB]
    if low:
        return PreflightCheck(
            name="disk_space",
            status="warn",
            detail=f"{low[0].path} has {low[0].free / MIB:.0f} MiB free (compile caches need room)",
        )
    return passed("disk_space", "enough free disk beside the model")
